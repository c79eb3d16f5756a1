"""A bank: accounts as actors, transfers under timeouts, money conserved.

* Each :class:`Account` is an actor; an overdraft is an *expected error* -- a reply
  to the asker, not a failure (no restart, the balance kept).
* Transfers go through a balancing :class:`~trio_actors.Pool` of :class:`Teller`
  workers: one slow teller never holds a transfer another could make.
* A teller withdraws, then deposits, inside a shielded scope: a client that gives up
  (its ``move_on_after`` expires) cancels a transfer that has not begun to move the
  money -- queued in the pool, or at the teller's terminal -- never one half-way.
* An :class:`Auditor`, supervised with a backoff, sums every balance each second and
  crashes now and then (a flaky report store); it is restarted, and registered by
  name so that anyone can ask it for the last audit. (An audit taken while transfers
  run may see money in flight; the one after them sees it all.)

``main`` runs 400 concurrent transfers among 20 accounts with random timeouts (some
shorter than the slow teller takes) and amounts (seeded: the same every run under
``MockClock``) and checks that the money is all there: ``python
examples/bank/bank.py``.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import trio

import trio_actors as ta

ACCOUNTS = 20
OPENING_BALANCE = 1_000
TRANSFERS = 400


class Overdraft(Exception):
    """Not enough money: the asker's problem, not the account's."""


class Account(ta.Actor):
    expected_errors = (Overdraft,)

    def __init__(self, opening: int) -> None:
        self.balance = opening

    def receive(self, message: tuple[str, int]) -> int:
        kind, amount = message
        if kind == "withdraw":
            if amount > self.balance:
                raise Overdraft(f"{self.ref.name} has {self.balance}, not {amount}")
            self.balance -= amount
        elif kind == "deposit":
            self.balance += amount
        return self.balance


@attrs.frozen
class Transfer:
    source: ta.ActorRef
    target: ta.ActorRef
    amount: int


class Teller(ta.Actor):
    """Makes transfers; teller worker-1 is on a slow terminal. An overdraft passes
    through to the client as the reply it is (not the teller's failure)."""

    expected_errors = (Overdraft,)

    async def receive(self, transfer: Transfer) -> str:
        await trio.sleep(0.5 if self.ref.name == "worker-1" else 0.01)  # cancellable
        # From here the money moves: a client giving up must not stop it half-way
        # (a withdrawal answered as the cancellation arrives has happened).
        with trio.CancelScope(shield=True):
            await transfer.source.ask(("withdraw", transfer.amount))  # may raise Overdraft
            await transfer.target.ask(("deposit", transfer.amount))
        return "done"


class Auditor(ta.Actor):
    """Sums the balances every second; its report store fails every third audit."""

    def __init__(self, accounts: list[ta.ActorRef], audits: list[int]) -> None:
        self.accounts = accounts
        self.audits = audits

    def on_start(self) -> None:
        self.system.register("auditor", self.ref)
        self.tell_every(1.0, "audit")

    async def receive(self, message: str) -> Any:
        if message == "last":
            return self.audits[-1] if self.audits else None
        total = 0
        for account in self.accounts:
            total += await account.ask(("deposit", 0))
        self.audits.append(total)
        if len(self.audits) % 3 == 0:
            raise ConnectionError("the report store went away")  # restarted
        return total


class Bank(ta.Actor):
    def __init__(self, audits: list[int]) -> None:
        self.audits = audits

    def on_start(self) -> None:
        self.accounts = [
            self.spawn(Account, OPENING_BALANCE, name=f"account-{n}") for n in range(ACCOUNTS)
        ]
        self.tellers = self.spawn(ta.Pool(Teller, size=4, routing="balancing"), name="tellers")
        backoff = ta.Backoff(min_delay=0.2, jitter=0.5)
        self.spawn(
            Auditor,
            self.accounts,
            self.audits,
            name="auditor",
            supervision=ta.Restart(max_restarts=100, within=60.0, backoff=backoff),
        )

    def receive(self, message: str) -> Any:
        return self.accounts, self.tellers


@attrs.frozen
class Report:
    total_before: int
    total_after: int
    done: int
    overdrafts: int
    timed_out: int
    audits: list[int]
    auditor_restarts: int
    last_audit: int | None


async def main(seed: int = 7) -> Report:
    rng = random.Random(seed)
    audits: list[int] = []
    outcomes = {"done": 0, "overdraft": 0, "timed out": 0}
    async with ta.open_actor_system(seed=seed) as system:
        bank = system.spawn(Bank, audits, name="bank")
        accounts, tellers = await bank.ask("refs")

        async def client(transfer: Transfer, patience: float) -> None:
            with trio.move_on_after(patience):
                try:
                    await tellers.ask(transfer)
                    outcomes["done"] += 1
                except Overdraft:
                    outcomes["overdraft"] += 1
                return
            outcomes["timed out"] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(TRANSFERS):
                source, target = rng.sample(accounts, 2)
                amount = rng.randrange(1, 600)
                patience = rng.uniform(0.005, 0.6)
                nursery.start_soon(client, Transfer(source, target, amount), patience)
                await trio.sleep(rng.uniform(0, 0.01))
        await trio.sleep(2.5)  # a few more audits
        balances = [await account.ask(("deposit", 0)) for account in accounts]
        auditor = await system.lookup("auditor")
        return Report(
            total_before=ACCOUNTS * OPENING_BALANCE,
            total_after=sum(balances),
            done=outcomes["done"],
            overdrafts=outcomes["overdraft"],
            timed_out=outcomes["timed out"],
            audits=list(audits),
            auditor_restarts=auditor.statistics().restarts,
            last_audit=await auditor.ask("last"),
        )


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.CRITICAL)
    report = trio.run(main)
    print(report)
    assert report.total_after == report.total_before, "money was lost"

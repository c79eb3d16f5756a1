"""The how-to guides' code (docs/howto.rst), each recipe a function the tests run."""

from __future__ import annotations

import signal
from typing import Any

import trio
import trio.lowlevel
import trio.testing

import trio_actors as ta

# --- Backpressure: a producer that must not outrun its consumer --------------------


class Resizer(ta.Actor):
    """A consumer that takes a while per item."""

    def __init__(self, done: list[int]) -> None:
        self.done = done

    async def receive(self, image: int) -> None:
        await trio.sleep(0.01)  # the real work
        self.done.append(image)


async def backpressure() -> tuple[int, int]:
    """A producer ``send``\\ s 1,000 images to a consumer whose mailbox holds 10: it
    is slowed to the consumer's pace, and nothing is dropped or piles up."""
    done: list[int] = []
    async with ta.open_actor_system() as system:
        resizer = system.spawn(Resizer, done, mailbox=ta.Bounded(10))
        deepest = 0
        for image in range(1000):
            await resizer.send(image)  # waits while 10 are queued
            deepest = max(deepest, resizer.statistics().mailbox_depth)
        await resizer.stop(drain=True)
    return len(done), deepest


class Display(ta.Actor):
    """Shows the latest reading; older ones are worthless once a newer one exists."""

    def __init__(self, shown: list[float]) -> None:
        self.shown = shown

    async def receive(self, reading: float) -> None:
        await trio.sleep(0.05)  # slow to draw
        self.shown.append(reading)


async def latest_values_only() -> tuple[list[float], int]:
    """A sensor ``tell``\\ s readings faster than the display draws: with
    ``drop_old`` the display falls behind by at most one reading."""
    shown: list[float] = []
    async with ta.open_actor_system() as system:
        display = system.spawn(Display, shown, mailbox=ta.Bounded(1, overflow="drop_old"))
        for n in range(100):
            display.tell(float(n))  # never blocks, never raises
            await trio.sleep(0.01)
        await display.stop(drain=True)
        dropped = system.statistics().dead_letters.overflow
    return shown, dropped


# --- Supervision patterns ------------------------------------------------------------


class Worker(ta.Actor):
    def receive(self, job: int) -> int:
        if job < 0:
            raise ValueError(f"bad job {job}")
        return job * 2


class Pool(ta.Actor):
    """Let it crash: workers restart on failure, with a growing delay if they keep
    failing; the pool watches them and replaces any that stops for good."""

    def on_start(self) -> None:
        self.next = 0
        backoff = ta.Backoff(min_delay=0.1, max_delay=5.0, factor=2.0, jitter=0.1)
        self.workers = [
            self.spawn(Worker, supervision=ta.Restart(max_restarts=5, within=30.0, backoff=backoff))
            for _ in range(3)
        ]
        for worker in self.workers:
            self.watch(worker)

    async def receive(self, message: Any) -> Any:
        if isinstance(message, ta.Terminated):  # a worker stopped for good
            # (A restart of the pool itself stops its workers; their Terminated
            # reach the fresh pool, which has workers of its own: ignore those.)
            if message.ref in self.workers:
                index = self.workers.index(message.ref)
                self.workers[index] = self.spawn(Worker)
                self.watch(self.workers[index])
            return None
        worker = self.workers[self.next % len(self.workers)]
        self.next += 1
        try:
            return await worker.ask(message)
        except ValueError as error:
            # Re-raising would fail the pool too (a handler that raises is a
            # failure of its actor); the worker's failure is the worker's.
            return f"failed: {error}"


async def supervision_patterns() -> list[Any]:
    results: list[Any] = []
    async with ta.open_actor_system() as system:
        pool = system.spawn(Pool, name="pool")
        for job in (1, -1, 2, 3):
            results.append(await pool.ask(job))  # the bad job's failure is reported...
        results.append(await pool.ask(4))  # ...and the pool and its workers go on
        results.append(system.statistics().restarts)
    return results


# --- Shutting down cleanly ---------------------------------------------------------------


class Journal(ta.Actor):
    """Buffers entries and writes them out in on_stop (a file, a database...)."""

    def __init__(self, written: list[str]) -> None:
        self.written = written
        self.buffer: list[str] = []

    def receive(self, entry: str) -> None:
        self.buffer.append(entry)

    async def on_stop(self) -> None:
        await trio.sleep(0.01)  # the final flush
        self.written.extend(self.buffer)


async def shut_down_cleanly(stop_after: float, *, on_signal: bool = False) -> list[str]:
    """Run until asked to stop -- by SIGINT/SIGTERM (``on_signal``) or after
    ``stop_after`` seconds -- then drain the journal and flush it, within a deadline."""
    written: list[str] = []
    stop = trio.Event()
    async with ta.open_actor_system() as system:
        journal = system.spawn(Journal, written)

        async def produce() -> None:
            for n in range(1_000_000):
                journal.tell(f"entry {n}")
                await trio.sleep(0.1)

        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    stop.set()
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            if on_signal:
                nursery.start_soon(stop_on_signal)
            with trio.move_on_after(stop_after):
                await stop.wait()
            nursery.cancel_scope.cancel()  # the producers stop first: nothing new arrives
        with trio.move_on_after(5.0):  # then the journal drains, within a deadline
            await journal.stop(drain=True)
        # Leaving the system block stops anything still alive (here: nothing).
    return written


# --- Timers: a heartbeat and an idle timeout ------------------------------------------


class Session(ta.Actor):
    """Pings its peer every 15 s; ends itself after 300 s without activity."""

    def __init__(self, peer: ta.ActorRef) -> None:
        self.peer = peer

    def on_start(self) -> None:
        self.tell_every(15.0, "heartbeat")  # every 15 s, the first at 15 s
        self.tell_after(300.0, "expire", key="idle")  # a keyed one-shot timer

    def receive(self, message: Any) -> Any:
        match message:
            case "heartbeat":
                self.peer.tell("ping")
            case "expire":
                self.stop()  # its timers end with it
            case _:
                # Any activity re-arms the idle timer: the same key replaces it.
                self.tell_after(300.0, "expire", key="idle")
        return None


class Peer(ta.Actor):
    def __init__(self) -> None:
        self.pings = 0

    def receive(self, message: Any) -> Any:
        if message == "pings":
            return self.pings
        self.pings += 1
        return None


async def heartbeat_and_idle_timeout() -> tuple[int, float]:
    """A session kept alive by activity for 200 s, then idle: it ends at 500 s, having
    pinged its peer every 15 s."""
    async with ta.open_actor_system() as system:
        peer = system.spawn(Peer)
        session = system.spawn(Session, peer)
        start = trio.current_time()
        for _ in range(4):
            await trio.sleep(50)
            session.tell("activity")
        await trio.sleep(301)
        ended = session.statistics().state
        assert ended == "stopped", ended
        return await peer.ask("pings"), trio.current_time() - start


# --- Statistics: notice an actor falling behind ----------------------------------------


def lagging(system: ta.ActorSystem, refs: list[ta.ActorRef]) -> list[str]:
    """Who is falling behind: a deep mailbox or a long turn."""
    report = []
    for ref in refs:
        stats = ref.statistics()
        if stats.mailbox_depth > 1000 or stats.longest_turn_seconds > 0.05:
            report.append(f"{stats.path}: {stats.mailbox_depth} queued, {stats.handled} handled")
    overall = system.statistics()
    if overall.longest_round_seconds > 0.05:
        report.append(f"the dispatcher once held the thread {overall.longest_round_seconds:.2f}s")
    return report


class Hog(ta.Actor):
    def __init__(self, clock: Any) -> None:
        self.clock = clock

    def receive(self, message: Any) -> None:
        if message == "block":
            self.clock.jump(0.2)  # as a time.sleep(0.2) would, in virtual time


async def statistics_report(clock: Any) -> list[str]:
    async with ta.open_actor_system() as system:
        hog = system.spawn(Hog, clock, name="hog")
        busy = system.spawn(Resizer, [], name="busy")
        for n in range(2000):
            busy.tell(n)
        hog.tell("block")
        await trio.sleep(0.005)
        return lagging(system, [hog, busy])


# --- Business errors: reply with an exception, keep the actor ---------------------------


class Overdraft(Exception):
    """Not a failure: a reply the asker handles."""


class Account(ta.Actor):
    expected_errors = (Overdraft,)  # these reach the asker; nothing else happens

    def __init__(self, balance: int) -> None:
        self.balance = balance

    def receive(self, amount: int) -> int:
        if self.balance + amount < 0:
            raise Overdraft(f"balance {self.balance}, asked {-amount}")
        self.balance += amount
        return self.balance


async def business_errors() -> tuple[list[Any], int, int]:
    """Two withdrawals too big: each asker gets Overdraft, the account keeps its
    balance and is neither restarted nor counted as failing."""
    replies: list[Any] = []
    async with ta.open_actor_system() as system:
        account = system.spawn(Account, 100)
        for amount in (-30, -500, -60, -20):
            try:
                replies.append(await account.ask(amount))
            except Overdraft as error:
                replies.append(f"refused: {error}")
        stats = account.statistics()
        return replies, stats.failures, stats.restarts


# --- A registry: find an actor by name ------------------------------------------------


class Ledger(ta.Actor):
    def on_start(self) -> None:
        self.system.register("ledger", self.ref)  # again after a restart: harmless
        self.entries: list[str] = []

    def receive(self, entry: str) -> int:
        self.entries.append(entry)
        return len(self.entries)


async def find_by_name() -> tuple[int, str]:
    """Whoever needs the ledger looks it up by name; once it stops, the name is free."""
    async with ta.open_actor_system() as system:
        system.spawn(Ledger)
        await trio.testing.wait_all_tasks_blocked()  # its on_start has run
        ledger = await system.lookup("ledger")
        count = await ledger.ask("opened")
        await ledger.stop()
        try:
            await system.lookup("ledger")
        except ta.ActorNotFound as error:
            return count, str(error)
    raise AssertionError("unreachable")


# --- Spread work over a pool ----------------------------------------------------------


class Fetcher(ta.Actor):
    """Fetches a page; one of them is on a slow link."""

    async def receive(self, url: str) -> str:
        await trio.sleep(5.0 if self.ref.name == "worker-1" else 0.1)
        return f"{url} via {self.ref.name}"


async def spread_work(routing: ta.Routing) -> float:
    """40 fetches over 4 fetchers, one of them 50x slower: how long they take."""
    async with ta.open_actor_system() as system:
        pool = system.spawn(ta.Pool(Fetcher, size=4, routing=routing))
        began = trio.current_time()
        async with trio.open_nursery() as nursery:
            for page in range(40):
                nursery.start_soon(pool.ask, f"/page/{page}")
        return trio.current_time() - began


# --- Restart a pipeline together --------------------------------------------------------


class Stage(ta.Actor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_start(self) -> None:
        self.log.append(f"start {self.ref.name}")

    def receive(self, message: str) -> None:
        if message == "corrupt":
            raise RuntimeError(f"{self.ref.name} lost its connection")


class Pipeline(ta.Actor):
    """Each stage depends on the ones before it: a failure restarts it and the
    stages after it, never the ones before (OTP's rest_for_one)."""

    children_strategy = ta.RestForOne(max_restarts=3, within=60.0)

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_start(self) -> None:
        for name in ("read", "parse", "write"):
            self.spawn(Stage, self.log, name=name)

    def receive(self, message: tuple[str, str]) -> None:
        stage, what = message
        child = self.child(stage)
        if child is not None:
            child.tell(what)


async def restart_together() -> list[str]:
    log: list[str] = []
    async with ta.open_actor_system() as system:
        pipeline = system.spawn(Pipeline, log)
        await trio.testing.wait_all_tasks_blocked()
        log.append("-- parse fails")
        pipeline.tell(("parse", "corrupt"))
        await trio.testing.wait_all_tasks_blocked()
    return log


# --- Watch dead letters as they happen ---------------------------------------------------


async def watch_dead_letters() -> list[str]:
    """A task outside the system block reports every dead letter, the exit's own
    included, and ends by itself when the system closes."""
    reported: list[str] = []

    async def report(letters: ta.DeadLetterSubscription) -> None:
        async for letter in letters:
            reported.append(f"{letter.recipient.name}: {letter.message!r} ({letter.reason})")

    async with trio.open_nursery() as nursery, ta.open_actor_system() as system:
        nursery.start_soon(report, system.dead_letters.subscribe(capacity=100))
        gone = system.spawn(Journal, [], name="journal")
        await gone.stop()
        gone.tell("too late")
        busy = system.spawn(Resizer, [], name="resizer")
        busy.tell(1)  # both still queued at the exit: stranded
        busy.tell(2)
    return reported


# --- Bound how long a stop may take ----------------------------------------------------------


class Uploader(ta.Actor):
    """Flushes to a remote store in on_stop -- which may hang."""

    async def receive(self, message: Any) -> None:
        pass

    async def on_stop(self) -> None:
        await trio.sleep_forever()  # the store never answers


async def bounded_stop() -> float:
    """``shutdown=2.0``: the hanging on_stop is cancelled after 2 s (logged as a
    ShutdownTimeout), and the stop returns."""
    async with ta.open_actor_system() as system:
        uploader = system.spawn(Uploader, shutdown=2.0)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await uploader.stop()
        return trio.current_time() - began

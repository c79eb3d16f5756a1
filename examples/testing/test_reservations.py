"""Testing your own actors with ``trio_actors.testing``: an example test file.

The actor under test keeps stock and holds reservations for a while; an unconfirmed
reservation expires (a timer) and the holder is told. The tests run in virtual
time (pytest-trio's ``autojump_clock``), so the 30-second expiry costs nothing and
every run is the same. Run with ``python -m pytest examples/testing``.
"""

from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.testing import Probe, assert_dead_letters, assert_statistics

HOLD = 30.0  # seconds a reservation is held before it expires


class Stock(ta.Actor):
    """Stock of one item. Messages: ``("reserve", n, reply_to)``, ``("confirm", id)``,
    ``"available"`` (an ask). Tells ``reply_to`` ``("reserved", id)``,
    ``("refused", n)`` and ``("expired", id)``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.held: dict[int, tuple[int, ta.ActorRef]] = {}
        self.next_id = 0

    def receive(self, message: Any) -> Any:
        match message:
            case ("reserve", n, reply_to) if n <= self.count:
                self.next_id += 1
                self.count -= n
                self.held[self.next_id] = (n, reply_to)
                self.tell_after(HOLD, ("expire", self.next_id), key=self.next_id)
                reply_to.tell(("reserved", self.next_id))
            case ("reserve", n, reply_to):
                reply_to.tell(("refused", n))
            case ("confirm", ident):
                self.held.pop(ident, None)
            case ("expire", ident) if ident in self.held:
                n, reply_to = self.held.pop(ident)
                self.count += n
                reply_to.tell(("expired", ident))
            case "available":
                return self.count
        return None


async def test_a_reservation_is_confirmed_or_expires(
    actor_system: ta.ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    stock = actor_system.spawn(Stock, 10)
    buyer = Probe(actor_system, name="buyer")

    stock.tell(("reserve", 3, buyer.ref))
    stock.tell(("reserve", 4, buyer.ref))
    first = await buyer.expect(("reserved", 1))
    await buyer.expect(("reserved", 2))
    stock.tell(("confirm", first[1]))
    assert await stock.ask("available") == 3

    # Nothing happens before the hold ends...
    await buyer.expect_no_message(within=HOLD - 1)
    # ...then the unconfirmed one expires and its stock comes back.
    assert await buyer.receive(within=2) == ("expired", 2)
    assert await stock.ask("available") == 7


async def test_an_oversized_reservation_is_refused(actor_system: ta.ActorSystem) -> None:
    stock = actor_system.spawn(Stock, 2)
    buyer = Probe(actor_system)
    stock.tell(("reserve", 5, buyer.ref))
    assert await buyer.wait_for(lambda m: m[0] == "refused") == ("refused", 5)
    assert_statistics(stock, handled=1, mailbox_depth=0, failures=0)


async def test_replies_to_a_buyer_that_left_are_dead_letters(
    actor_system: ta.ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    stock = actor_system.spawn(Stock, 10)
    buyer = Probe(actor_system)
    stock.tell(("reserve", 1, buyer.ref))
    await buyer.expect(("reserved", 1))
    await buyer.ref.stop()  # the buyer goes away without confirming
    await trio.sleep(HOLD + 1)
    assert_dead_letters(actor_system, [("expired", 1)], recipient=buyer.ref, reason="stopped")


async def test_a_probe_reports_what_it_got_instead(actor_system: ta.ActorSystem) -> None:
    buyer = Probe(actor_system, name="buyer")
    buyer.ref.tell("surprise")
    with pytest.raises(AssertionError, match="buyer expected 'hello', received 'surprise'"):
        await buyer.expect("hello")

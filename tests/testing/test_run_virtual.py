"""``trio_actors.testing.run_virtual``: virtual time for tests of user actors."""

import doctest
import logging

import trio

import trio_actors as ta
import trio_actors.testing
from trio_actors.testing import run_virtual


def test_the_module_example_runs() -> None:
    failures, tried = doctest.testmod(trio_actors.testing)
    assert tried > 0
    assert failures == 0


def test_a_backoff_of_an_hour_costs_no_real_time() -> None:
    class Flaky(ta.Actor):
        def receive(self, message: object) -> object:
            if message == "boom":
                raise RuntimeError("boom")
            return message

    async def main() -> float:
        backoff = ta.Backoff(min_delay=3600, max_delay=3600, jitter=0)
        async with ta.open_actor_system() as system:
            ref = system.spawn(Flaky, supervision=ta.Restart(backoff=backoff))
            ref.tell("boom")
            start = trio.current_time()
            await ref.ask("after")
            return trio.current_time() - start

    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    assert run_virtual(main) == 3600

"""Who serves an actor: the second state machine of ``_core/_state.py``, and
debug mode's checks of the serving invariants (``_core/_debug.py``, on for the
whole suite): every change of ``ActorCell.serving`` -- through ``hand_over`` or the
inlined copies on the activation path -- is a pair of :data:`SERVING_TRANSITIONS`;
an actor nobody serves has nothing queued; the two flags the tell fast paths read
are what ``refresh_tell_paths`` computes; queued asks are where their noted
positions say. Drawn programs (T21's) keep them all, and the checks are shown to
catch a runtime broken in each way.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings

import trio_actors as ta
from strategies import policies, programs
from trio_actors._core import _cell, _debug, _dispatcher, _handler_call, _task_serving
from trio_actors._core._state import SERVING_TRANSITIONS, ActorState, Serving, hand_over
from trio_actors._errors import LifecycleError
from trio_actors.contracts._nothing_lost import Program, random_program, run_program


@pytest.fixture
def checker() -> Iterator[list[str]]:
    """The violations debug mode finds in the test (collected, not raised). Debug mode
    replaces kernel methods: on the compiled build its tests skip (tests/conftest.py)."""
    if ta.compiled:
        pytest.skip("debug mode's checks replace methods of the compiled kernel: pure build")
    with _debug.collecting_violations() as found:
        yield found


def test_hand_over_refuses_a_pair_outside_the_table() -> None:
    class Subject:
        state = ActorState.RUNNING
        accepting = True
        inline_ready = False
        serving = Serving.DISPATCHER

        def describe(self) -> str:
            return "actor system/x"

        def refresh_tell_paths(self) -> None:
            raise AssertionError("not reached")

    subject = Subject()
    with pytest.raises(LifecycleError, match=r"system/x: from DISPATCHER to DISPATCHER \(in st"):
        hand_over(subject, Serving.DISPATCHER)
    assert subject.serving is Serving.DISPATCHER


def test_every_server_can_be_reached_and_left() -> None:
    sources = {source for source, _ in SERVING_TRANSITIONS}
    targets = {target for _, target in SERVING_TRANSITIONS}
    assert sources == targets == set(Serving)


@pytest.mark.replaces_the_kernel  # (debug mode's checks do)
def test_debug_mode_is_on_in_the_suite() -> None:
    assert _debug.enabled()


@pytest.mark.replaces_the_kernel  # (debug mode's checks do)
@settings(max_examples=300)
@given(programs(), policies)
def test_drawn_programs_keep_the_serving_invariants(
    program: Program, policy: ta.ServingPolicy
) -> None:
    with _debug.collecting_violations() as found:
        run_program(program, policy)
    assert found == []


# Reached only by actors with an async on_start (and a plain receive), a parent whose
# child escalates, and a stop during a restart's backoff: not (or not always) in
# T21's programs, but in the test after. (RESTART -> RESTART takes a
# KeyboardInterrupt in a restart: test_interrupts.py. TASK -> TASK, a serving task
# whose handler was cut short while work is left, is reached by the programs since
# they draw group strategies; RESTART -> IDLE, a restart stopped meanwhile, by some
# of their scheduling orders only -- trio shuffles, and sets iterate by address.)
_SPECIAL = {
    (Serving.TASK, Serving.DISPATCHER),
    (Serving.RESTART, Serving.TASK),
    (Serving.IDLE, Serving.RESTART),
    (Serving.RESTART, Serving.IDLE),
}


def test_seeded_programs_use_every_other_transition(
    checker: list[str],
) -> None:
    _debug.seen_transitions.clear()
    rng = random.Random(14)
    for _ in range(150):
        run_program(random_program(rng), ta.ServingPolicy(batch=2, time_slice=None))
    assert checker == []
    missing = set(SERVING_TRANSITIONS) - _SPECIAL - _debug.seen_transitions
    assert missing == {(Serving.RESTART, Serving.RESTART)}


class AsyncStart(ta.Actor):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    async def on_start(self) -> None:
        await trio.lowlevel.checkpoint()

    def receive(self, message: Any) -> None:
        self.log.append(message)


class FailsFirst(ta.Actor):
    instances = 0

    async def on_start(self) -> None:
        await trio.lowlevel.checkpoint()

    def __init__(self) -> None:
        type(self).instances += 1
        self.instance = type(self).instances

    async def receive(self, message: Any) -> Any:
        if message == "fail":
            raise ValueError("on purpose")
        return self.instance


class Escalates(ta.Actor):
    def receive(self, message: Any) -> None:
        raise ValueError("escalated on purpose")


class Parent(ta.Actor):
    def receive(self, message: Any) -> None:
        self.spawn(Escalates, supervision=ta.Escalate()).tell("fail")


async def test_async_starts_restarts_and_threads_keep_the_invariants(
    checker: list[str], autojump_clock: trio.testing.MockClock
) -> None:
    _debug.seen_transitions.clear()
    log: list[Any] = []
    async with ta.open_actor_system() as system:
        plain_after_start = system.spawn(AsyncStart, log)
        for number in range(5):
            plain_after_start.tell(number)
        restarting = system.spawn(FailsFirst)
        restarting.tell("fail")
        assert await restarting.ask("which") == 2
        threads = [threading.Thread(target=plain_after_start.tell, args=(n,)) for n in range(5, 8)]
        for thread in threads:
            thread.start()
        while len(log) < 8:  # the threads' tells are on their way
            await trio.lowlevel.checkpoint()
        for thread in threads:
            thread.join()
        await plain_after_start.stop(drain=True)
        parent = system.spawn(Parent, supervision=ta.Restart())
        parent.tell("spawn a child that escalates")
        await trio.sleep(1)
        assert parent.statistics().restarts == 1
        backoff = ta.Restart(backoff=ta.Backoff(min_delay=5.0, jitter=0.0))
        stopped_in_backoff = system.spawn(FailsFirst, supervision=backoff)
        stopped_in_backoff.tell("fail")
        await trio.sleep(1)  # its restart task waits out the backoff
        await stopped_in_backoff.stop()  # RESTART -> IDLE
    assert sorted(log) == list(range(8))
    assert checker == []
    assert _debug.seen_transitions >= _SPECIAL


# --- the checker catches a broken runtime --------------------------------------------


class Plain(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Slow(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.sleep(1)
        return message


async def test_the_checks_catch_stale_tell_paths(
    checker: list[str], monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setattr(_cell.ActorCell, "close_tell_paths", lambda self: None)
    async with ta.open_actor_system() as system:
        ref = system.spawn(Slow)
        ref.tell(1)
        ref.tell(2)  # a deque: the append fast path is open
        ref.tell(3)
        await trio.sleep(0.5)
        ref.stop_nowait()  # ...and (broken) stays open while it stops
        ref.tell(4)
        await ref.wait_stopped()
    assert checker == [
        "system/Slow-1 in STOPPING, TASK: tell paths (fast_tell, activates) were "
        "(True, False), should be (False, False)"
    ]


async def test_the_checks_catch_an_actor_left_idle_with_work(
    checker: list[str], monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    start = _dispatcher.Dispatcher.start_serving_task

    def drop_the_serve_on(self: Any, cell: Any) -> None:
        if cell.serving is Serving.TASK:  # a task ends with work left: broken, drop it
            cell.set_idle()
            return
        start(self, cell)

    async def one_per_task(policy: Any, cell: Any) -> None:
        await _handler_call.handle_async(cell, cell.pop_next())

    monkeypatch.setattr(_dispatcher.Dispatcher, "start_serving_task", drop_the_serve_on)
    monkeypatch.setattr(_task_serving, "serve_async_turns", one_per_task)
    with trio.move_on_after(10):
        async with ta.open_actor_system() as system:
            ref = system.spawn(Slow)
            ref.tell(1)
            ref.tell(2)
            await trio.sleep(5)
    assert "system/Slow-1 in RUNNING: IDLE with messages queued" in checker


@pytest.mark.replaces_the_kernel
async def test_the_checks_catch_a_wrong_ask_position(
    checker: list[str], monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    queue_envelope = _cell.ActorCell.queue_envelope

    def one_too_far(cell: Any, envelope: Any) -> None:
        queue_envelope(cell, envelope)
        if cell.ask_at:
            cell.ask_at[-1] += 1  # broken: the ask is noted one place behind itself

    monkeypatch.setattr(_cell.ActorCell, "queue_envelope", one_too_far)
    # (What the broken runtime does next does not matter: the check found it first.)
    with contextlib.suppress(Exception, BaseExceptionGroup), trio.move_on_after(5):
        async with ta.open_actor_system(serving=ta.ServingPolicy(batch=1, time_slice=None)) as s:
            ref = s.spawn(Plain)
            for number in range(3):
                ref.tell(number)
            await ref.ask("where am I")
    assert checker[0] == "system/Plain-1 in RUNNING: ask positions noted [3], queued at [2]"

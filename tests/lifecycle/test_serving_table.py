"""Who serves an actor: the second state machine of ``lifecycle/_state.py``.

Every change of ``ActorCell.serving`` -- through :func:`hand_over` or the two
inlined copies on the activation path -- must be a pair of
:data:`SERVING_TRANSITIONS`; an actor nobody serves has nothing queued; and the two
flags the tell fast paths read are always what :meth:`ActorCell.refresh_tell_paths`
would compute. :class:`ServingChecker` watches all three while drawn programs run
(T21's), and is shown to catch a runtime broken in each way.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings

import trio_actors as ta
from strategies import policies, programs
from trio_actors._errors import LifecycleError
from trio_actors.actors import _cell, _ref
from trio_actors.contracts._nothing_lost import Program, random_program, run_program
from trio_actors.lifecycle._state import SERVING_TRANSITIONS, ActorState, Serving, hand_over
from trio_actors.mailbox import _dispatcher, _handler_call, _task_serving


class ServingChecker:
    """Records every violation of the serving invariants while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.violations: list[str] = []
        self.seen: set[tuple[Serving, Serving]] = set()
        slot = _cell.ActorCell.__dict__["serving"]  # the slot's member descriptor
        checker = self

        def get(cell: Any) -> Serving:
            return slot.__get__(cell, type(cell))  # type: ignore[no-any-return]

        def set_(cell: Any, to: Serving) -> None:
            try:
                before = slot.__get__(cell, type(cell))
            except AttributeError:
                before = None  # the cell's first write (in __init__)
            slot.__set__(cell, to)
            if before is None or (before is to and to is not Serving.TASK):
                return
            checker.seen.add((before, to))
            if (before, to) not in SERVING_TRANSITIONS:
                checker.violations.append(f"{cell.path}: {before.name} -> {to.name}")
            if to is Serving.IDLE and cell.has_queued():
                checker.violations.append(f"{cell.path}: IDLE with messages queued")

        monkeypatch.setattr(_cell.ActorCell, "serving", property(get, set_))
        tell = _ref.ActorRef.tell

        def checked_tell(ref: Any, message: Any) -> None:
            cell = ref._cell
            if threading.get_ident() == cell.dispatcher.thread_id and not cell.foreign_pending:
                fast_tell, activates = cell.fast_tell, cell.activates
                cell.refresh_tell_paths()
                if (cell.fast_tell, cell.activates) != (fast_tell, activates):
                    checker.violations.append(
                        f"{cell.path} in {cell.state.name}, {cell.serving.name}: tell paths "
                        f"were {(fast_tell, activates)}, should be "
                        f"{(cell.fast_tell, cell.activates)}"
                    )
            tell(ref, message)

        monkeypatch.setattr(_ref.ActorRef, "tell", checked_tell)


@pytest.fixture
def checker(monkeypatch: pytest.MonkeyPatch) -> ServingChecker:
    return ServingChecker(monkeypatch)


def test_hand_over_refuses_a_pair_outside_the_table() -> None:
    class Subject:
        state = ActorState.RUNNING
        accepting = True
        inline_ready = False
        serving = Serving.RESTART

        def describe(self) -> str:
            return "actor system/x"

        def refresh_tell_paths(self) -> None:
            raise AssertionError("not reached")

    subject = Subject()
    with pytest.raises(LifecycleError, match=r"system/x: from RESTART to RESTART \(in state"):
        hand_over(subject, Serving.RESTART)
    assert subject.serving is Serving.RESTART


def test_every_server_can_be_reached_and_left() -> None:
    sources = {source for source, _ in SERVING_TRANSITIONS}
    targets = {target for _, target in SERVING_TRANSITIONS}
    assert sources == targets == set(Serving)


@settings(max_examples=300)
@given(programs(), policies)
def test_drawn_programs_keep_the_serving_invariants(
    program: Program, policy: ta.ServingPolicy
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        checker = ServingChecker(patch)
        run_program(program, policy)
    assert checker.violations == []


# Reached only by actors with an async on_start (and a plain receive), and a parent
# whose child escalates: not in T21's programs, but in the test after. (TASK -> TASK
# takes a KeyboardInterrupt in an async handler: test_interrupts.py.)
_SPECIAL = {
    (Serving.TASK, Serving.DISPATCHER),
    (Serving.RESTART, Serving.TASK),
    (Serving.IDLE, Serving.RESTART),
}


def test_seeded_programs_use_every_other_transition(checker: ServingChecker) -> None:
    rng = random.Random(14)
    for _ in range(150):
        run_program(random_program(rng), ta.ServingPolicy(batch=2, time_slice=None))
    assert checker.violations == []
    assert set(SERVING_TRANSITIONS) - _SPECIAL - checker.seen == {(Serving.TASK, Serving.TASK)}


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
    checker: ServingChecker, autojump_clock: trio.testing.MockClock
) -> None:
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
    assert sorted(log) == list(range(8))
    assert checker.violations == []
    assert checker.seen >= _SPECIAL


# --- the checker catches a broken runtime --------------------------------------------


class Plain(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Slow(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.sleep(1)
        return message


async def test_the_checker_catches_stale_tell_paths(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    checker = ServingChecker(monkeypatch)
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
    assert checker.violations == [
        "system/Slow-1 in STOPPING, TASK: tell paths were (True, False), should be (False, False)"
    ]


async def test_the_checker_catches_an_actor_left_idle_with_work(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    checker = ServingChecker(monkeypatch)
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
    assert "system/Slow-1: IDLE with messages queued" in checker.violations

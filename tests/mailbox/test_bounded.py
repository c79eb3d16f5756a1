"""Bounded mailboxes: capacity, the three overflow policies, and ``send``'s backpressure."""

import functools
import threading
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo

Clock = trio.testing.MockClock


class Recorder(ta.Actor):
    """Records what it handles; ``"get"`` returns the record."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "get":
            return list(self.got)
        self.got.append(message)
        return None


class SlowRecorder(Recorder):
    """An async recorder that takes a virtual second per message."""

    async def receive(self, message: Any) -> Any:
        if message == "get":
            return list(self.got)
        await trio.sleep(1)
        self.got.append(message)
        return None


class Gate(ta.Actor):
    """Handles nothing until its gate opens: keeps its mailbox full for a test."""

    def __init__(self, gate: trio.Event, got: list[Any]) -> None:
        self.gate = gate
        self.got = got

    async def receive(self, message: Any) -> Any:
        await self.gate.wait()
        self.got.append(message)
        return message


class Watcher(ta.Actor):
    """Watches the refs it is told; holds its mailbox at "hold" until the gate opens;
    records everything else."""

    def __init__(self, gate: trio.Event, got: list[Any]) -> None:
        self.gate = gate
        self.got = got

    async def receive(self, message: Any) -> Any:
        if isinstance(message, ta.ActorRef):
            self.watch(message)
        elif message == "hold":
            await self.gate.wait()
        else:
            self.got.append(message)
        return message


def overflow_letters(system: ta.ActorSystem) -> list[Any]:
    return [d.message for d in system.dead_letters.recent if d.reason == "overflow"]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"capacity": 0}, ValueError, "capacity must be >= 1, got 0"),
        ({"capacity": 2.5}, TypeError, "capacity must be an int"),
        ({"capacity": True}, TypeError, "capacity must be an int"),
        ({"capacity": 3, "overflow": "drop"}, ValueError, "overflow must be one of"),
    ],
)
def test_bad_bounds_are_refused_naming_the_field(kwargs: Any, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        ta.Bounded(**kwargs)


async def test_spawn_refuses_a_mailbox_that_is_not_a_bound(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match=r"mailbox must be None .* got 10"):
            system.spawn(Recorder, mailbox=10)  # type: ignore[arg-type]


async def test_fail_raises_naming_the_actor_and_capacity_and_queues_nothing(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder, name="worker", mailbox=ta.Bounded(2))
        ref.tell(1)
        ref.tell(2)
        with pytest.raises(ta.MailboxFull, match=r"system/worker is full \(capacity 2"):
            ref.tell(3)
        await trio.testing.wait_all_tasks_blocked()
        assert await ref.ask("get") == [1, 2]
        assert system.dead_letters.count == 0
        assert ref.statistics().failed_back == 1


async def test_drop_new_dead_letters_the_new_message(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder, mailbox=ta.Bounded(2, overflow="drop_new"))
        for n in range(5):
            ref.tell(n)
        # The policy is the tells': an ask waits for room, then is answered.
        assert await ref.ask("get") == [0, 1]
        assert overflow_letters(system) == [2, 3, 4]
        assert all(d.recipient == ref for d in system.dead_letters.recent)


async def test_drop_old_drops_the_oldest_and_fails_back_a_dropped_ask(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(2, overflow="drop_old"))
        ref.tell("busy")  # taken at once: the handler waits at the gate
        await trio.testing.wait_all_tasks_blocked()
        outcomes: list[Any] = []

        async def ask_first() -> None:
            try:
                await ref.ask("first ask")
            except ta.MailboxFull as error:
                outcomes.append(str(error))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_first)
            await trio.testing.wait_all_tasks_blocked()
            ref.tell("a")
            ref.tell("b")  # full: the ask is dropped
            ref.tell("c")  # full: "a" is dropped
            await trio.testing.wait_all_tasks_blocked()
            assert outcomes == [
                f"the mailbox of {ref.path} is full (capacity 2, "
                "overflow='drop_old'): the oldest ask was dropped; use "
                "'await ref.send(...)' to wait for room, or a larger capacity or "
                "another overflow policy"
            ]
            gate.set()
        await ref.stop(drain=True)
        assert got == ["busy", "b", "c"]
        assert overflow_letters(system) == ["a"]


async def test_send_waits_for_room_and_senders_resume_first_come_first_served(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(SlowRecorder, mailbox=ta.Bounded(2))
        resumed: list[int] = []

        async def sender(n: int) -> None:
            await ref.send(n)
            resumed.append(n)

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(sender, n)
                await trio.testing.wait_all_tasks_blocked()
            # One is being handled, two are queued, five senders wait.
            assert resumed == [0, 1, 2]
            assert ref.statistics().mailbox_depth == 2
            with pytest.raises(ta.MailboxFull):
                ref.tell("cut in")  # nobody overtakes a waiting sender
        assert resumed == list(range(8))
        await trio.sleep(10)  # the last two are handled
        assert await ref.ask("get") == list(range(8))


async def test_a_cancelled_send_leaves_nothing_queued_and_the_order_holds(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(SlowRecorder, mailbox=ta.Bounded(1))
        await ref.send(0)  # handled at once
        await ref.send(1)  # queued
        async with trio.open_nursery() as nursery:
            scopes = {}
            for n in (2, 3, 4):
                scopes[n] = trio.CancelScope()

                async def sender(n: int = n) -> None:
                    with scopes[n]:
                        await ref.send(n)

                nursery.start_soon(sender)
                await trio.testing.wait_all_tasks_blocked()
            scopes[3].cancel()
        await trio.sleep(10)
        assert await ref.ask("get") == [0, 1, 2, 4]
        assert ref.statistics().withdrawn == 1
        assert system.dead_letters.count == 0


async def test_send_cancelled_before_it_starts_queues_nothing(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder, mailbox=ta.Bounded(4))
        with trio.CancelScope() as scope:
            scope.cancel()
            await ref.send("never")
        assert await ref.ask("get") == []


async def test_a_stop_wakes_waiting_senders_with_actor_stopped(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(1))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        errors: list[str] = []

        async def sender(n: int) -> None:
            try:
                await ref.send(n)
            except ta.ActorStopped as error:
                errors.append(str(error))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender, 1)
            nursery.start_soon(sender, 2)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(functools.partial(ref.stop, drain=True))
            await trio.testing.wait_all_tasks_blocked()
            assert len(errors) == 2  # draining accepts nothing new: senders fail
            gate.set()
        assert got == ["busy", "queued"]
        assert errors == [f"{ref.path} stopped while a send waited for room"] * 2
        assert ref.statistics().failed_back == 2
        with pytest.raises(ta.ActorStopped, match="send not accepted"):
            await ref.send(3)


async def test_send_to_an_unbounded_mailbox_is_a_tell_and_a_checkpoint(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder)
        with trio.testing.assert_checkpoints():
            await ref.send("x")
        assert await ref.ask("get") == ["x"]
        with trio.testing.assert_checkpoints():
            await ref.send("y")  # with room in a bounded one, too
        bounded = system.spawn(Recorder, mailbox=ta.Bounded(3))
        with trio.testing.assert_checkpoints():
            await bounded.send("y")
        assert await bounded.ask("get") == ["y"]


async def test_an_actor_sending_to_its_own_full_mailbox_gets_an_error(
    autojump_clock: Clock,
) -> None:
    class Loop(ta.Actor):
        async def receive(self, message: Any) -> Any:
            if message == "go":
                self.ref.tell("filler")
                await self.ref.send("more")
            return None

    async with ta.open_actor_system() as system:
        ref = system.spawn(Loop, mailbox=ta.Bounded(1), supervision=ta.Resume())
        with pytest.raises(ta.ActorError, match="sent to its own full mailbox"):
            await ref.ask("go")


async def test_drop_old_from_the_actors_own_turn_keeps_order_and_asks(
    autojump_clock: Clock,
) -> None:
    class SelfFeeding(ta.Actor):
        def __init__(self) -> None:
            self.got: list[Any] = []

        def receive(self, message: Any) -> Any:
            if message == "get":
                return list(self.got)
            self.got.append(message)
            if message == 0:
                for n in range(10, 14):
                    self.ref.tell(n)  # full: each drops the oldest queued
            return None

    async with ta.open_actor_system() as system:
        ref = system.spawn(SelfFeeding, mailbox=ta.Bounded(3, overflow="drop_old"))
        ref.tell(0)
        ref.tell(1)
        ref.tell(2)
        await trio.testing.wait_all_tasks_blocked()
        assert await ref.ask("get") == [0, 11, 12, 13]
        assert overflow_letters(system) == [1, 2, 10]


async def test_room_freed_while_a_plain_actor_is_served_admits_senders(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder, mailbox=ta.Bounded(1))
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(ref.send, n)
        assert sorted(await ref.ask("get")) == list(range(20))


async def test_a_restart_keeps_the_bound_and_the_waiting_senders(autojump_clock: Clock) -> None:
    class Fragile(SlowRecorder):
        async def receive(self, message: Any) -> Any:
            if message == "boom":
                raise RuntimeError("boom")
            return await super().receive(message)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Fragile, mailbox=ta.Bounded(1))
        ref.tell("boom")
        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(ref.send, n)
                await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(10)
        assert await ref.ask("get") == [0, 1, 2]
        assert ref.statistics().restarts == 1
        ref.tell(3)
        with pytest.raises(ta.MailboxFull):
            ref.tell(4)


async def test_terminated_notices_are_never_dropped_by_the_capacity(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        watched = system.spawn(Recorder)
        watcher = system.spawn(Watcher, gate, got, mailbox=ta.Bounded(1, overflow="drop_new"))
        watcher.tell(watched)
        await trio.testing.wait_all_tasks_blocked()
        watcher.tell("hold")
        await trio.testing.wait_all_tasks_blocked()
        watcher.tell("filler")  # the mailbox is full now
        await watched.stop()
        watcher.tell("dropped")
        gate.set()
        await watcher.stop(drain=True)
        assert got == ["filler", ta.Terminated(watched)]
        assert overflow_letters(system) == ["dropped"]


async def test_an_overflowing_tell_from_another_thread_becomes_a_dead_letter(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(1))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        await trio.to_thread.run_sync(ref.tell, "from a thread")
        await trio.testing.wait_all_tasks_blocked()
        assert overflow_letters(system) == ["from a thread"]
        assert threading.current_thread() is threading.main_thread()
        gate.set()


@pytest.mark.parametrize("overflow", ["fail", "drop_new", "drop_old"])
async def test_an_ask_cancelled_before_it_starts_does_nothing_to_a_full_mailbox(
    overflow: Any, autojump_clock: Clock
) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(1, overflow=overflow))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        with trio.CancelScope() as scope:
            scope.cancel()
            await ref.ask("never")
        assert scope.cancelled_caught  # Cancelled, not MailboxFull
        stats = ref.statistics()
        assert (stats.withdrawn, stats.failed_back, stats.mailbox_depth) == (1, 0, 1)
        assert system.dead_letters.count == 0  # drop_old dropped nothing
        gate.set()


async def test_drop_old_never_drops_a_terminated_and_keeps_asks_in_place(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        watched = system.spawn(Recorder)
        ref = system.spawn(Watcher, gate, got, mailbox=ta.Bounded(3, overflow="drop_old"))
        ref.tell(watched)
        ref.tell("hold")
        await trio.testing.wait_all_tasks_blocked()
        await watched.stop()  # a Terminated is queued first
        ref.tell("old tell")
        answers: list[Any] = []

        async def ask() -> None:
            answers.append(await ref.ask("the ask"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()  # full: Terminated, tell, ask
            ref.tell("new tell")  # drops "old tell", not the Terminated
            gate.set()
        assert answers == ["the ask"]
        await ref.stop(drain=True)
        assert got == [ta.Terminated(watched), "the ask", "new tell"]
        assert overflow_letters(system) == ["old tell"]


async def test_an_ask_refused_by_a_stopped_actor_counts_as_failed_back() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder)
        await ref.stop()
        with pytest.raises(ta.ActorStopped):
            await ref.ask("late")
        assert ref.statistics().failed_back == 1


async def test_a_send_to_a_stopped_actor_is_a_full_checkpoint() -> None:
    # The refused send yields too, not only checks for cancellation (a mutant
    # without the schedule point survived the suite).
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        await ref.stop()
        with trio.testing.assert_checkpoints(), pytest.raises(ta.ActorStopped):
            await ref.send("late")


async def test_a_plain_tell_handler_may_return_a_value_from_a_bounded_backlog() -> None:
    # A value returned for a tell is dropped, not taken for a coroutine returned by
    # mistake (a failure) on a bounded mailbox's backlog path, served one checked
    # pop at a time.
    failures = []

    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo, mailbox=ta.Bounded(8))
        for number in range(5):
            ref.tell(number)
        await trio.testing.wait_all_tasks_blocked()
        stats = ref.statistics()
        failures.append(stats.failures)
        assert stats.handled == 5
    assert failures == [0]


@pytest.mark.parametrize("overflow", ["fail", "drop_new", "drop_old"])
async def test_an_ask_waits_for_room_in_line_with_the_waiting_sends(
    overflow: Any, autojump_clock: Clock
) -> None:
    # Whatever the overflow policy (it is the tells'): an ask after a waiting send
    # gets room after it, one before a waiting send before it.
    async with ta.open_actor_system() as system:
        ref = system.spawn(SlowRecorder, mailbox=ta.Bounded(1, overflow=overflow))
        await ref.send(0)  # handled at once (a second)
        await ref.send(1)  # the one room
        resumed: list[Any] = []

        async def sender(n: int) -> None:
            await ref.send(n)
            resumed.append(n)

        async def asker(n: str) -> None:
            resumed.append((n, await ref.ask(n)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender, 2)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(asker, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(sender, 3)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(asker, "b")
            await trio.testing.wait_all_tasks_blocked()
            stats = ref.statistics()
            assert (stats.mailbox_depth, stats.senders_waiting) == (1, 4)
            assert (stats.failed_back, system.dead_letters.count) == (0, 0)
        # (A sender resumes once queued, an asker once answered.)
        assert sorted(map(str, resumed)) == ["('a', None)", "('b', None)", "2", "3"]
        assert await ref.ask("get") == [0, 1, 2, "a", 3, "b"]  # the order they came


async def test_a_cancelled_waiting_ask_leaves_nothing_and_the_next_waiter_gets_the_room(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(1))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        scope = trio.CancelScope()

        async def doomed_ask() -> None:
            with scope:
                await ref.ask("never")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(doomed_ask)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ref.send, "next")
            await trio.testing.wait_all_tasks_blocked()
            assert ref.statistics().senders_waiting == 2
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            stats = ref.statistics()
            assert (stats.mailbox_depth, stats.senders_waiting, stats.withdrawn) == (1, 1, 1)
            gate.set()  # "busy" ends; "queued" is taken: "next" gets the room
        await ref.stop(drain=True)
        assert got == ["busy", "queued", "next"]
        stats = ref.statistics()
        assert (stats.withdrawn, stats.failed_back, system.dead_letters.count) == (1, 0, 0)


async def test_a_stop_fails_a_waiting_ask_with_actor_stopped(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Gate, gate, got, mailbox=ta.Bounded(1))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        errors: list[str] = []

        async def asker() -> None:
            try:
                await ref.ask("waits")
            except ta.ActorStopped as error:
                errors.append(str(error))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(asker)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(functools.partial(ref.stop, drain=True))
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
        assert errors == [f"{ref.path} stopped while an ask waited for room"]
        assert got == ["busy", "queued"]
        assert ref.statistics().failed_back == 1


async def test_mailbox_full_says_what_to_do(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder, name="worker", mailbox=ta.Bounded(1))
        ref.tell(1)
        with pytest.raises(ta.MailboxFull) as caught:
            ref.tell(2)
        assert str(caught.value) == (
            "the mailbox of system/worker is full (capacity 1, overflow='fail'): 2 was "
            "not queued; use 'await ref.send(...)' to wait for room, or a larger "
            "capacity or another overflow policy"
        )

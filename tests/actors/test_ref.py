"""The ref is a handle: nothing of the actor's record shows through it."""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo, Failing

# api.md, "The ref is a handle": the only public names of a ref.
PUBLIC_REF_NAMES = [
    "ask",
    "name",
    "path",
    "send",
    "statistics",
    "stop",
    "stop_nowait",
    "tell",
    "wait_stopped",
]


class Stopper(ta.Actor):
    """A plain handler that stops another actor without waiting."""

    def receive(self, message: Any) -> Any:
        message.stop_nowait()
        return "asked"


class Parent(ta.Actor):
    def receive(self, message: Any) -> Any:
        if message == "spawn":
            return self.spawn(Echo, name="child")
        return None


def test_a_ref_cannot_be_constructed_by_users() -> None:
    with pytest.raises(TypeError, match="ActorRef has no public constructor"):
        ta.ActorRef()
    with pytest.raises(TypeError, match="ActorRef has no public constructor"):
        ta.ActorRef(object())  # (a cell of some kind, without the runtime's key)


def test_actor_ref_cannot_be_subclassed_at_runtime_either() -> None:
    # @final is for type checkers; the constructor refuses every caller but the
    # runtime, a subclass's too (and a compiled ref's subclass cannot be made at all).
    class Sub(ta.ActorRef):  # type: ignore[misc]
        __slots__ = ()

    refused = "interpreted classes cannot inherit from compiled" if ta.compiled else "no public"
    with pytest.raises(TypeError, match=refused):
        Sub()


async def test_dir_of_a_ref_lists_only_the_public_names() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        assert [name for name in dir(ref) if not name.startswith("_")] == PUBLIC_REF_NAMES
        assert type(ref) is ta.ActorRef
        assert not hasattr(ref, "instance")
        assert not hasattr(ref, "mailbox")
        assert not hasattr(ref, "__dict__")


async def test_an_unknown_attribute_of_a_ref_is_named_as_an_actor_ref_error() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo, name="echo")
        with pytest.raises(AttributeError, match="'ActorRef' object has no attribute 'count'"):
            ref.count  # type: ignore[attr-defined]  # noqa: B018
        with pytest.raises(AttributeError):
            ref.extra = 1  # type: ignore[attr-defined]
        assert repr(ref) == "<ActorRef system/echo>"
        assert str(ref) == "system/echo"


async def test_terminated_and_dead_letters_hold_the_ref_spawn_returned() -> None:
    class Watcher(ta.Actor):
        def __init__(self, notices: list[ta.Terminated]) -> None:
            self.notices = notices

        def receive(self, message: Any) -> Any:
            if isinstance(message, ta.Terminated):
                self.notices.append(message)
            elif isinstance(message, ta.ActorRef):
                self.watch(message)

    notices: list[ta.Terminated] = []
    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        watcher = system.spawn(Watcher, notices)
        await watcher.ask(target)
        await target.stop()
        await watcher.ask("sync")  # the Terminated was queued before this ask
        assert [notice.ref for notice in notices] == [target]
        assert hash(notices[0].ref) == hash(target)
        target.tell("late")
        letter = system.dead_letters.recent[-1]
        assert letter.recipient == target
        assert letter.reason == "stopped"


async def test_refs_to_one_actor_are_equal_and_hash_alike() -> None:
    class Self(ta.Actor):
        def receive(self, message: Any) -> Any:
            return self.ref

    async with ta.open_actor_system() as system:
        ref = system.spawn(Self)
        own = await ref.ask("who")
        assert own == ref
        assert hash(own) == hash(ref)
        assert {ref: 1}[own] == 1
        assert own != system.spawn(Self)
        assert own != "system/Self-1"


async def test_a_ref_is_not_picklable_and_says_why() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo, name="echo")
        with pytest.raises(TypeError, match=r"cannot pickle <ActorRef system/echo>: .*trio run"):
            pickle.dumps(ref)


async def test_copying_a_ref_gives_the_same_handle() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        assert copy.copy(ref) is ref
        assert copy.deepcopy([ref])[0] is ref


async def test_stop_nowait_from_a_plain_handler_stops_the_other_actor() -> None:
    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        stopper = system.spawn(Stopper)
        assert await stopper.ask(target) == "asked"
        terminated = await target.wait_stopped()
        assert terminated == ta.Terminated(target, None)
        assert target.statistics().state == "stopped"


async def test_stop_nowait_is_never_a_checkpoint_and_wait_stopped_always_is() -> None:
    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        with trio.testing.assert_no_checkpoints():
            target.stop_nowait()
            target.stop_nowait()  # idempotent
        with trio.testing.assert_checkpoints():
            await target.wait_stopped()
        with trio.testing.assert_checkpoints():
            await target.wait_stopped()  # stopped already: still a checkpoint


async def test_wait_stopped_returns_the_error_that_stopped_the_actor() -> None:
    async with ta.open_actor_system() as system:
        failing = system.spawn(Failing, supervision=ta.Stop())
        failing.tell("boom")
        terminated = await failing.wait_stopped()
        assert terminated.ref == failing
        assert isinstance(terminated.error, ValueError)


async def test_wait_stopped_cancelled_ends_only_the_waiting() -> None:
    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        with trio.move_on_after(1):
            await target.wait_stopped()
        assert target.statistics().state == "running"
        assert await target.ask("still") == "still"


async def test_drain_stop_nowait_handles_what_was_queued_first() -> None:
    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        target.tell(1)
        target.stop_nowait(drain=True)
        target.tell(2)  # after the drain began: a dead letter
        await target.wait_stopped()
        assert target.statistics().handled == 1
        assert [letter.message for letter in system.dead_letters.recent] == [2]


async def test_wait_stopped_from_the_actors_own_handler_is_an_error() -> None:
    class WaitsForItself(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await self.ref.wait_stopped()

    async with ta.open_actor_system() as system:
        ref = system.spawn(WaitsForItself)
        with pytest.raises(ta.ActorError, match=r"wait_stopped.*wait forever"):
            await ref.ask("go")


async def test_stop_nowait_and_wait_stopped_refuse_another_thread() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        errors: list[BaseException] = []

        def from_thread() -> None:
            try:
                ref.stop_nowait()
            except BaseException as error:
                errors.append(error)

        await trio.to_thread.run_sync(from_thread)
        assert len(errors) == 1
        assert isinstance(errors[0], RuntimeError | ta.ActorError)
        assert ref.statistics().state == "running"
        assert threading.current_thread() is threading.main_thread()


async def test_a_child_ref_names_its_path() -> None:
    async with ta.open_actor_system() as system:
        parent = system.spawn(Parent, name="parent")
        child = await parent.ask("spawn")
        assert type(child) is ta.ActorRef
        assert child.path == "system/parent/child"
        assert child.name == "child"

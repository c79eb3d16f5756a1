"""The registry: ``system.register`` / ``unregister`` / ``lookup`` / ``registered``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from helpers import Echo
from trio_actors import (
    Actor,
    ActorError,
    ActorNotFound,
    ActorStopped,
    open_actor_system,
)


class SelfRegistering(Actor):
    starts = 0

    def on_start(self) -> None:
        SelfRegistering.starts += 1
        self.system.register("me", self.ref)  # again after a restart: no harm

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("restart me")
        return SelfRegistering.starts


async def test_a_registered_actor_is_found_by_name_until_it_stops() -> None:
    async with open_actor_system() as system:
        ledger = system.spawn(Echo)
        system.register("ledger", ledger)
        found = await system.lookup("ledger")
        assert found == ledger
        assert await found.ask("hi") == "hi"
        assert system.registered() == {"ledger": ledger}
        await ledger.stop()
        with pytest.raises(ActorNotFound, match=r"no actor is registered as 'ledger'"):
            await system.lookup("ledger")
        assert system.registered() == {}


def test_actor_not_found_is_a_lookup_error_and_an_actor_error() -> None:
    assert issubclass(ActorNotFound, LookupError)
    assert issubclass(ActorNotFound, ActorError)


async def test_a_name_is_freed_when_the_stop_begins_so_a_successor_can_take_it() -> None:
    class Slow(Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(1)
            return message

    async with open_actor_system() as system:
        old = system.spawn(Slow)
        system.register("worker", old)
        old.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        old.stop_nowait(drain=True)  # still draining its message
        with pytest.raises(ActorNotFound):
            await system.lookup("worker")
        new = system.spawn(Echo)
        system.register("worker", new)
        assert await system.lookup("worker") == new
        await old.wait_stopped()
        assert await system.lookup("worker") == new  # the old one's end frees nothing


async def test_a_restart_keeps_the_name_and_re_registering_is_harmless(
    autojump_clock: trio.testing.MockClock,
) -> None:
    SelfRegistering.starts = 0
    async with open_actor_system() as system:
        ref = system.spawn(SelfRegistering)
        assert await ref.ask("x") == 1
        ref.tell("fail")
        assert await ref.ask("x") == 2  # restarted; its on_start registered again
        assert await system.lookup("me") == ref
        assert system.registered() == {"me": ref}


async def test_one_actor_may_hold_several_names_and_lose_them_all_at_stop() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo)
        system.register("a", ref)
        system.register("b", ref)
        system.unregister("a")
        assert system.registered() == {"b": ref}
        system.register("a", ref)
        await ref.stop()
        assert system.registered() == {}


async def test_a_name_held_by_another_actor_is_refused_naming_both() -> None:
    async with open_actor_system() as system:
        first = system.spawn(Echo, name="first")
        second = system.spawn(Echo, name="second")
        system.register("db", first)
        with pytest.raises(
            ValueError,
            match=r"cannot register 'db' for system/second: system/first holds it",
        ):
            system.register("db", second)
        assert await system.lookup("db") == first


async def test_a_stopped_or_stopping_actor_cannot_be_registered() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo, name="gone")
        await ref.stop()
        with pytest.raises(ActorStopped, match=r"cannot register 'x': system/gone is stopped"):
            system.register("x", ref)


async def test_unregister_of_an_unknown_name_raises_actor_not_found() -> None:
    async with open_actor_system() as system:
        with pytest.raises(ActorNotFound, match=r"cannot unregister 'nobody': no actor"):
            system.unregister("nobody")


@pytest.mark.parametrize(
    ("call", "error", "complaint"),
    [
        (lambda s, r: s.register(3, r), TypeError, r"register\(\) needs a name \(a str\), got 3"),
        (lambda s, r: s.register("", r), ValueError, r"register\(\) needs a non-empty name"),
        (lambda s, r: s.register("x", "ref"), TypeError, r"register\(\) needs an ActorRef"),
        (lambda s, r: s.unregister(None), TypeError, r"unregister\(\) needs a name"),
    ],
)
async def test_bad_arguments_are_refused(call: Any, error: type[Exception], complaint: str) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo)
        with pytest.raises(error, match=complaint):
            call(system, ref)
        with pytest.raises(TypeError, match=r"lookup\(\) needs a name \(a str\), got b'x'"):
            await system.lookup(b"x")  # type: ignore[arg-type]


async def test_a_ref_of_another_system_is_refused() -> None:
    async with open_actor_system() as one, open_actor_system() as other:
        ref = other.spawn(Echo)
        with pytest.raises(ActorError, match=r"a ref to an actor of another actor system"):
            one.register("x", ref)


async def test_lookup_is_a_checkpoint() -> None:
    async with open_actor_system() as system:
        system.register("x", system.spawn(Echo))
        with trio.CancelScope() as scope:
            scope.cancel()
            await system.lookup("x")
            pytest.fail("lookup did not checkpoint")  # pragma: no cover
        assert scope.cancelled_caught


async def test_the_registry_refuses_other_threads() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo)
        errors: list[BaseException] = []

        def worker() -> None:
            calls: list[Callable[[], None]] = [
                lambda: system.register("x", ref),
                lambda: system.unregister("x"),
            ]
            for call in calls:
                try:
                    call()
                except ActorError as error:
                    errors.append(error)

        thread = threading.Thread(target=worker)
        thread.start()
        await trio.to_thread.run_sync(thread.join)
        assert [str(e).split(" called")[0] for e in errors] == ["register()", "unregister()"]
        assert system.registered() == {}

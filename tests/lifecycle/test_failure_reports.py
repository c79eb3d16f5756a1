"""The supervision path cannot fail: whatever a message, a strategy or a timer
argument looks like, reporting and handling a failure never ends the system."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from cancellation import a_stray_cancelled


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("this repr raises")


def deeply_nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class FailsUnlessAskedOk(ta.Actor):
    """Answers "ok?" with "ok" (alive and serving); every other message fails."""

    def receive(self, message: Any) -> Any:
        if message == "ok?":
            return "ok"
        raise ValueError("the handler fails")


@pytest.mark.parametrize(
    "message", [Unprintable(), deeply_nested(100_000)], ids=["raising-repr", "deep"]
)
def test_a_failing_handler_is_reported_whatever_its_message(
    message: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(FailsUnlessAskedOk, supervision=ta.Resume())
            ref.tell(message)
            assert await ref.ask("ok?") == "ok"
            assert ref.statistics().failures == 1

    with caplog.at_level(logging.ERROR, logger="trio_actors"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    [record] = [r for r in caplog.records if "failed handling" in r.getMessage()]
    assert f"failed handling a {type(message).__qualname__}" in record.getMessage()


async def test_a_full_bounded_mailbox_refuses_an_unprintable_message_with_mailbox_full() -> None:
    class Slow(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep_forever()

    async with ta.open_actor_system() as system:
        ref = system.spawn(Slow, mailbox=ta.Bounded(1, overflow="fail"))
        ref.tell("first")  # taken by the handler
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("second")  # fills the mailbox
        with pytest.raises(ta.MailboxFull, match=r"<Unprintable object \(its repr failed\)>"):
            ref.tell(Unprintable())
        await ref.stop()


def test_backoff_with_a_huge_factor_never_overflows() -> None:
    async def main() -> None:
        backoff = ta.Backoff(min_delay=0.01, max_delay=1.0, factor=1e308)
        async with ta.open_actor_system() as system:
            ref = system.spawn(
                FailsUnlessAskedOk,
                supervision=ta.Restart(max_restarts=10, within=1e6, backoff=backoff),
            )
            for _ in range(5):
                ref.tell("fail")
                await trio.sleep(2)
            assert ref.statistics().restarts == 5
            assert await ref.ask("ok?") == "ok"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("kind", ["plain", "async"])
def test_a_stray_cancelled_from_a_handler_is_a_failure_not_a_silent_end(kind: str) -> None:
    stray = a_stray_cancelled()
    reached: list[str] = []

    class Plain(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "raise it":
                raise stray
            return message

    class Async(ta.Actor):
        async def receive(self, message: Any) -> Any:
            if message == "raise it":
                raise stray
            return message

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(Plain if kind == "plain" else Async)
            if kind == "plain":
                ref.tell("raise it")
            else:
                with pytest.raises(RuntimeError, match="not its own cancellation"):
                    await ref.ask("raise it")
            await trio.testing.wait_all_tasks_blocked()
            assert await ref.ask("still there") == "still there"
            assert ref.statistics().failures == 1
            assert ref.statistics().restarts == 1  # the default strategy
            reached.append("the rest of the block")
        reached.append("after the block")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert reached == ["the rest of the block", "after the block"]


@pytest.mark.parametrize("kind", ["plain", "async"])
def test_a_stray_cancelled_from_on_start_is_a_failure_not_a_silent_end(kind: str) -> None:
    stray = a_stray_cancelled()
    reached: list[str] = []
    starts: list[int] = []

    class PlainStart(ta.Actor):
        def on_start(self) -> None:
            starts.append(1)
            if len(starts) == 1:
                raise stray

        def receive(self, message: Any) -> Any:
            return message

    class AsyncStart(ta.Actor):
        async def on_start(self) -> None:
            starts.append(1)
            await trio.lowlevel.checkpoint()
            if len(starts) == 1:
                raise stray

        async def receive(self, message: Any) -> Any:
            return message

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(PlainStart if kind == "plain" else AsyncStart)
            assert await ref.ask("after a restart") == "after a restart"
            statistics = ref.statistics()
            assert (statistics.failures, statistics.restarts) == (1, 1)
            assert len(starts) == 2
            reached.append("the rest of the block")
        reached.append("after the block")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert reached == ["the rest of the block", "after the block"]


class Holder(ta.Actor):
    """Hands its own instance out, so a test can call its methods from a thread."""

    def receive(self, message: Any) -> Any:
        if message == "yourself":
            return self
        if message == "timer":
            return self.tell_every(1.0, "tick")
        return message


@pytest.mark.parametrize(
    "call",
    [
        lambda actor, ref: actor.stop(),
        lambda actor, ref: actor.watch(ref),
        lambda actor, ref: actor.unwatch(ref),
        lambda actor, ref: actor.tell_after(1.0, "x"),
        lambda actor, ref: actor.tell_every(1.0, "x"),
        lambda actor, ref: actor.spawn(Holder),
    ],
    ids=["stop", "watch", "unwatch", "tell_after", "tell_every", "spawn"],
)
async def test_an_actors_methods_from_another_thread_raise_before_changing_anything(
    call: Any,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Holder)
        other = system.spawn(Holder)
        actor = await ref.ask("yourself")
        errors: list[BaseException] = []

        def from_thread() -> None:
            try:
                call(actor, other)
            except BaseException as error:
                errors.append(error)

        await trio.to_thread.run_sync(from_thread)
        assert [type(error) for error in errors] == [ta.ActorError]
        assert "another thread" in str(errors[0])
        statistics = ref.statistics()
        assert statistics.state == "running"
        assert statistics.timers == 0
        assert system.statistics().live_actors == 2
        assert await ref.ask("still serving") == "still serving"


async def test_a_timer_cancelled_from_another_thread_raises_and_keeps_running() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Holder)
        timer = await ref.ask("timer")
        with pytest.raises(ta.ActorError, match="another thread"):
            await trio.to_thread.run_sync(timer.cancel)
        assert timer.active
        timer.cancel()


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: ta.ServingPolicy(time_slice=10**400), ValueError, "time_slice must be a finite"),
        (lambda: ta.Restart(within=10**400), ValueError, "Restart.within must be finite"),
        (lambda: ta.Backoff(min_delay=10**400), ValueError, "Backoff.min_delay must be finite"),
    ],
)
def test_numbers_beyond_float_range_are_refused_naming_the_field(
    make: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        make()


async def test_dead_letters_kept_must_be_an_int() -> None:
    with pytest.raises(TypeError, match="dead letters to keep must be an int"):
        async with ta.open_actor_system(dead_letters_kept=1.5):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match="must be >= 0"):
        async with ta.open_actor_system(dead_letters_kept=-1):
            pass


class NotAMethod(ta.Actor):
    receive = 5  # type: ignore[assignment]


class AGenerator(ta.Actor):
    async def receive(self, message: Any) -> Any:
        yield message


@pytest.mark.parametrize(
    ("cls", "words"),
    [(NotAMethod, "receive is 5, not a method"), (AGenerator, "receive is a generator")],
)
async def test_spawn_refuses_a_receive_that_is_not_a_handler(cls: type, words: str) -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match=words):
            system.spawn(cls)
        assert system.statistics().live_actors == 0


def test_exceeding_the_restart_intensity_is_logged_with_the_numbers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # (A mutant that dropped this log line survived the whole suite.)
    class Child(ta.Actor):
        def receive(self, message: Any) -> None:
            raise ValueError("again")

    class Parent(ta.Actor):
        def receive(self, message: Any) -> Any:
            child = self.spawn(
                Child, name="child", supervision=ta.Restart(max_restarts=1, within=10.0)
            )
            child.tell(1)
            child.tell(2)
            return None

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Parent, name="parent", supervision=ta.Resume())
            await parent.ask("spawn")
            await trio.testing.wait_all_tasks_blocked()

    with caplog.at_level(logging.ERROR, logger="trio_actors"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert (
        "system/parent/child failed 2 times within 10s (more than max_restarts=1): escalating"
        in caplog.text
    )


def test_a_factory_failing_in_a_restart_counts_one_failure_and_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # (A mutant counting that failure twice survived the mutation run.)
    made: list[int] = []

    class Worker(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "fail":
                raise ValueError("in the handler")
            return len(made)

    def factory() -> ta.Actor:
        made.append(1)
        if len(made) == 2:
            raise RuntimeError("the fresh instance cannot be made, once")
        return Worker()

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(factory, supervision=ta.Restart(max_restarts=5, within=60.0))
            ref.tell("fail")
            assert await ref.ask("which") == 3  # made on the third call
            statistics = ref.statistics()
            assert (statistics.failures, statistics.restarts) == (2, 1)

    with caplog.at_level(logging.ERROR, logger="trio_actors"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert "failed creating a fresh instance" in caplog.text


def test_after_a_stray_cancelled_the_round_yields_before_the_actor_again() -> None:
    # A plain handler's stray Cancelled is a failure and the round goes on; the
    # actor, with work left, goes to the back of the run queue marked with this
    # round, so reaching it again ends the round (T10: never two turns without a
    # yield). Without the mark its next message is handled in the same round.
    stray = a_stray_cancelled()  # (made in a trio.run of its own, before this one)
    rounds: list[int] = []

    class Strays(ta.Actor):
        def receive(self, message: Any) -> None:
            rounds.append(self.system._dispatcher.rounds)
            if message == "stray":
                raise stray

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(Strays, supervision=ta.Resume())
            await ref.ask("warm up")
            ref.tell("stray")
            ref.tell("after")
            await trio.testing.wait_all_tasks_blocked()
            assert ref.statistics().failures == 1

    trio.run(main)
    assert rounds[2] > rounds[1], rounds

"""The testing kit: Probe, the assertions, and the ``actor_system`` fixture."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.testing import (
    Probe,
    assert_dead_letters,
    assert_no_dead_letters,
    assert_statistics,
    dead_letters,
    matches,
)

Clock = trio.testing.MockClock


def test_matching_is_by_type_predicate_or_value() -> None:
    assert matches(int, 3)
    assert not matches(int, "3")
    assert matches(lambda m: m > 2, 3)
    assert matches(("a", 1), ("a", 1))
    assert not matches(("a", 1), ("a", 2))


async def test_a_probe_records_in_order_and_answers_asks(actor_system: ta.ActorSystem) -> None:
    probe = Probe(actor_system, reply=lambda m: m * 2)
    probe.ref.tell(1)
    assert await probe.ref.ask(5) == 10
    assert await probe.receive() == 1
    assert await probe.expect(int) == 5
    assert probe.messages == [1, 5]
    assert probe.unread == []


async def test_wait_for_skips_until_a_match(actor_system: ta.ActorSystem) -> None:
    probe = Probe(actor_system)
    for message in ("a", "b", 3, "c"):
        probe.ref.tell(message)
    assert await probe.wait_for(int) == 3
    assert await probe.receive() == "c"


async def test_a_missing_message_fails_after_its_timeout_in_virtual_time(
    actor_system: ta.ActorSystem, autojump_clock: Clock
) -> None:
    probe = Probe(actor_system, name="p")
    start = trio.current_time()
    with pytest.raises(AssertionError, match=r"p received no message within 5s"):
        await probe.receive(within=5)
    assert trio.current_time() - start == pytest.approx(5)
    probe.ref.tell("x")
    with pytest.raises(
        AssertionError,
        match=r"no message matching an instance of int within 2s \(skipped: \['x'\]\)",
    ):
        await probe.wait_for(int, within=2)


async def test_expect_no_message_fails_when_one_arrives(
    actor_system: ta.ActorSystem, autojump_clock: Clock
) -> None:
    class Later(ta.Actor):
        def receive(self, message: Any) -> Any:
            self.tell_after(0.5, "late", to=message)

    probe = Probe(actor_system, name="p")
    actor_system.spawn(Later).tell(probe.ref)
    with pytest.raises(AssertionError, match=r"p expected no message, received \['late'\]"):
        await probe.expect_no_message(within=1)


async def test_dead_letter_assertions_say_what_differed(actor_system: ta.ActorSystem) -> None:
    probe = Probe(actor_system, name="gone")
    await probe.ref.stop()
    probe.ref.tell("one")
    probe.ref.tell("two")
    assert [d.message for d in dead_letters(actor_system, reason="stopped")] == ["one", "two"]
    assert dead_letters(actor_system, reason="overflow") == []
    assert_dead_letters(actor_system, ["one", "two"], recipient=probe.ref)
    with pytest.raises(AssertionError, match=r"expected messages \['one'\], got \['one', 'two'\]"):
        assert_dead_letters(actor_system, ["one"])
    with pytest.raises(AssertionError, match="expected no dead letters, found 2"):
        assert_no_dead_letters(actor_system)


async def test_statistics_assertions_name_each_wrong_field(actor_system: ta.ActorSystem) -> None:
    probe = Probe(actor_system)
    probe.ref.tell(1)
    await probe.receive()
    assert_statistics(probe.ref, handled=1, mailbox_depth=0)
    assert_statistics(actor_system, live_actors=1)
    with pytest.raises(AssertionError, match=r"handled: expected 2, got 1\n  restarts"):
        assert_statistics(probe.ref, handled=2, restarts=1)
    with pytest.raises(TypeError, match="ActorStatistics has no field handeld"):
        assert_statistics(probe.ref, handeld=1)


FIXTURE_TEST = """
import trio_actors as ta

stopped = []

class Recorder(ta.Actor):
    def receive(self, message):
        return message

    def on_stop(self):
        stopped.append(True)

async def test_uses_the_fixture(actor_system):
    ref = actor_system.spawn(Recorder)
    assert await ref.ask("hi") == "hi"
    assert stopped == []

def test_the_system_was_closed_after_that_test():
    assert stopped == [True]
"""


def test_the_fixture_opens_a_system_and_closes_it_after_the_test(tmp_path: Path) -> None:
    # In a fresh pytest process, as a user's project would see the plugin.
    (tmp_path / "test_user.py").write_text(FIXTURE_TEST)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "trio_mode=true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


async def test_a_cancelled_receive_leaves_the_message_unread(actor_system: ta.ActorSystem) -> None:
    probe = Probe(actor_system)
    probe.ref.tell("hello")
    await trio.testing.wait_all_tasks_blocked()
    with trio.CancelScope() as scope:
        scope.cancel()
        await probe.receive()
    assert probe.unread == ["hello"]
    with trio.CancelScope() as scope:
        scope.cancel()
        await probe.wait_for(str)
    assert probe.unread == ["hello"]
    assert await probe.receive() == "hello"


class _Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


async def test_a_probe_watches_and_expects_terminated(autojump_clock: Any) -> None:
    async with ta.open_actor_system() as system:
        probe = Probe(system)
        target = system.spawn(_Echo)
        gone = system.spawn(_Echo)
        await gone.stop()
        probe.watch(target)
        probe.watch(gone)  # stopped already: told at once
        assert await probe.expect_terminated(gone) == ta.Terminated(gone)
        target.tell("not yet")
        await target.stop()
        terminated = await probe.expect_terminated(target)
        assert terminated.ref == target
        assert terminated.error is None
        assert probe.messages == [ta.Terminated(gone), ta.Terminated(target)]  # no _Watch


async def test_expect_terminated_without_a_watch_fails_with_a_hint(autojump_clock: Any) -> None:
    async with ta.open_actor_system() as system:
        probe = Probe(system)
        target = system.spawn(_Echo)
        await target.stop()
        hint = r"no Terminated of system/_Echo-\d+ within 1s \(watched with probe\.watch"
        with pytest.raises(AssertionError, match=hint):
            await probe.expect_terminated(target)


async def test_a_probe_unwatch_withdraws_the_watch(autojump_clock: Any) -> None:
    async with ta.open_actor_system() as system:
        probe = Probe(system)
        target = system.spawn(_Echo)
        probe.watch(target)
        probe.unwatch(target)
        await target.stop()
        await probe.expect_no_message(within=1)

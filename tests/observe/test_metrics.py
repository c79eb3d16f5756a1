"""``open_actor_system(metrics=...)``: the instruments, read with OpenTelemetry's
``InMemoryMetricReader`` (in the trio thread, or from another thread as an exporter
collects), under ``MockClock`` where time matters."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Costly, Echo, Failing
from trio_actors.observe import Metrics
from trio_actors.observe._source import MetricsSource
from trio_actors.observe._turns import MeteredRoundClock

pytest.importorskip("opentelemetry.sdk")  # (the test extra has it; the extras-free wheel not)

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

Points = dict[tuple[tuple[str, Any], ...], Any]


class Reader:
    """A provider with an in-memory reader, and the points of one collection."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def collect(self) -> dict[str, Points]:
        """Collect (in the calling thread); each instrument's points by attributes
        (a histogram's: its data point)."""
        return self.parse(self.reader.get_metrics_data())

    @staticmethod
    def parse(data: Any) -> dict[str, Points]:
        found: dict[str, Points] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points = found.setdefault(metric.name, {})
                    for point in metric.data.data_points:
                        key = tuple(sorted(point.attributes.items()))
                        points[key] = point.value if hasattr(point, "value") else point
        return found


def metrics_source(system: ta.ActorSystem) -> MetricsSource:
    """The system's source of metrics (its round clock's)."""
    clock = system._dispatcher.clock
    assert isinstance(clock, MeteredRoundClock)
    return clock.source


def of_class(name: str, **more: str) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted({"trio_actors.actor.class": name, **more}.items()))


class Other(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Holding(ta.Actor):
    """Each message holds the trio thread that many seconds of ``clock``'s time (as a
    blocking handler would)."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock

    def receive(self, message: float) -> None:
        self.clock.jump(message)


class Waiting(ta.Actor):
    """Its first message holds it (an async handler) until ``release`` is set."""

    def __init__(self, release: trio.Event) -> None:
        self.release = release

    async def receive(self, message: Any) -> Any:
        await self.release.wait()
        return message


@pytest.fixture
def reader() -> Reader:
    return Reader()


async def test_handled_and_live_actors_per_class(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        echoes = [system.spawn(Echo) for _ in range(3)]
        other = system.spawn(Other)
        for ref in echoes:
            for number in range(5):
                await ref.ask(number)
        await other.ask("one")
        points = reader.collect()
    assert points["trio_actors.messages.handled"] == {of_class("Echo"): 15, of_class("Other"): 1}
    assert points["trio_actors.actors.live"] == {of_class("Echo"): 3, of_class("Other"): 1}
    assert points["trio_actors.mailbox.depth"] == {of_class("Echo"): 0, of_class("Other"): 0}


async def test_each_collection_sees_the_actors_as_they_are_then(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Echo)
        await ref.ask(1)
        first = reader.collect()
        await ref.ask(2)
        await ref.ask(3)
        second = reader.collect()
    assert first["trio_actors.messages.handled"] == {of_class("Echo"): 1}
    assert second["trio_actors.messages.handled"] == {of_class("Echo"): 3}


async def test_mailbox_depth_sums_and_max_per_class(reader: Reader) -> None:
    release = trio.Event()
    async with ta.open_actor_system(metrics=reader.provider) as system:
        busy = system.spawn(Waiting, release)
        quiet = system.spawn(Waiting, release)
        for number in range(4):  # one taken (held in its handler), three queued
            busy.tell(number)
        quiet.tell(0)  # taken: none queued
        await trio.testing.wait_all_tasks_blocked()
        points = reader.collect()
        release.set()
    assert points["trio_actors.mailbox.depth"] == {of_class("Waiting"): 3}
    assert points["trio_actors.mailbox.depth.max"] == {of_class("Waiting"): 3}
    assert points["trio_actors.actors.live"] == {of_class("Waiting"): 2}


async def test_failures_and_restarts_per_class(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Failing, supervision=ta.Restart())
        for number in range(3):
            with pytest.raises(ValueError, match=str(number)):
                await ref.ask(number)
        await trio.testing.wait_all_tasks_blocked()
        points = reader.collect()
    assert points["trio_actors.failures"] == {of_class("Failing"): 3}
    assert points["trio_actors.restarts"] == {of_class("Failing"): 3}


async def test_children_are_counted_at_every_level(reader: Reader) -> None:
    class Parent(ta.Actor):
        def on_start(self) -> None:
            self.echo = self.spawn(Echo)

        async def receive(self, message: Any) -> Any:
            return await self.echo.ask(message)

    async with ta.open_actor_system(metrics=reader.provider) as system:
        parent = system.spawn(Parent)
        await parent.ask("through")
        points = reader.collect()
    assert points["trio_actors.actors.live"] == {of_class("Parent"): 1, of_class("Echo"): 1}
    assert points["trio_actors.messages.handled"] == {of_class("Parent"): 1, of_class("Echo"): 1}


async def test_per_actor_series_only_for_the_paths_asked(reader: Reader) -> None:
    options = Metrics(provider=reader.provider, per_actor=lambda path: path.endswith("/watched"))
    async with ta.open_actor_system(metrics=options) as system:
        watched = system.spawn(Echo, name="watched")
        plain = system.spawn(Echo, name="plain")
        await watched.ask(1)
        await plain.ask(1)
        await plain.ask(2)
        points = reader.collect()
    assert points["trio_actors.messages.handled"] == {
        of_class("Echo", **{"trio_actors.actor.path": "system/watched"}): 1,
        of_class("Echo"): 2,
    }


async def test_two_systems_on_one_meter_are_summed(reader: Reader) -> None:
    async with (
        ta.open_actor_system(metrics=reader.provider) as first,
        ta.open_actor_system(metrics=reader.provider) as second,
    ):
        await first.spawn(Echo).ask(1)
        await second.spawn(Echo).ask(1)
        await second.spawn(Echo).ask(1)
        points = reader.collect()
    assert points["trio_actors.messages.handled"] == {of_class("Echo"): 3}
    assert points["trio_actors.actors.live"] == {of_class("Echo"): 3}


async def test_a_closed_system_s_counters_stay_and_its_gauges_go(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        await system.spawn(Echo).ask(1)
    after_close = reader.collect()
    later = reader.collect()
    # Its last numbers, taken as it closed: its counters stay in every collection (a
    # counter never goes down), its live actors are gone.
    for points in (after_close, later):
        assert points["trio_actors.messages.handled"] == {of_class("Echo"): 1}
        assert points.get("trio_actors.actors.live", {}) == {}


async def test_counters_keep_what_stopped_actors_counted(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        refs = [system.spawn(Failing, supervision=ta.Restart()) for _ in range(2)]
        for ref in refs:
            with pytest.raises(ValueError, match="0"):
                await ref.ask(0)
        await trio.testing.wait_all_tasks_blocked()
        before = reader.collect()
        await refs[0].stop()
        after = reader.collect()
    for points in (before, after):
        assert points["trio_actors.failures"] == {of_class("Failing"): 2}
        assert points["trio_actors.restarts"] == {of_class("Failing"): 2}
    assert before["trio_actors.actors.live"] == {of_class("Failing"): 2}
    assert after["trio_actors.actors.live"] == {of_class("Failing"): 1}


async def test_a_collection_from_another_thread_is_taken_in_the_trio_thread(
    reader: Reader,
) -> None:
    taken_in: list[int] = []

    class Counting(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Counting)
        await ref.ask(1)
        source = metrics_source(system)
        take = source.take

        def spying_take(collection: int) -> Any:
            taken_in.append(threading.get_ident())
            return take(collection)

        source.take = spying_take  # type: ignore[method-assign]
        data = await trio.to_thread.run_sync(reader.reader.get_metrics_data)
        walks = list(taken_in)
    points = Reader.parse(data)
    assert points["trio_actors.messages.handled"] == {of_class("Counting"): 1}
    assert walks == [threading.get_ident()]  # (one walk for every instrument, in trio's thread)


async def test_a_busy_trio_thread_gives_the_last_snapshot_without_blocking_the_exporter(
    reader: Reader,
) -> None:
    options = Metrics(provider=reader.provider, wait=0.05)
    holding = threading.Event()
    collected = threading.Event()

    class Blocking(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "block":
                holding.set()
                collected.wait()  # the trio thread is held until the collection returned
            return message

    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Blocking)
        await ref.ask(1)
        reader.collect()  # (a snapshot: 1 handled)
        await ref.ask(2)  # (not yet seen by any collection)
        results: list[Any] = []

        def collect_while_held() -> None:
            holding.wait()
            try:
                results.append(reader.reader.get_metrics_data())
            finally:
                collected.set()

        thread = threading.Thread(target=collect_while_held)
        thread.start()
        ref.tell("block")
        await ref.ask(3)  # (after the blocking turn)
        await trio.to_thread.run_sync(thread.join)
        source = metrics_source(system)
        assert source.late == 1
        fresh = reader.collect()
    stale = Reader.parse(results[0])
    assert stale["trio_actors.messages.handled"] == {of_class("Blocking"): 1}
    assert fresh["trio_actors.messages.handled"] == {of_class("Blocking"): 4}


async def test_inline_turns_go_to_the_turn_histogram(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    options = Metrics(provider=reader.provider, turns_timed_every=1)
    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Holding, autojump_clock)
        ref.tell(0.0)  # (its first turn follows its start: not timed)
        await trio.sleep(1)
        for _ in range(3):
            ref.tell(0.002)
            await trio.sleep(1)  # (each its own round: its own turn)
        points = reader.collect()
    [(attributes, point)] = points["trio_actors.turn.duration"].items()
    assert attributes == of_class("Holding", **{"trio_actors.turn.kind": "inline"})
    assert point.count == 3
    assert point.sum == pytest.approx(0.006)
    assert point.explicit_bounds[3:5] == (5e-4, 1e-3)
    assert point.bucket_counts[5] == 3  # (1 ms, 5 ms]


async def test_a_turn_of_many_messages_is_timed_once_whole(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    options = Metrics(provider=reader.provider, turns_timed_every=1)
    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Holding, autojump_clock)
        ref.tell(0.0)  # (its first turn follows its start)
        await trio.sleep(1)
        for _ in range(10):  # one turn: 10 ms, within the 16 ms slice
            ref.tell(0.001)
        await trio.sleep(1)
        slow = system.spawn(Holding, autojump_clock)
        slow.tell(0.0)
        await trio.sleep(1)
        for _ in range(3):  # queued before a round: two turns of three messages
            ref.tell(0.002)
            slow.tell(0.003)
        await trio.sleep(1)
        points = reader.collect()
    [(_, point)] = points["trio_actors.turn.duration"].items()
    assert point.count == 3
    assert point.sum == pytest.approx(0.010 + 0.006 + 0.009)
    assert point.max == pytest.approx(0.010)
    assert point.min == pytest.approx(0.006)


async def test_one_round_in_every_so_many_is_timed(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    options = Metrics(provider=reader.provider, turns_timed_every=4)
    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Holding, autojump_clock)
        for number in range(1, 13):  # 12 rounds of one turn each: 4, 8 and 12 timed
            ref.tell(number / 1000)
            await trio.sleep(1)
        rounds = system._dispatcher.rounds
        points = reader.collect()
    [(_, point)] = points["trio_actors.turn.duration"].items()
    timed = [n / 1000 for n in range(1, 13) if n % 4 == 0]
    assert rounds == 12
    assert point.count == len(timed)
    assert point.sum == pytest.approx(sum(timed))


async def test_histogram_samples_are_bounded_and_what_is_left_out_is_counted(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    options = Metrics(provider=reader.provider, samples_per_collection=10, turns_timed_every=1)
    async with ta.open_actor_system(metrics=options, seed=7) as system:
        ref = system.spawn(Costly, autojump_clock)
        ref.tell(None)  # (its first turn follows its start: not one the clock can time)
        await trio.sleep(1)
        for _ in range(100):
            ref.tell(None)
            await trio.sleep(1)
        points = reader.collect()
    [(_, point)] = points["trio_actors.turn.duration"].items()
    assert point.count == 10
    unsampled = points["trio_actors.histogram.unsampled"]
    key = (("trio_actors.instrument", "trio_actors.turn.duration"),)
    assert unsampled[key] == 90


@pytest.mark.parametrize(
    ("value", "error"),
    [("yes", TypeError), (1, TypeError)],
)
async def test_metrics_must_be_a_known_kind(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="metrics must be True or False, an OpenTelemetry"):
        async with ta.open_actor_system(metrics=value):
            pass  # pragma: no cover


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Metrics(samples_per_collection=0), "samples_per_collection"),
        (lambda: Metrics(wait=0), "wait"),
        (lambda: Metrics(wait=float("inf")), "wait"),
        (lambda: Metrics(per_actor="system/a"), "per_actor"),  # type: ignore[arg-type,unused-ignore]
    ],
)
def test_bad_metrics_options_say_which(make: Callable[[], Metrics], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        make()


async def test_a_failing_snapshot_never_stops_the_system_from_closing(
    reader: Reader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def failing_take(self: MetricsSource, collection: int) -> Any:
        raise RuntimeError("a broken walk")

    async with ta.open_actor_system(metrics=reader.provider) as system:
        await system.spawn(Echo).ask(1)
        monkeypatch.setattr(MetricsSource, "take", failing_take)
    assert "the last metrics snapshot failed" in caplog.text
    assert system.statistics().live_actors == 0


async def test_a_node_s_series_carry_its_name_and_its_members(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus())
    async with (
        ta.open_actor_system(cluster=cluster, node="a", metrics=reader.provider) as a,
        ta.open_actor_system(cluster=cluster, node="b"),
    ):
        await a.spawn(Echo).ask(1)
        await trio.sleep(5)  # (heartbeats: b is a member)
        points = reader.collect()
    node = (("trio_actors.node", "a"),)
    assert points["trio_actors.messages.handled"] == {
        tuple(sorted((*node, ("trio_actors.actor.class", "Echo")))): 1
    }
    assert points["trio_actors.cluster.members"] == {node: 2}
    bad_input = points["trio_actors.node.bad_input"]
    assert bad_input[(("trio_actors.bad_input.kind", "forged"), *node)] == 0


async def test_dead_letters_by_recipient_class_and_reason(reader: Reader) -> None:
    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Echo)
        await ref.stop()
        ref.tell("late")  # stopped
        ref.tell("later")
        points = reader.collect()
    assert points["trio_actors.dead_letters"] == {
        of_class("Echo", **{"trio_actors.dead_letter.reason": "stopped"}): 2
    }


async def test_async_turns_are_timed_each(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    class Sleeper(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(message)
            return message

    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Sleeper)
        for seconds in (0.5, 2.0):
            await ref.ask(seconds)
        points = reader.collect()
    turns = points["trio_actors.turn.duration"]
    point = turns[of_class("Sleeper", **{"trio_actors.turn.kind": "async"})]
    assert point.count == 2
    assert point.sum == pytest.approx(2.5)


async def test_asks_are_timed_by_target_class_and_outcome(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    class Sleeper(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(1)
            if message == "fail":
                raise ValueError("asked to")
            return message

    options = Metrics(provider=reader.provider, asks_timed_every=1)
    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Sleeper)
        assert await ref.ask("one") == "one"
        with pytest.raises(ValueError, match="asked to"):
            await ref.ask("fail")
        with trio.move_on_after(0.5):
            await ref.ask("too slow")
        await trio.sleep(1)  # (the abandoned handler ends)
        await ref.stop()
        with pytest.raises(ta.ActorStopped):
            await ref.ask("after")
        points = reader.collect()
    asks = points["trio_actors.ask.duration"]

    def outcome(name: str) -> Any:
        return asks[of_class("Sleeper", **{"trio_actors.outcome": name})]

    assert (outcome("value").count, outcome("value").sum) == (1, pytest.approx(1.0))
    assert (outcome("exception").count, outcome("exception").sum) == (1, pytest.approx(1.0))
    assert (outcome("cancelled").count, outcome("cancelled").sum) == (1, pytest.approx(0.5))
    assert outcome("stopped").count == 1


async def test_one_local_ask_in_every_so_many_is_timed_and_the_rest_counted(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    options = Metrics(provider=reader.provider, asks_timed_every=4)
    async with ta.open_actor_system(metrics=options) as system:
        ref = system.spawn(Echo)
        for number in range(10):  # the 1st, 5th and 9th are timed
            await ref.ask(number)
        points = reader.collect()
    [(attributes, point)] = points["trio_actors.ask.duration"].items()
    assert attributes == of_class("Echo", **{"trio_actors.outcome": "value"})
    assert point.count == 3
    unsampled = points["trio_actors.histogram.unsampled"]
    assert unsampled[(("trio_actors.instrument", "trio_actors.ask.duration"),)] == 7


async def test_asks_to_another_node_are_timed_by_peer_and_outcome(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    from trio_actors.remote import MemoryBus

    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus)
    async with ta.open_actor_system(cluster=cluster, node="a", metrics=reader.provider) as a:
        async with ta.open_actor_system(cluster=cluster, node="b") as b:
            b.register("echo", b.spawn(Echo))
            echo = await a.lookup("echo")
            assert await echo.ask("over") == "over"
        with pytest.raises((ta.ActorStopped, ta.NodeDown)):
            await echo.ask("gone")
        points = reader.collect()
    asks = points["trio_actors.ask.duration"]
    remote = {"trio_actors.node": "a", "trio_actors.actor.class": "remote", "trio_actors.peer": "b"}
    values = asks[tuple(sorted({**remote, "trio_actors.outcome": "value"}.items()))]
    assert values.count == 1
    ended = [
        dict(key)["trio_actors.outcome"] for key in asks if dict(key).get("trio_actors.peer") == "b"
    ]
    assert sorted(ended) in (["stopped", "value"], ["node_down", "value"])


async def test_tells_lost_with_a_node_count_in_doubt_by_peer(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    from trio_actors.remote import MemoryBus
    from trio_actors.remote._node import Node

    class Stuck(ta.Actor):
        async def receive(self, message: Any) -> None:
            await trio.sleep_forever()

    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus)
    async with (
        ta.open_actor_system(cluster=cluster, node="a", metrics=reader.provider) as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        b.register("stuck", b.spawn(Stuck))
        stuck = await a.lookup("stuck")
        for number in range(3):
            stuck.tell(number)
        await trio.sleep(1)  # (taken by b: one in the handler, two queued)
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(30)
        in_doubt = [d.message for d in a.dead_letters.recent if d.reason == "in-doubt"]
        points = reader.collect()
    assert in_doubt
    by_peer = (("trio_actors.node", "a"), ("trio_actors.peer", "b"))
    assert points["trio_actors.tells.in_doubt"] == {by_peer: len(in_doubt)}
    letters = points["trio_actors.dead_letters"]
    key = tuple(sorted((*by_peer, ("trio_actors.dead_letter.reason", "in-doubt"))))
    assert letters[key] == len(in_doubt)


def test_without_opentelemetry_metrics_say_what_to_install() -> None:
    import subprocess
    import sys

    program = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # (as if not installed)\n"
        "import trio, trio_actors as ta\n"
        "async def main():\n"
        "    async with ta.open_actor_system(metrics=True):\n"
        "        pass\n"
        "try:\n"
        "    trio.run(main)\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == (
        'metrics needs OpenTelemetry (its API): pip install "trio-actors[otel]"'
    )


async def test_a_system_both_traced_and_metered_does_both(
    reader: Reader, autojump_clock: trio.testing.MockClock
) -> None:
    from traces import Recorded

    class Sleeper(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(1)
            return message

    recorded = Recorded()
    metrics = Metrics(provider=reader.provider, asks_timed_every=1)
    async with ta.open_actor_system(tracing=recorded.provider, metrics=metrics) as system:
        ref = system.spawn(Sleeper)
        assert await ref.ask("both") == "both"
        ref.tell("told")
        await trio.sleep(2)
        points = reader.collect()
    assert sorted(recorded.names()) == ["ask Sleeper", "receive Sleeper"]
    asks = points["trio_actors.ask.duration"]
    point = asks[of_class("Sleeper", **{"trio_actors.outcome": "value"})]
    assert (point.count, point.sum) == (1, pytest.approx(1.0))
    assert points["trio_actors.messages.handled"] == {of_class("Sleeper"): 2}
    turns = points["trio_actors.turn.duration"]
    assert turns[of_class("Sleeper", **{"trio_actors.turn.kind": "async"})].count == 2


def _broken_per_actor(path: str) -> bool:
    if path.endswith("/bad"):
        raise RuntimeError("a bug in the user's per_actor")
    return False


async def test_a_raising_per_actor_never_ends_the_system(
    reader: Reader, caplog: pytest.LogCaptureFixture
) -> None:
    # per_actor is user code; it is called from the dispatcher (a timed turn), from
    # ask() and from the stop path. Its bug must not end the system, fail an ask
    # or the system's close: the actor gets its class's series, and it is logged.
    options = Metrics(
        provider=reader.provider,
        per_actor=_broken_per_actor,
        turns_timed_every=1,
        asks_timed_every=1,
    )
    async with ta.open_actor_system(metrics=options) as system:
        bad = system.spawn(Echo, name="bad")
        for number in range(50):
            bad.tell(number)
        assert await bad.ask("still answers") == "still answers"
        points = reader.collect()
    assert points["trio_actors.messages.handled"] == {of_class("Echo"): 51}
    assert "per_actor" in caplog.text


async def test_an_ask_to_a_pool_is_one_ask_duration(reader: Reader) -> None:
    # One ask() of the user's, one observation: not the pool's and its worker's.
    options = Metrics(provider=reader.provider, asks_timed_every=1)
    async with ta.open_actor_system(metrics=options) as system:
        pool = system.spawn(ta.Pool(Echo, size=2))
        for number in range(10):
            await pool.ask(number)
        points = reader.collect()
    asks = points["trio_actors.ask.duration"]
    assert sum(point.count for point in asks.values()) == 10, {
        key: point.count for key, point in asks.items()
    }


async def test_a_counter_never_decreases_while_another_system_goes_on(reader: Reader) -> None:
    # Two systems in one process are summed per attribute set; when one closes, its
    # counts stay in the sum (a counter that went down would read as a reset to
    # Prometheus: rate() would see a spike of the whole remaining value).
    async with ta.open_actor_system(metrics=reader.provider) as lasting:
        await lasting.spawn(Echo).ask(1)
        async with ta.open_actor_system(metrics=reader.provider) as brief:
            await brief.spawn(Echo).ask(1)
            await brief.spawn(Echo).ask(1)
        seen = [reader.collect()["trio_actors.messages.handled"][of_class("Echo")]]
        seen.append(reader.collect()["trio_actors.messages.handled"][of_class("Echo")])
    assert seen == sorted(seen), f"trio_actors.messages.handled went {seen[0]} -> {seen[1]}"


def _closed_systems_held(metrics: Any, systems: int) -> tuple[int, int]:
    """The systems alive after ``systems`` metered ones opened and closed, and the
    metered cell classes (at most one per cell class: see _metered._timed_cell_class)."""

    class Counted(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

    async def main() -> None:
        for _ in range(systems):
            async with ta.open_actor_system(metrics=metrics) as system:
                await system.spawn(Counted).ask(1)

    trio.run(main)
    gc.collect()
    alive = gc.get_objects()
    return (
        sum(1 for o in alive if isinstance(o, ta.ActorSystem)),
        sum(1 for o in alive if isinstance(o, type) and o.__name__ == "MeteredActorCell"),
    )


@pytest.mark.parametrize(
    "metrics",
    [MeterProvider(), True],  # (a provider nobody collects; the global one, never set)
    ids=["uncollected-provider", "global-noop"],
)
def test_closed_systems_are_not_kept_alive_by_their_metrics(metrics: Any) -> None:
    systems, classes = _closed_systems_held(metrics, 0)
    after_systems, after_classes = _closed_systems_held(metrics, 20)
    assert after_systems == systems
    # (The compiled build keeps a class that had instances -- the one made is reused.)
    assert after_classes <= max(classes, 1), "a metered cell class made per system"


async def test_an_actor_of_its_own_series_that_stopped_keeps_its_counts_not_its_gauges(
    reader: Reader,
) -> None:
    options = Metrics(provider=reader.provider, per_actor=lambda path: path.endswith("/own"))
    async with ta.open_actor_system(metrics=options) as system:
        own = system.spawn(Echo, name="own")
        await own.ask(1)
        await own.stop()
        points = reader.collect()
    key = of_class("Echo", **{"trio_actors.actor.path": "system/own"})
    assert points["trio_actors.messages.handled"] == {key: 1}
    assert key not in points.get("trio_actors.actors.live", {})
    assert key not in points.get("trio_actors.mailbox.depth", {})


async def test_what_was_counted_before_the_system_became_a_node_carries_its_name(
    reader: Reader,
) -> None:
    class Named:
        name = "n1"

        def members(self) -> list[object]:
            return []

        def statistics(self) -> object:
            from trio_actors._statistics import BadInputCounts

            class Statistics:
                bad_input = BadInputCounts()

            return Statistics()

    async with ta.open_actor_system(metrics=reader.provider) as system:
        ref = system.spawn(Echo)
        await ref.stop()
        ref.tell("late")  # (a dead letter, counted before the "join")
        source = metrics_source(system)
        source.set_node(Named())
        points = reader.collect()
    node = ("trio_actors.node", "n1")
    for name in ("trio_actors.messages.handled", "trio_actors.dead_letters"):
        assert points[name], name
        assert all(node in key for key in points[name]), points[name]

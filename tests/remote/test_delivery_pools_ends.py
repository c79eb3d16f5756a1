"""Every way a pool ends a tell from another node (beside ``test_delivery_pools.py``):
every tracked tell's run is told exactly once per notice it counted, whatever the
pool does with the tell, and the tell ends handled, failed, or as a dead letter with
its message. Over the in-memory bus, under an autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import link_of
from trio_actors._core._bounded import Overflow
from trio_actors._core._envelope import Ask
from trio_actors.remote import MemoryBus, Node, _link
from trio_actors.remote._tracked import Run

HEARTBEAT = 0.5
ROUTINGS = ["balancing", "round_robin", "smallest_mailbox"]


class RunWatch:
    """Every :class:`Run` made while installed, and each told once too often."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.twice: list[tuple[int, Any]] = []

    def check(self) -> None:
        assert self.twice == [], f"runs told twice: {self.twice[:5]}"
        open_runs = [(run.sequence, run.left) for run in self.runs if run.left]
        assert open_runs == [], f"runs never ended (sequence, notices left): {open_runs[:5]}"


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> RunWatch:
    watch = RunWatch()
    made = Run.__init__
    finished = Run.notice_finished

    def init(self: Run, *args: Any) -> None:
        made(self, *args)
        watch.runs.append(self)

    def notice_finished(self: Run, notice: Any) -> None:
        if self.left <= 0:
            watch.twice.append((self.sequence, notice))
        finished(self, notice)

    monkeypatch.setattr(Run, "__init__", init)
    monkeypatch.setattr(Run, "notice_finished", notice_finished)
    return watch


GATES: dict[str, trio.Event] = {}


class Worker(ta.Actor):
    """``("block", n)`` waits for ``GATES["block"]``; ``("fail", n)`` raises;
    anything else takes a tenth of a heartbeat. Each message handled is logged, each
    failing one (or one whose handler a stop cancelled) in ``failed``."""

    def __init__(self, log: list[Any], failed: list[Any]) -> None:
        self.log = log
        self.failed = failed

    async def receive(self, message: Any) -> None:
        if isinstance(message, tuple) and message[0] == "fail":
            self.failed.append(message)
            raise ValueError(message)
        try:
            if isinstance(message, tuple) and message[0] == "block":
                await GATES.setdefault("block", trio.Event()).wait()
            else:
                await trio.sleep(HEARTBEAT / 10)
        except trio.Cancelled:  # (a stop or restart cancelled it: ended, not handled)
            self.failed.append(message)
            raise
        self.log.append(message)


@asynccontextmanager
async def pool_on_b(
    pool: ta.Pool, bus: MemoryBus | None = None, **spawn: Any
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorRef, ta.ActorRef]]:
    GATES.clear()
    cluster = ta.Cluster(
        bus=MemoryBus() if bus is None else bus,
        heartbeat=HEARTBEAT,
        heartbeats_missed=3,
        types=[ta.Broadcast, ta.Resize],
    )
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        here = b.spawn(pool, name="pool", **spawn)
        b.register("pool", here)
        await Node.of(b).flush()
        yield a, b, here, await a.lookup("pool")
        GATES.setdefault("block", trio.Event()).set()


def assert_accounted(
    runs: RunWatch,
    a: ta.ActorSystem,
    b: ta.ActorSystem,
    there: ta.ActorRef,
    sent: list[Any],
    handled: list[Any],
) -> None:
    """Each tell sent ended once: handled (or failed), or a dead letter on b with its
    message; all acknowledged; no run told twice or left open."""
    runs.check()
    # (a pool stopped while it restarts strands its workers' Terminated too: not
    # tells from another node)
    letters = [d.message for d in b.dead_letters.recent if type(d.message) is not ta.Terminated]
    assert not [m for m in letters if isinstance(m, Ask)], letters
    ended = sorted(map(repr, handled + letters))
    expected = sorted(map(repr, sent))
    missing = [m for m in expected if m not in ended]
    extra = list(ended)
    for m in expected:
        if m in extra:
            extra.remove(m)
    assert (missing, extra) == ([], []), [(d.message, d.reason) for d in b.dead_letters.recent]
    link = link_of(there)
    assert (link.acked, link.in_window, link.in_doubt) == (link.told, 0, 0)
    assert Node.of(a).unconfirmed == 0
    assert list(a.dead_letters.recent) == []


def assert_counted(here: ta.ActorRef, b: ta.ActorSystem, log: list[Any]) -> None:
    """The pool's statistics count what its workers handled and its dead letters --
    all but those of tells that reached b after it stopped: its number found nothing
    then (remote/_exports.py), so they are b's dead letters "stopped", to a ref
    through the wire, and not the pool's."""
    stats = here.statistics()
    letters = stats.dead_letters
    assert stats.handled >= len(log)  # (and those whose handler failed or was cancelled)
    recent = list(b.dead_letters.recent)
    late = [d for d in recent if d.recipient.path == f"b:{here.path}"]
    assert all(d.reason == "stopped" for d in late)
    assert not late or stats.state == "stopped"
    assert letters.stopped + letters.stranded + letters.overflow == len(recent) - len(late)
    assert (stats.mailbox_depth, stats.senders_waiting) == (0, 0)


# --- the handler fails: Restart, Resume, Stop -----------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("supervision", [ta.Restart(max_restarts=100), ta.Resume(), ta.Stop()])
async def test_failing_handlers(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing, supervision: Any
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    pool = ta.Pool(Worker, args=(log, failed), size=3, routing=routing, supervision=supervision)
    async with pool_on_b(pool) as (a, b, here, there):
        sent = [("fail", n) if n % 4 == 1 else n for n in range(30)]
        for message in sent:
            there.tell(message)
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)


# --- Resize while tells are assigned or queued -------------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("remote_resize", [False, True])
async def test_resize_down_with_tells_queued(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing, remote_resize: bool
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    pool = ta.Pool(Worker, args=(log, failed), size=4, routing=routing, shutdown=HEARTBEAT)
    async with pool_on_b(pool) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(4)] + list(range(20))
        for message in sent:
            there.tell(message)
        await trio.sleep(HEARTBEAT / 4)
        (there if remote_resize else here).tell(ta.Resize(1))
        await trio.sleep(HEARTBEAT / 4)
        for n in range(20, 30):
            there.tell(n)
            sent.append(n)
        await trio.sleep(HEARTBEAT * 4)
        GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)


# --- the pool stops: at once, with a drain, by its shutdown timeout ----------------------


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("drain", [False, True])
@pytest.mark.parametrize("bounded", [None, "drop_new"])
async def test_pool_stops_with_tells_queued(
    autojump_clock: trio.testing.MockClock,
    runs: RunWatch,
    routing: ta.Routing,
    drain: bool,
    bounded: Overflow | None,
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = None if bounded is None else ta.Bounded(3, overflow=bounded)
    pool = ta.Pool(
        Worker, args=(log, failed), size=2, routing=routing, mailbox=mailbox, shutdown=HEARTBEAT
    )
    async with pool_on_b(pool) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(2)] + list(range(20))
        for message in sent:
            there.tell(message)
        await trio.sleep(HEARTBEAT / 4)
        here.stop_nowait(drain=drain)
        await trio.sleep(HEARTBEAT / 4)
        for n in range(20, 25):  # (to a stopping pool: dead letters)
            there.tell(n)
            sent.append(n)
        await trio.sleep(HEARTBEAT * 4)
        GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("drain", [False, True])
async def test_pool_stops_with_sends_waiting_for_room(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    runs: RunWatch,
    routing: ta.Routing,
    drain: bool,
) -> None:
    monkeypatch.setattr(_link, "WINDOW", 16)
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = ta.Bounded(1, overflow="drop_new")
    pool = ta.Pool(
        Worker, args=(log, failed), size=2, routing=routing, mailbox=mailbox, shutdown=HEARTBEAT
    )
    async with pool_on_b(pool) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(4)] + list(range(10))
        async with trio.open_nursery() as nursery:

            async def send_all() -> None:
                for message in sent:
                    with suppress(ta.ActorStopped):
                        await there.send(message)

            nursery.start_soon(send_all)
            await trio.sleep(HEARTBEAT)
            assert here.statistics().senders_waiting >= 1
            here.stop_nowait(drain=drain)
            await trio.sleep(HEARTBEAT * 4)
            GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent[: link_of(there).told], log + failed)
        assert_counted(here, b, log)


# --- the pool restarts (a worker escalates), tells arriving meanwhile ---------------------


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_pool_restarts_with_tells_queued_and_arriving(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    pool = ta.Pool(Worker, args=(log, failed), size=2, routing=routing, supervision=ta.Escalate())
    restart = ta.Restart(max_restarts=100, backoff=ta.Backoff(min_delay=HEARTBEAT, jitter=0))
    async with pool_on_b(pool, supervision=restart) as (a, b, here, there):
        sent: list[Any] = [*range(10), ("fail", 0), *range(10, 20)]
        for message in sent:
            there.tell(message)
        await trio.sleep(HEARTBEAT * 0.6)  # (its ("fail", 0) handled: in its backoff)
        assert here.statistics().state == "restarting"
        for n in range(20, 30):  # (arriving during its backoff: queued for its workers)
            there.tell(n)
            sent.append(n)
        await trio.sleep(HEARTBEAT / 4)
        assert here.statistics().state == "restarting"
        assert here.statistics().mailbox_depth >= 10  # (and what was queued before)
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)


# --- overflow of a bounded pool (tells, not sends) ---------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("overflow", ["fail", "drop_new", "drop_old"])
async def test_tells_past_the_bound(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing, overflow: Overflow
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = ta.Bounded(2, overflow=overflow)
    pool = ta.Pool(Worker, args=(log, failed), size=2, routing=routing, mailbox=mailbox)
    async with pool_on_b(pool) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(2)] + list(range(30))
        for message in sent:
            there.tell(message)
        await trio.sleep(HEARTBEAT)
        GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)
        assert here.statistics().handled == len(log)


# --- Broadcast and Resize from another node ----------------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_broadcast_from_another_node(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    pool = ta.Pool(Worker, args=(log, failed), size=3, routing=routing)
    async with pool_on_b(pool) as (a, _b, _here, there):
        there.tell(ta.Broadcast("hello"))
        there.tell(ta.Resize(5))
        there.tell(ta.Broadcast("again"))
        await trio.sleep(HEARTBEAT * 10)
        runs.check()
        assert sorted(log) == ["again"] * 5 + ["hello"] * 3
        link = link_of(there)
        assert (link.acked, link.in_window, Node.of(a).unconfirmed) == (3, 0, 0)


# --- statistics are those of the same tells told locally -------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_statistics_match_local_tells(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing
) -> None:
    stats = []
    for remote in (False, True):
        log: list[Any] = []
        failed: list[Any] = []
        pool = ta.Pool(Worker, args=(log, failed), size=2, routing=routing, supervision=ta.Resume())
        async with pool_on_b(pool) as (_a, _b, here, there):
            target = there if remote else here
            for n in range(12):
                target.tell(("fail", n) if n % 5 == 0 else n)
            await trio.sleep(HEARTBEAT / 20)
            during = here.statistics()
            await trio.sleep(HEARTBEAT * 10)
            after = here.statistics()
            stats.append(
                (
                    during.mailbox_depth,
                    after.handled,
                    after.failures,
                    after.dead_letters,
                    after.mailbox_depth,
                )
            )
    assert stats[0] == stats[1]


# --- the sending node dies with tells queued in the pool ---------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_sender_dies_with_tells_queued_and_waiting_in_the_pool(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    runs: RunWatch,
    routing: ta.Routing,
) -> None:
    monkeypatch.setattr(_link, "WINDOW", 16)
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = ta.Bounded(2, overflow="drop_new")
    pool = ta.Pool(Worker, args=(log, failed), size=2, routing=routing, mailbox=mailbox)
    bus = MemoryBus()
    async with pool_on_b(pool, bus) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(2)] + list(range(10))
        with trio.move_on_after(HEARTBEAT):
            for message in sent:
                await there.send(message)
        await trio.sleep(HEARTBEAT / 10)
        assert here.statistics().senders_waiting >= 1
        told = link_of(there).told
        bus.disconnect(Node.of(a).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT * 10)  # (b declares a down)
        GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 10)
        runs.check()
        assert sorted(map(repr, log + failed)) == sorted(map(repr, sent[:told]))
        assert list(b.dead_letters.recent) == []
        assert_counted(here, b, log)


# --- sends that arrive while the pool restarts ---------------------------------------------


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_sends_arriving_while_a_bounded_pool_restarts_wait_for_room_none_dropped(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    runs: RunWatch,
    routing: ta.Routing,
) -> None:
    monkeypatch.setattr(_link, "WINDOW", 16)
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = ta.Bounded(1, overflow="drop_new")
    pool = ta.Pool(
        Worker,
        args=(log, failed),
        size=2,
        routing=routing,
        mailbox=mailbox,
        supervision=ta.Escalate(),
    )
    restart = ta.Restart(max_restarts=100, backoff=ta.Backoff(min_delay=HEARTBEAT, jitter=0))
    async with pool_on_b(pool, supervision=restart) as (a, b, here, there):
        await there.send(("fail", 0))
        await trio.sleep(HEARTBEAT / 4)  # (handled: in its backoff)
        assert here.statistics().state == "restarting"
        sent: list[Any] = [("fail", 0)]
        for n in range(12):  # (more than its workers hold: 2 handling, 2 queued)
            await there.send(n)
            sent.append(n)
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)
        assert sorted(log) == list(range(12))  # (none dropped: each waited for room)


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_resize_down_with_sends_waiting_for_room(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    runs: RunWatch,
    routing: ta.Routing,
) -> None:
    monkeypatch.setattr(_link, "WINDOW", 32)
    log: list[Any] = []
    failed: list[Any] = []
    mailbox = ta.Bounded(1, overflow="drop_new")
    pool = ta.Pool(
        Worker, args=(log, failed), size=4, routing=routing, mailbox=mailbox, shutdown=HEARTBEAT
    )
    async with pool_on_b(pool) as (a, b, here, there):
        sent: list[Any] = [("block", n) for n in range(4)] + list(range(16))
        async with trio.open_nursery() as nursery:

            async def send_all() -> None:
                for message in sent:
                    await there.send(message)

            nursery.start_soon(send_all)
            await trio.sleep(HEARTBEAT)
            assert here.statistics().senders_waiting >= 1
            here.tell(ta.Resize(1))
            await trio.sleep(HEARTBEAT * 4)
            GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)


# --- tells taken in untracked (no record: nobody to acknowledge to) -----------------------


@pytest.mark.parametrize("routing", [*ROUTINGS, None])
async def test_untracked_tells_into_full_bounded_workers_meet_drop_old(
    autojump_clock: trio.testing.MockClock, routing: ta.Routing | None
) -> None:
    # Before: an untracked tell from another node (a message of tells with no
    # record: sequence 0, no reply subject) was queued in a bounded worker (or
    # actor: routing None) as a notice without a sender, which "drop_old" takes for
    # a death-watch notice it never drops: ten such tells into a Bounded(2) mailbox
    # all stayed there.
    log: list[Any] = []
    mailbox = ta.Bounded(2, overflow="drop_old")
    pool = ta.Pool(
        Worker, args=(log, []), size=1, routing=routing or "round_robin", mailbox=mailbox
    )
    async with pool_on_b(pool) as (_a, b, here, _there):
        if routing is None:
            here = b.spawn(Worker, log, [], mailbox=mailbox)
        node = Node.of(b)
        _, _, path, number, _ = node.exports.ref_to_wire(here)
        here.tell(("block", 0))
        await trio.sleep(HEARTBEAT / 10)
        for n in range(10):
            node.tells.taken.receive((0, [[number, path, node.codec.encode(n)]]), None, "", 0)
        assert here.statistics().mailbox_depth == 2
        GATES.setdefault("block", trio.Event()).set()
        await trio.sleep(HEARTBEAT * 4)
        assert log == [("block", 0), 8, 9]
        assert [(d.message, d.reason) for d in b.dead_letters.recent] == [
            (n, "overflow") for n in range(8)
        ]


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("drain", [False, True])
async def test_pool_stopped_while_it_restarts_with_tells_queued(
    autojump_clock: trio.testing.MockClock, runs: RunWatch, routing: ta.Routing, drain: bool
) -> None:
    log: list[Any] = []
    failed: list[Any] = []
    pool = ta.Pool(Worker, args=(log, failed), size=2, routing=routing, supervision=ta.Escalate())
    restart = ta.Restart(max_restarts=100, backoff=ta.Backoff(min_delay=HEARTBEAT, jitter=0))
    async with pool_on_b(pool, supervision=restart) as (a, b, here, there):
        sent: list[Any] = [("fail", 0)]
        there.tell(("fail", 0))
        await trio.sleep(HEARTBEAT / 4)
        assert here.statistics().state == "restarting"
        for n in range(10):
            there.tell(n)
            sent.append(n)
        await trio.sleep(HEARTBEAT / 10)
        here.stop_nowait(drain=drain)
        await trio.sleep(HEARTBEAT * 20)
        assert_accounted(runs, a, b, there, sent, log + failed)
        assert_counted(here, b, log)

"""The census of a system's live actors (``actors/_census.py``): the handled total
counts stopped actors too, and the busiest actors come first by each key, with rates
since the previous census."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Worker
from trio_actors.actors._census import SORTS, Census, handled_total, live_cells

Clock = trio.testing.MockClock


async def test_the_handled_total_keeps_what_stopped_actors_handled() -> None:
    async with ta.open_actor_system() as system:
        a, b = system.spawn(Worker, name="a"), system.spawn(Worker, name="b")
        child = await a.ask("child")
        for n in range(5):
            a.tell(n)
            b.tell(n)
            child.tell(n)
        await trio.testing.wait_all_tasks_blocked()
        assert system.handled_by_stopped == 0
        assert (
            handled_total(system)
            == 6 + 5 + 5
            == sum(ref.statistics().handled for ref in (a, b, child))
        )
        await b.stop()
        assert system.handled_by_stopped == 5
        assert handled_total(system) == 16
        await a.stop()  # (and its child with it)
        assert system.handled_by_stopped == 16
        assert handled_total(system) == 16
        assert list(live_cells(system)) == []


async def test_restarts_keep_the_count_and_the_walk_sees_every_level() -> None:
    async with ta.open_actor_system() as system:
        a = system.spawn(Worker, name="a")
        child = await a.ask("child")
        a.tell("boom")  # (restarted: its child is stopped with the old instance)
        a.tell(1)
        await trio.testing.wait_all_tasks_blocked()
        await child.wait_stopped()
        assert a.statistics().restarts == 1
        assert handled_total(system) == 3  # "child", "boom" (failed), 1
        assert {cell.path for cell in live_cells(system)} == {"system/a"}


async def test_the_busiest_come_first_by_each_key(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        refs = [system.spawn(Worker, autojump_clock, name=f"w{n}") for n in range(5)]
        census = Census()
        first = census.busiest(system, "rate", 3, trio.current_time())
        assert (first.total, first.interval) == (5, None)
        assert [rate for _stats, _class, rate in first.actors] == [None, None, None]
        for n, ref in enumerate(refs):
            for _ in range(n * 10):
                ref.tell(0)
        refs[1].tell(0.5)  # (a long turn: the loop reads the clock after each message
        refs[2].tell("boom")  # from then on, so the next long one is w1's alone)
        await trio.testing.wait_all_tasks_blocked()
        refs[1].tell(0.25)
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(2.0)
        busiest = census.busiest(system, "rate", 3, trio.current_time())
        assert busiest.interval is not None
        assert busiest.interval >= 2.0
        paths = [stats.path for stats, _class, _rate in busiest.actors]
        assert paths == ["system/w4", "system/w3", "system/w2"]
        rates = [rate for _stats, _class, rate in busiest.actors]
        assert rates == [40 / busiest.interval, 30 / busiest.interval, 21 / busiest.interval]
        assert {cls for _stats, cls, _rate in busiest.actors} == {"Worker"}
        by_turn = census.busiest(system, "turn", 1, trio.current_time())
        assert [stats.path for stats, _c, _r in by_turn.actors] == ["system/w1"]
        assert by_turn.actors[0][0].longest_turn_seconds >= 0.25
        by_failures = census.busiest(system, "failures", 1, trio.current_time())
        assert [stats.path for stats, _c, _r in by_failures.actors] == ["system/w2"]
        by_handled = census.busiest(system, "handled", 5, trio.current_time())
        assert [stats.handled for stats, _c, _r in by_handled.actors] == [40, 30, 21, 12, 0]
        assert census.busiest(system, "restarts", 0, trio.current_time()).actors == ()


async def test_the_rate_of_an_actor_spawned_since_the_last_census_counts_from_zero(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        census = Census()
        census.busiest(system, "rate", 10, trio.current_time())
        await trio.sleep(1)
        late = system.spawn(Worker, name="late")
        for _ in range(6):
            late.tell(0)
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(1)
        busiest = census.busiest(system, "rate", 10, trio.current_time())
        assert busiest.interval == pytest.approx(2.0)
        [(stats, _cls, rate)] = busiest.actors
        assert stats.path == "system/late"
        assert rate == pytest.approx(3.0)
        census.forget()
        assert census.busiest(system, "rate", 10, trio.current_time()).interval is None


async def test_mailbox_and_dead_letters_keys_match_the_actors_statistics() -> None:
    async with ta.open_actor_system() as system:
        full = system.spawn(Worker, name="full", mailbox=ta.Bounded(2, "drop_new"))
        idle = system.spawn(Worker, name="idle")
        for n in range(5):
            full.tell(n)  # two queued, three dropped
        idle.tell(1)
        census = Census()
        by_mailbox = census.busiest(system, "mailbox", 2, trio.current_time())
        assert [(s.path, s.mailbox_depth) for s, _c, _r in by_mailbox.actors] == [
            ("system/full", 2),
            ("system/idle", 1),
        ]
        by_dead = census.busiest(system, "dead_letters", 1, trio.current_time())
        [(stats, _cls, _rate)] = by_dead.actors
        assert (stats.path, stats.dead_letters.overflow) == ("system/full", 3)


async def test_a_pool_is_sorted_by_its_own_statistics() -> None:
    async with ta.open_actor_system() as system:
        pool = system.spawn(ta.Pool(Worker, size=2), name="pool")
        for n in range(8):
            pool.tell(n)
        await trio.testing.wait_all_tasks_blocked()
        by_handled = Census().busiest(system, "handled", 1, trio.current_time())
        [(stats, _cls, _rate)] = by_handled.actors
        assert (stats.path, stats.handled) == ("system/pool", 8)  # (its workers' 4 each)
        assert handled_total(system) == 8  # (each message once: the workers')


async def test_a_bad_sort_or_limit_is_refused() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(ValueError, match="sort is one of rate, handled"):
            Census().busiest(system, "speed", 1, 0.0)
        with pytest.raises(ValueError, match="limit"):
            Census().busiest(system, "rate", -1, 0.0)
    assert SORTS == ("rate", "handled", "mailbox", "turn", "dead_letters", "failures", "restarts")


def test_every_sort_the_wire_names_is_one_the_census_can_make() -> None:
    from trio_actors.actors._census import _FROM_STATISTICS, _KEYS

    assert ("rate", *_KEYS) == SORTS
    assert set(_FROM_STATISTICS) == set(_KEYS)

"""Timers: exact on the trio clock, cancellable, no pile-up, ended with their actor."""

from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta

Clock = trio.testing.MockClock


class Log(ta.Actor):
    """Records ``(trio time, message)`` for each message; ``"get"`` returns them."""

    def __init__(self) -> None:
        self.log: list[tuple[float, Any]] = []
        self.timer: ta.Timer | None = None

    def receive(self, message: Any) -> Any:
        match message:
            case "get":
                return list(self.log)
            case ("after", delay, what):
                self.timer = self.tell_after(delay, what)
                return self.timer
            case ("every", interval, what):
                self.timer = self.tell_every(interval, what)
                return self.timer
            case "cancel":
                assert self.timer is not None
                self.timer.cancel()
            case _:
                self.log.append((trio.current_time(), message))
        return None


async def test_tell_after_fires_once_at_the_exact_virtual_time(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Log)
        start = trio.current_time()
        timer = await ref.ask(("after", 2.5, "ding"))
        assert timer.active
        assert timer.deadline == start + 2.5
        await trio.sleep(10)
        assert await ref.ask("get") == [(start + 2.5, "ding")]
        assert not timer.active
        assert timer.fired == 1
        assert system.statistics().timers == 0


async def test_tell_every_stays_on_its_grid_until_cancelled(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Log)
        start = trio.current_time()
        timer = await ref.ask(("every", 1.0, "tick"))
        assert ref.statistics().timers == 1
        await trio.sleep(3.5)
        ref.tell("cancel")
        await trio.sleep(5)
        assert await ref.ask("get") == [(start + k, "tick") for k in (1, 2, 3)]
        assert (timer.fired, timer.skipped, timer.active) == (3, 0, False)
        assert ref.statistics().timers == 0


async def test_a_slow_actor_gets_no_pile_up_of_ticks(autojump_clock: Clock) -> None:
    seen: list[float] = []
    timers: list[ta.Timer] = []

    class Slow(ta.Actor):
        async def on_start(self) -> None:
            timers.append(self.tell_every(1.0, "tick"))

        async def receive(self, message: Any) -> Any:
            seen.append(trio.current_time())
            assert self.ref.statistics().mailbox_depth <= 1
            await trio.sleep(2.4)  # slower than the period

    async with ta.open_actor_system() as system:
        start = trio.current_time()
        system.spawn(Slow)
        await trio.sleep(10.2)
        # Due at 1, 2, 3, ...: the tick of 1 is handled at once (busy until 3.4);
        # the one of 2 is queued, so 3 is skipped; 2 is handled at 3.4 (until 5.8);
        # 4 queued, 5 skipped; 4 handled at 5.8 (until 8.2); 6 queued, 7 and 8
        # skipped; 6 handled at 8.2; 9 queued, 10 skipped.
        assert [round(t - start, 6) for t in seen] == [1.0, 3.4, 5.8, 8.2]
        [timer] = timers
        assert (timer.fired, timer.skipped) == (5, 5)


async def test_ticks_missed_while_the_system_was_busy_are_skipped(autojump_clock: Clock) -> None:
    class Busy(ta.Actor):
        def __init__(self) -> None:
            self.ticks: list[float] = []

        def on_start(self) -> None:
            self.timer = self.tell_every(1.0, "tick")

        def receive(self, message: Any) -> Any:
            if message == "block":
                autojump_clock.jump(4.5)  # a handler that blocks the thread
            elif message == "get":
                return self.ticks, self.timer
            else:
                self.ticks.append(trio.current_time())
            return None

    async with ta.open_actor_system() as system:
        start = trio.current_time()
        ref = system.spawn(Busy)
        await trio.sleep(1.5)
        ref.tell("block")  # from 1.5 to 6.0: ticks due at 2..6 come late
        await trio.sleep_until(start + 8.5)
        ticks, timer = await ref.ask("get")
        # One tick at 6.0 for the ones missed (no burst), then back on the grid.
        assert [round(t - start, 6) for t in ticks] == [1.0, 6.0, 7.0, 8.0]
        assert timer.skipped == 4


async def test_cancel_withdraws_a_tick_that_is_already_queued(autojump_clock: Clock) -> None:
    class Holder(ta.Actor):
        def __init__(self, gate: trio.Event) -> None:
            self.gate = gate
            self.got: list[Any] = []

        async def receive(self, message: Any) -> Any:
            match message:
                case "start":
                    self.timer = self.tell_after(1.0, "ding")
                case "wait":
                    await self.gate.wait()
                    self.timer.cancel()  # the tick is queued behind us by now
                case "get":
                    return self.got
                case _:
                    self.got.append(message)
            return None

    async with ta.open_actor_system() as system:
        gate = trio.Event()
        ref = system.spawn(Holder, gate)
        ref.tell("start")
        ref.tell("wait")
        await trio.sleep(2)  # the tick is queued while the actor waits
        assert ref.statistics().mailbox_depth == 1
        gate.set()
        await trio.sleep(1)
        assert await ref.ask("get") == []
        assert ref.statistics().withdrawn == 1


async def test_timers_end_when_their_actor_stops(autojump_clock: Clock) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Log)
        timer = await ref.ask(("every", 1.0, "tick"))
        await ref.ask(("after", 5.0, "late"))
        assert system.statistics().timers == 2
        await trio.sleep(2.5)
        await ref.stop()
        assert not timer.active
        assert system.statistics().timers == 0
        await trio.sleep(10)
        assert system.dead_letters.count == 0  # no tick was even sent


async def test_timers_end_when_their_actor_restarts(autojump_clock: Clock) -> None:
    class Fragile(Log):
        def receive(self, message: Any) -> Any:
            if message == "boom":
                raise RuntimeError("boom")
            return super().receive(message)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Fragile)
        timer = await ref.ask(("every", 1.0, "tick"))
        await trio.sleep(1.5)
        ref.tell("boom")
        await trio.sleep(5)
        assert not timer.active
        assert await ref.ask("get") == []  # the fresh instance got no tick
        assert ref.statistics().timers == 0


async def test_a_key_replaces_the_active_timer_with_that_key(autojump_clock: Clock) -> None:
    class Idle(ta.Actor):
        """The idle-timeout pattern: every message re-arms the same keyed timer."""

        def __init__(self) -> None:
            self.timeouts: list[float] = []

        def receive(self, message: Any) -> Any:
            if message == "timeout":
                self.timeouts.append(trio.current_time())
            elif message == "get":
                return self.timeouts
            else:
                self.tell_after(3.0, "timeout", key="idle")
            return None

    async with ta.open_actor_system() as system:
        start = trio.current_time()
        ref = system.spawn(Idle)
        for _ in range(1000):
            ref.tell("activity")
            await trio.sleep(0.001)
        assert ref.statistics().timers == 1
        heap = system._timer_service._heap  # type: ignore[union-attr]
        assert len(heap) < 200  # ended timers do not pile up in the heap
        await trio.sleep(5)
        [fired] = await ref.ask("get")
        assert fired == pytest.approx(start + 0.999 + 3.0, abs=0.002)


async def test_a_timer_to_another_actor_ends_when_that_one_stops(autojump_clock: Clock) -> None:
    class Sender(ta.Actor):
        def receive(self, message: Any) -> Any:
            return self.tell_every(1.0, "ping", to=message)

    async with ta.open_actor_system() as system:
        start = trio.current_time()
        target = system.spawn(Log)
        sender = system.spawn(Sender)
        timer = await sender.ask(target)
        await trio.sleep(2.5)
        pings = await target.ask("get")
        await target.stop()
        await trio.sleep(5)
        assert pings == [(start + 1, "ping"), (start + 2, "ping")]
        assert not timer.active
        assert [(d.message, d.reason) for d in system.dead_letters.recent] == [("ping", "stopped")]


async def test_ticks_to_a_full_bounded_mailbox_obey_its_overflow(autojump_clock: Clock) -> None:
    class Stuck(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep_forever()

    class Sender(ta.Actor):
        def receive(self, message: Any) -> Any:
            self.tell_after(1.0, "late", to=message)

    async with ta.open_actor_system() as system:
        stuck = system.spawn(Stuck, mailbox=ta.Bounded(1))
        stuck.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        stuck.tell("fills it")
        system.spawn(Sender).tell(stuck)
        await trio.sleep(2)
        assert [(d.message, d.reason) for d in system.dead_letters.recent] == [("late", "overflow")]


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda a: a.tell_after(-1, "x"), ValueError, r"tell_after\(\) delay must be a finite"),
        (lambda a: a.tell_after("1", "x"), TypeError, "must be a number of seconds"),
        (lambda a: a.tell_every(0, "x"), ValueError, r"interval must be a finite .* >= 1e-06"),
        (lambda a: a.tell_every(1e-300, "x"), ValueError, r"interval .* >= 1e-06 \(the shortest"),
        (
            lambda a: a.tell_after(10**400, "x"),
            ValueError,
            r"tell_after\(\) delay must be a finite",
        ),
        (lambda a: a.tell_every(1, "x", first=-2), ValueError, "delay must be"),
        (lambda a: a.tell_after(1, "x", to="me"), TypeError, r"\(to=...\) needs an ActorRef"),
    ],
)
async def test_bad_timer_arguments_are_refused(call: Any, error: type, text: str) -> None:
    class Trier(ta.Actor):
        def receive(self, message: Any) -> Any:
            call(self)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Trier, supervision=ta.Resume())
        with pytest.raises(error, match=text):
            await ref.ask("go")


async def test_a_stopping_actor_cannot_start_a_timer() -> None:
    errors: list[str] = []

    class Late(ta.Actor):
        def receive(self, message: Any) -> Any:
            return None

        def on_stop(self) -> None:
            try:
                self.tell_after(1, "x")
            except ta.ActorError as error:
                errors.append(str(error))

    async with ta.open_actor_system() as system:
        await system.spawn(Late).stop()
    assert len(errors) == 1
    assert "cannot start a timer: it is stopping" in errors[0]


async def test_a_fired_one_shot_tick_still_queued_is_withdrawn_by_a_restart(
    autojump_clock: Clock,
) -> None:
    class Held(ta.Actor):
        def __init__(self, gate: trio.Event, got: list[Any]) -> None:
            self.gate = gate
            self.got = got

        async def receive(self, message: Any) -> Any:
            match message:
                case "arm":
                    self.tell_after(1.0, "tick from the old instance")
                case "hold":
                    await self.gate.wait()
                    raise RuntimeError("fails with the tick queued behind it")
                case _:
                    self.got.append(message)
            return None

    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Held, gate, got)
        ref.tell("arm")
        ref.tell("hold")
        await trio.sleep(2)  # the one-shot has fired: its tick is queued
        assert ref.statistics().mailbox_depth == 1
        gate.set()
        await trio.sleep(1)
        ref.tell("after")
        await trio.sleep(1)
        assert got == ["after"]
        assert ref.statistics().withdrawn == 1


async def test_a_new_timer_with_the_key_withdraws_the_old_ones_queued_tick(
    autojump_clock: Clock,
) -> None:
    class Held(ta.Actor):
        def __init__(self, gate: trio.Event, got: list[Any]) -> None:
            self.gate = gate
            self.got = got

        async def receive(self, message: Any) -> Any:
            match message:
                case "arm":
                    self.tell_after(1.0, "old", key="k")
                case "hold":
                    await self.gate.wait()
                    self.tell_after(1.0, "new", key="k")  # the old tick is queued
                case _:
                    self.got.append(message)
            return None

    async with ta.open_actor_system() as system:
        gate = trio.Event()
        got: list[Any] = []
        ref = system.spawn(Held, gate, got)
        ref.tell("arm")
        ref.tell("hold")
        await trio.sleep(2)
        gate.set()
        await trio.sleep(2)
        assert got == ["new"]
        assert ref.statistics().timers == 0


async def test_a_periodic_timer_does_not_drift(autojump_clock: Clock) -> None:
    timers: list[ta.Timer] = []

    class Ticker(ta.Actor):
        def on_start(self) -> None:
            timers.append(self.tell_every(0.1, "tick"))

        def receive(self, message: Any) -> Any:
            return None

    async with ta.open_actor_system() as system:
        start = trio.current_time()
        system.spawn(Ticker)
        await trio.sleep(1000.05)
        [timer] = timers
        assert timer.fired == 10_000
        assert timer.deadline == start + 0.1 + 10_000 * 0.1  # computed, not summed


def test_timers_keep_firing_for_actors_a_cancelled_exit_has_not_reached() -> None:
    # The block is cancelled from outside; the exit stops the newer actor first,
    # whose on_stop takes 0.1 s: meanwhile the older actor's timer keeps ticking.
    ticks: list[float] = []

    class Ticking(ta.Actor):
        def on_start(self) -> None:
            self.tell_every(0.01, "tick")

        def receive(self, message: Any) -> Any:
            ticks.append(trio.current_time())

    class SlowToStop(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

        async def on_stop(self) -> None:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.1)

    async def main() -> float:
        with trio.move_on_after(1.0):
            async with ta.open_actor_system() as system:
                system.spawn(Ticking)
                system.spawn(SlowToStop)
                await trio.sleep_forever()
        return trio.current_time()

    ended = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    after_the_cancel = [t for t in ticks if t > 1.0]
    assert len(after_the_cancel) >= 9, after_the_cancel
    assert ended >= 1.1


class Ticks(ta.Actor):
    """Counts the ticks of a timer it starts; "busy" keeps it in one handler."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.ticks = 0

    def on_start(self) -> None:
        self.tell_every(self.period, "tick")

    async def receive(self, message: Any) -> Any:
        if message == "tick":
            self.ticks += 1
        elif message == "busy":
            await trio.sleep(2.5)
        return self.ticks


async def test_a_periodic_timer_ticks_again_after_each_tick_is_handled(
    autojump_clock: Clock,
) -> None:
    # Each handled tick tells its timer it is done: without that notice the timer
    # waits for its first tick forever and never sends a second.
    async with ta.open_actor_system() as system:
        ref = system.spawn(Ticks, 1.0)
        await trio.sleep(5.5)
        assert await ref.ask("count") == 5


async def test_a_tick_dropped_by_a_full_mailbox_lets_the_timer_go_on(
    autojump_clock: Clock,
) -> None:
    # A dropped tick is taken back: otherwise the timer keeps waiting for the tick
    # the mailbox dropped, and never ticks again.
    async with ta.open_actor_system() as system:
        ref = system.spawn(Ticks, 1.0, mailbox=ta.Bounded(1, "drop_new"))
        ref.tell("busy")  # handled from t=0 to 2.5
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")  # the mailbox is full: the ticks at 1 and 2 are dropped
        await trio.sleep(5.5)
        assert ref.statistics().dead_letters.overflow == 2
        assert await ref.ask("count") == 3  # the ticks at 3, 4 and 5

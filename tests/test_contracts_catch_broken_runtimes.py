"""Each contract catches a deliberately broken runtime (a mutant).

A mutant is a monkeypatch that removes one promise from the runtime: the withdrawal
of a cancelled ask, the yield between rounds, the cleanup cadence, a dead letter...
For every contract at least one mutant must make it fail, or the contract proves
nothing. Each mutant is also shown to leave some other contract passing, so that it
breaks one promise rather than the whole runtime. A contract must catch its mutant by
itself: debug mode's checks (which would stop many of these broken runtimes first)
only collect here.
"""

import math
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.lowlevel

import trio_actors as ta
from trio_actors import ActorStopped, RemoteError, ServingPolicy
from trio_actors._core import (
    _bounded,
    _bounded_cell,
    _cell,
    _dispatcher,
    _envelope,
    _failure,
    _handler_call,
    _idle_ask,
    _kinds,
    _ref,
    _restarting,
    _round_clock,
    _stopping,
    _stranded,
    _task_serving,
)
from trio_actors._core._compiled import COMPILED_MODULES
from trio_actors.actors import _naming, _system
from trio_actors.actors._pool import _balancing
from trio_actors.actors._pool import _cell as _pool_cell
from trio_actors.contracts import REGISTRY
from trio_actors.remote import (
    _children,
    _codec,
    _fates,
    _groups,
    _inbound,
    _link,
    _members,
    _node,
    _peers,
    _requests,
    _spawning,
    _subjects,
    _taken_in,
    _tells,
    _tracked,
    _watches,
)

Mutant = Callable[[pytest.MonkeyPatch], None]


pytestmark = pytest.mark.usefixtures("debug_checks_only_collect")


def reply_loses_the_value(mp: pytest.MonkeyPatch) -> None:
    original = _envelope.Ask.reply
    mp.setattr(_envelope.Ask, "reply", lambda self, value: original(self, None))


def async_handlers_overlap(mp: pytest.MonkeyPatch) -> None:
    async def serve_concurrently(policy: Any, cell: Any) -> None:
        async with trio.open_nursery() as nursery:
            while cell.has_queued():
                nursery.start_soon(_handler_call.handle_async, cell, cell.pop_next())

    mp.setattr(_task_serving, "serve_async_turns", serve_concurrently)


def on_start_is_skipped(mp: pytest.MonkeyPatch) -> None:
    original = _kinds.handler_kinds

    def kinds(cls: type) -> Any:
        return attrs.evolve(original(cls), has_on_start=False, on_start_async=False)

    mp.setattr(_naming, "handler_kinds", kinds)  # (spawn checks a new instance there)
    mp.setattr(_system, "known_kinds", lambda cls: None)  # every spawn takes the checks


def refused_ask_skips_the_checkpoint(mp: pytest.MonkeyPatch) -> None:
    original = _cell.ActorCell.ask_message

    async def ask(self: Any, message: Any) -> Any:
        if not self.accepting:
            raise ActorStopped("refused without a checkpoint")
        return await original(self, message)

    mp.setattr(_cell.ActorCell, "ask_message", ask)


def tell_to_stopped_vanishes(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_cell.ActorCell, "tell_refused", lambda self, message: None)


def cancelled_ask_is_not_withdrawn(mp: pytest.MonkeyPatch) -> None:
    original = _envelope.Ask.start

    def start(self: Any) -> bool:
        if self.state is _envelope.AskState.WITHDRAWN:
            self.state = _envelope.AskState.ABANDONED  # handled anyway, reply dropped
            return True
        return bool(original(self))

    mp.setattr(_envelope.Ask, "start", start)


def async_handler_not_cancelled_with_its_asker(mp: pytest.MonkeyPatch) -> None:
    original = _envelope.Ask._abort

    def abort(self: Any, raise_cancel: Any) -> Any:
        if self.state is _envelope.AskState.RUNNING:
            self.state = _envelope.AskState.ABANDONED
            return trio.lowlevel.Abort.SUCCEEDED  # but the handler runs on
        return original(self, raise_cancel)

    mp.setattr(_envelope.Ask, "_abort", abort)


def running_ask_ignores_cancellation(mp: pytest.MonkeyPatch) -> None:
    original = _envelope.Ask._abort

    def abort(self: Any, raise_cancel: Any) -> Any:
        if self.state is _envelope.AskState.RUNNING:
            return trio.lowlevel.Abort.FAILED  # the asker waits for the reply
        return original(self, raise_cancel)

    mp.setattr(_envelope.Ask, "_abort", abort)


def idle_ask_skips_its_last_checkpoint(mp: pytest.MonkeyPatch) -> None:
    # An ask answered in the asker's task returns the reply without the checkpoint
    # after the handler, so a cancellation that arrived meanwhile is lost.
    async def ask_idle(cell: Any, message: Any, task: Any) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        result = cell.receive(message)
        cell.handled += 1
        return result

    mp.setattr(_idle_ask, "ask_idle", ask_idle)


def idle_ask_ignores_earlier_cancellation(mp: pytest.MonkeyPatch) -> None:
    # An ask answered in the asker's task runs the handler before its first cancel
    # point: an asker cancelled beforehand still gets its message handled.
    async def ask_idle(cell: Any, message: Any, task: Any) -> Any:
        result = cell.receive(message)
        cell.handled += 1
        await trio.lowlevel.checkpoint()
        return result

    mp.setattr(_idle_ask, "ask_idle", ask_idle)


def idle_ask_is_no_checkpoint(mp: pytest.MonkeyPatch) -> None:
    async def ask_idle(cell: Any, message: Any, task: Any) -> Any:
        cell.handled += 1
        return cell.receive(message)

    mp.setattr(_idle_ask, "ask_idle", ask_idle)


def stranded_tells_vanish(mp: pytest.MonkeyPatch) -> None:
    async def clean(cell: Any, stranded: Any, cadence: Any) -> None:
        while stranded:
            item = stranded.popleft()
            if type(item) is _envelope.Ask:
                item.fail(ActorStopped("stranded"))

    mp.setattr(_stopping, "clean_stranded", clean)


def turns_never_end_the_round(mp: pytest.MonkeyPatch) -> None:
    # An actor whose turn left work is served again without a yield in between.
    mp.setattr(_cell.ActorCell, "served_in", property(lambda self: 0, lambda self, v: None))


def no_per_turn_budget(mp: pytest.MonkeyPatch) -> None:
    original = _dispatcher.Dispatcher.__init__

    def init(self: Any, policy: ServingPolicy, nursery: Any) -> None:
        original(self, attrs.evolve(policy, batch=10**9), nursery)

    mp.setattr(_dispatcher.Dispatcher, "__init__", init)


def no_time_slice(mp: pytest.MonkeyPatch) -> None:
    def next_check(self: Any, used: int, *args: Any) -> int:
        return 0 if used >= self.policy.batch else self.policy.batch

    mp.setattr(_round_clock.RoundClock, "next_check", next_check)


def cleanup_without_cadence(mp: pytest.MonkeyPatch) -> None:
    async def spend(self: Any, units: int = 1) -> None:
        self.used = 0  # never yields

    mp.setattr(_stranded.CleanupCadence, "spend", spend)


def drain_is_ignored(mp: pytest.MonkeyPatch) -> None:
    original = _cell.ActorCell.begin_stop

    def begin_stop(self: Any, *, drain: bool, cancel_handler: bool) -> None:
        original(self, drain=False, cancel_handler=cancel_handler)

    mp.setattr(_cell.ActorCell, "begin_stop", begin_stop)


def stop_returns_before_the_actor_stopped(mp: pytest.MonkeyPatch) -> None:
    async def stop(self: Any, *, drain: bool) -> None:
        self.begin_stop(drain=drain, cancel_handler=True)
        await trio.lowlevel.checkpoint()

    mp.setattr(_cell.ActorCell, "stop_and_wait", stop)


def system_exit_stops_nothing(mp: pytest.MonkeyPatch) -> None:
    async def shutdown(self: Any) -> None:
        self._closed = True

    mp.setattr(_system.ActorSystem, "_shutdown", shutdown)


def self_ask_is_not_detected(mp: pytest.MonkeyPatch) -> None:
    original = _cell.ActorCell.ask_message

    async def ask(self: Any, message: Any) -> Any:
        saved, self.serving_task = self.serving_task, None
        try:
            coroutine = original(self, message)
            return await coroutine
        finally:
            self.serving_task = saved

    mp.setattr(_cell.ActorCell, "ask_message", ask)
    mp.setattr(_cell.ActorCell, "stop_and_wait", _stop_without_self_check)


async def _stop_without_self_check(self: Any, *, drain: bool) -> None:
    self.begin_stop(drain=drain, cancel_handler=True)
    await self.wait_stopped()


def restart_keeps_the_old_instance(mp: pytest.MonkeyPatch) -> None:
    def install(cell: Any, instance: Any, kinds: Any) -> None:
        cell.started = False  # "restarts" the same instance
        cell.inline_ready = False
        cell.refresh_tell_paths()

    mp.setattr(_restarting, "install", install)


def intensity_is_never_exceeded(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_failure.RestartWindow, "record", lambda self, now, within: 1)


def watchers_are_never_told(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_stopping, "notify_watchers", lambda target: None)


def parents_stop_before_children(mp: pytest.MonkeyPatch) -> None:
    original = _system.ActorSystem._stop_order
    mp.setattr(_system.ActorSystem, "_stop_order", lambda self: original(self)[::-1])

    async def stop_children(cell: Any) -> None:
        for child in list((cell.children or {}).values()):
            child.begin_stop(drain=False, cancel_handler=True)

    mp.setattr(_stopping, "stop_children", stop_children)


def send_does_not_wait_for_room(mp: pytest.MonkeyPatch) -> None:
    async def send(self: Any, message: Any) -> None:
        self.enqueue(message)  # whether or not there is room
        await trio.lowlevel.checkpoint()

    mp.setattr(_bounded_cell.BoundedCell, "send_message", send)


def waiting_senders_are_admitted_newest_first(mp: pytest.MonkeyPatch) -> None:
    def admit_newest(self: Any) -> Any:
        task = list(self._waiting)[-1]
        message = self._waiting.pop(task)
        trio.lowlevel.reschedule(task)
        return message

    mp.setattr(_bounded.WaitingSenders, "admit_oldest", admit_newest)


def cancelled_send_is_queued_anyway(mp: pytest.MonkeyPatch) -> None:
    async def wait(self: Any, task: Any, message: Any, on_cancelled: Any) -> None:
        self._waiting[task] = message
        cell = on_cancelled.__self__

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            del self._waiting[task]
            cell.enqueue(message)  # queued although its sender was cancelled
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    mp.setattr(_bounded.WaitingSenders, "wait", wait)


def asks_refused_while_the_mailbox_is_full(mp: pytest.MonkeyPatch) -> None:
    # The behaviour before asks waited for room: MailboxFull at once.
    original = _bounded_cell.BoundedCell.queue_ask

    async def queue_ask(self: Any, message: Any, task: Any, ask: Any = None) -> Any:
        if self.is_full():
            self.failed_back += 1
            await trio.lowlevel.checkpoint()
            raise ta.MailboxFull(self.full_text("the ask was refused"))
        return await original(self, message, task, ask)

    mp.setattr(_bounded_cell.BoundedCell, "queue_ask", queue_ask)


def asks_skip_the_wait(mp: pytest.MonkeyPatch) -> None:
    async def queue_ask(self: Any, message: Any, task: Any, ask: Any = None) -> Any:
        ask = _envelope.Ask(self, message, task) if ask is None else ask
        self.queue_envelope(ask)  # whether or not there is room
        return await ask.wait()

    mp.setattr(_bounded_cell.BoundedCell, "queue_ask", queue_ask)


def asks_jump_the_line(mp: pytest.MonkeyPatch) -> None:
    def add(self: Any, envelope: Any) -> None:
        self._waiting = {envelope: _bounded._ENVELOPE, **self._waiting}

    mp.setattr(_bounded.WaitingSenders, "add", add)


def cancelled_waiting_ask_stays_in_line(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_bounded.WaitingSenders, "discard", lambda self, envelope: False)


def balancing_pool_ignores_its_bound(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_balancing, "queue_full", lambda pool: False)


def overflow_is_ignored(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_bounded_cell.BoundedCell, "is_full", lambda self: False)


def drop_old_drops_the_newest(mp: pytest.MonkeyPatch) -> None:
    def overflow(self: Any, message: Any, *, raising: bool) -> None:
        self.overflow_letters += 1
        self.system.dead_letters.record(self, message, "overflow")

    mp.setattr(_bounded_cell.BoundedCell, "overflow", overflow)


def overflow_letters_vanish(mp: pytest.MonkeyPatch) -> None:
    original = _bounded_cell.BoundedCell.overflow

    def overflow(self: Any, message: Any, *, raising: bool) -> None:
        if self.bounded.overflow == "drop_new":
            return  # the message is dropped without a dead letter
        original(self, message, raising=raising)

    mp.setattr(_bounded_cell.BoundedCell, "overflow", overflow)


def timers_outlive_their_actor(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_cell.ActorCell, "end_timers", lambda self: None)


def cancel_leaves_the_queued_tick(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_envelope.Notice, "withdraw", lambda self: None)


def exit_refuses_everything_first(mp: pytest.MonkeyPatch) -> None:
    """The exit before T25/T29: every actor stops accepting at once, then the stops
    finish newest first (a newer actor's shielded ask to an older one is stranded
    and waits for a cleanup that comes only after its own stop)."""

    async def shutdown(self: Any) -> None:
        self._closed = True
        plan = self._stop_order()
        elsewhere = set()
        for cell in plan:
            if not cell.accepting:
                elsewhere.add(cell)  # its stop task finishes it
            cell.begin_stop(drain=False, cancel_handler=True, stop_task=False)
        cadence = _stranded.CleanupCadence(self._serving.cleanup_batch)
        for cell in plan:
            if cell in elsewhere:
                with trio.CancelScope(shield=True):
                    await cell.wait_stopped()
            elif not _stopping.finish_idle_stop(cell):
                await _stopping.finish_stop(cell, cadence)

    mp.setattr(_system.ActorSystem, "_shutdown", shutdown)


def children_stop_all_at_once(mp: pytest.MonkeyPatch) -> None:
    """Every child begins its stop at once, then all are waited for."""

    async def stop_children(cell: Any) -> None:
        children = list(reversed((cell.children or {}).values()))
        for child in children:
            child.begin_stop(drain=False, cancel_handler=True)
        with trio.CancelScope(shield=True):
            for child in children:
                await child.wait_stopped()

    mp.setattr(_stopping, "stop_children", stop_children)
    mp.setattr(_restarting, "stop_children", stop_children)


def cleanup_waits_for_the_handler(mp: pytest.MonkeyPatch) -> None:
    """Stranded asks fail only after the actor's own handler has finished."""

    async def wait_and_clean(cell: Any, cadence: Any, deadline: float) -> float:
        with trio.CancelScope(shield=True):
            await cell.wait_not_served()
            if cell.stranded:
                await _stranded.clean_stranded(cell, cell.stranded, cadence)
            cell.stranded = None
            await _stopping.stop_children(cell)
        return 0.0

    mp.setattr(_stopping, "_wait_and_clean", wait_and_clean)


def system_cancellation_ends_the_dispatcher(mp: pytest.MonkeyPatch) -> None:
    """The dispatcher is not shielded: a cancelled system block ends the serving of
    plain actors the exit has not reached yet."""

    async def run(self: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while not self.closed:
            if not self.run_queue:
                self.parked = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._unpark)
                continue
            self._serve_round(self.run_queue)
            if self.run_queue:
                await trio.lowlevel.checkpoint()

    mp.setattr(_dispatcher.Dispatcher, "run", run)


def refused_tells_counted_twice(mp: pytest.MonkeyPatch) -> None:
    # The dead letter is made once; only the count doubles (T21 sees nothing).
    original = _cell.ActorCell.tell_refused

    def counted_twice(self: Any, message: Any) -> None:
        original(self, message)
        self.stopped_letters += 1

    mp.setattr(_cell.ActorCell, "tell_refused", counted_twice)


def failed_back_asks_counted_twice(mp: pytest.MonkeyPatch) -> None:
    original = _cell.ActorCell._refuse_ask

    async def counted_twice(self: Any) -> Any:
        self.failed_back += 1
        return await original(self)

    mp.setattr(_cell.ActorCell, "_refuse_ask", counted_twice)


def expected_errors_are_failures(mp: pytest.MonkeyPatch) -> None:
    # The runtime before expected errors: every exception from receive is a failure.
    mp.setattr(_failure, "handler_failed", _failure.handler_misused)


def only_exact_expected_types(mp: pytest.MonkeyPatch) -> None:
    # A subclass of a declared error is a failure (type() is instead of isinstance).
    def handler_failed(cell: Any, error: BaseException, message: Any) -> None:
        if type(error) in cell.kinds.expected_errors:
            cell.expected_errors += 1
            cell.system.expected_errors += 1
        else:
            _failure.handler_misused(cell, error, message)

    mp.setattr(_failure, "handler_failed", handler_failed)


def backoff_jitter_unseeded(mp: pytest.MonkeyPatch) -> None:
    # The runtime before seeds: the jitter's random source ignores the seed.
    original = _system.ActorSystem.__init__

    def init(self: Any, *args: Any) -> None:
        original(self, *args)
        self._random = random.Random()

    mp.setattr(_system.ActorSystem, "__init__", init)


def no_shutdown_timeout(mp: pytest.MonkeyPatch) -> None:
    # The runtime before shutdown timeouts: every stop waits as long as it takes.
    mp.setattr(_system, "check_shutdown", lambda shutdown: math.inf)


def drain_ignores_the_shutdown_timeout(mp: pytest.MonkeyPatch) -> None:
    original = _stopping._wait_and_clean

    async def unbounded(cell: Any, cadence: Any, deadline: float) -> float:
        return await original(cell, cadence, math.inf)

    mp.setattr(_stopping, "_wait_and_clean", unbounded)


def restart_on_stop_is_unbounded(mp: pytest.MonkeyPatch) -> None:
    original = _stopping.run_on_stop

    async def unbounded(cell: Any, deadline: float) -> None:
        await original(cell, math.inf)

    mp.setattr(_restarting, "run_on_stop", unbounded)


def group_restarts_only_the_failed_child(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_restarting, "group_members", lambda failed, strategy: [failed])


def group_tears_down_oldest_first(mp: pytest.MonkeyPatch) -> None:
    async def teardown_turn(self: Any, cell: Any) -> None:
        older = self.members[: self.members.index(cell)]
        while not all(member in self._torn_down for member in older):
            await self._changed.park()

    mp.setattr(_restarting.GroupRestart, "teardown_turn", teardown_turn)


def group_starts_all_at_once(mp: pytest.MonkeyPatch) -> None:
    # Every member starts when all are torn down: a plain on_start (inline) then
    # runs before an older member's async one.
    async def start_turn(self: Any, cell: Any) -> None:
        while len(self._torn_down) < len(self.members):
            await self._changed.park()

    mp.setattr(_restarting.GroupRestart, "start_turn", start_turn)


def group_leaves_busy_siblings_running(mp: pytest.MonkeyPatch) -> None:
    # A sibling's teardown turn lets its running async handler finish first.
    def take_down(member: Any, delay: float) -> None:
        if member.restart_type == "temporary":
            member.begin_stop(drain=False, cancel_handler=False)
        else:
            _failure.begin_restart(member, delay)

    mp.setattr(_restarting, "take_down", take_down)


def group_takes_every_member_down_at_once(mp: pytest.MonkeyPatch) -> None:
    # The group restart before T29's rule for siblings: every member moves to
    # RESTARTING when the first fails, so a newer member's on_stop cannot ask an
    # older one that is still to be torn down.
    original = _restarting.GroupRestart.join

    def join(self: Any, members: Any, failed: Any, delay: float, error: Any) -> None:
        original(self, members, failed, delay, error)
        for member in self.members:
            if member not in self._taken and member.state in _restarting._MAY_JOIN:
                self._taken.add(member)
                _restarting.take_down(member, delay)

    mp.setattr(_restarting.GroupRestart, "join", join)


def group_intensity_counted_per_child(mp: pytest.MonkeyPatch) -> None:
    original = _failure.restart_delay

    def per_child(
        cell: Any, strategy: Any, error: Any, group: Any = None, *, cancel_handler: bool = False
    ) -> Any:
        return original(cell, strategy, error, cancel_handler=cancel_handler)

    mp.setattr(_failure, "restart_delay", per_child)


# --- across nodes (RT contracts) ------------------------------------------------------


def tuples_cross_as_lists(mp: pytest.MonkeyPatch) -> None:
    original = _codec.Codec._ext_hook

    def as_lists(self: Any, code: int, data: Any) -> Any:
        value = original(self, code, data)
        return list(value) if code == _codec._TUPLE else value

    mp.setattr(_codec.Codec, "_ext_hook", as_lists)


def remote_errors_lose_their_type(mp: pytest.MonkeyPatch) -> None:
    original = _codec.Codec.decode_error

    def always_remote(self: Any, data: Any) -> BaseException:
        error = original(self, data)
        return error if isinstance(error, ActorStopped) else RemoteError("?", str(error))

    mp.setattr(_codec.Codec, "decode_error", always_remote)


def remote_tells_handled_in_tasks(mp: pytest.MonkeyPatch) -> None:
    original = _taken_in.TakenIn.receive

    def in_tasks(self: Any, body: Any, reply: Any, record: str, sequence: int) -> None:
        first, tells = body
        for tell in tells:  # (each tell of the message in a task of its own)

            async def later(tell: Any = tell) -> None:
                original(self, (first, [tell]), reply, record, sequence)

            self._node._nursery.start_soon(later)

    mp.setattr(_taken_in.TakenIn, "receive", in_tasks)


def ask_from_a_closed_node_skips_the_checkpoint(mp: pytest.MonkeyPatch) -> None:
    original = _requests.Requests.ask

    async def ask(self: Any, cell: Any, message: Any) -> Any:
        if self._node.closed:
            raise ActorStopped("this node has left the cluster")
        return await original(self, cell, message)

    mp.setattr(_requests.Requests, "ask", ask)


def unreachable_tells_vanish(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_fates.Fates, "on_unreachable", lambda self, message: None)


def remote_asks_queued_by_tasks(mp: pytest.MonkeyPatch) -> None:
    # (as before the envelope: an ask from another node was queued by a task of its
    # own, so a tell that arrived after it could be queued first)
    mp.setattr(_cell.ActorCell, "accept_ask", lambda self, envelope: False)


def remote_sends_overtake_waiting_tells(mp: pytest.MonkeyPatch) -> None:
    # (an ask, a stop, a reply leaves while tells made before it wait in the outbox)
    def without_the_outbox(self: Any, subject: str, data: bytes, reply: Any = None) -> None:
        self.transport.publish(subject, data, reply=reply)

    mp.setattr(_tells.Tells, "out", without_the_outbox)


def remote_answers_overtake_waiting_tells(mp: pytest.MonkeyPatch) -> None:
    # (as the first outbox did: a handler's answer was published past the tells it made)
    def answer_at_once(self: Any, envelope: Any, value: Any, error: Any) -> None:
        self.forget(envelope)
        answer = msgspec.Raw(self._node.codec.encode(value))
        self._node.transport.publish(envelope.answer_to, _subjects.encode((True, answer)))

    mp.setattr(_inbound.Answers, "answer", answer_at_once)


def remote_cancellation_is_ignored(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_inbound.RemoteAsk, "cancel", lambda self: None)


def remote_running_asks_not_cancelled(mp: pytest.MonkeyPatch) -> None:
    original = _inbound.RemoteAsk.cancel

    def queued_only(self: Any) -> None:
        if self.state is _envelope.AskState.QUEUED:
            original(self)

    mp.setattr(_inbound.RemoteAsk, "cancel", queued_only)


def remote_stranded_asks_not_failed_back(mp: pytest.MonkeyPatch) -> None:
    original = _inbound.RemoteAsk.fail

    def running_only(self: Any, error: BaseException) -> bool:
        return False if self.state is _envelope.AskState.QUEUED else original(self, error)

    mp.setattr(_inbound.RemoteAsk, "fail", running_only)


def remote_stop_ignores_drain(mp: pytest.MonkeyPatch) -> None:
    original = _inbound.Answers.receive_stop

    def never_drained(self: Any, cell: Any, drain: bool, reply: Any) -> None:
        original(self, cell, False, reply)

    mp.setattr(_inbound.Answers, "receive_stop", never_drained)


def lost_tells_not_counted(mp: pytest.MonkeyPatch) -> None:
    async def nothing(self: Any, peer: Any, link: Any, told: int) -> None:
        await trio.lowlevel.checkpoint()

    mp.setattr(_fates.Fates, "count_lost", nothing)


def tells_acknowledged_when_taken_in(mp: pytest.MonkeyPatch) -> None:
    """The old promise: a tell acknowledged once queued, not once it has ended."""

    def at_once(self: Any, tells: int) -> Any:
        self.ended_now(tells)
        run = _tracked.Run(self, 0)
        run.done = True
        return run

    mp.setattr(_tracked.Stream, "run", at_once)


def pool_tells_acknowledged_when_routed(mp: pytest.MonkeyPatch) -> None:
    """As before: a tell from another node to a pool ended when the pool had it."""

    def at_once(self: Any, notice: Any, sending: bool) -> None:
        notice.take_back()
        self.tell_forwarded(notice.message)

    mp.setattr(_pool_cell.PoolCell, "queue_tracked", at_once)


def remote_sends_to_pools_meet_the_overflow_policy(mp: pytest.MonkeyPatch) -> None:
    original = _pool_cell.PoolCell.queue_tracked

    def as_a_tell(self: Any, notice: Any, sending: bool) -> None:
        original(self, notice, False)

    mp.setattr(_pool_cell.PoolCell, "queue_tracked", as_a_tell)


def remote_send_ignores_the_window(mp: pytest.MonkeyPatch) -> None:
    """``send`` never waits for room in the link's window. (Not ``full`` made false:
    with ``has_room`` still false, ``send`` then spun without a checkpoint, and the
    contract was stopped only by the test's timeout, a minute later.)"""
    mp.setattr(_link.Link, "has_room", lambda self, more=0: True)


def remote_sends_meet_the_overflow_policy(mp: pytest.MonkeyPatch) -> None:
    original = _taken_in.TakenIn.receive

    def as_tells(self: Any, *args: Any, sending: bool = False) -> None:
        original(self, *args)

    mp.setattr(_taken_in.TakenIn, "receive", as_tells)


def bounced_tells_not_sent_again(mp: pytest.MonkeyPatch) -> None:
    """As before: no-responders made a tell a dead letter, even while its node was up."""
    mp.setattr(_fates.Fates, "send_undelivered", lambda self, peer: None)


def records_begin_at_the_first_message_seen(mp: pytest.MonkeyPatch) -> None:
    """As before: a receiver began a new record at the first message that arrived."""
    original = _taken_in.TakenIn._record_of

    def from_here(self: Any, reply: str, record: str, sequence: int, first: int) -> Any:
        return original(self, reply, record, sequence, sequence)

    mp.setattr(_taken_in.TakenIn, "_record_of", from_here)


def held_tells_overtaken_by_asks(mp: pytest.MonkeyPatch) -> None:
    """An ask leaves at once, past the tells its node holds for the same actor."""

    def at_once(self: Any, cell: Any, kind: int, body: Any, reply: Any) -> None:
        raw = body if isinstance(body, msgspec.Raw) else msgspec.Raw(body)
        data = _subjects.encode((kind, cell.eid, cell.local_path, raw))
        self.out(cell.subject, data, reply, ordered=False)

    mp.setattr(_tells.Tells, "send", at_once)


def tells_ahead_of_a_gap_not_held(mp: pytest.MonkeyPatch) -> None:
    """As before: a message that came ahead of a gap was delivered at once."""

    def at_once(self: Any, inbound: Any, sequence: int, tells: Any, sending: bool) -> None:
        inbound.skip_to(sequence - 1)
        inbound.received = sequence
        self._deliver(inbound, tells, sending)

    mp.setattr(_taken_in.TakenIn, "_hold", at_once)


def acknowledgements_ignored(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_fates.Fates, "on_ack", lambda self, message: None)


def node_death_ends_no_watch(mp: pytest.MonkeyPatch) -> None:
    def fail_asks_only(self: Any, peer: Any, said: str, sent_up_to: Any, closed: Any) -> None:
        for waiter in self.requests.waiting.values():
            if waiter.peer == peer and waiter.reply is None:
                waiter.failed = said
                waiter.event.set()

    mp.setattr(_node.Node, "_peer_down", fail_asks_only)


def remote_watchers_told_twice(mp: pytest.MonkeyPatch) -> None:
    original = _watches.Watches.terminated

    def twice(self: Any, remote: Any, error: Any) -> None:
        subscribers = list(remote.subscribers.values())
        original(self, remote, error)
        notice = ta.Terminated(_ref.new_ref(remote.cell), error)
        for deliver in subscribers:
            deliver(notice)

    mp.setattr(_watches.Watches, "terminated", twice)


def members_never_reported_down(mp: pytest.MonkeyPatch) -> None:
    """A member that leaves or dies leaves the list, but its followers never hear."""
    mp.setattr(_members.Members, "gone", lambda self, record, reason: None)


def hellos_not_answered(mp: pytest.MonkeyPatch) -> None:
    """A node that joins learns the others only from their next heartbeats."""
    mp.setattr(_members.Members, "on_hello", lambda self: None)


def silence_never_noticed(mp: pytest.MonkeyPatch) -> None:
    """A node that dies without a word stays a member (no advisories to tell)."""
    mp.setattr(_peers.Peers, "check", lambda self, waiting: None)


def shared_tells_ended_when_taken(mp: pytest.MonkeyPatch) -> None:
    """A member's node says a tell to a shared name ended as soon as it takes it,
    not once it has been handled: those in its mailbox die with it, unaccounted."""
    take = _groups.Groups._take

    def taken_is_ended(
        self: Any, name: str, chosen: Any, kind: int, body: Any, answer: str
    ) -> None:
        take(self, name, chosen, kind, body, answer)
        if kind != _subjects.ASK:
            every = list(range(len(body)))  # (the tells of the message, by index)
            self.node.tells.publish(answer, _subjects.encode((True, every)))

    mp.setattr(_groups.Groups, "_take", taken_is_ended)


def shared_tells_in_doubt_vanish(mp: pytest.MonkeyPatch) -> None:
    """A tell to a shared name whose taker died is forgotten, not given back."""

    def tell_ended(self: Any, sent: Any) -> None:
        self.fewer_in_flight(len(sent.unended))

    mp.setattr(_groups.Groups, "tell_ended", tell_ended)


def shared_tell_ends_said_only_at_leave(mp: pytest.MonkeyPatch) -> None:
    """A member's node keeps the ends of the tells it took until it leaves: never
    said while it lives, so a tell handled long before its death comes back in doubt,
    and the live node's never reach their sender."""
    mp.setattr(_groups.Groups, "report", lambda self, taken, index: None)


def shared_name_without_a_queue_group(mp: pytest.MonkeyPatch) -> None:
    """Each member subscribes in a queue group of its own: every member gets every
    message to the name."""
    groups = iter(range(1_000_000))
    mp.setattr(_subjects.Subjects, "shared_group", staticmethod(lambda name: str(next(groups))))


def remote_child_failures_decided_twice(mp: pytest.MonkeyPatch) -> None:
    """A remote child's failure goes through its parent's strategy twice."""
    real = _failure.handle_failure

    def twice(cell: Any, error: BaseException, where: str, **options: Any) -> None:
        real(cell, error, where, **options)
        real(cell, error, where, **options)

    mp.setattr(_children, "handle_failure", twice)


def remote_children_restart_themselves(mp: pytest.MonkeyPatch) -> None:
    """A remote child's instance is restarted by its own node: the parent never hears."""
    mp.setattr(_spawning, "_STOP", ta.Restart())


def remote_child_node_death_taken_as_a_stop(mp: pytest.MonkeyPatch) -> None:
    """The death of a remote child's node is taken as the child's ordinary stop."""
    real = _children.Anchor.receive

    async def receive(self: Any, message: Any) -> None:
        if isinstance(message, ta.Terminated) and isinstance(message.error, ta.NodeDown):
            message = ta.Terminated(message.ref, None)
        await real(self, message)

    mp.setattr(_children.Anchor, "receive", receive)


def remote_child_restarted_where_it_ran(mp: pytest.MonkeyPatch) -> None:
    """A remote child is restarted only on the node it ran on, even when that died."""
    real = _spawning.Spawning.spawn

    async def spawn(self: Any, *args: Any, prefer: str | None = None, **options: Any) -> Any:
        if prefer is not None:
            args = (*args[:2], prefer, *args[3:])
        return await real(self, *args, **options)

    mp.setattr(_spawning.Spawning, "spawn", spawn)


MUTANTS: dict[str, list[Mutant]] = {
    "T1": [reply_loses_the_value],
    "T2": [async_handlers_overlap],
    "T3": [on_start_is_skipped],
    "T4": [refused_ask_skips_the_checkpoint, idle_ask_is_no_checkpoint],
    "T5": [tell_to_stopped_vanishes],
    "T6": [cancelled_ask_is_not_withdrawn, idle_ask_ignores_earlier_cancellation],
    "T7": [async_handler_not_cancelled_with_its_asker],
    "T8": [running_ask_ignores_cancellation, idle_ask_skips_its_last_checkpoint],
    "T9": [stranded_tells_vanish],
    "T10": [turns_never_end_the_round, no_per_turn_budget],
    "T11": [cleanup_without_cadence],
    "T12": [no_per_turn_budget],
    "T13": [no_time_slice],
    "T14": [drain_is_ignored],
    "T15": [stop_returns_before_the_actor_stopped],
    "T16": [system_exit_stops_nothing, parents_stop_before_children],
    "T17": [restart_keeps_the_old_instance],
    "T18": [intensity_is_never_exceeded],
    "T19": [watchers_are_never_told],
    "T20": [self_ask_is_not_detected],
    "T21": [
        stranded_tells_vanish,
        cancelled_ask_is_not_withdrawn,
        overflow_letters_vanish,
    ],
    "T22": [
        send_does_not_wait_for_room,
        waiting_senders_are_admitted_newest_first,
        cancelled_send_is_queued_anyway,
    ],
    "T23": [overflow_is_ignored, drop_old_drops_the_newest, overflow_letters_vanish],
    "T24": [timers_outlive_their_actor, cancel_leaves_the_queued_tick],
    "T25": [
        exit_refuses_everything_first,
        cleanup_waits_for_the_handler,
        system_cancellation_ends_the_dispatcher,
    ],
    "T26": [expected_errors_are_failures, only_exact_expected_types],
    "T27": [
        no_shutdown_timeout,
        drain_ignores_the_shutdown_timeout,
        restart_on_stop_is_unbounded,
    ],
    "T28": [
        group_restarts_only_the_failed_child,
        group_tears_down_oldest_first,
        group_starts_all_at_once,
        group_leaves_busy_siblings_running,
        group_intensity_counted_per_child,
        group_takes_every_member_down_at_once,
    ],
    "T29": [exit_refuses_everything_first, children_stop_all_at_once],
    "T30": [backoff_jitter_unseeded],
    "T31": [refused_tells_counted_twice, failed_back_asks_counted_twice],
    "T32": [
        asks_refused_while_the_mailbox_is_full,
        asks_skip_the_wait,
        asks_jump_the_line,
        cancelled_waiting_ask_stays_in_line,
    ],
    "T33": [balancing_pool_ignores_its_bound, asks_jump_the_line],
    "RT1": [tuples_cross_as_lists, remote_errors_lose_their_type],
    "RT2": [
        remote_tells_handled_in_tasks,
        remote_asks_queued_by_tasks,
        remote_sends_overtake_waiting_tells,
        remote_answers_overtake_waiting_tells,
        bounced_tells_not_sent_again,
        tells_ahead_of_a_gap_not_held,
        held_tells_overtaken_by_asks,
        records_begin_at_the_first_message_seen,
    ],
    "RT4": [ask_from_a_closed_node_skips_the_checkpoint],
    "RT5": [unreachable_tells_vanish],
    "RT6": [remote_cancellation_is_ignored],
    "RT7": [remote_running_asks_not_cancelled],
    "RT9": [remote_stranded_asks_not_failed_back, remote_stop_ignores_drain],
    "RT19": [node_death_ends_no_watch, remote_watchers_told_twice],
    "RT21": [
        lost_tells_not_counted,
        acknowledgements_ignored,
        tells_acknowledged_when_taken_in,
        pool_tells_acknowledged_when_routed,
    ],
    "RT32": [
        remote_send_ignores_the_window,
        remote_sends_meet_the_overflow_policy,
        remote_sends_to_pools_meet_the_overflow_policy,
    ],
    "RT33": [members_never_reported_down, hellos_not_answered, silence_never_noticed],
    "RT34": [
        shared_tells_ended_when_taken,
        shared_tells_in_doubt_vanish,
        shared_name_without_a_queue_group,
        shared_tell_ends_said_only_at_leave,
    ],
    "RT35": [remote_child_failures_decided_twice, remote_children_restart_themselves],
    "RT36": [remote_child_node_death_taken_as_a_stop, remote_child_restarted_where_it_ran],
}

CASES = [(cid, m) for cid, mutants in MUTANTS.items() for m in mutants]


def skip_if_it_replaces_the_compiled_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the compiled build, skip a mutant that replaced a method of a compiled class
    or a function of a compiled module: the compiled kernel's own calls do not go
    through the replacement, so it would break nothing. Those run on the pure-Python
    build (the mutants of the interpreted modules run on both)."""
    if not ta.compiled:
        return
    for target, name, _ in monkeypatch._setattr:  # (pytest's record of what it replaced)
        module = target.__name__ if isinstance(target, ModuleType) else target.__module__
        if module in COMPILED_MODULES:
            pytest.skip(f"replaces {module}'s {name}, compiled here: runs on the pure build")


def test_every_contract_has_a_mutant() -> None:
    assert set(MUTANTS) == set(REGISTRY)


@pytest.mark.parametrize(
    ("contract_id", "mutant"), CASES, ids=[f"{c}-{m.__name__}" for c, m in CASES]
)
def test_contract_catches_mutant(
    contract_id: str, mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert REGISTRY[contract_id].run(ServingPolicy()).passed  # holds before
    mutant(monkeypatch)
    skip_if_it_replaces_the_compiled_kernel(monkeypatch)
    result = REGISTRY[contract_id].run(ServingPolicy())
    assert not result.passed, f"{contract_id} did not notice {mutant.__name__}"
    assert result.reason


def _named(mutant: Mutant) -> str:
    return mutant.__name__


EVERY_MUTANT: list[Mutant] = sorted({m for _, m in CASES}, key=_named)


@pytest.mark.parametrize("mutant", EVERY_MUTANT)
def test_mutant_breaks_one_promise_not_everything(
    mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant(monkeypatch)
    skip_if_it_replaces_the_compiled_kernel(monkeypatch)
    assert REGISTRY["T1"].run(ServingPolicy()).passed or REGISTRY["T5"].run(ServingPolicy()).passed


def _failing_contracts() -> list[str]:
    failing = []
    for contract_id, contract in REGISTRY.items():
        if contract_id in ("T25",):
            continue  # its watchdog threads; not needed for this mutant
        if not contract.run(ServingPolicy()).passed:
            failing.append(contract_id)
    return failing


@pytest.mark.timeout(180)  # (every contract, one after another: ~2 s alone, more under load)
def test_a_withdrawn_ask_failed_back_as_well_is_caught_by_t31(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ask.fail returning True for a withdrawn ask: the stranded cleanup counts it
    # failed back, and it was counted withdrawn already.
    fail = _envelope.Ask.fail

    def fail_even_withdrawn(self: Any, error: BaseException) -> bool:
        return True if self.state is _envelope.AskState.WITHDRAWN else fail(self, error)

    monkeypatch.setattr(_envelope.Ask, "fail", fail_even_withdrawn)
    assert "T31" in _failing_contracts()

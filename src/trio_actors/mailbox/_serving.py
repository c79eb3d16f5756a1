"""The serving loop: how mailboxes get their turns.

This module (with the ask envelope in ``_envelope.py``) is the one place that uses
trio's scheduling primitives (``wait_task_rescheduled``, ``reschedule``,
``checkpoint``); everything else in the package goes through it.

Design
======

In trio a task switch costs ~8 µs while a trivial handler costs ~0.2 µs, so the
runtime is judged by how few hops it adds (performance.md, background.md). Hence:

* **One dispatcher task per system serves a run queue of actors that have work.**
  ``tell`` appends to the mailbox and, if the actor was idle, appends the actor to the
  run queue (waking the dispatcher if it was parked). Plain ``receive`` handlers are
  called inline by the dispatcher: no task per actor, no hop per activation. Actor
  ping-pong and fan-out (S3/S4) then cost a deque append and a method call per
  message instead of a task switch.
* **A task only while an async handler needs one.** An actor whose ``receive`` (or
  ``on_start``) is ``async def`` is served by a short-lived task started when it gets
  work and ending when its mailbox runs dry; an idle actor has no task (S5: memory
  and spawn rate).
* **Yield batches.** The dispatcher serves a *round*: actors from the run queue,
  each for a *turn* of at most ``batch`` messages. An actor whose turn leaves work
  goes to the back of the run queue, marked with the round; reaching it again ends
  the round, so a mailbox is never served twice without a yield in between and a
  mailbox that never empties cannot starve the others. The round also ends once
  ``time_slice`` has passed (with no slice: after ``batch`` messages in all), which
  bounds how long other trio tasks wait. An actor whose mailbox ran dry is not
  marked: new work for it in the same round is a new activation (ping-pong, fan-out)
  and costs no yield. The dispatcher yields only when work remains: an empty run
  queue parks it instead.
* **The clock is read every k messages, with k adapted to the handlers' cost.**
  Reading the clock costs about as much as a trivial handler (~0.1 µs), so the round
  reads it at its start and then after k messages, where k = min(16, the messages
  that fit in the rest of the slice at the mean cost so far); a round's first k comes
  from the previous round's cost. Cheap handlers: ~4 reads per 64 messages. 1 ms
  handlers (T13): k shrinks so the round ends within one handler of the slice. The
  overshoot is bounded by k handlers whose cost differs from the mean (heavy tails).
  Why at most 16: it is the largest k for which handlers that turn from cheap to
  T13's 1 ms all at once still end the step within T13's 20 ms. Measured: k = 64
  (one reading per batch) would make S1 ~10% faster (alternating-process A/B),
  which is what S1's reads and checks cost. So a check is kept cheap instead:
  trio's default clock is read through ``perf_counter`` (``_clock_reader``), the
  common case needs no arithmetic (16 or more messages in at most half the slice:
  16 more fit), and a stretch between checks reuses a prebuilt ``range``. Under
  callgrind these took S1 from 3,162 to 3,068 instructions per message (k = 64:
  ~2,820).
* **An ask to an idle plain actor is answered in the asker's task** (``ask_idle``):
  no hop to the dispatcher and back, one checkpoint instead of two task switches.
* **Stranded cleanup** (``lifecycle/_stranded.py``) has its own cadence and yields that cannot
  be cancelled.

Measured with pyperf against the floors of performance.md (``benchmarks/``, paired
ratios, 2-core machine): when the architecture was chosen this design reached S3
0.41 and S4 0.20 of their floors where a task per actor reached 0.035 and 0.020 -- a
task switch per activation costs 10--12x (``docs/design.rst``). The fast paths since
(inline idle tell, one-message activations, asks located by position, the tell loop
reading the clock itself, asks answered in the asker's task) and where the time goes
now per path are in ``docs/performance.rst``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from threading import get_ident
from time import perf_counter
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from .._errors import ActorStopped
from .._policy import ServingPolicy
from ..lifecycle._state import ActorState
from ..lifecycle._supervision import handle_failure
from ._envelope import NO_MESSAGE, Ask, AskState

if TYPE_CHECKING:
    from ..actors._cell import ActorCell

_STARTING = ActorState.STARTING
_RUNNING = ActorState.RUNNING
_RESTARTING = ActorState.RESTARTING
_DRAINING = ActorState.DRAINING

_QUEUED = AskState.QUEUED
_ASK_RUNNING = AskState.RUNNING
_MAX_CHECK_EVERY = 16
_MAX_CHECK_EVERY_F = float(_MAX_CHECK_EVERY)
# The serving loop handles messages in stretches of ``count`` between clock checks:
# ``for n in _COUNTS[count]`` reuses a range made once, where ``range(1, count + 1)``
# would build one per stretch (~1,000 instructions, a third of a stretch's overhead).
# With a time slice a stretch is at most 16 messages; without one, up to the batch
# (64 by default); longer stretches build their range.
_COUNTS_UP_TO = 64
_COUNTS = tuple(range(1, count + 1) for count in range(_COUNTS_UP_TO + 1))


def _trio_default_clock_type() -> type[trio.abc.Clock] | None:
    """trio's default clock class: a private name, so ``None`` if it has moved
    (then every clock is read through its ``current_time``)."""
    try:
        from trio._core._run import SystemClock
    except ImportError:  # pragma: no cover - a trio without it
        return None
    return SystemClock


_TrioSystemClock = _trio_default_clock_type()


def _clock_reader(clock: trio.abc.Clock) -> Callable[[], float]:
    """What the dispatcher reads the run's clock with.

    The dispatcher only compares its readings with each other (a round's start and
    deadline, turn and round lengths), so a reading that differs from the clock's
    by a constant serves as well. trio's default clock reads ``offset +
    perf_counter()`` in a Python method, ~5x the cost of the C call: under it the
    dispatcher calls :func:`time.perf_counter` itself (measured: ~40 of S1's ~3,160
    instructions per message). Any other clock -- ``MockClock`` in tests, a user's
    own -- is read through its ``current_time``. (So a test cannot move the
    dispatcher's time by patching ``perf_counter`` inside trio: use ``MockClock``.)
    """
    if _TrioSystemClock is not None and type(clock) is _TrioSystemClock:
        return perf_counter
    return clock.current_time


def _coroutine_returned(cell: ActorCell, result: Any) -> TypeError:
    result.close()
    return TypeError(
        f"{type(cell.instance).__qualname__}.receive returned a coroutine; declare it "
        "'async def' (or make sure inspect.iscoroutinefunction sees it as one)"
    )


async def _reraise(error: BaseException) -> None:
    raise error


def _stray_cancelled(cell: ActorCell, cancelled: BaseException) -> RuntimeError:
    """The failure a handler's stray ``Cancelled`` becomes: one that no scope of the
    runtime's cancelled (kept from an earlier cancellation and raised again, say).
    Let through, it would end the system block silently."""
    error = RuntimeError(
        f"a handler of {cell.path} raised trio.Cancelled that was not its own "
        "cancellation (a Cancelled kept and raised again?); it is a failure of the actor"
    )
    error.__cause__ = cancelled
    return error


class Dispatcher:
    """Serves the mailboxes of one actor system.

    Attributes:
        policy: the :class:`~trio_actors.ServingPolicy` in force.
    """

    def __init__(self, policy: ServingPolicy, nursery: trio.Nursery) -> None:
        self.policy = policy
        self._nursery = nursery
        self.run_queue: deque[ActorCell] = deque()
        # The thread of the trio run: a tell from any other is handed to the run.
        self.thread_id = get_ident()
        self.parked: trio.lowlevel.Task | None = None
        self.rounds = 0  # rounds served; for tests and statistics
        self.closed = False  # the system has exited: run() returns
        self._first_check = 1  # when a round first reads the clock (see _next_check)
        # Reads the run's clock (up to a constant, see _clock_reader); the current
        # round's start, deadline and the middle between them (with a slice).
        self._now = _clock_reader(trio.lowlevel.current_clock())
        self._round_start = 0.0
        self._deadline = 0.0
        self._midpoint = 0.0
        # The last clock reading of the round, and the round's count of messages then.
        self._read_time = 0.0
        self._read_used = 0
        # Statistics: the longest round, in trio-clock seconds and in messages.
        self.longest_round = 0.0
        self.longest_round_messages = 0

    # --- scheduling ---------------------------------------------------------------

    def schedule(self, cell: ActorCell) -> None:
        """Give an idle actor that has work (or must start) a turn. Never blocks.

        The caller has checked that ``cell`` is not scheduled.
        """
        cell.scheduled = True
        cell.fast_tell = cell.accepting and cell.mailbox is not None and not cell.foreign_pending
        if cell.needs_task:
            self._start_serving_task(cell)
        else:
            self.run_queue.append(cell)
            if self.parked is not None:
                self.wake()

    def wake(self) -> None:
        """Reschedule the parked dispatcher (the caller checked that it is parked)."""
        parked = self.parked
        assert parked is not None
        self.parked = None
        trio.lowlevel.reschedule(parked)

    @enable_ki_protection
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The dispatcher task: serve rounds while there is work, park otherwise,
        until :meth:`close`.

        Shielded: cancelling the system block does not end the serving. The exit
        stops actors one at a time while the others keep serving (T29), and a
        stopping actor's shielded handler may wait on one of them (T25); if the
        dispatcher died with the block's cancellation, that wait would never end.
        The system closes it once every actor has stopped.
        """
        run_queue = self.run_queue
        task_status.started()
        with trio.CancelScope(shield=True):
            while not self.closed:
                if not run_queue:
                    self.parked = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._unpark)
                    continue
                try:
                    self._serve_round(run_queue)
                except trio.Cancelled:
                    raise
                except BaseException as error:
                    # A KeyboardInterrupt in an inline handler: it ends the system
                    # (raised from a task of its own), but the serving goes on, so
                    # that the exit can still serve the actors it has not reached.
                    self._nursery.start_soon(_reraise, error, name="trio-actors interrupt")
                if run_queue:
                    await trio.lowlevel.checkpoint()

    @enable_ki_protection
    def close(self) -> None:
        """End :meth:`run` (the system has exited: every actor has stopped, so the
        run queue is empty -- unless the exit itself was cut short)."""
        self.closed = True
        if self.parked is not None:
            self.wake()

    def _unpark(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        # Shielded, the dispatcher is never cancelled; trio may still abort a
        # parked task for KeyboardInterrupt delivery.
        self.parked = None
        return trio.lowlevel.Abort.SUCCEEDED

    # --- asks to idle actors --------------------------------------------------------

    async def ask_idle(self, cell: ActorCell, message: Any) -> Any:
        """Answer an ask to an idle actor with a plain ``receive`` in the asker's task.

        The actor is started, accepting, has nothing queued and nobody serves it, so
        handling the message right now is exactly what the dispatcher would do next
        -- minus the two task switches (asker to dispatcher and back) that are most
        of an ask's cost. The cancellation contract is the queued path's:

        * cancelled before the call (a cancel point first): withdrawn, never handled;
        * the handler cannot be interrupted (it is plain), and the checkpoint after it
          delivers a cancellation that arrived meanwhile: the reply is discarded.

        A checkpoint (after the handler). A failure goes to supervision and its
        exception is raised here, as on the queued path.
        """
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            cell.note_withdrawn()
            raise
        try:
            result = cell.receive(message)
        except Exception as error:
            cell.handled += 1
            cell.handler_failed(error, message)
            await trio.lowlevel.checkpoint()
            raise
        except BaseException:
            cell.handled += 1  # a KeyboardInterrupt in the handler: it goes on
            raise
        cell.handled += 1
        if result is not None and type(result) is CoroutineType:
            misuse = _coroutine_returned(cell, result)
            cell.handler_failed(misuse, message)
            await trio.lowlevel.checkpoint()
            raise misuse
        await trio.lowlevel.checkpoint()
        return result

    # --- the round ----------------------------------------------------------------

    def _serve_round(self, run_queue: deque[ActorCell]) -> None:
        """Serve actors from the run queue until the round is over. Never a checkpoint.

        Each actor gets a *turn* of at most ``batch`` messages. An actor whose turn
        ends with messages left goes to the back of the run queue, marked with this
        round: reaching it again ends the round, so a mailbox is never served twice
        without a yield in between. The round also ends once ``time_slice`` has
        passed (or, with no time slice, after ``batch`` messages in all), and when
        the run queue is empty. An actor whose mailbox ran dry is not marked: if it
        gets new work during the round, that is a new activation, not a second turn.

        ``used`` counts the messages handled this round; when it reaches
        ``next_check`` the clock is read and the round either ends (``next_check``
        becomes 0) or sets the next check. Between checks the per-message work is a
        pop, the call and two counters: this loop is the hot path of S1, S3 and S4.
        """
        self.rounds += 1
        policy = self.policy
        start = self._read_time = self._round_start = self._now()
        self._read_used = 0
        if policy.time_slice is None:
            next_check = policy.batch  # without a slice, the batch bounds the round too
        else:
            self._deadline = start + policy.time_slice
            self._midpoint = start + policy.time_slice / 2
            next_check = self._first_check  # from the handlers' cost in the last round
        used, last, turn = self._serve_turns(run_queue, next_check)
        if used == self._read_used:
            now = self._read_time  # the round ended at a clock reading
        else:
            # One more reading, for statistics and for the next round's first check
            # (a round is up to a time slice of handlers, or ends in a yield or a
            # park, each of which costs far more than the reading).
            now = self._now()
            if last is not None:
                self._attribute(now, used, last, turn)
        elapsed = now - start
        if used and policy.time_slice is not None:
            # The next round first looks after as many messages as fit in a whole
            # slice at this round's mean cost (so cheap handlers cost no early
            # clock read, and a round of expensive ones looks after the first).
            if used >= _MAX_CHECK_EVERY and now <= self._midpoint:
                # Then at least 2 x used >= 32 fit in a whole slice: no arithmetic.
                self._first_check = _MAX_CHECK_EVERY
            else:
                fit = policy.time_slice * used / (elapsed or 1e-12)
                self._first_check = _MAX_CHECK_EVERY if fit >= _MAX_CHECK_EVERY else (int(fit) or 1)
        if elapsed > self.longest_round:
            self.longest_round = elapsed
        if used > self.longest_round_messages:
            self.longest_round_messages = used

    def _serve_turns(
        self, run_queue: deque[ActorCell], next_check: int
    ) -> tuple[int, ActorCell | None, int]:
        """The body of :meth:`_serve_round`. Returns the messages it handled, and the
        actor served last with the messages of its last turn (for statistics)."""
        this_round = self.rounds
        batch = self.policy.batch
        used = turn = 0
        cell = None
        while run_queue:
            cell = run_queue.popleft()
            try:
                if cell.served_in == this_round:
                    run_queue.appendleft(cell)  # its turn is over and work remains: yield
                    return used, None, 0
                if not cell.inline_ready and not self._prepare_inline(cell):
                    turn = 0
                    continue
                item = cell.head
                if item is not NO_MESSAGE:
                    # The message that woke the actor waits in the head slot rather than
                    # in the deque: an actor that gets one message per activation (S3,
                    # S4) never touches its deque at all.
                    cell.head = NO_MESSAGE
                    if cell.asks_queued and isinstance(item, Ask):  # or a Notice
                        cell.asks_queued -= 1
                        self._answer_inline(cell, cell.receive, item)
                    else:
                        # A local, not cell.receive(item): a slot read is specialized by
                        # the interpreter, a method-style call on a slot is not.
                        receive = cell.receive
                        try:
                            result = receive(item)
                        except Exception as error:
                            cell.handler_failed(error, item)
                        except BaseException:
                            cell.handled += 1  # a KeyboardInterrupt: handled, and it goes on
                            raise
                        else:
                            if result is not None and type(result) is CoroutineType:
                                cell.handler_failed(_coroutine_returned(cell, result), item)
                    cell.handled += 1
                    used += 1
                    turn = 1
                    if not cell.mailbox and cell.inline_ready:
                        # One message and the mailbox ran dry (the common activation):
                        # the actor goes idle, as at the end of the loop below.
                        cell.scheduled = cell.fast_tell = False
                        if not cell.accepting:
                            cell.went_idle_refusing()
                        if used == next_check:
                            next_check = self._next_check(used, cell, 1)
                            if not next_check:
                                return used, cell, 1
                        continue
                    if used == next_check:
                        next_check = self._next_check(used, cell, 1)
                else:
                    turn = 0
                receive = cell.receive
                mailbox = cell.mailbox
                if next_check and mailbox and cell.inline_ready and turn < batch:
                    if cell.bounded is not None:
                        n, next_check = self._serve_checked(
                            cell, receive, batch - turn, used, turn, next_check
                        )
                        used += n
                        turn += n
                    else:
                        while True:
                            limit = batch - turn
                            ask_at = cell.ask_at
                            tells = ask_at[0] - cell.popped if ask_at else limit
                            if tells:
                                # The tells before the next queued ask (if any).
                                n, next_check = self._serve_tells(
                                    cell,
                                    receive,
                                    mailbox,
                                    min(tells, limit),
                                    used,
                                    turn,
                                    next_check,
                                )
                            else:
                                self._answer_next_ask(cell, receive, mailbox, ask_at)  # type: ignore[arg-type]
                                n = 1
                                if used + 1 >= next_check:
                                    next_check = self._next_check(used + 1, cell, turn + 1)
                            cell.handled += n
                            used += n
                            turn += n
                            if not (next_check and mailbox and cell.inline_ready and turn < batch):
                                break
                    if turn > cell.longest_turn:
                        cell.longest_turn = turn
                if not cell.inline_ready:
                    self._release(cell)  # it failed (a restart takes over) or stopped
                elif mailbox:
                    cell.served_in = this_round  # work remains: back of the queue
                    run_queue.append(cell)
                else:
                    # The mailbox ran dry: the actor goes idle.
                    cell.scheduled = cell.fast_tell = False
                    if not cell.accepting:
                        cell.went_idle_refusing()
                if not next_check:
                    return used, cell, turn
            except BaseException as error:
                # A KeyboardInterrupt from a handler: the actor must not be left
                # scheduled but in no queue (nobody would serve it again).
                self._interrupted(cell)
                if not isinstance(error, trio.Cancelled):
                    raise
                # A plain handler cannot be cancelled: any Cancelled it raises is
                # stray, and a failure of the actor (its supervision decides).
                handle_failure(cell, _stray_cancelled(cell, error), "in a plain handler")
                turn = 0
        return used, cell, turn

    def _serve_tells(
        self,
        cell: ActorCell,
        receive: Any,
        mailbox: deque[Any],
        limit: int,
        used: int,
        turn: int,
        next_check: int,
    ) -> tuple[int, int]:
        """Handle up to ``limit`` tells from the front of ``mailbox``.

        The caller knows that no ask is among them. ``used`` and ``next_check`` are
        the round's (see :meth:`_serve_round`): the clock is read whenever the
        round's count reaches ``next_check``, here in the loop, so a long turn
        costs no trip back through the round. Stops early when the round is over,
        if a failure makes the actor restart, or if the actor stopped itself (which
        strands the mailbox). Returns how many were handled and the round's next
        check (0: the round is over). This is the hot loop of S1.
        """
        popleft = mailbox.popleft
        served = 0
        while True:
            count = len(mailbox)
            if count > limit - served:
                count = limit - served
            if count > next_check - used - served:
                count = next_check - used - served
            n = 0
            try:
                stretch = _COUNTS[count] if 0 <= count <= _COUNTS_UP_TO else range(1, count + 1)
                for n in stretch:  # noqa: B007 - n is the count
                    item = popleft()
                    try:
                        result = receive(item)
                    except Exception as error:
                        cell.handler_failed(error, item)
                        if not cell.inline_ready:
                            break  # restarting: a restart task owns it
                    else:
                        if result is not None and type(result) is CoroutineType:
                            cell.handler_failed(_coroutine_returned(cell, result), item)
            except IndexError:
                n -= 1  # it stopped itself: the mailbox was stranded
            except BaseException:
                # A KeyboardInterrupt in a handler: the dispatcher ends; the counts
                # stay true (the positions of queued asks are counted from them).
                cell.popped += served + n
                cell.handled += served + n
                raise
            served += n
            if used + served >= next_check:
                next_check = self._next_check(used + served, cell, turn + served)
            if served == limit or not next_check or not mailbox or not cell.inline_ready:
                break
        cell.popped += served
        return served, next_check

    def _serve_checked(
        self, cell: ActorCell, receive: Any, limit: int, used: int, turn: int, next_check: int
    ) -> tuple[int, int]:
        """Handle up to ``limit`` messages of a bounded mailbox, one checked pop each.

        A bounded mailbox may lose its front to ``"drop_old"`` while the turn runs
        (a handler telling its own full mailbox), so nothing is counted ahead:
        each message is popped, checked for an ask, and handled; the pop hands its
        room to a waiting sender. Arguments and result as for :meth:`_serve_tells`.
        """
        n = 0
        while n < limit and cell.inline_ready and cell.has_queued():
            item = cell.pop_next()
            if isinstance(item, Ask):  # or a Notice
                cell.asks_queued -= 1
                try:
                    self._answer_inline(cell, receive, item)
                except BaseException:
                    cell.handled += n  # (_answer_inline counted its own)
                    raise
            else:
                try:
                    result = receive(item)
                except Exception as error:
                    cell.handler_failed(error, item)
                except BaseException:
                    cell.handled += n + 1  # a KeyboardInterrupt: the counts stay true
                    raise
                else:
                    if result is not None and type(result) is CoroutineType:
                        cell.handler_failed(_coroutine_returned(cell, result), item)
            n += 1
            if used + n >= next_check:
                next_check = self._next_check(used + n, cell, turn + n)
                if not next_check:
                    break
        cell.handled += n
        return n, next_check

    def _next_check(self, used: int, cell: ActorCell, turn: int) -> int:
        """Read the clock; return when to read it next, as the round's count of
        messages (0 ends the round).

        ``used``: the messages handled this round so far; ``cell`` and ``turn``: the
        actor being served and the messages of its turn so far. If every message
        since the last reading was of this turn, the time between the readings is
        this turn's (at least): it goes to the actor's longest-turn statistic.
        """
        now = self._now()
        # Statistics (see _attribute), inlined: this runs every 16 messages of S1.
        if used - self._read_used <= turn:
            interval = now - self._read_time
            if interval > cell.longest_turn_time:
                cell.longest_turn_time = interval
        self._read_time = now
        self._read_used = used
        if self.policy.time_slice is None:
            return 0  # called only when the round's batch is used up
        deadline = self._deadline
        if now >= deadline:
            return 0
        # The messages that fit in the rest of the slice at this round's mean cost so
        # far, at most 16 between clock reads, at least 1. (The next round's first
        # check is worked out once, at the end of this round.) The common case first,
        # without arithmetic: if 16 or more messages took at most half the slice, 16
        # more at their mean cost take at most as long again, which still fits.
        if now <= self._midpoint and used >= _MAX_CHECK_EVERY:
            return used + _MAX_CHECK_EVERY
        remaining = deadline - now
        elapsed = now - self._round_start
        if remaining * used >= _MAX_CHECK_EVERY_F * elapsed:
            return used + _MAX_CHECK_EVERY  # in float arithmetic only
        return used + (int(remaining * used / (elapsed or 1e-12)) or 1)

    def _attribute(self, now: float, used: int, cell: ActorCell, turn: int) -> None:
        """A clock reading at ``now``, after ``used`` messages of the round, during
        (or at the end of) ``cell``'s turn of ``turn`` messages so far: if every
        message since the last reading was of this turn, the time between the
        readings is the turn's (at least), for its longest-turn statistic."""
        if used - self._read_used <= turn:
            interval = now - self._read_time
            if interval > cell.longest_turn_time:
                cell.longest_turn_time = interval
        self._read_time = now
        self._read_used = used

    def _answer_next_ask(
        self, cell: ActorCell, receive: Any, mailbox: deque[Any], ask_at: deque[int]
    ) -> None:
        """Answer the ask at the front of the mailbox (``ask_at`` says it is there).

        The cell knows where its queued asks are, so the tells between them are
        served by :func:`_serve_tells` without a type check per message (S1 ends
        with an ask queued behind a million tells).
        """
        ask = mailbox.popleft()
        cell.popped += 1
        ask_at.popleft()
        cell.asks_queued -= 1
        self._answer_inline(cell, receive, ask)

    def _interrupted(self, cell: ActorCell) -> None:
        """A turn of ``cell`` ended by an exception that is not a failure (a
        ``KeyboardInterrupt`` in its handler): put it back where it can be served."""
        if cell.inline_ready and cell.scheduled and cell.has_queued():
            cell.served_in = self.rounds
            self.run_queue.append(cell)
        elif cell.scheduled and not cell.task_owned:
            self._release(cell)

    @staticmethod
    def _release(cell: ActorCell) -> None:
        """Let go of an actor that cannot be served inline any more."""
        if cell.state is _RESTARTING:
            cell.hand_to_restart()
        else:
            cell.set_idle()

    def _start_serving_task(self, cell: ActorCell) -> None:
        cell.task_owned = True  # owned from now on, before the task first runs
        self._nursery.start_soon(self._serve_in_task, cell, name=cell.path)

    def _prepare_inline(self, cell: ActorCell) -> bool:
        """Slow path of an activation: restarting, async, not yet started, or the
        first turn of this instance (which binds its ``receive``)."""
        # A plain on_start may run here: the time since the last clock reading is
        # no longer one turn's, and the round must read the clock at its end.
        self._read_used = -1
        if cell.state is _RESTARTING:
            cell.hand_to_restart()  # it failed (or a child escalated) while queued
            return False
        if cell.needs_task:
            self._start_serving_task(cell)
            return False
        if not cell.started and not self._start_inline(cell):
            return False
        if cell.state is not _RUNNING and cell.state is not _DRAINING:
            self._release(cell)  # restarting or stopping since
            return False
        cell.receive = cell.instance.receive
        cell.inline_ready = True
        return True

    def _answer_inline(self, cell: ActorCell, receive: Any, ask: Ask) -> None:
        if ask.state is not _QUEUED:
            cell.handled -= 1  # withdrawn: counted when it was cancelled
            cell.skipped_withdrawn()
            return
        ask.state = _ASK_RUNNING  # Ask.start(), inlined: every ask passes here
        try:
            result = receive(ask.message)
        except Exception as error:
            ask.fail(error)
            cell.handler_failed(error, ask.message)
        except BaseException as error:
            # KeyboardInterrupt and friends end the system; the asker must not hang.
            # (Counted here: the callers count a handled ask when this returns.)
            cell.handled += 1
            ask.fail(ActorStopped(f"{cell.path} stopped while answering: {error!r}"))
            raise
        else:
            if result is not None and type(result) is CoroutineType:
                misuse = _coroutine_returned(cell, result)
                ask.fail(misuse)
                cell.handler_failed(misuse, ask.message)
            else:
                ask.reply(result)

    def _start_inline(self, cell: ActorCell) -> bool:
        """Run a plain ``on_start``; return whether the actor may now be served."""
        if cell.state is not _STARTING and cell.state is not _DRAINING:
            cell.set_idle()  # stopped before it started: nothing to serve
            return False
        try:
            cell.instance.on_start()
        except Exception as error:
            cell.start_failed(error)
            if not self._may_go_on_after_failed_start(cell):
                if cell.state is _RESTARTING:
                    cell.hand_to_restart()
                return False
        cell.mark_started()
        return True

    @staticmethod
    def _may_go_on_after_failed_start(cell: ActorCell) -> bool:
        """After ``on_start`` raised and supervision decided: serve on (Resume)?"""
        if cell.state is _RESTARTING:
            return False  # its owner hands it to a restart task
        if cell.state is not _STARTING and cell.state is not _DRAINING:
            cell.set_idle()  # stopped (Stop or Escalate)
            return False
        return True  # Resume: as if on_start had finished

    # --- actors served by a task of their own ---------------------------------------

    @enable_ki_protection
    async def _serve_in_task(self, cell: ActorCell) -> None:
        """Serve an actor with async handlers until its mailbox runs dry.

        The task owns the actor from when it was started; when it ends it hands the
        actor to a restart task (if it is RESTARTING), back to the dispatcher (if
        only its ``on_start`` was async), or leaves it idle.

        Shielded, as the dispatcher is (:meth:`run`): a cancellation of the system
        block from outside does not reach the handlers; the exit cancels each
        actor's handler when it reaches that actor, and until then the actor keeps
        serving (an actor left idle with a queue by a dying task would never be
        served again, and whoever waits on it would wait forever).
        """
        cell.serving_task = trio.lowlevel.current_task()
        handed_back = False
        try:
            with trio.CancelScope(shield=True):
                if cell.state is _RESTARTING:
                    return  # it failed (or a child escalated) before this task ran
                if not cell.started and not await self._start_in_task(cell):
                    return
                if not cell.kinds.receive_async:
                    # Only on_start was async: plain receive goes back to the dispatcher.
                    if cell.has_queued():
                        handed_back = True
                        self.run_queue.append(cell)
                        if self.parked is not None:
                            self.wake()
                    return
                await self._serve_async_turns(cell)
        finally:
            # From here on no other thread appends through the fast path; a tell of
            # one that landed after the loop's last look is found below.
            cell.fast_tell = False
            cell.serving_task_done()
            if handed_back:
                cell.refresh_tell_paths()
            elif cell.state is _RESTARTING:
                cell.hand_to_restart()
            elif cell.state.serves and cell.has_queued() and cell.kinds.receive_async:
                self._start_serving_task(cell)  # it came in meanwhile: serve on
            else:
                cell.set_idle()

    async def _start_in_task(self, cell: ActorCell) -> bool:
        if cell.state is not _STARTING and cell.state is not _DRAINING:
            return False
        on_start = cell.instance.on_start
        with trio.CancelScope() as scope:
            cell.handler_scope = scope
            try:
                if cell.kinds.on_start_async:
                    await on_start()
                else:
                    on_start()
            except Exception as error:
                cell.start_failed(error)
                if not self._may_go_on_after_failed_start(cell):
                    return False
            finally:
                cell.handler_scope = None
        if scope.cancelled_caught or cell.state is _RESTARTING:
            return False  # stopped while starting, or a child escalated meanwhile
        cell.mark_started()
        return True

    async def _serve_async_turns(self, cell: ActorCell) -> None:
        policy = self.policy
        clock = trio.lowlevel.current_clock()
        while cell.has_queued() and cell.state.serves:
            turn_start = clock.current_time()
            n = 0
            while n < policy.batch and cell.has_queued() and cell.state.serves:
                n += 1
                await self._handle_async(cell, cell.pop_next())
                elapsed = clock.current_time() - turn_start
                if elapsed > cell.longest_turn_time:
                    cell.longest_turn_time = elapsed
                if policy.time_slice is not None and elapsed >= policy.time_slice:
                    break
            if n > cell.longest_turn:
                cell.longest_turn = n
            if cell.has_queued():
                await trio.lowlevel.checkpoint()

    async def _handle_async(self, cell: ActorCell, item: Any) -> None:
        """Run one async handler under its own cancel scope.

        Whatever ends the handler -- a return, an exception, its asker's or a stop's
        cancellation, or the whole system being cancelled -- the asker is answered
        exactly once (or was released already, if it was cancelled itself).
        """
        if isinstance(item, Ask):  # or a Notice
            ask: Ask | None = item
            cell.asks_queued -= 1
            if not item.start():
                cell.skipped_withdrawn()
                return  # withdrawn
            message = item.message
        else:
            ask = None
            message = item
        try:
            with trio.CancelScope() as scope:
                cell.handler_scope = scope
                if ask is not None:
                    ask.scope = scope
                try:
                    result = await cell.receive(message)
                except Exception as error:
                    if ask is not None:
                        ask.fail(error)
                    cell.handler_failed(error, message)
                except trio.Cancelled as cancelled:
                    if scope.cancel_called:
                        raise  # its own: its asker's or a stop's (the scope catches it)
                    # Served shielded, nothing else cancels it: this one is stray.
                    failure = _stray_cancelled(cell, cancelled)
                    if ask is not None:
                        ask.fail(failure)
                    cell.handler_failed(failure, message)
                else:
                    if ask is not None:
                        ask.reply(result)
                finally:
                    cell.handler_scope = None
        finally:
            cell.handled += 1
            if ask is not None and ask.state is AskState.RUNNING:
                # Cancelled by stop(), or by the cancellation of the whole system.
                ask.fail(ActorStopped(f"{cell.path} stopped while answering"))


__all__ = ["Dispatcher"]

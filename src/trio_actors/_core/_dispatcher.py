"""The dispatcher: the run queue, rounds and inline turns -- how mailboxes get their
turns.

This module (with serving by task in ``_task_serving.py`` and the ask envelope in
``_envelope.py``) is the one place that uses trio's scheduling primitives
(``wait_task_rescheduled``, ``reschedule``, ``checkpoint``); everything else in the
package goes through it. When the round reads the clock is ``_round_clock.py``'s;
how a handler is called and where its outcome goes, ``_handler_call.py``'s.

Design
======

In trio a task switch costs ~8 µs while a trivial handler costs ~0.2 µs, so the
runtime is judged by how few hops it adds (``docs/design.rst``). Hence:

* **One dispatcher task per system serves a run queue of actors that have work.**
  ``tell`` appends to the mailbox and, if the actor was idle, appends the actor to the
  run queue (waking the dispatcher if it was parked). Plain ``receive`` handlers are
  called inline by the dispatcher: no task per actor, no hop per activation. Actor
  ping-pong and fan-out (S3/S4) then cost a deque append and a method call per
  message instead of a task switch.
* **A task only while an async handler needs one** (``_task_serving.py``). An actor
  whose ``receive`` (or ``on_start``) is ``async def`` is served by a short-lived
  task started when it gets work and ending when its mailbox runs dry; an idle
  actor has no task (S5: memory and spawn rate).
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
* **The clock is read every k messages, with k adapted to the handlers' cost**
  (``_round_clock.py``): at most every 16 messages, fewer when handlers are slow,
  so a round overshoots its slice by at most a few handlers.
* **An ask to an idle plain actor is answered in the asker's task**
  (``_core/_idle_ask.py``): no hop to the dispatcher and back, one checkpoint
  instead of two task switches.
* **Stranded cleanup** (``_core/_stranded.py``) has its own cadence and yields that cannot
  be cancelled.

Measured with pyperf against the floors of ``docs/performance.rst`` (``benchmarks/``, paired
ratios, 2-core machine): when the architecture was chosen this design reached S3
0.41 and S4 0.20 of their floors where a task per actor reached 0.035 and 0.020 -- a
task switch per activation costs 10--12x (``docs/design.rst``). The fast paths since
(inline idle tell, one-message activations, asks located by position, the tell loop
reading the clock itself, asks answered in the asker's task) and where the time goes
now per path are in ``docs/performance.rst``.
"""

from __future__ import annotations

from collections import deque
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final

import trio

from .._interrupts import protect_module
from .._policy import ServingPolicy
from . import _failure, _task_serving
from ._envelope import NO_MESSAGE, Ask
from ._failure import handle_failure
from ._handler_call import (
    answer_plain,
    call_plain,
    coroutine_returned,
    stray_cancelled,
)
from ._native import (
    CoroutineType,
    MethodType,
    deque_append,
    deque_appendleft,
    deque_popleft,
    mypyc_attr,
)
from ._round_clock import RoundClock
from ._serving_now import ServingNow
from ._state import ActorState, Serving, hand_over
from ._stopping import went_idle_refusing
from ._thread_mark import thread_mark

if TYPE_CHECKING:
    from ._cell import ActorCell

_STARTING: Final = ActorState.STARTING
_RUNNING: Final = ActorState.RUNNING
_RESTARTING: Final = ActorState.RESTARTING
_DRAINING: Final = ActorState.DRAINING
_IDLE: Final = Serving.IDLE
_DISPATCHER: Final = Serving.DISPATCHER
_TASK: Final = Serving.TASK
cancel_shielded_checkpoint: Final = trio.lowlevel.cancel_shielded_checkpoint

# The serving loop handles messages in stretches of ``count`` between clock checks,
# ``for n in range(1, count + 1)``: a C loop in the compiled kernel. The interpreter
# builds the range per stretch (~700 instructions; with a time slice a stretch is
# at most MAX_CHECK_EVERY, 16, messages): a tuple of ranges made once saved pure
# S1-det ~43 instructions per message, but compiled code iterates a range object
# generically, ~60 more per message (S1 0.92 -> 0.96 of F1 compiled, in-process).


def _call_alone(receive: Any, item: Any) -> Any:
    """A handler that is not a bound method (a callable attribute), called as
    :meth:`Dispatcher._serve_tells` calls a method's function: with its "instance"."""
    return receive(item)


async def _reraise(error: BaseException) -> None:
    raise error


@mypyc_attr(allow_interpreted_subclasses=True)
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
        # The same thread, as ActorRef.tell checks it (cheaper: _thread_mark.py).
        self.thread_mark = thread_mark()
        self.parked: trio.lowlevel.Task | None = None
        self.rounds = 0  # rounds served; for tests and statistics
        # Whose message the round handles now, for the turn sampler's thread.
        self.serving_now = ServingNow()
        self.closed = False  # the system has exited: run() returns
        # When the round reads the clock, and the round statistics.
        self.clock = RoundClock(policy, trio.lowlevel.current_clock())

    # --- scheduling ---------------------------------------------------------------

    def schedule(self, cell: ActorCell) -> None:
        """Give an actor that has work (or must start) to its server: a serving task
        if it needs one, the run queue otherwise. Never blocks.

        Nobody serves ``cell`` (IDLE), or its restart task is handing it back.
        """
        if cell.needs_task:
            self.start_serving_task(cell)
        else:
            hand_over(cell, _DISPATCHER)
            deque_append(self.run_queue, cell)
            if self.parked is not None:
                self.wake()

    def wake(self) -> None:
        """Reschedule the parked dispatcher (the caller checked that it is parked)."""
        parked = self.parked
        assert parked is not None
        self.parked = None
        trio.lowlevel.reschedule(parked)

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
                    # A schedule point without the cancel point: nothing in this
                    # shielded scope can be cancelled (nor get a KeyboardInterrupt:
                    # trio delivers those to the main task), so checkpoint()'s second
                    # half would only cost (~0.26 of ~2.9 µs per yield, one yield per
                    # 64 messages of S1; docs/performance.rst).
                    await cancel_shielded_checkpoint()

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
        next_check = self.clock.begin_round()
        try:
            used, last, turn = self._serve_turns(run_queue, next_check)
        finally:
            self.serving_now.cell = None  # (also when a handler's KeyboardInterrupt ends it)
        self.clock.end_round(used, last, turn)

    def _serve_turns(
        self, run_queue: deque[ActorCell], next_check: int
    ) -> tuple[int, ActorCell | None, int]:
        """The body of :meth:`_serve_round`. Returns the messages it handled, and the
        actor served last with the messages of its last turn (for statistics)."""
        this_round = self.rounds
        batch = self.policy.batch
        clock = self.clock
        # Module constants read once per round: in the loop a LOAD_FAST costs ~10
        # instructions where a LOAD_GLOBAL costs ~30, and every activation of fan-out
        # and ping-pong (S3, S4) reads three of them.
        no_message, idle = NO_MESSAGE, _IDLE
        serving_now = self.serving_now
        used = turn = 0
        cell = None
        while run_queue:
            cell = deque_popleft(run_queue)  # (_native.py)
            try:
                if cell.served_in == this_round:
                    deque_appendleft(run_queue, cell)  # its turn is over and work remains: yield
                    return used, None, 0
                if not cell.inline_ready and not self._prepare_inline(cell):
                    turn = 0
                    continue
                # Whose plain handler runs now, for the turn sampler
                # (_core/_serving_now.py): a store per activation, ~60 instructions
                # (S3-det 4,245 -> 4,304, S4-det 4,617 -> 4,677 under callgrind). No
                # place stores less: fan-out and ping-pong take a new actor each time.
                serving_now.cell = cell
                item = cell.head
                if item is not no_message:
                    # The message that woke the actor waits in the head slot rather than
                    # in the deque: an actor that gets one message per activation (S3,
                    # S4) never touches its deque at all.
                    cell.head = no_message
                    if cell.asks_queued and isinstance(item, Ask):  # or a Notice
                        cell.asks_queued -= 1
                        answer_plain(cell, cell.receive, item)
                    else:
                        # call_plain(cell, cell.receive, item), inlined: this is every
                        # activation of fan-out and ping-pong, where the call measured
                        # ~23 ns of S3's ~270 per message and ~8% of S4 (in-process
                        # A/B, 3 runs each). A local, not
                        # cell.receive(item): a slot read is specialized by the
                        # interpreter, a method-style call on a slot is not.
                        receive = cell.receive
                        try:
                            result = receive(item)
                        except Exception as error:
                            _failure.handler_failed(cell, error, item)
                        except BaseException:
                            cell.handled += 1  # a KeyboardInterrupt: handled, and it goes on
                            raise
                        else:
                            if result is not None and type(result) is CoroutineType:
                                _failure.handler_misused(
                                    cell, coroutine_returned(cell, result), item
                                )
                    cell.handled += 1
                    used += 1
                    turn = 1
                    if not cell.mailbox and cell.inline_ready:
                        # One message and the mailbox ran dry (the common activation):
                        # the actor goes idle. This is set_idle, with the hand-over
                        # from DISPATCHER to IDLE and the tell paths it leaves inlined
                        # (activates does not depend on who serves): the end of every
                        # activation of fan-out and ping-pong (S3, S4). Falling through
                        # to the end of the turn instead cost S3 ~20 ns per message of
                        # ~270 (in-process A/B, 4 runs each).
                        cell.serving = idle
                        cell.fast_tell = False
                        if not cell.accepting:
                            went_idle_refusing(cell)
                        if used == next_check:
                            next_check = clock.next_check(used, cell, 1)
                            if not next_check:
                                return used, cell, 1
                        continue
                    if used == next_check:
                        next_check = clock.next_check(used, cell, 1)
                else:
                    turn = 0
                mailbox = cell.mailbox
                if next_check and mailbox and cell.inline_ready and turn < batch:
                    receive = cell.receive
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
                                    next_check = clock.next_check(used + 1, cell, turn + 1)
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
                    deque_append(run_queue, cell)
                else:
                    cell.set_idle()  # the mailbox ran dry
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
                handle_failure(cell, stray_cancelled(cell, error), "in a plain handler")
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
        # The method's function and its actor, called apart: compiled code calls a
        # bound method through the method object (~60 instructions more per call;
        # S1 0.96 -> 0.98 of F1 compiled, in-process); the interpreter alike.
        if type(receive) is MethodType:
            handler, instance = receive.__func__, receive.__self__
        else:
            handler, instance = _call_alone, receive
        served = 0
        while True:
            count = len(mailbox)
            if count > limit - served:
                count = limit - served
            if count > next_check - used - served:
                count = next_check - used - served
            n = 0
            try:
                for n in range(1, count + 1):  # noqa: B007 - n is the count
                    item = popleft()
                    # call_plain(cell, receive, item), inlined: this loop is S1's every
                    # message, where the call measured ~32 ns of ~195 (in-process A/B,
                    # 3 runs each).
                    try:
                        result = handler(instance, item)
                    except Exception as error:
                        _failure.handler_failed(cell, error, item)
                        if not cell.inline_ready:
                            break  # restarting: a restart task owns it
                    else:
                        if result is not None and type(result) is CoroutineType:
                            _failure.handler_misused(cell, coroutine_returned(cell, result), item)
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
                next_check = self.clock.next_check(used + served, cell, turn + served)
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
                    answer_plain(cell, receive, item)
                except BaseException:
                    cell.handled += n  # (answer_plain counted its own)
                    raise
            else:
                try:
                    call_plain(cell, receive, item)
                except BaseException:
                    cell.handled += n + 1  # a KeyboardInterrupt: the counts stay true
                    raise
            n += 1
            if used + n >= next_check:
                next_check = self.clock.next_check(used + n, cell, turn + n)
                if not next_check:
                    break
        cell.handled += n
        return n, next_check

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
        answer_plain(cell, receive, ask)

    def _interrupted(self, cell: ActorCell) -> None:
        """A turn of ``cell`` ended by an exception that is not a failure (a
        ``KeyboardInterrupt`` in its handler): put it back where it can be served."""
        if cell.serving is not _DISPATCHER:
            return  # (a restart task took it over)
        if cell.has_queued():
            # Whatever it was doing (a turn, its on_start): it is served again later,
            # never left idle with work (nobody would serve it, and the next tell
            # would take the head slot).
            cell.served_in = self.rounds
            deque_append(self.run_queue, cell)
        else:
            self._release(cell)

    @staticmethod
    def _release(cell: ActorCell) -> None:
        """Let go of an actor that cannot be served inline any more."""
        if cell.state is _RESTARTING:
            cell.hand_to_restart()
        else:
            cell.set_idle()

    def start_serving_task(self, cell: ActorCell) -> None:
        """Start the task that serves an actor with async handlers
        (``_task_serving.py``); it serves the actor from now on, before it first runs."""
        hand_over(cell, _TASK)
        self._nursery.start_soon(_task_serving.serve_in_task, self, cell, name=cell.path)

    def _prepare_inline(self, cell: ActorCell) -> bool:
        """Slow path of an activation: restarting, not yet started, or the first
        turn of this instance (which binds its ``receive``). (An actor that needs a
        task is never in the run queue: only a restart task changes its instance.)"""
        # A plain on_start may run here: the time since the last clock reading is
        # no longer one turn's, and the round must read the clock at its end; nor
        # is it a turn of the actor served last (for the turn sampler).
        self.clock.forget_turn()
        self.serving_now.cell = None
        if cell.state is _RESTARTING:
            cell.hand_to_restart()  # it failed (or a child escalated) while queued
            return False
        if not cell.started and not self._start_inline(cell):
            return False
        if cell.state is not _RUNNING and cell.state is not _DRAINING:
            self._release(cell)  # restarting or stopping since
            return False
        cell.receive = cell.instance.receive
        cell.inline_ready = True
        return True

    def _start_inline(self, cell: ActorCell) -> bool:
        """Run a plain ``on_start``; return whether the actor may now be served."""
        if cell.state is not _STARTING and cell.state is not _DRAINING:
            cell.set_idle()  # stopped before it started: nothing to serve
            return False
        try:
            cell.instance.on_start()
        except Exception as error:
            failure: BaseException | None = error
        except trio.Cancelled as cancelled:
            failure = stray_cancelled(cell, cancelled)  # a plain hook cannot be cancelled
        else:
            failure = None
        if failure is not None:
            _failure.start_failed(cell, failure)
            if not _task_serving.may_go_on_after_failed_start(cell):
                self._release(cell)  # restarting, or stopped (Stop or Escalate)
                return False
        cell.mark_started()
        return True


protect_module(globals())

__all__ = ["Dispatcher"]

"""``PoolCell``: the cell of a pool -- routing, the workers, the pool's part of the
stop sequence, and its statistics."""

from __future__ import annotations

from collections import deque
from threading import get_ident
from typing import TYPE_CHECKING, Any

import outcome
import trio

from ..._core._bounded import Bounded, WaitingSenders
from ..._core._cell import ActorCell
from ..._core._envelope import NO_MESSAGE, Ask, Notice
from ..._core._foreign import current_task_of
from ..._core._ref import local_cell
from ..._core._state import ActorState, Serving
from ..._errors import ActorStopped
from ..._interrupts import protect_module
from ..._statistics import ActorStatistics
from . import _balancing
from ._balancing import _Job, _PoolAsk, _Waiter
from ._counts import WorkerCounts, pool_statistics
from ._messages import Broadcast, Resize

if TYPE_CHECKING:
    from ..._core._ref import ActorRef
    from .._system import ActorSystem
    from ._actor import Pool, PoolActor

__all__ = ["PoolCell"]

_IDLE = Serving.IDLE
_RETIRED_KEPT = 64  # stopped workers whose cells a pool keeps for its statistics
_RUNNING = ActorState.RUNNING


class PoolCell(ActorCell):
    """The cell of a pool: its ref's tells, asks and sends are routed to workers.

    Both tell fast paths are off (:meth:`refresh_tell_paths`), so every tell comes
    to :meth:`tell_forwarded`; the pool's own mailbox only ever holds the
    ``Terminated`` notices of its workers.
    """

    # The kernel knows a cell's system as a Host; a pool spawns its workers and
    # starts their feeders through the system itself.
    system: ActorSystem
    instance: PoolActor

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.workers: list[ActorCell] = []  # spawn order
        self.next_worker = 0  # round robin
        self.worker_serial = 0
        self.shared: deque[Any] = deque()  # tells and _Waiters, in order
        # A balancing pool's bound on its queue (its workers' mailbox=, see
        # _balancing), and the sends and asks waiting for room there.
        config = self.config
        self.queue_bound: Bounded | None = config.mailbox if config.routing == "balancing" else None
        if self.queue_bound is not None:
            self.senders = WaitingSenders()
        # Balancing: the workers with nothing to do, and for each worker the parking
        # lot of its feeder and the tell handed to it.
        self.free: deque[ActorCell] = deque()
        self.starting: set[ActorCell] = set()  # done, to be freed once started again
        self.feeders: dict[ActorCell, trio.lowlevel.ParkingLot] = {}
        self.assigned: dict[ActorCell, Any] = {}
        self.ready = trio.Event()  # the workers exist (on_start has run)
        self.held: list[Broadcast | Resize] = []  # told while not ready
        # Sends from another node in the queue of a pool that routes, told while it
        # had no workers: routed as sends (a full worker's waits for room) by grow.
        self.early_sends: set[Notice] = set()
        self.progress = trio.lowlevel.ParkingLot()  # a balancing worker became free
        self.drain_scope: trio.CancelScope | None = None
        # Statistics (see snapshot): the workers that have stopped, the counts of
        # the oldest of them, and the workers' Terminated notices it handled.
        self.retired: deque[ActorCell] = deque()
        self.retired_counts = WorkerCounts()
        self.worker_notices = 0

    @property
    def config(self) -> Pool:
        return self.instance.config

    @property
    def balancing(self) -> bool:
        return self.config.routing == "balancing"

    def refresh_tell_paths(self) -> None:
        self.activates = self.fast_tell = False  # every tell is routed

    # --- routing --------------------------------------------------------------------

    def tell(self, message: Any) -> None:
        """A tell to the pool: from the trio thread routed at once (a full
        ``Bounded(..., "fail")`` worker raises ``MailboxFull`` here, as its own tell
        would); from another thread through the system's foreign inbox."""
        if get_ident() != self.dispatcher.thread_id:
            self.system._foreign.put(self, message)
        else:
            self._tell(message, forwarded=False)

    def tell_forwarded(self, message: Any) -> None:
        """A tell from another thread, reaching the trio thread in order: as
        :meth:`tell`, but a full worker makes it a dead letter (nobody to raise to)."""
        self._tell(message, forwarded=True)

    def _tell(self, message: Any, *, forwarded: bool) -> None:
        """Route, queue, or dead-letter one tell. Never a checkpoint."""
        if not self.accepting:
            self.tell_refused(message)
        elif isinstance(message, Broadcast | Resize):
            if not self.ready.is_set():
                self.held.append(message)  # (before on_start, or restarting)
            elif isinstance(message, Resize):
                self.resize(message.size)
            else:
                for worker in self._live_workers():
                    _deliver(worker, message.message, forwarded)
        elif self.balancing or not self.ready.is_set() or not self._live_workers():
            if self.queue_bound is not None and _balancing.queue_full(self):
                _balancing.overflow(self, message, raising=not forwarded)
                return
            self.shared.append(message)  # (before on_start: routed once it has run)
            self._hand_out()
        else:
            _deliver(self._route(), message, forwarded)

    each_tell_tracked = True  # (its workers end them in any order)

    def queue_tracked(self, notice: Notice, sending: bool) -> None:
        """A tell from another node, tracked by ``notice`` until a worker has
        handled it or it is a dead letter -- not until the pool has it: routed as
        :meth:`tell_forwarded` routes it, the notice goes along, into the worker's
        mailbox or the balancing queue. From a ``send`` (or while sends wait), into
        a full bounded balancing queue it waits for room in line with the local
        ``send``\\ s, as into a full worker's mailbox (also when it came while the
        pool had no workers: routed by :meth:`grow`). ``Broadcast`` and ``Resize``
        end as the pool takes them. Never a checkpoint."""
        message = notice.message
        if not self.accepting or isinstance(message, Broadcast | Resize):
            notice.take_back()
            self._tell(message, forwarded=True)  # (refused: a dead letter)
        elif self.balancing or not self.ready.is_set() or not self._live_workers():
            if self.queue_bound is not None and _balancing.queue_full(self):
                if sending or self.senders:
                    assert self.senders is not None
                    self.senders.add(notice)
                else:
                    _balancing.overflow(self, notice, raising=False)
                return
            self.shared.append(notice)  # (its worker's notice will end it: _feed)
            if sending and not self.balancing:
                self.early_sends.add(notice)
            self._hand_out()
        else:
            self._route_tracked(notice, sending)

    def _route_tracked(self, notice: Notice, sending: bool) -> None:
        """Queue a tracked tell at the next worker, as a notice of its own."""
        worker = self._route()
        worker.queue_tracked(Notice(worker, notice.message, notice.sender), sending)

    def _live_workers(self) -> list[ActorCell]:
        """The workers that accept messages (one stopping is not yet forgotten)."""
        return [worker for worker in self.workers if worker.accepting]

    def accept_ask(self, envelope: Ask) -> bool:
        """A pool's asks wait for a worker (balancing) or are routed: only from a task."""
        return False

    def ask_message(self, message: Any) -> Any:
        """:meth:`ActorRef.ask` to the pool: checked here, routed in :meth:`_ask`."""
        task = current_task_of(self.system, "ask")
        if not self.accepting:
            return self._refuse_ask()
        return self._ask(message, task)

    async def _until_ready(self) -> None:
        """Wait for the workers to exist (before ``on_start`` has run, or while the
        pool restarts). A checkpoint only if they do not yet. Cancelled meanwhile,
        the ask or send is withdrawn: nothing happened."""
        if not self.ready.is_set():
            try:
                await self.ready.wait()
            except trio.Cancelled:
                self.note_withdrawn()
                raise

    async def _ask(self, message: Any, task: trio.lowlevel.Task) -> Any:
        await self._until_ready()
        if not self.balancing:
            if not self.accepting or not self._live_workers():
                await self._refuse_ask()
            return await self._route().ask_message(message)
        worker = await self._wait_for_worker(task)
        ask = _PoolAsk(worker, message, task, self)
        try:
            if worker.accepting and not (worker.inline_ready and worker.serving is _IDLE):
                return await worker.queue_ask(message, task, ask)
            # Refused (it stopped meanwhile), or answered at once in this task by
            # its plain handler: as any ask.
            return await worker.ask_message(message)
        finally:
            if not ask.abandoned:
                ask.release()  # (abandoned: released when its handler ends)

    async def send_message(self, message: Any) -> None:
        """:meth:`ActorRef.send` to the pool: into a balancing pool's queue, waiting
        for room if it is bounded and full (first come, first served with the asks;
        cancelled meanwhile, nothing is queued); otherwise the chosen worker's
        ``send``. A checkpoint."""
        task = current_task_of(self.system, "send")
        await self._until_ready()
        if self.balancing or isinstance(message, Broadcast | Resize):
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled:
                self.note_withdrawn()  # never queued
                raise
            if not self.accepting:
                await self.refuse_send()
            if (
                self.senders is not None
                and not isinstance(message, Broadcast | Resize)
                and _balancing.queue_full(self)
            ):
                await self.senders.wait(task, message, self.note_withdrawn)
                return  # (queued on its behalf: admit_waiting)
            self.tell_forwarded(message)
        else:
            if not self.accepting or not self._live_workers():
                await self.refuse_send()
            await self._route().send_message(message)

    def _route(self) -> ActorCell:
        """The worker for the next message (round robin or smallest mailbox), of
        those that accept (the caller checked there is one)."""
        workers = self._live_workers()
        if self.config.routing == "round_robin":
            index = self.next_worker % len(workers)
            self.next_worker = index + 1
            return workers[index]
        return min(workers, key=_load)

    # --- balancing ------------------------------------------------------------------

    async def _wait_for_worker(self, task: trio.lowlevel.Task) -> ActorCell:
        """A free worker for this ask, in turn with what was queued before it. A
        checkpoint. Cancelled while it waits, the ask is withdrawn: nothing happened.

        Raises:
            ActorStopped: the pool stopped while it waited.
        """
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            self.note_withdrawn()
            raise
        if not self.accepting:
            await self._refuse_ask()
        if self._first_free_accepts() and not self.shared:
            return self.free.popleft()
        waiter = _Waiter(task)
        senders = self.senders
        if senders is not None and _balancing.queue_full(self):
            senders.add(waiter)  # waits for room in the queue first
        else:
            self.shared.append(waiter)

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            # Withdrawn: it never waited (its room goes to the next in line).
            if senders is None or not senders.discard(waiter):
                self.shared.remove(waiter)
                if senders:
                    _balancing.admit_waiting(self)
            self.note_withdrawn()
            return trio.lowlevel.Abort.SUCCEEDED

        got: ActorCell | None = await trio.lowlevel.wait_task_rescheduled(abort)
        if got is None:
            self.failed_back += 1
            raise ActorStopped(f"{self.path} stopped while an ask waited for a worker")
        return got

    def _hand_out(self) -> None:
        """Give queued work to free workers, oldest first. Never a checkpoint."""
        shared, free = self.shared, self.free
        while shared and self._first_free_accepts():
            item = shared.popleft()
            if type(item) is _Waiter:
                trio.lowlevel.reschedule(item.task, outcome.Value(free.popleft()))
            else:
                worker = free.popleft()
                self.assigned[worker] = item
                self.feeders[worker].unpark_all()
            if self.senders:
                _balancing.admit_waiting(self)  # the room goes to the oldest waiting

    def _first_free_accepts(self) -> bool:
        """Whether there is a free worker that serves, dropping those at the front
        that are stopping (their ``Terminated`` will forget them) and setting aside
        those restarting or starting until their ``on_start`` has finished
        (:meth:`child_started`): nothing waits on a backoff that another worker
        could take."""
        free = self.free
        while free and free[0].state is not _RUNNING:
            worker = free.popleft()
            if worker.accepting:
                self.starting.add(worker)
        return bool(free)

    def worker_done(self, worker: ActorCell) -> None:
        """``worker`` finished what it was given: free for more."""
        if worker in self.feeders and worker.accepting:
            self.free.append(worker)
            self._hand_out()
        self.progress.unpark_all()

    def child_started(self, child: ActorCell) -> None:
        """A worker set aside while it restarted has its fresh instance: free."""
        if child in self.starting:
            self.starting.discard(child)
            self.worker_done(child)

    async def feed(self, worker: ActorCell) -> None:
        """A balancing worker's feeder: hands it the pool's tells, one at a time.
        Ends when the worker or the pool stops (or the worker was removed before
        this task first ran). Shielded, as serving tasks are: the system block's
        cancellation must not leave a worker that nobody frees again."""
        with trio.CancelScope(shield=True):
            await self._feed(worker)

    async def _feed(self, worker: ActorCell) -> None:
        lot = self.feeders.get(worker)
        if lot is None:
            return
        self.worker_done(worker)
        while worker in self.feeders:
            message = self.assigned.pop(worker, NO_MESSAGE)
            if message is NO_MESSAGE:
                await lot.park()  # until a tell is handed to it, or it is to end
                continue
            if not worker.accepting:  # it stops: the tell goes to another worker
                self.shared.appendleft(message)
                self._hand_out()
                return
            job = _Job()
            if type(message) is Notice:  # a tell from another node: it ends with this one
                job.then, message = message.sender, message.message
            worker.queue_notice(Notice(worker, message, job))
            if not job.done.is_set():
                await job.done.wait()
            self.worker_done(worker)

    # --- workers ----------------------------------------------------------------------

    def grow(self, size: int) -> None:
        """Spawn workers until there are ``size`` (the pool's own children)."""
        config = self.config
        instance = self.instance
        while len(self.workers) < size:
            self.worker_serial += 1
            ref = instance.spawn(
                config.worker,
                *config.args,
                name=f"worker-{self.worker_serial}",
                supervision=config.supervision,
                mailbox=config.mailbox,
                shutdown=config.shutdown,
            )
            instance.watch(ref)
            worker = local_cell(ref)
            self.workers.append(worker)
            if self.balancing:
                self.feeders[worker] = trio.lowlevel.ParkingLot()
                self.system._nursery.start_soon(self.feed, worker, name=f"feed {worker.path}")
        self.ready.set()
        held, self.held = self.held, []
        for message in held:  # Broadcast and Resize told before the workers existed
            self._tell(message, forwarded=True)
        if not self.balancing:
            while self.shared:  # what was told before the workers existed
                item = self.shared.popleft()
                if type(item) is Notice:
                    self._route_tracked(item, item in self.early_sends)
                else:
                    _deliver(self._route(), item, True)
            self.early_sends.clear()

    def resize(self, size: int) -> None:
        """:class:`Resize`: spawn workers, or stop the newest ones (with a drain)."""
        if size > len(self.workers):
            self.grow(size)
            return
        while len(self.workers) > size:
            worker = self.workers.pop()
            self._forget_worker(worker)
            worker.begin_stop(drain=True, cancel_handler=False)

    def worker_ended(self, ref: ActorRef) -> None:
        """A worker stopped (its ``Terminated``): route around it; the pool stops
        when none is left."""
        worker = ref._cell
        if worker not in self.workers:
            return  # one removed by Resize, or of the instance before a restart
        self.workers.remove(worker)
        self._forget_worker(worker)
        if not self.workers and self.state is ActorState.RUNNING:
            self.begin_stop(drain=False, cancel_handler=False)

    def workers_gone(self) -> None:
        """The pool's workers have all stopped (its stop, or its restart): forget
        them."""
        for worker in self.workers:
            self._forget_worker(worker)
        self.workers.clear()
        self.next_worker = 0

    def hand_to_restart(self) -> None:
        """The pool restarts (a worker escalated, or its own ``on_start`` failed):
        from now on what is told waits in its queue, and asks wait, for the fresh
        instance's workers -- none goes to a worker that is being stopped."""
        if self.ready.is_set():
            self.ready = trio.Event()
        super().hand_to_restart()

    def _forget_worker(self, worker: ActorCell) -> None:
        lot = self.feeders.pop(worker, None)
        if lot is not None:
            lot.unpark_all()  # its feeder ends
        if worker in self.free:
            self.free.remove(worker)
        self.starting.discard(worker)
        message = self.assigned.pop(worker, NO_MESSAGE)
        if message is not NO_MESSAGE:
            self.shared.appendleft(message)  # not yet given to it: to another
            self._hand_out()

    # --- stopping (the pool's part of the stop sequence) ----------------------------

    def strand(self) -> None:
        """The pool stops at once: its queued tells are stranded, its waiting asks
        fail back, its feeders end."""
        super().strand()
        self.ready.set()  # asks waiting for workers see that it stopped
        for worker in list(self.feeders):
            self._forget_worker(worker)
        shared, self.shared = self.shared, deque()
        self.early_sends.clear()
        tells = []
        for item in shared:
            if type(item) is not _Waiter:
                tells.append(item)
                if type(item) is Notice:  # (a tracked tell from another node)
                    self.stranded_asks += 1
            else:
                trio.lowlevel.reschedule(item.task, outcome.Value(None))
        if tells:
            if self.stranded is None:
                self.stranded = deque()
            self.stranded.extend(tells)

    async def wait_drained(self) -> None:
        """A pool drains by handing out everything in its queue (balancing), then
        draining its workers -- all at once -- and waiting for their stops. A
        checkpoint; bounded by the pool's shutdown timeout like any drain."""
        with trio.CancelScope() as self.drain_scope:  # (an immediate stop cancels it)
            while self.state is ActorState.DRAINING and self._balancing_work_left():
                await self.progress.park()
            for worker in list(self.workers):
                worker.begin_stop(drain=True, cancel_handler=False)
            for worker in list(self.workers):
                await worker.wait_stopped()
        await super().wait_drained()

    def _balancing_work_left(self) -> bool:
        for worker in list(self.feeders):
            if not worker.accepting:
                self._forget_worker(worker)  # stopped meanwhile: nothing to wait for
        idle = len(self.free) + len(self.starting)  # (restarting ones hold nothing)
        return bool(self.shared or self.assigned or idle < len(self.feeders))

    def wake_drain_waiter(self) -> None:
        """An immediate stop ends the drain at once (its workers are then stopped
        at once, as any children). (Also called while it still drains, when the
        pool's own mailbox -- its workers' ``Terminated`` notices -- runs dry: that
        ends nothing, the shared queue is still to hand out.)"""
        if self.drain_scope is not None and self.state is not ActorState.DRAINING:
            self.drain_scope.cancel()
        super().wake_drain_waiter()

    def release_instance(self) -> None:
        """Kept: the pool's statistics read its configuration (``config``)."""

    def child_finished(self, child: ActorCell) -> None:
        """A worker stopped: its counts stay the pool's.

        Kept as the cell, not yet as counts: a task that entered the worker's
        ``ask`` or ``send`` before it stopped may still count there once it wakes
        (an ask cancelled at its checkpoint is counted withdrawn after it). Only
        the oldest beyond :data:`_RETIRED_KEPT` are folded into counts, so that a
        pool resized again and again holds a bounded number of old cells.
        """
        retired = self.retired
        retired.append(child)
        while len(retired) > _RETIRED_KEPT:
            self.retired_counts.add(retired.popleft().snapshot())

    def snapshot(self) -> ActorStatistics:
        """The pool's statistics: its own summed with its workers', past and
        present (:func:`~._counts.pool_statistics` says what each field counts)."""
        return pool_statistics(self, super().snapshot())


def _deliver(worker: ActorCell, message: Any, forwarded: bool) -> None:
    """Tell ``worker``: as its ref's tell (which may raise ``MailboxFull``), or as a
    tell forwarded from another thread (which makes a full one a dead letter)."""
    if forwarded:
        worker.tell_forwarded(message)
    else:
        worker.ref.tell(message)


def _load(worker: ActorCell) -> tuple[bool, int]:
    """Smallest-mailbox order: idle workers first, then by queued messages."""
    idle = worker.serving is Serving.IDLE and worker.accepting
    queued = (worker.head is not NO_MESSAGE) + len(worker.mailbox or ())
    return (not idle, queued)


protect_module(globals())

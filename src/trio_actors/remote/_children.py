"""Children on other nodes: an actor's child whose instance runs on another node.

``await self.spawn_remote(Worker, *args, on=...)`` (``Actor.spawn_remote``) makes a
child of the calling actor whose *instance* runs on a node the placement chooses
(``_spawning.py``), and whose *anchor* -- an ordinary child cell of the parent, on
the parent's node -- is what the parent supervises. Everything the kernel does for
a local child it does for the anchor, unchanged: it is in ``children``; it stops
with its parent, newest first, within its ``shutdown``; its failures go through the
parent's supervision (deciders, the restart intensity, group strategies); it is
watched, awaited and ``Terminated`` as a local child is. The anchor's ref is the
child's ref, and stays the same across restarts: its tells, asks and sends go
straight to the current instance (:class:`RemoteChildCell`, as a pool's cell routes
to its workers), and wait while there is none (told meanwhile, they are held in
order and sent on to the fresh instance first).

What links the two (:class:`Anchor`, the anchor's actor):

===============================  ==================================================
on the instance's node           on the parent's node
===============================  ==================================================
spawned with ``Stop()``: a       the anchor watches the instance; its
failure stops the instance,      ``Terminated(error)`` is a failure of the child
with the error                   (``handle_failure``, where "on node b"): the
                                 parent's strategy decides
the instance stops normally      the child stops (a ``permanent`` one is restarted)
the node dies, or leaves         ``Terminated(NodeDown)``: a failure, decided alike
(its system's exit)
(decided) Restart                a fresh instance, placed by the same rule
(decided) Resume                 a fresh instance too (the old one's state went with
                                 it, as an exit's in Erlang), not counted as a
                                 restart; if none can be placed, the child stops
                                 with that error
(decided) Stop / Escalate        the anchor stops (and its parent fails)
the anchor stops or restarts     it stops the instance (its ``on_stop``, within the
                                 child's ``shutdown``; past it, a task of the node
                                 goes on asking until the instance's node answers
                                 or is down)
the parent's node is down        the instance's node stops every instance the
                                 parent's node made (``Spawning.forget``)
===============================  ==================================================

A failure reaches the parent once: one ``Terminated`` per instance.
"""

from __future__ import annotations

from collections import deque
from contextlib import suppress
from threading import get_ident
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core._bounded import full_text
from .._core._cell import ActorCell
from .._core._failure import handle_failure, record_failure
from .._core._foreign import current_task_of
from .._core._state import ActorState
from .._core._stopping import DEFAULT_SHUTDOWN
from .._errors import ActorError, MailboxFull, NodeDown, describe_value
from .._interrupts import protect_module
from .._placement import Placement
from ..actors import Actor, ActorRef
from ..lifecycle import Terminated

if TYPE_CHECKING:
    from .._core._envelope import Ask, Notice
    from .._statistics import ActorStatistics
    from .._supervision import RestartType, Supervision
    from ..mailbox import Bounded
    from ._node import Node

__all__ = ["Anchor", "ChildSpec", "RemoteChildCell", "spawn_child"]


@attrs.frozen
class ChildSpec:
    """What makes each instance of a child on another node."""

    actor_class: type[Actor]
    args: tuple[Any, ...]
    on: str | Placement
    mailbox: Bounded | None
    shutdown: float | None


class RemoteChildCell(ActorCell):
    """The cell of a child on another node (on its parent's node): its ref's tells,
    asks and sends go to the current instance, or wait for one. Both tell fast
    paths are off (:meth:`refresh_tell_paths`); the cell's own mailbox only ever
    holds the ``Terminated`` of its instances."""

    instance: Anchor

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.target: ActorRef | None = None  # the instance's (remote) ref
        self.held: deque[Any] = deque()  # tells while there is no instance, in order
        self.ready = trio.Event()  # there is an instance (or the child stopped)
        self.stop_drain = False  # (how it was stopped: the instance is stopped alike)
        self.first: ActorRef | None = None  # (the instance spawn_remote made: for on_start)
        self.node: Node | None = None  # (the parent's: set by spawn_child)
        self.held_bound: Bounded | None = None  # (the instance's mailbox: what is held)
        self.ran_on: str | None = None  # the node of the last instance (tried first again)

    def refresh_tell_paths(self) -> None:
        self.activates = self.fast_tell = False  # every tell goes to the instance

    # --- the instance ---------------------------------------------------------------

    def attach(self, target: ActorRef) -> None:
        """``target`` is the instance from now on: what was held goes to it first."""
        self.target = target
        self.ran_on = target.path.partition(":")[0] if ":" in target.path else None
        held, self.held = self.held, deque()
        for message in held:
            target.tell(message)
        self.ready.set()

    def detach(self) -> ActorRef | None:
        """There is no instance any more (until :meth:`attach`); return the one
        there was."""
        target, self.target = self.target, None
        if self.ready.is_set() and self.accepting:
            self.ready = trio.Event()
        return target

    def snapshot(self) -> ActorStatistics:
        """The anchor's statistics, with the tells held for the next instance in
        ``mailbox_depth`` and the capacity they are held within (the instance's
        ``Bounded`` mailbox's)."""
        counts = super().snapshot()
        bound = self.held_bound
        return attrs.evolve(
            counts,
            mailbox_depth=counts.mailbox_depth + len(self.held),
            mailbox_capacity=None if bound is None else bound.capacity,
        )

    # --- what the ref does ------------------------------------------------------------

    def tell(self, message: Any) -> None:
        """To the instance, or held for the next one (from another thread through
        the system's foreign inbox, in order). Never a checkpoint.

        Raises:
            MailboxFull: held, past the capacity of the child's ``Bounded``
                mailbox under ``overflow="fail"``.
        """
        if get_ident() != self.dispatcher.thread_id:
            self.system._foreign.put(self, message)
        else:
            self._tell(message, raising=True)

    def tell_forwarded(self, message: Any) -> None:
        self._tell(message, raising=False)  # (nobody to raise MailboxFull to)

    def _tell(self, message: Any, *, raising: bool) -> None:
        if not self.accepting:
            self.tell_refused(message)
        elif self.target is None or self.held:
            self._hold(message, raising=raising)
        else:
            self.target.tell(message)

    def _hold(self, message: Any, *, raising: bool) -> None:
        """Hold ``message`` for the next instance -- within the capacity of the
        child's ``Bounded`` mailbox, past which its overflow policy applies here, as
        it would at the instance: held tells never grow without bound unless the
        instance's mailbox would."""
        held = self.held
        bounded = self.held_bound
        if bounded is not None and len(held) >= bounded.capacity:
            if bounded.overflow == "drop_old":
                self._overflowed(held.popleft())
            elif raising and bounded.overflow == "fail":
                self.failed_back += 1
                what = f"{describe_value(message)} was not held for its next instance"
                raise MailboxFull(full_text(self.path, bounded, what))
            else:
                self._overflowed(message)
                return
        held.append(message)

    def _overflowed(self, message: Any) -> None:
        self.overflow_letters += 1
        self.system.dead_letters.record(self.ref, message, "overflow")

    each_tell_tracked = True

    def queue_tracked(self, notice: Notice, sending: bool) -> None:
        """A tell from a third node to this child: it ends as this node sends it on
        to the instance (which tracks it from here), or holds it."""
        notice.take_back()
        self.tell_forwarded(notice.message)

    def accept_ask(self, envelope: Ask) -> bool:
        return False  # (asked from a task: _inbound.Answers)

    def ask_message(self, message: Any) -> Any:
        current_task_of(self.system, "ask")
        if not self.accepting:
            return self._refuse_ask()
        return self._ask(message)

    async def _ask(self, message: Any) -> Any:
        await self._until_ready()
        if self.target is None:  # (it stopped meanwhile)
            await self._refuse_ask()
        return await self.target.ask(message)

    async def send_message(self, message: Any) -> None:
        current_task_of(self.system, "send")
        await self._until_ready()
        if self.target is None:
            await self.refuse_send()
            return
        await self.target.send(message)

    async def _until_ready(self) -> None:
        """Wait for an instance (or for the child's stop). A checkpoint only if there
        is none now; cancelled meanwhile, nothing was sent."""
        if not self.ready.is_set():
            try:
                await self.ready.wait()
            except trio.Cancelled:
                self.note_withdrawn()
                raise

    # --- stopping -------------------------------------------------------------------

    def begin_stop(self, *, drain: bool, cancel_handler: bool, stop_task: bool = True) -> None:
        if self.accepting:
            self.stop_drain = drain
        first, self.first = self.first, None
        if first is not None:  # (stopped before its anchor started: no on_stop stops it)
            first.stop_nowait(drain=drain)
        super().begin_stop(drain=drain, cancel_handler=cancel_handler, stop_task=stop_task)

    async def wait_drained(self) -> None:
        """A drain ends when the anchor's own queue is handled (the kernel strands
        nothing then); the tells still held have no instance to go to: stranded as
        a stop's are, and what waits for an instance sees that it stopped."""
        await super().wait_drained()
        self.strand()  # (drained: nothing else is queued, and nothing serves it)

    def strand(self) -> None:
        """The child stops at once: the tells held for an instance are stranded with
        its own queue, and what waits for an instance sees that it stopped."""
        super().strand()
        if self.held:
            if self.stranded is None:
                self.stranded = deque()
            self.stranded.extend(self.held)
            self.held.clear()
        self.ready.set()


class Anchor(Actor):
    """The actor of a child on another node, on its parent's node (the module
    docstring's table)."""

    _trio_actors_cell_class = RemoteChildCell

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec

    def _child_cell(self) -> RemoteChildCell:
        cell = self._cell()
        assert isinstance(cell, RemoteChildCell)
        return cell

    async def on_start(self) -> None:
        cell = self._child_cell()
        instance, cell.first = cell.first, None  # (the first start's: made by spawn_remote)
        if instance is None:
            instance = await self._spawn()
        self._attach(instance)

    async def _spawn(self) -> ActorRef:
        spec = self.spec
        cell = self._child_cell()
        assert cell.node is not None
        return await cell.node.spawning.spawn(
            spec.actor_class,
            spec.args,
            spec.on,
            None,
            spec.mailbox,
            spec.shutdown,
            supervised=True,
            prefer=cell.ran_on,  # (a rule restarts it where it ran, if that node is up)
        )

    def _attach(self, instance: ActorRef) -> None:
        self.watch(instance)
        self._child_cell().attach(instance)

    async def receive(self, message: Any) -> None:
        cell = self._child_cell()
        if not isinstance(message, Terminated) or message.ref != cell.target:
            return  # (an instance's Terminated is all that comes here)
        cell.detach()
        error = message.error
        if error is None:
            self.stop()  # (it stopped normally: so does the child; permanent: restarted)
            return
        node = message.ref.path.partition(":")[0]
        where = (
            f"on node {node!r} (its node is down)"
            if isinstance(error, NodeDown)
            else f"on node {node!r}"
        )
        handle_failure(cell, error, where)
        if cell.state is ActorState.RUNNING:  # (resumed: a fresh instance all the same)
            try:
                instance = await self._spawn()
            except Exception as failed:  # (none: a child cannot go on without one)
                record_failure(cell, failed, "placing a fresh instance (resumed)")
                if cell.stop_error is None:
                    cell.stop_error = failed
                cell.begin_stop(drain=False, cancel_handler=False)
                return
            self._attach(instance)

    async def on_stop(self) -> None:
        cell = self._child_cell()
        instance = cell.detach()
        if instance is not None:
            try:
                await instance.stop(drain=cell.stop_drain)
            except trio.Cancelled:  # (the shutdown timeout: its node did not answer)
                assert cell.node is not None
                cell.node.start(_stop_for_good, instance)
                raise


async def _stop_for_good(instance: ActorRef) -> None:
    """Stop ``instance``, whose anchor's stop was cut short (a task of the node's:
    its request goes again at the confirm rounds until its node answers or is
    declared down) -- not left running there with nobody to supervise it."""
    with suppress(ActorError):  # (NodeDown: it has stopped with its node)
        await instance.stop()


async def spawn_child(
    node: Node,
    parent: ActorCell,
    actor_class: type[Actor],
    args: tuple[Any, ...],
    on: str | Placement,
    name: str | None,
    supervision: Supervision,
    mailbox: Bounded | None,
    shutdown: float,
    restart: RestartType,
) -> ActorRef:
    """Spawn the first instance (its errors are the caller's: ``NotSpawnable``,
    ``NodeDown``, the class's ``__init__`` raising there), then the anchor, the
    parent's child, with it. A checkpoint (one request to the chosen node).

    Raises:
        ActorError: the parent is stopping, draining or restarting (as
            ``Actor.spawn``); the instance is stopped again.
    """
    instance_shutdown = None if shutdown is DEFAULT_SHUTDOWN else float(shutdown)
    spec = ChildSpec(actor_class, args, on, mailbox, instance_shutdown)
    instance = await node.spawning.spawn(
        actor_class, args, on, None, mailbox, instance_shutdown, supervised=True
    )
    system = node.system
    try:
        child = system._spawn(parent, Anchor, (spec,), name, supervision, None, shutdown, restart)
    except BaseException:
        instance.stop_nowait()  # (its parent cannot have it: it is not left running)
        raise
    cell = child._cell
    assert isinstance(cell, RemoteChildCell)
    cell.first, cell.node, cell.held_bound = instance, node, mailbox
    return child


protect_module(globals())

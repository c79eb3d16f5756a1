"""Refs on the wire: local actors exported by number, remote actors as cells.

A ref crosses as ``(node, incarnation, path, export number, overflow)`` -- the last,
the overflow policy of the actor's mailbox (:data:`OVERFLOWS`), so that a node whose
link to the actor's node holds all it may applies that policy to one more ``tell``
(``_tells.py``). A node numbers each
local actor the first time a ref to it leaves (from any thread: a tell from another
thread encodes there), so a ref to a stopped actor never reaches a successor with
the same path; the number finds the actor when a message comes back for it. A ref
that arrives is the local actor's own, if it is of this node and has not stopped,
or a ref whose record is the node's one :class:`~._remote_cell.RemoteCell` for
that actor (kept weakly: refs to the same remote actor are the same cell). A ref
from the wire whose node or incarnation could not be a node's (not a subject token)
is refused: the message that holds it cannot be decoded.

**No weak reference to a cell.** An actor's cell is never weakly referenced (the
compiled kernel's cell, a mypyc native class, cannot be: issue 34), so the tables
of local actors are strong, and pruned when the actor stops:

* the cell keeps its own number (``ActorCell.export_number``, a class-level
  default: 0, never exported -- nothing for an actor whose ref never leaves), so a
  ref exported again has the same number;
* :attr:`Exports.cells` (number -> cell) holds the actors exported and not yet
  stopped: when one stops, the system (``ActorSystem._forget``, for a cell whose
  ``export_number`` is set) tells its node (``Node.exported_stopped``), which drops
  it here (:meth:`Exports.forget`) and from the shared names' cache of its wire
  form (``_groups.py``). A stopped actor exported for the first time is numbered
  but never kept. (A ref exported from another thread while the actor stops is
  dropped by one side or the other: the exporter writes the number, then reads the
  state; the trio thread writes ``STOPPED``, then reads the number.)

So **the number of a stopped actor finds nothing**, whether or not its cell is
still referenced here -- as, before, the number of an actor freed: a tell to it
is a dead letter ``"stopped"`` here (its recipient a ref to this node's actor
through the wire, as any ref from the wire that finds nothing here), an ask fails
with ``ActorStopped``, a stop is answered at once, a watch ends at once
(``Terminated`` without an error -- except a watch of an instance of another
node's child, which its node still holds: ``Spawning.stopped_instance``, so its
anchor hears its failure; and a watching node that heard the stop before
remembers its error and asks nothing, ``_watches.py``), and a ref to it that
comes back is a remote ref of this node (not equal to the local ref; a tell
through it reaches the same dead letter by way of the wire). Its dead letters
are the system's, not counted in the stopped actor's own statistics.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Final, cast

from .._cluster import check_token
from .._core._ref import new_ref
from .._core._state import ActorState
from .._interrupts import protect_module
from ..actors._pool._cell import PoolCell
from ._remote_cell import RemoteCell

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..actors import ActorRef
    from ._codec import WireRef
    from ._node import Node

__all__ = ["OVERFLOWS", "Exports", "overflow_code"]

_STOPPED = ActorState.STOPPED

OVERFLOWS: Final = ("", "fail", "drop_new", "drop_old")
"""A mailbox's overflow policy on the wire, by number: 0 for an unbounded one."""


def overflow_code(cell: ActorCell) -> int:
    """The number of ``cell``'s overflow policy (a balancing pool's: its queue's)."""
    bound = cell.bounded
    if bound is None and isinstance(cell, PoolCell):
        bound = cell.queue_bound
    return 0 if bound is None else OVERFLOWS.index(bound.overflow)


class Exports:
    """One node's refs across the wire, both ways.

    Attributes:
        cells: the local actors whose refs have left, by export number, until they
            stop (see the module's docstring).
    """

    __slots__ = ("_count", "_lock", "_node", "_remote", "cells")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.cells: dict[int, ActorCell] = {}
        self._count = itertools.count(1)
        self._lock = threading.Lock()  # (first exports, from any thread)
        # (by (node, incarnation, path, export number): one cell per remote actor)
        self._remote: weakref.WeakValueDictionary[tuple[str, str, str, int], RemoteCell] = (
            weakref.WeakValueDictionary()
        )

    def ref_to_wire(self, ref: ActorRef) -> WireRef:
        found: object = ref._cell  # (an ActorCell, or the RemoteCell of a remote ref)
        if type(found) is RemoteCell:
            return found.wire
        cell = cast("ActorCell", found)
        number = cell.export_number
        if not number:
            with self._lock:  # (a tell from another thread encodes there)
                number = cell.export_number
                if not number:
                    number = self._export(cell)
        node = self._node
        return (node.name, node.incarnation, cell.path, number, overflow_code(cell))

    def _export(self, cell: ActorCell) -> int:
        """Number ``cell``, and keep it until it stops (under the lock)."""
        number = next(self._count)
        self.cells[number] = cell
        cell.export_number = number  # (from now on the trio thread forgets it at its stop)
        if cell.state is _STOPPED:  # (stopped already, or meanwhile in the trio thread)
            self.cells.pop(number, None)
        return number

    def forget(self, cell: ActorCell) -> None:
        """``cell``'s actor has stopped: its number finds nothing from now on (the
        trio thread; ``Node.exported_stopped``)."""
        self.cells.pop(cell.export_number, None)

    def ref_from_wire(
        self, node: str, incarnation: str, path: str, number: int, overflow: int = 0
    ) -> ActorRef:
        me = self._node
        if node == me.name and incarnation == me.incarnation:
            cell = self.cells.get(number)
            if cell is not None:
                return new_ref(cell)
        actor = (node, incarnation, path, number)  # (one cell per actor: its policy is its)
        remote = self._remote.get(actor)
        if remote is None:
            check_token(node, "a ref's node")  # (ValueError: the message is undecodable)
            check_token(incarnation, "a ref's node incarnation")
            if not 0 <= overflow < len(OVERFLOWS):
                raise ValueError(f"a ref's overflow policy is 0 to 3, got {overflow}")
            remote = self._remote[actor] = RemoteCell(me, (*actor, overflow))
        return new_ref(remote)


protect_module(globals())

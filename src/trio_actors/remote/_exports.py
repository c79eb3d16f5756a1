"""Refs on the wire: local actors exported by number, remote actors as cells.

A ref crosses as ``(node, incarnation, path, export number, overflow)`` -- the last,
the overflow policy of the actor's mailbox (:data:`OVERFLOWS`), so that a node whose
link to the actor's node holds all it may applies that policy to one more ``tell``
(``_tells.py``). A node numbers each
local actor the first time a ref to it leaves (from any thread: a tell from another
thread encodes there), so a ref to a stopped actor never reaches a successor with
the same path; the number finds the actor when a message comes back for it. A ref
that arrives is the local actor's own, if it is of this node and still here, or a
ref whose record is the node's one :class:`~._remote_cell.RemoteCell` for that
actor (kept weakly: refs to the same remote actor are the same cell). A ref from
the wire whose node or incarnation could not be a node's (not a subject token) is
refused: the message that holds it cannot be decoded.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Final, cast

from .._cluster import check_token
from .._core._ref import new_ref
from .._interrupts import protect_module
from ..actors._pool._cell import PoolCell
from ._remote_cell import RemoteCell

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..actors import ActorRef
    from ._codec import WireRef
    from ._node import Node

__all__ = ["OVERFLOWS", "Exports", "overflow_code"]

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
        cells: the local actors whose refs have left, by export number (weakly).
    """

    __slots__ = ("_count", "_lock", "_node", "_numbers", "_remote", "cells")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.cells: weakref.WeakValueDictionary[int, ActorCell] = weakref.WeakValueDictionary()
        self._numbers: weakref.WeakKeyDictionary[ActorCell, int] = weakref.WeakKeyDictionary()
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
        number = self._numbers.get(cell)
        if number is None:
            with self._lock:  # (a tell from another thread encodes there)
                number = self._numbers.get(cell)
                if number is None:
                    number = next(self._count)
                    self._numbers[cell] = number
                    self.cells[number] = cell
        node = self._node
        return (node.name, node.incarnation, cell.path, number, overflow_code(cell))

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

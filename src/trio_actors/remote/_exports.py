"""Refs on the wire: local actors exported by number, remote actors as cells.

A ref crosses as ``(node, incarnation, path, export number)``. A node numbers each
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
from typing import TYPE_CHECKING, cast

from .._cluster import check_token
from .._core._ref import new_ref
from ._remote_cell import RemoteCell

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..actors import ActorRef
    from ._codec import WireRef
    from ._node import Node

__all__ = ["Exports"]


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
        self._remote: weakref.WeakValueDictionary[WireRef, RemoteCell] = (
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
        return (node.name, node.incarnation, cell.path, number)

    def ref_from_wire(self, node: str, incarnation: str, path: str, number: int) -> ActorRef:
        me = self._node
        if node == me.name and incarnation == me.incarnation:
            cell = self.cells.get(number)
            if cell is not None:
                return new_ref(cell)
        wire = (node, incarnation, path, number)
        remote = self._remote.get(wire)
        if remote is None:
            check_token(node, "a ref's node")  # (ValueError: the message is undecodable)
            check_token(incarnation, "a ref's node incarnation")
            remote = self._remote[wire] = RemoteCell(me, wire)
        return new_ref(remote)

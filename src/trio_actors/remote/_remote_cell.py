"""The record behind a ref to an actor on another node.

An :class:`~trio_actors.ActorRef` is one slot pointing at a record (its *cell*); for
a local actor that is the runtime's ``ActorCell``, for a remote one a
:class:`RemoteCell`, which answers the same calls by sending messages through its
node. So a remote ref *is* an ``ActorRef`` (same methods, ``isinstance`` holds), and
the local ``tell``'s inlined fast paths cost nothing more for it: a remote cell
never looks fast (``fast_tell`` and ``activates`` are always false), so ``tell``
goes to :meth:`RemoteCell.tell`. It implements the kernel's
:class:`~trio_actors._core._ref.ForeignCell` protocol (mypy checks it where a ref
to one is made).

A node keeps one remote cell per remote actor it has heard of (weakly), so refs to
the same remote actor are the same cell, and equal and hash alike. (A remote cell
may be weakly referenced; an ``ActorCell`` never is: ``_exports.py``.) Once its
node has said the actor stopped, the cell remembers how (``ended``): a watch or a
``wait_stopped`` made later is told at once (``_watches.py``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from threading import get_ident
from typing import TYPE_CHECKING, Any, Literal

from .._errors import ActorError
from .._interrupts import protect_module
from ._codec import WireRef
from ._subjects import tell_header

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from .._statistics import ActorStatistics
    from ..lifecycle import Terminated
    from ._node import Node

__all__ = ["RemoteCell"]


class RemoteCell:
    """An actor of another node, as this node reaches it."""

    __slots__ = (
        "__weakref__",
        "dispatcher",
        "eid",
        "ended",
        "incarnation",
        "link",
        "local_path",
        "node",
        "node_name",
        "overflow",
        "subject",
        "tell_header",
        "tells",
    )

    remote: Literal[True] = True
    fast_tell: Literal[False] = False
    activates: Literal[False] = False

    def __init__(self, node: Node, wire: WireRef) -> None:
        self.node = node
        # The local system's: ActorRef.tell compares its thread first, then finds
        # activates false and calls tell() (the fast paths never run on this cell).
        self.dispatcher = node.system._dispatcher
        self.node_name, self.incarnation, self.local_path, self.eid, self.overflow = wire
        self.subject = node.subjects.to_node(self.node_name, self.incarnation, node.name)
        self.tell_header = tell_header(self.eid, self.local_path)  # (in a message of tells)
        self.tells = node.tells  # (a tell's path: one attribute away)
        self.link = node.peers.link_to(self.peer)  # (its node's record of tells sent)
        # (its node said it stopped, with this error or None: Watches.on_terminated)
        self.ended: tuple[BaseException | None] | None = None

    @property
    def peer(self) -> tuple[str, str]:
        """Its node: (name, incarnation)."""
        return (self.node_name, self.incarnation)

    @property
    def wire(self) -> WireRef:
        return (self.node_name, self.incarnation, self.local_path, self.eid, self.overflow)

    @property
    def name(self) -> str:
        return self.local_path.rsplit("/", 1)[-1]

    @property
    def path(self) -> str:
        """``node:path``: the actor's path on its node, after the node's name."""
        return f"{self.node_name}:{self.local_path}"

    def __repr__(self) -> str:
        return f"<RemoteCell {self.path} ({self.incarnation})>"

    def tell(self, message: Any) -> None:
        if get_ident() != self.node.thread_id:
            self.tells.tell_from_elsewhere(self, message)  # (to the node's thread, in order)
            return
        self.tells.tell(self, message)

    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]:
        return self.node.requests.ask(self, message)

    async def send_message(self, message: Any) -> None:
        """``send``: waits while the link to its node has :data:`~._link.WINDOW`
        tells unacknowledged, then tells (``_tells.py``)."""
        self.node.check_thread("send")
        await self.tells.send_tell(self, message)

    async def stop_and_wait(self, *, drain: bool) -> None:
        await self.node.requests.stop(self, drain=drain)

    def request_stop(self, *, drain: bool) -> None:
        self.node.requests.request_stop(self, drain=drain)

    async def wait_terminated(self) -> Terminated:
        return await self.node.watches.wait_terminated(self)

    def watch_from(self, watcher: ActorCell) -> None:
        self.node.watches.watch(self, watcher)

    def unwatch_from(self, watcher: ActorCell) -> None:
        self.node.watches.unwatch(self, watcher)

    def forget_watcher(self, watcher: ActorCell) -> None:
        """``watcher`` stopped: its watch goes (nothing to withdraw from it)."""
        self.node.watches.forget_watcher(self, watcher)

    def snapshot(self) -> ActorStatistics:
        raise ActorError(
            f"statistics() of {self.path}: an actor on another node; ask it, or read "
            "them on its node"
        )


protect_module(globals())

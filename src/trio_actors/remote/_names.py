"""Registered names across nodes: one holder per name in the whole cluster.

A name registered on a node is answered for there (``P.name.<hex>``: a lookup is a
request to it). So that a second node cannot take a name another holds, every node
keeps a *view* of the names the others hold, from their announcements on
``P.names``: a **claim** when a node registers a name, a **release** when it
frees it. When a node first hears of another (a heartbeat or a claim; or again
after it had declared it down), it claims all its names again and asks that node
to do the same, so a node that joins learns them within milliseconds (and before
its own first registration is known to the others); the names of a node declared
down leave the view with it.
``register`` checks the view synchronously, as it checks the local registry:
``ValueError`` naming the node that holds the name.

Two nodes that register the same name before either has heard of the other's claim
(at the same moment, or a node registering before it has heard the others) are
reconciled when the claims cross, the same way on every node: the claim of the
node whose ``(name, incarnation)`` sorts first keeps the name, the other node
withdraws its registration and says so in the log (a warning naming both nodes) --
as Erlang's ``global`` resolves a name registered twice when two clusters meet,
where it ends one of the two processes by default; here the actor lives on,
without the name. A name registered *shared* on one node and alone on another
before either heard the other (``_groups.py``) is reconciled the same way on every
node too: the single registration keeps it, and the node serving it shared
withdraws its members from it (a warning naming both nodes).

What another node's announcements make this node do is bounded: the view holds at
most ``InputLimits.names`` names (a claim past it is counted and ignored), and this
node announces all its names at most once per ``InputLimits.announce_every``
seconds, however many nodes it meets or ask it to (those within the window share
one announcement at its end) -- a forged heartbeat or request for names costs at
most that.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from .._core._ref import new_ref
from .._interrupts import protect_module
from ._peers import PeerState

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._core._cell import ActorCell
    from ..actors import ActorRef
    from ._codec import WireRef
    from ._node import Node
    from ._subjects import Peer

__all__ = ["ClusterNames"]

CLAIM: Final = 0
RELEASE: Final = 1
ASK_FOR_NAMES: Final = 2  # (to the node named in it: announce all yours again)
SHARED_CLAIM: Final = 3  # (a shared name: the node serves it, _groups.py)
SHARED_RELEASE: Final = 4  # (a shared name: the node serves it no more)

_log = logging.getLogger("trio_actors")
_encode = msgspec.msgpack.Encoder().encode


class ClusterNames:
    """One node's side of the cluster's names: its announcements and its view."""

    __slots__ = (
        "_announce_pending",
        "_announced_at",
        "_node",
        "_publish",
        "_subject",
        "_subscriptions",
        "held",
    )

    def __init__(self, node: Node, publish: Callable[[str, bytes], None]) -> None:
        self._node = node
        self._publish = publish  # (the node's own: what cannot go is logged)
        self._subject = node.subjects.names(node.name, node.incarnation)  # (this node's)
        self.held: dict[str, WireRef] = {}  # names other nodes hold: name -> their ref
        # Names registered here: name -> what unsubscribes its lookups' subject.
        self._subscriptions: dict[str, Callable[[], None]] = {}
        self._announced_at = -float("inf")  # (when it last announced all its names)
        self._announce_pending = False

    @property
    def subject(self) -> str:
        """The subjects of every node's announcements (subscribed by the node)."""
        return self._node.subjects.all_names()

    def check(self, name: str) -> None:
        """Refuse ``name`` if another node holds it (as far as this node has heard).

        Raises:
            ValueError: naming the node.
        """
        wire = self.held.get(name)
        if wire is not None and self._node.peers.silent((wire[0], wire[1])):
            wire = None  # (its node went silent: down now, its names free)
        if wire is not None:
            node, incarnation, path, _number, _overflow = wire
            raise ValueError(
                f"cannot register {name!r}: {node}:{path} holds it on node {node!r} "
                f"({incarnation}); names are cluster-wide (unregister it there first, or "
                "wait for that actor, or its node, to stop)"
            )

    def registered(self) -> dict[str, ActorRef]:
        """Every name this node knows to be registered in the cluster, with its
        ref: this node's own, then those held by the members (a node declared down
        has no names here: ``forget``), in name order. What another node claimed a
        moment ago may not be here yet (its claim is on the way)."""
        node = self._node
        found: dict[str, ActorRef] = dict(node.system.registered())
        for name, wire in self.held.items():
            if name in found or node.peers.state((wire[0], wire[1])) is not PeerState.UP:
                continue
            try:
                found[name] = node.ref_from_wire(*wire)
            except ValueError:  # (not a node's token: never a usable ref)
                continue
        return dict(sorted(found.items()))

    def claimed(self, name: str, cell: ActorCell) -> None:
        """A local actor takes ``name``: refuse it if another node holds it (as far as
        this node has heard), else answer lookups of it from other nodes and tell
        them it is taken.

        Raises:
            ValueError: another node holds ``name``.
        """
        self.check(name)
        node = self._node
        wire = node.ref_to_wire(new_ref(cell))
        publish = self._publish

        def answer(reply: str) -> None:
            publish(reply, _encode((True, wire)))

        subject = node.subjects.name(name)
        self._subscriptions[name] = node.listen(subject, node.frames.lookup, answer)
        self.claim(name, wire)

    def released(self, name: str) -> None:
        """A local actor's ``name`` is free: no more lookups of it here; the others
        hear it."""
        unsubscribe = self._subscriptions.pop(name, None)
        if unsubscribe is not None:
            unsubscribe()
            self.release(name)

    def close(self) -> None:
        """The node left: no more lookups answered here (its names go with it)."""
        for unsubscribe in self._subscriptions.values():
            unsubscribe()
        self._subscriptions.clear()

    def claim(self, name: str, wire: WireRef) -> None:
        self._announce(CLAIM, name, wire)

    def release(self, name: str) -> None:
        node = self._node
        self._announce(RELEASE, name, (node.name, node.incarnation, "", 0, 0))

    def announce_all_soon(self) -> None:
        """Claim again every name held here (a node joined that has not heard them,
        or asked): now, if the last time was ``announce_every`` seconds ago or more,
        else once at the end of that window (however many ask meanwhile)."""
        if self._announce_pending:
            return
        node = self._node
        wait = self._announced_at + node.cluster.limits.announce_every - trio.current_time()
        if wait <= 0:
            self._announce_all()
        else:
            self._announce_pending = True
            node.start(self._announce_all_after, wait)

    async def _announce_all_after(self, wait: float) -> None:
        await trio.sleep(wait)
        self._announce_pending = False
        if not self._node.closed:
            self._announce_all()

    def _announce_all(self) -> None:
        node = self._node
        self._announced_at = trio.current_time()
        for name, ref in node.system.registered().items():
            self.claim(name, node.ref_to_wire(ref))
        node.groups.announce_all()

    def announce_shared(self, name: str, *, served: bool) -> None:
        """Say that this node serves shared name ``name`` (``served``), or no more."""
        node = self._node
        kind = SHARED_CLAIM if served else SHARED_RELEASE
        self._announce(kind, name, (node.name, node.incarnation, "", 0, 0))

    def ask_for_names(self, peer: Peer) -> None:
        """Ask ``peer`` to claim all its names again (this node has just met it)."""
        self._announce(ASK_FOR_NAMES, "", (peer[0], peer[1], "", 0, 0))

    def forget(self, peer: Peer) -> None:
        """``peer`` is down: its names are free."""
        for name in [n for n, wire in self.held.items() if (wire[0], wire[1]) == peer]:
            del self.held[name]
        self._node.groups.forget(peer)

    def _announce(self, kind: int, name: str, wire: WireRef) -> None:
        self._publish(self._subject, _encode((kind, name, *wire)))

    def on_announcement(self, announcement: tuple[int, str, str, str, str, int, int]) -> None:
        """A claim, a release or a request for names (parsed:
        ``Frames.announcement``)."""
        kind, name, node_name, incarnation, path, number, overflow = announcement
        node = self._node
        wire: WireRef = (node_name, incarnation, path, number, overflow)
        peer = (wire[0], wire[1])
        me = (node.name, node.incarnation)
        if kind == ASK_FOR_NAMES:  # (its node: the one asked)
            if peer == me:
                self.announce_all_soon()
            return
        if peer == me:  # (a claim is its publisher's own: Frames.announcement)
            return
        if not node.peers.claim(peer):
            node.refused(
                "over_limit",
                "a name's claim by a node the peer table has no room for",
                self._subject,
            )
            return
        if kind in (SHARED_CLAIM, SHARED_RELEASE):
            node.groups.on_announcement(name, peer, served=kind == SHARED_CLAIM)
            return
        if kind == RELEASE:
            held = self.held.get(name)
            if held is not None and (held[0], held[1]) == peer:
                del self.held[name]
            return
        if node.groups.serves(name):  # (shared here, single there: the single one keeps it)
            node.groups.withdraw(name, peer)
            self.held[name] = wire
            return
        if name in node.system.registered():
            if peer < me:
                _log.warning(
                    "name %r was registered on node %r and on node %r (%s) before either "
                    "heard of the other: node %r keeps it, so this node's registration is "
                    "withdrawn (the actor goes on without the name)",
                    name,
                    node.name,
                    peer[0],
                    peer[1],
                    peer[0],
                )
                node.system.unregister(name)
                self.held[name] = wire
            else:
                self.claim(name, node.ref_to_wire(node.system.registered()[name]))
            return
        held = self.held.get(name)
        if held is None and len(self.held) >= node.cluster.limits.names:
            node.refused(
                "over_limit", "more names held elsewhere than InputLimits.names", self._subject
            )
        elif held is None or peer <= (held[0], held[1]):
            self.held[name] = wire


protect_module(globals())

"""The cluster's members as this node knows them, and who follows their changes.

The members are the peers in ``UP`` in the peer table (``_peers.py``, the one state
machine of a peer's liveness): this module keeps no bookkeeping of its own. The table
calls :meth:`Members.joined` when a peer enters ``UP`` (a heartbeat, or another sign
of life, from a node new to this one or declared down before) and
:meth:`Members.gone` when one leaves it (its ``bye``, its silence, the server's
disconnect advisory); each becomes one event offered to every follower's bounded
stream (:class:`~trio_actors.MembershipEvents`), which never makes the node wait.

**A node that joins asks once** (no waiting a heartbeat period for the others to
beat): its first heartbeat says ``hello`` (``P.hb.<node>.<incarnation>``, the
subject every node already hears), and every node that hears a hello answers at once
with a heartbeat of its own -- which the joiner takes as any heartbeat: each node
that answers is ``UP`` there, and a member, a round trip after the join. Nothing
else is new on the wire. What a hello makes a node do is bounded: one heartbeat (a
few bytes) per ``InputLimits.announce_every`` seconds at most, however many hellos
come (those within the window share one answer at its end) -- a forged hello, or a
flood of them, costs no more; and a hello from a node the full peer table has no
room for is refused before it is answered (counted ``over_limit``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import trio

from .._interrupts import protect_module
from .._membership import (
    Member,
    MemberDown,
    MemberJoined,
    MemberLeft,
    MembershipEvent,
    MembershipEvents,
)

if TYPE_CHECKING:
    from ._node import Node
    from ._peers import GoneReason, PeerRecord

__all__ = ["Members"]


def member_of(record: PeerRecord) -> Member:
    node, incarnation = record.peer
    since = record.since
    assert since is not None  # (set on entering UP, kept until it leaves UP)
    return Member(node, incarnation, since)


class Members:
    """One node's members (read from its peer table) and their followers."""

    __slots__ = ("_answer_pending", "_answered_at", "_closed", "_followers", "_node")

    def __init__(self, node: Node) -> None:
        self._node = node
        # (held weakly: a stream its user dropped without closing it goes, with
        # the events it held, when it is collected -- not kept for the node's life)
        self._followers: weakref.WeakSet[MembershipEvents] = weakref.WeakSet()
        self._closed = False
        self._answered_at = -float("inf")  # (when it last answered a hello)
        self._answer_pending = False

    # --- reading --------------------------------------------------------------------

    def members(self) -> list[Member]:
        """The nodes this node knows to be up, this node included, in the order
        they joined (as this node saw it; by name for the same moment)."""
        found = [member_of(record) for record in self._node.peers.up()]
        return sorted(found, key=lambda member: (member.since, member.name, member.incarnation))

    def follow(self, capacity: int) -> MembershipEvents:
        """A new follower's stream of the changes from now on (closed at once if the
        node has left).

        Raises:
            TypeError, ValueError: ``capacity`` is not an int >= 1.
        """
        events = MembershipEvents(capacity)
        if self._closed:
            events.close()
        else:
            self._followers.add(events)
        return events

    # --- what the peer table tells (its transitions' reactions) ---------------------

    def joined(self, record: PeerRecord) -> None:
        """``record``'s peer entered ``UP``."""
        self._offer(MemberJoined(member_of(record)))

    def gone(self, record: PeerRecord, reason: GoneReason) -> None:
        """``record``'s peer left ``UP``: it said ``bye``, or was declared down."""
        member = member_of(record)
        self._offer(MemberLeft(member) if reason == "left" else MemberDown(member, reason))

    def _offer(self, event: MembershipEvent) -> None:
        followers = self._followers
        for follower in list(followers):
            if follower.closed:
                followers.discard(follower)
            else:
                follower.offer(event)

    # --- hello: a joiner asks once ---------------------------------------------------

    def on_hello(self) -> None:
        """Another node has just joined and asks who is up (its first heartbeat said
        ``hello``, and the peer table took it): answer with this node's heartbeat
        now, or once at the end of the ``announce_every`` window after the last
        answer (however many hellos come meanwhile)."""
        if self._answer_pending:
            return
        node = self._node
        wait = self._answered_at + node.cluster.limits.announce_every - trio.current_time()
        if wait <= 0:
            self._answer()
        else:
            self._answer_pending = True
            node.start(self._answer_after, wait)

    async def _answer_after(self, wait: float) -> None:
        await trio.sleep(wait)
        self._answer_pending = False
        if not self._node.closed:
            self._answer()

    def _answer(self) -> None:
        self._answered_at = trio.current_time()
        self._node.heartbeats.beat_now()

    # --- leaving --------------------------------------------------------------------

    def close(self) -> None:
        """The node left: every follower's stream ends after what it holds (and one
        made later ends at once). Idempotent."""
        self._closed = True
        for follower in list(self._followers):
            follower.close()
        self._followers.clear()


protect_module(globals())

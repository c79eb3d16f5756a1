"""How a node learns that the others live or die: the peer table's input.

* **Heartbeats** (``P.hb.<node>.<incarnation>``): every node publishes one every
  ``Cluster.heartbeat`` seconds, and ``bye`` when it leaves. A heartbeat is the
  ``HEARTBEAT`` event of its node's peer; ``bye`` is ``DOWN`` ("it left the
  cluster"). A node's first heartbeat says ``hello``: the others answer it at once
  with a heartbeat (``_members.py``), so a node that joins knows who is up after a
  round trip, not a heartbeat period.
* **Silence**: after each beat, every peer silent for ``heartbeats_missed`` beats
  is declared down -- one that a request or a watch waits on (since it was sent,
  if never heard), and one heard before (also if nothing waits on it: its names).
  This works on any NATS account and covers a node that hangs with its connection
  open. Silence is counted in the time this node ran: a beat that wakes late
  (this node's own loop was blocked) moves every silence clock on by as much
  (``Peers.stalled``), so a node never takes its own stall for the others'
  silence.
* **Advisories**: given a user of the servers' system account, the server says
  when a connection ends (``$SYS.ACCOUNT.*.DISCONNECT``); a node's connection is
  named after it (``_subjects.connection_name``), so its death is known within
  milliseconds of a ``kill -9``, not after missed heartbeats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import TYPE_CHECKING

import trio

from .._interrupts import protect_module
from ._subjects import DISCONNECT_ADVISORIES, Beat, Peer

if TYPE_CHECKING:
    from ._node import Node
    from ._transport import Transport

__all__ = ["Heartbeats"]

# A beat later than this share of the interval is a stall of this node's own (a
# blocked loop); less is scheduling noise, far inside the silence's margin.
_STALL = 0.1


class Heartbeats:
    """One node's failure detector: its beats, and what it hears of the others'."""

    __slots__ = ("_node", "subject")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.subject = node.subjects.heartbeat(node.name, node.incarnation)

    async def beat(self) -> None:
        """Beat, and after each beat declare down the peers silent too long (how
        late the beat woke is this node's own stall, not the others' silence),
        until the node has closed (said ``bye``: its last flush may still take a
        while, and the task then ends without another beat)."""
        node = self._node
        interval = node.cluster.heartbeat
        node.tells.publish(self.subject, b"hello")  # (its first: the others answer it)
        while True:
            slept_at = trio.current_time()
            await trio.sleep(interval)
            if node.closed:  # (it said bye: a beat now would bring it back to the others)
                return
            late = trio.current_time() - slept_at - interval
            if late > interval * _STALL:  # (this node did not run: not others' silence)
                node.peers.stalled(late)
            node.peers.check(self._waiting_on())
            self.beat_now()

    def beat_now(self) -> None:
        """Publish a heartbeat now (the beats, and the answers to hellos)."""
        self._node.tells.publish(self.subject, b"")

    def _waiting_on(self) -> Iterator[tuple[Peer, float]]:
        """What waits on each peer, and since when: requests, then watches."""
        yield from self._node.requests.waiting_on()
        yield from self._node.watches.waiting_on()

    def say_bye(self) -> None:
        """This node leaves: the others hear it (after what it sent before)."""
        self._node.tells.publish(self.subject, b"bye")

    def on_heartbeat(self, heartbeat: tuple[Peer, Beat]) -> None:
        """A heartbeat of any node (this one's too), its ``bye`` or its ``hello``
        (parsed: ``Frames.heartbeat``). One from a node the full peer table has no
        room for is counted, and nothing else (a hello is not answered); so is a
        ``bye`` of this node itself (forged: a node stops hearing before it says
        it)."""
        peer, beat = heartbeat
        node = self._node
        if beat == "bye" and peer == node.peers.me:
            if not node.closed:  # (its own, heard on the way out: a bus delivers it late)
                node.refused(
                    "forged", "a bye of this node itself, which has not left", self.subject
                )
        elif beat == "bye":
            node.peers.down(peer, "it left the cluster", reason="left")
        elif not node.peers.heartbeat(peer):
            node.refused(
                "over_limit", "a heartbeat of a node the peer table has no room for", self.subject
            )
        elif beat == "hello" and peer != node.peers.me:
            node.membership.on_hello()

    def follow_advisories(self, advisories: Transport) -> Callable[[], None]:
        """Hear the server's disconnect advisories on ``advisories``; return what
        stops hearing them."""
        node = self._node
        return node.listen(
            DISCONNECT_ADVISORIES, node.frames.advisory, self.on_disconnect_advisory, advisories
        )

    def on_disconnect_advisory(self, peer: Peer | None) -> None:
        """The server says a connection ended (the system account's
        ``client_disconnect`` advisory; parsed: ``Frames.advisory``): if it was a
        node's (``peer``), that node is down. Where this node authenticates as a
        user named after itself (a secure deployment, ``docs/security.rst``), the
        others do too: ``Frames.advisory`` takes an advisory only if the
        connection's user is the node its name says."""
        node = self._node
        if peer is not None and peer != (node.name, node.incarnation):
            node.start(self._down_by_advisory, peer, node.requests.made)  # (not once closed)

    async def _down_by_advisory(self, peer: Peer, sent_up_to: int) -> None:
        """Declare ``peer`` down, once this node's own connection has brought what
        the server routed to it before (a flush: the server answers it after them).
        The advisory comes on another connection: a reply the dead node sent just
        before it died would otherwise arrive after its ``NodeDown``. What this node
        asks it meanwhile is answered by NATS (no responders: ``ActorStopped``)."""
        node = self._node
        with suppress(Exception):  # (this node's connection is lost: that says enough)
            await node.transport.flush()
        why = "its connection ended (the server's disconnect advisory)"
        node.peers.down(peer, why, sent_up_to=sent_up_to, reason="advisory")


protect_module(globals())

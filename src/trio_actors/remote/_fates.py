"""What became of each message of tells a node sent: acknowledged, bounced, refused,
sent again, or given back -- its tells' fates, each known to the sender.

``_tells.py`` sends the tells and keeps each message in its link's window
(``_link.py``, whose table says what can happen to a tell); this module is the
other half: it hears what the receiving node, NATS and the peer table say of them
and takes each message out of its window by exactly one of those ways, with the dead
letters they make -- ``"unreachable"``, ``"refused"`` or ``"in-doubt"``, each with
its message -- and counts :attr:`Fates.unconfirmed`. A message NATS answered with
no-responders while its node was up (between two connections) stays: it is sent
again at the node's next confirm round (:meth:`Fates.send_undelivered`).

Never a checkpoint, except where a method says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

import trio

from .._core._dead_letters import DeadLetterReason
from .._core._ref import new_ref
from .._interrupts import protect_module
from ._link import Link, Marks, Sent
from ._peers import PeerState
from ._subjects import Peer, tells_frame

if TYPE_CHECKING:
    from ._frames import Ack
    from ._node import Node
    from ._tells import Tells

__all__ = ["IN_DOUBT", "Fates"]

IN_DOUBT: Final[DeadLetterReason] = "in-doubt"
"""The reason of a tell given back because its fate is unknown (pinned)."""

_LOST: Final = "lost on the way (a server or a connection changed)"

_log = logging.getLogger("trio_actors")


class Fates:
    """The messages of tells one node sent and whose tells have not all ended, and
    what becomes of them.

    Attributes:
        kept: every message of tells in a window: its link and its sequence number
            there, by its number in the node's sequence (the number a
            no-responders answer names).
        unconfirmed: tells given back ``"in-doubt"`` (as many dead letters).
    """

    __slots__ = (
        "_drained",
        "_node",
        "_tells",
        "_undelivered",
        "_unreachable",
        "kept",
        "unconfirmed",
    )

    def __init__(self, node: Node, tells: Tells) -> None:
        self._node = node
        self._tells = tells
        self._unreachable = node.subjects.unreachable(node.name, node.incarnation)
        self.kept: dict[int, tuple[Link, int]] = {}
        # The messages NATS answered with no-responders while their node was up
        # (between two connections): never delivered, sent again at its next
        # confirm round -- by number, in order.
        self._undelivered: dict[int, Link] = {}
        self._drained: trio.Event | None = None  # (set when kept empties: leave waits)
        self.unconfirmed = 0

    def on_ack(self, ack: tuple[str, str, Ack]) -> None:
        """A node says which of this node's tells have ended there (parsed:
        ``Frames.ack``: the node its subject names, and its record, start, skipped
        ranges, settled mark and marks per actor)."""
        node, incarnation, (record, start, skipped, settled, marks) = ack
        link = self._node.peers.current_link((node, incarnation))
        if link is not None and link.record == record and not link.closed:
            self._acknowledged(link, start, skipped, settled, marks)

    def _acknowledged(
        self,
        link: Link,
        start: int,
        skipped: Sequence[tuple[int, int]],
        settled: int,
        marks: Marks,
    ) -> None:
        """An acknowledgement (or a confirm round's answer) about ``link``: the
        receiver tracks it from message ``start`` on (those before never arrived).
        A later ``start`` than the one it said before means it forgot the record
        and began again (it declared this node down, or skipped too much): what it
        had not acknowledged from before is given back in doubt, and its marks
        speak of the messages from ``start`` on. An earlier one is stale (a
        confirm answer overtaken by an acknowledgement)."""
        if link.start is None or start > link.start:
            why = "the receiving node lost track of them" if link.start else _LOST
            self._give_back(link.began_again(start), why)  # (before start: never came)
        elif start < link.start:
            return
        numbers, given_back = link.acknowledged(skipped, settled, marks)
        kept, undelivered = self.kept, self._undelivered
        for number in numbers:
            del kept[number]
            undelivered.pop(number, None)
        if given_back:
            self._give_back(given_back, _LOST)
        self._tells.room(link)
        self._forgotten()

    def on_unreachable(self, bounce: tuple[int, bool]) -> None:
        """NATS's answer on a message of tells' reply subject (parsed:
        ``Frames.bounce``): no-responders -- nothing served the node, the
        message was never delivered. While the node is up (it is between two
        connections), the message stays in its window, to be sent again at its
        next confirm round (:meth:`send_undelivered`); otherwise its tells are
        dead letters "unreachable"."""
        number, no_responders = bounce
        if not no_responders or number not in self.kept:
            return
        link, sequence = self.kept[number]
        message = link.window.get(sequence)
        peer = None if message is None else message.tells[0][0].peer
        if peer is not None and not link.closed and self._node.peers.state(peer) is PeerState.UP:
            self._undelivered[number] = link
            return
        sent = self._take(number)
        if sent is not None:
            self._bounced(sent, "unreachable")
            self._tells.room(sent[0])

    def undelivered_peers(self) -> set[Peer]:
        """The peers with messages of tells to send again."""
        peers: set[Peer] = set()
        for number, link in self._undelivered.items():
            message = link.window.get(self.kept[number][1])
            if message is not None:
                peers.add(message.tells[0][0].peer)
        return peers

    def undelivered_to(self, peer: Peer) -> bool:
        """Whether messages of tells to ``peer`` wait to be sent again (an ask or a
        stop made now waits for the round too: it must not overtake them)."""
        if not self._undelivered:
            return False
        link = self._node.peers.current_link(peer)
        return link is not None and any(of is link for of in self._undelivered.values())

    def send_undelivered(self, peer: Peer) -> None:
        """Send again, in order, the messages of tells to ``peer`` that NATS answered
        with no-responders while it was up (each with its number and its sequence
        in its record: the receiver holds what came after them until they come).
        What the connection refuses now waits for the next round. Never a
        checkpoint."""
        link = self._node.peers.current_link(peer)
        if link is None or link.closed:
            return
        for number in [n for n, of in self._undelivered.items() if of is link]:
            sequence = self.kept[number][1]
            message = link.window.get(sequence)
            if message is None:
                continue
            data = tells_frame(message.kind, sequence, link.record, link.first(), message.tells)
            subject, reply = message.tells[0][0].subject, f"{self._unreachable}.{number}"
            try:  # (not after what the link holds: that was told after this)
                self._tells.out(subject, data, reply, ordered=False)
            except Exception as error:  # (closed, or full while reconnecting: next round)
                name = self._node.name
                _log.warning("node %s: tells to %s not sent again: %s", name, peer, error)
                return
            del self._undelivered[number]

    def _take(self, number: int) -> tuple[Link, Sent] | None:
        """Message ``number`` out of its link's window (``None``: not there)."""
        kept = self.kept.pop(number, None)
        if kept is None:
            return None
        self._undelivered.pop(number, None)
        self._forgotten()
        link, sequence = kept
        sent = link.take(sequence)
        return None if sent is None else (link, sent)

    def _bounced(self, taken: tuple[Link, Sent], reason: DeadLetterReason) -> int:
        link, (_number, tells) = taken
        link.bounced += len(tells)
        dead_letters = self._node.system.dead_letters
        for recipient, told, _body in tells:
            dead_letters.record(new_ref(recipient), told, reason)
        return len(tells)

    def refused(self, subject: str, why: str) -> int:
        """The server refused this node's messages on ``subject`` (a node's):
        the tells sent there and not yet acknowledged are dead letters "refused",
        accounted on their link like bounced ones; return how many."""
        count = 0
        refused_links: dict[int, Link] = {}
        for number, (link, sequence) in list(self.kept.items()):
            message = link.window.get(sequence)
            if message is not None and message.tells[0][0].subject == subject:  # (one node's)
                taken = self._take(number)
                if taken is not None:
                    count += self._bounced(taken, "refused")
                    refused_links[id(link)] = link
        for link in refused_links.values():
            link.close()  # (some may have been delivered before: never counted again)
            self._tells.room(link)
        if count:
            _log.warning("node %s: %d tell(s) refused: %s", self._node.name, count, why)
        return count

    def _give_back(self, sent: Iterable[Sent], why: str) -> int:
        """Tells whose fate is unknown: dead letters ``"in-doubt"`` with their
        messages, counted in :attr:`unconfirmed`; return how many. (Those of a
        message NATS answered with no-responders the last time it was sent were
        never delivered: dead letters ``"unreachable"``.)"""
        count = 0
        dead_letters = self._node.system.dead_letters
        for number, tells in sent:
            kept = self.kept.pop(number, None)
            never_delivered = self._undelivered.pop(number, None) is not None
            if kept is not None:
                if never_delivered:
                    kept[0].bounced += len(tells)
                else:
                    kept[0].in_doubt += len(tells)
            reason: DeadLetterReason = "unreachable" if never_delivered else IN_DOUBT
            for recipient, told, _body in tells:
                dead_letters.record(new_ref(recipient), told, reason)
            if not never_delivered:
                count += len(tells)
        self._forgotten()
        if count:
            self.unconfirmed += count
            _log.warning(
                "node %s: %d tell(s) given back in doubt (may or may not have been handled): %s",
                self._node.name,
                count,
                why,
            )
        return count

    def renew(self, link: Link, why: str) -> None:
        """Close ``link``'s record, giving back what it has not acknowledged as in
        doubt: the next tell to its node starts a new record (whatever the
        receiver still counts of this one is never charged to another)."""
        link.close()
        self.give_back_window(link, why)

    def give_back_window(self, link: Link, why: str) -> int:
        """Give back every tell in ``link``'s window as in doubt (and send what it
        held to its node's next record); return how many."""
        count = self._give_back(link.take_all(), why)
        self._tells.room(link)
        return count

    async def count_lost(self, peer: Peer, link: Link, said: str) -> None:
        """``peer`` is down (``said``): once the server has routed what was sent to
        it before (its no-responders answers come first), give back what it had
        not acknowledged as in doubt. A checkpoint."""
        try:
            await self._node.transport.flush()
        except Exception:  # (this node's connection is lost: given back all the same)
            await trio.lowlevel.checkpoint()
        self.give_back_window(link, said)
        self._node.peers.accounted(peer, link)

    async def confirmed(
        self,
        link: Link,
        start: int,
        skipped: Sequence[tuple[int, int]],
        settled: int,
        marks: Marks,
    ) -> None:
        """A confirm round's answer about ``link``: the receiver gave up what was sent
        before the round and had not come (``skipped``), and says its settled mark
        and the marks of the actors asked about. Once the server has routed what
        was sent before (a flush: the no-responders answers come first, and make
        their tells "unreachable"), it is an acknowledgement like any: what was
        skipped -- lost on the way -- is given back as in doubt. A checkpoint."""
        try:
            await self._node.transport.flush()
        except Exception:  # (this node's connection is lost: the next round sees)
            return
        if start and not link.closed:  # (0: the receiver keeps nothing of it)
            self._acknowledged(link, start, skipped, settled, marks)

    async def all_acknowledged(self, within: float) -> None:
        """Wait until every tell sent is acknowledged (or otherwise ended), at most
        ``within`` seconds (``leave``). A checkpoint."""
        if self.kept or self._tells.held:
            self._drained = trio.Event()
            with trio.move_on_after(within):
                await self._drained.wait()
        await trio.lowlevel.checkpoint()

    def _forgotten(self) -> None:
        """Messages left :attr:`_kept`: if none is left, say so to a leave."""
        if not self.kept and not self._tells.held and self._drained is not None:
            self._drained.set()

    def finish(self) -> None:
        """After the node's close: give back as in doubt every tell not
        acknowledged. Never a checkpoint; idempotent."""
        for link in {id(link): link for link, _sequence in self.kept.values()}.values():
            self.give_back_window(link, "this node left before they were acknowledged")


protect_module(globals())

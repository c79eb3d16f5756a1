"""Tells across nodes: sent coalesced, confirmed, acknowledged -- nothing lost silently.

**Coalescing (the outbox).** Every NATS message costs the same whatever it carries:
a frame built and its subjects checked here, a route looked up by the server, a
frame parsed on the receiving node. A stream of tells from one node to another pays
that once per *message*, not once per tell, when the tells travel together -- as
Akka's Artery and Erlang's distribution buffer theirs. The rule is Nagle's
algorithm, with the connection's own buffer as the signal:

* a tell leaves **at once**, alone, when nothing the node published waits for the
  connection's writer (the NATS client's writer task; see its write-through,
  ``nats/_client.py``) -- a lone tell costs what it did before;
* while something waits, the tell waits in the :class:`Outbox` instead, **per
  node**; at the writer's next turn (``Transport.before_writing``) each node's
  waiting tells are published as one message, just before the writer takes the
  buffer, so they leave in the same write as what was waiting -- no task of the
  outbox's own, no extra turn;
* a node's waiting tells go out at once when they reach :data:`TELLS_PER_MESSAGE`
  tells or would pass :data:`BYTES_PER_MESSAGE` bytes, and before *anything else*
  the node sends (:meth:`Tells.out`: an ask, a stop, a reply, a heartbeat...): what
  the node sends leaves in the order it was sent, as without an outbox (T2, and
  replies never overtake the tells made before them).

What a waiting tell's message meets when it goes (the connection closed, its
buffer full while reconnecting) has nobody to be raised to: those tells become dead
letters "unreachable", with a warning in the log -- as a tell from another thread
does. A tell sent at once raises to its caller.

**Accounting (T21 across nodes).** A remote tell ends in one of three ways its
sender can know of: it is **handled**, it is a **dead letter** (on the receiving
node: the actor had stopped; on the sending node: nothing served the node, NATS's
no-responders on the message's reply subject ``P.u.<node>.<incarnation>.<n>``), or
its fate is **unknown** because the receiving node died with it, or this node's
connection was lost before the server confirmed routing it -- counted in
:attr:`Tells.unconfirmed`, never silently gone. Each message of tells is kept until
the server has confirmed routing it (a flush every :data:`CONFIRM_EVERY` seconds
while tells wait: a no-responders answer comes before the server's ``PONG``).

So that the death of a receiver is counted, and only it, the receiving node
*acknowledges* what it took (:class:`TakenIn`): for each sending node it counts the
tells it took in (queued in a mailbox, or made a dead letter there), and every
:data:`ACK_EVERY` seconds while tells come it publishes the count to the sender's
``P.a.<node>.<incarnation>``. The sender keeps a :class:`Link` per node it tells:
how many tells it sent, how many came back unreachable, how many were
acknowledged. When that node is declared down (``_peers.py``), the sender waits
until its server has routed everything sent before (a flush: the no-responders
answers come first), and counts ``told - acknowledged - bounced`` as unconfirmed.

What "acknowledged" promises: the tell was in the receiving node's hands -- in a
mailbox there. A node killed with messages in its mailboxes loses them, as a
crashed process does; a node that leaves in order handles them or makes them dead
letters while its actors stop, and sends its last acknowledgements before it says
``bye``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from .._core._ref import new_ref
from ._subjects import TELL, Peer, encode

if TYPE_CHECKING:
    from ._codec import Codec
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = [
    "ACK_EVERY",
    "BYTES_PER_MESSAGE",
    "CONFIRM_EVERY",
    "TELLS_PER_MESSAGE",
    "Link",
    "Outbox",
    "TakenIn",
    "Tells",
    "Told",
]

TELLS_PER_MESSAGE: Final = 64
"""Tells to one node sent as one message at most (the runtime's yield batch)."""

BYTES_PER_MESSAGE: Final = 64 * 1024
"""Bytes of tells to one node sent as one message at most (well under NATS's
default ``max_payload`` of 1 MiB); a body this large goes alone, at once."""

ACK_EVERY: Final = 0.005
"""Seconds between acknowledgements while tells come in."""

CONFIRM_EVERY: Final = 0.005
"""Seconds between flushes that confirm tells."""

Told = tuple["RemoteCell", Any, bytes]
"""A tell: its recipient, its message (kept for a dead letter) and its body."""

_log = logging.getLogger("trio_actors")


class Link:
    """This node's tells to one node (one incarnation of it, one life of it: a new
    link once the peer table has declared it down and it is told again)."""

    __slots__ = ("acked", "bounced", "closed_after", "missing", "told")

    def __init__(self) -> None:
        self.told = 0  # sent (and not counted unconfirmed by a lost connection)
        self.acked = 0  # acknowledged by the receiving node (its cumulative count)
        self.bounced = 0  # came back: nothing served it (dead letters "unreachable")
        self.missing = 0  # lost on the way, found by a confirm round (unconfirmed)
        # Its node was declared down after the tell with this number: tells after it
        # are not accounted here (they bounce: dead letters). Set once, by the peer
        # table (``_peers.py``), when it closes the link.
        self.closed_after: int | None = None

    def counts(self, number: int) -> bool:
        """Whether tell ``number`` (the node's sequence) is accounted on this link."""
        return self.closed_after is None or number <= self.closed_after

    def lost(self, told: int) -> int:
        """Of the first ``told`` tells, those neither acknowledged, bounced nor
        already found missing."""
        return max(0, told - self.acked - self.bounced - self.missing)

    def unaccounted(self, told: int) -> bool:
        """Whether some of the first ``told`` tells are not accounted yet."""
        return told > self.acked + self.bounced + self.missing


class TakenIn:
    """The receiving side: tells taken in per sending node, and what was said."""

    __slots__ = ("_said", "counts")

    def __init__(self) -> None:
        # By the sender's unreachable-subject prefix (``P.u.<node>.<incarnation>``,
        # the tell's reply subject without its number): no parsing per tell.
        self.counts: dict[str, int] = {}
        self._said: dict[str, int] = {}

    def take(self, prefix: str, tells: int) -> None:
        """``tells`` tells came in from the node whose unreachable subjects start
        with ``prefix``."""
        counts = self.counts
        counts[prefix] = counts.get(prefix, 0) + tells

    def unsaid(self) -> list[tuple[str, int]]:
        """The (sender prefix, count) pairs not yet acknowledged; marks them said."""
        news = [(prefix, n) for prefix, n in self.counts.items() if self._said.get(prefix) != n]
        for prefix, count in news:
            self._said[prefix] = count
        return news

    def count_of(self, prefix: str) -> int:
        """How many tells came in from the node of ``prefix`` (its unreachable-subject
        prefix), in all."""
        return self.counts.get(prefix, 0)

    def forget(self, prefix: str) -> None:
        """The sending node is gone: nothing more to acknowledge to it."""
        self.counts.pop(prefix, None)
        self._said.pop(prefix, None)


class Outbox:
    """The tells waiting for the connection's writer, by node subject.

    ``send(subject, tells)`` sends a node's waiting tells as one message (the node
    numbers and accounts them); :meth:`flush` sends them all (the node calls it at
    the writer's turn, and before anything else it sends).
    """

    __slots__ = ("_bytes", "_send", "waiting")

    def __init__(self, send: Callable[[str, list[Told]], None]) -> None:
        self._send = send
        self.waiting: dict[str, list[Told]] = {}  # (node subject -> its tells, in order)
        self._bytes: dict[str, int] = {}

    def add(self, subject: str, told: Told) -> None:
        """Keep ``told`` for ``subject``'s next message (sent now if that is full).
        Never a checkpoint."""
        size = len(told[2])
        tells = self.waiting.get(subject)
        if tells is not None and self._bytes[subject] + size > BYTES_PER_MESSAGE:
            self._send_waiting(subject)  # (full by its bytes: this one begins the next)
            tells = None
        if tells is None:
            tells = self.waiting[subject] = []
            self._bytes[subject] = 0
        tells.append(told)
        self._bytes[subject] += size
        if len(tells) >= TELLS_PER_MESSAGE:
            self._send_waiting(subject)

    def _send_waiting(self, subject: str) -> None:
        tells = self.waiting.pop(subject)
        del self._bytes[subject]
        self._send(subject, tells)

    def flush(self) -> None:
        """Send every node's waiting tells now (oldest node first). Never a
        checkpoint; never raises (what cannot be sent is the node's to account)."""
        while self.waiting:
            self._send_waiting(next(iter(self.waiting)))


class Tells:
    """One node's sending side: its tells (coalesced, numbered, kept until
    confirmed), everything else it publishes (after the waiting tells), and the
    acknowledgements both ways.

    Attributes:
        sent: the number of the newest tell sent (the node's sequence).
        unconfirmed: tells whose fate a lost connection or node left unknown.
        taken: the tells taken in from each other node, to acknowledge.
    """

    __slots__ = (
        "_ack",
        "_bounces",
        "_codecs_elsewhere",
        "_confirm",
        "_node",
        "_unconfirmed",
        "_unreachable",
        "closed",
        "codec",
        "outbox",
        "sent",
        "taken",
        "transport",
        "unconfirmed",
    )

    def __init__(self, node: Node) -> None:
        self._node = node
        self.transport = node.transport
        self.codec = node.codec
        self.closed = False  # (the node has left: a tell is a dead letter here)
        self._unreachable = node.subjects.unreachable(node.name, node.incarnation)
        self._codecs_elsewhere = threading.local()  # (one per other thread that tells)
        # Tells sent and not yet confirmed, by the number of the last in each message.
        self._unconfirmed: dict[int, list[Told]] = {}
        self.unconfirmed = 0
        self.sent = 0
        self.outbox = Outbox(self._send_tells)  # (tells waiting for the writer's turn)
        self._confirm = trio.Event()
        self.taken = TakenIn()
        self._ack = trio.Event()
        # (kept past close(): the no-responders answers to its last tells; finish())
        self._bounces: Callable[[], None] | None = node.listen(
            f"{self._unreachable}.*", node.frames.bounce, self.on_unreachable
        )

    async def run(self) -> None:
        """Confirming tells sent, and acknowledging tells taken in."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._confirm_tells)
            nursery.start_soon(self._acknowledge)

    # --- what the node publishes, in order --------------------------------------

    def out(self, subject: str, data: bytes, reply: str | None = None) -> None:
        """Publish, after the tells waiting in the outbox: what the node sends
        leaves in the order it was sent. May raise what the connection refuses."""
        if self.outbox.waiting:
            self.outbox.flush()
        self.transport.publish(subject, data, reply=reply)

    def publish(self, subject: str, data: bytes) -> None:
        """Send a message of the node's own (a heartbeat, a reply, a notice): what the
        connection refuses now (full while reconnecting, closed, too large) is said
        in the log, never an error that would end the node."""
        try:
            self.out(subject, data)
        except Exception as error:
            _log.warning("node %s: could not send to %s: %s", self._node.name, subject, error)

    def send(
        self, cell: RemoteCell, kind: int, body: bytes | msgspec.Raw, reply: str | None
    ) -> None:
        """A message of ``kind`` to a remote actor (in order, after waiting tells)."""
        raw = body if isinstance(body, msgspec.Raw) else msgspec.Raw(body)
        self.out(cell.subject, encode((kind, cell.eid, cell.local_path, raw)), reply)

    # --- tells ------------------------------------------------------------------

    def tell(self, cell: RemoteCell, message: Any) -> None:
        """A remote tell: encoded (``TypeError`` now if it cannot cross), published,
        kept until confirmed. Never a checkpoint. After this node has left the
        cluster, a dead letter here (reason ``"unreachable"``)."""
        self._tell_encoded(cell, message, self.codec.encode(message))

    def tell_from_elsewhere(self, cell: RemoteCell, message: Any) -> None:
        """A remote tell from a thread other than the node's: encoded in that thread
        (``TypeError`` there, to the caller, if it cannot cross), sent from the
        node's thread in this thread's order. What the connection then refuses
        (closed, full while reconnecting) has nobody to be raised to: a dead letter
        "unreachable", and a warning in the log."""
        codec: Codec | None = getattr(self._codecs_elsewhere, "codec", None)
        if codec is None:
            codec = self._codecs_elsewhere.codec = self._node.new_codec()
        body = codec.encode(message)
        self._node.trio_token.run_sync_soon(self._tell_sent_elsewhere, cell, message, body)

    def _tell_sent_elsewhere(self, cell: RemoteCell, message: Any, body: bytes) -> None:
        try:
            self._tell_encoded(cell, message, body)
        except Exception as error:  # (in a callback of trio's: nothing may escape)
            self._not_sent([(cell, message, body)], error)

    def _tell_encoded(self, cell: RemoteCell, message: Any, body: bytes) -> None:
        """Send now (raising what the connection refuses), or keep in the outbox
        until the connection's writer's turn while what the node published waits
        for it."""
        if self.closed:
            self._node.system.dead_letters.record(new_ref(cell), message, "unreachable")
            return
        outbox = self.outbox
        if len(body) < BYTES_PER_MESSAGE and (outbox.waiting or self.transport.waiting_to_write()):
            outbox.add(cell.subject, (cell, message, body))  # (sent at the writer's turn)
            return
        if outbox.waiting:
            outbox.flush()
        self._publish_tells(cell.subject, [(cell, message, body)])

    def _send_tells(self, subject: str, tells: list[Told]) -> None:
        """The outbox's tells to one node, as one message: what the connection
        refuses has nobody to be raised to -- dead letters "unreachable"."""
        try:
            self._publish_tells(subject, tells)
        except Exception as error:
            self._not_sent(tells, error)

    def _not_sent(self, tells: list[Told], error: Exception) -> None:
        """Tells the connection refused, with nobody to raise it to: a warning, and
        dead letters "unreachable"."""
        to, count = tells[0][0].node_name, len(tells)  # (one message: one node's tells)
        node = self._node
        _log.warning("node %s: %d tell(s) to node %s not sent: %s", node.name, count, to, error)
        for cell, message, _body in tells:
            node.system.dead_letters.record(new_ref(cell), message, "unreachable")

    def _publish_tells(self, subject: str, tells: list[Told]) -> None:
        """Tells to one node as one ``TELL`` message, numbered in this node's
        sequence; its reply subject carries the number of the last, so a no-
        responders answer says which came back. Kept until confirmed. May raise
        what the connection refuses (then nothing was sent)."""
        number = self.sent + len(tells)
        bodies = [(cell.eid, cell.local_path, msgspec.Raw(body)) for cell, _m, body in tells]
        data = encode((TELL, 0, "", bodies))
        self.transport.publish(subject, data, reply=f"{self._unreachable}.{number}")
        self.sent = number
        self._unconfirmed[number] = tells
        cell = tells[0][0]  # (one subject: one node's tells, one link)
        link = cell.link
        if link.closed_after is not None:  # (its node was declared down, and is told again)
            link = cell.link = self._node.peers.link_to(cell.peer)
        link.told += len(tells)
        self._confirm.set()

    def flush(self) -> None:
        """Send the tells waiting in the outbox now. Never a checkpoint."""
        self.outbox.flush()

    # --- confirmed, bounced or lost ---------------------------------------------

    async def _confirm_tells(self) -> None:
        while True:
            await self._confirm.wait()
            self._confirm = trio.Event()
            await trio.sleep(CONFIRM_EVERY)
            newest = self.sent
            await self.transport.flush()
            unconfirmed = self._unconfirmed
            confirmed = [number for number in unconfirmed if number <= newest]
            for number in confirmed:  # (numbers ascend: the oldest come first)
                del unconfirmed[number]
            if unconfirmed:
                self._confirm.set()

    def on_unreachable(self, bounce: tuple[int, bool]) -> None:
        """NATS's answer on a message of tells' reply subject (parsed:
        ``Frames.bounce``): no-responders makes its tells dead letters
        "unreachable"; any answer confirms them."""
        number, no_responders = bounce
        tells = self._unconfirmed.pop(number, None)
        if tells is not None and no_responders:
            link = tells[0][0].link
            if link.counts(number):
                link.bounced += len(tells)
            for recipient, told, _body in tells:
                self._node.system.dead_letters.record(new_ref(recipient), told, "unreachable")

    def refused(self, subject: str, why: str) -> int:
        """The server refused this node's messages on ``subject`` (a node's):
        the tells sent there and not yet confirmed are dead letters "refused",
        accounted on their link like bounced ones; return how many."""
        count = 0
        for number, tells in list(self._unconfirmed.items()):
            if tells[0][0].subject != subject:  # (one message: one node's tells)
                continue
            del self._unconfirmed[number]
            link = tells[0][0].link
            if link.counts(number):
                link.bounced += len(tells)
            for recipient, told, _body in tells:
                self._node.system.dead_letters.record(new_ref(recipient), told, "refused")
            count += len(tells)
        if count:
            _log.warning("node %s: %d tell(s) refused: %s", self._node.name, count, why)
        return count

    async def count_lost(self, peer: Peer, link: Link, told: int) -> None:
        """``peer`` is down: once the server has routed what was sent to it before
        (its no-responders answers come first), count the tells it had neither
        acknowledged nor bounced as unconfirmed."""
        with suppress(Exception):  # (this node's connection is lost: counted there)
            await self.transport.flush()
        self.unconfirmed += link.lost(told)
        self._node.peers.accounted(peer, link)

    async def count_missing(self, link: Link, told: int, taken: int) -> None:
        """A confirm round's answer: the receiving node had taken in ``taken`` of this
        node's tells when it answered, and the first ``told`` on ``link`` were sent
        before the round. Once the server has routed what was sent before (a
        flush: the no-responders answers to them come first), those neither taken
        in nor bounced were lost on the way: counted in :attr:`unconfirmed`. A
        checkpoint."""
        if taken > link.acked:
            link.acked = taken
        try:
            await self.transport.flush()
        except Exception:  # (this node's connection is lost: counted there)
            return
        missing = link.lost(min(told, link.told))  # (a lost connection took some back)
        if missing:
            link.missing += missing
            self.unconfirmed += missing
            _log.warning(
                "node %s: %d tell(s) were lost on the way to another node (a server or a "
                "connection changed); counted as unconfirmed",
                self._node.name,
                missing,
            )

    def connection_lost(self) -> None:
        """This node's connection was lost: the tells not yet confirmed are counted
        in :attr:`unconfirmed` (delivered or not, nobody can say) instead of
        waiting for a confirmation across the reconnect."""
        for number, tells in self._unconfirmed.items():
            self.unconfirmed += len(tells)
            link = tells[0][0].link  # (one message: one node's tells)
            if link.counts(number):
                link.told -= len(tells)  # (counted here: not again if its node goes down)
        self._unconfirmed.clear()

    def finish(self, *, flushed: bool) -> None:
        """After the node's close and a last flush: stop hearing the no-responders
        answers to the last tells (they came before the flush's end). Tells still
        unconfirmed are confirmed if the flush ended (``flushed``), else counted in
        :attr:`unconfirmed`. Never a checkpoint; idempotent."""
        if self._bounces is not None:
            self._bounces()
            self._bounces = None
        if not flushed:
            self.unconfirmed += sum(len(tells) for tells in self._unconfirmed.values())
        self._unconfirmed.clear()

    # --- acknowledgements -------------------------------------------------------

    def took(self, reply: str, tells: int) -> None:
        """``tells`` tells came in from another node (reply subject ``reply``):
        acknowledged within :data:`ACK_EVERY` seconds. A node this node has not
        heard from is a sign of life for the peer table (so that it is watched
        for silence, and what is kept for it goes with it); while the table is
        full, or with a reply subject that is not a node's, the tells are taken
        in but not acknowledged."""
        prefix = reply.rpartition(".")[0]
        taken = self.taken
        if prefix not in taken.counts:
            node = self._node
            sender = node.frames.tell_sender(reply)
            if sender is None:
                return  # (not a node's tells: nobody to acknowledge)
            if not node.peers.claim(sender):
                node.refused(
                    "over_limit", "tells from a node the peer table has no room for", reply
                )
                return
        taken.take(prefix, tells)
        self._ack.set()

    async def _acknowledge(self) -> None:
        while True:
            await self._ack.wait()
            self._ack = trio.Event()
            await trio.sleep(ACK_EVERY)
            self.send_acks()

    def send_acks(self) -> None:
        """Tell each node whose tells came in since the last time how many in all."""
        node = self._node
        me = (node.name, node.incarnation)
        for prefix, count in self.taken.unsaid():
            self.publish(node.subjects.acks_of(me, prefix), encode(count))

    def on_ack(self, ack: tuple[str, str, int]) -> None:
        """A node says how many of this node's tells it has taken in, in all
        (parsed: ``Frames.ack``: the node its subject names)."""
        node, incarnation, count = ack
        link = self._node.peers.current_link((node, incarnation))
        if link is not None and count > link.acked:
            link.acked = count

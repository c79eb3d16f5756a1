"""Tells across nodes: sent coalesced, kept until acknowledged -- every tell's fate
known to its sender.

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

**Accounting (T21 across nodes).** Each message of tells is sent on its node's
*link* (``_link.py``), numbered in the link's record, and kept there -- with its
messages -- until the receiving node acknowledges that its tells have *ended*
there (handled, or dead letters there: ``_taken_in.py``). Its tells end here in
exactly one other way otherwise: dead letters ``"unreachable"`` (NATS answered
no-responders on the message's reply subject ``P.u.<node>.<incarnation>.<n>``:
nothing served the node -- while the node is up, the message is sent again at the
next confirm round instead, and is unreachable only if it still bounced when its
node is declared down or the rounds give up), ``"refused"`` (the server refused
them), or
**``"in-doubt"``**, with the message: the receiving node was declared down (after a
flush, so that the no-responders answers come first), or skipped the message, or a
confirm round found it lost, or this node left before it was acknowledged. An
in-doubt tell may or may not have been handled; retrying it is the application's
choice (at-least-once). ``Fates.unconfirmed`` counts them: it equals the number of
in-doubt dead letters. What hears those fates and takes each message out of its
window is ``_fates.py``.
"""

from __future__ import annotations

import logging
import operator
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from .._core._ref import new_ref
from .._errors import MailboxFull, describe_value
from .._interrupts import protect_module
from . import _link
from ._exports import OVERFLOWS
from ._fates import Fates
from ._group_cell import GroupCell
from ._link import Link, Told
from ._outbox import BYTES_PER_MESSAGE, TELLS_PER_MESSAGE, Outbox, Outgoing
from ._subjects import SENDS, TELL, encode, tells_frame
from ._taken_in import TakenIn

if TYPE_CHECKING:
    from ..nats import Headers
    from ._codec import Codec
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = ["BYTES_PER_MESSAGE", "SEND_LINGER", "TELLS_PER_MESSAGE", "Tells"]

SEND_LINGER: Final = 0.0005
"""Seconds a ``send`` may wait in the outbox for the next ones, while the tells sent
before it to its node are not yet acknowledged (a stream of sends): one message for
many, as tells coalesce without waiting -- a ``send`` yields after each tell, so the
connection's writer would otherwise send each alone (R6, docs/performance.rst)."""

_log = logging.getLogger("trio_actors")

_BODY = operator.itemgetter(2)  # (a tell's body)


class Tells:
    """One node's sending side: its tells (coalesced, numbered, kept in their link's
    window until acknowledged), everything else it publishes (after the waiting
    tells), and the tells taken in from the others (:attr:`taken`).

    Attributes:
        sent: the number of the newest message of tells sent (the node's sequence).
        fates: what became of the messages of tells sent (``_fates.py``).
        held: the tells held past their link's window, all links together.
        taken: the tells taken in from each other node, to acknowledge.
    """

    __slots__ = (
        "_bounces",
        "_codecs_elsewhere",
        "_lingering",
        "_node",
        "_records",
        "_unreachable",
        "closed",
        "codec",
        "fates",
        "held",
        "outbox",
        "sent",
        "taken",
        "transport",
    )

    def __init__(self, node: Node) -> None:
        self._node = node
        self.transport = node.transport
        self.codec = node.codec
        self.closed = False  # (the node has left: a tell is a dead letter here)
        self._unreachable = node.subjects.unreachable(node.name, node.incarnation)
        self._codecs_elsewhere = threading.local()  # (one per other thread that tells)
        self.fates = Fates(node, self)  # (what became of each message of tells sent)
        self.held = 0  # (tells held past their link's window, all links together)
        self._records = 0  # (links made: each one's record is its number)
        self.sent = 0
        self.outbox = Outbox(self._send_tells)  # (tells waiting for the writer's turn)
        self.taken = TakenIn(node)
        self._lingering = trio.Event()  # (a send lingers in the outbox: SEND_LINGER)
        # (kept past close(): the no-responders answers to its last tells; finish())
        self._bounces: Callable[[], None] | None = node.listen(
            f"{self._unreachable}.*", node.frames.bounce, self.fates.on_unreachable
        )

    def new_link(self) -> Link:
        """A new record of tells to a peer (the peer table makes one when told)."""
        self._records += 1
        return Link(str(self._records))

    async def run(self) -> None:
        """Acknowledging the tells taken in, and sending the sends that linger."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.taken.run)
            nursery.start_soon(self._send_lingering)

    async def _send_lingering(self) -> None:
        while True:
            await self._lingering.wait()
            self._lingering = trio.Event()
            await trio.sleep(SEND_LINGER)
            self.outbox.flush()

    # --- what the node publishes, in order --------------------------------------

    def out(
        self,
        subject: str,
        data: bytes,
        reply: str | None = None,
        *,
        ordered: bool = True,
        headers: Headers | None = None,
    ) -> None:
        """Publish, after the tells waiting in the outbox -- and, if it is for a
        node whose link holds tells (a reply, a stop notice: they must not overtake
        the tells made before them, to whichever actor), after those, sent now past
        the window: what the node sends leaves in the order it was sent (T2). Not
        ``ordered``: a confirm round, which is about the tells sent, not those
        held; and what :meth:`send` sends, which has sent its own actor's.
        ``headers``: an observed node's (a traced ask's context). May raise what
        the connection refuses."""
        if self.held and ordered:
            peer = self._node.subjects.addressee(subject)
            link = None if peer is None else self._node.peers.current_link(peer)
            if link is not None and link.held.tells:
                self.room(link, past_the_window=True)
        if self.outbox.waiting:
            self.outbox.flush()
        if headers is None:
            self.transport.publish(subject, data, reply=reply)
        else:
            self.transport.publish(subject, data, reply=reply, headers=headers)

    def publish(self, subject: str, data: bytes, *, ordered: bool = True) -> None:
        """Send a message of the node's own (a heartbeat, a reply, a notice): what the
        connection refuses now (full while reconnecting, closed, too large) is said
        in the log, never an error that would end the node. ``ordered``: see
        :meth:`out`."""
        try:
            self.out(subject, data, ordered=ordered)
        except Exception as error:
            _log.warning("node %s: could not send to %s: %s", self._node.name, subject, error)

    def send(
        self,
        cell: RemoteCell,
        kind: int,
        body: bytes | msgspec.Raw,
        reply: str | None,
        headers: Headers | None = None,
    ) -> None:
        """A message of ``kind`` to a remote actor (an ask, a stop, a watch...): after
        the tells told before it -- those waiting in the outbox, and those its link
        holds for that actor, sent now past the window (T2 is per actor: the
        others' stay held). ``headers``: see :meth:`out`."""
        raw = body if isinstance(body, msgspec.Raw) else msgspec.Raw(body)
        # (the cell's link is its record with tells held for it, if any: a closed
        # one holds none -- they went to the next record, through this cell, which
        # then took that record as its own)
        link = cell.link
        if link.held.tells and cell.eid in link.held.by_actor:
            self._send_held(link.held.all_of(cell), link)
        data = encode((kind, cell.eid, cell.local_path, raw))
        self.out(cell.subject, data, reply, ordered=False, headers=headers)

    # --- tells ------------------------------------------------------------------

    def tell(self, cell: RemoteCell, message: Any) -> None:
        """A remote tell: encoded (``TypeError`` now if it cannot cross), published,
        kept until acknowledged. Never a checkpoint. After this node has left the
        cluster, a dead letter here (reason ``"unreachable"``)."""
        self._tell_encoded(cell, message, self.codec.encode(message))

    async def send_tell(self, cell: RemoteCell, message: Any) -> None:
        """``send`` to a remote actor: wait while its link's window is full (the
        receiver has not acknowledged :data:`~._link.WINDOW` tells), then tell. A
        checkpoint; cancelled while it waits, nothing was sent."""
        await trio.lowlevel.checkpoint_if_cancelled()
        body = self.codec.encode(message)  # (TypeError before any wait)
        woken = False
        while True:
            link = self._link_of(cell)  # (closed meanwhile: its node's new record)
            waiting = len(self.outbox.waiting.get(cell.subject, ()))  # (sent, not yet out)
            if link.has_room(waiting):
                break
            if not link.full:
                self.outbox.flush()  # (full only with those: out now, then counted)
                continue
            await link.wait_for_room(again=woken)
            woken = True
        try:
            self._tell_encoded(cell, message, body, SENDS, linger=bool(link.window))
        finally:
            if woken:
                link.pass_on()  # (the next waiting send, if room is left)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def _link_of(self, cell: RemoteCell) -> Link:
        link = cell.link
        if link.closed:  # (its node was declared down, and is told again)
            link = cell.link = self._node.peers.link_to(cell.peer)
        return link

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
        except MailboxFull as error:  # (its link holds all it may: nobody to raise it to)
            _log.warning("node %s: %s", self._node.name, error)
            self._node.system.dead_letters.record(new_ref(cell), message, "overflow")
        except Exception as error:  # (in a callback of trio's: nothing may escape)
            self._not_sent([(cell, message, body)], error)

    def _tell_encoded(
        self, cell: RemoteCell, message: Any, body: bytes, kind: int = TELL, *, linger: bool = False
    ) -> None:
        """Send now (raising what the connection refuses), or keep in the outbox
        (:meth:`coalesce`). ``kind``: ``SENDS`` for a tell from ``send``, which
        lingers in a stream of them (``linger``)."""
        if self.closed:
            self._node.system.dead_letters.record(new_ref(cell), message, "unreachable")
            return
        link = cell.link
        if link.closed:
            link = self._link_of(cell)
        # (held.tells, the deque itself: a C-level test on every tell's path)
        if kind == TELL and (link.held.tells or link.in_window >= _link.WINDOW):
            self._hold(link, cell, message, body)  # (past the window: held)
            return
        if not self.coalesce(cell.subject, (cell, message, body), kind, linger=linger):
            self._publish_tells(cell.subject, [(cell, message, body)], kind, link)

    def coalesce(
        self,
        subject: str,
        told: Outgoing,
        kind: int,
        *,
        linger: bool = False,
        most: int = TELLS_PER_MESSAGE,
    ) -> bool:
        """Keep ``told`` (to a node's actor, or to a shared name: ``_group_sends.py``)
        in the outbox, to leave with the next at the connection writer's turn (in a
        message of ``most`` tells at most), while what the node published waits for
        it -- or, ``linger``: a send in a stream of them, for :data:`SEND_LINGER`
        seconds. Returns whether it was kept; if not, the outbox is flushed (what
        waits there was told first), and the caller sends it now. Never a
        checkpoint."""
        outbox = self.outbox
        if len(told[2]) < BYTES_PER_MESSAGE and not self.closed:
            if outbox.waiting or self.transport.waiting_to_write():
                outbox.add(subject, told, kind, most)  # (at the writer's turn)
                return True
            if linger:
                outbox.add(subject, told, kind, most)  # (a stream of sends: one message)
                self._lingering.set()
                return True
        if outbox.waiting:
            outbox.flush()
        return False

    def _hold(self, link: Link, cell: RemoteCell, message: Any, body: bytes) -> None:
        """A tell past its link's window: held, to be sent as the window frees
        (:meth:`_room`). Past :data:`~._link.HELD` held tells, the overflow policy of
        its actor's mailbox (its ref carries it): ``"drop_new"`` makes it a dead
        letter "overflow" here; ``"drop_old"`` the oldest tell held for that actor
        (or it, if none is); ``"fail"``, or an unbounded mailbox, ``MailboxFull``:
        nothing is sent, and its caller knows."""
        held = link.held
        if len(held.tells) >= _link.HELD:
            policy = OVERFLOWS[cell.overflow]
            if policy == "drop_old":
                oldest = held.oldest_of(cell)
                if oldest is None:
                    policy = "drop_new"  # (none of its own held: it is the oldest)
                else:
                    self.held -= 1
                    self._node.system.dead_letters.record(new_ref(cell), oldest[1], "overflow")
            if policy == "drop_new":
                self._node.system.dead_letters.record(new_ref(cell), message, "overflow")
                return
            if policy != "drop_old":
                raise MailboxFull(
                    f"{cell.path}: {describe_value(message)} was not sent -- node "
                    f"{cell.node_name!r} has not acknowledged {link.in_window} tells from "
                    f"this node and {len(held)} more wait to be sent (the most a node "
                    "holds for another); use send() to wait for room, or tell less at once"
                )
        held.append((cell, message, body))
        self.held += 1

    def room(self, link: Link, *, past_the_window: bool = False) -> None:
        """``link``'s window may have room: send what it holds, in order, as far as
        the window allows (``past_the_window``: all of it -- something that must
        follow it goes next); a closed link's (its node was declared down) goes to
        its node's next record, as if told now (and a left node's is dead letters
        "unreachable": never sent). Never a checkpoint; never raises."""
        held = link.held
        if not held.tells:
            return
        if link.closed or self.closed:
            again = held.clear()
            self.held -= len(again)
            for cell, message, body in again:
                self._tell_sent_elsewhere(cell, message, body)  # (nobody to raise to)
            return
        room = len(held) if past_the_window else _link.WINDOW - link.in_window
        if room > 0:
            self._send_held([held.popleft() for _ in range(min(room, len(held)))], link)

    def _send_held(self, tells: list[Told], link: Link) -> None:
        """Send ``tells``, taken out of ``link``'s held ones, in order: as few
        messages as the outbox would make of them. Never raises."""
        self.held -= len(tells)
        if self.outbox.waiting:
            self.outbox.flush()  # (what waits there was told before)
        subject, start = tells[0][0].subject, 0
        if max(map(len, map(_BODY, tells))) * TELLS_PER_MESSAGE <= BYTES_PER_MESSAGE:
            # (small bodies, the usual: messages of 64 without measuring each -- the
            # shape is R2's burst, held then sent at its ask: 30,540 -> 27,020
            # instructions per tell, both nodes of an R2-like run in one process
            # under callgrind; df87772, before tells were held: 26,943)
            for start in range(0, len(tells), TELLS_PER_MESSAGE):
                self._send_tells(subject, tells[start : start + TELLS_PER_MESSAGE], TELL, link)
            return
        while start < len(tells):
            end, size = start + 1, len(tells[start][2])
            while (
                end < len(tells)
                and end - start < TELLS_PER_MESSAGE
                and size + len(tells[end][2]) <= BYTES_PER_MESSAGE
            ):
                size += len(tells[end][2])
                end += 1
            self._send_tells(subject, tells[start:end], TELL, link)
            start = end

    def _send_tells(
        self, subject: str, tells: list[Outgoing], kind: int, link: Link | None = None
    ) -> None:
        """The outbox's tells to one node (on ``link``, if the caller knows it), as
        one message: what the connection refuses has nobody to be raised to --
        dead letters "unreachable". Or to one shared name: its group's."""
        if isinstance(tells[0][0], GroupCell):
            self._node.groups.send_told(tells, kind)
            return
        try:
            self._publish_tells(subject, tells, kind, link)
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

    def _publish_tells(
        self, subject: str, tells: list[Told], kind: int = TELL, link: Link | None = None
    ) -> None:
        """Tells to one node as one ``TELL`` message, numbered in this node's
        sequence (its reply subject carries the number, so a no-responders answer
        says which came back) and in its link's record (its frame carries the
        record and the sequence number there, for the acknowledgements). Kept in
        the link's window until acknowledged. May raise what the connection
        refuses (then nothing was sent)."""
        if link is None:
            link = self._link_of(tells[0][0])  # (one subject: one node's tells, one link)
        number = self.sent + 1
        data = tells_frame(kind, link.sequence + 1, link.record, link.first(), tells)
        self.transport.publish(subject, data, reply=f"{self._unreachable}.{number}")
        self.sent = number
        self.fates.kept[number] = (link, link.sent(number, tells, kind))

    def flush(self) -> None:
        """Send the tells waiting in the outbox now. Never a checkpoint."""
        self.outbox.flush()

    def finish(self) -> None:
        """After the node's close and a last flush: stop hearing the no-responders
        answers to the last tells (they came before the flush's end), and give back
        as in doubt every tell not acknowledged. Never a checkpoint; idempotent."""
        if self._bounces is not None:
            self._bounces()
            self._bounces = None
        self.fates.finish()


protect_module(globals())

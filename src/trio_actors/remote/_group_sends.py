r"""The sending side of shared names (``_groups.py`` tells the whole story): each
message sent to a group from its sending to its end (:class:`Sent`), and
:class:`GroupSends` -- what a node sends to shared names through a group's ref
(``_group_cell.py``), the bound on how many of its tells are in flight, and the end
of those no member took. ``Groups`` (``_groups.py``: the members here and the view of the
others) is a ``GroupSends``, so a group's ref reaches both through one object.
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from .._core._ref import new_ref
from .._errors import (
    ActorNotFound,
    ActorStopped,
    MailboxFull,
)
from .._interrupts import protect_module
from ._bad_input import Bad
from ._frames import Frames, Reply
from ._remote_cell import RemoteCell
from ._subjects import ASK, CANCEL, NONE, SENDS, TELL, encode

if TYPE_CHECKING:
    from .._core._dead_letters import DeadLetterReason
    from ..actors import ActorRef
    from ..nats import Headers
    from ._codec import Codec
    from ._group_cell import GroupCell
    from ._node import Node
    from ._outbox import Outgoing
    from ._requests import _Waiter


__all__ = [
    "PROBE",
    "SENT_AGAIN_AT_MOST",
    "TELLS_IN_FLIGHT",
    "TELLS_PER_MESSAGE",
    "GroupSends",
    "Sent",
]

TELLS_IN_FLIGHT: Final = 4096
"""Tells (and sends) through shared names one node holds at most, not yet ended
on their takers' nodes: one more ``tell`` raises ``MailboxFull``; a ``send``
waits for room."""

TELLS_PER_MESSAGE: Final = 16
"""Tells to one shared name sent as one message at most (``_tells.py``'s outbox):
the server gives each message to one member, so a burst spreads over the members
in messages of this many. Fewer cost more (a request and a *taken* answer each);
more spread a burst less evenly. R7 measured the same at 16 as at 64 (30.2 against
30.1 us per job, one round each, 2026-12-07)."""

SENT_AGAIN_AT_MOST: Final = 3
"""Times a message is sent again after a member's node answered "not served
here" (its actor stopped after the server chose it)."""

PROBE: Final = 100
"""A message to a shared name that asks only whether a member serves it (a lookup
by a node that has not heard the name's announcement yet): answered *taken*, and
given to no actor."""

_TELLS: Final = frozenset({TELL, SENDS})
_log = logging.getLogger("trio_actors")


class Sent:
    """One message to a shared name -- an ask, a probe, or the tells (or sends) that
    left together -- from its sending to its end (its request's ``_Waiter.group``)."""

    __slots__ = (
        "again",
        "bodies",
        "cancelled",
        "cell",
        "done",
        "groups",
        "headers",
        "kind",
        "member",
        "messages",
        "number",
        "reply_subject",
        "sent_at",
        "unended",
        "waiter",
    )

    def __init__(
        self,
        groups: GroupSends,
        cell: GroupCell,
        kind: int,
        bodies: list[bytes],
        messages: list[Any],
        number: int,
        reply_subject: str,
        waiter: _Waiter,
        headers: Headers | None = None,
    ) -> None:
        self.groups = groups
        self.cell = cell
        self.kind = kind
        self.bodies = bodies  # (one, but for tells and sends)
        self.messages = messages  # (a tell's: given back with its fate)
        # (tells: the indices of those its taker has not said have ended)
        self.unended = set(range(len(bodies))) if kind in _TELLS else set()
        self.number = number
        self.reply_subject = reply_subject
        self.waiter = waiter
        self.headers = headers  # (an observed ask's: sent with it, also again)
        self.sent_at = trio.current_time()
        self.again = 0  # times sent again (a member's node did not serve it)
        self.member: ActorRef | None = None  # (its taker, once known)
        self.cancelled = False  # (an ask cancelled before its taker was known)
        self.done = False

    def taken(self, reply: Reply) -> None:
        """A member's node answered before its taker was known (called by
        ``Requests.on_reply``): *taken* (the member's ref), or *not served here*."""
        groups, node = self.groups, self.groups.node
        if not reply.ok:
            if self.again < SENT_AGAIN_AT_MOST and not node.closed:
                self.again += 1
                try:
                    groups.publish(self)  # (another member, the server's choice again)
                except Exception as error:  # (in the connection's reader: never raised)
                    self.waiter.fail(f"it could not be sent again: {error}", interrupted=True)
            else:
                self.waiter.reply = reply  # (no member served it: as no-responders)
                self.waiter.end()
            return
        wire = Frames.wire_ref(reply.body)
        if isinstance(wire, Bad):
            node.refused("replies", wire.why, groups.subject_of(self))
            return
        if wire[0] != reply.answerer:  # (a node answers for its own actors only)
            node.refused("forged", f"{reply.answerer} took it as {wire[0]}", self.reply_subject)
            return
        try:
            member = node.exports.ref_from_wire(*wire)._cell
        except ValueError as error:
            node.refused("replies", error, self.reply_subject)
            return
        waiter = self.waiter
        if self.kind == PROBE:  # (a member serves it: all a probe asks)
            waiter.reply = reply
            waiter.end()
            return
        if type(member) is RemoteCell:
            waiter.peer = member.peer
            # (confirmed in rounds, never sent again)
            waiter.resend = (member, self.kind, self.bodies[0])
        elif wire[:2] == (node.name, node.incarnation):  # (a member here took it)
            waiter.peer = wire[:2]
        else:  # (this node's earlier life, or not an actor)
            node.refused("forged", f"{reply.answerer} took it as {wire}", self.reply_subject)
            return
        self.member = new_ref(member)
        groups.untaken.pop(self.number, None)
        waiter.sent_at = trio.current_time()
        if self.cancelled:  # (its asker gave up before the taker was known)
            self.cancel()
            self.ended()

    def reported(self, reply: Reply) -> None:
        """Its taker says which of its tells have ended there -- handled, or dead
        letters there -- by their indices (called by ``Requests.on_reply``); with
        the last, the request ends."""
        groups, node = self.groups, self.groups.node
        indices = Frames.ended(reply.body)
        if isinstance(indices, Bad):
            node.refused("replies", indices.why, self.reply_subject)
            return
        ended = set(indices)
        if not ended <= self.unended:  # (out of range, or said before: not its taker's)
            why = f"tells {sorted(ended - self.unended)} of {len(self.bodies)} said to end"
            node.refused("replies", why, self.reply_subject)
            return
        self.unended -= ended
        groups.fewer_in_flight(len(ended))
        if not self.unended:
            self.waiter.reply = reply
            self.waiter.end()

    def cancel(self) -> None:
        """Withdraw the ask from its taker (known: ``member``), as a ``CANCEL``."""
        member, node = self.member, self.groups.node
        assert member is not None
        reply = node.requests._reply_subject(self.waiter.peer, self.number)
        if type(member._cell) is RemoteCell:
            node.tells.send(member._cell, CANCEL, NONE, reply)
        else:
            node.answers.cancel(reply)  # (taken here: owed here)

    def ended(self) -> None:
        """Its request ended (its answer came, or it failed; called by its
        ``_Waiter``); or an ask cancelled before its taker was known is done with.
        Idempotent."""
        if self.done:
            return
        groups = self.groups
        if self.kind in (ASK, PROBE) and not self.cancelled:
            groups.untaken.pop(self.number, None)
            return  # (its task reads the end, and forgets the request)
        self.done = True
        groups.untaken.pop(self.number, None)
        groups.node.requests.waiting.pop(self.number, None)
        if self.kind in _TELLS:
            groups.tell_ended(self)


class GroupSends:
    """One node's messages to shared names (the other half of ``Groups``).

    Attributes:
        in_flight: tells and sends through shared names not yet ended.
        untaken: the messages sent whose taker is not known yet, by number.
    """

    __slots__ = ("_codecs_elsewhere", "_none_in_flight", "_room", "in_flight", "node", "untaken")

    def __init__(self, node: Node) -> None:
        self.node = node
        self._codecs_elsewhere = threading.local()  # (one per other thread that tells)
        self.in_flight = 0
        self._room = trio.Event()
        self._none_in_flight: trio.Event | None = None  # (all_ended() waits for it)
        self.untaken: dict[int, Sent] = {}

    def subject_of(self, sent: Sent) -> str:
        return sent.cell.subject

    def publish(self, sent: Sent, *, from_the_outbox: bool = False) -> None:
        """Send ``sent``'s message to its name's members (the server chooses one),
        after what waits in the outbox (``from_the_outbox``: it is being flushed,
        this in its turn). May raise what the connection refuses."""
        if sent.kind in _TELLS:
            body: Any = [msgspec.Raw(told) for told in sent.bodies]
        else:
            body = msgspec.Raw(sent.bodies[0])
        data, tells = encode((sent.kind, body)), self.node.tells
        if from_the_outbox:  # (tells: never with headers)
            tells.transport.publish(sent.cell.subject, data, reply=sent.reply_subject)
        else:
            tells.out(sent.cell.subject, data, sent.reply_subject, headers=sent.headers)

    def _send(
        self,
        cell: GroupCell,
        kind: int,
        bodies: list[bytes],
        messages: list[Any],
        *,
        from_the_outbox: bool = False,
        headers: Headers | None = None,
    ) -> Sent:
        requests = self.node.requests
        number, reply_subject, waiter = requests._request(None)
        sent = Sent(self, cell, kind, bodies, messages, number, reply_subject, waiter, headers)
        waiter.group = sent
        waiter.headers = headers  # (taken on another node: confirmed, sent again, with it)
        self.untaken[number] = sent
        try:
            self.publish(sent, from_the_outbox=from_the_outbox)
        except BaseException:
            waiter.group = None
            self.untaken.pop(number, None)
            del requests.waiting[number]
            raise
        return sent

    def send_told(self, tells: list[Outgoing], kind: int) -> None:
        """The outbox's tells (or sends) to one shared name, as one message: one
        request, to one member. What the connection refuses has nobody to be raised
        to: dead letters "unreachable", and a warning in the log. Never raises."""
        cell = tells[0][0]
        try:
            bodies, messages = [body for _c, _m, body in tells], [m for _c, m, _b in tells]
            self._send(cell, kind, bodies, messages, from_the_outbox=True)
        except Exception as error:
            node = self.node
            self.fewer_in_flight(len(tells))
            why = f"{len(tells)} tell(s) to {cell.path} not sent: {error}"
            _log.warning("node %s: %s", node.name, why)
            for _cell, message, _body in tells:
                node.system.dead_letters.record(new_ref(cell), message, "unreachable")

    def tell(self, cell: GroupCell, message: Any) -> None:
        """A tell to a shared name (``ActorRef.tell``): encoded (``TypeError`` now if
        it cannot cross), sent, held until its taker says it ended. Never a
        checkpoint, never blocks. From another thread: encoded there, sent from the
        node's thread in that thread's order; what it then meets has nobody to be
        raised to -- past :data:`TELLS_IN_FLIGHT`, a dead letter ``"overflow"``; a
        connection that refuses it, ``"unreachable"`` (and a warning in the log).

        Tells to one name coalesce as tells to one node do (``_tells.py``, the
        outbox): those that wait for the connection's writer leave together, as
        one message, which the server gives to one member.

        Raises:
            MailboxFull: :data:`TELLS_IN_FLIGHT` tells through shared names are in
                flight already.
        """
        node = self.node
        if get_ident() != node.thread_id:
            codec: Codec | None = getattr(self._codecs_elsewhere, "codec", None)
            if codec is None:
                codec = self._codecs_elsewhere.codec = node.new_codec()
            body = codec.encode(message)
            node.trio_token.run_sync_soon(self._told_elsewhere, cell, message, body)
            return
        self._tell_encoded(cell, message, node.codec.encode(message))

    def _told_elsewhere(self, cell: GroupCell, message: Any, body: bytes) -> None:
        """A tell from another thread, in the node's thread: nothing may escape."""
        node = self.node
        try:
            self._tell_encoded(cell, message, body)
        except MailboxFull as error:
            _log.warning("node %s: %s", node.name, error)
            node.system.dead_letters.record(new_ref(cell), message, "overflow")
        except Exception as error:
            _log.warning("node %s: a tell to %s not sent: %s", node.name, cell.path, error)
            node.system.dead_letters.record(new_ref(cell), message, "unreachable")

    def _tell_encoded(self, cell: GroupCell, message: Any, body: bytes) -> None:
        node = self.node
        if node.closed:
            node.system.dead_letters.record(new_ref(cell), message, "unreachable")
            return
        if self.in_flight >= TELLS_IN_FLIGHT:
            raise MailboxFull(
                f"{cell.path}: {TELLS_IN_FLIGHT} tells through shared names are in flight "
                f"from node {node.name!r}, not yet handled; use send() to wait for room"
            )
        self._tell(cell, TELL, body, message)

    def _tell(self, cell: GroupCell, kind: int, body: bytes, message: Any) -> None:
        """Send a tell (or a send: ``kind``) now, or with the next ones (the outbox;
        a send while others are in flight -- a stream of them -- lingers there).
        Raises what the connection refuses now."""
        self.in_flight += 1
        told, linger = (cell, message, body), kind == SENDS and self.in_flight > 1
        tells = self.node.tells
        if tells.coalesce(cell.subject, told, kind, linger=linger, most=TELLS_PER_MESSAGE):
            return
        try:
            self._send(cell, kind, [body], [message])
        except BaseException:
            self.fewer_in_flight(1)
            raise

    async def send(self, cell: GroupCell, message: Any) -> None:
        """``send`` to a shared name: waits while :data:`TELLS_IN_FLIGHT` tells are in
        flight, then tells (into a full bounded mailbox there, it waits in line). A
        checkpoint; cancelled while it waits, nothing was sent."""
        node = self.node
        node.check_thread("send")
        await trio.lowlevel.checkpoint_if_cancelled()
        body = node.codec.encode(message)
        while self.in_flight >= TELLS_IN_FLIGHT and not node.closed:
            self._room = self._room if not self._room.is_set() else trio.Event()
            await self._room.wait()
        if node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; not sent")
        self._tell(cell, SENDS, body, message)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def fewer_in_flight(self, count: int) -> None:
        """``count`` tells through shared names have ended (or were never sent)."""
        self.in_flight -= count
        if self.in_flight < TELLS_IN_FLIGHT:
            self._room.set()
        if not self.in_flight and self._none_in_flight is not None:
            self._none_in_flight.set()

    def tell_ended(self, sent: Sent) -> None:
        """The request of tells ended: the fate of those its taker did not say had
        ended, here."""
        unended = sorted(sent.unended)
        sent.unended.clear()
        self.fewer_in_flight(len(unended))
        waiter, node = sent.waiter, self.node
        reply = waiter.reply
        if not unended or (reply is not None and reply.ok):
            return  # (they ended there: handled, or dead letters there)
        reason: DeadLetterReason
        if waiter.refused:
            reason = "refused"
        elif reply is not None and reply.ok is None:
            reason = "unreachable"  # (no member)
        elif reply is not None:
            reason = "stopped"  # (not served)
        else:  # (its taker died or was lost, or this node left, first)
            reason = "in-doubt"
            node.tells.fates.unconfirmed += len(unended)
        ref = new_ref(sent.cell)
        for index in unended:
            node.system.dead_letters.record(ref, sent.messages[index], reason)

    async def all_ended(self, within: float) -> None:
        """Wait until every tell through a shared name has ended (its taker said so,
        or it is a dead letter here), at most ``within`` seconds. A checkpoint if
        some are in flight."""
        if self.in_flight:
            self._none_in_flight = trio.Event()
            with trio.move_on_after(within):
                await self._none_in_flight.wait()

    async def ask(self, cell: GroupCell, message: Any) -> Any:
        """An ask to a shared name (``ActorRef.ask``): to one member. A checkpoint.

        Raises:
            ActorNotFound: no member serves the name (now).
            NodeDown, ConnectionInterrupted: its taker's node was declared down, or
                the message or its answer was lost (it may or may not have been
                handled); or no member took it within the bound.
            ActorStopped: this node left the cluster first.
        """
        node = self.node
        node.check_thread("ask")
        body = node.codec.encode(message)
        if node.observer is not None:
            return await node.observer.ask(cell, message, partial(self._ask, cell, body, message))
        return await self._ask(cell, body, message)

    async def _ask(
        self, cell: GroupCell, body: bytes, message: Any, headers: Headers | None = None
    ) -> Any:
        """:meth:`ask`, its message encoded (``headers``: an observed ask's)."""
        node = self.node
        if node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; ask not sent")
        sent = self._send(cell, ASK, [body], [message], headers=headers)
        waiter = sent.waiter
        try:
            await waiter.event.wait()
        except trio.Cancelled:
            if waiter.open:
                if sent.member is None:
                    sent.cancelled = True  # (the taker, once known, is sent the CANCEL)
                else:
                    sent.cancel()
            raise
        finally:
            if not sent.cancelled:
                node.requests.waiting.pop(sent.number, None)
                self.untaken.pop(sent.number, None)
        return self._answer(sent)

    def _answer(self, sent: Sent) -> Any:
        waiter, node, path = sent.waiter, self.node, sent.cell.path
        taker = "" if sent.member is None else f" (taken by {sent.member.path})"
        if waiter.failed:
            raise waiter.failure(f"{path}{taker}")
        reply = waiter.reply
        if reply is None:
            raise ActorStopped(f"{path}: this node left the cluster before it was answered")
        if reply.ok is None or (sent.member is None and not reply.ok):
            raise ActorNotFound(f"no actor serves the shared name {sent.cell.shared_name!r}")
        if reply.ok:
            return node.codec.decode(reply.body)
        raise node.codec.decode_error(reply.body)

    def refused(self, subject: str, why: str) -> None:
        """The server refused this node's messages on a group's ``subject``: those
        no member took fail (not delivered: asks raise ``NotPermitted``, tells are
        dead letters ``"refused"``). Never a checkpoint."""
        for sent in [sent for sent in self.untaken.values() if sent.cell.subject == subject]:
            if sent.waiter.open:
                sent.waiter.refused = True
                sent.waiter.fail(why, interrupted=False)

    # --- the bound on a message nobody took -------------------------------------------

    async def run(self) -> None:
        """The node's task that ends what no member took within ``heartbeat *
        heartbeats_missed`` seconds (as a lookup), and forgets the asks cancelled
        meanwhile."""
        cluster = self.node.cluster
        within = cluster.heartbeat * cluster.heartbeats_missed
        while True:
            await trio.sleep(cluster.heartbeat)
            before = trio.current_time() - within
            for number, sent in list(self.untaken.items()):
                if sent.sent_at > before:
                    break  # (in sending order: the rest are younger)
                self.untaken.pop(number, None)
                if sent.cancelled:
                    sent.ended()
                elif sent.waiter.open:
                    sent.waiter.fail(
                        f"no member of shared name {sent.cell.shared_name!r} took it within "
                        f"{within} s (its taker died, or what it said was lost)",
                        interrupted=True,
                    )


protect_module(globals())

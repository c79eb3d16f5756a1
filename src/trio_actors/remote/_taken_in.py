r"""Tells from other nodes: delivered in order, tracked until each has *ended* here --
handled, or a dead letter -- and acknowledged as such to their sender.

The sender keeps every tell it sent until this node says it has ended (its link's
window, ``_link.py``), and gives back as ``"in-doubt"`` what was not acknowledged
when this node dies. So an acknowledgement must never run ahead of the handling:
"taken into a mailbox" is not enough, a node killed with a full mailbox would take
those tells with it uncounted.

How a sending node's record is tracked here -- runs, streams, marks, gaps -- is
``_tracked.py``; this module takes the tells in and acknowledges them.

**Sends.** Tells from ``send`` travel as ``SENDS`` frames: into a full bounded
mailbox each waits for room in its line, with the local ``send``\ s and ``ask``\ s
(the sender's window bounds how many); and while sends wait there, a tell from
another node joins the line too, so that it never overtakes a ``send`` its own node
made before it (a ``"drop_old"`` overflow would put it ahead).

**In order across a gap.** A message that comes ahead of one sent before it is
*held*, not delivered: the earlier one bounced -- its node was between two
connections, NATS answered no-responders -- and its sender sends it again at its
next confirm round (``_tells.py``), or it was lost on the way. The held messages are
delivered, in order, once the gap fills; or once the gap is given up (skipped): by
the sender's confirm round (which asks about every message sent before it, after
sending the bounced ones again), after :func:`hold_for` seconds with no round, when
the sender is declared down, or at once for the oldest gaps when the node holds
``InputLimits.held_bytes`` of such tells. So tells to an actor are handled in the
order they were sent (T2) across a reconnect, as far as they are handled at all.

**Pools.** A tell to a pool is tracked like one to a bounded mailbox: its notice goes
with it through the pool's routing, into a worker's mailbox or a balancing pool's
queue (``queue_tracked``), and it ends for its sender when a worker has handled it
or it is a dead letter here -- so a node that dies with a pool's tells queued gives
them back ``"in-doubt"``, and a ``send`` into a full bounded balancing pool waits for
room there. ``Broadcast`` and ``Resize`` end as the pool takes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from .._core._envelope import Notice
from .._interrupts import protect_module
from ._confirm import give_up_after
from ._subjects import encode
from ._tracked import UNTRACKED, Inbound, Marks, Run, Skipped

if TYPE_CHECKING:
    from .._cluster import Cluster
    from ._node import Node
    from ._subjects import Peer

__all__ = ["ACK_EVERY", "MARKS_PER_ACK", "MAX_AHEAD", "TakenIn", "hold_for"]

ACK_EVERY: Final = 0.005
"""Seconds between acknowledgements while tells end."""

MARKS_PER_ACK: Final = 4096
"""``(actor, mark)`` pairs in one acknowledgement at most (more moved: several
acknowledgements). At most 19 bytes each in msgpack, so an acknowledgement stays
under 80 kB -- far under NATS's ``max_payload``."""

MAX_AHEAD: Final = 4096
"""Messages of one sending record held ahead of a gap, at most (one more: the oldest
gap is given up)."""

_MESSAGE_OVERHEAD: Final = 128  # (bytes a held message costs beside its tells)
_TELL_OVERHEAD: Final = 64  # (bytes a held tell costs beside its body and path)

_UNDECODABLE: Final = object()


def hold_for(cluster: Cluster) -> float:
    """Seconds a message of tells that came ahead of a gap is held at most before
    the gap is given up here (as many intervals as its sender's confirm rounds
    leave unanswered before giving up: it gives the gap up first, while it runs)."""
    return give_up_after(cluster) * cluster.heartbeat


class TakenIn:
    """The tells of other nodes this node takes in, and the acknowledgements owed."""

    __slots__ = ("_ack", "_node", "held", "records")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.records: dict[str, Inbound] = {}  # by the sender's P.u.<node>.<inc> prefix
        self._ack = trio.Event()
        self.held = 0  # (bytes of tells held ahead of a gap, all records together)

    def owed(self) -> None:
        """A mark moved: acknowledged within :data:`ACK_EVERY` seconds."""
        self._ack.set()

    async def run(self) -> None:
        """Acknowledge, and give up the gaps held too long, until cancelled (with
        the node)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._give_up_overdue)
            while True:
                await self._ack.wait()
                self._ack = trio.Event()
                await trio.sleep(ACK_EVERY)
                self.send_acks()

    async def _give_up_overdue(self) -> None:
        """Every heartbeat interval, give up the gaps held longer than
        :func:`hold_for` (a backstop: while its sender runs, its confirm round
        gives a gap up within two intervals)."""
        cluster = self._node.cluster
        while True:
            await trio.sleep(cluster.heartbeat)
            since = trio.current_time() - hold_for(cluster)
            for inbound in list(self.records.values()):
                if inbound.ahead and inbound.held_since <= since:
                    self._give_up(inbound, max(inbound.ahead))

    def send_acks(self) -> None:
        """Tell each node whose marks moved since the last time where they are.
        Never a checkpoint; never raises."""
        node = self._node
        me = (node.name, node.incarnation)
        for prefix, inbound in self.records.items():
            if inbound.changed:
                marks = [(actor, inbound.mark(actor)) for actor in inbound.changed]
                inbound.changed.clear()
                # (settled: cheap only when nothing is pending; 0 says nothing)
                settled = 0 if inbound.streams else inbound.received
                subject = node.subjects.acks_of(me, prefix)
                for at in range(0, len(marks), MARKS_PER_ACK):
                    part = marks[at : at + MARKS_PER_ACK]
                    body = encode((inbound.record, inbound.start, inbound.skipped, settled, part))
                    node.tells.publish(subject, body)

    def confirm(
        self, sender: Peer, prefix: str, record: str, up_to: int, actors: list[int]
    ) -> tuple[int, Skipped, int, Marks]:
        """A confirm round of ``sender`` (whose unreachable subjects start with
        ``prefix``): its messages on ``record`` up to ``up_to`` were sent before it;
        what has not come by now is given up (skipped: coming later, it is not
        counted). Returns the record's start, skipped ranges, settled mark and the
        marks of the ``actors`` it asks about (those it waits on longest: as many
        as it names, ``_confirm.MAX_NUMBERS`` at most) -- nothing, if the peer
        table has no room for the sender."""
        inbound = self.records.get(prefix)
        if inbound is None or inbound.record != record:
            if inbound is None and not self._node.peers.claim(sender):
                return (0, [], 0, [])
            inbound = self._begin(prefix, record, up_to + 1)
        if not self._give_up(inbound, up_to):
            return (0, [], 0, [])  # (forgotten: its sender learns it from the next answer)
        marks = [(actor, inbound.mark(actor)) for actor in actors]
        return inbound.start, inbound.skipped, inbound.settled(), marks

    def forget(self, prefix: str) -> None:
        """The sending node is down: nothing more to acknowledge to it (what it held
        of its tells is delivered)."""
        inbound = self.records.get(prefix)
        if inbound is not None:
            self._forget(inbound)

    def give_up_all(self) -> None:
        """This node leaves: what it holds of any node's tells is delivered (its
        actors have stopped: dead letters here), its gaps given up. Never a
        checkpoint."""
        for inbound in list(self.records.values()):
            if inbound.ahead:
                self._give_up(inbound, max(inbound.ahead))

    def _begin(self, prefix: str, record: str, start: int) -> Inbound:
        """A new record of the sender of ``prefix``, tracked from ``start`` on (the
        one it replaces gives up what it held)."""
        old = self.records.get(prefix)
        if old is not None and old.ahead:
            self._give_up(old, max(old.ahead))
        inbound = self.records[prefix] = Inbound(self, prefix, record, start)
        return inbound

    def _forget(self, inbound: Inbound) -> None:
        """Stop tracking ``inbound``'s record; what it held is delivered, untracked."""
        if self.records.get(inbound.prefix) is inbound:
            del self.records[inbound.prefix]
        for sequence in sorted(inbound.ahead):
            self._deliver(None, *self._unhold(inbound, sequence))

    # --- held ahead of a gap -------------------------------------------------------

    def _hold(self, inbound: Inbound, sequence: int, tells: list[Any], sending: bool) -> None:
        """A message that came ahead of one sent before it -- that one bounced, and
        its sender sends it again, or it was lost on the way: held, to be delivered
        in order, until the gap fills, its sender's confirm round gives it up, or
        :func:`hold_for` passes. Past ``InputLimits.held_bytes`` (counted with each
        message's and each tell's overhead), or :data:`MAX_AHEAD` messages of one
        record, the oldest gaps are given up at once -- of the record that has held
        longest."""
        if not inbound.ahead:
            inbound.held_since = trio.current_time()
        size = _MESSAGE_OVERHEAD + sum(
            len(told) + len(path) + _TELL_OVERHEAD for _number, path, told in tells
        )
        inbound.ahead[sequence] = (tells, sending, size)
        self.held += size
        limit = self._node.cluster.limits.held_bytes
        while len(inbound.ahead) > MAX_AHEAD:
            self._give_up(inbound, min(inbound.ahead))
        while self.held > limit:
            holding = min(
                (other for other in self.records.values() if other.ahead),
                key=lambda other: other.held_since,
            )
            self._give_up(holding, min(holding.ahead))

    def _unhold(self, inbound: Inbound, sequence: int) -> tuple[list[Any], bool]:
        tells, sending, size = inbound.ahead.pop(sequence)
        self.held -= size
        return tells, sending

    def _deliver_held(self, inbound: Inbound) -> None:
        """Deliver the held messages that are next, in order."""
        ahead = inbound.ahead
        while inbound.received + 1 in ahead:
            inbound.received += 1
            self._deliver(inbound, *self._unhold(inbound, inbound.received))
        if ahead:
            inbound.held_since = trio.current_time()  # (the gap after those: a new one)

    def _give_up(self, inbound: Inbound, up_to: int) -> bool:
        """What has not come of ``inbound``'s record up to ``up_to`` never will:
        skipped; what it held up to there, and what is next after it, delivered in
        order. Returns ``False`` if that skips one range too many: the record is
        forgotten (its sender learns it, and starts a new one)."""
        for sequence in sorted(s for s in inbound.ahead if s <= up_to):
            if not inbound.skip_to(sequence - 1):
                self._forget(inbound)
                return False
            inbound.received = sequence
            self._deliver(inbound, *self._unhold(inbound, sequence))
        if not inbound.skip_to(up_to):
            self._forget(inbound)
            return False
        self._deliver_held(inbound)
        return True

    # --- receiving (the connection's reader, in order) ------------------------------

    def receive(
        self,
        body: tuple[int, list[Any]],
        reply: str | None,
        record: str,
        sequence: int,
        *,
        sending: bool = False,
    ) -> None:
        """A message of tells (``body``: the record's oldest message its sender has
        not had acknowledged, and [export number, path, body] for each tell),
        numbered ``sequence`` in the sender's ``record``, with ``reply`` its
        unreachable subject; ``sending``: they come from ``send`` -- into a full
        bounded mailbox, each waits for room in line with the local ``send``\\ s
        (its sender's window holds the others back). Never a checkpoint."""
        first, tells = body
        inbound = self._record_of(reply, record, sequence, first) if reply else None
        if inbound is None or sequence <= inbound.received or sequence in inbound.ahead:
            self._deliver(None, tells, sending)  # (not tracked; or late, or twice)
        elif sequence > inbound.received + 1:
            self._hold(inbound, sequence, tells, sending)  # (ahead of a gap)
        else:
            inbound.received = sequence
            self._deliver(inbound, tells, sending)
            if inbound.ahead:
                self._deliver_held(inbound)

    def _deliver(self, inbound: Inbound | None, body: list[Any], sending: bool) -> None:
        """Deliver a message of tells, tracked in ``inbound`` (``None``: untracked)."""
        codec = self._node.codec
        try:
            messages = [codec.decode(told) for _number, _path, told in body]
        except Exception:  # (one or more cannot be: each one's fate is its own)
            messages = [self._decoded(number, path, told) for number, path, told in body]
            self._deliver_each(inbound, body, messages, sending)
            return
        # (the actors told in this message -> the index of its last tell)
        last = {tell[0]: index for index, tell in enumerate(body)}
        if len(last) == 1:
            # The usual message: every tell to one actor (a stream from one sender,
            # R2 and R6). All but the last go in one call, and a run's notice
            # tracks the last: the receiving node's CPU per tell in R2's burst
            # 0.80 -> 0.57 us (docs/performance.rst, "R2 back at its record").
            (number,) = last
            cell = self._node.exports.cells.get(number)
            if cell is not None and not cell.each_tell_tracked:
                if inbound is None:
                    cell.tell_all_forwarded(messages)
                    return
                cell.tell_all_forwarded(messages[:-1])
                run = inbound.stream(number).run()
                run.left += 1  # (the last one's notice)
                cell.queue_tracked(Notice(cell, messages[-1], run), sending)
                run.delivered()
                return
        self._deliver_each(inbound, body, messages, sending, last)

    def _deliver_each(
        self,
        inbound: Inbound | None,
        body: list[Any],
        messages: list[Any],
        sending: bool,
        last: dict[int, int] | None = None,
    ) -> None:
        """Deliver the tells of a message one by one, decoded as ``messages``
        (``_UNDECODABLE``: a dead letter already). ``last``: each actor's last
        decodable tell, which a notice tracks where its mailbox is plain."""
        if last is None:
            last = {}
            for index, tell in enumerate(body):
                last.setdefault(tell[0], -1)  # (told, if only undecodable tells)
                if messages[index] is not _UNDECODABLE:
                    last[tell[0]] = index
        node = self._node
        exported = node.exports.cells
        tracked: dict[int, Run] = {}  # (actor -> its run in this message, if tracked)
        for index, (number, path, _told) in enumerate(body):
            message = messages[index]
            if message is _UNDECODABLE:
                continue  # (ended: after any run before it to its actor, at the end)
            cell = exported.get(number)
            if cell is None:
                ref = node.exports.ref_from_wire(node.name, node.incarnation, path, number)
                node.system.dead_letters.record(ref, message, "stopped")
            elif cell.each_tell_tracked or (inbound is not None and last[number] == index):
                # A notice tracks it (each tell, or a plain mailbox's last of the
                # message): into a bounded mailbox or pool even untracked, so that
                # a send waits for room in line (see queue_tracked).
                run = tracked.get(number)
                if run is None and inbound is not None:
                    run = tracked[number] = inbound.stream(number).run()
                if run is not None:
                    run.left += 1  # (this notice's)
                sender = UNTRACKED if run is None else run
                cell.queue_tracked(Notice(cell, message, sender), sending)
            else:
                cell.tell_forwarded(message)  # (nobody to raise MailboxFull to: a dead letter)
        if inbound is not None:
            for number in last:
                run = tracked.get(number)
                if run is None:
                    inbound.ended_now(number)
                else:
                    run.delivered()

    def _record_of(self, reply: str, record: str, sequence: int, first: int) -> Inbound | None:
        """The record a message of tells from the node of ``reply`` is tracked in;
        ``None`` if it is not tracked: not a record's message, not a node's reply
        subject, or from a node the peer table has no room for (taken in, never
        acknowledged).

        A new one is tracked from ``first`` on, the oldest message its sender has
        not had acknowledged (at most ``sequence``): one sent before this may have
        bounced -- this node was between two connections -- and come again at the
        sender's next confirm round, so this one waits for it (held ahead of a gap,
        as any). If it never comes (this node forgot the record: it took it in
        before), the gap is given up like any other, and its sender gives its
        tells back in doubt."""
        if sequence < 1:
            return None  # (not a record's message: numbers start at 1)
        prefix = reply.rpartition(".")[0]
        inbound = self.records.get(prefix)
        if inbound is not None and inbound.record == record:
            return inbound
        if inbound is None:
            node = self._node
            sender = node.frames.tell_sender(reply)
            if sender is None:
                return None  # (not a node's tells: nobody to acknowledge)
            if not node.peers.claim(sender):
                why = "tells from a node the peer table has no room for"
                node.refused("over_limit", why, reply)
                return None
        return self._begin(prefix, record, max(1, min(first, sequence)))

    def _decoded(self, number: int, path: str, body: Any) -> Any:
        """A tell's message, or ``_UNDECODABLE`` (then it is a dead letter
        "undecodable", and counted as bad input)."""
        node = self._node
        try:
            return node.codec.decode(body)
        except Exception as error:  # (a type this node does not register, pickle, ...)
            ref = node.exports.ref_from_wire(node.name, node.incarnation, path, number)
            why = f"a tell to {path} could not be decoded: {error}"
            node.undecodable_tell(ref, body, why, node.subject)
            return _UNDECODABLE


protect_module(globals())

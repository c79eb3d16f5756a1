"""A node: one actor system's presence in a cluster.

Subjects (``P`` is ``ta.<cluster name>``), each subscribed with a callback, so a
message goes from the connection's reader straight to a mailbox:

* ``P.n.<node>.<incarnation>`` -- messages for the node's actors: tells, asks,
  cancellations of asks, stops. One subject per node *incarnation*: a node that
  restarts gets a new one, so a ref to its previous life reaches nobody (NATS's
  no-responders) and never a successor.
* ``P.r.<node>.<incarnation>.<n>`` -- replies to the node's asks, stops and lookups.
* ``P.t.<node>.<incarnation>.<n>`` -- stops of remote actors this node watches
  (death watch across nodes): a ``WATCH`` carries it as its reply subject; the
  watched actor's node answers there once, when the actor stops (at once if it
  has), and NATS answers no-responders there if that node is gone. Watches of
  actors on a node declared down end with ``Terminated(ref, error=NodeDown(...))``.
* ``P.u.<node>.<incarnation>.<n>`` -- the no-responders answers to its tells: each
  message of tells carries one as its reply subject (``n``: the number of its last
  tell), so tells to a node (or an incarnation) that is gone come back and become
  ``DeadLetter(reason="unreachable")`` here. They are kept until the server has
  confirmed it routed them (a flush: the answer, if any, comes before the server's
  ``PONG``).
* ``P.name.<hex of the name>`` -- a registered name: the node holding it answers
  lookups with the ref; when the node dies, its subscriptions go with its
  connection, so the name is free.
* ``P.hb.<node>.<incarnation>`` -- heartbeats: every node publishes one every
  ``Cluster.heartbeat`` seconds (and ``bye`` when it leaves). A node that waits for
  an answer from a node it has not heard from for ``heartbeats_missed`` beats (or
  that said ``bye``) declares it down: every ask pending to it fails with
  :exc:`~trio_actors.NodeDown` ("may or may not have been handled"). This works on
  any NATS account; the system account's disconnect advisories (milliseconds, not
  seconds) need credentials for that account and come later.

A message to an actor is a msgpack array ``[kind, export number, path, body]``:
the export number says which actor (a node numbers each local actor the first time
a ref to it leaves, so a ref to a stopped actor never reaches a successor with the
same path); the body is the codec's bytes. Tells travel together: a ``TELL``'s
body is ``[[export number, path, body], ...]``: the tells to one node that waited
together for the connection's writer (``_outbox.py``). An ask is queued at once, in arrival
order, as an envelope that publishes its answer (``_inbound.py``); the asker's
cancellation (a ``CANCEL``) withdraws it while queued and cancels an ``async``
handler working on it (T6, T7), as locally.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from contextlib import suppress
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec
import trio

from .._cluster import Cluster
from .._core._ref import new_ref
from .._errors import ActorError, ActorNotFound, ActorStopped, NodeDown, RemoteError
from ..actors import ActorRef
from ..lifecycle import Terminated
from ..nats import Disconnected, Reconnected
from ._acks import ACK_EVERY, Link, TakenIn
from ._codec import Codec, WireRef
from ._inbound import RemoteAsk
from ._names import ClusterNames
from ._outbox import BYTES_PER_MESSAGE, Outbox, Told
from ._remote_cell import RemoteCell
from ._transport import Transport

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..actors import ActorSystem
    from ..nats import Client, Msg

__all__ = ["DISCONNECT_ADVISORIES", "Node", "Subjects", "connection_name", "peer_of_connection"]

TELL: Final = 0
ASK: Final = 1
CANCEL: Final = 2
STOP: Final = 3
WATCH: Final = 4

_CONFIRM_EVERY: Final = 0.005  # seconds between flushes that confirm tells
_LEAVE_WITHIN: Final = 5.0  # seconds a leaving node gives the answers still being made

_log = logging.getLogger("trio_actors")
_envelope = msgspec.msgpack.Decoder(tuple[int, int, str, msgspec.Raw])
_tells = msgspec.msgpack.Decoder(list[tuple[int, str, msgspec.Raw]])
_reply = msgspec.msgpack.Decoder(tuple[bool, msgspec.Raw])
_ack = msgspec.msgpack.Decoder(tuple[str, str, int])
_encode = msgspec.msgpack.Encoder().encode
_NONE: Final = msgspec.Raw(_encode(None))


DISCONNECT_ADVISORIES: Final = "$SYS.ACCOUNT.*.DISCONNECT"


def connection_name(cluster: str, node: str, incarnation: str) -> str:
    """The name a node's NATS connection gives the server (so that the system
    account's disconnect advisory says which node incarnation it was)."""
    return f"ta.{cluster}.{node}.{incarnation}"


def peer_of_connection(cluster: str, name: object) -> tuple[str, str] | None:
    """The (node, incarnation) a connection name is of, in ``cluster``; or ``None``."""
    if not isinstance(name, str):
        return None
    prefix, _, rest = name.partition(f"ta.{cluster}.")
    node, dot, incarnation = rest.partition(".")
    if prefix or not dot or not node or not incarnation or "." in incarnation:
        return None
    return (node, incarnation)


class Subjects:
    """The NATS subjects of one cluster."""

    __slots__ = ("prefix",)

    def __init__(self, cluster: str) -> None:
        self.prefix = f"ta.{cluster}"

    def node(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.n.{node}.{incarnation}"

    def replies(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.r.{node}.{incarnation}"

    def unreachable(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.u.{node}.{incarnation}"

    def terminations(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.t.{node}.{incarnation}"

    def name(self, name: str) -> str:
        return f"{self.prefix}.name.{name.encode().hex() or '-'}"

    def acks(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.a.{node}.{incarnation}"

    def acks_of(self, unreachable: str) -> str:
        """:meth:`acks` of the node whose :meth:`unreachable` subject this is."""
        return f"{self.prefix}.a.{unreachable[len(self.prefix) + 3 :]}"

    def heartbeat(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.hb.{node}.{incarnation}"

    def heartbeats(self) -> str:
        return f"{self.prefix}.hb.*.*"


Peer = tuple[str, str]
"""A node's (name, incarnation)."""


class _Waiter:
    """One request of this node waiting for its reply (from ``peer``, if one node
    must answer it)."""

    __slots__ = ("down", "event", "peer", "reply", "sent_at")

    def __init__(self, peer: Peer | None) -> None:
        self.event = trio.Event()
        self.reply: Msg | None = None
        self.peer = peer
        self.sent_at = trio.current_time()
        self.down: str | None = None  # why no answer will come (the peer, or the connection)


class _RemoteWatch:
    """This node's watch of one remote actor: who here wants its ``Terminated``
    (watcher cells, and ``wait_stopped`` callers by a token of their own)."""

    __slots__ = ("cell", "number", "since", "subscribers")

    def __init__(self, cell: RemoteCell, number: int) -> None:
        self.cell = cell
        self.number = number
        self.since = trio.current_time()
        self.subscribers: dict[object, Callable[[Terminated], None]] = {}


class Node:
    """An actor system's presence in a cluster (made by ``open_actor_system(
    cluster=..., node=...)``; reached as ``system.node``).

    Attributes:
        name: the node's name in the cluster.
        incarnation: random, new each time the node starts.
        unconfirmed: tells sent on a connection that was lost before the server
            confirmed routing them: handled or not, nobody can say (T21's
            "unconfirmed"), counted rather than guessed.
    """

    def __init__(
        self,
        system: ActorSystem,
        transport: Transport,
        cluster: Cluster,
        name: str,
        incarnation: str,
        nursery: trio.Nursery,
    ) -> None:
        self.system = system
        self.transport = transport
        self.cluster = cluster
        self.name = name
        self.incarnation = incarnation
        self.subjects = Subjects(cluster.name)
        self.trio_token = system.trio_token
        self.thread_id = system.thread_id
        self._nursery = nursery
        self.codec = self._new_codec()
        self._codecs_elsewhere = threading.local()  # (one per other thread that tells)
        self.subject = self.subjects.node(name, self.incarnation)
        self._replies = self.subjects.replies(name, self.incarnation)
        self._unreachable = self.subjects.unreachable(name, self.incarnation)
        self._tell_replies = f"{self.subjects.prefix}.u."  # (any node's tells' replies)
        self._terminations = self.subjects.terminations(name, self.incarnation)
        # Death watch: remote actors watched from here (by wire), and the numbers of
        # their termination subjects; local actors watched from other nodes (by
        # export number): the termination subjects to answer when they stop.
        self._watches: dict[WireRef, _RemoteWatch] = {}
        self._watches_by_number: dict[int, _RemoteWatch] = {}
        self._watch_count = itertools.count(1)
        self._watched: dict[int, list[str]] = {}
        # Local actors whose refs have left, by export number, and back.
        self._exported: weakref.WeakValueDictionary[int, ActorCell] = weakref.WeakValueDictionary()
        self._export_numbers: weakref.WeakKeyDictionary[ActorCell, int] = (
            weakref.WeakKeyDictionary()
        )
        self._export_count = itertools.count(1)
        self._export_lock = threading.Lock()  # (first exports, from any thread)
        self._remote: weakref.WeakValueDictionary[WireRef, RemoteCell] = (
            weakref.WeakValueDictionary()
        )
        self._requests: dict[int, _Waiter] = {}
        self._requests_made = 0  # (the number of the newest request)
        self._answering: dict[str, RemoteAsk] = {}  # asks from others, by reply subject
        self._all_answered: trio.Event | None = None  # (leave() waits for it)
        self._closed = False
        # Tells sent and not yet confirmed, by the number of the last in each message.
        self._unconfirmed: dict[int, list[Told]] = {}
        self.unconfirmed = 0  # tells whose fate a lost connection or node left unknown
        self._tells_sent = 0  # (the number of the newest tell sent)
        self._outbox = Outbox(self._send_tells)  # (tells waiting for the writer's turn)
        self._confirm = trio.Event()
        self._links: dict[Peer, Link] = {}  # this node's tells to each other node
        self._taken = TakenIn()  # tells from each other node, to acknowledge
        self._ack = trio.Event()
        self._names: dict[str, Any] = {}  # registered here: name -> unsubscribe
        self.names = ClusterNames(self, self._publish)  # the names the others hold
        self.heartbeat = cluster.heartbeat
        self.heartbeats_missed = cluster.heartbeats_missed
        self._heard: dict[Peer, float] = {}  # when each node was last heard from
        self._met: set[Peer] = set()  # nodes whose names this one has exchanged
        self._heartbeat_subject = self.subjects.heartbeat(name, self.incarnation)
        self._unsubscribes = [
            transport.subscribe(self.subject, self._on_message),
            transport.subscribe(f"{self._replies}.*", self._on_reply),
            transport.subscribe(self.subjects.heartbeats(), self._on_heartbeat),
            transport.subscribe(f"{self._terminations}.*", self._on_terminated),
            transport.subscribe(self.subjects.acks(name, incarnation), self._on_ack),
            transport.subscribe(self.names.subject, self.names.on_announcement),
        ]
        # The outbox's tells leave at the connection writer's turn, with what waits.
        self._unsubscribes.append(transport.before_writing(self._outbox.flush))
        # (kept past close(): the no-responders answers to its last tells; finish())
        self._bounces: Callable[[], None] | None = transport.subscribe(
            f"{self._unreachable}.*", self._on_unreachable
        )

    @staticmethod
    def of(system: ActorSystem) -> Node:
        """The node ``system`` is (``system.node`` gives only its public face,
        :class:`~trio_actors.actors.ClusterNode`: the actor system sits below the
        remote layer and cannot name this class).

        Raises:
            ValueError: ``system`` is not a node (opened without ``cluster=``).
        """
        node = system.node
        if not isinstance(node, Node):
            raise ValueError(f"{system!r} is not a node: open it with cluster= and node=")
        return node

    def __repr__(self) -> str:
        return f"<Node {self.name} ({self.incarnation}) of {self.cluster.name}>"

    def _start(self, function: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a task of the node's from a callback: once the node has closed (its
        nursery is ending), nothing more is started -- never an error in the
        connection's reader."""
        if self._closed:
            return
        try:
            self._nursery.start_soon(function, *args)
        except RuntimeError:  # (the nursery closed meanwhile: the node is ending)
            _log.debug("node %s: not started while ending: %s", self.name, function)

    def check_thread(self, operation: str) -> None:
        if get_ident() != self.thread_id:
            raise ActorError(
                f"{operation}() of a remote ref called from another thread; use "
                "trio.from_thread.run to reach the trio run of its system"
            )

    async def run(self) -> None:
        """The node's own tasks: heartbeats and the watch over the nodes it waits
        on, and confirming tells (see the module's docstring)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._beat)
            nursery.start_soon(self._confirm_tells)
            nursery.start_soon(self._acknowledge)

    async def _beat(self) -> None:
        while True:
            self._publish(self._heartbeat_subject, b"")
            await trio.sleep(self.heartbeat)
            self._check_peers()

    def _check_peers(self) -> None:
        """Declare down every node that has been silent too long: one a request or
        a watch waits on (since it was sent, if never heard), or one heard before."""
        now = trio.current_time()
        silence = self.heartbeats_missed * self.heartbeat
        why = f"not heard from for {self.heartbeats_missed} heartbeats"
        for waiter in list(self._requests.values()):
            peer = waiter.peer
            if peer is None or waiter.reply is not None or waiter.down:
                continue
            heard = max(self._heard.get(peer, waiter.sent_at), waiter.sent_at)
            if now - heard > silence:
                self._declare_down(peer, why)
        for remote in list(self._watches.values()):
            peer = remote.cell.peer
            heard = max(self._heard.get(peer, remote.since), remote.since)
            if now - heard > silence:
                self._declare_down(peer, why)
        for peer, heard in list(self._heard.items()):
            if now - heard > silence:  # (also a node nothing here waits on: its names)
                del self._heard[peer]
                self._declare_down(peer, why)

    def heard_from(self, peer: Peer) -> None:
        """A sign of life from ``peer`` other than a heartbeat (its name's claim):
        met, and watched for silence from now, if it was not already."""
        self.meet(peer)
        if peer not in self._heard:
            self._heard[peer] = trio.current_time()

    def silent(self, peer: Peer) -> bool:
        """Whether ``peer`` has been silent too long (checked now, between beats):
        if so, it is declared down on the next scheduler pass (the caller may be a
        plain handler in its turn: the ``Terminated`` of watches wait until then)."""
        heard = self._heard.get(peer)
        if heard is None or trio.current_time() - heard <= self.heartbeats_missed * self.heartbeat:
            return False
        del self._heard[peer]
        why = f"not heard from for {self.heartbeats_missed} heartbeats"
        self.trio_token.run_sync_soon(self._declare_down, peer, why)
        return True

    def _declare_down(self, peer: Peer, why: str, *, sent_up_to: int | None = None) -> None:
        """``peer`` is down (``why``: how this node knows): the asks pending to it
        (those up to request number ``sent_up_to``, if given) fail with NodeDown,
        the watches of its actors end with it."""
        node, incarnation = peer
        said = f"node {node!r} ({incarnation}) is down: {why}"
        for number, waiter in self._requests.items():
            if sent_up_to is not None and number > sent_up_to:
                continue  # (sent after the news: nothing serves it, NATS will say)
            if waiter.peer == peer and waiter.reply is None:
                waiter.down = said
                waiter.event.set()
        for remote in [w for w in self._watches.values() if w.cell.peer == peer]:
            self._terminated(remote, NodeDown(said))
        self._taken.forget(self.subjects.unreachable(node, incarnation))
        self.names.forget(peer)
        self._met.discard(peer)  # (heard again, it is met again: names exchanged)
        link = self._links.get(peer)
        if link is not None and link.closed_after is None:
            link.closed_after = self._tells_sent
            self._start(self._count_lost_tells, peer, link, link.told)

    async def _count_lost_tells(self, peer: Peer, link: Link, told: int) -> None:
        """``peer`` is down: once the server has routed what was sent to it before
        (its no-responders answers come first), count the tells it had neither
        acknowledged nor bounced as unconfirmed (``_acks.py``)."""
        with suppress(Exception):  # (this node's connection is lost: counted there)
            await self.transport.flush()
        self.unconfirmed += link.lost(told)
        if self._links.get(peer) is link:
            del self._links[peer]

    def link_to(self, peer: Peer) -> Link:
        """The record of this node's tells to ``peer``: a new one once the last was
        closed (``peer`` was declared down -- wrongly, if it is told again -- so
        what is told from now is accounted for if it really dies). A peer not heard
        from yet is watched for silence from now: one that never speaks (a ref to a
        node already gone) is declared down after ``heartbeats_missed`` beats, and
        its record goes with it."""
        link = self._links.get(peer)
        if link is None or link.closed_after is not None:  # (none, or its node went down)
            link = self._links[peer] = Link()
            if peer not in self._heard:
                self._heard[peer] = trio.current_time()
        return link

    async def _acknowledge(self) -> None:
        while True:
            await self._ack.wait()
            self._ack = trio.Event()
            await trio.sleep(ACK_EVERY)
            self._send_acks()

    def _send_acks(self) -> None:
        """Tell each node whose tells came in since the last time how many in all."""
        for prefix, count in self._taken.unsaid():
            ack = _encode((self.name, self.incarnation, count))
            self._publish(self.subjects.acks_of(prefix), ack)

    def _on_ack(self, message: Msg) -> None:
        try:
            node, incarnation, count = _ack.decode(message.data)
        except msgspec.DecodeError:
            return
        link = self._links.get((node, incarnation))
        if link is not None and count > link.acked:
            link.acked = count

    def follow_advisories(self, advisories: Transport) -> None:
        """Hear the server's disconnect advisories on ``advisories`` (until
        :meth:`close`)."""
        self._unsubscribes.append(
            advisories.subscribe(DISCONNECT_ADVISORIES, self.on_disconnect_advisory)
        )

    def on_disconnect_advisory(self, message: Msg) -> None:
        """The server says a connection ended (the system account's
        ``client_disconnect`` advisory): if it was a node's, that node is down --
        within milliseconds of a ``kill -9``, not after missed heartbeats."""
        try:
            client = json.loads(message.data)["client"]
            peer = peer_of_connection(self.cluster.name, client.get("name", ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # (not an advisory this node understands)
        if peer is not None and peer != (self.name, self.incarnation):
            self._start(self._down_by_advisory, peer, self._requests_made)  # (not once closed)

    async def _down_by_advisory(self, peer: Peer, sent_up_to: int) -> None:
        """Declare ``peer`` down, once this node's own connection has brought what
        the server routed to it before (a flush: the server answers it after them).
        The advisory comes on another connection: a reply the dead node sent just
        before it died would otherwise arrive after its ``NodeDown``. What this node
        asks it meanwhile is answered by NATS (no responders: ``ActorStopped``)."""
        with suppress(Exception):  # (this node's connection is lost: that says enough)
            await self.transport.flush()
        self._heard.pop(peer, None)
        why = "its connection ended (the server's disconnect advisory)"
        self._declare_down(peer, why, sent_up_to=sent_up_to)

    def _on_heartbeat(self, message: Msg) -> None:
        _prefix, _, rest = message.subject.partition(".hb.")
        node, _, incarnation = rest.partition(".")
        peer = (node, incarnation)
        if message.data == b"bye":
            self._heard.pop(peer, None)
            self._declare_down(peer, "it left the cluster")
            return
        self.meet(peer)
        self._heard[peer] = trio.current_time()

    def meet(self, peer: Peer) -> None:
        """``peer`` is heard from (a heartbeat, a name's claim): if it is new to this
        node -- or back after it was declared down -- they exchange their names."""
        if peer in self._met or peer == (self.name, self.incarnation):
            return
        self._met.add(peer)
        self.names.announce_all()
        self.names.ask_for_names(peer)

    async def _confirm_tells(self) -> None:
        while True:
            await self._confirm.wait()
            self._confirm = trio.Event()
            await trio.sleep(_CONFIRM_EVERY)
            newest = self._tells_sent
            await self.transport.flush()
            unconfirmed = self._unconfirmed
            confirmed = [number for number in unconfirmed if number <= newest]
            for number in confirmed:  # (numbers ascend: the oldest come first)
                del unconfirmed[number]
            if unconfirmed:
                self._confirm.set()

    async def follow_connection(self, client: Client) -> None:
        """The node's task that hears its own connection's losses: what was in
        flight may be lost with it (see :meth:`_connection_lost`); once back, the
        watches are sent again (the server forgot nothing else: the client
        subscribes everything again)."""
        async with client.events() as events:
            async for event in events:
                if isinstance(event, Disconnected):
                    self._connection_lost(event.reason)
                elif isinstance(event, Reconnected):
                    for remote in self._watches.values():
                        self._send(
                            remote.cell, WATCH, _NONE, f"{self._terminations}.{remote.number}"
                        )

    def _connection_lost(self, reason: str) -> None:
        """This node's connection was lost: every request waiting for an answer
        fails with NodeDown (its message, or its answer, may have been lost with the
        socket: it may or may not have been handled), and the tells not yet
        confirmed are counted in :attr:`unconfirmed` (delivered or not, nobody can
        say) instead of waiting for a confirmation across the reconnect."""
        why = f"this node's connection to the cluster was lost: {reason}"
        for waiter in self._requests.values():
            if waiter.reply is None and not waiter.down:
                waiter.down = why
                waiter.event.set()
        for number, tells in self._unconfirmed.items():
            self.unconfirmed += len(tells)
            link = tells[0][0].link  # (one message: one node's tells)
            if link.counts(number):
                link.told -= len(tells)  # (counted here: not again if its node goes down)
        self._unconfirmed.clear()

    async def flush(self) -> None:
        """Wait until the cluster's servers have everything this node sent so far --
        its tells (also those waiting in the outbox), and the names it registered (a
        lookup from another node after this finds them). A checkpoint."""
        self._outbox.flush()
        await self.transport.flush()

    async def leave(self, *, within: float = _LEAVE_WITHIN) -> None:
        """Leave the cluster in order (its actors have stopped): take no more
        messages, send the answers still being made (an ask that came in while
        the actors stopped is answered, if only with ``ActorStopped``) -- waiting
        at most ``within`` seconds -- then :meth:`close` (also when a cancellation
        or a Ctrl-C ends the wait). A checkpoint."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        try:
            self._unsubscribes.pop(0)()  # (the actors' subject: nothing new comes in)
            if self._answering:
                self._all_answered = trio.Event()
                with trio.move_on_after(within):
                    await self._all_answered.wait()
            await trio.lowlevel.checkpoint()
        finally:
            self.close()

    def close(self) -> None:
        """Leave the cluster at once: no more messages come in, and the others hear
        ``bye`` (after what this node sent before). Never a checkpoint; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._send_acks()
        self._publish(self._heartbeat_subject, b"bye")
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
        for unsubscribe in self._names.values():
            unsubscribe()
        self._names.clear()
        for waiter in self._requests.values():
            waiter.event.set()

    def finish(self, *, flushed: bool) -> None:
        """After :meth:`close` and a last flush: stop hearing the no-responders
        answers to the last tells (they came before the flush's end). Tells still
        unconfirmed are confirmed if the flush ended (``flushed``), else counted in
        :attr:`unconfirmed`. Never a checkpoint; idempotent."""
        if self._bounces is not None:
            self._bounces()
            self._bounces = None
        if not flushed:
            self.unconfirmed += sum(len(tells) for tells in self._unconfirmed.values())
        self._unconfirmed.clear()

    # --- refs on the wire -----------------------------------------------------------

    def ref_to_wire(self, ref: ActorRef) -> WireRef:
        found: object = ref._cell  # (an ActorCell, or the RemoteCell of a remote ref)
        if type(found) is RemoteCell:
            return found.wire
        cell = cast("ActorCell", found)
        number = self._export_numbers.get(cell)
        if number is None:
            with self._export_lock:  # (a tell from another thread encodes there)
                number = self._export_numbers.get(cell)
                if number is None:
                    number = next(self._export_count)
                    self._export_numbers[cell] = number
                    self._exported[number] = cell
        return (self.name, self.incarnation, cell.path, number)

    def ref_from_wire(self, node: str, incarnation: str, path: str, number: int) -> ActorRef:
        if node == self.name and incarnation == self.incarnation:
            cell = self._exported.get(number)
            if cell is not None:
                return new_ref(cell)
        wire = (node, incarnation, path, number)
        remote = self._remote.get(wire)
        if remote is None:
            remote = self._remote[wire] = RemoteCell(self, wire)
        return new_ref(remote)  # type: ignore[arg-type]

    # --- sending --------------------------------------------------------------------

    def _out(self, subject: str, data: bytes, reply: str | None = None) -> None:
        """Publish, after the tells waiting in the outbox: what the node sends
        leaves in the order it was sent. May raise what the connection refuses."""
        if self._outbox.waiting:
            self._outbox.flush()
        self.transport.publish(subject, data, reply=reply)

    def _publish(self, subject: str, data: bytes) -> None:
        """Send a message of the node's own (a heartbeat, a reply, a notice): what the
        connection refuses now (full while reconnecting, closed, too large) is said
        in the log, never an error that would end the node."""
        try:
            self._out(subject, data)
        except Exception as error:
            _log.warning("node %s: could not send to %s: %s", self.name, subject, error)

    def _send(
        self, cell: RemoteCell, kind: int, body: bytes | msgspec.Raw, reply: str | None
    ) -> None:
        raw = body if isinstance(body, msgspec.Raw) else msgspec.Raw(body)
        self._out(cell.subject, _encode((kind, cell.eid, cell.local_path, raw)), reply)

    def _new_codec(self) -> Codec:
        cluster = self.cluster
        return Codec(
            types=cluster.types,
            errors=cluster.errors,
            pickle=cluster.pickle,
            ref_to_wire=self.ref_to_wire,
            ref_from_wire=self.ref_from_wire,
        )

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
        codec = getattr(self._codecs_elsewhere, "codec", None)
        if codec is None:
            codec = self._codecs_elsewhere.codec = self._new_codec()
        body = codec.encode(message)
        self.trio_token.run_sync_soon(self._tell_sent_elsewhere, cell, message, body)

    def _tell_sent_elsewhere(self, cell: RemoteCell, message: Any, body: bytes) -> None:
        try:
            self._tell_encoded(cell, message, body)
        except Exception as error:  # (in a callback of trio's: nothing may escape)
            self._not_sent([(cell, message, body)], error)

    def _tell_encoded(self, cell: RemoteCell, message: Any, body: bytes) -> None:
        """Send now (raising what the connection refuses), or keep in the outbox
        until the connection's writer's turn while what the node published waits
        for it (``_outbox.py``)."""
        if self._closed:
            self.system.dead_letters.record(new_ref(cell), message, "unreachable")  # type: ignore[arg-type]
            return
        outbox = self._outbox
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
        _log.warning("node %s: %d tell(s) to node %s not sent: %s", self.name, count, to, error)
        for cell, message, _body in tells:
            self.system.dead_letters.record(new_ref(cell), message, "unreachable")  # type: ignore[arg-type]

    def _publish_tells(self, subject: str, tells: list[Told]) -> None:
        """Tells to one node as one ``TELL`` message, numbered in this node's
        sequence; its reply subject carries the number of the last, so a no-
        responders answer says which came back. Kept until confirmed. May raise
        what the connection refuses (then nothing was sent)."""
        number = self._tells_sent + len(tells)
        bodies = [(cell.eid, cell.local_path, msgspec.Raw(body)) for cell, _m, body in tells]
        data = _encode((TELL, 0, "", bodies))
        self.transport.publish(subject, data, reply=f"{self._unreachable}.{number}")
        self._tells_sent = number
        self._unconfirmed[number] = tells
        cell = tells[0][0]  # (one subject: one node's tells, one link)
        link = cell.link
        if link.closed_after is not None:  # (its node was declared down, and is told again)
            link = cell.link = self.link_to(cell.peer)
        link.told += len(tells)
        self._confirm.set()

    def _request(self, peer: Peer | None) -> tuple[int, str, _Waiter]:
        number = self._requests_made = self._requests_made + 1
        waiter = self._requests[number] = _Waiter(peer)
        return number, f"{self._replies}.{number}", waiter

    async def ask(self, cell: RemoteCell, message: Any) -> Any:
        """A remote ask (see ``ActorRef.ask``). A checkpoint."""
        self.check_thread("ask")
        body = self.codec.encode(message)
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; ask not sent")
        number, reply_subject, waiter = self._request(cell.peer)
        try:
            self._send(cell, ASK, body, reply_subject)
            try:
                await waiter.event.wait()
            except trio.Cancelled:
                if waiter.reply is None and not waiter.down:
                    self._send(cell, CANCEL, _NONE, reply_subject)  # withdraw it there
                raise
        finally:
            del self._requests[number]
        return self._answer_of(waiter, cell)

    def _answer_of(self, waiter: _Waiter, cell: RemoteCell) -> Any:
        reply = waiter.reply
        if waiter.down:
            raise NodeDown(
                f"{cell.path}: {waiter.down}, before it answered; the message may or may "
                "not have been handled"
            )
        if reply is None:
            raise ActorStopped(f"{cell.path}: this node left the cluster before it answered")
        if reply.status == 503:
            raise ActorStopped(
                f"{cell.path} is unreachable: nothing serves node {cell.node_name!r} "
                f"incarnation {cell.incarnation} (it stopped, or restarted as another)"
            )
        ok, body = _reply.decode(reply.data)
        if ok:
            return self.codec.decode(body)
        raise self.codec.decode_error(body)

    async def stop(self, cell: RemoteCell, *, drain: bool) -> None:
        """A remote ``stop``: returns once the actor has stopped. A checkpoint."""
        self.check_thread("stop")
        if self._closed:
            await trio.lowlevel.checkpoint()
            return  # (this node can no longer reach it: as far as it can tell, stopped)
        number, reply_subject, waiter = self._request(cell.peer)
        try:
            self._send(cell, STOP, _encode(drain), reply_subject)
            await waiter.event.wait()
        finally:
            del self._requests[number]
        if waiter.down or (waiter.reply is not None and waiter.reply.status == 503):
            return  # its node is gone: it has stopped
        if waiter.reply is not None:
            self._answer_of(waiter, cell)

    def request_stop(self, cell: RemoteCell, *, drain: bool) -> None:
        if not self._closed:
            self._send(cell, STOP, _encode(drain), None)

    # --- death watch across nodes: the watcher's side -------------------------------

    def _subscribe_termination(
        self, cell: RemoteCell, key: object, callback: Callable[[Terminated], None]
    ) -> None:
        remote = self._watches.get(cell.wire)
        if remote is None:
            remote = _RemoteWatch(cell, next(self._watch_count))
            self._watches[cell.wire] = remote
            self._watches_by_number[remote.number] = remote
            self._send(cell, WATCH, _NONE, f"{self._terminations}.{remote.number}")
        remote.subscribers[key] = callback

    def watch(self, cell: RemoteCell, watcher: ActorCell) -> None:
        """``watcher`` gets one ``Terminated`` when the remote actor stops (or its
        node dies). Never a checkpoint; idempotent."""

        def deliver(notice: Terminated) -> None:
            if watcher.watching is not None:
                watcher.watching.discard(cell)
            if watcher.accepting:  # (a watcher that stopped first gets nothing)
                watcher.tell_notice(notice)

        self._subscribe_termination(cell, watcher, deliver)

    def unwatch(self, cell: RemoteCell, watcher: ActorCell) -> None:
        """Withdraw ``watcher``'s watch, and a ``Terminated`` of it already queued."""
        self.forget_watcher(cell, watcher)
        ref = new_ref(cell)  # type: ignore[arg-type]
        watcher.withdraw_notices(lambda item: isinstance(item, Terminated) and item.ref == ref)

    def forget_watcher(self, cell: RemoteCell, key: object) -> None:
        """Withdraw one subscriber's watch of ``cell``; the last one gone, this node
        forgets the watch (the other node keeps its side until the actor stops:
        then this node finds nobody to tell)."""
        remote = self._watches.get(cell.wire)
        if remote is None:
            return
        remote.subscribers.pop(key, None)
        if not remote.subscribers:
            del self._watches[cell.wire]
            del self._watches_by_number[remote.number]

    async def wait_terminated(self, cell: RemoteCell) -> Terminated:
        """``wait_stopped`` of a remote actor. A checkpoint."""
        done = trio.Event()
        outcome: list[Terminated] = []
        key = object()

        def deliver(notice: Terminated) -> None:
            outcome.append(notice)
            done.set()

        self._subscribe_termination(cell, key, deliver)
        try:
            await done.wait()
        finally:
            self.forget_watcher(cell, key)
        return outcome[0]

    def _terminated(self, remote: _RemoteWatch, error: BaseException | None) -> None:
        """The remote actor has stopped: tell every subscriber once, then forget."""
        if self._watches.pop(remote.cell.wire, None) is None:
            return
        del self._watches_by_number[remote.number]
        notice = Terminated(new_ref(remote.cell), error)  # type: ignore[arg-type]
        for deliver in list(remote.subscribers.values()):
            deliver(notice)

    def _on_terminated(self, message: Msg) -> None:
        number = int(message.subject.rpartition(".")[2])
        remote = self._watches_by_number.get(number)
        if remote is None:
            return
        if message.status == 503:
            node, incarnation = remote.cell.peer
            error: BaseException | None = NodeDown(
                f"node {node!r} ({incarnation}) cannot be reached: nothing serves it"
            )
        else:
            try:
                encoded = msgspec.msgpack.decode(message.data, type=bytes | None)
                error = None if encoded is None else self.codec.decode_error(encoded)
            except Exception as undecodable:  # (its error holds what this node cannot read)
                error = RemoteError("undecodable", str(undecodable))
        self._terminated(remote, error)

    # --- the registry across nodes --------------------------------------------------

    def claimed(self, name: str, cell: ActorCell) -> None:
        """A local actor takes ``name``: refuse it if another node holds it (as far as
        this node has heard: ``_names.py``), else answer lookups of it from other
        nodes and tell them it is taken.

        Raises:
            ValueError: another node holds ``name``.
        """
        self.names.check(name)
        wire = self.ref_to_wire(new_ref(cell))

        def answer(message: Msg) -> None:
            if message.reply:
                self._publish(message.reply, _encode((True, wire)))

        self._names[name] = self.transport.subscribe(self.subjects.name(name), answer)
        self.names.claim(name, wire)

    def released(self, name: str) -> None:
        unsubscribe = self._names.pop(name, None)
        if unsubscribe is not None:
            unsubscribe()
            self.names.release(name)

    async def lookup(self, name: str) -> ActorRef:
        """The ref registered as ``name`` on any node. A checkpoint.

        Raises:
            ActorNotFound: no node has it.
        """
        number, reply_subject, waiter = self._request(None)
        try:
            self._out(self.subjects.name(name), b"", reply_subject)
            await waiter.event.wait()
        finally:
            del self._requests[number]
        reply = waiter.reply
        if reply is None or reply.status == 503:
            raise ActorNotFound(f"no actor is registered as {name!r} on any node")
        _ok, wire = msgspec.msgpack.decode(reply.data, type=tuple[bool, tuple[str, str, str, int]])
        return self.ref_from_wire(*wire)

    # --- receiving (called by the connection's reader, in order) --------------------

    def _on_reply(self, message: Msg) -> None:
        number = int(message.subject.rpartition(".")[2])
        waiter = self._requests.get(number)
        if waiter is not None and waiter.reply is None:
            waiter.reply = message
            waiter.event.set()

    def _on_unreachable(self, message: Msg) -> None:
        number = int(message.subject.rpartition(".")[2])
        tells = self._unconfirmed.pop(number, None)
        if tells is not None and message.status == 503:
            link = tells[0][0].link
            if link.counts(number):
                link.bounced += len(tells)
            for recipient, told, _body in tells:
                self.system.dead_letters.record(new_ref(recipient), told, "unreachable")  # type: ignore[arg-type]

    def _on_message(self, message: Msg) -> None:
        try:
            kind, number, path, body = _envelope.decode(message.data)
            if kind == TELL:  # (its body: [export number, path, body] for each tell)
                tells = _tells.decode(body)
        except msgspec.DecodeError as error:  # (not one of ours: nothing to answer)
            _log.warning("node %s: a message it cannot read was ignored: %s", self.name, error)
            return
        if kind == TELL:
            if message.reply and message.reply.startswith(self._tell_replies):
                self._taken.take(message.reply, len(tells))
                self._ack.set()
            exported = self._exported
            for number, path, told in tells:
                self._receive_tell(exported.get(number), number, path, told)
            return
        cell = self._exported.get(number)
        if kind == ASK:
            if message.reply:
                self._receive_ask(cell, path, body, message.reply)
        elif kind == CANCEL:
            if message.reply and (envelope := self._answering.get(message.reply)) is not None:
                envelope.cancel()
        elif kind == STOP:
            self._receive_stop(cell, body, message.reply)
        elif kind == WATCH and message.reply:
            self._receive_watch(cell, number, message.reply)

    def _dead_ref(self, number: int, path: str) -> ActorRef:
        """A ref for a dead letter to an actor of this node that is gone."""
        return self.ref_from_wire(self.name, self.incarnation, path, number)

    def _receive_tell(self, cell: ActorCell | None, number: int, path: str, body: Any) -> None:
        try:
            message = self.codec.decode(body)
        except Exception as error:  # (a type this node does not register, pickle, ...)
            _log.error("node %s: a tell to %s could not be decoded: %s", self.name, path, error)
            self.system.dead_letters.record(
                self._dead_ref(number, path), bytes(body), "undecodable"
            )
            return
        if cell is None:
            self.system.dead_letters.record(self._dead_ref(number, path), message, "stopped")
        else:
            cell.tell_forwarded(message)  # (nobody to raise MailboxFull to: a dead letter)

    def _receive_ask(self, cell: ActorCell | None, path: str, body: Any, reply: str) -> None:
        """Queue an ask from another node, now, in arrival order (see ``_inbound``)."""
        try:
            message = self.codec.decode(body)
            if cell is None:
                raise ActorStopped(f"{self.name}:{path} has stopped; ask not accepted")
        except Exception as error:
            self._publish(reply, _encode((False, msgspec.Raw(self.codec.encode_error(error)))))
            return
        envelope = self._answering[reply] = RemoteAsk(cell, message, self, reply)
        if not cell.accept_ask(envelope):
            envelope.start()  # (running from now on: a task asks for it)
            envelope.scope = trio.CancelScope()
            self._start(self._ask_by_task, envelope)

    async def _ask_by_task(self, envelope: RemoteAsk) -> None:
        """Ask ``envelope``'s actor from a task of the node (an actor that takes
        asks only so: a pool). Its asker's ``CANCEL`` cancels the task's ask."""
        assert envelope.scope is not None
        try:
            with envelope.scope:
                try:
                    value = await new_ref(envelope.cell).ask(envelope.message)
                except Exception as error:
                    envelope.fail(error)
                else:
                    envelope.reply(value)
        finally:  # (cancelled with the node: nobody will answer any more)
            envelope.handler_ended(ActorStopped(f"{envelope.cell.path} stopped while answering"))

    def answer_ask(self, envelope: RemoteAsk, value: Any, error: BaseException | None) -> None:
        """Publish the end of an ask from another node: ``value``, or ``error``
        (also when the value, or the answer, cannot go). Never raises."""
        self.forget_ask(envelope)
        reply = envelope.answer_to
        if error is None:
            try:
                self._out(reply, _encode((True, msgspec.Raw(self.codec.encode(value)))))
                return
            except Exception as cannot_go:  # (unencodable, over max_payload, closed)
                error = cannot_go
        self._publish(reply, _encode((False, msgspec.Raw(self.codec.encode_error(error)))))

    def forget_ask(self, envelope: RemoteAsk) -> None:
        """An ask from another node ended: answered, withdrawn or abandoned."""
        self._answering.pop(envelope.answer_to, None)
        if not self._answering and self._all_answered is not None:
            self._all_answered.set()

    def _receive_watch(self, cell: ActorCell | None, number: int, reply: str) -> None:
        """Another node watches a local actor: answer ``reply`` when it stops (at
        once if it has). One task per watched actor, whatever the watchers."""
        if cell is None:
            self._publish(reply, _encode(None))
            return
        subjects = self._watched.get(number)
        if subjects is not None:
            subjects.append(reply)
            return
        self._watched[number] = [reply]
        self._start(self._report_stop, cell, number)

    async def _report_stop(self, cell: ActorCell, number: int) -> None:
        try:
            terminated = await new_ref(cell).wait_stopped()
            error = terminated.error
            answer = _encode(None if error is None else self.codec.encode_error(error))
            for subject in self._watched.get(number, ()):
                self._publish(subject, answer)
        finally:
            self._watched.pop(number, None)

    def _receive_stop(self, cell: ActorCell | None, body: Any, reply: str | None) -> None:
        try:
            drain = msgspec.msgpack.decode(body) is True
        except msgspec.DecodeError:
            drain = False
        if cell is None:
            if reply:
                self._publish(reply, _encode((True, _NONE)))
            return
        ref = new_ref(cell)
        if reply is None:
            ref.stop_nowait(drain=drain)
            return

        async def stop_and_answer() -> None:
            await ref.stop(drain=drain)
            self._publish(reply, _encode((True, _NONE)))

        self._start(stop_and_answer)

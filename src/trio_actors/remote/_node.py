"""A node: one actor system's presence in a cluster -- the wiring and what comes in.

The node is made of one object per concept, each in its own module (the package's
docstring lists them), and keeps only what ties them together: its subscriptions,
its tasks, what the peer table's decisions make it do, what it hears of its own
connection, leaving, and the dispatch of messages for its actors
(``P.n.<node>.<incarnation>``), as the connection's reader calls back, in order:
tells go straight to a mailbox; asks and stops to ``_inbound.py`` (queued at once,
in arrival order); watches to ``_watches.py``.

Every subscription parses what arrives first (``_frames.py``, one parser per
subject kind, which cannot raise) and counts what it cannot use
(``_bad_input.py``): nothing from the wire ends a node.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from .._cluster import Cluster
from .._core._stopping import DEFAULT_SHUTDOWN
from .._errors import ActorError, ActorNotFound
from .._interrupts import protect_module
from .._membership import DEFAULT_EVENTS_CAPACITY, Member, MembershipEvents
from .._placement import Placement, RoundRobin
from .._statistics import NodeStatistics
from .._supervision import RestartType, Supervision
from ..actors import Actor
from ..mailbox import Bounded
from ..nats import Disconnected, Reconnected
from ._bad_input import Bad, BadInput, UndecodableBytes, listen
from ._children import spawn_child
from ._codec import Codec
from ._confirm import Confirmations
from ._exports import Exports
from ._frames import Envelope, Frames
from ._groups import Groups
from ._heartbeats import Heartbeats
from ._inbound import Answers
from ._link import Link
from ._members import Members
from ._monitoring import Monitoring
from ._names import ClusterNames
from ._observed import ObservedGroups, ObservedTells, observer_of
from ._peers import Peers
from ._requests import Requests
from ._spawning import Spawning, check_spawn, spawnable_classes
from ._subjects import (
    ASK,
    CANCEL,
    CONFIRM,
    LOAD,
    SENDS,
    SPAWN,
    STOP,
    TELL,
    WATCH,
    Peer,
    Subjects,
)
from ._tells import Tells
from ._transport import NatsTransport, Transport
from ._watches import Watches

if TYPE_CHECKING:
    import msgspec

    from .._core._cell import ActorCell
    from ..actors import ActorRef, ActorSystem
    from ..nats import Client, Headers, Msg
    from ._codec import WireRef

__all__ = ["Node"]

_LEAVE_WITHIN: Final = 5.0  # seconds a leaving node gives the answers still being made

_log = logging.getLogger("trio_actors")

T = TypeVar("T")


class Node:
    """An actor system's presence in a cluster (made by ``open_actor_system(
    cluster=..., node=...)``; reached as ``system.node``).

    (The node is the wiring of its parts, so it holds one attribute per part:
    more than a plain object would.)

    Attributes:
        name: the node's name in the cluster.
        incarnation: random, new each time the node starts.
        unconfirmed: tells given back ``"in-doubt"`` -- dead letters with their
            messages -- because their fate is unknown: the receiving node died or
            was declared down, or they were lost on the way, before it
            acknowledged them; handled or not, nobody can say (T21's
            "unconfirmed"). Equal to the number of those dead letters.
        not_permitted: messages of this node's that the NATS server refused to carry
            (a permissions violation: one per ``-ERR``; ``_refused.py`` says what
            each becomes).
    """

    def __init__(
        self,
        system: ActorSystem,
        transport: Transport,
        cluster: Cluster,
        name: str,
        incarnation: str,
        nursery: trio.Nursery,
        spawnable: dict[str, type[Actor]] | None = None,
    ) -> None:
        self.system = system
        self.transport = transport
        self.cluster = cluster
        self.name = name
        self.incarnation = incarnation
        self.observer = observer_of(self)  # (None: not observed, _observed.py)
        self.subjects = subjects = Subjects(cluster.name)
        self.thread_id = system.thread_id  # (read by every remote tell)
        self._nursery = nursery
        self.closed = False
        limits = cluster.limits
        self.bad_input = BadInput(name, limits)  # (what it could not use, by kind)
        by_user = cluster.user == name  # (each node its own user: advisories by user)
        self.frames = Frames(cluster.name, subjects, name, by_user=by_user)  # (parsed)
        self.undecodable = UndecodableBytes(system.dead_letters, limits)
        self.not_permitted = 0  # messages the server refused to carry (_refused.py)
        self.exports = Exports(self)
        self.codec = self.new_codec()
        self.tells = Tells(self) if self.observer is None else ObservedTells(self)
        self.requests = Requests(self)
        self.watches = Watches(self)
        self.confirmations = Confirmations(self)  # (every request ends: _confirm.py)
        self.membership = membership = Members(self)  # (the peers up, and who follows)
        self.peers = Peers(
            (name, incarnation),
            heartbeat=cluster.heartbeat,
            heartbeats_missed=cluster.heartbeats_missed,
            limit=limits.peers,
            new_link=self.tells.new_link,
            on_met=self._met,
            on_down=self._peer_down,
            schedule=system.trio_token.run_sync_soon,
            on_joined=membership.joined,
            on_gone=membership.gone,
        )
        self.names = ClusterNames(self, self.tells.publish)  # the cluster's names
        # (names served by many actors: _groups.py)
        self.groups = Groups(self) if self.observer is None else ObservedGroups(self)
        self.answers = Answers(self)  # (asks and stops from other nodes)
        # (spawns asked of the others, and by them: what it may spawn for them)
        if spawnable is None:
            spawnable = spawnable_classes(cluster)
        self.spawning = Spawning(self, spawnable)
        self.heartbeats = Heartbeats(self)  # (the peer table's input)
        frames, heartbeats = self.frames, self.heartbeats
        self._unsubscribes = [
            # (first: leave() ends it first; an observed node's sees the headers too)
            self.listen(self.subject, frames.envelope, self._on_message)
            if self.observer is None
            else self.listen(self.subject, self._envelope_and_headers, self._on_observed),
            self.listen(self.requests.subject, frames.reply, self.requests.on_reply),
            self.listen(subjects.heartbeats(), frames.heartbeat, heartbeats.on_heartbeat),
            self.listen(self.watches.subject, frames.termination, self.watches.on_terminated),
            self.listen(subjects.acks(name, incarnation), frames.ack, self.tells.fates.on_ack),
            self.listen(self.names.subject, frames.announcement, self.names.on_announcement),
            # The outbox's tells leave at the connection writer's turn, with what waits,
            # and so do the ends of the tells taken from shared names.
            transport.before_writing(self.tells.outbox.flush),
            transport.before_writing(self.groups.send_reports),
        ]
        # (the statistics service: what trio-actors top asks; _monitoring.py)
        self.monitoring = Monitoring(self) if cluster.monitoring else None
        if self.monitoring is not None:
            self._unsubscribes.extend(self.monitoring.listen())
        self.peers.start()  # (this node is up, and a member, from now)

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

    @property
    def subject(self) -> str:
        """The subjects of this node's actors (one per sending node)."""
        return f"{self.subjects.node(self.name, self.incarnation)}.*"

    @property
    def trio_token(self) -> trio.lowlevel.TrioToken:
        return self.system.trio_token

    @property
    def unconfirmed(self) -> int:
        return self.tells.fates.unconfirmed

    @property
    def unsent(self) -> int:
        """Messages this node published that never reached a server, because its
        connection closed first -- when it left with its server gone: its last
        answers, acknowledgements, stop reports, its ``bye`` (the tells among them
        are counted in ``unconfirmed`` too). Known once the node has left;
        0 over the in-memory bus."""
        transport = self.transport
        return transport.client.unsent if isinstance(transport, NatsTransport) else 0

    def statistics(self) -> NodeStatistics:
        """A snapshot of the node's counters (:class:`~trio_actors.NodeStatistics`).
        Never a checkpoint."""
        return NodeStatistics(
            bad_input=self.bad_input.snapshot(),
            peers=self.peers.count(),
            undecodable_bytes=self.undecodable.held,
            unconfirmed=self.tells.fates.unconfirmed,
        )

    def listen(
        self,
        subject: str,
        parse: Callable[[Msg], T | Bad],
        handle: Callable[[T], object],
        transport: Transport | None = None,
    ) -> Callable[[], None]:
        """Subscribe to ``subject`` (on ``transport``, the node's by default): each
        message parsed by ``parse`` (``_frames.py``), then handled, or counted as bad
        input. Return what unsubscribes."""
        return listen(transport or self.transport, subject, self.bad_input, parse, handle)

    def refused(self, kind: str, why: object, subject: str) -> None:
        """Count input a handler could not use (``kind``: a field of
        :class:`~trio_actors.BadInputCounts`), logged rate-limited."""
        self.bad_input.count(Bad(kind, why), subject)

    def undecodable_tell(
        self, ref: ActorRef, body: bytes | msgspec.Raw, why: str, subject: str
    ) -> None:
        """A tell to ``ref``'s actor that this node could not decode (``why``), heard
        on ``subject``: counted as bad input, and a dead letter "undecodable" that
        keeps a bounded prefix of its bytes (``_bad_input.UndecodableBytes``)."""
        self.refused("tells", why, subject)
        kept = self.undecodable.kept(body)
        self.system.dead_letters.record(ref, kept, "undecodable")

    def ref_to_wire(self, ref: ActorRef) -> WireRef:
        return self.exports.ref_to_wire(ref)

    def ref_from_wire(
        self, node: str, incarnation: str, path: str, number: int, overflow: int = 0
    ) -> ActorRef:
        return self.exports.ref_from_wire(node, incarnation, path, number, overflow)

    def new_codec(self) -> Codec:
        """A codec for this node's messages (one per thread that encodes)."""
        cluster = self.cluster
        return Codec(
            types=cluster.types,
            errors=cluster.errors,
            pickle=cluster.pickle,
            ref_to_wire=self.exports.ref_to_wire,
            ref_from_wire=self.exports.ref_from_wire,
            shared_ref=lambda name: self.groups.ref(name),
        )

    def start(self, function: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a task of the node's from a callback: once the node has closed (its
        nursery is ending), nothing more is started -- never an error in the
        connection's reader."""
        if self.closed:
            return
        try:
            self._nursery.start_soon(function, *args)
        except RuntimeError:  # (the nursery closed meanwhile: the node is ending)
            _log.debug("node %s: not started while ending: %s", self.name, function)

    def check_thread(self, operation: str, *, of: str = "a remote ref") -> None:
        if get_ident() != self.thread_id:
            raise ActorError(
                f"{operation}() of {of} called from another thread; use "
                "trio.from_thread.run to reach the trio run of its system"
            )

    async def run(self) -> None:
        """The node's own tasks: heartbeats and the watch over the nodes it waits
        on, confirming tells and acknowledging them (``_tells.py``), the confirm
        rounds with the nodes it waits on (``_confirm.py``), and the statistics
        service's answers (``_monitoring.py``)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.heartbeats.beat)
            nursery.start_soon(self.tells.run)
            nursery.start_soon(self.confirmations.run)
            nursery.start_soon(self.groups.run)
            if self.monitoring is not None:
                nursery.start_soon(self.monitoring.run)

    # --- peers: what the peer table makes the node do --------------------------------

    def _met(self, peer: Peer) -> None:
        """``peer`` is new to this node, or back after it was declared down: they
        exchange their names (this node's at most once per ``InputLimits.announce_every``
        seconds, however many nodes it meets)."""
        self.names.announce_all_soon()
        self.names.ask_for_names(peer)

    def _peer_down(
        self, peer: Peer, said: str, sent_up_to: int | None, closed: Link | None
    ) -> None:
        """The peer table declared ``peer`` down (``said``): the requests pending to
        it (those up to number ``sent_up_to``, if given) fail with NodeDown, the
        watches of its actors end with it, its names are free, and the tells of
        its closed link are counted."""
        node, incarnation = peer
        self.requests.peer_down(peer, said, sent_up_to)
        self.watches.peer_down(peer, said)
        self.confirmations.forget(peer)
        self.tells.taken.forget(self.subjects.unreachable(node, incarnation))
        self.names.forget(peer)
        self.spawning.forget(peer)
        if closed is not None:
            self.tells.room(closed)  # (what it held: to the next record, before any tell made now)
            self.start(self.tells.fates.count_lost, peer, closed, said)

    def follow_advisories(self, advisories: Transport) -> None:
        """Hear the server's disconnect advisories on ``advisories`` (until
        :meth:`close`)."""
        self._unsubscribes.append(self.heartbeats.follow_advisories(advisories))

    async def follow_connection(self, client: Client) -> None:
        """The node's task that hears its own connection's losses: what was in
        flight may be lost with it -- every request waiting for an answer fails
        with NodeDown (the tells stay in their windows: acknowledged, or found lost
        by a confirm round, ``_confirm.py``); once back, the watches are sent again
        (the server forgot nothing else: the client subscribes everything
        again)."""
        async with client.events() as events:
            async for event in events:
                if isinstance(event, Disconnected):
                    why = f"this node's connection to the cluster was lost: {event.reason}"
                    self.requests.connection_lost(why)
                elif isinstance(event, Reconnected):
                    self.watches.send_again()

    # --- membership (_members.py) ---------------------------------------------------

    def members(self) -> list[Member]:
        """The nodes this node knows to be up, oldest first
        (:class:`~trio_actors.Member`; ``docs/remote.rst``, "Membership"): this node
        too, from its start and while it hears its own heartbeats (cut off from the
        servers, it lists itself down too). Never a checkpoint.

        Raises:
            ActorError: called from another thread (the peer table changes in the
                node's trio run).
        """
        self.check_thread("members", of="system.node")
        return self.membership.members()

    def events(self, *, capacity: int = DEFAULT_EVENTS_CAPACITY) -> MembershipEvents:
        """The membership changes from now on, as this node sees them: ``async for
        event in system.node.events():`` (:class:`~trio_actors.MembershipEvents`:
        bounded, it drops and counts rather than make the node wait; it ends when
        the node leaves). Never a checkpoint.

        Raises:
            TypeError, ValueError: ``capacity`` is not an int >= 1.
            ActorError: called from another thread.
        """
        self.check_thread("events", of="system.node")
        return self.membership.follow(capacity)

    # --- the registry across nodes --------------------------------------------------

    def registered(self) -> dict[str, ActorRef]:
        """Every name registered in the cluster as this node knows it: its own
        (``system.registered()``) and those the other members hold (their claims,
        ``_names.py``). Never a checkpoint: nothing is asked.

        Raises:
            ActorError: called from another thread.
        """
        self.check_thread("registered", of="system.node")
        return dict(sorted({**self.names.registered(), **self.groups.registered()}.items()))

    def claimed(self, name: str, cell: ActorCell) -> None:
        """A local actor takes ``name`` (see ``ClusterNames.claimed``).

        Raises:
            ValueError: another node holds ``name`` (or serves it as shared).
        """
        self.groups.check_single(name)
        self.names.claimed(name, cell)

    def released(self, name: str) -> None:
        self.names.released(name)

    def claimed_shared(self, name: str, cell: ActorCell) -> None:
        """A local actor serves shared ``name`` (see ``Groups.claimed``).

        Raises:
            ValueError: another node holds ``name`` alone.
        """
        self.groups.claimed(name, cell)

    def released_shared(self, name: str, cell: ActorCell) -> None:
        self.groups.released(name, cell)

    def exported_stopped(self, cell: ActorCell) -> None:
        """A local actor whose ref left for another node has stopped: its number
        finds nothing from now on, and the shared names forget its wire form
        (``_exports.py``: no table here holds a cell weakly, so each is pruned so)."""
        self.exports.forget(cell)
        self.groups.forget_member(cell)

    async def lookup(self, name: str) -> ActorRef:
        """The ref registered as ``name`` on any node (a shared name's: its group's).
        A checkpoint.

        Raises:
            ActorNotFound: no node has it.
        """
        group = self.groups.find(name)
        if group is not None:
            await trio.lowlevel.checkpoint()
            return group
        began = trio.current_time()
        try:
            return await self.requests.lookup(name)
        except ActorNotFound:
            # A shared name this node has not heard of yet: its members say so --
            # asked when the lookup found no holder, not when it waited its bound
            # out (a lookup stays within one bound).
            bound = self.cluster.heartbeat * self.cluster.heartbeats_missed
            waited_out = trio.current_time() - began >= bound
            group = None if self.closed or waited_out else await self.groups.probe(name)
            if group is None:
                raise
            return group

    # --- spawning on other nodes (_spawning.py) -------------------------------------

    async def spawn(
        self,
        actor_class: type[Actor],
        *args: Any,
        on: str | Placement = RoundRobin(),  # noqa: B008  (a frozen value)
        name: str | None = None,
        mailbox: Bounded | None = None,
        shutdown: float = DEFAULT_SHUTDOWN,
        **unknown: Any,
    ) -> ActorRef:
        """Spawn an actor of ``actor_class`` on a node of the cluster and return its
        ref (``docs/remote.rst``, "Spawning on another node"): on the member named
        ``on``, or on the one a placement rule chooses among the members that list
        the class as spawnable -- :class:`~trio_actors.RoundRobin` (the default) or
        :class:`~trio_actors.FewestActors`. The actor is a top-level actor of that
        node (supervised there: restarted after a failure, as ``system.spawn``'s
        default). ``*args`` go to the class there and cross as a message does;
        ``name``, ``mailbox`` and ``shutdown`` are ``system.spawn``'s. A checkpoint.

        Cancelled on its way, the actor it made meanwhile is stopped when the
        answer comes (nobody holds its ref).

        Raises:
            TypeError: ``actor_class`` is not an ``Actor`` subclass (a factory
                function cannot be named on another node), an argument cannot cross
                (not a registered type), a value of the wrong kind, or a keyword
                ``system.spawn`` knows but a remote spawn does not (``supervision``,
                ``restart``: what crosses is values, not functions).
            ValueError: ``actor_class`` is defined inside a function.
            NotSpawnable: the node named does not list the class, or no member does.
            NodeDown: the node named is not a member, or the node chosen was
                declared down before it answered;
                :exc:`~trio_actors.ConnectionInterrupted` (a ``NodeDown``) if a
                connection changed on the way: the actor may or may not exist (it
                is never tried again elsewhere).
            ActorStopped: this node has left the cluster; or the node named is
                leaving, or the spawn never reached it (nothing served it).
            NotPermitted: the server does not let this node reach the node named.
            ActorError: called from another thread.
            Exception: what ``system.spawn`` raised on that node (a ``name``
                taken, the class's ``__init__`` raising), rebuilt as for an ask.
        """
        self.check_thread("spawn", of="system.node")
        if unknown:
            keys = ", ".join(sorted(unknown))
            raise TypeError(
                f"system.node.spawn() takes no {keys}: a remote actor is a top-level "
                "actor of its node, supervised there by default (what crosses is "
                "values, not functions: pass the class's own arguments positionally)"
            )
        check_spawn("system.node.spawn", actor_class, on, name, mailbox, shutdown)
        return await self.spawning.spawn(
            actor_class, args, on, name, mailbox, None if shutdown is DEFAULT_SHUTDOWN else shutdown
        )

    async def spawn_child(
        self,
        parent: ActorCell,
        actor_class: type[Actor],
        args: tuple[Any, ...],
        on: str | Placement,
        name: str | None,
        supervision: Supervision,
        mailbox: Bounded | None,
        shutdown: float,
        restart: RestartType,
    ) -> ActorRef:
        """``Actor.spawn_remote``: a child of ``parent`` on another node
        (``_children.py``). A checkpoint."""
        self.check_thread("spawn_remote", of="an actor")
        check_spawn("spawn_remote", actor_class, on, name, mailbox, shutdown)
        return await spawn_child(
            self, parent, actor_class, args, on, name, supervision, mailbox, shutdown, restart
        )

    # --- receiving (called by the connection's reader, in order) --------------------

    def _on_message(self, envelope: Envelope) -> None:
        """A message for this node's actors (parsed: ``Frames.envelope``)."""
        kind, number, path, body, reply, sender = envelope
        if kind in (TELL, SENDS):  # (number: its sequence in the record, path: the record)
            self.tells.taken.receive(body, reply, path, number, sending=kind == SENDS)
            return
        cell = self.exports.cells.get(number)
        if kind == STOP:
            self.answers.receive_stop(cell, body, reply)
        elif reply is None:  # (never: Frames.envelope refuses an ask, a cancel or a watch without)
            return
        elif kind == ASK:
            self.answers.receive_ask(cell, path, body, reply)
        elif kind == CANCEL:
            self.answers.cancel(reply)
        elif kind == WATCH:
            self.watches.receive_watch(cell, number, reply)
        elif kind == CONFIRM:
            self.confirmations.answer(body, reply)
        elif kind == SPAWN:
            self.spawning.receive_spawn(body, reply, sender)
        elif kind == LOAD:
            self.spawning.receive_load(body, reply)

    def _envelope_and_headers(self, message: Msg) -> tuple[Envelope, Headers | None] | Bad:
        """``Frames.envelope``, and the message's headers (an observed node's parser)."""
        parsed = self.frames.envelope(message)
        return parsed if isinstance(parsed, Bad) else (parsed, message.headers)

    def _on_observed(self, parsed: tuple[Envelope, Headers | None]) -> None:
        """A message for this observed node's actors: an ask that came with headers
        goes to its observer (``Answers.receive_ask``); the rest as on any node."""
        envelope, headers = parsed
        if headers is not None and envelope.kind == ASK and envelope.reply is not None:
            cell = self.exports.cells.get(envelope.number)
            self.answers.receive_ask(cell, envelope.path, envelope.body, envelope.reply, headers)
        else:
            self._on_message(envelope)

    # --- leaving --------------------------------------------------------------------

    async def flush(self) -> None:
        """Wait until the cluster's servers have everything this node sent so far --
        its tells (also those waiting in the outbox), and the names it registered (a
        lookup from another node after this finds them). A checkpoint."""
        self.tells.flush()
        await self.transport.flush()

    async def leave(self, *, within: float = _LEAVE_WITHIN) -> None:
        """Leave the cluster in order (its actors have stopped): take no more
        messages, send the answers still being made (an ask that came in while
        the actors stopped is answered, if only with ``ActorStopped``), the
        stops of actors other nodes watch, and the tells to shared names still in
        flight are given their ends -- waiting at most ``within`` seconds --
        then :meth:`close` (also when a cancellation
        or a Ctrl-C ends the wait). A checkpoint."""
        if self.closed:
            await trio.lowlevel.checkpoint()
            return
        try:
            self._unsubscribes.pop(0)()  # (the actors' subject: nothing new comes in)
            deadline = trio.current_time() + within
            await self.answers.all_answered(within)
            await self.watches.all_reported(max(0.0, deadline - trio.current_time()))
            await self.tells.fates.all_acknowledged(max(0.0, deadline - trio.current_time()))
            await self.groups.all_ended(max(0.0, deadline - trio.current_time()))
            await trio.lowlevel.checkpoint()
        finally:
            self.close()

    def close(self) -> None:
        """Leave the cluster at once: no more messages come in, and the others hear
        ``bye`` (after what this node sent before). Never a checkpoint; idempotent."""
        if self.closed:
            return
        self.closed = self.tells.closed = True
        self.tells.taken.give_up_all()
        self.tells.taken.send_acks()
        self.groups.send_reports()
        self.heartbeats.say_bye()
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
        self.names.close()
        self.groups.close()
        self.requests.close()
        self.membership.close()

    def finish(self) -> None:
        """After :meth:`close` and a last flush: stop hearing the no-responders
        answers to the last tells (they came before the flush's end), and give back
        as in doubt the tells no node acknowledged (counted in :attr:`unconfirmed`).
        Never a checkpoint; idempotent."""
        self.tells.finish()


protect_module(globals())

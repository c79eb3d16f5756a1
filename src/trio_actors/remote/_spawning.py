"""Spawning actors on other nodes: ``system.node.spawn``, and what a node does when
another asks it to spawn.

A spawn is a request (``_requests.py``) to the chosen node itself, on its actors'
subject (``P.n.<to>.<incarnation>.<from>``, kind ``SPAWN``, export number 0): the
class by ``module:QualName``, its arguments encoded as a message is (registered
types only: ``TypeError`` before anything is sent), and the options that cross --
``name``, ``mailbox``, ``shutdown``. The node spawns it as one of its top-level
actors only if the class is one it lists (``Cluster(spawnable=...)``): it looks the
name up in that list and never imports anything, so remote spawn is never a way to
run code the node did not choose. It answers with the new actor's ref, or the
error: :exc:`~trio_actors.NotSpawnable`, or what its ``spawn`` raised (a name
taken, the actor's ``__init__`` raising, arguments that do not fit) -- or, once its
system is closing (it leaves the cluster next), ``ActorStopped``: a placement rule
goes on to the next member.

The spawn ends as an ask does (``_requests.py``): its answer, ``NodeDown`` if the
node is declared down first, ``ConnectionInterrupted`` if a connection changed while
it was on its way -- in both, the actor may or may not have been spawned (a node
declared down wrongly is heard again, its actors alive) -- cancellation (an actor
made meanwhile is stopped when the late answer comes: ``Requests.request``'s
``then_late``; cancelled before it is sent, nothing is sent).

Where (``on=``): a member's name, or a rule (``_placement.py``) over the members
(this node included, spawning locally) that list the class: ``RoundRobin`` goes to
the next member in name order, passing over one that refuses; ``FewestActors`` asks
every member (kind ``LOAD``: may it spawn the class, how many live actors it has)
and spawns on the least loaded that may (those that did not answer within a
heartbeat period after them, in name order). Either way, a member that is no member
any more when its turn comes, has left meanwhile (NATS answers that nothing serves
it), is leaving, or that this node may not reach (the server refuses:
``NotPermitted``) is passed over for the next -- none of them made the actor; a
spawn that may have happened (``NodeDown``, ``ConnectionInterrupted``) is never
tried elsewhere: one spawn never makes two actors.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import trio

from .._cluster import Cluster, spawnable_name
from .._core._cell import ActorCell
from .._errors import ActorStopped, NodeDown, NotPermitted, NotSpawnable
from .._interrupts import protect_module
from .._membership import Member
from .._placement import FewestActors, Placement, RoundRobin
from .._supervision import Stop
from ..actors import Actor, ActorRef
from ..mailbox import Bounded
from ._peers import PeerState
from ._remote_cell import RemoteCell
from ._subjects import LOAD, SPAWN, encode

if TYPE_CHECKING:
    from ..actors import ActorSystem
    from ._node import Node
    from ._subjects import Peer

__all__ = ["Spawning", "check_spawn", "spawnable_classes"]

_log = logging.getLogger("trio_actors")

_decode_spawn: Final = msgspec.msgpack.Decoder(
    tuple[str, msgspec.Raw, str | None, int | None, str | None, float | None, bool]
).decode
_decode_class_name: Final = msgspec.msgpack.Decoder(str).decode


_STOP: Final = Stop()


def check_spawn(
    what: str,
    actor_class: object,
    on: object,
    name: object,
    mailbox: object,
    shutdown: object,
) -> None:
    """Check the values of a spawn on another node (``what``: the call, for the
    message) before anything is sent.

    Raises:
        TypeError: a value of the wrong kind; ``actor_class`` is not an ``Actor``
            subclass (a factory function cannot be named on another node).
        ValueError: ``actor_class`` is defined inside a function.
    """
    if not isinstance(actor_class, type) or not issubclass(actor_class, Actor):
        raise TypeError(
            f"{what}() takes an Actor subclass (another node spawns it by its "
            f"module:QualName; a factory function cannot cross), got {actor_class!r}"
        )
    if "<locals>" in actor_class.__qualname__:
        raise ValueError(
            f"{actor_class.__qualname__} is defined inside a function: another node "
            "cannot name it; define it at a module's top level"
        )
    if not isinstance(on, str | RoundRobin | FewestActors):
        raise TypeError(
            f"{what}(on=...) is a node's name, RoundRobin() or FewestActors(), got {on!r}"
        )
    if name is not None and not isinstance(name, str):
        raise TypeError(f"{what}(name=...) is a str or None, got {name!r}")
    if mailbox is not None and not isinstance(mailbox, Bounded):
        raise TypeError(f"{what}(mailbox=...) is None or a Bounded(...), got {mailbox!r}")
    if isinstance(shutdown, bool) or not isinstance(shutdown, int | float):
        raise TypeError(f"{what}(shutdown=...) is seconds (a number), got {shutdown!r}")


@attrs.frozen
class _Request:
    """One spawn, as asked: what crosses, and how it is spawned where it runs."""

    factory: type[Actor]
    args: tuple[Any, ...]
    name: str | None
    mailbox: Bounded | None
    shutdown: float | None
    supervised: bool  # (an instance of a child on another node: _children.py)

    def body(self, args: bytes) -> bytes:
        """The ``SPAWN`` message's body, the arguments (``args``) encoded."""
        mailbox = self.mailbox
        return encode(
            (
                spawnable_name(self.factory),
                msgspec.Raw(args),
                self.name,
                None if mailbox is None else mailbox.capacity,
                None if mailbox is None else mailbox.overflow,
                self.shutdown,
                self.supervised,
            )
        )

    def spawn_in(self, system: ActorSystem, args: tuple[Any, ...]) -> ActorRef:
        """Spawn it in ``system`` (where it runs) with ``args``. Synchronous."""
        options: dict[str, Any] = {} if self.shutdown is None else {"shutdown": self.shutdown}
        if self.supervised:  # (a failure stops it: its parent decides, on its own node)
            options["supervision"] = _STOP
        return system.spawn(self.factory, *args, name=self.name, mailbox=self.mailbox, **options)


def spawnable_classes(cluster: Cluster) -> dict[str, type[Actor]]:
    """The classes ``cluster`` lets other nodes spawn, by ``module:QualName``.

    Raises:
        TypeError: one is not an ``Actor`` subclass.
    """
    found: dict[str, type[Actor]] = {}
    for cls in cluster.spawnable:
        if not issubclass(cls, Actor):
            raise TypeError(
                f"Cluster(spawnable=...) takes Actor subclasses, got {cls.__qualname__} "
                f"({cls.__module__})"
            )
        found[spawnable_name(cls)] = cls
    return found


class Spawning:
    """One node's side of remote spawns: what it may spawn for the others, and the
    spawns it asks of them."""

    __slots__ = (
        "_leaving",
        "_node",
        "_on_the_way",
        "_refusing",
        "_supervised",
        "_turns",
        "spawnable",
    )

    def __init__(self, node: Node, spawnable: dict[str, type[Actor]]) -> None:
        self._node = node
        self.spawnable = spawnable  # (spawnable_classes: by module:QualName)
        # What a member's configuration is does not change in its life: the members
        # that said they do not spawn a class are not asked again (forget: down).
        self._refusing: dict[str, set[Peer]] = {}
        self._turns: dict[str, int] = {}  # (RoundRobin: spawns so far, by class)
        self._on_the_way: dict[str, int] = {}  # (spawns sent, not answered, by member)
        # The instances this node runs of other nodes' children, by the parent's node:
        # stopped when it is down (their anchors are gone with it).
        self._supervised: dict[Peer, list[ActorRef]] = {}
        self._leaving: set[object] | None = None  # (their cells, at this node's exit)

    # --- asking another node -------------------------------------------------------

    async def spawn(
        self,
        factory: type[Actor],
        args: tuple[Any, ...],
        on: str | Placement,
        name: str | None,
        mailbox: Bounded | None,
        shutdown: float | None,
        *,
        supervised: bool = False,
        prefer: str | None = None,
    ) -> ActorRef:
        """``system.node.spawn`` (``Node.spawn`` checks the values), and the
        instances of a child on another node (``supervised``: its node spawns it
        with ``Stop()``, and stops it if this node goes down; ``_children.py``),
        with a rule trying the member named ``prefer`` first, if it is a candidate
        (where the failed instance ran). A checkpoint."""
        node = self._node
        request = _Request(factory, args, name, mailbox, shutdown, supervised)
        class_name = spawnable_name(factory)
        body = request.body(node.codec.encode(list(args)))
        if node.closed:
            await trio.lowlevel.checkpoint()
            self._check_open(class_name)
        if isinstance(on, str):
            return await self._spawn_on(self._member(on), request, body)
        candidates = await self._candidates(on, class_name)
        candidates.sort(key=lambda member: member.name != prefer)  # (stable: the rest stay)
        self._check_open(class_name)  # (it may have left while it asked their loads)
        passed: dict[str, list[str]] = {}  # (the members tried that did not: why)
        for member in candidates:
            if member.name != node.name and not self._up(member):
                passed.setdefault("no member now", []).append(member.name)  # (nothing sent)
                continue
            try:
                return await self._spawn_on(member, request, body)
            except NotSpawnable:
                self._refused(member, class_name)
            except NodeDown:
                # Declared down after it was sent -- wrongly, maybe: a node heard
                # again is alive, its actors too -- or a connection changed: it may
                # have been spawned there. Never twice.
                raise
            except NotPermitted as refused:  # (out of reach, --allow: never delivered)
                _log.info("spawn of %s: %s; trying the next member", class_name, refused)
                passed.setdefault("out of reach", []).append(member.name)
            except ActorStopped as gone:
                if node.closed:
                    raise  # (this node has left: no member is reached)
                # (NATS's no-responders: nothing serves it -- it left since the
                # members were read -- or its system is closing: not spawned there)
                _log.info("spawn of %s: %s; trying the next member", class_name, gone)
                passed.setdefault("left or leaving", []).append(member.name)
        raise NotSpawnable(self._spawned_nowhere(class_name, on, passed))

    def _spawned_nowhere(self, class_name: str, on: Placement, passed: dict[str, list[str]]) -> str:
        """What ``NotSpawnable`` says when no member spawned ``class_name``: the
        members that refuse it -- this time, or before (they are not asked again) --
        and those ``passed`` over, by why."""
        refusing = sorted(name for name, _ in self._refusing.get(class_name, ()))
        said = [f"refused: {', '.join(refusing)}"] if refusing else []
        said += [f"{why}: {', '.join(names)}" for why, names in passed.items()]
        return (
            f"no member of the cluster spawns {class_name} (placement {on!r}; "
            f"{'; '.join(said) or 'no other member'}); list it in Cluster(spawnable=[...]) "
            "-- or spawnable in the configuration file -- of the nodes that may run it"
        )

    def _up(self, member: Member) -> bool:
        """Whether ``member`` is still up (a member now, this incarnation)."""
        return self._node.peers.state((member.name, member.incarnation)) is PeerState.UP

    def _check_open(self, class_name: str) -> None:
        """Raise ``ActorStopped`` once this node has left the cluster -- else a
        placement rule finds no member that answers, and blames their lists."""
        if self._node.closed:
            raise ActorStopped(
                f"node {self._node.name!r} has left the cluster: the spawn of "
                f"{class_name} was not sent"
            )

    def _members(self) -> list[Member]:
        """The members now, this node always among them: cut off from the servers
        it lists itself down (it hears no heartbeat of its own), yet it spawns."""
        node = self._node
        members = node.membership.members()
        if all(m.name != node.name for m in members):
            members.append(Member(node.name, node.incarnation, trio.current_time()))
        return members

    def _member(self, name: str) -> Member:
        for member in self._members():
            if member.name == name:
                return member
        names = ", ".join(sorted(m.name for m in self._node.membership.members())) or "none"
        raise NodeDown(
            f"cannot spawn on node {name!r}: it is not a member of the cluster now "
            f"(the members up: {names})"
        )

    async def _candidates(self, on: Placement, class_name: str) -> list[Member]:
        """The members to try, best first, for placement rule ``on``."""
        node = self._node
        refusing = self._refusing.get(class_name, ())
        members = [
            m
            for m in sorted(self._members(), key=lambda m: m.name)
            if (m.name, m.incarnation) not in refusing
            and (m.name != node.name or class_name in self.spawnable)
        ]
        if isinstance(on, RoundRobin):
            turn = self._turns.get(class_name, 0)
            self._turns[class_name] = turn + 1
            start = turn % len(members) if members else 0
            return members[start:] + members[:start]
        loads: dict[str, int] = {}
        if class_name in self.spawnable:
            loads[node.name] = node.system.statistics().live_actors
        async with trio.open_nursery() as nursery:
            for member in members:
                if member.name != node.name:
                    nursery.start_soon(self._ask_load, member, class_name, loads)
        on_the_way = self._on_the_way  # (this node's spawns there, not answered yet)
        answered = sorted(
            (m for m in members if m.name in loads),
            key=lambda m: (loads[m.name] + on_the_way.get(m.name, 0), m.name),
        )
        # (one slow to answer -- or whose question was lost -- may list the class:
        # tried after those that did, not taken for one that refuses)
        refusing = self._refusing.get(class_name, ())
        slow = [
            m for m in members if m.name not in loads and (m.name, m.incarnation) not in refusing
        ]
        return answered + slow

    async def _ask_load(self, member: Member, class_name: str, loads: dict[str, int]) -> None:
        """Ask ``member`` whether it spawns ``class_name`` and how many live actors
        it has (at most one heartbeat period): into ``loads`` if it does."""
        cell = self._node_cell(member, f"(load of {member.name})")
        with trio.move_on_after(self._node.cluster.heartbeat):
            try:
                answer = await self._node.requests.request(cell, LOAD, encode(class_name))
            except Exception as error:  # (down, unreachable, refused: not a candidate)
                _log.info("placement: %s did not say its load: %s", member.name, error)
                return
            match answer:
                case [True, int(live)] if not isinstance(live, bool):
                    loads[member.name] = live
                case [False, int()]:
                    self._refused(member, class_name)
                case _:
                    _log.info("placement: %s answered %r, not its load", member.name, answer)

    async def _spawn_on(self, member: Member, request: _Request, body: bytes) -> ActorRef:
        """Spawn on ``member``; until it ends, counted as on its way there (in the
        load ``FewestActors`` weighs: spawns started together spread)."""
        on_the_way = self._on_the_way
        on_the_way[member.name] = on_the_way.get(member.name, 0) + 1
        try:
            return await self._spawn_there(member, request, body)
        finally:
            if on_the_way[member.name] == 1:
                del on_the_way[member.name]
            else:
                on_the_way[member.name] -= 1

    async def _spawn_there(self, member: Member, request: _Request, body: bytes) -> ActorRef:
        node = self._node
        factory = request.factory
        if member.name == node.name:  # (this node: spawned here, with the same options)
            await trio.lowlevel.checkpoint()
            return request.spawn_in(node.system, request.args)
        # (cancelled already: raise before anything is sent -- after, the actor is
        # made there, and the Cancelled leaves nobody its ref)
        await trio.lowlevel.checkpoint_if_cancelled()
        cell = self._node_cell(member, f"(spawn of {spawnable_name(factory)})")
        peer = cell.peer
        ref = await node.requests.request(
            cell, SPAWN, body, then_late=lambda made: self._made_too_late(made, peer)
        )
        # A node's answer to a spawn is a ref to an actor of its own -- as a lookup's
        # must be: not one of this node's (which would decode as a local ref) or a
        # third node's, handed to the caller as the new actor.
        if not (
            isinstance(ref, ActorRef)
            and isinstance(ref._cell, RemoteCell)
            and ref._cell.peer == cell.peer
        ):
            is_ref = isinstance(ref, ActorRef)
            what = f"the ref of {ref.path}" if is_ref else type(ref).__name__
            node.refused(
                "forged" if is_ref else "replies",
                f"{member.name} answered a spawn with {what}",
                node.requests.subject,
            )
            raise NodeDown(
                f"node {member.name!r} answered the spawn of {spawnable_name(factory)} with "
                f"{what}, not an actor of its own"
            )
        return ref

    def _made_too_late(self, ref: object, peer: Peer) -> None:
        """A spawn cancelled after it was sent made ``ref`` on ``peer`` (its late
        answer, ``Requests``): nobody holds it, so it is stopped -- never left
        running."""
        cell = ref._cell if isinstance(ref, ActorRef) else None
        if isinstance(cell, RemoteCell) and cell.peer == peer:
            _log.info("a spawn cancelled on its way made %s: stopped", cell.path)
            cell.request_stop(drain=False)

    def _refused(self, member: Member, class_name: str) -> None:
        self._refusing.setdefault(class_name, set()).add((member.name, member.incarnation))

    def forget(self, peer: Peer) -> None:
        """``peer`` is down: what it refused goes with it, and the instances this
        node runs of its children stop (their parent's node is gone: nobody
        supervises them; Erlang's links end them alike)."""
        for refusing in self._refusing.values():
            refusing.discard(peer)
        for ref in self._supervised.pop(peer, ()):
            cell = ref._cell
            if isinstance(cell, ActorCell) and cell.stop_error is None:
                # (what its anchor hears, if the peer was down only here: a failure
                # for its parent's strategy, not the instance stopping itself)
                cell.stop_error = NodeDown(
                    f"its parent's node {peer[0]!r} was declared down by node "
                    f"{self._node.name!r}, which stopped it: nothing supervised it"
                )
            ref.stop_nowait()

    def supervised_of(self, peer: Peer) -> set[ActorCell]:
        """The instances this node runs of ``peer``'s children (``forget`` stops
        them: ``Watches.peer_down`` keeps their watches, to report their stop)."""
        return {
            ref._cell for ref in self._supervised.get(peer, ()) if isinstance(ref._cell, ActorCell)
        }

    def stopped_instance(self, peer: Peer, number: int) -> ActorCell | None:
        """The instance of one of ``peer``'s children exported as ``number``, if this
        node still holds it (it has stopped: the number finds it no more,
        ``_exports.py``). Its anchor's watch may come after it stopped -- it is
        sent once the spawn's answer is back, and the instance may fail in its
        ``on_start`` meanwhile -- and must hear its error (``Watches.receive_watch``).
        Only on a watch of a number that finds nothing: a walk of that node's list."""
        for ref in self._supervised.get(peer, ()):
            cell = ref._cell
            if isinstance(cell, ActorCell) and cell.export_number == number:
                return cell
        return None

    def left_behind(self, cell: ActorCell) -> NodeDown | None:
        """What the stop of ``cell`` at this node's exit is to the node of its
        parent, if it is an instance of another node's child: its node's leaving is
        a failure there for its parent's strategy to decide (a fresh instance placed
        on another node), not the instance stopping itself (``_watches.py`` reports
        it). Never a checkpoint."""
        if not self._node.system._closed:
            return None
        if self._leaving is None:  # (once: a closed system spawns no more)
            self._leaving = {ref._cell for refs in self._supervised.values() for ref in refs}
        if cell not in self._leaving:
            return None
        return NodeDown(f"node {self._node.name!r} left the cluster: its actors stopped")

    def _supervised_by(self, reply: str) -> list[ActorRef]:
        """The instances of the children of the node whose spawn came with
        ``reply`` (``P.r.<node>.<incarnation>...``: checked as the sender's own);
        those that have stopped are pruned as the list doubles."""
        subjects = self._node.subjects
        node, incarnation = reply[len(subjects.prefix) + 3 :].split(".", 2)[:2]
        instances = self._supervised.setdefault((node, incarnation), [])
        if len(instances) >= 8 and len(instances) & (len(instances) - 1) == 0:
            instances[:] = [ref for ref in instances if ref.statistics().state != "stopped"]
        return instances

    def _node_cell(self, member: Member, what: str) -> RemoteCell:
        """The target of a request to ``member`` itself (export number 0)."""
        return RemoteCell(self._node, (member.name, member.incarnation, what, 0, 0))

    # --- asked by another node ------------------------------------------------------

    def receive_spawn(self, body: Any, reply: str, sender: str) -> None:
        """Another node asks this one to spawn an actor (``SPAWN``; its reply subject
        checked as ``sender``'s: ``Frames.envelope``): spawn it if its class is
        listed, and answer the ref -- or the error. Never raises."""
        node = self._node
        try:
            decoded = _decode_spawn(body)
        except Exception as error:
            node.refused("messages", f"a spawn request that does not decode: {error}", reply)
            self._answer_error(reply, ValueError(f"a spawn request that does not decode: {error}"))
            return
        class_name, args_body, name, capacity, overflow, shutdown, supervised = decoded
        try:
            cls = self.spawnable.get(class_name)
            if cls is None:
                listed = ", ".join(sorted(self.spawnable)) or "nothing"
                raise NotSpawnable(
                    f"node {node.name!r} does not spawn {class_name} for other nodes "
                    f"(asked by {sender!r}); it lists {listed} in Cluster(spawnable=...) "
                    "-- or spawnable in its configuration file"
                )
            if node.system._closed:  # (its actors are stopping: the node leaves next)
                raise ActorStopped(
                    f"node {node.name!r} is leaving the cluster: it spawns no more actors "
                    f"(asked by {sender!r} to spawn {class_name})"
                )
            args = node.codec.decode(args_body)
            if not isinstance(args, list):  # (no node sends them otherwise: bad input)
                why = f"a spawn's arguments are a list, got {type(args).__name__}"
                node.refused("messages", why, reply)
                raise TypeError(why)
            mailbox = None
            if capacity is not None:  # (Bounded says what is wrong with the values)
                mailbox = Bounded(capacity, overflow=overflow)  # type: ignore[arg-type]
            request = _Request(cls, (), name, mailbox, shutdown, supervised)
            ref = request.spawn_in(node.system, tuple(args))
            if supervised:
                self._supervised_by(reply).append(ref)
            answer = node.codec.encode(ref)
        except Exception as error:
            _log.info("node %s: no spawn of %s for %s: %s", node.name, class_name, sender, error)
            self._answer_error(reply, error)
            return
        node.tells.publish(reply, encode((True, msgspec.Raw(answer))))

    def receive_load(self, body: Any, reply: str) -> None:
        """Another node asks whether this one spawns a class, and how many live
        actors it has (``LOAD``). Never raises."""
        node = self._node
        try:
            class_name = _decode_class_name(body)
        except Exception as error:
            node.refused("messages", f"a load question that does not decode: {error}", reply)
            self._answer_error(reply, ValueError("a load question that does not decode"))
            return
        load = (class_name in self.spawnable, node.system.statistics().live_actors)
        node.tells.publish(reply, encode((True, msgspec.Raw(node.codec.encode(list(load))))))

    def _answer_error(self, reply: str, error: BaseException) -> None:
        codec = self._node.codec
        self._node.tells.publish(reply, encode((False, msgspec.Raw(codec.encode_error(error)))))


protect_module(globals())

"""Statistics: frozen snapshots of what an actor, or a whole system, has done.

``ref.statistics()`` and ``system.statistics()`` build these records from counters
the runtime keeps anyway (a few integer additions per turn, none per message on the
fast paths), so asking is cheap and keeping them costs nothing. Each call returns a
new snapshot; the records never change after they are made.

Turn lengths. A *turn* is one stretch of one actor's messages handled without a
yield (at most ``ServingPolicy.batch`` messages). The serving loop reads the trio
clock only every few messages (at least once per 16; after every message once
handlers are slow), so an inline turn's time is known when the readings around it
saw only that actor's messages: ``longest_turn_seconds`` is the longest such
stretch. The system's ``longest_round_seconds`` is exact: the longest the
dispatcher held the trio thread without yielding, whoever's handler it was. A
handler that blocks (a ``time.sleep``) shows in both: in the system's record, and
in the actor's through the turn sampler, a thread that reads every 50 ms whose
message the trio thread handles (``_core/_turn_sampler.py``; under trio's default
clock only).
"""

from __future__ import annotations

import attrs

from ._interrupts import protect_module


@attrs.frozen
class DeadLetterCounts:
    """Dead letters by reason (see :class:`~trio_actors.DeadLetter`).

    Attributes:
        stopped: told to an actor that had stopped or was stopping.
        stranded: left queued when the actor stopped.
        overflow: dropped by a full bounded mailbox.
        unreachable: told to an actor on another node that nothing serves.
        undecodable: a tell from another node this node could not decode.
        refused: a tell to another node that the NATS server refused to carry.
        in_doubt: a tell to another node whose fate is unknown (reason
            ``"in-doubt"``: that node died or was declared down, or the tell was lost
            on the way, before it was acknowledged; as ``node.unconfirmed``).
    """

    stopped: int = 0
    stranded: int = 0
    overflow: int = 0
    unreachable: int = 0
    undecodable: int = 0
    refused: int = 0
    in_doubt: int = 0

    @property
    def total(self) -> int:
        """All dead letters, whatever the reason."""
        return (
            self.stopped
            + self.stranded
            + self.overflow
            + self.unreachable
            + self.undecodable
            + self.refused
            + self.in_doubt
        )


@attrs.frozen
class ActorStatistics:
    """A snapshot of one actor, from :meth:`ActorRef.statistics
    <trio_actors.ActorRef.statistics>`.

    Attributes:
        path: where the actor lives (``system/parent/name``).
        state: its lifecycle state: ``"starting"``, ``"running"``,
            ``"restarting"``, ``"draining"``, ``"stopping"`` or ``"stopped"``.
        mailbox_depth: messages queued now (not counting one being handled, nor
            withdrawn asks and notices that wait to be skipped).
        mailbox_capacity: the bound of a bounded mailbox, or ``None``.
        senders_waiting: calls of ``send`` and ``ask`` waiting for room in a
            full bounded mailbox.
        handled: messages its handlers have taken (answered, failed or not).
        dead_letters: its messages that became dead letters, by reason.
        withdrawn: asks withdrawn and sends cancelled before the actor took
            them, ticks of timers cancelled while queued, and ``Terminated``
            notices withdrawn by ``unwatch``.
        failed_back: messages refused with an exception to their sender: asks
            failed with ``ActorStopped`` or ``MailboxFull``, sends refused, tells
            refused with ``MailboxFull``.
        failures: exceptions from its handlers (and from factories in restarts),
            not counting expected errors.
        expected_errors: messages whose ``receive`` raised one of the actor's
            :attr:`~trio_actors.Actor.expected_errors` (a reply, not a failure).
        restarts: fresh instances made for it by ``Restart`` supervision.
        longest_turn_messages: the most messages it handled in one turn.
        longest_turn_seconds: the longest time one of its turns was seen to
            take: turns of ``async`` handlers are timed exactly, inline turns when
            the serving loop's clock readings isolate them, and a handler that
            blocks the trio thread by the turn sampler (at least the time it was
            seen blocking; see ``open_actor_system(turn_sampling=...)``).
        timers: its timers still active.
    """

    path: str
    state: str
    mailbox_depth: int
    mailbox_capacity: int | None
    senders_waiting: int
    handled: int
    dead_letters: DeadLetterCounts
    withdrawn: int
    failed_back: int
    failures: int
    expected_errors: int
    restarts: int
    longest_turn_messages: int
    longest_turn_seconds: float
    timers: int


@attrs.frozen
class SystemStatistics:
    """A snapshot of a whole actor system, from :meth:`ActorSystem.statistics
    <trio_actors.ActorSystem.statistics>`.

    Attributes:
        live_actors: actors alive now (at every level), not yet stopped.
        spawned: actors spawned since the system opened.
        restarts: restarts of all its actors.
        failures: failures of all its actors (as ``ActorStatistics.failures``).
        expected_errors: expected errors raised by all its actors' handlers.
        dead_letters: all dead letters so far, by reason.
        rounds: dispatcher rounds served (each ends with a yield or a park).
            The dispatcher serves plain handlers; actors whose ``receive`` is
            ``async def`` are served by tasks of their own, so a system of only
            async actors counts no rounds.
        longest_round_messages: the most messages handled in one round.
        longest_round_seconds: the longest trio-clock time the dispatcher ran
            handlers without yielding.
        longest_turn_seconds: the longest turn of any of its actors (as
            ``ActorStatistics.longest_turn_seconds``).
        longest_turn_path: the path of the actor whose turn that was, or ``None``
            before any turn was timed.
        timers: active timers of all its actors.
    """

    live_actors: int
    spawned: int
    restarts: int
    failures: int
    expected_errors: int
    dead_letters: DeadLetterCounts
    rounds: int
    longest_round_messages: int
    longest_round_seconds: float
    longest_turn_seconds: float
    longest_turn_path: str | None
    timers: int


@attrs.frozen
class BadInputCounts:
    """What a node could not use of what arrived from the wire, by kind: each was
    ignored (and logged, rate-limited: ``InputLimits.log_every``), never the end of
    the node. See ``docs/remote.rst``, "What a node tolerates".

    Attributes:
        messages: messages for its actors it could not read (not an envelope, an
            unknown kind, a body of the wrong shape).
        tells: tells whose message it could not decode (a type its cluster does not
            register...); each is also a dead letter ``"undecodable"``.
        replies: replies to its asks, stops and lookups it could not read.
        bounces: answers on its tells' reply subjects it could not read.
        terminations: stop notices of actors it watches it could not read.
        acks: acknowledgements of its tells it could not read.
        heartbeats: heartbeats that were neither empty nor ``bye``.
        announcements: claims and releases of names it could not read.
        advisories: the server's disconnect advisories it could not read.
        lookups: lookups of its names with no valid subject to answer on.
        watches: watches of its actors whose reply subject is not a node's.
        over_limit: input refused because a table it would have grown is full
            (``InputLimits``: peers, names, watches).
        forged: messages whose subject and content disagree -- a node speaking
            for another (a request whose reply subject is not its sender's, an
            answer from another node than the one asked, a claim of a name for
            another node, an advisory of a connection that was not the node's
            user's): on a server with ``trio-actors secure``'s permissions, the
            subject is the sender's proof (``docs/security.rst``).
        monitoring: requests to its statistics service it did not answer: without
            a reply subject, with one it may not answer on (another node's, or --
            where each node has its own user -- not a monitor's of its cluster),
            or beyond what it queues at once (``docs/observing.rst``).
    """

    messages: int = 0
    tells: int = 0
    replies: int = 0
    bounces: int = 0
    terminations: int = 0
    acks: int = 0
    heartbeats: int = 0
    announcements: int = 0
    advisories: int = 0
    lookups: int = 0
    watches: int = 0
    over_limit: int = 0
    forged: int = 0
    monitoring: int = 0

    @property
    def total(self) -> int:
        """All bad input, whatever the kind."""
        return sum(attrs.astuple(self))


@attrs.frozen
class NodeStatistics:
    """A snapshot of a node, from ``system.node.statistics()``
    (:meth:`ClusterNode.statistics <trio_actors.actors.ClusterNode.statistics>`).

    Attributes:
        bad_input: what it could not use of what arrived, by kind.
        peers: other node incarnations in its peer table now (itself included).
        undecodable_bytes: bytes held now by its recent dead letters
            ``"undecodable"`` (at most ``InputLimits.undecodable_bytes``).
        unconfirmed: tells whose fate a lost connection or a node that died left
            unknown (as ``system.node.unconfirmed``).
    """

    bad_input: BadInputCounts
    peers: int
    undecodable_bytes: int
    unconfirmed: int


protect_module(globals())

__all__ = [
    "ActorStatistics",
    "BadInputCounts",
    "DeadLetterCounts",
    "NodeStatistics",
    "SystemStatistics",
]

"""Confirm rounds: what this node waits on from a peer, asked again -- so that every
request ends, whether or not the peer is ever declared down.

A request (an ask, a stop), a watch or a tell can be lost between two nodes that
both stay alive: a NATS server that dies takes what it was routing, while the node
that was connected to it fails over to another server and goes on beating -- it is
never declared down, and waiting for its silence would wait forever. So, every
heartbeat interval, for each peer this node waits on for something sent more than
an interval ago, it asks the peer what it holds: one ``CONFIRM`` message on the
peer's node subject, after everything this node sent it before (one publisher, one
subject: NATS keeps their order), naming

* the requests waiting on it (asks and stops without an answer, by number),
* the watches of its actors it has not yet confirmed (by number),

* the record of this node's tells to it (``_link.py``), the newest message of
  tells sent on it before the round, and the actors whose tells have waited
  longest in its window (by export number),

and the peer answers at once, on the round's reply subject: which of those it
holds; and of the record, having given up the messages sent before the round that
have not come (skipped, ``_taken_in.py``), the skipped ranges, its settled mark
and the marks of the actors named -- never every actor's: an answer names at most
:data:`MAX_NUMBERS` of each, so it stays under 40 kB (19 bytes a mark at most in
msgpack, 9 a number) however many actors the record touched. What the peer sent
before that answer (a reply, a ``Terminated``) arrived before it. So:

==========  ===================  =====================================================
waiting     the peer holds it    the peer does not hold it
==========  ===================  =====================================================
an ask      it goes on waiting   lost on the way, or its answer was: it fails with
                                 :exc:`~trio_actors.ConnectionInterrupted` ("may or
                                 may not have been handled")
a stop      it goes on waiting   sent again (a stop is idempotent)
a watch     confirmed: no more   sent again (a watch is idempotent; of an actor that
            rounds for it        has stopped, answered at once)
tells       acknowledged as      those sent before the round and not received were
            its marks say        lost on the way: given back ``"in-doubt"`` (after a
                                 flush, so that the no-responders answers to them
                                 have come first)
==========  ===================  =====================================================

A round the peer does not answer within an interval (or NATS answers no-responders:
the peer is reconnecting, or dead) leaves everything waiting. After twice
``Cluster.heartbeats_missed`` such rounds in a row, the asks and stops waiting on a
peer that is still up fail with ``ConnectionInterrupted``, and the tells it has not
acknowledged are given back ``"in-doubt"``: it beats, but does not answer. (Twice:
a dead peer is declared down by its silence after ``heartbeats_missed`` beats -- or
by an advisory, at once -- which ends them with the truer ``NodeDown`` first.)

An ask, a stop or a message of tells that NATS answered with no-responders while
its peer was up (the peer is between two connections: its subscriptions are gone
until it is back) was never delivered: it is sent again at the next round (before
the round's question), instead of failing with ``ActorStopped`` for an actor that
did not stop or becoming a dead letter -- as many times as above, then an ask or a
stop fails with ``ConnectionInterrupted`` and the tells are dead letters
``"unreachable"``. (The peer holds the tells that came after such a message until
it comes: ``_taken_in.py``.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Final

import msgspec
import trio

from .._interrupts import protect_module
from ._peers import PeerState
from ._subjects import Peer, encode

if TYPE_CHECKING:
    from .._cluster import Cluster
    from ._link import Link
    from ._node import Node

__all__ = ["MAX_NUMBERS", "Confirmations", "ConfirmAnswer", "ConfirmAsk", "give_up_after"]

MAX_NUMBERS: Final = 1_000
"""Requests (and watches, and actors told) named in one round at most: the oldest
first; the rest wait for the next round. A peer reads at most as many of a round."""

_log = logging.getLogger("trio_actors")

ConfirmAsk = tuple[str, str, list[int], list[int], str, int, list[int]]
"""A ``CONFIRM``'s body: the asking node, its incarnation, its requests and its
watches waiting on the receiver, the record of its tells to it, the newest message
of tells sent on it, and the actors it waits on longest there."""

ConfirmAnswer = tuple[list[int], list[int], int, list[tuple[int, int]], int, list[tuple[int, int]]]
"""The answer to a ``CONFIRM``: the requests and watches held, and of the record
asked about: its start, its skipped ranges, its settled mark and the marks of the
actors asked about (``_taken_in.py``)."""

_Marks = Annotated[list[tuple[int, int]], msgspec.Meta(max_length=MAX_NUMBERS)]
_answer = msgspec.msgpack.Decoder(
    tuple[list[int], list[int], int, list[tuple[int, int]], int, _Marks]
)


def give_up_after(cluster: Cluster) -> int:
    """Rounds in a row a peer that is up may leave unanswered (or serve nothing in)
    before what waits on it fails: twice the beats after which a silent one is
    declared down, so that a dead peer's requests end as ``NodeDown`` first."""
    return 2 * cluster.heartbeats_missed


class Confirmations:
    """This node's confirm rounds (the module docstring says what they are)."""

    __slots__ = ("_in_round", "_node", "_told_before", "_unanswered", "interval")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.interval = node.cluster.heartbeat
        self._in_round: set[Peer] = set()  # (a round with it is under way)
        self._unanswered: dict[Peer, int] = {}  # rounds in a row it did not answer
        # Per link: its sequence at the previous tick -- messages of tells sent an
        # interval ago, so that a round is due for those only.
        self._told_before: dict[Peer, tuple[Link, int]] = {}

    async def run(self) -> None:
        """Start the rounds due, every interval, until cancelled (with the node)."""
        while True:
            await trio.sleep(self.interval)
            self.start_rounds()

    def start_rounds(self) -> None:
        """Start a round with each peer that something waits on since before the
        last interval (and with none a round is under way with). Never a
        checkpoint."""
        node = self._node
        for peer in self._due():
            if peer not in self._in_round and node.peers.state(peer) is PeerState.UP:
                self._in_round.add(peer)
                node.start(self._round, peer)

    def _due(self) -> set[Peer]:
        node = self._node
        since = trio.current_time() - self.interval
        due = {peer for peer, _sent_at in node.requests.waiting_on(before=since)}
        due.update(node.requests.undelivered_peers())
        due.update(node.tells.fates.undelivered_peers())
        due.update(peer for peer, _since in node.watches.unconfirmed(before=since))
        told_before: dict[Peer, tuple[Link, int]] = {}
        for peer, link in node.peers.open_links():
            told_before[peer] = (link, link.sequence)
            previous = self._told_before.get(peer)
            if previous is not None and previous[0] is link and link.waiting_since(previous[1]):
                due.add(peer)
        self._told_before = told_before
        return due

    async def _round(self, peer: Peer) -> None:
        """One round with ``peer``: ask, wait an interval at most, act on the answer.
        A checkpoint."""
        node = self._node
        requests, watches = node.requests, node.watches
        try:
            node.tells.fates.send_undelivered(peer)  # (before the round: it asks about them)
            requests.send_undelivered(peer)  # (after the tells: they were told before)
            asked = requests.numbers_waiting_on(peer)[:MAX_NUMBERS]
            watched = watches.numbers_unconfirmed(peer)[:MAX_NUMBERS]
            node.tells.flush()  # (the tells waiting go first: they are asked about)
            link = node.peers.current_link(peer)
            up_to, record = (0, "") if link is None else (link.sequence, link.record)
            actors = [] if link is None else link.waited_on(MAX_NUMBERS)
            body = encode((node.name, node.incarnation, asked, watched, record, up_to, actors))
            reply = await requests.confirm(peer, body, within=self.interval)
            try:
                answer = _answer.decode(reply or b"")
                held_requests, held_watches, start, skipped, settled, marks = answer
            except Exception as error:  # (none, or not an answer: as if none came)
                if reply is not None:
                    node.refused("replies", error, node.subjects.replies(*peer))
                self._not_answered(peer)
                return
            self._unanswered.pop(peer, None)
            requests.confirmed(asked, set(held_requests), peer)
            watches.confirmed(watched, set(held_watches))
            if link is not None and link.window and not link.closed:
                await node.tells.fates.confirmed(link, start, skipped, settled, marks)
        except Exception as error:  # (a node's task: say it, never end the node)
            _log.warning("node %s: a confirm round with %s failed: %s", node.name, peer, error)
        finally:
            self._in_round.discard(peer)

    def _not_answered(self, peer: Peer) -> None:
        rounds = self._unanswered[peer] = self._unanswered.get(peer, 0) + 1
        if rounds >= give_up_after(self._node.cluster):
            del self._unanswered[peer]
            node, incarnation = peer
            why = (
                f"node {node!r} ({incarnation}) did not confirm it holds the request "
                f"in {rounds} rounds of {self.interval} s (it beats, but does not answer, "
                "or is between two connections)"
            )
            self._node.requests.interrupt(peer, why)
            link = self._node.peers.current_link(peer)
            if link is not None and not link.closed:
                self._node.tells.fates.renew(link, why)

    def forget(self, peer: Peer) -> None:
        """``peer`` is down: its rounds are over."""
        self._unanswered.pop(peer, None)
        self._told_before.pop(peer, None)

    # --- the peer's side --------------------------------------------------------------

    def answer(self, asked: ConfirmAsk, reply: str) -> None:
        """Answer a ``CONFIRM`` from another node (``asked``, parsed by
        ``Frames.envelope``) on ``reply``: what of it this node holds. Never a
        checkpoint."""
        node = self._node
        sender, incarnation, requests, watches, record, up_to, actors = asked
        prefix = reply.rpartition(".")[0]  # (the asker's replies from here: P.r.<n>.<i>.<me>)
        held_requests = node.answers.held(prefix, requests[:MAX_NUMBERS])
        held_watches = node.watches.held(sender, incarnation, watches[:MAX_NUMBERS])
        peer = (sender, incarnation)
        unreachable = node.subjects.unreachable(*peer)
        tells = (
            (0, [], 0, [])
            if not record
            else node.tells.taken.confirm(peer, unreachable, record, up_to, actors[:MAX_NUMBERS])
        )
        answer = msgspec.Raw(encode((held_requests, held_watches, *tells)))
        # (a reply, as any: Frames.reply -- but about the asker's tells, not after
        # this node's held ones: they stay held, the window's bound kept)
        node.tells.publish(reply, encode((True, answer)), ordered=False)


protect_module(globals())

"""Death watch across nodes: both sides.

**The watcher's side.** This node keeps one :class:`_RemoteWatch` per remote actor
watched from here, whoever watches it (watcher cells, and ``wait_stopped`` callers
by a token of their own). The first subscriber sends a ``WATCH`` whose reply
subject is ``P.t.<node>.<incarnation>.<n>``; the watched actor's node answers there
once, when the actor stops (at once if it has), and NATS answers no-responders
there if that node is gone -- or between two connections, if it still beats: then
the watch waits, and a confirm round (``_confirm.py``) sends it again. Every
subscriber then gets one ``Terminated``. Watches of actors on a node declared down
(``_peers.py``) end with ``Terminated(ref, error=NodeDown(...))``. After this
node's connection comes back, the watches are sent again (the server forgot them
with the connection). An actor whose node said it stopped is remembered so in its
remote cell (``RemoteCell.ended``, while this node holds a ref to it): a watch or
``wait_stopped`` made after that is told at once, with the error its node said --
as of a local actor that has stopped -- and sends nothing. (Its node could not
say it again: the number of a stopped actor finds nothing there, ``_exports.py``.)

**The watched side.** A ``WATCH`` of a local actor: its node answers the reply
subject when the actor stops (at once if it has stopped) -- one task per watched
actor, whatever the watchers. What it keeps is bounded: a reply subject must be a
node's termination subject (its node is then a sign of life for the peer table),
each is kept once, at most ``InputLimits.watches`` in all, and those of a node
declared down are dropped with it (nobody is left to tell).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import trio

from .._core._ref import new_ref
from .._core._watch import tell_notice, withdraw_notices
from .._errors import NodeDown, RemoteError
from .._interrupts import protect_module
from ..lifecycle import Terminated
from ._bad_input import Bad
from ._peers import PeerState
from ._subjects import NONE, WATCH, Peer, encode

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ._codec import WireRef
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = ["Watches"]


class _RemoteWatch:
    """This node's watch of one remote actor: who here wants its ``Terminated``
    (watcher cells, and ``wait_stopped`` callers by a token of their own)."""

    __slots__ = ("cell", "confirmed", "number", "since", "subscribers")

    def __init__(self, cell: RemoteCell, number: int) -> None:
        self.cell = cell
        self.number = number
        self.since = trio.current_time()  # (its WATCH was last sent)
        self.confirmed = False  # its node said it holds it (a confirm round)
        self.subscribers: dict[object, Callable[[Terminated], None]] = {}


class Watches:
    """One node's watches across nodes.

    Attributes:
        watching: remote actors watched from here, by wire.
        watched: local actors watched from other nodes, by export number: the
            termination subjects to answer when they stop, each with the node
            that watches.
        watched_count: the termination subjects in :attr:`watched`, all together.
    """

    __slots__ = (
        "_all_reported",
        "_by_number",
        "_count",
        "_held",
        "_node",
        "watched",
        "watched_count",
        "watching",
    )

    def __init__(self, node: Node) -> None:
        self._node = node
        self.watching: dict[WireRef, _RemoteWatch] = {}
        self._by_number: dict[int, _RemoteWatch] = {}
        self._count = itertools.count(1)
        self.watched: dict[int, dict[str, Peer]] = {}
        self.watched_count = 0
        self._held: set[str] = set()  # (the subjects in watched: a confirm round's answer)
        self._all_reported: trio.Event | None = None  # (leave() waits for it)

    @property
    def subject(self) -> str:
        """The subjects of the stops of actors watched from here."""
        node = self._node
        return f"{node.subjects.prefix}.t.{node.name}.{node.incarnation}.*.*"

    # --- the watcher's side -----------------------------------------------------

    def _send_watch(self, remote: _RemoteWatch) -> None:
        node = self._node
        watched = node.subjects.terminations(node.name, node.incarnation, remote.cell.node_name)
        remote.since = trio.current_time()
        remote.confirmed = False
        node.tells.send(remote.cell, WATCH, NONE, f"{watched}.{remote.number}")

    def _subscribe(
        self, cell: RemoteCell, key: object, callback: Callable[[Terminated], None]
    ) -> None:
        remote = self.watching.get(cell.wire)
        if remote is None:
            remote = _RemoteWatch(cell, next(self._count))
            self.watching[cell.wire] = remote
            self._by_number[remote.number] = remote
            self._send_watch(remote)
        remote.subscribers[key] = callback

    def watch(self, cell: RemoteCell, watcher: ActorCell) -> None:
        """``watcher`` gets one ``Terminated`` when the remote actor stops (or its
        node dies). Never a checkpoint; idempotent."""

        def deliver(notice: Terminated) -> None:
            if watcher.watching is not None:
                watcher.watching.discard(cell)
            if watcher.accepting:  # (a watcher that stopped first gets nothing)
                tell_notice(watcher, notice)

        ended = cell.ended
        if ended is not None:  # (known to have stopped: on the next scheduler pass)
            notice = Terminated(new_ref(cell), ended[0])

            def deliver_soon() -> None:
                # (the watcher is likely in its own turn, and is watching it from
                # when this returns: unless it unwatched meanwhile, or stopped)
                if watcher.watching is not None and cell in watcher.watching:
                    deliver(notice)

            self._node.system.trio_token.run_sync_soon(deliver_soon)
            return
        self._subscribe(cell, watcher, deliver)

    def unwatch(self, cell: RemoteCell, watcher: ActorCell) -> None:
        """Withdraw ``watcher``'s watch, and a ``Terminated`` of it already queued."""
        self.forget_watcher(cell, watcher)
        ref = new_ref(cell)
        withdraw_notices(watcher, lambda item: isinstance(item, Terminated) and item.ref == ref)

    def forget_watcher(self, cell: RemoteCell, key: object) -> None:
        """Withdraw one subscriber's watch of ``cell``; the last one gone, this node
        forgets the watch (the other node keeps its side until the actor stops:
        then this node finds nobody to tell)."""
        remote = self.watching.get(cell.wire)
        if remote is None:
            return
        remote.subscribers.pop(key, None)
        if not remote.subscribers:
            del self.watching[cell.wire]
            del self._by_number[remote.number]

    async def wait_terminated(self, cell: RemoteCell) -> Terminated:
        """``wait_stopped`` of a remote actor. A checkpoint."""
        self._node.check_thread("wait_stopped")
        ended = cell.ended
        if ended is not None:  # (known to have stopped: nothing to ask)
            await trio.lowlevel.checkpoint()
            return Terminated(new_ref(cell), ended[0])
        done = trio.Event()
        outcome: list[Terminated] = []
        key = object()

        def deliver(notice: Terminated) -> None:
            outcome.append(notice)
            done.set()

        self._subscribe(cell, key, deliver)
        try:
            await done.wait()
        finally:
            self.forget_watcher(cell, key)
        return outcome[0]

    def terminated(self, remote: _RemoteWatch, error: BaseException | None) -> None:
        """The remote actor has stopped: tell every subscriber once, then forget."""
        if self.watching.pop(remote.cell.wire, None) is None:
            return
        del self._by_number[remote.number]
        notice = Terminated(new_ref(remote.cell), error)
        for deliver in list(remote.subscribers.values()):
            deliver(notice)

    def on_terminated(self, termination: tuple[int, bool, bytes | None, str]) -> None:
        """A watched actor's node (``watched``, its subject's) says it stopped (or
        NATS: nothing serves it -- the node is gone, or, if it still beats, between
        two connections: then the watch was never delivered, and waits for a
        confirm round to send it again); parsed: ``Frames.termination``."""
        number, no_responders, encoded, watched = termination
        remote = self._by_number.get(number)
        if remote is None:
            return
        if watched != remote.cell.node_name:
            # (only the watched actor's node may answer: it alone may publish there)
            self._node.refused("forged", f"a stop reported by {watched!r}", self.subject)
            return
        if no_responders:
            if self._node.peers.state(remote.cell.peer) is PeerState.UP:
                return  # (between two connections: a confirm round sends it again)
            node, incarnation = remote.cell.peer
            error: BaseException | None = NodeDown(
                f"node {node!r} ({incarnation}) cannot be reached: nothing serves it"
            )
        else:
            try:
                error = None if encoded is None else self._node.codec.decode_error(encoded)
            except Exception as undecodable:  # (its error holds what this node cannot read)
                error = RemoteError("undecodable", str(undecodable))
            remote.cell.ended = (error,)  # (its node said so: remembered, see above)
        self.terminated(remote, error)

    def waiting_on(self) -> Iterator[tuple[Peer, float]]:
        """The peers whose actors are watched, each with when the watch began."""
        for remote in list(self.watching.values()):
            yield remote.cell.peer, remote.since

    def peer_down(self, peer: Peer, said: str) -> None:
        """``peer`` is down: the watches of its actors end with ``NodeDown``, and
        its watches of actors here are dropped (nobody is left to tell)."""
        for remote in [w for w in self.watching.values() if w.cell.peer == peer]:
            self.terminated(remote, NodeDown(said))
        # (the instances of its children stop now: their stop is still reported to
        # it, in case it is down only here -- their anchors then hear of it)
        # (by number: one that has stopped meanwhile is no longer among the exports)
        instances = {cell.export_number for cell in self._node.spawning.supervised_of(peer)}
        for number, subjects in self.watched.items():
            if number in instances:
                continue
            for subject in [s for s, watcher in subjects.items() if watcher == peer]:
                del subjects[subject]
                self._held.discard(subject)
                self.watched_count -= 1

    def refused(self, peer: Peer, error: BaseException) -> int:
        """The server refused this node's messages to ``peer``'s actors: the watches
        of its actors not yet confirmed (their ``WATCH`` may never have gone) end
        with ``error``; return how many."""
        ended = [w for w in self.watching.values() if w.cell.peer == peer and not w.confirmed]
        for remote in ended:
            self.terminated(remote, error)
        return len(ended)

    def unconfirmed(self, before: float) -> Iterator[tuple[Peer, float]]:
        """The peers with watches of their actors not yet confirmed, sent before
        ``before`` (a confirm round asks about them)."""
        for remote in self.watching.values():
            if not remote.confirmed and remote.since <= before:
                yield remote.cell.peer, remote.since

    def numbers_unconfirmed(self, peer: Peer) -> list[int]:
        """The watches of ``peer``'s actors not yet confirmed, oldest first."""
        return [
            number
            for number, remote in self._by_number.items()
            if not remote.confirmed and remote.cell.peer == peer
        ]

    def confirmed(self, asked: list[int], held: set[int]) -> None:
        """A confirm round's answer: of the watches ``asked`` about, the other node
        holds those in ``held``; the others (lost on the way, or their answer was)
        are sent again -- of an actor that has stopped, answered at once."""
        for number in asked:
            remote = self._by_number.get(number)
            if remote is None:
                continue  # (ended meanwhile)
            if number in held:
                remote.confirmed = True
            else:
                self._send_watch(remote)

    def send_again(self) -> None:
        """This node's connection is back: the server forgot the watches with the
        old one; the watched nodes hear them again (a watch already there is kept
        once: its answer comes once)."""
        for remote in self.watching.values():
            self._send_watch(remote)

    # --- the watched side ---------------------------------------------------------

    def receive_watch(self, cell: ActorCell | None, number: int, reply: str) -> None:
        """Another node watches a local actor: answer ``reply`` when it stops (at
        once if it has: without an error, as the number of a stopped actor finds
        nothing -- unless it is an instance of that node's child, which this node
        still holds, ``Spawning.stopped_instance``: then with its error). One task
        per watched actor, whatever the watchers. A
        reply subject that is not a node's, or one more than the watches this
        node keeps, or from a node the full peer table has no room for, is
        counted and ignored."""
        node = self._node
        watcher = node.frames.watcher(reply)
        if isinstance(watcher, Bad):
            node.bad_input.count(watcher, node.subject)
            return
        if cell is None:  # (stopped, or never here: _exports.py)
            cell = node.spawning.stopped_instance(watcher, number)
            if cell is None:
                node.tells.publish(reply, encode(None))
                return
        subjects = self.watched.get(number)
        if subjects is not None and reply in subjects:
            return  # (sent again after a reconnect: kept once, answered once)
        if self.watched_count >= node.cluster.limits.watches:
            node.refused("over_limit", "more watches than InputLimits.watches", node.subject)
            return
        if not node.peers.claim(watcher):
            node.refused("over_limit", "a watch from a node the peer table has no room for", reply)
            return
        self.watched_count += 1
        self._held.add(reply)
        if subjects is not None:
            subjects[reply] = watcher
            return
        self.watched[number] = {reply: watcher}
        node.start(self._report_stop, cell, number)

    def held(self, node: str, incarnation: str, numbers: list[int]) -> list[int]:
        """Of ``node``'s watches ``numbers``, those of actors here that will answer
        when they stop (a confirm round's question)."""
        prefix = self._node.subjects.terminations(node, incarnation, self._node.name)
        return [number for number in numbers if f"{prefix}.{number}" in self._held]

    async def _report_stop(self, cell: ActorCell, number: int) -> None:
        try:
            terminated = await new_ref(cell).wait_stopped()
            error = terminated.error
            if error is None:  # (an instance of a child stopped by this node's exit)
                error = self._node.spawning.left_behind(cell)
            answer = encode(None if error is None else self._node.codec.encode_error(error))
            for subject in list(self.watched.get(number, ())):
                self._node.tells.publish(subject, answer)
        finally:
            reported = self.watched.pop(number, {})
            self.watched_count -= len(reported)
            self._held.difference_update(reported)
            if not self.watched and self._all_reported is not None:
                self._all_reported.set()

    async def all_reported(self, within: float) -> None:
        """Wait until the stop of every local actor watched from other nodes is
        reported to them, at most ``within`` seconds (a leaving node's actors have
        stopped: their watchers hear an ordinary stop, not the node's ``bye``). A
        checkpoint if a report is due."""
        if self.watched:
            self._all_reported = trio.Event()
            with trio.move_on_after(within):
                await self._all_reported.wait()


protect_module(globals())

"""The other nodes as this node knows them: one state per peer, one table.

This file is the whole state machine of a peer's liveness (in the manner of h11's
``_state.py`` and of the actor lifecycle, ``_core/_state.py``): the states, the
events, and the table of legal transitions. A *peer* is one incarnation of another
node, ``(name, incarnation)``. Only :class:`Peers` changes a peer's state, and only
through :func:`advance`, so the table is the truth; an illegal pair raises
:exc:`PeerStateError` naming the peer, the state and the event, and changes
nothing.

::

    UNKNOWN --told--> EXPECTED --heartbeat, claim--> UP
       |                  |                           |
       +--heartbeat, claim-------------------------> UP
       |                  |                           |
       +------down--------+-----------down-----------+--> DOWN --accounted--> UNKNOWN
                                                           |
                                 DOWN --heartbeat, claim--> UP;  DOWN --told--> EXPECTED

* ``UNKNOWN``: not in the table -- never heard of, or declared down and its tells
  accounted (forgotten: heard again, it is met again).
* ``EXPECTED``: this node has a ref to it (a :class:`~._tells.Link` for its tells)
  and has not heard from it: watched for silence from the moment the link was
  made, so a ref to a node already gone is declared down after
  ``heartbeats_missed`` beats, and its link goes with it.
* ``UP``: heard from (a heartbeat, or a claim of a name): the two nodes have
  exchanged their names (``_names.py``); watched for silence from its last
  heartbeat.
* ``DOWN``: declared down -- silent too long, said ``bye``, or its connection
  ended (the server's advisory). Its link is closed (tells after this go on a new
  record) and its tells are being accounted (``_tells.py``: a flush, then what it
  had neither acknowledged nor bounced is given back in doubt). A peer with no link
  is accounted at once. Heard again, it was only *declared* down: it is ``UP``
  (the asks already failed stay failed); told again, it gets a new link.

The events: ``HEARTBEAT`` (its heartbeat came: the silence clock restarts),
``CLAIM`` (another sign of life -- a name's claim, tells or a watch from it: the
clock starts if it was not running), ``TOLD`` (this node needs a link to it and has
none open), ``DOWN`` (declared down) and ``ACCOUNTED`` (the lost tells of its closed
link are counted).

What a transition *does* beyond the state is the writer's too, and nothing else
writes it: the silence clock (:attr:`PeerRecord.heard`), the link
(:attr:`PeerRecord.link`, and :meth:`~._link.Link.close` when it closes),
and the node's reactions -- names exchanged on entering ``UP``
(``on_met``); on ``DOWN``, every request and watch waiting on the peer ended with
``NodeDown``, its names freed, and its closed link's tells counted (``on_down``).

**The members are the peers in ``UP``** (``_members.py``): entering ``UP`` from any
other state is a member's joining (:attr:`PeerRecord.since` is when), and leaving
it -- ``DOWN`` -- its leaving (``bye``) or its being declared down (silence, an
advisory): the table tells the members' followers at those two transitions
(``on_joined``, ``on_gone``), so the members can never disagree with the table.
This node is in ``UP`` from its start (:meth:`Peers.start`: its own first
``HEARTBEAT``, before it hears it on the wire).

This node itself is a peer too: it hears its own heartbeats, and is watched for
silence like the others (it never exchanges names with itself). Silence is
counted in the time this node itself ran: after a stall of its own (its event
loop blocked, the process stopped), its heartbeat wakes late and every silence
clock moves on by the stall (:meth:`Peers.stalled`), so that the heartbeats still
unread are not taken for silence -- a node never declares the others, or itself,
down because it did not run.

**The table is bounded** (``InputLimits.peers``): anyone who may publish on the
cluster's subjects can make up peers, so a ``HEARTBEAT`` or a ``CLAIM`` of a peer
not in the table while it is full is *refused* -- no transition, nothing changes,
and the caller counts it (``NodeStatistics.bad_input.over_limit``). A made-up peer
is silent after its forger stops: it is declared down after ``heartbeats_missed``
beats and, with no link, forgotten -- and everything kept for it goes with it (its
names, the watches and acknowledgements it asked for: ``on_down``). ``TOLD`` is never
refused: it is this node's own need of a link.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Final, Literal

import trio

from .._errors import ActorError
from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._link import Link
    from ._subjects import Peer

__all__ = [
    "TRANSITIONS",
    "GoneReason",
    "PeerEvent",
    "PeerRecord",
    "PeerState",
    "PeerStateError",
    "Peers",
    "advance",
]


class PeerState(enum.Enum):
    """Where another node is, as this node knows it. See the module docstring."""

    __hash__ = object.__hash__  # (singletons: hashed by identity, as ActorState)

    UNKNOWN = "unknown"
    EXPECTED = "expected"
    UP = "up"
    DOWN = "down"


class PeerEvent(enum.Enum):
    """What this node learns of a peer."""

    __hash__ = object.__hash__

    HEARTBEAT = "heartbeat"  # its heartbeat came
    CLAIM = "claim"  # it claimed or released a name (a sign of life)
    TOLD = "told"  # this node makes a link for its tells to it (it has none open)
    DOWN = "down"  # declared down: silence, its bye, or its connection's end
    ACCOUNTED = "accounted"  # the tells of its closed link are counted


S = PeerState
E = PeerEvent

TRANSITIONS: Final[Mapping[tuple[PeerState, PeerEvent], PeerState]] = {
    (S.UNKNOWN, E.HEARTBEAT): S.UP,
    (S.UNKNOWN, E.CLAIM): S.UP,
    (S.UNKNOWN, E.TOLD): S.EXPECTED,
    (S.UNKNOWN, E.DOWN): S.DOWN,  # (a request or watch waits on it: they end)
    (S.EXPECTED, E.HEARTBEAT): S.UP,
    (S.EXPECTED, E.CLAIM): S.UP,
    (S.EXPECTED, E.DOWN): S.DOWN,
    (S.UP, E.HEARTBEAT): S.UP,
    (S.UP, E.CLAIM): S.UP,
    (S.UP, E.TOLD): S.UP,  # (heard from, told for the first time since)
    (S.UP, E.DOWN): S.DOWN,
    (S.UP, E.ACCOUNTED): S.UP,  # (wrongly declared down, heard again, then counted)
    (S.DOWN, E.HEARTBEAT): S.UP,  # (only declared down: alive)
    (S.DOWN, E.CLAIM): S.UP,
    (S.DOWN, E.TOLD): S.EXPECTED,
    (S.DOWN, E.DOWN): S.DOWN,  # (again: what waits on it since ends too)
    (S.DOWN, E.ACCOUNTED): S.UNKNOWN,
}
"""Every legal transition, ``(state, event) -> new state``; nothing else is legal:
``TOLD`` while ``EXPECTED`` (its link is open) and ``ACCOUNTED`` of a link that is
not the peer's (``UNKNOWN``, ``EXPECTED``: a new link replaced it) are errors."""

del S, E


class PeerStateError(ActorError):
    """An illegal transition of a peer's state: a bug of this node, never the
    network's doing (the network can only cause legal events)."""


class PeerRecord:
    """One peer in the table: its state, its silence clock and its link."""

    __slots__ = ("heard", "link", "peer", "since", "state")

    def __init__(self, peer: Peer, state: PeerState = PeerState.UNKNOWN) -> None:
        self.peer = peer
        self.state = state
        # When its silence clock started (its last heartbeat, or the first sign of
        # it); ``None`` while it is not watched for silence (UNKNOWN, DOWN).
        self.heard: float | None = None
        # This node's tells to it: the open link, or the closed one whose tells are
        # being accounted (until ACCOUNTED), or ``None``.
        self.link: Link | None = None
        # When it last entered UP (joined, as a member); ``None`` while not UP.
        self.since: float | None = None

    def __repr__(self) -> str:
        node, incarnation = self.peer
        return f"<peer {node!r} ({incarnation}) {self.state.name}>"


def advance(record: PeerRecord, event: PeerEvent) -> PeerState:
    """Apply ``event`` to ``record``'s state and return the new state.

    Raises:
        PeerStateError: ``(record.state, event)`` is not in :data:`TRANSITIONS`;
            the state is left unchanged and the message names the peer, the state
            and the event.
    """
    try:
        new_state = TRANSITIONS[record.state, event]
    except KeyError:
        node, incarnation = record.peer
        raise PeerStateError(
            f"illegal transition of peer {node!r} ({incarnation}): "
            f"event {event.name} in state {record.state.name}"
        ) from None
    record.state = new_state
    return new_state


OnDown = Callable[["Peer", str, "int | None", "Link | None"], None]
"""``on_down(peer, said, sent_up_to, closed)``: end what waits on ``peer`` (the
requests up to number ``sent_up_to``, if given), and account the tells of
``closed`` (the link that just closed), if any."""

GoneReason = Literal["left", "silence", "advisory"]
"""How a peer in ``UP`` came to be ``DOWN``: its ``bye``, its silence, or the
server's disconnect advisory."""


def _ignore(*_args: object) -> None:
    pass


class Peers:
    """The peer table: the one writer of every peer's state (see the module
    docstring). Its methods are the events; each applies one row of the table
    and does what that transition does."""

    __slots__ = (
        "_new_link",
        "_on_down",
        "_on_gone",
        "_on_joined",
        "_on_met",
        "_records",
        "_schedule",
        "_stalls",
        "_why_silent",
        "limit",
        "me",
        "silence",
    )

    def __init__(
        self,
        me: Peer,
        *,
        heartbeat: float,
        heartbeats_missed: int,
        limit: int,
        new_link: Callable[[], Link],
        on_met: Callable[[Peer], None],
        on_down: OnDown,
        schedule: Callable[..., object],
        on_joined: Callable[[PeerRecord], None] = _ignore,
        on_gone: Callable[[PeerRecord, GoneReason], None] = _ignore,
    ) -> None:
        self.me = me
        self.limit = limit  # (peers in the table at most, but for this node's own links)
        self.silence = heartbeats_missed * heartbeat  # (seconds silent, and it is down)
        self._why_silent = f"not heard from for {heartbeats_missed} heartbeats"
        self._new_link = new_link  # (a new record of this node's tells: _tells.py)
        self._on_met = on_met
        self._on_down = on_down
        self._on_joined = on_joined  # (a member joined: entered UP)
        self._on_gone = on_gone  # (a member left UP: before on_down)
        self._schedule = schedule  # (runs a callback on the next scheduler pass)
        self._records: dict[Peer, PeerRecord] = {}
        # This node's own recent stalls, (when it woke, seconds it did not run):
        # silence is judged in the time this node ran (see stalled()).
        self._stalls: list[tuple[float, float]] = []

    # --- reading ------------------------------------------------------------------

    def state(self, peer: Peer) -> PeerState:
        record = self._records.get(peer)
        return PeerState.UNKNOWN if record is None else record.state

    def count(self) -> int:
        """The peers in the table now (this node included)."""
        return len(self._records)

    def record(self, peer: Peer) -> PeerRecord | None:
        return self._records.get(peer)

    def current_link(self, peer: Peer) -> Link | None:
        """The link of ``peer``: open, or closed with its tells being accounted."""
        record = self._records.get(peer)
        return None if record is None else record.link

    def up(self) -> Iterator[PeerRecord]:
        """The peers in ``UP`` (this node's members: ``_members.py``)."""
        for record in self._records.values():
            if record.state is PeerState.UP:
                yield record

    def open_links(self) -> Iterator[tuple[Peer, Link]]:
        """The peers that are up with the open link of this node's tells to them."""
        for record in list(self._records.values()):
            link = record.link
            if record.state is PeerState.UP and link is not None and not link.closed:
                yield record.peer, link

    def silent(self, peer: Peer) -> bool:
        """Whether ``peer`` has been silent too long (checked now, between beats):
        if so, it is declared down on the next scheduler pass (the caller may be a
        plain handler in its turn: the ``Terminated`` of watches wait until then)."""
        record = self._records.get(peer)
        heard = None if record is None else record.heard
        if record is None or heard is None or trio.current_time() - heard <= self.silence:
            return False
        record.heard = None  # (its clock stops: once is enough, down is on its way)
        self._schedule(self.down, peer, self._why_silent)
        return True

    # --- the events -----------------------------------------------------------------

    def _apply(self, peer: Peer, event: PeerEvent) -> tuple[PeerRecord, PeerState]:
        """Apply ``event`` to ``peer``: (its record, the state it was in). A record
        that ends UNKNOWN leaves the table."""
        record = self._records.get(peer)
        if record is None:
            record = PeerRecord(peer)
        before = record.state
        after = advance(record, event)
        if after is PeerState.UNKNOWN:
            self._records.pop(peer, None)
        else:
            self._records[peer] = record
        return record, before

    def _met(self, record: PeerRecord, before: PeerState) -> None:
        if before is PeerState.UP:
            return
        record.since = trio.current_time()
        self._on_joined(record)  # (a member now: this node too)
        if record.peer != self.me:
            self._on_met(record.peer)  # (new to this node, or back: names exchanged)

    def start(self) -> None:
        """This node opens: it is up, and a member, from now (its own first
        ``HEARTBEAT``, applied before it hears it on the wire; its silence clock
        starts now)."""
        self.heartbeat(self.me)

    def _full(self, peer: Peer) -> bool:
        """Whether an event from the wire about ``peer`` is refused: it is not in
        the table, and the table is full."""
        records = self._records
        return len(records) >= self.limit and peer not in records

    def heartbeat(self, peer: Peer) -> bool:
        """``peer``'s heartbeat came. Return ``False`` if it was refused (the
        table is full: nothing changed)."""
        if self._full(peer):
            return False
        record, before = self._apply(peer, PeerEvent.HEARTBEAT)
        record.heard = trio.current_time()
        self._met(record, before)
        return True

    def claim(self, peer: Peer) -> bool:
        """A sign of life from ``peer`` other than a heartbeat (a name's claim,
        tells or a watch from it): met, and watched for silence from now, if it was
        not already. Return ``False`` if it was refused (the table is full:
        nothing changed)."""
        if self._full(peer):
            return False
        record, before = self._apply(peer, PeerEvent.CLAIM)
        if record.heard is None:
            record.heard = trio.current_time()
        self._met(record, before)
        return True

    def link_to(self, peer: Peer) -> Link:
        """The record of this node's tells to ``peer``: a new one (``TOLD``) if it
        has none open -- none yet, or the last was closed when ``peer`` was
        declared down (wrongly, if it is told again: what is told from now is
        accounted for if it really dies). A peer not heard from yet is watched for
        silence from now: one that never speaks (a ref to a node already gone) is
        declared down after ``heartbeats_missed`` beats, and its link goes with it."""
        record = self._records.get(peer)
        if record is not None and record.link is not None and not record.link.closed:
            return record.link
        record, _before = self._apply(peer, PeerEvent.TOLD)
        link = record.link = self._new_link()
        if record.heard is None:
            record.heard = trio.current_time()
        return link

    def down(
        self,
        peer: Peer,
        why: str,
        *,
        sent_up_to: int | None = None,
        reason: GoneReason = "silence",
    ) -> None:
        """``peer`` is down (``why``: how this node knows; ``reason``: its kind,
        which the members' followers are told if it was up): its open link closes,
        and what waits on it ends (``on_down``); a peer with no link to account is
        forgotten at once."""
        record, before = self._apply(peer, PeerEvent.DOWN)
        record.heard = None
        if before is PeerState.UP:
            self._on_gone(record, reason)
            record.since = None
        link = record.link
        closed: Link | None = None
        if link is not None and not link.closed:
            link.close()
            closed = link
        if link is None:
            self._apply(peer, PeerEvent.ACCOUNTED)  # (nothing to account: forgotten)
        node, incarnation = peer
        self._on_down(peer, f"node {node!r} ({incarnation}) is down: {why}", sent_up_to, closed)

    def accounted(self, peer: Peer, link: Link) -> None:
        """The tells of ``link`` (closed when ``peer`` went down) are counted: the
        peer forgets it, unless a newer link replaced it (then nothing changes)."""
        record = self._records.get(peer)
        if record is None or record.link is not link:
            return  # (a newer link, or none: that one's own end will come)
        self._apply(peer, PeerEvent.ACCOUNTED)
        record.link = None

    def stalled(self, seconds: float) -> None:
        """This node itself did not run for ``seconds`` (its heartbeat woke that
        late: its event loop was blocked, or the process stopped). What the others
        sent meanwhile is still unread, so their silence is judged in the time this
        node ran: every silence clock moves on by ``seconds``, and the waits that
        began before are credited as much (:meth:`check`). A peer really silent is
        still declared down, as much later as the stall lasted."""
        now = trio.current_time()
        for record in self._records.values():
            if record.heard is not None:
                record.heard = min(now, record.heard + seconds)
        horizon = now - 4 * self.silence  # (older stalls: no wait is judged by them)
        self._stalls = [stall for stall in self._stalls if stall[0] > horizon]
        self._stalls.append((now, seconds))

    def _ran_since(self, since: float) -> float:
        """``since`` moved on by the stalls of this node that ended after it."""
        return since + sum(seconds for woke, seconds in self._stalls if woke > since)

    def check(self, waiting: Iterable[tuple[Peer, float]]) -> None:
        """Declare down every peer that has been silent too long: each one that
        something ``waiting`` waits on (since the time given, if never heard), then
        any heard before (also one nothing here waits on: its names). Silence is
        counted in the time this node ran (:meth:`stalled`)."""
        now = trio.current_time()
        why = self._why_silent
        for peer, since in waiting:
            record = self._records.get(peer)
            since = self._ran_since(since) if self._stalls else since
            heard = since if record is None or record.heard is None else record.heard
            if now - max(heard, since) > self.silence:
                self.down(peer, why)
        for record in list(self._records.values()):
            if record.heard is not None and now - record.heard > self.silence:
                self.down(record.peer, why)


protect_module(globals())

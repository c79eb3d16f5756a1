"""The peer table (``remote/_peers.py``): every legal transition, every illegal pair
refused, and what its one writer does on each event from each state."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors.remote._link import Link
from trio_actors.remote._peers import (
    TRANSITIONS,
    PeerEvent,
    PeerRecord,
    Peers,
    PeerState,
    PeerStateError,
    advance,
)

S = PeerState
E = PeerEvent
PEER = ("b", "0123456789ab")
ME = ("a", "ba9876543210")


# --- the table --------------------------------------------------------------------


@pytest.mark.parametrize(("state", "event"), list(TRANSITIONS), ids=str)
def test_a_legal_transition_moves_to_the_table_state(state: PeerState, event: PeerEvent) -> None:
    record = PeerRecord(PEER, state)
    assert advance(record, event) is TRANSITIONS[state, event]
    assert record.state is TRANSITIONS[state, event]


ILLEGAL = [pair for pair in itertools.product(PeerState, PeerEvent) if pair not in TRANSITIONS]


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=str)
def test_an_illegal_transition_names_peer_state_and_event_and_changes_nothing(
    state: PeerState, event: PeerEvent
) -> None:
    record = PeerRecord(PEER, state)
    with pytest.raises(PeerStateError) as caught:
        advance(record, event)
    message = str(caught.value)
    assert "'b' (0123456789ab)" in message
    assert state.name in message
    assert event.name in message
    assert record.state is state


def test_the_illegal_pairs_are_exactly_those_that_would_be_bugs() -> None:
    assert set(ILLEGAL) == {
        (S.UNKNOWN, E.ACCOUNTED),  # (nothing to account: no link)
        (S.EXPECTED, E.TOLD),  # (its link is open)
        (S.EXPECTED, E.ACCOUNTED),  # (its link is open: a newer one than any closed)
    }


def test_any_peer_can_be_declared_down_heard_again_and_forgotten() -> None:
    assert {s for (s, e) in TRANSITIONS if e is E.DOWN} == set(PeerState)
    assert all(TRANSITIONS[s, E.DOWN] is S.DOWN for s in PeerState)
    assert all(TRANSITIONS[s, E.HEARTBEAT] is S.UP for s in PeerState)
    assert all(TRANSITIONS[s, E.CLAIM] is S.UP for s in PeerState)
    assert [s for (s, e), to in TRANSITIONS.items() if to is S.UNKNOWN] == [S.DOWN]


def test_the_states_and_events_have_stable_values() -> None:
    assert [s.value for s in PeerState] == ["unknown", "expected", "up", "down"]
    assert [e.value for e in PeerEvent] == ["heartbeat", "claim", "told", "down", "accounted"]


# --- the writer ---------------------------------------------------------------------


class Table:
    """A peer table with its reactions recorded."""

    def __init__(self) -> None:
        self.links = 0
        self.met: list[Any] = []
        self.down: list[tuple[Any, str, int | None, Link | None]] = []
        self.scheduled: list[tuple[Any, ...]] = []
        self.joined: list[Any] = []  # (the members' reactions: _members.py)
        self.gone: list[tuple[Any, str]] = []
        self.peers = Peers(
            ME,
            heartbeat=1.0,
            heartbeats_missed=3,
            limit=1_024,
            new_link=self.new_link,
            on_met=self.met.append,
            on_down=lambda *args: self.down.append(args),
            schedule=lambda *args: self.scheduled.append(args),
            on_joined=lambda record: self.joined.append(record.peer),
            on_gone=lambda record, reason: self.gone.append((record.peer, reason)),
        )

    def new_link(self) -> Link:
        self.links += 1
        return Link(str(self.links))

    def put(self, state: PeerState) -> None:
        """Bring ``PEER`` to ``state`` by the table's own events."""
        peers = self.peers
        if state is S.EXPECTED:
            peers.link_to(PEER)
        elif state is S.UP:
            peers.heartbeat(PEER)
        elif state is S.DOWN:
            peers.link_to(PEER)
            peers.down(PEER, "for the test")  # (its link is being accounted)
        assert peers.state(PEER) is state
        self.met.clear()
        self.down.clear()
        self.joined.clear()
        self.gone.clear()


def account_current(table: Table) -> None:
    link = table.peers.current_link(PEER)
    table.peers.accounted(PEER, link if link is not None else Link("0"))


EVENTS = {
    E.HEARTBEAT: lambda table: table.peers.heartbeat(PEER),
    E.CLAIM: lambda table: table.peers.claim(PEER),
    E.TOLD: lambda table: table.peers.link_to(PEER),
    E.DOWN: lambda table: table.peers.down(PEER, "for the test"),
    E.ACCOUNTED: account_current,
}

WRITER = {  # (state, event) -> state after, or the error (the state unchanged)
    (S.UNKNOWN, E.HEARTBEAT): S.UP,
    (S.UNKNOWN, E.CLAIM): S.UP,
    (S.UNKNOWN, E.TOLD): S.EXPECTED,
    (S.UNKNOWN, E.DOWN): S.UNKNOWN,  # (down, with no link to account: forgotten)
    (S.UNKNOWN, E.ACCOUNTED): S.UNKNOWN,  # (not its link: nothing to do)
    (S.EXPECTED, E.HEARTBEAT): S.UP,
    (S.EXPECTED, E.CLAIM): S.UP,
    (S.EXPECTED, E.TOLD): S.EXPECTED,  # (its open link: no event)
    (S.EXPECTED, E.DOWN): S.DOWN,
    (S.EXPECTED, E.ACCOUNTED): PeerStateError,  # (its link is open: a bug)
    (S.UP, E.HEARTBEAT): S.UP,
    (S.UP, E.CLAIM): S.UP,
    (S.UP, E.TOLD): S.UP,
    (S.UP, E.DOWN): S.UNKNOWN,  # (never told: nothing to account)
    (S.UP, E.ACCOUNTED): S.UP,  # (no link: not its link)
    (S.DOWN, E.HEARTBEAT): S.UP,
    (S.DOWN, E.CLAIM): S.UP,
    (S.DOWN, E.TOLD): S.EXPECTED,
    (S.DOWN, E.DOWN): S.DOWN,
    (S.DOWN, E.ACCOUNTED): S.UNKNOWN,
}


def test_the_writer_is_tested_for_every_state_and_event() -> None:
    assert set(WRITER) == set(itertools.product(PeerState, PeerEvent))


@pytest.mark.parametrize(("state", "event"), list(WRITER), ids=str)
async def test_each_event_from_each_state_through_the_writer(
    state: PeerState, event: PeerEvent
) -> None:
    table = Table()
    table.put(state)
    outcome = WRITER[state, event]
    if outcome is PeerStateError:
        with pytest.raises(PeerStateError, match=f"{event.name} in state {state.name}"):
            EVENTS[event](table)
        assert table.peers.state(PEER) is state
        return
    EVENTS[event](table)
    after = table.peers.state(PEER)
    assert after is outcome
    record = table.peers.record(PEER)
    # The silence clock runs exactly while the peer is EXPECTED or UP.
    assert (record is not None and record.heard is not None) == (after in {S.EXPECTED, S.UP})
    # Names are exchanged on entering UP, and only then.
    assert table.met == ([PEER] if after is S.UP and state is not S.UP else [])
    # What waits on it ends on every DOWN, whatever the state was.
    assert [down[0] for down in table.down] == ([PEER] if event is E.DOWN else [])
    # A member joins on entering UP and is gone on leaving it, and only then; it
    # has a ``since`` exactly while UP.
    assert table.joined == table.met
    assert table.gone == ([(PEER, "silence")] if state is S.UP and event is E.DOWN else [])
    assert (record is not None and record.since is not None) == (after is S.UP)


async def test_a_member_gone_is_told_how_and_joins_again_with_a_new_since(
    autojump_clock: trio.testing.MockClock,
) -> None:
    table = Table()
    table.peers.heartbeat(PEER)
    record = table.peers.record(PEER)
    assert record is not None
    assert record.since == 0.0
    table.peers.link_to(PEER)  # (a link: the record stays while its tells are counted)
    await trio.sleep(1)
    table.peers.heartbeat(PEER)
    assert record.since == 0.0  # (a heartbeat of a member changes nothing)
    table.peers.down(PEER, "it left the cluster", reason="left")
    assert table.gone == [(PEER, "left")]
    assert record.since is None
    await trio.sleep(1)
    table.peers.heartbeat(PEER)
    assert table.joined == [PEER, PEER]
    assert record.since == 2.0
    table.peers.down(PEER, "its connection ended", reason="advisory")
    assert table.gone == [(PEER, "left"), (PEER, "advisory")]


async def test_this_node_is_a_member_from_its_start() -> None:
    table = Table()
    table.peers.start()
    assert table.peers.state(ME) is S.UP
    assert table.joined == [ME]
    assert table.met == []  # (no names exchanged with itself)
    assert [record.peer for record in table.peers.up()] == [ME]


async def test_a_link_closes_when_its_peer_goes_down_and_a_new_record_follows() -> None:
    table = Table()
    link = table.peers.link_to(PEER)
    assert table.peers.link_to(PEER) is link  # (open: the same)
    table.peers.down(PEER, "silent")
    assert link.closed
    [(peer, said, sent_up_to, closed)] = table.down
    assert (peer, sent_up_to, closed) == (PEER, None, link)
    assert said == "node 'b' (0123456789ab) is down: silent"
    assert table.peers.current_link(PEER) is link  # (its acks still count, until accounted)
    table.peers.heartbeat(PEER)  # (only declared down: alive)
    assert table.peers.state(PEER) is S.UP
    fresh = table.peers.link_to(PEER)  # (told again: a new link)
    assert fresh is not link
    assert not fresh.closed
    assert fresh.record != link.record  # (a new record: nothing of the old charged to it)
    table.peers.accounted(PEER, link)  # (the old one's end changes nothing now)
    assert table.peers.current_link(PEER) is fresh
    table.peers.down(PEER, "again")
    assert table.down[-1][3] is fresh  # (the new link is accounted on its own)


async def test_this_node_is_a_peer_that_exchanges_no_names_with_itself() -> None:
    table = Table()
    table.peers.heartbeat(ME)
    assert table.peers.state(ME) is S.UP
    assert table.met == []


async def test_silence_declares_down_what_waits_and_what_was_heard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    table = Table()
    table.peers.heartbeat(PEER)
    waited = ("c", "000000000000")
    since = trio.current_time()
    await trio.sleep(2.5)
    table.peers.check([(waited, since)])
    assert table.down == []  # (3 beats of 1 s may be missed)
    await trio.sleep(1)
    table.peers.check([(waited, since)])
    assert [down[0] for down in table.down] == [waited, PEER]
    assert table.peers.state(PEER) is S.UNKNOWN
    assert "not heard from for 3 heartbeats" in table.down[0][1]


async def test_a_silent_peer_is_declared_down_on_the_next_pass_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    table = Table()
    table.peers.heartbeat(PEER)
    assert not table.peers.silent(PEER)
    await trio.sleep(3.5)
    assert table.peers.silent(PEER)
    assert not table.peers.silent(PEER)  # (its clock stopped: down is on its way)
    assert table.scheduled == [(table.peers.down, PEER, "not heard from for 3 heartbeats")]
    assert table.peers.state(PEER) is S.UP  # (until then)


async def test_a_peer_heard_again_before_its_tells_are_accounted_forgets_only_the_link() -> None:
    table = Table()
    link = table.peers.link_to(PEER)
    table.peers.down(PEER, "wrongly")
    table.peers.heartbeat(PEER)
    table.peers.accounted(PEER, link)  # (UP, ACCOUNTED): the closed link goes
    assert table.peers.state(PEER) is S.UP
    assert table.peers.current_link(PEER) is None

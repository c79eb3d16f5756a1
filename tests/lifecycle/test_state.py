"""The lifecycle table: every legal transition, and every illegal pair refused."""

import itertools

import pytest

from trio_actors._core._state import (
    ACCEPTING_STATES,
    NO_OPS,
    TRANSITIONS,
    ActorState,
    LifecycleEvent,
    advance,
)
from trio_actors._errors import LifecycleError


class Subject:
    def __init__(self, state: ActorState) -> None:
        self.state = state
        self.accepting = state in ACCEPTING_STATES
        self.inline_ready = False

    def describe(self) -> str:
        return "actor system/probe"


@pytest.mark.parametrize(("state", "event"), list(TRANSITIONS), ids=str)
def test_a_legal_transition_moves_to_the_table_state(
    state: ActorState, event: LifecycleEvent
) -> None:
    subject = Subject(state)
    assert advance(subject, event) is TRANSITIONS[state, event]
    assert subject.state is TRANSITIONS[state, event]
    assert subject.accepting == (subject.state in ACCEPTING_STATES)


ILLEGAL = [
    pair
    for pair in itertools.product(ActorState, LifecycleEvent)
    if pair not in TRANSITIONS and pair not in NO_OPS
]


@pytest.mark.parametrize(("state", "event"), sorted(NO_OPS, key=str), ids=str)
def test_a_declared_no_op_is_legal_and_changes_nothing(
    state: ActorState, event: LifecycleEvent
) -> None:
    subject = Subject(state)
    assert advance(subject, event) is state
    assert subject.state is state
    assert subject.accepting == state.accepts


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=str)
def test_an_illegal_transition_names_actor_state_and_event_and_changes_nothing(
    state: ActorState, event: LifecycleEvent
) -> None:
    subject = Subject(state)
    with pytest.raises(LifecycleError) as caught:
        advance(subject, event)
    message = str(caught.value)
    assert "system/probe" in message
    assert state.name in message
    assert event.name in message
    assert subject.state is state


def test_stopped_is_final_and_every_state_reaches_it() -> None:
    assert not [e for (s, e) in TRANSITIONS if s is ActorState.STOPPED]
    reachable = {ActorState.STOPPED}
    changed = True
    while changed:
        changed = False
        for (state, _), target in TRANSITIONS.items():
            if target in reachable and state not in reachable:
                reachable.add(state)
                changed = True
    assert reachable == set(ActorState)


def test_only_starting_running_and_restarting_accept_messages() -> None:
    assert {ActorState.STARTING, ActorState.RUNNING, ActorState.RESTARTING} == ACCEPTING_STATES


def test_what_each_state_allows_is_one_table() -> None:
    S = ActorState
    assert {s for s in S if s.accepts} == {S.STARTING, S.RUNNING, S.RESTARTING}
    assert {s for s in S if s.serves} == {S.RUNNING, S.DRAINING}
    assert {s for s in S if s.may_spawn} == {S.STARTING, S.RUNNING}
    assert {s for s in S if s.may_start_timers} == {S.STARTING, S.RUNNING}
    assert [s.value for s in S] == [
        "starting",
        "running",
        "restarting",
        "draining",
        "stopping",
        "stopped",
    ]
    assert ActorState("draining") is S.DRAINING  # type: ignore[call-arg]  # (by value)


def test_no_pair_is_both_a_transition_and_a_no_op() -> None:
    assert not NO_OPS & set(TRANSITIONS)

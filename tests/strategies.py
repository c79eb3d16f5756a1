"""Hypothesis strategies shared by the tests: T21's drawn programs and policies."""

from hypothesis import strategies as st

from trio_actors import ServingPolicy
from trio_actors.contracts._nothing_lost import (
    GROUPS,
    OP_KINDS,
    OVERFLOWS,
    ROUTINGS,
    STRATEGIES,
    ActorSpec,
    Op,
    Program,
)

# The steps that end a program early (an injected KeyboardInterrupt, the block
# cancelled from outside) are drawn a tenth as often as the others.
_RARE = ("interrupt", "cancel_block")
_KINDS = [kind for kind in OP_KINDS if kind not in _RARE] * 10 + list(_RARE)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    actors = []
    for index in range(draw(st.integers(1, 4))):
        parent = draw(st.integers(-1, index - 1)) if index else -1
        actors.append(
            ActorSpec(
                is_async=draw(st.booleans()),
                cost=draw(st.sampled_from([0.0, 0.0001, 0.002])),
                strategy=draw(st.sampled_from(STRATEGIES)),
                parent=parent,
                capacity=draw(st.sampled_from([0, 0, 1, 2, 4])),
                overflow=draw(st.sampled_from(OVERFLOWS)),
                group=draw(st.sampled_from(GROUPS)),
                pool=draw(st.sampled_from(["", "", "", *ROUTINGS])),
            )
        )
    op = st.builds(
        Op,
        kind=st.sampled_from(_KINDS),
        actor=st.integers(0, len(actors) - 1),
        fail=st.booleans(),
        expected=st.booleans(),
        # A time (deadline, sleep) or an index (which ask to cancel, which actor to
        # watch): the small integers spread the cancellations over the pending asks.
        value=st.sampled_from([0.0, 0.0001, 0.0005, 0.001, 0.003, 0.01, 0.05, 3.0, 7.0])
        | st.integers(0, 30).map(float),
    )
    return Program(tuple(actors), tuple(draw(st.lists(op, max_size=40))))


policies = st.builds(
    ServingPolicy,
    batch=st.sampled_from([1, 2, 16, 64]),
    cleanup_batch=st.sampled_from([1, 32]),
    time_slice=st.sampled_from([None, 0.001, 0.016]),
)

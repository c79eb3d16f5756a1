"""Nothing on the statistics service's subjects ends a node, by property: hypothesis
sends requests to ``$SRV.<verb>[.ta-<cluster>[.<node>]]`` and to the node's
endpoint with random and mutated bodies and every kind of reply subject, over the
in-memory bus (MockClock) -- as ``test_fuzz_inbound.py`` does for the node's other
subjects. After each batch the node still answers an ask from another node and a
monitor's ``$SRV.PING`` (its responder task still runs), and its bad-input count
moved by at least the requests that surely had nowhere to be answered."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import trio
import trio.testing
from hypothesis import given, settings

import trio_actors as ta
from trio_actors import _monitoring as wire
from trio_actors.nats import Msg
from trio_actors.remote import MemoryBus, Node

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
tokens = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters=".*>"),
    min_size=1,
    max_size=6,
)
verbs = st.sampled_from([*wire.VERBS, "STATUS", "ping"]) | tokens


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    shape = draw(st.sampled_from(["empty", "random", "request", "value", "nested"]))
    if shape == "empty":
        return b""
    if shape == "random":
        return draw(st.binary(max_size=24))
    if shape == "nested":
        depth = draw(st.sampled_from([10, 5_000, 200_000]))
        return b'{"sort":' * depth + b"1" + b"}" * depth
    if shape == "request":
        request = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "sort": st.sampled_from(wire.SORTS) | values,
                    "limit": st.integers(-5, 200) | values,
                    "other": values,
                },
            )
        )
        return json.dumps(request).encode()
    return json.dumps(draw(values)).encode()


@st.composite
def replies(draw: st.DrawFn) -> str | None:
    shape = draw(
        st.sampled_from(["none", "monitor", "other-cluster", "inbox", "service", "token", "own"])
    )
    if shape == "none":
        return None
    if shape == "monitor":
        node = draw(st.sampled_from(["-", "a", "b"]) | tokens)
        return f"ta.fuzz.m.{draw(tokens)}.{node}.{draw(tokens)}"
    if shape == "other-cluster":
        return f"ta.other.m.mon.-.{draw(tokens)}"
    if shape == "inbox":
        return f"_INBOX.{draw(tokens)}.{draw(tokens)}"
    if shape == "service":
        return f"$SRV.{draw(verbs)}"
    if shape == "own":
        return f"ta.fuzz.{draw(tokens)}.{draw(tokens)}"
    return draw(tokens | st.text(max_size=6))


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, bytes, str | None]:
    form = draw(st.sampled_from(["all", "cluster", "node", "endpoint"]))
    verb = draw(verbs)
    subject = {
        "all": f"$SRV.{verb}",
        "cluster": f"$SRV.{verb}.ta-fuzz",
        "node": f"$SRV.{verb}.ta-fuzz.a",
        "endpoint": "ta.fuzz.s.a",
    }[form]
    return subject, draw(bodies()), draw(replies())


def surely_bad(subject: str, reply: str | None) -> bool:
    """A request the node must hear but can answer nowhere (the test's own oracle)."""
    ours = subject == "ta.fuzz.s.a" or subject.split(".")[1] in wire.VERBS
    return ours and reply is None


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


async def drive(batches: list[list[tuple[str, bytes, str | None]]], secure: bool) -> None:
    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, name="fuzz", user="a" if secure else None)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=ta.Cluster(bus=bus, name="fuzz"), node="b") as b,
        bus.connect("raw") as raw,
    ):
        node, asker = Node.of(a), Node.of(b)
        pings: list[Msg] = []
        raw.subscribe(wire.monitor_replies("fuzz", "check"), pings.append)
        for number, batch in enumerate(batches):
            before = node.statistics().bad_input.total
            expected = 0
            for subject, body, reply in batch:
                raw.publish(subject, body, reply=reply)
                expected += surely_bad(subject, reply)
            await trio.sleep(0.5)  # (delivered, and answered past the rate limit)
            fresh = a.spawn(Echo, name=f"fresh-{number}")
            there = asker.ref_from_wire(*node.ref_to_wire(fresh))
            with trio.fail_after(10):
                assert await there.ask(("ask", number)) == ("ask", number)
            raw.publish("$SRV.PING.ta-fuzz.a", b"", reply=f"ta.fuzz.m.check.-.{number}")
            await trio.sleep(0.01)
            assert [m.subject for m in pings][-1] == f"ta.fuzz.m.check.a.{number}"
            moved = node.statistics().bad_input.total - before
            assert moved >= expected, (moved, expected)


batch = st.lists(requests(), min_size=1, max_size=12)
EXAMPLES = max(100, (settings.default.max_examples if settings.default else 0) // 5)


@settings(max_examples=EXAMPLES)
@given(st.lists(batch, min_size=1, max_size=3), st.booleans())
def test_no_request_on_the_statistics_services_subjects_ends_a_node(
    batches: list[list[tuple[str, bytes, str | None]]], secure: bool
) -> None:
    trio.run(drive, batches, secure, clock=trio.testing.MockClock(autojump_threshold=0))

"""Nothing from the wire ends a node, by property: hypothesis drives every inbound
handler -- every subject kind a node subscribes to -- with random bytes and with
valid frames structurally mutated (an element replaced, dropped or added, nested
deep, cut short, a byte flipped), over the in-memory bus (MockClock). After each
batch the node still answers a normal ask from another node, and its bad-input
counters moved by at least what is surely bad in the batch (an oracle of the
test's own, not the node's parsers)."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import msgspec
import trio
import trio.testing
from hypothesis import given, settings

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node

encode = msgspec.msgpack.encode

# Subject kinds (the node's own subjects are filled in once the node runs).
NODE, REPLY, BOUNCE, TERMINATION, ACK, HEARTBEAT, NAMES, LOOKUP, ADVISORY = range(9)
NUMBERED = (REPLY, BOUNCE, TERMINATION)
MSGPACK = (NODE, REPLY, TERMINATION, ACK, NAMES)  # (subjects whose payload is msgpack)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
tokens = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters=".*>"),
    min_size=1,
    max_size=6,
)
numbers = st.integers(0, 50).map(str)


def templates(kind: int) -> st.SearchStrategy[Any]:
    """A valid frame's shape for ``kind``, with plausible values (as a list)."""
    small = st.integers(0, 5)
    body = values.map(lambda value: msgspec.Raw(encode(value)))
    if kind == NODE:
        tells = st.lists(st.tuples(small, st.text(max_size=6), body).map(list), max_size=3)
        tell_body = tells.map(lambda t: msgspec.Raw(encode(t)))
        return st.tuples(st.integers(0, 6), small, st.text(max_size=6), tell_body | body).map(list)
    if kind == REPLY:
        return st.tuples(st.booleans(), body).map(list)
    if kind == TERMINATION:
        return st.binary(max_size=16) | st.none()
    if kind == ACK:
        return st.tuples(tokens, tokens, st.integers(-5, 2**40)).map(list)
    if kind == NAMES:
        return st.tuples(st.integers(0, 3), tokens, tokens, tokens, tokens, small).map(list)
    return st.just(None)


@st.composite
def mutated(draw: st.DrawFn, kind: int) -> bytes:
    """A valid frame of ``kind``, mutated structurally, encoded (and maybe damaged)."""
    frame = draw(templates(kind))
    if isinstance(frame, list) and frame:
        operation = draw(st.sampled_from(["keep", "replace", "drop", "add"]))
        index = draw(st.integers(0, len(frame) - 1))
        if operation == "replace":
            frame[index] = draw(values)
        elif operation == "drop":
            del frame[index]
        elif operation == "add":
            frame.append(draw(values))
    data = encode(frame)
    damage = draw(st.sampled_from(["none", "nest", "cut", "flip"]))
    if damage == "nest":  # (inside arrays, as deep as a hostile client likes)
        data = b"\x91" * draw(st.sampled_from([1, 100, 5_000, 200_000])) + data
    elif damage == "cut" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    return data


@st.composite
def advisories(draw: st.DrawFn) -> bytes:
    shape = draw(st.sampled_from(["random", "client", "nested", "not-json"]))
    if shape == "client":
        client = draw(st.dictionaries(st.sampled_from(["name", "x"]), values, max_size=2) | values)
        return json.dumps({"client": client}, default=repr).encode()
    if shape == "nested":
        depth = draw(st.sampled_from([10, 5_000, 200_000]))
        return b'{"client":' * depth + b"1" + b"}" * depth
    if shape == "not-json":
        return b"\xff" + draw(st.binary(max_size=16))
    return json.dumps(draw(values), default=repr).encode()


@st.composite
def frames(draw: st.DrawFn) -> tuple[int, str, bytes, str | None, bool]:
    """(kind, last token or '', payload, reply, sent as NATS's no-responders)."""
    kind = draw(st.sampled_from(range(9)))
    token = draw(numbers | tokens) if kind in NUMBERED else ""
    if kind == ADVISORY:
        payload = draw(advisories())
    elif kind == HEARTBEAT:
        payload = draw(st.sampled_from([b"", b"bye", b"hello"]) | st.binary(max_size=8))
    else:
        payload = draw(st.binary(max_size=32) | mutated(kind))
    reply = draw(st.none() | tokens | st.just("ta.fuzz.t.forger.0.1") | st.just("ta.fuzz.u.f.0.1"))
    no_responders = kind in NUMBERED and draw(st.booleans())
    return kind, token, payload, reply, no_responders


GARBAGE = b"\xc1"  # (never valid msgpack, nor JSON: surely bad wherever it goes)


def surely_bad(
    kind: int, token: str, payload: bytes, reply: str | None, no_responders: bool
) -> bool:
    """What the test knows is bad without the node's parsers."""
    if kind in NUMBERED and not token.isdigit():
        return True
    if kind == HEARTBEAT:
        return payload not in (b"", b"bye", b"hello")
    if kind == LOOKUP:
        return reply is None
    if kind == ADVISORY:
        try:
            json.loads(payload)
        except (ValueError, RecursionError):
            return True
        return False
    return kind in MSGPACK and not no_responders and payload.startswith(GARBAGE)


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


async def drive(batches: list[list[tuple[int, str, bytes, str | None, bool]]]) -> None:
    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, name="fuzz")
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        bus.connect("raw") as raw,
    ):
        node, asker = Node.of(a), Node.of(b)
        a.register("echo", a.spawn(Echo, name="echo"))
        me = (node.name, node.incarnation)
        s = node.subjects
        subjects = {
            NODE: s.to_node(*me, "raw"),
            REPLY: f"{s.replies(*me)}.b",
            BOUNCE: s.unreachable(*me),
            TERMINATION: s.terminations(*me, "b"),
            ACK: f"{s.prefix}.a.raw.0.{me[0]}.{me[1]}",
            NAMES: s.names("raw", "0"),
            LOOKUP: s.lookup("echo", "raw"),
            ADVISORY: "$SYS.ACCOUNT.FUZZ.DISCONNECT",
        }
        for number, batch in enumerate(batches):
            before = node.statistics().bad_input.total
            expected = 0
            for kind, token, payload, reply, no_responders in batch:
                if kind == HEARTBEAT:
                    subject = s.heartbeat(f"forger{token or len(payload)}", "0" * 12)
                else:
                    subject = subjects[kind] + (f".{token}" if token else "")
                if no_responders:  # (NATS answers the reply subject: nobody serves this)
                    raw.publish("nobody.serves.this", b"", reply=subject)
                else:
                    raw.publish(subject, payload, reply=reply)
                expected += surely_bad(kind, token, payload, reply, no_responders)
            await trio.sleep(0.01)  # (delivered)
            # A normal ask of a new actor (one no forged frame could have stopped).
            fresh = a.spawn(Echo, name=f"fresh-{number}")
            there = asker.ref_from_wire(*node.ref_to_wire(fresh))
            with trio.fail_after(10):
                assert await there.ask(("ask", number)) == ("ask", number)
            moved = node.statistics().bad_input.total - before
            assert moved >= expected >= 1, (moved, expected)


batch = st.lists(frames(), max_size=12).map(
    lambda frames: [*frames, (NODE, "", GARBAGE + b"x", None, False)]  # (one surely bad)
)


EXAMPLES = max(100, (settings.default.max_examples if settings.default else 0) // 5)


@settings(max_examples=EXAMPLES)  # (~25 ms each; a fifth of the profile's)
@given(st.lists(batch, min_size=1, max_size=3))
def test_no_frame_on_any_subject_ends_a_node(
    batches: list[list[tuple[int, str, bytes, str | None, bool]]],
) -> None:
    trio.run(drive, batches, clock=trio.testing.MockClock(autojump_threshold=0))


@given(st.none() | st.text(max_size=12) | st.text(alphabet="ab. *>\t\x1b\u2003", max_size=8))
def test_a_reply_subject_is_refused_exactly_when_the_client_would_refuse_it(
    reply: str | None,
) -> None:
    from trio_actors.nats import check_subject
    from trio_actors.remote._frames import _valid_reply

    try:
        check_subject(reply)
    except (TypeError, ValueError):
        assert not _valid_reply(reply)
    else:
        assert _valid_reply(reply)

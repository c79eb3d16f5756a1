"""The codec of what crosses between nodes, alone: decoding is the allow-list, and
what cannot cross says so where it is sent. Also the mistakes of opening a node."""

from __future__ import annotations

import datetime
from typing import Any

import msgspec
import pytest
import trio

import trio_actors as ta
from trio_actors.remote._codec import Codec


class Point(msgspec.Struct):
    x: int
    y: int


class Line(msgspec.Struct):
    start: Point
    end: Point
    tags: tuple[str, ...] = ()


class Registered(Exception):
    pass


class TwoArgs(Exception):
    def __init__(self, a: int, b: str) -> None:
        super().__init__(a, b)


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def codec(**options: Any) -> Codec:
    return Codec(
        ref_to_wire=lambda ref: pytest.fail("no refs here"),
        ref_from_wire=lambda *wire: pytest.fail("no refs here"),
        **options,
    )


@pytest.mark.parametrize(
    "message",
    [
        None,
        True,
        -3,
        2.5,
        "text",
        b"bytes",
        [1, [2, (3, 4)]],
        ("add", 1),
        (),
        {"k": (1, 2), 3: {4}, (5, 6): frozenset({7})},
        {1, 2},
        Point(1, 2),
        ("move", Point(1, 2), [Point(3, 4)]),
        {"line": Line(Point(0, 0), Point(1, 1), ("a", "b"))},
        datetime.datetime(2026, 12, 2, 17, 0, tzinfo=datetime.UTC),
    ],
)
def test_what_crosses_arrives_as_itself(message: Any) -> None:
    both = codec(types=[Point, Line])
    arrived = both.decode(both.encode(message))
    assert arrived == message
    assert type(arrived) is type(message)


def test_what_cannot_cross_raises_naming_its_type_and_what_to_do() -> None:
    plain = codec()
    with pytest.raises(TypeError, match=r"builtins\.object cannot cross: send builtins, refs"):
        plain.encode(object())
    with pytest.raises(TypeError, match=r"test_codec\.Point is a msgspec.Struct the cluster"):
        plain.encode(("p", Point(1, 2)))
    with pytest.raises(TypeError, match=r"Cluster\(types=\.\.\.\) takes msgspec.Struct"):
        codec(types=[int])


def test_decoding_is_the_allow_list() -> None:
    sender = codec(types=[Point], pickle=True)
    receiver = codec()  # registers nothing, takes no pickle
    with pytest.raises(msgspec.DecodeError, match=r"test_codec\.Point, which this node"):
        receiver.decode(sender.encode(Point(1, 2)))
    pickled = sender.encode(("o", complex(1, 2)))  # (pickle: msgpack has no complex)
    with pytest.raises(msgspec.DecodeError, match="does not take pickle"):
        receiver.decode(pickled)
    assert sender.decode(pickled) == ("o", complex(1, 2))
    with pytest.raises(msgspec.DecodeError, match="unknown msgpack extension 99"):
        receiver.decode(msgspec.msgpack.encode(msgspec.msgpack.Ext(99, b"")))


def test_exceptions_are_rebuilt_if_allowed_else_remote_errors() -> None:
    both = codec(errors=[Registered, TwoArgs])
    for error in (
        ValueError("bad", 3),
        KeyError("k"),
        ta.ActorStopped("gone"),
        ta.NodeDown("down"),
        Registered("mine"),
        TwoArgs(1, "b"),
    ):
        rebuilt = both.decode_error(both.encode_error(error))
        assert type(rebuilt) is type(error)
        assert rebuilt.args == error.args
    other = codec().decode_error(codec().encode_error(Registered("not allowed here")))
    assert isinstance(other, ta.RemoteError)
    assert (other.type_name, other.text) == ("test_codec.Registered", "not allowed here")
    assert str(other) == "test_codec.Registered: not allowed here"
    silent = both.decode_error(both.encode_error(BadStr()))
    assert isinstance(silent, ta.RemoteError)
    assert silent.type_name == "test_codec.BadStr"
    # A RemoteError passed on stands for its original: still a RemoteError where that
    # type is not allowed, the original type where it is.
    again = codec().decode_error(codec().encode_error(other))
    assert isinstance(again, ta.RemoteError)
    assert (again.type_name, again.text) == (other.type_name, other.text)
    rebuilt = both.decode_error(both.encode_error(other))
    assert (type(rebuilt), str(rebuilt)) == (Registered, "not allowed here")


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"cluster": "nats://127.0.0.1:1"}, TypeError, "needs both cluster= .* and node="),
        ({"node": "n"}, TypeError, "needs both cluster="),
        ({"cluster": 3, "node": "n"}, TypeError, "cluster is a nats:// URL or a Cluster"),
        ({"cluster": "nats://127.0.0.1:1", "node": "a.b"}, ValueError, "node must be letters"),
        ({"cluster": "nats://127.0.0.1:1", "node": 7}, TypeError, "node must be a str"),
    ],
)
async def test_the_mistakes_of_opening_a_node_are_said_before_anything_starts(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        async with ta.open_actor_system(**options):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="Cluster name must be letters"):
        ta.Cluster(name="has space")
    with pytest.raises(ValueError, match="heartbeat is seconds > 0"):
        ta.Cluster(heartbeat=0)
    with pytest.raises(ValueError, match="heartbeats_missed is a whole number"):
        ta.Cluster(heartbeats_missed=0)
    await trio.lowlevel.checkpoint()


def test_a_node_s_connection_name_says_its_node_and_incarnation() -> None:
    from trio_actors.remote._subjects import connection_name, peer_of_connection

    name = connection_name("prod", "worker-1", "ab12cd")
    assert name == "ta.prod.worker-1.ab12cd"
    assert peer_of_connection("prod", name) == ("worker-1", "ab12cd")
    for other in ("ta.test.worker-1.ab12cd", "ta.prod.worker-1", "ta.prod..x", "x", None, 3):
        assert peer_of_connection("prod", other) is None

"""The codec of what crosses between nodes, alone: each kind of value in the table
of ``docs/remote.rst`` arrives as itself or raises ``TypeError`` where it is sent;
decoding is the allow-list, and raises ``msgspec.DecodeError`` and nothing else.
Also the mistakes of opening a node."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import decimal
import enum
import uuid
import zoneinfo
from typing import Any, NamedTuple

import attrs
import msgspec
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import trio_actors as ta
from trio_actors.remote._codec import MAX_DEPTH, Codec


class Point(msgspec.Struct):
    x: int
    y: int


class Line(msgspec.Struct):
    start: Point
    end: Point
    tags: tuple[str, ...] = ()


class Loose(msgspec.Struct):
    anything: Any  # (what it holds arrives as itself, not as its annotation decodes)
    when: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    x: int
    y: int = 0


@dataclasses.dataclass
class Mutable:
    items: list[Any]
    inner: Frozen | None = None
    total: int = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        self.total = len(self.items)


@attrs.frozen
class Cart:
    owner: str
    _secret: int = 0  # (an attrs private field: __init__ takes it as ``secret``)
    tags: frozenset[str] = frozenset()
    size: int = attrs.field(default=0, init=False)


@attrs.define
class Box:
    content: Any
    label: str = attrs.field(default="", alias="name")


class Color(enum.Enum):
    RED = "red"
    GREEN = ("g", 1)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Permission(enum.Flag):
    READ = 1
    WRITE = 2


class Empty(msgspec.Struct):
    pass


REGISTERED: list[type] = [
    Point,
    Line,
    Loose,
    Empty,
    Frozen,
    Mutable,
    Cart,
    Box,
    Color,
    Level,
    Permission,
]


@dataclasses.dataclass
class Unregistered:
    x: int


@attrs.frozen
class UnregisteredAttrs:
    x: int


class UnregisteredStruct(msgspec.Struct):
    x: int


class Shade(enum.Enum):
    DARK = 1


class Pair(NamedTuple):
    a: int
    b: int


class Meters(int):
    pass


class Name(str):
    pass


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


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are equal and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(map(type, a)) == list(map(type, b)) and all(
            key in b and same(item, b[key]) for key, item in a.items()
        )
    if isinstance(a, Mutable | Box | Loose | Line):  # (their fields, all the way down)
        return all(same(getattr(a, f), getattr(b, f)) for f in _fields_of(type(a)))
    if isinstance(a, float) and a != a:
        return bool(b != b)
    return bool(a == b)


def _fields_of(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [field.name for field in dataclasses.fields(cls)]
    if attrs.has(cls):
        return [attribute.name for attribute in attrs.fields(cls)]
    return list(cls.__struct_fields__)  # type: ignore[attr-defined]


# One row per kind of value in docs/remote.rst's table of what crosses as itself.
AS_THEMSELVES: dict[str, Any] = {
    "None": None,
    "bool": True,
    "int": -3,
    "int, 64 bits": [-(2**63), 2**64 - 1],
    "float": [2.5, float("inf")],
    "str": "text",
    "bytes": b"bytes",
    "list": [1, [2, (3, 4)]],
    "dict, str keys": {"k": (1, 2)},
    "dict, int/bytes/float/None/bool keys": {3: {4}, b"b": 1, 1.5: 2, None: 3, True: 4},
    "dict, tuple and frozenset keys": {(5, 6): frozenset({7}), frozenset({1}): "f"},
    "tuple": ("add", 1),
    "empty tuple": (),
    "set": {1, 2},
    "frozenset": frozenset({"a"}),
    "datetime, naive": datetime.datetime(2026, 12, 2, 17, 0, 1, 5),
    "datetime, UTC": datetime.datetime(2026, 12, 2, 17, 0, tzinfo=datetime.UTC),
    "datetime, fixed offset": datetime.datetime(
        2026, 12, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=-5, minutes=-30))
    ),
    "date": datetime.date(2026, 12, 3),
    "time": [datetime.time(1, 2, 3, 4), datetime.time(5, tzinfo=datetime.UTC)],
    "timedelta": datetime.timedelta(days=-1, seconds=5, microseconds=6),
    "UUID": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "Decimal": [decimal.Decimal("1.10"), decimal.Decimal("-0E+3"), decimal.Decimal("Infinity")],
    "Struct": Point(1, 2),
    "Struct in a tuple, a list": ("move", Point(1, 2), [Point(3, 4)]),
    "Struct in a Struct, in a dict": {"line": Line(Point(0, 0), Point(1, 1), ("a", "b"))},
    "Struct, no fields": Empty(),
    "Struct, Any field": [Loose((1, {2})), Loose(Frozen(1)), Loose([Color.RED, Level.HIGH])],
    "dataclass, frozen, slots": Frozen(1, 2),
    "dataclass, default": Frozen(1),
    "dataclass, init=False field": Mutable([(1, 2)], Frozen(3)),
    "attrs, frozen, private field": Cart("ann", 7, frozenset({"x"})),
    "attrs, alias": Box(Cart("bob"), name="crate"),
    "nested every way": Box(Mutable([Loose(Box(Frozen(1)))]), name="n"),
    "registered as dict keys": {Frozen(1): Color.RED, Level.LOW: "low"},
    "Enum": [Color.RED, Color.GREEN],
    "IntEnum": Level.HIGH,
    "Flag": Permission.READ | Permission.WRITE,
}


@pytest.mark.parametrize("message", AS_THEMSELVES.values(), ids=AS_THEMSELVES.keys())
def test_what_crosses_arrives_as_itself(message: Any) -> None:
    both = codec(types=REGISTERED)
    arrived = both.decode(both.encode(message))
    assert same(arrived, message), (arrived, message)


def test_a_registered_instance_is_rebuilt_by_its_class_with_the_fields_it_had() -> None:
    both = codec(types=REGISTERED)
    cart = Cart("ann")
    object.__setattr__(cart, "size", 3)  # (a field __init__ does not take: set after)
    arrived = both.decode(both.encode(cart))
    assert (arrived, arrived.size) == (cart, 3)
    mutable = Mutable([1, 2])
    mutable.total = 10  # (__post_init__ runs on arrival, then the field is set as sent)
    assert both.decode(both.encode(mutable)).total == 10


# What msgspec would send as something else (or not at all), and what the error says.
REFUSED: dict[str, tuple[Any, str]] = {
    "unregistered dataclass": (
        Unregistered(1),
        r"test_codec\.Unregistered is a dataclass not registered with Cluster\(types=\.\.\.\): "
        "register it on every node",
    ),
    "unregistered attrs class": (UnregisteredAttrs(1), r"UnregisteredAttrs is an attrs class not"),
    "trio.Event": (trio.Event(), r"trio\.Event is an attrs class not registered"),
    "unregistered Struct": (UnregisteredStruct(1), r"UnregisteredStruct is a msgspec.Struct not"),
    "unregistered Enum": (Shade.DARK, r"test_codec\.Shade is an Enum not registered"),
    "unregistered, inside a container": (
        ("p", [Unregistered(1)]),
        r"a message of type builtins\.tuple .*test_codec\.Unregistered is a dataclass",
    ),
    "unregistered, as a registered one's field": (Loose(Unregistered(1)), r"Unregistered is a"),
    "NamedTuple": (Pair(1, 2), r"Pair is a subclass of tuple and would arrive as a plain tuple"),
    "OrderedDict": (collections.OrderedDict(a=1), r"OrderedDict is a subclass of dict"),
    "defaultdict": (collections.defaultdict(list), r"defaultdict is a subclass of dict"),
    "int subclass": (Meters(3), r"Meters is a subclass of int and would arrive as a plain int"),
    "str subclass": (Name("n"), r"Name is a subclass of str"),
    "bytearray": (bytearray(b"x"), r"bytearray would arrive as bytes: send bytes"),
    "memoryview": (memoryview(b"x"), r"memoryview would arrive as bytes"),
    "datetime in a zone": (
        datetime.datetime(2026, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
        r"tzinfo zoneinfo\.ZoneInfo would arrive with a fixed UTC offset",
    ),
    "int beyond 64 bits": (2**64, r"builtins\.int .*ints"),
    "object": (object(), r"builtins\.object cannot cross: send builtins, refs, or a dataclass"),
    "complex": (1j, r"builtins\.complex cannot cross"),
    "function": (print, r"builtin_function_or_method cannot cross"),
    "class": (Frozen, r"builtins\.type cannot cross"),
}


@pytest.mark.parametrize(("message", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_what_would_arrive_as_something_else_raises_naming_its_type(
    message: Any, says: str
) -> None:
    with pytest.raises(TypeError, match=says):
        codec(types=REGISTERED).encode(message)


@pytest.mark.parametrize(
    "message",
    [Unregistered(1), Pair(1, 2), Meters(3), bytearray(b"x"), Shade.DARK],
    ids=["dataclass", "NamedTuple", "int subclass", "bytearray", "Enum"],
)
def test_with_pickle_what_would_not_arrive_as_itself_is_pickled(message: Any) -> None:
    trusting = codec(pickle=True)
    arrived = trusting.decode(trusting.encode(("m", message)))
    assert same(arrived, ("m", message))
    with pytest.raises(TypeError, match="cannot be pickled"):
        trusting.encode(lambda: None)


def test_the_classes_a_cluster_registers_are_checked_when_it_is_made() -> None:
    for wrong in (int, Frozen(1), "test_codec.Frozen", Unregistered.__init__):
        with pytest.raises(TypeError, match=r"Cluster\(types=\.\.\.\) takes msgspec.Struct"):
            ta.Cluster(types=[wrong])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"Cluster\(types=\.\.\.\) takes msgspec.Struct"):
            codec(types=[wrong])
    with pytest.raises(TypeError, match=r"takes a list of classes, got <class"):
        ta.Cluster(types=Frozen)  # type: ignore[arg-type]
    twin = type("Frozen", (Frozen,), {"__module__": Frozen.__module__})
    with pytest.raises(ValueError, match=r"two classes named 'test_codec\.Frozen'"):
        ta.Cluster(types=[Frozen, twin])
    assert ta.Cluster(types=[Frozen, Frozen, Color]).types == (Frozen, Color)


def test_a_type_registered_only_on_the_sender_is_refused_naming_it() -> None:
    sender, receiver = codec(types=REGISTERED), codec(types=[Point])
    for message in (Frozen(1), [Point(1, 2), Cart("a")], Level.LOW):
        with pytest.raises(
            msgspec.DecodeError, match=r"holds a test_codec\.\w+, which this node's"
        ):
            receiver.decode(sender.encode(message))
    with pytest.raises(msgspec.DecodeError, match="register it on every node"):
        receiver.decode(sender.encode(Frozen(1)))


def nested(depth: int, make: Any = lambda inner: [inner]) -> Any:
    value: Any = None
    for _ in range(depth):
        value = make(value)
    return value


@pytest.mark.parametrize(
    "make",
    [
        lambda inner: [inner],
        lambda inner: {"k": inner},
        lambda inner: (inner,),
        lambda inner: {(1,): inner},
        lambda inner: Box(inner),
        lambda inner: [Loose(inner)],
    ],
    ids=["list", "dict", "tuple", "dict of pairs", "registered", "Struct in a list"],
)
def test_a_message_nests_at_most_max_depth_containers(make: Any) -> None:
    both = codec(types=REGISTERED)
    deep = nested(MAX_DEPTH // 2, make)  # (each step nests one or two containers)
    assert same(both.decode(both.encode(deep)), deep)
    with pytest.raises(TypeError, match=rf"nests more than {MAX_DEPTH} containers deep"):
        both.encode(nested(MAX_DEPTH + 1, make))


def test_the_limit_is_exact_and_a_value_that_holds_itself_is_refused() -> None:
    both = codec()
    assert both.decode(both.encode(nested(MAX_DEPTH))) == nested(MAX_DEPTH)
    with pytest.raises(
        TypeError, match=r"nests more than 100 containers deep \(or contains itself"
    ):
        both.encode(nested(MAX_DEPTH + 1))
    itself: list[Any] = []
    itself.append(itself)
    with pytest.raises(TypeError, match="contains itself"):
        both.encode(itself)


def _ext(code: int, payload: Any) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(code, msgspec.msgpack.encode(payload))


def _deep_tuples(depth: int) -> bytes:
    data = msgspec.msgpack.encode(None)
    for _ in range(depth):
        data = msgspec.msgpack.encode(msgspec.msgpack.Ext(3, b"\x91" + data))
    return data


HOSTILE: dict[str, bytes] = {
    "200,000 nested arrays": b"\x91" * 200_000 + b"\xc0",
    "200,000 nested maps": b"\x81\xa1k" * 200_000 + b"\xc0",
    "20,000 nested tuples": _deep_tuples(20_000),
    "truncated": b"\x92\x01",
    "a set of lists": msgspec.msgpack.encode(_ext(4, [[1]])),
    "pairs that are not pairs": msgspec.msgpack.encode(_ext(7, [1])),
    "a registered type with a field it has not": msgspec.msgpack.encode(
        _ext(2, ["test_codec.Frozen", {"z": 1}])
    ),
    "a registered type with fields that are not a map": msgspec.msgpack.encode(
        _ext(2, ["test_codec.Frozen", [1]])
    ),
    "a registered type with non-str field names": msgspec.msgpack.encode(
        _ext(2, ["test_codec.Frozen", {1: 1}])
    ),
    "an Enum value it has not": msgspec.msgpack.encode(_ext(2, ["test_codec.Color", "blue"])),
    "a datetime that is not one": msgspec.msgpack.encode(_ext(8, "yesterday")),
    "a timedelta that is not one": msgspec.msgpack.encode(_ext(11, [1])),
    "a UUID that is not one": msgspec.msgpack.encode(_ext(12, b"short")),
    "a Decimal that is not one": msgspec.msgpack.encode(_ext(13, "one")),
    "a ref that is not one": msgspec.msgpack.encode(_ext(1, ["a"])),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_decoding_raises_only_the_codecs_decode_error(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        codec(types=REGISTERED).decode(data)


@given(
    st.binary(max_size=64)
    | st.builds(lambda n, tail: b"\x91" * n + tail, st.integers(0, 5000), st.binary(max_size=8))
)
def test_any_bytes_decode_or_raise_the_decode_error(data: bytes) -> None:
    both = codec(types=REGISTERED)
    with contextlib.suppress(msgspec.DecodeError):
        both.decode(data)
    with contextlib.suppress(msgspec.DecodeError):
        both.decode_error(data)


ints = st.integers(-(2**63), 2**64 - 1)  # (msgpack's)
scalars = (
    st.none()
    | st.booleans()
    | ints
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=5)
    | st.datetimes()
    | st.uuids()
    | st.sampled_from([*Color, *Level])
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.builds(Frozen, ints), max_leaves=4
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.frozensets(hashables, max_size=3)
        | st.builds(Loose, inner)
        | st.builds(Box, inner, name=st.text(max_size=3))
        | st.builds(Mutable, st.lists(inner, max_size=2))
        | st.builds(Cart, st.text(max_size=3), ints, st.frozensets(st.text(max_size=2)))
    ),
    max_leaves=12,
)


@given(values)
def test_registered_types_and_builtins_round_trip_as_themselves(message: Any) -> None:
    both = codec(types=REGISTERED)
    assert same(both.decode(both.encode(message)), message)


def test_decoding_is_the_allow_list() -> None:
    sender = codec(types=[Point], pickle=True)
    receiver = codec()  # registers nothing, takes no pickle
    with pytest.raises(msgspec.DecodeError, match=r"test_codec\.Point, which this node"):
        receiver.decode(sender.encode(Point(1, 2)))
    with pytest.raises(msgspec.DecodeError, match=r"test_codec\.Point, which this node"):
        receiver.decode_error(sender.encode_error(ValueError(Point(1, 2))))
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

"""What crosses between nodes, as bytes: messages, replies, errors and refs.

msgspec's msgpack, walked on the way out: a message crosses **as itself or not at
all**. Bytes from the network make only builtins, the classes the application
registered with its :class:`~trio_actors.Cluster`, refs, and the exceptions
described below -- never an arbitrary object -- so decoding is also the allow-list.

What a message may hold, and what arrives (``docs/remote.rst`` has the table):

* ``None``, ``bool``, ``int`` (64 bits), ``float``, ``str``, ``bytes``, ``list`` and
  ``dict`` as msgpack holds them; ``tuple``, ``set``, ``frozenset``, a dict whose
  keys msgpack maps cannot hold (tuples...), and ``datetime``'s ``datetime``,
  ``date``, ``time`` and ``timedelta``, ``uuid.UUID`` and ``decimal.Decimal`` as
  msgpack extensions of ours -- each arrives as itself (a tuple is not a list on
  the other node, a UUID is not a str);
* instances of the classes registered in ``Cluster(types=[...])`` --
  ``msgspec.Struct`` subclasses, dataclasses, attrs classes and ``Enum``
  subclasses -- anywhere (as the message, in a container, as a field of another),
  as themselves: their type's ``module.QualName`` and their fields (each walked like
  the message), rebuilt by calling the class with them, as the sender built it;
* :class:`~trio_actors.ActorRef`\\ s, anywhere: they arrive as refs that work on the
  receiving node (the node gives the codec the two functions that turn refs into
  ``(node, incarnation, path, export number, overflow policy)`` and back).

Anything else -- what msgspec would send as something else (an unregistered
dataclass as a dict, an ``IntEnum`` as an int, a ``NamedTuple`` as a list, a
``bytearray`` as bytes...) and what it cannot send at all -- raises ``TypeError``
at ``encode`` (so at ``tell`` / ``ask``, before anything is sent), naming its type
and what to register or send instead; with ``pickle=True`` only (trusted networks:
unpickling runs whatever code the bytes name), it is pickled instead. A message
nested deeper than :data:`MAX_DEPTH` containers raises too (a value that contains
itself is one).

The walk is the check: msgspec encodes dataclasses, attrs classes, tuples, enums,
datetimes, UUIDs, decimals and subclasses of builtins natively, without calling an
``enc_hook``, so no hook could catch them. It costs plain messages nothing (measured
in ``docs/remote.rst``): one that is a ``str``, ``bytes``, ``int``... is one type
lookup, and lists and dicts were walked already (for the tuples in them).

:meth:`Codec.decode` raises ``msgspec.DecodeError`` and nothing else for any bytes
(a ``RecursionError`` from nesting too deep for the interpreter, a registered type
rebuilt from fields it does not take...). Exceptions cross as (type name, text,
arguments): the package's own errors, builtin exceptions and the types the
application registers are rebuilt; any other arrives as
:class:`~trio_actors.RemoteError` with the name and the text.
"""

from __future__ import annotations

import builtins
import datetime
import decimal
import pickle
import uuid
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Annotated, Any, Final

import msgspec
from msgspec.msgpack import Ext

from .. import _errors
from .._cluster import kind_of_class, message_types
from .._errors import ActorError, RemoteError
from .._interrupts import protect_module
from ..actors import ActorRef
from ._classes import Registered, type_name

__all__ = ["MAX_DEPTH", "Codec", "WireRef", "type_name"]

MAX_DEPTH: Final = 100
"""Containers (lists, dicts, tuples, sets, instances of registered classes) a
message may nest, counting itself: deeper raises ``TypeError`` when sent."""

# msgpack extension codes (application range 0..127).
_REF: Final = 1
_REGISTERED: Final = 2  # (type name, its fields) or, for an Enum, (type name, value)
_TUPLE: Final = 3
_SET: Final = 4
_FROZENSET: Final = 5
_PICKLE: Final = 6
_PAIRS: Final = 7  # a dict with keys msgpack maps cannot hold as themselves (tuples)
_DATETIME: Final = 8
_DATE: Final = 9
_TIME: Final = 10
_TIMEDELTA: Final = 11
_UUID: Final = 12
_DECIMAL: Final = 13
_SHARED_REF: Final = 14  # a ref to a shared name's group: the name (_groups.py)

_SCALARS: Final = frozenset({str, int, float, bool, bytes, type(None)})
# (for map(): the depth of what a container at depth d holds, repeated)
_DEEPER: Final = tuple(repeat(depth + 1) for depth in range(MAX_DEPTH))
# (builtins a subclass of which would arrive as the builtin itself)
_BUILTINS: Final = (bool, int, float, str, bytes, list, dict, tuple, set, frozenset)

WireRef = tuple[str, str, str, int, int]
"""A ref on the wire: (node, incarnation, path, export number, overflow) -- the
last, its mailbox's overflow policy as ``_exports.OVERFLOWS`` numbers it."""
Overflow = Annotated[int, msgspec.Meta(ge=0, le=3)]
"""A ref's fifth field as decoded: an overflow policy's number (``_exports.OVERFLOWS``)."""
WireOnTheWire = tuple[str, str, str, int, Overflow]
"""A :data:`WireRef` as the decoders take it (a policy out of range: undecodable)."""
RefToWire = Callable[[ActorRef], WireRef]
RefFromWire = Callable[[str, str, str, int, int], ActorRef]
SharedRef = Callable[[str], ActorRef]


def _package_errors() -> dict[str, type[BaseException]]:
    errors: dict[str, type[BaseException]] = {}
    for name in _errors.__all__:
        value = getattr(_errors, name)
        if isinstance(value, type) and issubclass(value, ActorError):
            errors[type_name(value)] = value
    return errors


def _builtin_errors() -> dict[str, type[BaseException]]:
    return {
        type_name(value): value
        for value in vars(builtins).values()
        if isinstance(value, type) and issubclass(value, Exception)
    }


class Codec:
    """Encodes and decodes what nodes send each other (one per node, and one per
    other thread that tells: it is not thread-safe).

    Args:
        types: the classes messages may hold (``msgspec.Struct`` subclasses,
            dataclasses, attrs classes, ``Enum`` subclasses; by ``module.QualName``:
            both nodes register the same classes).
        errors: exception types rebuilt when a remote handler raises them (besides
            the package's errors and builtin exceptions).
        pickle: pickle what cannot cross as itself otherwise (trusted networks only).
        ref_to_wire, ref_from_wire: the node's conversions of refs.
    """

    def __init__(
        self,
        *,
        types: Iterable[type] = (),
        errors: Iterable[type[BaseException]] = (),
        pickle: bool = False,
        ref_to_wire: RefToWire,
        ref_from_wire: RefFromWire,
        shared_ref: SharedRef | None = None,
    ) -> None:
        registered = [Registered.of(cls) for cls in message_types(tuple(types))]
        self._registered: dict[type, Registered] = {entry.cls: entry for entry in registered}
        self._by_name: dict[str, Registered] = {entry.name: entry for entry in registered}
        self._errors = {**_builtin_errors(), **_package_errors()}
        for error in errors:
            if not (isinstance(error, type) and issubclass(error, BaseException)):
                raise TypeError(f"Cluster(errors=...) takes exception types, got {error!r}")
            self._errors[type_name(error)] = error
        self._pickle = pickle
        self._ref_to_wire = ref_to_wire
        self._ref_from_wire = ref_from_wire
        self._shared_ref = shared_ref
        self._shared_name = msgspec.msgpack.Decoder(str)
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ext_hook=self._ext_hook)
        self._tagged = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
        self._error = msgspec.msgpack.Decoder(
            tuple[str, str, list[Any] | None], ext_hook=self._ext_hook
        )
        self._wire_ref = msgspec.msgpack.Decoder(WireOnTheWire)

    # --- values ---------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """``value`` as bytes.

        Raises:
            TypeError: something in it would not arrive as itself (the message names
                its type and what to do).
        """
        try:
            return self._encoder.encode(self._prepare(value))
        except (TypeError, ValueError, OverflowError) as error:
            raise TypeError(f"cannot send {_describe(value)} to another node: {error}") from None

    def decode(self, data: bytes | memoryview) -> Any:
        """What :meth:`encode` made.

        Raises:
            msgspec.DecodeError: (a ``ValueError``) the bytes are not that, whatever
                is wrong with them -- nothing else.
        """
        try:
            return self._decoder.decode(data)
        except Exception as error:
            raise _undecodable(error) from None

    def _prepare(self, value: Any, depth: int = 0) -> Any:
        """``value`` as msgspec will encode it so that it arrives as itself: builtins
        msgpack holds, and extensions for the rest (``depth``: the containers around
        it). Raises ``TypeError`` for what cannot cross so.

        (It runs for every value a message holds, so no comprehension: each name one
        used would be a cell made at every call; ``map`` passes the depth.)"""
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                raise _too_deep()
            items = list(map(self._prepare, value, _DEEPER[depth]))
            return items if kind is list else Ext(_TUPLE, self._encoder.encode(items))
        if kind is dict:
            if depth >= MAX_DEPTH:
                raise _too_deep()
            return self._dict(value, depth)
        if kind is set or kind is frozenset:
            if depth >= MAX_DEPTH:
                raise _too_deep()
            items = list(map(self._prepare, value, _DEEPER[depth]))
            return self._ext(_SET if kind is set else _FROZENSET, items)
        registered = self._registered.get(kind)
        if registered is not None:
            return self._ext(_REGISTERED, (registered.name, self._fields(registered, value, depth)))
        if kind is ActorRef:
            shared = getattr(value._cell, "shared_name", None)  # (a group's: _groups.py)
            if shared is not None:
                return Ext(_SHARED_REF, self._encoder.encode(shared))
            return Ext(_REF, self._encoder.encode(self._ref_to_wire(value)))
        special = _SPECIAL.get(kind)
        if special is not None:
            code, to_wire = special
            why = _why_not_itself(value)
            if why is None:
                return self._ext(code, to_wire(value))
            return self._refuse(value, why)
        return self._refuse(value, _why_not(value))

    def _dict(self, value: dict[Any, Any], depth: int) -> Any:
        """A dict (at ``depth``, checked): a map where msgpack holds its keys as
        themselves, else a list of pairs."""
        inner = depth + 1
        if _SCALARS.issuperset(map(type, value)):
            return {key: self._prepare(item, inner) for key, item in value.items()}
        pairs = [
            [self._prepare(key, inner), self._prepare(item, inner)] for key, item in value.items()
        ]
        return self._ext(_PAIRS, pairs)

    def _fields(self, registered: Registered, value: Any, depth: int) -> Any:
        """What crosses of an instance of a registered class (``depth``: the
        containers around it): its fields by name (an Enum: its value)."""
        if registered.is_enum:
            return self._prepare(value.value, depth)
        if depth >= MAX_DEPTH:
            raise _too_deep()
        inner, prepare = depth + 1, self._prepare
        return {name: prepare(getattr(value, name), inner) for name in registered.fields}

    def _ext(self, code: int, payload: Any) -> Ext:
        return Ext(code, self._encoder.encode(payload))

    def _refuse(self, value: object, why: str) -> Ext:
        """What would not arrive as itself: pickled where the cluster allows it,
        else ``TypeError(why)``."""
        if not self._pickle:
            raise TypeError(why)
        try:
            return Ext(_PICKLE, pickle.dumps(value))
        except Exception as error:  # (a lambda, a lock, a local class...)
            raise TypeError(f"{type_name(type(value))} cannot be pickled: {error}") from None

    def _ext_hook(self, code: int, data: memoryview) -> Any:
        if code == _REF:
            return self._ref_from_wire(*self._wire_ref.decode(data))
        if code == _SHARED_REF:
            if self._shared_ref is None:
                raise msgspec.DecodeError("a ref to a shared name, where none can be made")
            return self._shared_ref(self._shared_name.decode(data))
        if code == _TUPLE:
            return tuple(self._decoder.decode(data))
        if code == _REGISTERED:
            name, fields = self._tagged.decode(data)
            registered = self._by_name.get(name)
            if registered is None:
                raise msgspec.DecodeError(
                    f"a message holds a {name}, which this node's Cluster(types=[...]) "
                    "does not register (register it on every node)"
                )
            return registered.build(self._decoder.decode(fields))
        if code == _SET:
            return set(self._decoder.decode(data))
        if code == _FROZENSET:
            return frozenset(self._decoder.decode(data))
        if code == _PAIRS:
            return {key: item for key, item in self._decoder.decode(data)}
        if code == _PICKLE:
            if not self._pickle:
                raise msgspec.DecodeError(
                    "a message holds a pickled object, and this node does not take pickle "
                    "(Cluster(pickle=True) on both nodes, on a trusted network only)"
                )
            return pickle.loads(data)  # (opted in: a trusted network)
        from_wire = _FROM_WIRE.get(code)
        if from_wire is None:
            raise msgspec.DecodeError(f"unknown msgpack extension {code} in a message")
        return from_wire(msgspec.msgpack.decode(data))

    # --- errors ---------------------------------------------------------------------

    def encode_error(self, error: BaseException) -> bytes:
        """``error`` as bytes: its type's name, its text, and its arguments if they
        can cross (``None`` otherwise). A :class:`RemoteError` passes on the original
        it stands for."""
        if type(error) is RemoteError:
            return self._encoder.encode((error.type_name, error.text, None))
        args: Any
        try:
            args = self._prepare(list(error.args))
            self._encoder.encode(args)
        except Exception:  # (unencodable, unpicklable, recursive: the text alone)
            args = None
        try:
            text = str(error)
        except Exception:  # a raising __str__: the name alone
            text = ""
        return self._encoder.encode((type_name(type(error)), text, args))

    def decode_error(self, data: bytes | memoryview) -> BaseException:
        """The exception :meth:`encode_error` described: rebuilt if its type is
        allowed and takes its arguments back, else a :class:`RemoteError`.

        Raises:
            msgspec.DecodeError: the bytes are not what :meth:`encode_error` made.
        """
        try:
            name, text, args = self._error.decode(data)
        except Exception as error:
            raise _undecodable(error) from None
        cls = self._errors.get(name)
        if cls is not None:
            try:
                return cls(*args) if args is not None else cls(text)
            except Exception:  # a constructor that does not take its own args back
                pass
        return RemoteError(name, text)


def _describe(value: object) -> str:
    return f"a message of type {type_name(type(value))}"


def _too_deep() -> TypeError:
    return TypeError(
        f"it nests more than {MAX_DEPTH} containers deep (or contains itself): send "
        "something flatter"
    )


def _undecodable(error: Exception) -> msgspec.DecodeError:
    """``error``, raised while decoding, as the codec's one decoding error."""
    if isinstance(error, msgspec.DecodeError):
        return error
    if isinstance(error, RecursionError):
        return msgspec.DecodeError("a message nested too deep to decode")
    return msgspec.DecodeError(f"a message that does not decode: {type(error).__name__}: {error}")


def _why_not(value: object) -> str:
    """Why ``value`` (of no type the codec sends as itself) cannot cross, and what
    to do instead."""
    cls = type(value)
    name = type_name(cls)
    kind = kind_of_class(cls)
    if kind is not None:
        return (
            f"{name} is {'an' if kind[0] in 'aeiouAE' else 'a'} {kind} not registered with "
            "Cluster(types=...): register it on every node"
        )
    for builtin in _BUILTINS:
        if isinstance(value, builtin):
            plain = builtin.__name__
            return (
                f"{name} is a subclass of {plain} and would arrive as a plain {plain}: send "
                f"{plain}(...) of it, or a registered dataclass, attrs class or Struct"
            )
    if isinstance(value, bytearray | memoryview):
        return f"{name} would arrive as bytes: send bytes(...) of it"
    return (
        f"{name} cannot cross: send builtins, refs, or a dataclass, attrs class, "
        "msgspec.Struct or Enum registered with Cluster(types=[...]) "
        "(or Cluster(pickle=True) on a trusted network)"
    )


def _why_not_itself(value: object) -> str | None:
    """Why a ``datetime`` or ``time`` would not arrive as itself (``None``: it
    would): its ``tzinfo`` is a zone, which arrives as a fixed offset."""
    tzinfo = getattr(value, "tzinfo", None)
    if tzinfo is None or type(tzinfo) is datetime.timezone:
        return None
    return (
        f"a {type(value).__name__} with tzinfo {type_name(type(tzinfo))} would arrive with "
        "a fixed UTC offset instead: send it in UTC (.astimezone(datetime.UTC)) or with "
        "a datetime.timezone"
    )


def _timedelta_to_wire(value: datetime.timedelta) -> tuple[int, int, int]:
    return (value.days, value.seconds, value.microseconds)


def _timedelta_from_wire(wire: Any) -> datetime.timedelta:
    days, seconds, microseconds = wire
    return datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)


# Exact types sent as an extension of ours: (code, to its payload), and back.
_SPECIAL: Final[dict[type, tuple[int, Callable[[Any], Any]]]] = {
    datetime.datetime: (_DATETIME, datetime.datetime.isoformat),
    datetime.date: (_DATE, datetime.date.isoformat),
    datetime.time: (_TIME, datetime.time.isoformat),
    datetime.timedelta: (_TIMEDELTA, _timedelta_to_wire),
    uuid.UUID: (_UUID, lambda value: value.bytes),
    decimal.Decimal: (_DECIMAL, str),
}
_FROM_WIRE: Final[dict[int, Callable[[Any], Any]]] = {
    _DATETIME: datetime.datetime.fromisoformat,
    _DATE: datetime.date.fromisoformat,
    _TIME: datetime.time.fromisoformat,
    _TIMEDELTA: _timedelta_from_wire,
    _UUID: lambda wire: uuid.UUID(bytes=wire),
    _DECIMAL: decimal.Decimal,
}


protect_module(globals())

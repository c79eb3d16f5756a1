"""What crosses between nodes, as bytes: messages, replies, errors and refs.

msgspec's msgpack, with the decoding typed where it can be: decoding is also the
allow-list, so bytes from the network make only builtins, the ``msgspec.Struct``
types the application registered with its :class:`~trio_actors.Cluster`, refs, and
the exceptions described below -- never an arbitrary object.

What a message may hold, and what arrives:

* builtins msgpack knows (``None``, ``bool``, ``int``, ``float``, ``str``,
  ``bytes``, ``list``, ``dict``) as themselves, and ``tuple``, ``set`` and
  ``frozenset`` as themselves too (they travel as msgpack extensions: a tuple does
  not arrive as a list, so ``message == ("get",)`` holds on the other node);
* registered ``msgspec.Struct`` types, anywhere (as the message, inside a tuple or a
  dict, or as a field of another Struct), as themselves;
* :class:`~trio_actors.ActorRef`\\ s, anywhere: they arrive as refs that work on the
  receiving node (the node gives the codec the two functions that turn refs into
  ``(node, incarnation, path)`` and back);
* with ``pickle=True`` only (trusted single-host use: unpickling bytes from the
  network runs whatever code they name), any picklable object, as a last resort.

Anything else raises ``TypeError`` when it is told or asked, naming its type and
what to do. Exceptions cross as (type name, text, arguments): the package's own
errors, builtin exceptions and the types the application registers are rebuilt;
any other arrives as :class:`~trio_actors.RemoteError` with the name and the text.
"""

from __future__ import annotations

import builtins
import pickle
from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from .. import _errors
from .._errors import ActorError, RemoteError
from ..actors import ActorRef

__all__ = ["Codec", "WireRef", "type_name"]

# msgpack extension codes (application range 0..127).
_REF: Final = 1
_STRUCT: Final = 2
_TUPLE: Final = 3
_SET: Final = 4
_FROZENSET: Final = 5
_PICKLE: Final = 6
_PAIRS: Final = 7  # a dict with keys msgpack maps cannot hold as themselves (tuples)

_SCALARS: Final = frozenset({str, int, float, bool, bytes, type(None)})

WireRef = tuple[str, str, str, int]
"""A ref on the wire: (node, incarnation, path, export number)."""
RefToWire = Callable[[ActorRef], WireRef]
RefFromWire = Callable[[str, str, str, int], ActorRef]


def type_name(cls: type) -> str:
    """``module.QualName``: how a type is named on the wire."""
    return f"{cls.__module__}.{cls.__qualname__}"


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
    """Encodes and decodes what nodes send each other (one per node).

    Args:
        types: the ``msgspec.Struct`` types messages may hold (by ``module.QualName``:
            both nodes register the same classes).
        errors: exception types rebuilt when a remote handler raises them (besides
            the package's errors and builtin exceptions).
        pickle: pickle what msgpack cannot hold (trusted networks only).
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
    ) -> None:
        self._structs: dict[str, type[msgspec.Struct]] = {}
        self._struct_names: dict[type, str] = {}
        for cls in types:
            if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
                raise TypeError(f"Cluster(types=...) takes msgspec.Struct subclasses, got {cls!r}")
            name = type_name(cls)
            if self._structs.get(name, cls) is not cls:
                raise ValueError(f"two registered types are both named {name!r}")
            self._structs[name] = cls
            self._struct_names[cls] = name
        self._errors = {**_builtin_errors(), **_package_errors()}
        for error in errors:
            if not (isinstance(error, type) and issubclass(error, BaseException)):
                raise TypeError(f"Cluster(errors=...) takes exception types, got {error!r}")
            self._errors[type_name(error)] = error
        self._pickle = pickle
        self._ref_to_wire = ref_to_wire
        self._ref_from_wire = ref_from_wire
        self._encoder = msgspec.msgpack.Encoder(enc_hook=self._enc_hook)
        self._decoder = msgspec.msgpack.Decoder(ext_hook=self._ext_hook)
        self._struct_decoders = {
            name: msgspec.msgpack.Decoder(cls, ext_hook=self._ext_hook)
            for name, cls in self._structs.items()
        }
        self._tagged = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
        self._wire_ref = msgspec.msgpack.Decoder(WireRef)

    # --- values ---------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """``value`` as bytes.

        Raises:
            TypeError: something in it cannot cross (the message names its type).
        """
        try:
            return self._encoder.encode(self._prepare(value))
        except (TypeError, ValueError, OverflowError) as error:
            raise TypeError(f"cannot send {_describe(value)} to another node: {error}") from None

    def decode(self, data: bytes | memoryview) -> Any:
        """What :meth:`encode` made (``msgspec.DecodeError``, a ``ValueError``, for
        bytes that are not)."""
        return self._decoder.decode(data)

    def _prepare(self, value: Any) -> Any:
        """``value`` with what msgpack would change on the way made an extension:
        tuples, sets, registered Structs (wherever they are), refs."""
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list:
            return [self._prepare(item) for item in value]
        if kind is dict:
            if all(type(key) in _SCALARS for key in value):
                return {key: self._prepare(item) for key, item in value.items()}
            pairs = [[self._prepare(key), self._prepare(item)] for key, item in value.items()]
            return self._ext(_PAIRS, pairs)
        if kind is tuple:
            return self._ext(_TUPLE, [self._prepare(item) for item in value])
        if kind is set or kind is frozenset:
            code = _SET if kind is set else _FROZENSET
            return self._ext(code, [self._prepare(item) for item in value])
        name = self._struct_names.get(kind)
        if name is not None:
            return msgspec.msgpack.Ext(_STRUCT, self._encoder.encode((name, value)))
        if isinstance(value, msgspec.Struct):  # (msgspec would send it as a plain map)
            raise TypeError(self._unregistered(value))
        return value  # a ref, a datetime, ...: msgspec itself, or the hook

    def _ext(self, code: int, items: list[Any]) -> msgspec.msgpack.Ext:
        return msgspec.msgpack.Ext(code, self._encoder.encode(items))

    def _enc_hook(self, value: Any) -> Any:
        if type(value) is ActorRef:
            return msgspec.msgpack.Ext(_REF, self._encoder.encode(self._ref_to_wire(value)))
        if isinstance(value, msgspec.Struct):
            raise TypeError(self._unregistered(value))
        if self._pickle:
            return msgspec.msgpack.Ext(_PICKLE, pickle.dumps(value))
        raise TypeError(
            f"{type_name(type(value))} cannot cross: send builtins, refs or a msgspec.Struct "
            "registered in Cluster(types=[...]) (or Cluster(pickle=True) on a trusted network)"
        )

    @staticmethod
    def _unregistered(value: object) -> str:
        return (
            f"{type_name(type(value))} is a msgspec.Struct the cluster does not know: add "
            "it to Cluster(types=[...]) on every node"
        )

    def _ext_hook(self, code: int, data: memoryview) -> Any:
        if code == _REF:
            node, incarnation, path, number = self._wire_ref.decode(data)
            return self._ref_from_wire(node, incarnation, path, number)
        if code == _STRUCT:
            name, raw = self._tagged.decode(data)
            decoder = self._struct_decoders.get(name)
            if decoder is None:
                raise msgspec.DecodeError(
                    f"a message holds a {name}, which this node's Cluster(types=[...]) "
                    "does not register"
                )
            return decoder.decode(raw)
        if code == _TUPLE:
            return tuple(self._decoder.decode(data))
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
        raise msgspec.DecodeError(f"unknown msgpack extension {code} in a message")

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
        allowed and takes its arguments back, else a :class:`RemoteError`."""
        name, text, args = self._decoder.decode(data)
        cls = self._errors.get(name)
        if cls is not None:
            try:
                return cls(*args) if isinstance(args, list) else cls(text)
            except Exception:  # a constructor that does not take its own args back
                pass
        return RemoteError(name, text)


def _describe(value: object) -> str:
    return f"a message of type {type_name(type(value))}"

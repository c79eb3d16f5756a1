"""The classes a cluster registers (``Cluster(types=[...])``), and how instances of
each cross: by the class's ``module.QualName`` and its fields by name (an ``Enum``
member: by its value), rebuilt on arrival by calling the class with them, as the
sender built it. The codec (``_codec.py``) walks the fields and tags them."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import attrs
import msgspec

from .._cluster import kind_of_class
from .._interrupts import protect_module

__all__ = ["Registered", "type_name"]


def type_name(cls: type) -> str:
    """``module.QualName``: how a type is named on the wire."""
    return f"{cls.__module__}.{cls.__qualname__}"


@attrs.frozen
class Registered:
    """How instances of one registered class cross.

    Attributes:
        name: its ``module.QualName`` (the tag on the wire).
        cls: the class.
        fields: the attributes sent (``()`` for an Enum: its value is sent).
        arguments: for each field the class's ``__init__`` takes, the keyword that
            takes it, where that is not the field's own name (attrs strips a
            leading underscore, or an ``alias``).
        set_after: the fields ``__init__`` does not take (``init=False``): set on
            the instance after it is built.
        is_enum: an ``Enum``: its member is looked up by value.
    """

    name: str
    cls: type
    fields: tuple[str, ...]
    arguments: dict[str, str]
    set_after: frozenset[str]
    is_enum: bool

    @classmethod
    def of(cls, registered: type) -> Registered:
        kind = kind_of_class(registered)
        fields: tuple[str, ...] = ()
        arguments: dict[str, str] = {}
        set_after: set[str] = set()
        if kind == "msgspec.Struct":
            fields = tuple(registered.__struct_fields__)  # type: ignore[attr-defined]
        elif kind == "dataclass":
            for field in dataclasses.fields(registered):
                fields += (field.name,)
                if not field.init:
                    set_after.add(field.name)
        elif kind == "attrs class":
            for attribute in attrs.fields(registered):
                fields += (attribute.name,)
                if not attribute.init:
                    set_after.add(attribute.name)
                elif attribute.alias != attribute.name:
                    arguments[attribute.name] = attribute.alias
        return cls(
            type_name(registered),
            registered,
            fields,
            arguments,
            frozenset(set_after),
            is_enum=kind == "Enum",
        )

    def build(self, fields: Any) -> Any:
        """An instance, from the fields that came (a dict by field name; an Enum's
        value), by calling the class (``TypeError`` for fields it does not take)."""
        if self.is_enum:
            return self.cls(fields)
        if type(fields) is not dict:
            raise msgspec.DecodeError(f"a {self.name} came without its fields as a map")
        if not (self.arguments or self.set_after):
            return self.cls(**fields)
        renamed = self.arguments
        arguments: dict[str, Any] = {
            cast(str, renamed.get(name, name)): value
            for name, value in fields.items()
            if name not in self.set_after
        }
        instance = self.cls(**arguments)
        for name in self.set_after & fields.keys():
            object.__setattr__(instance, name, fields[name])  # (frozen too, as attrs does)
        return instance


protect_module(globals())

"""A node's configuration file: one TOML file for ``trio-actors node --config``,
``trio-actors cluster --config``, :meth:`Cluster.from_toml
<trio_actors.Cluster.from_toml>` and ``open_actor_system(cluster=Path(...))``.

::

    servers = ["nats://10.0.0.5:4222", "nats://10.0.0.6:4222"]
    cluster = "shop"                  # the cluster's name (default "trio-actors")
    node = "worker-1"                 # this node's name (optional)
    types = ["shop.messages:Order"]   # "module:name", imported when the file is read
    errors = ["shop.errors:OutOfStock"]
    spawnable = ["shop.workers:Packer"]  # actor classes other nodes may spawn here
    heartbeat = 1.0                   # seconds between heartbeats
    heartbeats_missed = 3
    pickle = false
    monitoring = true                 # answer the statistics service (trio-actors top)

    [tls]                             # any key here: the connection is TLS
    ca = "ca.pem"                     # paths are relative to this file's directory
    cert = "worker-1.pem"
    key = "worker-1-key.pem"
    hostname = "nats.shop.internal"

    [auth]                            # one of: user and password, token,
    user = "worker-1"                 # nkey_seed (a seed file), credentials (a
    password = "..."                  # .creds file)

    [system]                          # a subscribe-only user of the system account,
    user = "advisories"               # for disconnect advisories; or credentials =
    password = "..."                  # "advisories.creds"

Every key is optional. A mistake -- an unknown key, a value of the wrong kind, a file
that is not there, a type that does not import -- is a :exc:`ValueError` whose
message starts with the file and the key (``node.toml: tls.ca: no such file:
...``). Values only: reading a file does no I/O beyond reading it, the files it
names, and importing the modules ``types``, ``errors`` and ``spawnable`` name.
"""

from __future__ import annotations

import importlib
import math
import re
import ssl
import tomllib
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from ._interrupts import protect_module
from .nats._handshake import parse_url

__all__ = ["read_config"]

_TOP = {
    "servers",
    "cluster",
    "node",
    "types",
    "errors",
    "spawnable",
    "heartbeat",
    "heartbeats_missed",
    "pickle",
    "monitoring",
    "tls",
    "auth",
    "system",
}
_TLS = {"ca": "path", "cert": "path", "key": "path", "hostname": "text"}
_AUTH = {
    "user": "text",
    "password": "text",
    "token": "text",
    "nkey_seed": "path",
    "credentials": "path",
}
_SYSTEM = {"user": "text", "password": "text", "credentials": "path"}
_TABLES = {"tls": _TLS, "auth": _AUTH, "system": _SYSTEM}


_TOKEN = re.compile(r"[A-Za-z0-9_-]+")  # (as Cluster's names: parts of NATS subjects)


class _Mistake(Exception):
    """A mistake at ``key`` (raised inside this module, said as a ValueError)."""

    def __init__(self, key: str, what: str) -> None:
        super().__init__(key, what)
        self.key = key
        self.what = what


def read_config(path: str | PathLike[str]) -> tuple[dict[str, Any], str | None]:
    """The keyword arguments of :class:`~trio_actors.Cluster` the file gives (its
    paths made absolute, relative to the file's directory; its classes imported;
    its TLS context made), and its node name (``None``: none given).
    ``Cluster.from_toml`` makes the cluster (this module sits beside
    ``_cluster.py``, below it: it knows no ``Cluster``).

    Raises:
        ValueError: the file cannot be read, is not TOML, or has a mistake (the
            message names the file and the key).
    """
    source = Path(path)
    try:
        with source.open("rb") as file:
            table = tomllib.load(file)
    except OSError as error:
        raise ValueError(f"{source}: cannot read the configuration: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{source}: not valid TOML: {error}") from None
    try:
        checked = _checked(table, source.resolve().parent)
        return _options(checked), checked.get("node")
    except _Mistake as mistake:
        raise ValueError(f"{source}: {mistake.key}: {mistake.what}") from None


# --- checking, key by key ------------------------------------------------------------------


def _checked(table: dict[str, Any], base: Path) -> dict[str, Any]:
    """``table`` with every key checked and every path absolute (from ``base``)."""
    unknown = sorted(set(table) - _TOP)
    if unknown:
        raise _Mistake(unknown[0], f"unknown key; the keys are {', '.join(sorted(_TOP))}")
    checked: dict[str, Any] = {}
    if "servers" in table:
        checked["servers"] = _servers(table["servers"])
    for key in ("cluster", "node"):
        if key in table:
            checked[key] = _name(table[key], key)
    for key in ("types", "errors", "spawnable"):
        if key in table:
            checked[key] = _references(table[key], key)
    if "heartbeat" in table:
        checked["heartbeat"] = _seconds(table["heartbeat"], "heartbeat")
    if "heartbeats_missed" in table:
        missed = table["heartbeats_missed"]
        if isinstance(missed, bool) or not isinstance(missed, int) or missed < 1:
            raise _Mistake("heartbeats_missed", f"expected a whole number >= 1, got {missed!r}")
        checked["heartbeats_missed"] = missed
    for key in ("pickle", "monitoring"):
        if key in table:
            if not isinstance(table[key], bool):
                raise _Mistake(key, f"expected true or false, got {table[key]!r}")
            checked[key] = table[key]
    for name, keys in _TABLES.items():
        if name in table:
            checked[name] = _sub_table(table[name], name, keys, base)
    _check_auth(checked.get("auth", {}), "auth")
    _check_auth(checked.get("system", {}), "system")
    tls = checked.get("tls", {})
    if ("cert" in tls) != ("key" in tls):
        raise _Mistake("tls", "cert and key go together (the node's certificate and its key)")
    return checked


def _servers(value: object) -> list[str]:
    servers = [value] if isinstance(value, str) else value
    if not isinstance(servers, list) or not servers:
        raise _Mistake("servers", f"expected a nats:// URL or a list of them, got {value!r}")
    for index, server in enumerate(servers):
        key = f"servers[{index}]"
        if not isinstance(server, str):
            raise _Mistake(key, f"expected a nats:// URL, got {server!r}")
        try:
            parse_url(server)
        except ValueError as error:
            raise _Mistake(key, str(error)) from None
    return list(servers)


def _name(value: object, key: str) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise _Mistake(
            key, f"expected letters, digits, '_' and '-' (a NATS subject token), got {value!r}"
        )
    return value


def _references(value: object, key: str) -> list[str]:
    if not isinstance(value, list):
        raise _Mistake(key, f'expected a list of "module:name" strings, got {value!r}')
    for index, item in enumerate(value):
        module, colon, name = item.partition(":") if isinstance(item, str) else ("", "", "")
        if not (module and colon and name):
            raise _Mistake(f"{key}[{index}]", f'expected "module:name", got {item!r}')
    return list(value)


def _seconds(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Mistake(key, f"expected seconds (a number), got {value!r}")
    if not 0 < value < math.inf:
        raise _Mistake(key, f"expected seconds > 0, got {value!r}")
    return float(value)


def _sub_table(value: object, name: str, keys: Mapping[str, str], base: Path) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Mistake(name, f"expected a table ([{name}]), got {value!r}")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise _Mistake(f"{name}.{unknown[0]}", f"unknown key; the keys are {', '.join(keys)}")
    checked = {}
    for key, item in value.items():
        where = f"{name}.{key}"
        if not isinstance(item, str) or not item:
            kind = "a file path" if keys[key] == "path" else "a string"
            raise _Mistake(where, f"expected {kind}, got {item!r}")
        if keys[key] == "path":
            path = (base / Path(item).expanduser()).resolve()
            if not path.is_file():
                raise _Mistake(where, f"no such file: {path}")
            item = str(path)
        checked[key] = item
    return checked


def _check_auth(table: Mapping[str, str], name: str) -> None:
    """One way to authenticate at most, and a user with its password."""
    ways = [key for key in ("token", "nkey_seed", "credentials") if key in table]
    if "user" in table or "password" in table:
        ways.append("user")
        if ("user" in table) != ("password" in table):
            raise _Mistake(name, "user and password go together")
    if len(ways) > 1:
        raise _Mistake(name, f"one way to authenticate, not several: {', '.join(ways)}")


# --- what the Cluster is made of ----------------------------------------------------------


def _options(table: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``Cluster`` for a checked table."""
    options: dict[str, Any] = {}
    if "servers" in table:
        options["servers"] = table["servers"]
    if "cluster" in table:
        options["name"] = table["cluster"]
    for key in ("heartbeat", "heartbeats_missed", "pickle", "monitoring"):
        if key in table:
            options[key] = table[key]
    options["types"] = [
        _imported(ref, f"types[{i}]") for i, ref in enumerate(table.get("types", []))
    ]
    errors = [_imported(ref, f"errors[{i}]") for i, ref in enumerate(table.get("errors", []))]
    for index, error in enumerate(errors):
        if not issubclass(error, BaseException):
            raise _Mistake(f"errors[{index}]", f"{error.__qualname__} is not an exception class")
    options["errors"] = errors
    spawnable = [
        _imported(ref, f"spawnable[{i}]") for i, ref in enumerate(table.get("spawnable", []))
    ]
    for index, cls in enumerate(spawnable):
        if not callable(getattr(cls, "receive", None)):  # (Actor is above this layer)
            raise _Mistake(f"spawnable[{index}]", f"{cls.__qualname__} is not an actor class")
    options["spawnable"] = spawnable
    tls = table.get("tls")
    if tls:
        options["tls"] = _tls_context(tls)
        options["tls_hostname"] = tls.get("hostname")
    options.update(table.get("auth", {}))
    system = table.get("system", {})
    options["system_user"] = system.get("user")
    options["system_password"] = system.get("password")
    options["system_credentials"] = system.get("credentials")
    return options


def _imported(reference: str, key: str) -> type:
    module_name, _, name = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise _Mistake(key, f"cannot import {module_name!r}: {error}") from None
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, type):
        raise _Mistake(key, f"{module_name} has no class {name!r}")
    return found


def _tls_context(tls: Mapping[str, str]) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=tls.get("ca"))
    except ssl.SSLError as error:
        raise _Mistake("tls.ca", f"not a CA certificate file: {error}") from None
    if "cert" in tls:
        try:
            context.load_cert_chain(tls["cert"], tls["key"])
        except ssl.SSLError as error:
            raise _Mistake("tls.cert", f"the certificate and key do not load: {error}") from None
    return context


protect_module(globals())

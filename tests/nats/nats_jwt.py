"""Operator-mode ("decentralized") authentication for the tests: nkeys, the
operator / account / user JWTs that nats-server checks, the server configuration
that trusts them, and a user's credentials file, all made here (no ``nsc``).

A JWT is nats-io/jwt v2's: the header ``{"typ":"JWT","alg":"ed25519-nkey"}``, the
claims (``jti``, ``iat``, ``iss``, ``name``, ``sub``, and ``nats``: the type, version
2, and the type's fields), each part base64url without padding, and the ed25519
signature of ``header.claims`` by the issuer's nkey. The operator signs itself and
the accounts; an account signs its users. ``jti`` is, as nats-io/jwt makes it, the
base32 (no padding) SHA-512/256 of the other standard claims.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

import nkeys  # type: ignore[import-untyped]

KeyPair = Any  # nkeys.KeyPair (nkeys has no type hints)

_PREFIXES = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
}
# An account without limits (jwt.NewAccountClaims's: -1 is no limit; 0 would be none
# at all -- an account whose JWT leaves ``conn`` out takes no connection).
_UNLIMITED_ACCOUNT = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}
_UNLIMITED_USER = {"subs": -1, "data": -1, "payload": -1}


def new_key(kind: str) -> KeyPair:
    """A fresh nkey pair of ``kind``: "operator", "account" or "user"."""
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), _PREFIXES[kind]))


def public(key: KeyPair) -> str:
    text: str = key.public_key.decode()
    return text


def seed(key: KeyPair) -> str:
    text: str = key.seed.decode()
    return text


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def encode_jwt(issuer: KeyPair, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A JWT about ``subject`` (a public nkey), signed by ``issuer``."""
    standard = {"iat": int(time.time()), "iss": public(issuer), "name": name, "sub": subject}
    jti = base64.b32encode(hashlib.new("sha512_256", _json(standard)).digest()).rstrip(b"=")
    claims = {"jti": jti.decode(), **standard, "nats": {**nats, "version": 2}}
    signed = f"{_b64(_json({'typ': 'JWT', 'alg': 'ed25519-nkey'}))}.{_b64(_json(claims))}"
    return f"{signed}.{_b64(issuer.sign(signed.encode()))}"


def account_jwt(operator: KeyPair, account: KeyPair, name: str) -> str:
    return encode_jwt(
        operator, public(account), name, {"type": "account", "limits": _UNLIMITED_ACCOUNT}
    )


def user_jwt(account: KeyPair, user: KeyPair, name: str) -> str:
    claims = {"type": "user", "pub": {}, "sub": {}, **_UNLIMITED_USER}
    return encode_jwt(account, public(user), name, claims)


def server_config(operator: KeyPair, accounts: dict[str, KeyPair]) -> str:
    """A server configuration trusting ``operator``, which vouches for ``accounts``
    (their JWTs preloaded into the memory resolver)."""
    operator_jwt = encode_jwt(operator, public(operator), "test-operator", {"type": "operator"})
    preload = "\n".join(
        f"  {public(account)}: {account_jwt(operator, account, name)}"
        for name, account in accounts.items()
    )
    return f"operator: {operator_jwt}\nresolver: MEMORY\nresolver_preload: {{\n{preload}\n}}\n"


def credentials_file(account: KeyPair, user: KeyPair, name: str) -> str:
    """The text of a ``.creds`` file for ``user`` of ``account``, as ``nsc`` writes it."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt(account, user, name)}\n"
        "------END NATS USER JWT------\n"
        "\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n"
        "\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed(user)}\n"
        "------END USER NKEY SEED------\n"
        "\n"
        "*************************************************************\n"
    )

"""Opening one connection to one server: the URL, TCP, TLS, the ``INFO`` /
``CONNECT`` / ``PING`` / ``PONG`` handshake, and what ``CONNECT`` carries
(authentication).

:func:`open_connection` is what :func:`~trio_actors.nats.connect` and every
reconnect call; it returns a stream whose handshake is done (a ``trio.SSLStream``
when the connection is secured) and the protocol core that parsed it (holding the
server's ``INFO``). A refused connection (an authorization error) fails here, as
:exc:`ServerError`, not later; a TLS failure fails here as :exc:`TLSError`.

TLS is used when the server's ``INFO`` says ``tls_required``, when the URL is
``tls://``, or when :class:`ConnectSettings` has a context (``tls=``); the stream is
wrapped after ``INFO`` (the NATS protocol's order), and ``CONNECT`` goes over TLS.
Authentication is at most one kind: a token, a user and password, an nkey seed
(the server's ``nonce`` signed with it), or a credentials file (a user JWT, and the
nonce signed with its seed). A URL's ``user:password@`` (or ``token@``) is that
server's, used only when no keyword credential is given.
"""

from __future__ import annotations

import base64
import re
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
import trio

from ._connection import Connection, ConnectionState
from ._protocol import NEED_DATA, ClientProtocol
from ._values import Err, Info, Ping

__all__ = ["ConnectionClosed", "ServerError", "TLSError"]

_READ_SIZE = 65_536
VERSION = "0.1.0"
_INSTALL_HINT = "pip install 'trio-actors[nats]'"


class ServerError(Exception):
    """The server sent ``-ERR`` (the message is the server's)."""


class ConnectionClosed(Exception):
    """The connection is closed: nothing more can be sent or received on it."""


class TLSError(OSError):
    """Securing a connection failed: the TLS handshake failed (the server's
    certificate is not trusted, or the server wanted the client's), or the client
    wants TLS and the server does not offer it. The message says which and what to
    change; ``__cause__`` is the ``ssl`` error, if any. An ``OSError``, so that
    :func:`~trio_actors.nats.connect` and reconnecting try the next server."""


@attrs.frozen
class ServerAddress:
    """One server of the pool: where it is, the credentials its URL carries, and
    whether its URL demands TLS (``tls://``)."""

    host: str
    port: int
    user: str | None = attrs.field(default=None, repr=False)
    password: str | None = attrs.field(default=None, repr=False)
    #: the server was announced by another server's ``INFO`` (``connect_urls``)
    discovered: bool = False
    #: the URL was ``tls://``: the connection must be secured
    tls: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'tls' if self.tls else 'nats'}://{host}:{self.port}"


def parse_url(url: object, *, discovered: bool = False) -> ServerAddress:
    """``nats://[user[:password]@]host[:port]`` (port 4222 when left out), or
    ``tls://...`` to require TLS; a bare ``host:port`` as ``INFO``'s
    ``connect_urls`` gives them. A user without a password is a token
    (``nats://s3cr3t@host``), as in the other NATS clients."""
    if not isinstance(url, str):
        raise TypeError(f"a server URL is a str such as 'nats://127.0.0.1:4222', got {url!r}")
    text = url if "://" in url else f"nats://{url}"
    parts = urlsplit(text)
    if parts.scheme not in ("nats", "tls"):
        raise ValueError(
            f"a server URL must look like nats://host:port, got {url!r} "
            "(tls://host:port to require TLS)"
        )
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the port of {url!r} is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ValueError(f"the server URL {url!r} names no host")
    return ServerAddress(
        parts.hostname,
        4222 if port is None else port,
        None if parts.username is None else unquote(parts.username),
        None if parts.password is None else unquote(parts.password),
        discovered,
        parts.scheme == "tls",
    )


# --- credentials: nkey seeds and credentials files -------------------------------------

# A decorated block of a credentials file: "-----BEGIN NATS USER JWT-----", the
# value on its own line, "------END NATS USER JWT------" (as nats-io/jwt writes it).
_BLOCK = re.compile(
    r"-{3,}\s*BEGIN ([^\r\n-]+?)\s*-{3,}\r?\n\s*([\w\-.=]+)\s*\r?\n\s*-{3,}\s*END[^\r\n]*"
)

_SEED = re.compile(r"S[A-Z2-7]{50,}")


def _nkeys() -> Any:
    """The ``nkeys`` module (the ``nats`` extra), imported when first needed."""
    try:
        import nkeys  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            f"nkey_seed= and credentials= sign with the nkeys package: {_INSTALL_HINT}"
        ) from None
    return nkeys


def _read(option: str, path: Path) -> str:
    """The text of the file ``option`` names (an ``OSError`` that says which)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        message = f"{option}: cannot read {str(path)!r}: {error.strerror}"
        raise OSError(error.errno, message) from error  # (FileNotFoundError, ...)


def _blocks(text: str) -> dict[str, str]:
    """A credentials file's decorated blocks, by the words of their BEGIN line."""
    return {label.upper(): value for label, value in _BLOCK.findall(text)}


def _user_key(option: str, seed: str, source: str) -> Any:
    """The ``nkeys.KeyPair`` of a user seed (``"SU..."``), or a ValueError saying
    that ``source`` holds none (never showing the seed)."""
    nkeys = _nkeys()
    if not seed.startswith("SU"):
        raise ValueError(
            f"{option}: {source} is not a user nkey seed (one starts with 'SU'; "
            "'SA'/'SO' are account and operator seeds, 'U...' is a public key)"
        )
    invalid = f"{option}: {source} is not a valid nkey seed"
    try:
        raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
    except ValueError:
        raise ValueError(f"{invalid} (not base32)") from None
    # (nkeys.from_seed does not check the checksum: a typo would sign as another key)
    if len(raw) != 36 or nkeys.crc16_checksum(raw[:-2]) != raw[-2:]:
        raise ValueError(f"{invalid} (its length or checksum is wrong)")
    return nkeys.from_seed(seed.encode())


def _load_nkey_seed(value: str | Path) -> Any:
    """The key pair of ``nkey_seed=``: a str that looks like a seed (``S`` and 50 or
    more base32 letters: ``"SU..."``) is the seed itself; any other str, or a Path,
    is a file holding it (alone, on a line of its own, or in a
    ``-----BEGIN USER NKEY SEED-----`` block)."""
    if isinstance(value, str) and _SEED.fullmatch(value.strip()):
        return _user_key("nkey_seed=", value.strip(), "the string given")
    path = Path(value)
    text = _read("nkey_seed=", path)
    seeds = [v for label, v in _blocks(text).items() if "SEED" in label]
    seeds += [line.strip() for line in text.splitlines() if line.strip().startswith("SU")]
    source = f"the file {str(path)!r}"
    if not seeds:
        raise ValueError(f"nkey_seed=: {source} holds no user nkey seed (a line 'SU...')")
    return _user_key("nkey_seed=", seeds[0], source)


def _load_credentials(value: str | Path) -> tuple[str, Any]:
    """The user JWT and the key pair of a credentials file (``.creds``: a
    ``NATS USER JWT`` block, then a ``USER NKEY SEED`` block)."""
    path = Path(value)
    blocks = _blocks(_read("credentials=", path))
    source = f"the file {str(path)!r}"
    jwts = [v for label, v in blocks.items() if label.endswith("JWT")]
    seeds = [v for label, v in blocks.items() if label.endswith("SEED")]
    if not jwts:
        raise ValueError(
            f"credentials=: {source} holds no '-----BEGIN NATS USER JWT-----' block "
            "(is it a .creds file made by nsc?)"
        )
    if not seeds:
        raise ValueError(f"credentials=: {source} holds no '-----BEGIN USER NKEY SEED-----' block")
    return jwts[0], _user_key("credentials=", seeds[0], source)


def _sign(key: Any, nonce: object) -> str:
    """The server's ``nonce`` signed (ed25519), base64url without padding."""
    signature: bytes = key.sign(str(nonce or "").encode())
    return base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


# --- the settings every connection of one client shares ---------------------------------


def _nonempty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _optional_str(option: str, value: object) -> None:
    if value is not None and not _nonempty_str(value):
        raise TypeError(f"{option}= is a non-empty str (or None), got {value!r}")


@attrs.frozen
class ConnectSettings:
    """What every connection of one client sends in ``CONNECT`` (and how it
    secures the stream). Checked when made: a wrong type is a ``TypeError``, more
    than one kind of credentials or an unusable seed or credentials file a
    ``ValueError``, an unreadable file an ``OSError``, and a missing ``nkeys`` an
    ``ImportError`` (each saying what was wrong). Secrets are left out of its repr.
    """

    name: str | None = None
    #: TLS: the context to wrap the stream in (used when ``INFO`` says
    #: ``tls_required``, when the URL is ``tls://``, or always when given), and the
    #: name to check the server's certificate against (default: the URL's host)
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    #: TLS before ``INFO`` (the server's ``tls { handshake_first: true }``)
    tls_handshake_first: bool = False
    #: authentication (at most one kind; a URL's ``user:password@`` is the server's own)
    token: str | None = attrs.field(default=None, repr=False)
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    nkey_seed: str | Path | None = attrs.field(default=None, repr=False)
    credentials: str | Path | None = None

    def __attrs_post_init__(self) -> None:
        if self.tls is not None and not isinstance(self.tls, ssl.SSLContext):
            raise TypeError(
                "tls= is an ssl.SSLContext (such as ssl.create_default_context(cafile=...)), "
                f"got {self.tls!r}"
            )
        if not isinstance(self.tls_handshake_first, bool):
            raise TypeError(f"tls_handshake_first= is a bool, got {self.tls_handshake_first!r}")
        for option in ("tls_hostname", "token", "user"):
            _optional_str(option, getattr(self, option))
        if self.password is not None and not isinstance(self.password, str):
            raise TypeError(f"password= is a str (or None), got {type(self.password).__name__}")
        for option in ("nkey_seed", "credentials"):
            value = getattr(self, option)
            if value is not None and not (isinstance(value, Path) or _nonempty_str(value)):
                raise TypeError(
                    f"{option}= is a non-empty str or a pathlib.Path (or None), got {value!r}"
                )
        if (self.user is None) != (self.password is None):
            given, missing = ("user", "password") if self.password is None else ("password", "user")
            raise ValueError(f"{given}= needs {missing}= too")
        kinds = self._credential_kinds()
        if len(kinds) > 1:
            raise ValueError(
                f"give one kind of credentials, got {' and '.join(kinds)} "
                "(token=, user= with password=, nkey_seed= or credentials=)"
            )
        self._keyword_credentials()  # (the seed and the file are usable: fail now, not later)

    def _credential_kinds(self) -> list[str]:
        options = ("token", "user", "nkey_seed", "credentials")
        kinds = [f"{o}=" for o in options if getattr(self, o) is not None]
        return ["user= and password=" if k == "user=" else k for k in kinds]

    def _keyword_credentials(self) -> dict[str, Any]:
        """The ``CONNECT`` options of the keyword credentials, but the signature
        (the key under ``"key"``). Reads the seed or credentials file each time (so a
        reconnect uses a file replaced meanwhile)."""
        if self.token is not None:
            return {"auth_token": self.token}
        if self.user is not None:
            return {"user": self.user, "pass": self.password}
        if self.nkey_seed is not None:
            key = _load_nkey_seed(self.nkey_seed)
            return {"nkey": key.public_key.decode(), "key": key}
        if self.credentials is not None:
            jwt, key = _load_credentials(self.credentials)
            return {"jwt": jwt, "key": key}
        return {}

    def connect_options(self, server: ServerAddress, info: dict[str, Any]) -> dict[str, Any]:
        """The ``CONNECT`` options for ``server``, whose ``INFO`` is ``info``
        (``nonce``: what an nkey or a credentials file signs)."""
        options: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "lang": "python-trio",
            "version": VERSION,
        }
        if self.name is not None:
            options["name"] = self.name
        credentials = self._keyword_credentials()
        if "key" in credentials:
            credentials["sig"] = _sign(credentials.pop("key"), info.get("nonce"))
        if not credentials and server.user is not None:
            if server.password is None:
                credentials = {"auth_token": server.user}
            else:
                credentials = {"user": server.user, "pass": server.password}
        options.update(credentials)
        return options

    def tls_context(self, server: ServerAddress, info: dict[str, Any]) -> ssl.SSLContext | None:
        """The context to secure the connection with after ``info`` (``None``: stay
        in plain TCP). The default context (``ssl.create_default_context()``: the
        system's CAs) when TLS is needed and ``tls=`` gave none.

        Raises:
            TLSError: TLS is wanted (``tls=``, a ``tls://`` URL) and the server
                offers none (neither ``tls_required`` nor ``tls_available``).
        """
        required = bool(info.get("tls_required"))
        wanted = self.tls is not None or server.tls
        if not (required or wanted):
            return None
        if not (required or info.get("tls_available")):
            why = "tls= was given" if self.tls is not None else f"the URL is {server.url}"
            raise TLSError(
                f"{server.url} does not offer TLS (its INFO has neither tls_required nor "
                f"tls_available), yet {why}: configure tls {{...}} on the server, or "
                "connect with neither tls= nor a tls:// URL"
            )
        return self.tls if self.tls is not None else ssl.create_default_context()


# --- opening a connection ----------------------------------------------------------------


async def open_connection(
    server: ServerAddress, settings: ConnectSettings, connection: Connection | None = None
) -> tuple[trio.abc.Stream, ClientProtocol]:
    """TCP to ``server``, TLS if needed, then the handshake, stepping ``connection``
    (a new one if none is given) from ``DISCONNECTED`` to ``CONNECTED``. A
    checkpoint. Returns the stream and its codec (holding the server's ``INFO``).
    On any failure the stream is closed, the connection is back to
    ``DISCONNECTED``, and the error raised (``OSError``, among them
    :exc:`TLSError`; :exc:`ServerError`, :exc:`~trio_actors.nats.ProtocolError`,
    :exc:`ConnectionClosed`)."""
    if connection is None:
        connection = Connection()
    tcp: trio.abc.Stream = await trio.open_tcp_stream(server.host, server.port)
    try:
        connection.open()  # (raises if the client closed meanwhile: the socket is closed)
        stream = await _handshake(tcp, connection, server, settings)
    except BaseException:
        connection.lost()
        await trio.aclose_forcefully(tcp)  # (closes the TLS stream's socket too)
        raise
    return stream, connection.protocol


async def _start_tls(
    stream: trio.abc.Stream, context: ssl.SSLContext, server: ServerAddress, hostname: str | None
) -> trio.SSLStream[trio.abc.Stream]:
    """Wrap ``stream`` in TLS and do the TLS handshake (the certificate checked
    against ``hostname``, by default the server's host). A checkpoint."""
    secured = trio.SSLStream(
        stream, context, server_hostname=hostname or server.host, https_compatible=False
    )
    await secured.do_handshake()
    return secured


async def _handshake(
    stream: trio.abc.Stream,
    connection: Connection,
    server: ServerAddress,
    settings: ConnectSettings,
) -> trio.abc.Stream:
    """Read INFO, secure the stream if TLS is needed, send CONNECT and a PING, and
    wait for the PONG (an ``-ERR`` on the way is raised as :exc:`ServerError`):
    the steps are ``connection``'s states. Returns the stream to go on with (the
    TLS one, if secured). A checkpoint."""
    info: dict[str, Any] = {}
    secured = False
    try:
        if settings.tls_handshake_first:
            first = settings.tls or ssl.create_default_context()
            stream = await _start_tls(stream, first, server, settings.tls_hostname)
            secured = True
        while True:
            event = connection.next_event()
            if event is NEED_DATA:
                data = await stream.receive_some(_READ_SIZE)
                if not data:
                    raise _ended(None, server, settings, info, secured)
                connection.receive_data(data)
                continue
            state = connection.state
            if state is ConnectionState.SENDING_CONNECT:  # (the INFO came)
                assert type(event) is Info
                info = event.options
                context = None if secured else settings.tls_context(server, info)
                if context is not None:
                    stream = await _start_tls(stream, context, server, settings.tls_hostname)
                    secured = True
                await stream.send_all(
                    connection.send_connect(settings.connect_options(server, info))
                )
            elif type(event) is Err:
                raise ServerError(
                    f"the server refused the connection: {event.message}"
                    + _auth_hint(settings, server, info, event.message)
                )
            elif state is ConnectionState.CONNECTED:  # (its PONG came)
                return stream
            elif type(event) is Ping:
                await stream.send_all(connection.protocol.pong())
    except trio.BrokenResourceError as error:
        cause = error.__cause__ or error  # (the ssl or socket error trio wrapped)
        raise _ended(cause, server, settings, info, secured) from cause


def _ended(
    cause: BaseException | None,
    server: ServerAddress,
    settings: ConnectSettings,
    info: dict[str, Any],
    secured: bool,
) -> TLSError | ConnectionClosed:
    """What to raise when the connection ended during the handshake, because of
    ``cause`` (``None``: the server closed it): a :exc:`TLSError` when TLS is to
    blame, saying what to change, else :exc:`ConnectionClosed`."""
    how = f"closed by {server.url}" if cause is None else f"{type(cause).__name__}: {cause}"
    if isinstance(cause, ssl.SSLCertVerificationError):
        used = (
            "the ssl.SSLContext given as tls="
            if settings.tls is not None
            else "the default context (no tls= was given, so ssl.create_default_context(): "
            "the system's CAs)"
        )
        return TLSError(
            f"TLS with {server.url} failed: {cause}. The server's certificate is not "
            f"accepted by {used}: pass tls= a context that trusts the server's CA "
            "(ssl.create_default_context(cafile=...)), and tls_hostname= if the "
            f"certificate is for another name than {settings.tls_hostname or server.host!r}"
        )
    if secured and info.get("tls_verify"):
        # (The server refuses a client without a certificate after the TLS handshake:
        # its alert may come first, or only the end of the connection.)
        return TLSError(
            f"TLS with {server.url} failed ({how}); the server verifies clients' "
            "certificates (tls_verify): does the context hold one its CA issued? "
            "context.load_cert_chain(certfile, keyfile)"
        )
    if settings.tls_handshake_first and not info:
        return TLSError(
            f"TLS with {server.url} failed ({how}); tls_handshake_first: does the "
            "server have tls { handshake_first: true }?"
        )
    if isinstance(cause, ssl.SSLError):
        return TLSError(f"TLS with {server.url} failed: {cause}")
    return ConnectionClosed(f"the connection ended during the handshake ({how})")


def _auth_hint(
    settings: ConnectSettings, server: ServerAddress, info: dict[str, Any], message: str
) -> str:
    if "authorization" not in message.lower():
        return ""
    if not settings._credential_kinds() and server.user is None and info.get("auth_required"):
        return (
            " (the server requires authentication and none was given: token=, user= and "
            "password=, nkey_seed= or credentials=)"
        )
    return ""

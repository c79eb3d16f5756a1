"""The NATS core client protocol, without I/O (as h11 is for HTTP).

A :class:`ClientProtocol` is fed the bytes the server sent (:meth:`receive_data`,
in pieces split anywhere) and hands back what they mean, one event at a time
(:meth:`next_event`): :class:`Info`, :class:`Msg`, :class:`Ping`, :class:`Pong`,
:class:`Ok`, :class:`Err`, or :data:`NEED_DATA` when the bytes so far end in the
middle of one. Its other methods make the bytes to send (``CONNECT``, ``PUB`` /
``HPUB``, ``SUB``, ``UNSUB``, ``PING``, ``PONG``), checking what they are given
first. It reads no clock and does no I/O: the transport (``_transport.py``) owns
the socket, the timers and the tasks, so everything here is tested without a server.
The values it parses to (events, headers, errors) are ``_values.py``; the checks of
what it is given, ``_checks.py``.

The wire format (https://docs.nats.io/reference/reference-protocols/nats-protocol):
a control line ends in CRLF; operation names are case-insensitive, fields are
separated by spaces or tabs; ``MSG <subject> <sid> [reply-to] <#bytes>`` and
``HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>`` are followed by
the payload (headers first for ``HMSG``) and CRLF. A header block begins
``NATS/1.0``, optionally with a status code and a description (``NATS/1.0 503``:
no responders), then ``Key: Value`` lines and an empty line.

Malformed input raises :exc:`ProtocolError` saying what was wrong, and the
protocol is then broken for good (every later call raises it again): the
connection must be closed, as a server closes one that sent it garbage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ._checks import (
    _check_published_subject,
    _check_queue,
    _check_sid,
    _payload,
    check_subject,
)
from ._values import (
    _CRLF,
    _OK,
    _PING,
    _PONG,
    Err,
    Event,
    Headers,
    Info,
    MaxPayloadExceeded,
    Msg,
    ProtocolError,
    _encode_headers,
    _parse_headers,
)

__all__ = ["MAX_CONTROL_LINE", "NEED_DATA", "ClientProtocol"]
MAX_CONTROL_LINE: Final = 4096  # bytes of a control line, CRLF excluded (the server's)


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
"""What :meth:`ClientProtocol.next_event` returns when it needs more bytes."""


# --- the protocol --------------------------------------------------------------------

_OPS: Final = {
    b"MSG": "msg",
    b"HMSG": "hmsg",
    b"PING": "ping",
    b"PONG": "pong",
    b"+OK": "ok",
    b"-ERR": "err",
    b"INFO": "info",
}
_FIELDS = re.compile(rb"[ \t]+")
# A MSG line as servers send it: ``MSG <subject> <sid> [reply-to] <#bytes>``, single
# spaces (anything else takes the general parser).
_MSG_LINE = re.compile(rb"MSG ([^ \t\r\n]+) ([0-9]+) (?:([^ \t\r\n]+) )?([0-9]+)\r\n")


class ClientProtocol:
    """One connection's client side of the NATS core protocol, without I/O.

    Feed it with :meth:`receive_data`; take events with :meth:`next_event` (or
    :meth:`events`); make the bytes to send with :meth:`connect`, :meth:`publish`,
    :meth:`subscribe`, :meth:`unsubscribe`, :meth:`ping`, :meth:`pong`. Nothing here
    blocks, reads a clock or is a checkpoint.

    Attributes:
        server_info: the options of the latest ``INFO`` (``{}`` before the first).
        max_payload: the server's limit on a message (headers and payload), from
            ``INFO``; ``None`` before it.
        headers_supported: whether the server takes ``HPUB`` (from ``INFO``).
    """

    __slots__ = (
        "_broken",
        "_buffer",
        "_eof",
        "_max_payload",
        "_parts",
        "_parts_size",
        "_pending",
        "_server_info",
        "_start",
        "max_control_line",
    )

    def __init__(self, *, max_control_line: int = MAX_CONTROL_LINE) -> None:
        self.max_control_line = max_control_line
        self._server_info: dict[str, Any] = {}
        self._max_payload: int | None = None
        # What is parsed: _buffer from _start on. Bytes received since are kept in
        # _parts until parsing needs them (see _join).
        self._buffer = b""
        self._start = 0
        self._parts: list[bytes] = []
        self._parts_size = 0
        # A MSG/HMSG control line parsed, waiting for its payload: (subject, sid,
        # reply, header bytes or -1, total bytes).
        self._pending: tuple[str, int, str | None, int, int] | None = None
        self._eof = False
        self._broken: ProtocolError | None = None

    # --- what the server sent ---------------------------------------------------------

    @property
    def server_info(self) -> dict[str, Any]:
        return self._server_info

    @server_info.setter
    def server_info(self, options: dict[str, Any]) -> None:
        self._server_info = options
        limit = options.get("max_payload")
        valid = isinstance(limit, int) and not isinstance(limit, bool)
        self._max_payload = limit if valid else None

    @property
    def max_payload(self) -> int | None:
        return self._max_payload

    @property
    def headers_supported(self) -> bool:
        return bool(self.server_info.get("headers", False))

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the server, split anywhere; ``b""`` when the connection has
        ended (then :meth:`next_event` says if it ended in the middle of something).
        """
        self._check_usable()
        if self._eof:
            raise ProtocolError("receive_data after the end of the stream (b'')")
        if data:
            self._parts.append(bytes(data))
            self._parts_size += len(data)
        else:
            self._eof = True

    def events(self) -> list[Event]:
        """Every event the bytes so far hold, in order.

        The fast path of the reader (what a client spends its time on): ``MSG``
        lines in the form servers send them (single spaces) are matched by one
        regular expression, their payloads sliced, all in one loop; anything else
        (``HMSG``, ``PING``, ``INFO``, unusual spacing, an error) goes through
        :meth:`next_event`'s general parser, which raises for what is malformed.
        Measured (``benchmarks/nats_client.py``, ``NATS-parse``): see
        ``docs/performance``.

        Raises:
            ProtocolError: as :meth:`next_event`.
        """
        self._check_usable()
        if self._parts:
            self._join()
        found: list[Event] = []
        append = found.append
        match = _MSG_LINE.match
        limit = self.max_control_line + 2
        buffer = self._buffer
        size = len(buffer)
        start = self._start
        while True:
            if self._pending is None and (line := match(buffer, start)) is not None:
                subject, sid, reply, count = line.groups()
                begin = line.end()
                end = begin + int(count)
                if (
                    end + 2 <= size
                    and buffer[end : end + 2] == _CRLF
                    and begin - start <= limit
                    and subject.isascii()
                    and (reply is None or reply.isascii())
                ):
                    append(
                        Msg(
                            subject.decode(),
                            int(sid),
                            None if reply is None else reply.decode(),
                            buffer[begin:end],
                        )
                    )
                    start = end + 2
                    continue
            # Anything else, and anything the fast path doubts: the general parser.
            self._start = start
            event = self.next_event()
            if event is NEED_DATA:
                return found
            append(event)  # type: ignore[arg-type]
            buffer = self._buffer
            size = len(buffer)
            start = self._start

    def next_event(self) -> Event | _NeedData:
        """The next event in the bytes received, or :data:`NEED_DATA`.

        Raises:
            ProtocolError: what was received is not the protocol (or the stream
                ended inside an event).
        """
        self._check_usable()
        if self._parts:
            self._join()
        try:
            event = self._parse()
        except ProtocolError as error:
            self._broken = error
            raise
        if event is NEED_DATA and self._eof and (self._pending or self._unparsed()):
            self._broken = ProtocolError(
                f"the stream ended inside a {'message' if self._pending else 'control line'}"
                f" ({self._unparsed()} bytes unparsed)"
            )
            raise self._broken
        return event

    def _unparsed(self) -> int:
        return len(self._buffer) - self._start + self._parts_size

    def _join(self) -> None:
        """Join the bytes received to what is left unparsed -- unless they cannot
        complete the payload being waited for yet: a large message arriving in many
        pieces is then joined once, not copied again with every piece."""
        unparsed = len(self._buffer) - self._start
        pending = self._pending
        if pending is not None and unparsed + self._parts_size < pending[4] + 2:
            return
        if unparsed:
            self._parts.insert(0, self._buffer[self._start :])
        self._buffer = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._start = 0
        self._parts = []
        self._parts_size = 0

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ProtocolError(f"the protocol is broken (earlier: {self._broken})")

    def _parse(self) -> Event | _NeedData:
        buffer = self._buffer
        start = self._start
        pending = self._pending
        if pending is not None:
            return self._payload_of(pending)
        end = buffer.find(_CRLF, start)
        if end < 0:
            if len(buffer) - start > self.max_control_line:
                raise ProtocolError(
                    f"a control line longer than {self.max_control_line} bytes: "
                    f"{buffer[start : start + 40]!r}..."
                )
            return NEED_DATA
        if end - start > self.max_control_line:
            raise ProtocolError(
                f"a control line of {end - start} bytes, over the limit of "
                f"{self.max_control_line}: {buffer[start : start + 40]!r}..."
            )
        line = buffer[start:end]
        self._start = end + 2
        head, _, rest = line.partition(b" ")
        if b"\t" in head:
            head, _, more = head.partition(b"\t")
            rest = more + b" " + rest if rest else more
        op = _OPS.get(head.upper())
        if op == "msg" or op == "hmsg":
            self._pending = self._message_line(op, rest, line)
            return self._payload_of(self._pending)
        if op == "ping" and not rest.strip():
            return _PING
        if op == "pong" and not rest.strip():
            return _PONG
        if op == "ok" and not rest.strip():
            return _OK
        if op == "err":
            return Err(_unquote(rest.strip()).decode("utf-8", "replace"))
        if op == "info":
            return self._info(rest, line)
        raise ProtocolError(f"not a NATS server operation: {line[:80]!r}")

    def _message_line(
        self, op: str, rest: bytes, line: bytes
    ) -> tuple[str, int, str | None, int, int]:
        fields = _FIELDS.split(rest.strip())
        try:
            if op == "msg":
                if len(fields) == 3:
                    subject, sid, size = fields
                    reply = None
                elif len(fields) == 4:
                    subject, sid, reply_bytes, size = fields
                    reply = reply_bytes.decode()
                else:
                    raise ProtocolError(
                        f"MSG needs <subject> <sid> [reply-to] <#bytes>, got {line[:120]!r}"
                    )
                header_size, total = -1, _count(size, "#bytes", line)
            else:
                if len(fields) == 4:
                    subject, sid, hsize, size = fields
                    reply = None
                elif len(fields) == 5:
                    subject, sid, reply_bytes, hsize, size = fields
                    reply = reply_bytes.decode()
                else:
                    raise ProtocolError(
                        "HMSG needs <subject> <sid> [reply-to] <#header bytes> <#total bytes>, "
                        f"got {line[:120]!r}"
                    )
                header_size = _count(hsize, "#header bytes", line)
                total = _count(size, "#total bytes", line)
                if header_size > total:
                    raise ProtocolError(
                        f"HMSG with more header bytes ({header_size}) than in all ({total}): "
                        f"{line[:120]!r}"
                    )
            return subject.decode(), _count(sid, "sid", line), reply, header_size, total
        except UnicodeDecodeError:
            raise ProtocolError(f"a message's subject is not UTF-8: {line[:120]!r}") from None

    def _payload_of(self, pending: tuple[str, int, str | None, int, int]) -> Event | _NeedData:
        subject, sid, reply, header_size, total = pending
        buffer = self._buffer
        start = self._start
        if len(buffer) - start < total + 2:
            return NEED_DATA
        end = start + total
        if buffer[end : end + 2] != _CRLF:
            raise ProtocolError(
                f"the payload of a message to {subject!r} is not followed by CRLF "
                f"(its size says {total} bytes): {buffer[end : end + 10]!r}"
            )
        self._pending = None
        self._start = end + 2
        if header_size < 0:
            return Msg(subject, sid, reply, buffer[start:end])
        headers, status, description = _parse_headers(buffer[start : start + header_size])
        return Msg(
            subject,
            sid,
            reply,
            buffer[start + header_size : end],
            headers,
            status,
            description,
        )

    def _info(self, rest: bytes, line: bytes) -> Info:
        try:
            options = json.loads(rest)
        except ValueError as error:
            raise ProtocolError(f"INFO is not JSON ({error}): {line[:120]!r}") from None
        if not isinstance(options, dict):
            raise ProtocolError(f"INFO is not a JSON object: {line[:120]!r}")
        self.server_info = options
        return Info(options)

    # --- what the client sends --------------------------------------------------------

    def connect(self, options: Mapping[str, Any]) -> bytes:
        """``CONNECT`` with ``options`` (JSON): the transport passes ``verbose``,
        ``pedantic``, ``headers``, ``no_responders``, credentials, ``name``,
        ``lang``, ``version``, ``protocol``."""
        self._check_usable()
        return b"CONNECT " + json.dumps(dict(options), separators=(",", ":")).encode() + _CRLF

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> bytes:
        """``PUB`` (or ``HPUB`` with ``headers``) of ``payload`` to ``subject``.

        Raises:
            TypeError, ValueError: a bad subject, reply subject, payload or header.
            MaxPayloadExceeded: larger than the server's ``max_payload``.
            ProtocolError: headers, and the server does not take them.
        """
        if self._broken is not None:
            self._check_usable()
        _check_published_subject(subject, "subject")
        if reply is not None:
            _check_published_subject(reply, "reply subject")
        data = payload if type(payload) is bytes else _payload(payload)
        if headers is None:
            size = len(data)
            if self._max_payload is not None and size > self._max_payload:
                self._check_size(size, subject)
            if reply:
                return f"PUB {subject} {reply} {size}\r\n".encode() + data + _CRLF
            return f"PUB {subject} {size}\r\n".encode() + data + _CRLF
        if self.server_info and not self.headers_supported:
            raise ProtocolError("this server does not take headers (its INFO says headers: false)")
        block = _encode_headers(headers)
        size = len(block) + len(data)
        self._check_size(size, subject)
        head = (
            f"HPUB {subject} {reply} {len(block)} {size}"
            if reply
            else f"HPUB {subject} {len(block)} {size}"
        )
        return b"".join((head.encode(), _CRLF, block, data, _CRLF))

    def _check_size(self, size: int, subject: str) -> None:
        limit = self.max_payload
        if limit is not None and size > limit:
            raise MaxPayloadExceeded(
                f"a message of {size} bytes to {subject!r} is over the server's "
                f"max_payload of {limit} bytes"
            )

    def subscribe(self, sid: int, subject: str, *, queue: str | None = None) -> bytes:
        """``SUB`` of ``subject`` (wildcards allowed) as subscription ``sid``, in
        queue group ``queue`` if given."""
        self._check_usable()
        _check_sid(sid)
        check_subject(subject, wildcards=True)
        if queue is None:
            return f"SUB {subject} {sid}\r\n".encode()
        return f"SUB {subject} {_check_queue(queue)} {sid}\r\n".encode()

    def unsubscribe(self, sid: int, *, max_msgs: int | None = None) -> bytes:
        """``UNSUB`` of subscription ``sid``: at once, or after ``max_msgs`` messages
        in all have been delivered to it."""
        self._check_usable()
        _check_sid(sid)
        if max_msgs is None:
            return f"UNSUB {sid}\r\n".encode()
        if isinstance(max_msgs, bool) or not isinstance(max_msgs, int) or max_msgs < 1:
            raise ValueError(f"max_msgs must be a positive int or None, got {max_msgs!r}")
        return f"UNSUB {sid} {max_msgs}\r\n".encode()

    def ping(self) -> bytes:
        """``PING``: the server answers with a :class:`Pong` (a flush, or a check
        that it is alive)."""
        self._check_usable()
        return b"PING\r\n"

    def pong(self) -> bytes:
        """``PONG``: the answer to the server's :class:`Ping`."""
        self._check_usable()
        return b"PONG\r\n"


def _count(field: bytes, what: str, line: bytes) -> int:
    if not field.isdigit():
        raise ProtocolError(
            f"{what} must be a non-negative integer, got {field!r} in {line[:120]!r}"
        )
    return int(field)


def _unquote(text: bytes) -> bytes:
    if len(text) >= 2 and text[:1] == text[-1:] and text[:1] in (b"'", b'"'):
        return text[1:-1]
    return text

"""The sans-io NATS protocol core: parsing any split of the server's bytes, refusing
malformed input with an error that says what was wrong, and the bytes of every
client operation. No server, no I/O, no clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_actors import nats
from trio_actors.nats import (
    NEED_DATA,
    ClientProtocol,
    Err,
    Event,
    Headers,
    Info,
    MaxPayloadExceeded,
    Msg,
    Ok,
    Ping,
    Pong,
    ProtocolError,
)

INFO = b'INFO {"server_id":"S1","max_payload":1048576,"headers":true,"proto":1}\r\n'


def hmsg(subject: str, sid: int, block: bytes, data: bytes = b"") -> bytes:
    """An HMSG as a server sends it, its byte counts computed."""
    line = f"HMSG {subject} {sid} {len(block)} {len(block) + len(data)}\r\n".encode()
    return line + block + data + b"\r\n"


def parse(*chunks: bytes) -> list[Event]:
    protocol = ClientProtocol()
    events: list[Event] = []
    for chunk in chunks:
        protocol.receive_data(chunk)
        events.extend(protocol.events())
    return events


# --- what the server sends -------------------------------------------------------------


def test_every_server_operation_is_parsed() -> None:
    stream = (
        INFO
        + b"MSG orders.new 7 5\r\nhello\r\n"
        + b"MSG orders.new 7 _INBOX.abc.1 0\r\n\r\n"
        + hmsg("reply.x", 9, b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB:  b \r\n\r\n", b"hey")
        + b"HMSG _INBOX.abc.2 3 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
        + b"PING\r\nPONG\r\n+OK\r\n-ERR 'Slow Consumer'\r\n"
    )
    events = parse(stream)
    assert events[0] == Info(json.loads(INFO[5:]))
    assert events[1] == Msg("orders.new", 7, None, b"hello")
    assert events[2] == Msg("orders.new", 7, "_INBOX.abc.1", b"")
    message = events[3]
    assert isinstance(message, Msg)
    assert (message.subject, message.sid, message.data) == ("reply.x", 9, b"hey")
    assert message.status is None
    assert message.headers is not None
    assert message.headers["A"] == "1"
    assert message.headers.get_all("A") == ["1", "2"]
    assert dict(message.headers) == {"A": "1", "B": "b"}
    no_responders = events[4]
    assert isinstance(no_responders, Msg)
    assert (no_responders.status, no_responders.data, dict(no_responders.headers or {})) == (
        503,
        b"",
        {},
    )
    assert events[5:] == [Ping(), Pong(), Ok(), Err("Slow Consumer")]


def test_operation_names_are_case_insensitive_and_fields_may_be_tabs() -> None:
    events = parse(b"ping\r\nmsg\tfoo  1\t 2\r\nhi\r\n-err 'x'\r\n")
    assert events == [Ping(), Msg("foo", 1, None, b"hi"), Err("x")]


def test_a_status_line_with_a_description() -> None:
    block = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\n\r\n"
    line = f"HMSG a 1 {len(block)} {len(block)}\r\n".encode()
    (message,) = parse(line + block + b"\r\n")
    assert isinstance(message, Msg)
    assert (message.status, message.description) == (408, "Request Timeout")
    assert message.headers == Headers([("Nats-Pending-Messages", "3")])


def test_info_updates_the_limits() -> None:
    protocol = ClientProtocol()
    assert protocol.max_payload is None
    assert not protocol.headers_supported
    protocol.receive_data(INFO)
    assert list(protocol.events()) == [Info(json.loads(INFO[5:]))]
    assert protocol.max_payload == 1048576
    assert protocol.headers_supported
    assert protocol.server_info["server_id"] == "S1"


def test_a_payload_may_hold_crlf_and_binary_bytes() -> None:
    payload = b"\r\nMSG x 1 2\r\n\x00\xff"
    (message,) = parse(f"MSG a.b 2 {len(payload)}\r\n".encode() + payload + b"\r\n")
    assert isinstance(message, Msg)
    assert message.data == payload


def test_need_data_until_a_whole_event_is_there() -> None:
    protocol = ClientProtocol()
    for piece in (b"MS", b"G a 1 ", b"3\r\nab", b"c\r"):
        protocol.receive_data(piece)
        assert protocol.next_event() is NEED_DATA
    protocol.receive_data(b"\n")
    assert protocol.next_event() == Msg("a", 1, None, b"abc")
    assert protocol.next_event() is NEED_DATA


# --- any split of the stream (hypothesis) --------------------------------------------

tokens = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
subjects = st.lists(tokens, min_size=1, max_size=4).map(".".join)
header_names = st.text(alphabet="ABCabc-_0123456789", min_size=1, max_size=10)
header_values = st.text(alphabet="abc xyz012!?=", max_size=12).map(str.strip)


@st.composite
def server_events(draw: st.DrawFn) -> tuple[bytes, Event]:
    """One server operation: its bytes and the event they must parse to."""
    kind = draw(st.sampled_from(["msg", "hmsg", "ping", "pong", "ok", "err", "info"]))
    if kind in ("msg", "hmsg"):
        subject = draw(subjects)
        sid = draw(st.integers(1, 10**6))
        reply = draw(st.none() | subjects)
        data = draw(st.binary(max_size=64))
        reply_part = f" {reply}" if reply else ""
        if kind == "msg":
            line = f"MSG {subject} {sid}{reply_part} {len(data)}\r\n".encode()
            return line + data + b"\r\n", Msg(subject, sid, reply, data)
        items = draw(st.lists(st.tuples(header_names, header_values), max_size=4))
        status = draw(st.none() | st.sampled_from([503, 408, 100]))
        headers = Headers(items)
        block = b"NATS/1.0" + (f" {status}".encode() if status else b"") + b"\r\n"
        block += b"".join(f"{k}: {v}\r\n".encode() for k, v in items) + b"\r\n"
        hline = f"HMSG {subject} {sid}{reply_part} {len(block)} {len(block) + len(data)}\r\n"
        return hline.encode() + block + data + b"\r\n", Msg(
            subject, sid, reply, data, headers, status
        )
    if kind == "err":
        text = draw(st.text(alphabet="abc XYZ", min_size=1, max_size=20)).strip() or "x"
        return f"-ERR '{text}'\r\n".encode(), Err(text)
    if kind == "info":
        options = {"server_id": draw(tokens), "max_payload": draw(st.integers(1, 10**7))}
        return b"INFO " + json.dumps(options).encode() + b"\r\n", Info(options)
    return {"ping": (b"PING\r\n", Ping()), "pong": (b"PONG\r\n", Pong()), "ok": (b"+OK\r\n", Ok())}[
        kind
    ]


@given(st.lists(server_events(), max_size=12), st.data())
def test_any_split_of_the_stream_gives_the_same_events(
    operations: list[tuple[bytes, Event]], data: st.DataObject
) -> None:
    stream = b"".join(raw for raw, _ in operations)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    pieces = zip([0, *cuts], [*cuts, len(stream)], strict=True)
    chunks = [stream[a:b] for a, b in pieces if b > a]  # (b"" would mean the end)
    assert parse(*chunks) == [event for _, event in operations]


# Random bytes rarely hold a CRLF, and without one the parser only waits for more:
# the garbage is built of protocol-looking fragments too, so most of it is parsed.
_FRAGMENTS = st.sampled_from(
    [b"\r\n", b"MSG ", b"HMSG ", b"PING", b"INFO ", b"-ERR ", b" ", b"\t", b"1", b"12", b"a.b"]
)


@given(st.lists(st.one_of(st.binary(max_size=8), _FRAGMENTS), max_size=40).map(b"".join))
def test_random_bytes_parse_or_fail_with_a_protocol_error(garbage: bytes) -> None:
    protocol = ClientProtocol()
    protocol.receive_data(garbage)
    errors: list[str] = []
    try:
        list(protocol.events())
    except ProtocolError as error:
        errors.append(str(error))
    assert all(errors)  # an error always says what was wrong


# --- malformed input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "complaint"),
    [
        (b"HELLO there\r\n", r"not a NATS server operation: b'HELLO there'"),
        (b"MSG a 1\r\n", r"MSG needs <subject> <sid> \[reply-to\] <#bytes>"),
        (b"MSG a one 3\r\nabc\r\n", r"sid must be a non-negative integer, got b'one'"),
        (b"MSG a 1 -3\r\n", r"#bytes must be a non-negative integer, got b'-3'"),
        (b"MSG a 1 3\r\nabcd\r\n", r"payload of a message to 'a' is not followed by CRLF"),
        (b"HMSG a 1 10 5\r\n", r"more header bytes \(10\) than in all \(5\)"),
        (b"HMSG a 1 6 6\r\nHTTP/1\r\n", r"a header block must begin with NATS/1.0"),
        (hmsg("a", 1, b"NATS/1.0 5x\r\n\r\n"), r"a header status must be three digits"),
        (hmsg("a", 1, b"NATS/1.0\r\nnocolon\r\n\r\n"), r"'Name: value', got b'nocolon'"),
        (hmsg("a", 1, b"NATS/1.0\r\nA: 1\r\n"), r"must end with an empty line"),
        (b"INFO {not json\r\n", r"INFO is not JSON"),
        (b"INFO [1]\r\n", r"INFO is not a JSON object"),
        (b"PING extra\r\n", r"not a NATS server operation"),
    ],
)
def test_malformed_input_is_refused_saying_what_was_wrong(stream: bytes, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        parse(stream)


def test_a_control_line_over_the_limit_is_refused_before_it_ends() -> None:
    protocol = ClientProtocol(max_control_line=64)
    protocol.receive_data(b"MSG " + b"a" * 100)
    with pytest.raises(ProtocolError, match=r"a control line longer than 64 bytes"):
        protocol.next_event()


def test_after_a_protocol_error_the_protocol_stays_broken() -> None:
    protocol = ClientProtocol()
    protocol.receive_data(b"BOGUS\r\nPING\r\n")
    with pytest.raises(ProtocolError, match="not a NATS server operation"):
        protocol.next_event()
    with pytest.raises(ProtocolError, match=r"broken \(earlier: not a NATS server operation"):
        protocol.next_event()
    with pytest.raises(ProtocolError, match="broken"):
        protocol.publish("a", b"x")


@pytest.mark.parametrize(
    ("stream", "inside"), [(b"PIN", "control line"), (b"MSG a 1 5\r\nab", "message")]
)
def test_the_stream_ending_inside_an_event_is_an_error(stream: bytes, inside: str) -> None:
    protocol = ClientProtocol()
    protocol.receive_data(stream)
    assert protocol.next_event() is NEED_DATA
    protocol.receive_data(b"")
    with pytest.raises(ProtocolError, match=f"the stream ended inside a {inside}"):
        protocol.next_event()


def test_the_stream_ending_between_events_is_no_error() -> None:
    protocol = ClientProtocol()
    protocol.receive_data(b"PING\r\n")
    protocol.receive_data(b"")
    assert list(protocol.events()) == [Ping()]
    with pytest.raises(ProtocolError, match="after the end of the stream"):
        protocol.receive_data(b"PONG\r\n")


# --- what the client sends ---------------------------------------------------------------


def connected(info: dict[str, Any] | None = None) -> ClientProtocol:
    protocol = ClientProtocol()
    options = {"max_payload": 100, "headers": True} if info is None else info
    protocol.receive_data(b"INFO " + json.dumps(options).encode() + b"\r\n")
    list(protocol.events())
    return protocol


def test_the_bytes_of_each_client_operation() -> None:
    protocol = connected()
    assert protocol.connect({"verbose": False, "headers": True}) == (
        b'CONNECT {"verbose":false,"headers":true}\r\n'
    )
    assert protocol.publish("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert protocol.publish("a.b", b"", reply="_INBOX.x") == b"PUB a.b _INBOX.x 0\r\n\r\n"
    assert protocol.publish("a", b"yo", headers={"K": "v"}) == (
        b"HPUB a 18 20\r\nNATS/1.0\r\nK: v\r\n\r\nyo\r\n"
    )
    assert protocol.subscribe(4, "a.*.>") == b"SUB a.*.> 4\r\n"
    assert protocol.subscribe(5, "jobs", queue="workers") == b"SUB jobs workers 5\r\n"
    assert protocol.unsubscribe(4) == b"UNSUB 4\r\n"
    assert protocol.unsubscribe(5, max_msgs=1) == b"UNSUB 5 1\r\n"
    assert (protocol.ping(), protocol.pong()) == (b"PING\r\n", b"PONG\r\n")


def test_what_the_client_sends_parses_back_on_a_server_s_terms() -> None:
    # An HPUB's header block is what a server hands on in HMSG: it parses back.
    protocol = connected()
    sent = protocol.publish("a", b"body", headers=Headers([("X", "1"), ("X", "2")]))
    block_and_body = sent.split(b"\r\n", 1)[1][:-2]
    relayed = f"HMSG a 1 {len(block_and_body) - 4} {len(block_and_body)}\r\n".encode()
    (message,) = parse(relayed + block_and_body + b"\r\n")
    assert isinstance(message, Msg)
    assert (message.data, message.headers) == (b"body", Headers([("X", "1"), ("X", "2")]))


@pytest.mark.parametrize(
    ("call", "error", "complaint"),
    [
        (lambda p: p.publish("", b""), ValueError, "subject must not be empty"),
        (lambda p: p.publish("a b", b""), ValueError, "must not contain whitespace"),
        (lambda p: p.publish("a..b", b""), ValueError, "has an empty token"),
        (lambda p: p.publish("a.*", b""), ValueError, "only subscriptions may"),
        (lambda p: p.publish(b"a", b""), TypeError, "subject must be a str"),
        (lambda p: p.publish("a", "text"), TypeError, "a payload must be bytes, got str"),
        (lambda p: p.publish("a", b"", reply="r s"), ValueError, "reply subject must not"),
        (lambda p: p.publish("a", b"", headers={"a:b": "1"}), ValueError, "header name"),
        (lambda p: p.publish("a", b"", headers={"A": "x\r\n"}), ValueError, "CR or LF"),
        (lambda p: p.subscribe(1, "a.>.b"), ValueError, "'>' the whole last one"),
        (lambda p: p.subscribe(1, "a.b*"), ValueError, "'\\*' must be a whole token"),
        (lambda p: p.subscribe(0, "a"), ValueError, "a subscription id must be a positive int"),
        (lambda p: p.subscribe(1, "a", queue=""), ValueError, "queue must be a non-empty name"),
        (lambda p: p.unsubscribe(1, max_msgs=0), ValueError, "max_msgs must be a positive int"),
    ],
)
def test_bad_client_input_is_refused_saying_what_was_wrong(
    call: Any, error: type[Exception], complaint: str
) -> None:
    with pytest.raises(error, match=complaint):
        call(connected())


def test_a_message_over_max_payload_is_refused_naming_size_and_limit() -> None:
    protocol = connected()
    assert protocol.publish("a", b"x" * 100)  # at the limit: sent
    with pytest.raises(MaxPayloadExceeded, match=r"101 bytes to 'a' is over .* max_payload of 100"):
        protocol.publish("a", b"x" * 101)
    with pytest.raises(MaxPayloadExceeded, match=r"of 101 bytes"):  # headers count too
        protocol.publish("a", b"x" * 83, headers={"K": "v"})  # 18 + 83


def test_headers_to_a_server_without_them_are_refused() -> None:
    protocol = connected({"headers": False})
    with pytest.raises(ProtocolError, match="does not take headers"):
        protocol.publish("a", b"", headers={"K": "v"})


def test_the_package_exports_the_protocol() -> None:
    assert nats.ClientProtocol is ClientProtocol
    assert set(nats.__all__) >= {"ClientProtocol", "Msg", "ProtocolError", "NEED_DATA"}


def test_checked_subjects_are_remembered_and_numbered_replies_share_their_prefix() -> None:
    from trio_actors.nats import _checks

    _checks._CHECKED_SUBJECTS.clear()
    protocol = ClientProtocol()
    protocol.publish("orders.new", b"")
    protocol.publish("x", b"", reply="_INBOX.abc.1")
    assert {"orders.new", "_INBOX.abc"} <= set(_checks._CHECKED_SUBJECTS)
    protocol.publish("x", b"", reply="_INBOX.abc.2")  # (the prefix, not each reply)
    assert "_INBOX.abc.2" not in _checks._CHECKED_SUBJECTS
    for bad in ("_INBOX.abc..2", "_INBOX.abc.2 ", "_INBOX.abc.*", "_INBOX.abc.2.>"):
        with pytest.raises(ValueError, match="reply subject"):
            protocol.publish("x", b"", reply=bad)
    for number in range(_checks._CHECKED_SUBJECTS_MAX + 10):
        protocol.publish(f"s{number}", b"")
    assert len(_checks._CHECKED_SUBJECTS) <= _checks._CHECKED_SUBJECTS_MAX

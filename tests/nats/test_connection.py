"""The connection's state as pure state, without trio or a server (in the manner of
h11's ``tests/test_state.py``): each test drives a :class:`Connection` with bytes
and calls, and asserts its whole state after each step."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest

from trio_actors.nats import NEED_DATA, Info, Msg, Ping, Pong, ProtocolError, _connection
from trio_actors.nats._connection import (
    TRANSITIONS,
    Connection,
    ConnectionState,
    ConnectionStateError,
    Input,
)

S = ConnectionState
INFO = b'INFO {"server_id":"s1","max_payload":1048576,"headers":true}\r\n'


class Waiter:
    """A flush's or a request's waiter: records that it was woken."""

    def __init__(self) -> None:
        self.woken = False

    def set(self) -> None:
        self.woken = True


class Sub:
    """A subscription in the sid table: records what it is handed."""

    def __init__(self, sid: int, subject: str, queue: str | None = None) -> None:
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.dropped = 0
        self.messages: list[bytes] = []
        self.ended = False

    def _deliver(self, message: Msg) -> None:
        self.messages.append(message.data)

    def _end(self) -> None:
        self.ended = True


def state(conn: Connection) -> dict[str, Any]:
    """The whole state of ``conn`` (what the tests compare after each step)."""
    return {
        "state": conn.state,
        "out": [bytes(frame) for frame in conn.out],
        "pending_bytes": conn.pending_bytes,
        "sids": list(conn.subscriptions),
        "limits": dict(conn._limits),
        "pongs": list(conn.pongs),
        "outstanding_pings": conn.outstanding_pings,
        "inbox_sid": conn.inbox_sid,
        "requests": list(conn.requests),
    }


def receive(conn: Connection, data: bytes) -> list[object]:
    """Feed ``data`` and take its events one at a time (as the handshake does)."""
    conn.receive_data(data)
    found: list[object] = []
    while (event := conn.next_event()) is not NEED_DATA:
        found.append(event)
    return found


def connected(**kwargs: Any) -> Connection:
    conn = Connection(inbox_prefix="_INBOX.t", **kwargs)
    conn.open()
    receive(conn, INFO)
    conn.send_connect({"verbose": False})
    receive(conn, b"PONG\r\n")
    return conn


def empty(state_: ConnectionState, **changes: Any) -> dict[str, Any]:
    return {
        "state": state_,
        "out": [],
        "pending_bytes": 0,
        "sids": [],
        "limits": {},
        "pongs": [],
        "outstanding_pings": 0,
        "inbox_sid": None,
        "requests": [],
        **changes,
    }


def test_the_handshake_is_info_then_connect_and_ping_then_pong() -> None:
    conn = Connection()
    assert state(conn) == empty(S.DISCONNECTED)
    conn.open()
    assert state(conn) == empty(S.AWAITING_INFO)
    [info] = receive(conn, INFO)
    assert info == Info({"server_id": "s1", "max_payload": 1048576, "headers": True})
    assert state(conn) == empty(S.SENDING_CONNECT)
    assert conn.protocol.max_payload == 1048576
    assert conn.send_connect({"verbose": False}) == b'CONNECT {"verbose":false}\r\nPING\r\n'
    assert state(conn) == empty(S.AWAITING_PONG)
    assert receive(conn, b"PING\r\n") == [Ping()]  # (the transport answers it)
    assert state(conn) == empty(S.AWAITING_PONG)
    assert receive(conn, b"PONG\r\n") == [Pong()]
    assert state(conn) == empty(S.CONNECTED)
    assert conn.counters.handshakes == 1


def drive(conn: Connection, event: Input) -> None:
    """Make ``event`` happen to ``conn``."""
    if event is Input.OPEN:
        conn.open()
    elif event is Input.INFO:
        receive(conn, INFO)
    elif event is Input.SEND_CONNECT:
        conn.send_connect({})
    elif event is Input.PONG:
        receive(conn, b"PONG\r\n")
    elif event is Input.LOST:
        conn.lost()
    else:
        conn.close()


def in_state(target: ConnectionState) -> Connection:
    conn = Connection(inbox_prefix="_INBOX.t")
    path = {
        S.DISCONNECTED: [],
        S.AWAITING_INFO: [Input.OPEN],
        S.SENDING_CONNECT: [Input.OPEN, Input.INFO],
        S.AWAITING_PONG: [Input.OPEN, Input.INFO, Input.SEND_CONNECT],
        S.CONNECTED: [Input.OPEN, Input.INFO, Input.SEND_CONNECT, Input.PONG],
        S.CLOSED: [Input.CLOSE],
    }[target]
    for event in path:
        drive(conn, event)
    assert conn.state is target
    return conn


@pytest.mark.parametrize(
    ("start", "event"),
    [(s, e) for s in ConnectionState for e in Input if e not in TRANSITIONS[s]],
    ids=lambda x: x.name,
)
def test_an_illegal_event_raises_naming_it_and_the_state_and_changes_nothing(
    start: ConnectionState, event: Input
) -> None:
    conn = in_state(start)
    before = state(conn)
    with pytest.raises(ConnectionStateError, match=f"{event.value} .*in state {start.name}"):
        drive(conn, event)
    assert state(conn) == before


@pytest.mark.parametrize(
    ("start", "event"),
    [(s, e) for s in ConnectionState for e in Input if e in TRANSITIONS[s]],
    ids=lambda x: x.name,
)
def test_every_legal_event_goes_where_the_table_says(start: ConnectionState, event: Input) -> None:
    conn = in_state(start)
    drive(conn, event)
    assert conn.state is TRANSITIONS[start][event]


def test_a_stray_pong_before_the_server_s_info_is_ignored_as_it_always_was() -> None:
    conn = in_state(S.AWAITING_INFO)
    receive(conn, b"PONG\r\n")
    assert state(conn) == empty(S.AWAITING_INFO)


def test_a_server_pong_while_connect_is_being_sent_is_the_server_s_protocol_error() -> None:
    conn = in_state(S.SENDING_CONNECT)
    with pytest.raises(ProtocolError, match="PONG is not allowed in state SENDING_CONNECT"):
        receive(conn, b"PONG\r\n")
    assert state(conn) == empty(S.SENDING_CONNECT)


def test_keepalive_pings_go_stale_and_a_pong_answers_the_oldest_ping() -> None:
    conn = connected()
    assert conn.keepalive_ping(2) == b"PING\r\n"
    assert state(conn) == empty(S.CONNECTED, pongs=[None], outstanding_pings=1)
    first = Waiter()
    assert conn.flush_ping(first) == b"PING\r\n"
    assert conn.keepalive_ping(2) == b"PING\r\n"
    assert state(conn) == empty(S.CONNECTED, pongs=[None, first, None], outstanding_pings=2)
    assert conn.keepalive_ping(2) is None  # stale: two unanswered
    assert state(conn) == empty(S.CONNECTED, pongs=[None, first, None], outstanding_pings=2)
    conn.receive_data(b"PONG\r\n")
    assert conn.events() == [Pong()]
    assert not first.woken  # (the oldest PING was the keep-alive's)
    assert state(conn) == empty(S.CONNECTED, pongs=[first, None], outstanding_pings=0)
    conn.receive_data(b"PONG\r\n")
    conn.events()
    assert first.woken
    assert state(conn) == empty(S.CONNECTED, pongs=[None], outstanding_pings=0)


def test_a_lost_stream_keeps_only_whole_messages_not_yet_handed_to_it() -> None:
    conn = connected()
    frames: list[bytes | bytearray] = [
        b"SUB a 1\r\n",
        b"PUB a 1\r\nx\r\n",
        bytearray(b"PUB b 1\r\ny\r\n"),  # the rest of a frame the socket took in part
        b"PING\r\n",
        b"HPUB c 12 13\r\nNATS/1.0\r\n\r\nz\r\n",
    ]
    conn.out.extend(frames)
    conn.pending_bytes = sum(map(len, frames))
    conn.lost()
    kept = [b"PUB a 1\r\nx\r\n", b"HPUB c 12 13\r\nNATS/1.0\r\n\r\nz\r\n"]
    assert state(conn) == empty(S.DISCONNECTED, out=kept, pending_bytes=sum(map(len, kept)))
    assert conn.unsent_messages() == 2


def test_requests_are_muxed_on_one_inbox_and_lost_only_if_their_message_went_out() -> None:
    conn = connected()
    assert conn.inbox_subscription() == b"SUB _INBOX.t.* 1\r\n"
    assert conn.inbox_subscription() is None  # (once)
    went, waits = Waiter(), Waiter()
    gone = conn.add_request(went)  # its PUB handed to the socket: frame None
    kept = conn.add_request(waits)
    kept.frame = b"PUB q _INBOX.t.2 1\r\n?\r\n"
    conn.out.append(kept.frame)
    conn.pending_bytes = len(kept.frame)
    assert (gone.subject, kept.subject) == ("_INBOX.t.1", "_INBOX.t.2")
    assert state(conn) == empty(
        S.CONNECTED,
        out=[kept.frame],
        pending_bytes=len(kept.frame),
        inbox_sid=1,
        requests=["_INBOX.t.1", "_INBOX.t.2"],
    )
    conn.lost()
    assert (went.woken, gone.lost) == (True, True)
    assert (waits.woken, kept.lost) == (False, False)
    conn.remove_request(gone)
    conn.open()
    receive(conn, INFO)
    conn.send_connect({})
    receive(conn, b"PONG\r\n")
    assert state(conn) == empty(
        S.CONNECTED,
        out=[b"SUB _INBOX.t.* 1\r\n", kept.frame],
        pending_bytes=len(b"SUB _INBOX.t.* 1\r\n") + len(kept.frame),
        inbox_sid=1,
        requests=["_INBOX.t.2"],
    )
    conn.receive_data(b"MSG _INBOX.t.2 1 2\r\nok\r\nMSG _INBOX.t.2 1 3\r\nbis\r\n")
    assert conn.events() == []
    assert waits.woken
    assert kept.reply is not None
    assert kept.reply.data == b"ok"  # (the first reply only)
    conn.receive_data(b"MSG _INBOX.t.9 1 1\r\n?\r\n")  # nobody waits for it: dropped
    assert conn.events() == []
    assert conn.counters.messages_in == 3


def test_after_a_reconnect_subscriptions_then_inbox_then_kept_messages_then_flush_pings() -> None:
    conn = connected()
    a, b = Sub(conn.next_sid(), "a.*"), Sub(conn.next_sid(), "b", queue="q")
    conn.subscribe(a)
    conn.subscribe(b, max_msgs=3)
    conn.inbox_subscription()
    conn.receive_data(b"MSG b 2 1\r\n1\r\n")
    conn.events()
    flushed = Waiter()
    conn.flush_ping(flushed)
    conn.keepalive_ping(2)
    conn.lost()
    assert conn.outstanding_pings == 0
    conn.out.append(b"PUB x 1\r\n1\r\n")  # (published while disconnected)
    conn.pending_bytes += 12
    conn.open()
    receive(conn, INFO)
    conn.send_connect({})
    assert state(conn)["out"] == [b"PUB x 1\r\n1\r\n"]  # (nothing replayed before the PONG)
    receive(conn, b"PONG\r\n")
    replay = [
        b"SUB a.* 1\r\n",
        b"SUB b q 2\r\n",
        b"UNSUB 2 2\r\n",  # (what is left of its max_msgs)
        b"SUB _INBOX.t.* 3\r\n",
        b"PUB x 1\r\n1\r\n",
        b"PING\r\n",  # (the flush's; the keep-alive's is forgotten)
    ]
    assert state(conn) == empty(
        S.CONNECTED,
        out=replay,
        pending_bytes=sum(map(len, replay)),
        sids=[1, 2],
        limits={2: 2},
        pongs=[flushed],
        inbox_sid=3,
    )
    assert conn.counters.reconnects == 1


def test_a_subscription_with_max_msgs_ends_after_that_many() -> None:
    conn = connected()
    sub = Sub(conn.next_sid(), "s")
    assert conn.subscribe(sub, max_msgs=2) == b"SUB s 1\r\nUNSUB 1 2\r\n"
    assert state(conn) == empty(S.CONNECTED, sids=[1], limits={1: 2})
    conn.receive_data(b"MSG s 1 1\r\na\r\n")
    conn.events()
    assert state(conn) == empty(S.CONNECTED, sids=[1], limits={1: 1})
    conn.receive_data(b"MSG s 1 1\r\nb\r\nMSG s 1 1\r\nc\r\n")
    conn.events()
    assert (sub.messages, sub.ended) == ([b"a", b"b"], True)  # (c: after the end)
    assert state(conn) == empty(S.CONNECTED)


def test_unsubscribing_takes_the_sid_out_of_the_table() -> None:
    conn = connected()
    sub = Sub(conn.next_sid(), "s")
    conn.subscribe(sub, max_msgs=5)
    assert conn.unsubscribe(1) is sub
    assert conn.unsubscribe(1) is None
    assert conn.unsubscribe_frame(1) == b"UNSUB 1\r\n"
    assert state(conn) == empty(S.CONNECTED)


def test_an_err_is_recorded_and_returned_with_the_other_events() -> None:
    conn = connected()
    conn.receive_data(b"-ERR 'Slow Consumer'\r\nPING\r\n" + INFO)
    events = conn.events()
    assert [type(e).__name__ for e in events] == ["Err", "Ping", "Info"]
    assert (conn.error, conn.last_error, conn.counters.server_errors) == (
        "Slow Consumer",
        "Slow Consumer",
        1,
    )
    assert state(conn) == empty(S.CONNECTED)


def test_closing_wakes_every_flush_and_request_and_ends_every_subscription() -> None:
    conn = connected()
    sub = Sub(conn.next_sid(), "s")
    conn.subscribe(sub)
    flush, reply = Waiter(), Waiter()
    conn.flush_ping(flush)
    conn.inbox_subscription()
    conn.add_request(reply)
    conn.close()
    assert (flush.woken, reply.woken, sub.ended) == (True, True, True)
    assert state(conn) == empty(S.CLOSED, sids=[1], inbox_sid=2, requests=["_INBOX.t.1"])
    conn.receive_data(b"PONG\r\n" + INFO)  # (what the stream still brings: ignored)
    conn.events()
    conn.close()
    assert conn.state is S.CLOSED


def test_malformed_bytes_leave_a_fresh_codec_with_the_same_limits() -> None:
    conn = connected()
    broken = conn.protocol
    conn.receive_data(b"NONSENSE\r\n")
    with pytest.raises(ProtocolError, match="not a NATS server operation"):
        conn.events()
    assert conn.protocol is not broken
    assert conn.protocol.max_payload == 1048576
    assert conn.protocol.publish("a", b"x") == b"PUB a 1\r\nx\r\n"


def test_the_connection_imports_no_trio_and_does_no_io() -> None:
    tree = ast.parse(inspect.getsource(_connection))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and not node.level
    }
    assert imported <= {"__future__", "collections", "enum", "itertools", "secrets", "typing"}

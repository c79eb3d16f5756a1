"""What arrives, parsed: one parser per subject kind a node listens on.

Each parser takes a message as the connection hands it and returns the value its
handler needs, or a :class:`~._bad_input.Bad` saying which kind of input could not
be used and why -- it never raises (any ``Exception`` of a decoder, ``RecursionError``
from a deeply nested document included, is caught here, at the narrowest point;
``trio.Cancelled`` and other ``BaseException``\\ s are not: a parser has no
checkpoint). The handlers (``_node.py``, ``_requests.py``, ...) are given only values
of the shapes below; ``_bad_input.listen`` joins the two and counts what is bad.

========================================  ==========================================
subject (``_subjects.py``)                parsed as
========================================  ==========================================
``P.n.<node>.<incarnation>.<sender>``     :class:`Envelope`: ``TELL`` or ``SENDS`` (its tells),
                                          ``ASK``, ``CANCEL``, ``STOP``, ``WATCH``,
                                          ``CONFIRM`` (its question)
``P.r.<node>.<incarnation>.<from>.<n>``   :class:`Reply` (or NATS's no-responders)
``P.u.<node>.<incarnation>.<n>``          ``(n, no responders?)``
``P.t.<node>.<incarnation>.<from>.<n>``   ``(n, no responders?, error bytes | None,
                                          from)``
``P.a.<from>.<inc>.<node>.<incarnation>`` ``(from, inc, (record, start, skipped, settled,
                                          marks))``
``P.hb.<node>.<incarnation>``             ``((node, incarnation), "beat" | "bye" | "hello")``
``P.names.<from>.<inc>``                  ``(kind, name, node, incarnation, path, n)``
``P.name.<hex>.<sender>``                 the subject to answer on
``P.shared.<hex>.<sender>``               ``(kind, body, the subject to answer on)``
                                          (``_groups.py``'s parser, which uses
                                          :meth:`Frames.lookup`)
``$SYS.ACCOUNT.*.DISCONNECT``             the node it was, or ``None`` (not a node's)
========================================  ==========================================

A message whose subject and content disagree -- a node speaking for another -- is
``Bad("forged")``: a request whose reply subject is not its sender's own (of its
kind's sort, and for this node), a confirm round naming another node than its
sender, a claim or release of a name for another node than its publisher, a lookup
whose reply subject is not its sender's, an advisory of a connection whose user is
not the node it is named after (where nodes authenticate as themselves).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Final, NamedTuple

import msgspec

from .._interrupts import protect_module
from ._bad_input import Bad
from ._codec import Overflow, WireOnTheWire
from ._subjects import (
    ASK,
    BEATS,
    CANCEL,
    CONFIRM,
    LOAD,
    SENDS,
    SPAWN,
    STOP,
    TELL,
    WATCH,
    Beat,
    Peer,
    Subjects,
    last_token,
    peer_of_connection,
    publisher_of,
)

if TYPE_CHECKING:
    from ..nats import Msg
    from ._codec import WireRef

__all__ = ["Ack", "Envelope", "Frames", "Reply", "number_at_end"]

Ack = tuple[str, int, list[tuple[int, int]], int, list[tuple[int, int]]]
"""An acknowledgement of tells: ``(record, start, skipped, settled, [(actor, mark),
...])`` (``_taken_in.py``)."""

_envelope = msgspec.msgpack.Decoder(tuple[int, int, str, msgspec.Raw])
_tells = msgspec.msgpack.Decoder(tuple[int, list[tuple[int, str, msgspec.Raw]]])
_drain = msgspec.msgpack.Decoder(bool)
_Numbers = Annotated[list[int], msgspec.Meta(max_length=1_000)]  # (_confirm.MAX_NUMBERS)
_confirm_ask = msgspec.msgpack.Decoder(tuple[str, str, _Numbers, _Numbers, str, int, _Numbers])
_reply = msgspec.msgpack.Decoder(tuple[bool, msgspec.Raw])
_wire_ref = msgspec.msgpack.Decoder(WireOnTheWire)
_Indices = Annotated[list[int], msgspec.Meta(max_length=64)]  # (_outbox.TELLS_PER_MESSAGE)
_ended = msgspec.msgpack.Decoder(_Indices)  # (the ends of a message's tells: its indices)
_error = msgspec.msgpack.Decoder(bytes | None)
_Skipped = Annotated[list[tuple[int, int]], msgspec.Meta(max_length=64)]  # (_tracked.MAX_SKIPPED)
_Marks = Annotated[list[tuple[int, int]], msgspec.Meta(max_length=4096)]  # (MARKS_PER_ACK)
_ack = msgspec.msgpack.Decoder(tuple[str, int, _Skipped, int, _Marks])
_announcement = msgspec.msgpack.Decoder(tuple[int, str, str, str, str, int, Overflow])

_NEEDS_REPLY: Final = frozenset({ASK, CANCEL, WATCH, CONFIRM, SPAWN, LOAD})
_KINDS: Final = frozenset({TELL, ASK, CANCEL, STOP, WATCH, CONFIRM, SENDS, SPAWN, LOAD})
_TELLS: Final = frozenset({TELL, SENDS})
# (claim, release, ask for names: _names.py; a shared name's claim, release: _groups.py)
_ANNOUNCEMENTS: Final = frozenset({0, 1, 2, 3, 4})
_NO_BODY: Final = msgspec.Raw(b"")
_NOT_NUMBERED = "its subject does not end in a number this node gave"


class Envelope(NamedTuple):
    """A message for the node's actors: its ``kind``, the export number and path
    of its actor, its ``body`` (a ``TELL``'s tells ``[(number, path, body)]``, a
    ``STOP``'s drain flag, the codec's bytes otherwise) and its reply subject."""

    kind: int
    number: int
    path: str
    body: Any
    reply: str | None
    sender: str  # (the node that sent it: its subject's last token)


class Reply(NamedTuple):
    """A reply to request ``number``: ``ok`` and ``body`` (the value or the
    error, the codec's bytes; a lookup's ref), or ``ok is None``: NATS's
    no-responders (nothing served the request's subject)."""

    number: int
    ok: bool | None
    body: msgspec.Raw
    answerer: str  # (the node that answered: ``-`` for NATS's no-responders to a lookup)


def number_at_end(subject: str) -> int | None:
    """The number that ends a numbered subject (``P.r.<node>.<incarnation>.<n>``),
    or ``None`` if its last token is not one this node could have given."""
    token = subject.rpartition(".")[2]
    if 0 < len(token) <= 18 and token.isascii() and token.isdigit():
        return int(token)
    return None


def _valid_reply(reply: str | None) -> bool:
    """Whether ``reply`` is a subject this node may publish an answer to (what
    ``nats.check_subject`` checks, in a few substring tests: this is on every ask's
    path)."""
    return (
        reply is not None
        and reply.split() == [reply]  # (not empty, no whitespace)
        and "*" not in reply
        and ">" not in reply
        and ".." not in reply
        and reply[0] != "."
        and reply[-1] != "."
    )


class Frames:
    """The parsers of one node (some need its cluster's subjects)."""

    __slots__ = ("_by_user", "_cluster", "_me", "_subjects", "_tell_replies", "_terminations")

    def __init__(self, cluster: str, subjects: Subjects, me: str, *, by_user: bool) -> None:
        self._cluster = cluster
        self._subjects = subjects
        self._me = me  # (this node's name)
        self._by_user = by_user  # (nodes authenticate as users named after them)
        self._tell_replies = subjects.tell_replies()
        self._terminations = subjects.watch_replies()

    # --- P.n.<node>.<incarnation> ---------------------------------------------------

    def envelope(self, message: Msg) -> Envelope | Bad:
        body: Any
        try:
            kind, number, path, raw = _envelope.decode(message.data)
            if kind in _TELLS:
                body = _tells.decode(raw)
            elif kind == STOP:
                body = _drain.decode(raw)
            elif kind == CONFIRM:  # (a confirm round's question: _confirm.py)
                body = _confirm_ask.decode(raw)
            else:
                body = raw
        except Exception as error:
            return Bad("messages", error)
        reply = message.reply
        if kind not in _KINDS:
            return Bad("messages", f"unknown kind {kind} of message")
        if (
            kind not in _TELLS
            and (reply is not None or kind in _NEEDS_REPLY)
            and not _valid_reply(reply)
        ):
            return Bad("messages", f"no valid reply subject: {reply!r}")
        sender = last_token(message.subject)
        if reply is not None and not self._replies_to_sender(kind, sender, reply):
            return Bad("forged", f"from {sender!r}, a reply subject not its own: {reply!r}")
        if kind == CONFIRM and body[0] != sender:
            return Bad("forged", f"a confirm round from {sender!r} naming {body[0]!r}")
        return Envelope(kind, number, path, body, reply, sender)

    def _replies_to_sender(self, kind: int, sender: str, reply: str) -> bool:
        """Whether ``reply`` is ``sender``'s own and of ``kind``'s sort, for this
        node -- so that nobody makes this node answer into a third node's requests,
        acknowledge another's tells, or report a stop as another node's."""
        replies, unreachable, terminations = self._subjects.sender_replies(sender)
        if kind in _TELLS:
            return reply.startswith(unreachable)
        if kind == WATCH:
            return reply.startswith(terminations) and reply.rsplit(".", 2)[1] == self._me
        return reply.startswith(replies) and reply.rsplit(".", 2)[1] == self._me

    def tell_sender(self, reply: str) -> Peer | None:
        """The node whose tells came with ``reply`` (``P.u.<node>.<incarnation>.<n>``),
        or ``None``: not a node's."""
        if not reply.startswith(self._tell_replies):
            return None
        tokens = reply[len(self._tell_replies) :].split(".")
        if len(tokens) != 3 or not all(tokens):
            return None
        return (tokens[0], tokens[1])

    def watcher(self, reply: str) -> Peer | Bad:
        """The node that watches with ``reply`` (``P.t.<node>.<incarnation>.<this
        node>.<n>``)."""
        tokens = reply[len(self._terminations) :].split(".")
        if not reply.startswith(self._terminations) or len(tokens) != 4 or not all(tokens):
            return Bad("watches", f"its reply subject is not a node's: {reply!r}")
        return (tokens[0], tokens[1])

    # --- numbered subjects: replies, bounces, terminations ------------------------

    @staticmethod
    def reply(message: Msg) -> Reply | Bad:
        number = number_at_end(message.subject)
        if number is None:
            return Bad("replies", _NOT_NUMBERED)
        answerer = message.subject.rsplit(".", 2)[1]
        if message.status == 503:
            return Reply(number, None, _NO_BODY, answerer)
        try:
            ok, body = _reply.decode(message.data)
        except Exception as error:
            return Bad("replies", error)
        return Reply(number, ok, body, answerer)

    @staticmethod
    def wire_ref(body: msgspec.Raw) -> WireRef | Bad:
        """The ref a lookup's reply holds."""
        try:
            return _wire_ref.decode(body)
        except Exception as error:
            return Bad("replies", error)

    @staticmethod
    def ended(body: msgspec.Raw) -> list[int] | Bad:
        """Which tells of a message to a shared name its taker says have ended
        (their indices in the message)."""
        try:
            return _ended.decode(body)
        except Exception as error:
            return Bad("replies", error)

    @staticmethod
    def bounce(message: Msg) -> tuple[int, bool] | Bad:
        number = number_at_end(message.subject)
        if number is None:
            return Bad("bounces", _NOT_NUMBERED)
        return (number, message.status == 503)

    @staticmethod
    def termination(message: Msg) -> tuple[int, bool, bytes | None, str] | Bad:
        number = number_at_end(message.subject)
        if number is None:
            return Bad("terminations", _NOT_NUMBERED)
        watched = message.subject.rsplit(".", 2)[1]  # (the node that answers)
        if message.status == 503:
            return (number, True, None, watched)
        try:
            return (number, False, _error.decode(message.data), watched)
        except Exception as error:
            return Bad("terminations", error)

    # --- control: acknowledgements, heartbeats, names, advisories -------------------

    @staticmethod
    def ack(message: Msg) -> tuple[str, str, Ack] | Bad:
        """The node that acknowledges (its subject's), and what: the record, its
        start, skipped ranges, settled mark and marks per actor (``_taken_in.py``)."""
        try:
            ack = _ack.decode(message.data)
        except Exception as error:
            return Bad("acks", error)
        return (*publisher_of(message.subject), ack)

    @staticmethod
    def heartbeat(message: Msg) -> tuple[Peer, Beat] | Bad:
        _prefix, _, rest = message.subject.partition(".hb.")
        node, _, incarnation = rest.partition(".")
        beat = BEATS.get(bytes(message.data)) if len(message.data) <= 5 else None
        if not node or not incarnation or "." in incarnation or beat is None:
            return Bad(
                "heartbeats", f"neither a heartbeat, bye nor hello: {bytes(message.data[:32])!r}"
            )
        return ((node, incarnation), beat)

    @staticmethod
    def announcement(message: Msg) -> tuple[int, str, str, str, str, int, int] | Bad:
        try:
            announcement = _announcement.decode(message.data)
        except Exception as error:
            return Bad("announcements", error)
        if announcement[0] not in _ANNOUNCEMENTS:
            return Bad("announcements", f"unknown kind {announcement[0]}")
        publisher = publisher_of(message.subject)
        if announcement[0] != 2 and (announcement[2], announcement[3]) != publisher:
            return Bad("forged", f"{publisher} announced a name for {announcement[2:4]}")
        return announcement

    def lookup(self, message: Msg) -> str | Bad:
        """Where to answer a lookup: its reply subject is its sender's,
        ``P.r.<sender>.<incarnation>.-.<n>``; answered as this node,
        ``P.r.<sender>.<incarnation>.<this node>.<n>``."""
        reply = message.reply
        if reply is None or not _valid_reply(reply):
            return Bad("lookups", f"no valid reply subject: {reply!r}")
        start, dash, number = reply.rpartition(".-.")
        sender = last_token(message.subject)
        if not dash or not start.startswith(self._subjects.sender_replies(sender)[0]):
            return Bad("forged", f"a lookup from {sender!r} answered to {reply!r}")
        return f"{start}.{self._me}.{number}"

    def advisory(self, message: Msg) -> Peer | Bad | None:
        """The node whose connection a disconnect advisory says ended; ``None``: not
        a node of this cluster's (another client's, another cluster's)."""
        try:
            client = json.loads(message.data)["client"]
            name = client.get("name", "")
            user = client.get("user")
        except Exception as error:  # (RecursionError from a deeply nested one too)
            return Bad("advisories", f"{type(error).__name__}: {error}")
        peer = peer_of_connection(self._cluster, name)
        if peer is not None and self._by_user and user != peer[0]:
            # (a connection's name is the client's choice; its user the server's word)
            return Bad("forged", f"the connection named {name!r} was user {user!r}'s")
        return peer


protect_module(globals())

"""What a node says on the wire: its subjects, and the kinds of message to an actor.

Subjects (``P`` is ``ta.<cluster name>``; ``X`` is the node, ``I`` its
incarnation). A node subscribes to its own with a callback, so a message goes from
the connection's reader straight to a mailbox. **Every subject a node publishes on
names the publishing node** -- its control messages in the token after the kind
(``P.<kind>.X...``), its messages to another node's actors in the last token --
or is the reply subject of a message it received. So a server that lets each node
publish only on subjects carrying its own name (``docs/security.rst``: the
permissions ``trio-actors secure`` writes) makes the subject the publisher's
proof of identity; receivers take the sender from the subject, never from the
payload (where a payload names a node too, it must be the subject's, else the
message is dropped as forged, and counted as ``BadInputCounts.forged``).

=====================================  ===========  ==================================
subject                                published    what
                                       by
=====================================  ===========  ==================================
``P.n.<to>.<inc>.<from>``              ``from``     messages for ``to``'s actors:
                                                    tells, asks, cancellations of
                                                    asks, stops, watches; and the
                                                    confirm rounds' questions
                                                    (``_confirm.py``), and requests
                                                    to the node itself: spawns and
                                                    questions about its load
                                                    (``_spawning.py``). The receiver
                                                    takes a request's reply subject
                                                    only if it is ``from``'s own
                                                    (below): nobody makes a node
                                                    answer into a third's requests.
                                                    One subject per incarnation of
                                                    ``to``: a ref to its previous
                                                    life reaches nobody (NATS's
                                                    no-responders)
``P.r.X.I.<to>.<n>``                   ``to``       replies to X's asks, stops,
                                                    confirm rounds and lookups
                                                    (``_requests.py``): the reply
                                                    subject of request ``n`` to node
                                                    ``to``, which X takes from ``to``
                                                    only. A lookup goes to no one
                                                    node: its reply subject has
                                                    ``-``, which the node answering
                                                    replaces with its own name
``P.t.X.I.<watched>.<n>``              <watched>    the stop of an actor of node
                                                    ``<watched>`` that X watches
                                                    (``_watches.py``): a ``WATCH``
                                                    carries it as its reply subject;
                                                    answered once, when the actor
                                                    stops (NATS answers
                                                    no-responders if that node is
                                                    gone). X takes it only from the
                                                    node it watches
``P.u.X.I.<n>``                        the server   the no-responders answers to X's
                                                    tells (each message of tells
                                                    carries one as its reply subject:
                                                    ``n`` is the number of its last
                                                    tell), dead letters
                                                    "unreachable" (``_tells.py``)
``P.a.<from>.<inc>.X.I``               ``from``     ``from`` acknowledges how many of
                                                    X's tells it has taken in
                                                    (``_tells.py``)
``P.hb.X.I``                           X            X's heartbeats, every
                                                    ``Cluster.heartbeat`` seconds,
                                                    its ``hello`` (its first, which
                                                    every node answers with a
                                                    heartbeat: ``_members.py``) and
                                                    its ``bye`` (``_peers.py``)
``P.names.X.I``                        X            X's claims and releases of names
                                                    (``_names.py``)
``P.name.<hex of the name>.<from>``    ``from``     a lookup of a registered name:
                                                    the node holding it answers with
                                                    the ref; when the node dies, its
                                                    subscriptions go with its
                                                    connection, so the name is free
``P.shared.<hex of the name>.<from>``  ``from``     a tell or an ask to a shared name
                                                    (``_groups.py``): every node
                                                    serving it subscribes in one
                                                    queue group, so the server gives
                                                    each message to one member; its
                                                    reply subject has ``-``, as a
                                                    lookup's, which the taker
                                                    replaces with its own name
``P.s.X``                              a monitor    a request for X's busiest actors
                                                    (its statistics service:
                                                    ``_monitoring.py``; with the
                                                    ``$SRV.PING|INFO|STATS`` subjects
                                                    of NATS's service API)
``P.m.<monitor>.X.<n>``                X            X's answer to a monitor's request
                                                    ``n``: the request's reply subject
                                                    names X, or ``-``, which X
                                                    replaces with its own name
=====================================  ===========  ==================================

A message to an actor is a msgpack array ``[kind, export number, path, body]``:
the export number says which actor (``_exports.py``); the body is the codec's
bytes. Tells travel together: a ``TELL``'s body is ``[[export number, path, body],
...]``, the tells to one node that waited together for the connection's writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._link import Told

__all__ = [
    "ASK",
    "BEATS",
    "CANCEL",
    "CONFIRM",
    "DISCONNECT_ADVISORIES",
    "NONE",
    "LOAD",
    "SENDS",
    "SPAWN",
    "STOP",
    "TELL",
    "WATCH",
    "Beat",
    "Peer",
    "Subjects",
    "connection_name",
    "encode",
    "last_token",
    "peer_of_connection",
    "publisher_of",
]

TELL: Final = 0
ASK: Final = 1
CANCEL: Final = 2
STOP: Final = 3
WATCH: Final = 4
CONFIRM: Final = 5  # (to the node itself: what it holds of the sender's; _confirm.py)
SENDS: Final = 6  # (tells from ``send``: into a full bounded mailbox, they wait for room)
SPAWN: Final = 7  # (to the node itself: spawn an actor there; _spawning.py)
LOAD: Final = 8  # (to the node itself: may it spawn a class, how many actors it has)

encode = msgspec.msgpack.Encoder().encode
NONE: Final = msgspec.Raw(encode(None))
"""An empty body (``CANCEL``, ``WATCH``; a stop's answer)."""

DISCONNECT_ADVISORIES: Final = "$SYS.ACCOUNT.*.DISCONNECT"

Peer = tuple[str, str]
"""A node's (name, incarnation)."""

Beat = Literal["beat", "bye", "hello"]
"""What a node says on its heartbeat subject: a heartbeat, its ``bye`` (it leaves),
or its ``hello`` (its first heartbeat: it has just joined, and every node answers
at once with a heartbeat of its own, ``_members.py``)."""

BEATS: Final[Mapping[bytes, Beat]] = {b"": "beat", b"bye": "bye", b"hello": "hello"}
"""The payloads of the heartbeat subject, and what each says."""


def tells_frame(kind: int, sequence: int, record: str, first: int, tells: Sequence[Told]) -> bytes:
    """A message of tells on the wire (``TELL`` or ``SENDS``): numbered ``sequence``
    in its link's ``record`` (``_link.py``), whose oldest message not yet
    acknowledged is ``first`` (a receiver that begins the record begins it there),
    each tell ``[export number, path, body]``.

    The tells are joined as bytes, each its actor's :func:`tell_header` and its
    body, not encoded as a list of ``msgspec.Raw``: 117 -> 45 ns per tell (timeit,
    a message of 64), a tenth of a tell's cost to its sender in R2's burst."""
    count = len(tells)
    parts = [bytes((0x90 | count,)) if count < 16 else b"\xdc" + count.to_bytes(2, "big")]
    for cell, _message, body in tells:  # (msgpack: an array of 16 bits' length at most)
        parts.append(cell.tell_header)
        parts.append(body)
    return encode((kind, sequence, record, (first, msgspec.Raw(b"".join(parts)))))


def tell_header(eid: int, path: str) -> bytes:
    """The msgpack bytes a tell to the actor of export number ``eid`` at ``path``
    begins with in a message of tells, before its body: a remote cell keeps them."""
    return b"\x93" + encode(eid) + encode(path)


def connection_name(cluster: str, node: str, incarnation: str) -> str:
    """The name a node's NATS connection gives the server (so that the system
    account's disconnect advisory says which node incarnation it was)."""
    return f"ta.{cluster}.{node}.{incarnation}"


def peer_of_connection(cluster: str, name: object) -> tuple[str, str] | None:
    """The (node, incarnation) a connection name is of, in ``cluster``; or ``None``."""
    if not isinstance(name, str):
        return None
    prefix, _, rest = name.partition(f"ta.{cluster}.")
    node, dot, incarnation = rest.partition(".")
    if prefix or not dot or not node or not incarnation or "." in incarnation:
        return None
    return (node, incarnation)


def last_token(subject: str) -> str:
    """The last token of ``subject`` (the sending node of ``P.n...`` and
    ``P.name...``)."""
    return subject.rpartition(".")[2]


def publisher_of(subject: str) -> Peer:
    """The (node, incarnation) a control subject ``P.<kind>.<node>.<incarnation>...``
    names as its publisher (``("", "")`` if it has too few tokens)."""
    tokens = subject.split(".", 5)
    if len(tokens) < 5:
        return ("", "")
    return (tokens[3], tokens[4])


_ADDRESSED: Final = frozenset({"n", "r", "t"})


class Subjects:
    """The NATS subjects of one cluster (the module docstring's table)."""

    __slots__ = ("_sender_replies", "prefix")

    def __init__(self, cluster: str) -> None:
        self.prefix = f"ta.{cluster}"
        # (a sender's own reply prefixes, by its name: checked per request)
        self._sender_replies: dict[str, tuple[str, str, str]] = {}

    def node(self, node: str, incarnation: str) -> str:
        """The start of ``node``'s actors' subjects (one per sender: :meth:`to_node`)."""
        return f"{self.prefix}.n.{node}.{incarnation}"

    def to_node(self, node: str, incarnation: str, sender: str) -> str:
        """Where ``sender`` publishes to ``node``'s actors."""
        return f"{self.prefix}.n.{node}.{incarnation}.{sender}"

    def replies(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.r.{node}.{incarnation}"

    def addressee(self, subject: str) -> Peer | None:
        """The node a message on ``subject`` is for, where its order after this
        node's tells to that node matters: its actors' (``n``), its requests'
        replies (``r``) and its watches' stop notices (``t``); else ``None``."""
        tokens = subject[len(self.prefix) + 1 :].split(".", 3)
        if len(tokens) >= 3 and tokens[0] in _ADDRESSED:
            return (tokens[1], tokens[2])
        return None

    def unreachable(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.u.{node}.{incarnation}"

    def terminations(self, node: str, incarnation: str, watched: str) -> str:
        """The start of the reply subjects of ``node``'s watches of ``watched``'s
        actors."""
        return f"{self.prefix}.t.{node}.{incarnation}.{watched}"

    def name(self, name: str) -> str:
        """The subjects of the lookups of ``name`` (one per asking node)."""
        return f"{self.prefix}.name.{name.encode().hex() or '-'}.*"

    def lookup(self, name: str, sender: str) -> str:
        """Where ``sender`` looks ``name`` up."""
        return f"{self.prefix}.name.{name.encode().hex() or '-'}.{sender}"

    def shared(self, name: str) -> str:
        """The subjects of the messages to shared name ``name`` (one per sending
        node; its members subscribe in one queue group: :meth:`shared_group`)."""
        return f"{self.prefix}.shared.{name.encode().hex() or '-'}.*"

    def to_shared(self, name: str, sender: str) -> str:
        """Where ``sender`` tells or asks shared name ``name``."""
        return f"{self.prefix}.shared.{name.encode().hex() or '-'}.{sender}"

    @staticmethod
    def shared_group(name: str) -> str:
        """The queue group of shared name ``name``'s members."""
        return name.encode().hex() or "-"

    def names(self, node: str, incarnation: str) -> str:
        """Where ``node`` announces its names."""
        return f"{self.prefix}.names.{node}.{incarnation}"

    def all_names(self) -> str:
        return f"{self.prefix}.names.*.*"

    def acks(self, node: str, incarnation: str) -> str:
        """The acknowledgements of ``node``'s tells, from any node."""
        return f"{self.prefix}.a.*.*.{node}.{incarnation}"

    def acks_of(self, sender: Peer, unreachable: str) -> str:
        """Where ``sender`` acknowledges the tells of the node whose
        :meth:`unreachable` subject this is."""
        return f"{self.prefix}.a.{sender[0]}.{sender[1]}.{unreachable[len(self.prefix) + 3 :]}"

    def tell_replies(self) -> str:
        """The start of any node's :meth:`unreachable` subjects."""
        return f"{self.prefix}.u."

    def watch_replies(self) -> str:
        """The start of any node's :meth:`terminations` subjects."""
        return f"{self.prefix}.t."

    def sender_replies(self, sender: str) -> tuple[str, str, str]:
        """The starts of ``sender``'s own reply subjects: its requests' replies,
        its tells' no-responders answers, its watches' (``P.r.<sender>.``,
        ``P.u.<sender>.``, ``P.t.<sender>.``). A node answers a request only on
        its sender's own."""
        found = self._sender_replies.get(sender)
        if found is None:
            if len(self._sender_replies) > 4096:  # (a bound: peers come and go)
                self._sender_replies.clear()
            prefix = self.prefix
            found = self._sender_replies[sender] = (
                f"{prefix}.r.{sender}.",
                f"{prefix}.u.{sender}.",
                f"{prefix}.t.{sender}.",
            )
        return found

    def heartbeat(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.hb.{node}.{incarnation}"

    def heartbeats(self) -> str:
        return f"{self.prefix}.hb.*.*"


protect_module(globals())

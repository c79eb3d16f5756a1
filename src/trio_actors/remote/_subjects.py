"""What a node says on the wire: its subjects, and the kinds of message to an actor.

Subjects (``P`` is ``ta.<cluster name>``); a node subscribes to its own with a
callback, so a message goes from the connection's reader straight to a mailbox:

* ``P.n.<node>.<incarnation>`` -- messages for the node's actors: tells, asks,
  cancellations of asks, stops, watches; and the confirm rounds' questions to the
  node itself (``_confirm.py``). One subject per node *incarnation*: a
  node that restarts gets a new one, so a ref to its previous life reaches nobody
  (NATS's no-responders) and never a successor.
* ``P.r.<node>.<incarnation>.<n>`` -- replies to the node's asks, stops and
  lookups (``_requests.py``).
* ``P.t.<node>.<incarnation>.<n>`` -- stops of remote actors this node watches
  (``_watches.py``): a ``WATCH`` carries it as its reply subject; the watched
  actor's node answers there once, when the actor stops (at once if it has), and
  NATS answers no-responders there if that node is gone.
* ``P.u.<node>.<incarnation>.<n>`` -- the no-responders answers to its tells: each
  message of tells carries one as its reply subject (``n``: the number of its last
  tell), so tells to a node (or an incarnation) that is gone come back and become
  ``DeadLetter(reason="unreachable")`` here (``_tells.py``).
* ``P.a.<node>.<incarnation>`` -- acknowledgements of the tells it sent: how many
  each receiving node has taken in (``_tells.py``).
* ``P.name.<hex of the name>`` -- a registered name: the node holding it answers
  lookups with the ref; when the node dies, its subscriptions go with its
  connection, so the name is free. ``P.names``: the claims and releases of names
  (``_names.py``).
* ``P.hb.<node>.<incarnation>`` -- heartbeats: every node publishes one every
  ``Cluster.heartbeat`` seconds (and ``bye`` when it leaves); what a node hears
  there is the input of its peer table (``_peers.py``).

A message to an actor is a msgpack array ``[kind, export number, path, body]``:
the export number says which actor (``_exports.py``); the body is the codec's
bytes. Tells travel together: a ``TELL``'s body is ``[[export number, path, body],
...]``, the tells to one node that waited together for the connection's writer.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = [
    "ASK",
    "CANCEL",
    "CONFIRM",
    "DISCONNECT_ADVISORIES",
    "NONE",
    "STOP",
    "TELL",
    "WATCH",
    "Peer",
    "Subjects",
    "connection_name",
    "encode",
    "peer_of_connection",
]

TELL: Final = 0
ASK: Final = 1
CANCEL: Final = 2
STOP: Final = 3
WATCH: Final = 4
CONFIRM: Final = 5  # (to the node itself: what it holds of the sender's; _confirm.py)

encode = msgspec.msgpack.Encoder().encode
NONE: Final = msgspec.Raw(encode(None))
"""An empty body (``CANCEL``, ``WATCH``; a stop's answer)."""

DISCONNECT_ADVISORIES: Final = "$SYS.ACCOUNT.*.DISCONNECT"

Peer = tuple[str, str]
"""A node's (name, incarnation)."""


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


class Subjects:
    """The NATS subjects of one cluster."""

    __slots__ = ("prefix",)

    def __init__(self, cluster: str) -> None:
        self.prefix = f"ta.{cluster}"

    def node(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.n.{node}.{incarnation}"

    def replies(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.r.{node}.{incarnation}"

    def unreachable(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.u.{node}.{incarnation}"

    def terminations(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.t.{node}.{incarnation}"

    def name(self, name: str) -> str:
        return f"{self.prefix}.name.{name.encode().hex() or '-'}"

    def names(self) -> str:
        return f"{self.prefix}.names"

    def acks(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.a.{node}.{incarnation}"

    def acks_of(self, unreachable: str) -> str:
        """:meth:`acks` of the node whose :meth:`unreachable` subject this is."""
        return f"{self.prefix}.a.{unreachable[len(self.prefix) + 3 :]}"

    def tell_replies(self) -> str:
        """The start of any node's :meth:`unreachable` subjects."""
        return f"{self.prefix}.u."

    def watch_replies(self) -> str:
        """The start of any node's :meth:`terminations` subjects."""
        return f"{self.prefix}.t."

    def heartbeat(self, node: str, incarnation: str) -> str:
        return f"{self.prefix}.hb.{node}.{incarnation}"

    def heartbeats(self) -> str:
        return f"{self.prefix}.hb.*.*"

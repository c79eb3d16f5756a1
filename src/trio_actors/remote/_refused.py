"""What the server refused to carry: a permissions violation, mapped to what the
node published on that subject -- never only the client's ``last_error``.

A NATS server that refuses a publish (the user may not publish on its subject:
``trio-actors secure``'s permissions, ``docs/security.rst``) drops it and answers
``-ERR 'Permissions Violation for Publish to "<subject>"'``, naming the subject and
nothing else; the connection stays up. The NATS client calls :func:`on_server_error`
from its reader as soon as the ``-ERR`` is read (``Client.on_server_error``),
before anything read after it -- so before a flush the server answered later
returns, and before the node takes its tells as routed. Permissions are per
subject, so everything the node published on that subject was refused:

* ``P.n.<node>.<incarnation>.<this node>`` -- messages to that node's actors: every
  ask, stop and confirm round waiting on it fails with
  :exc:`~trio_actors.NotPermitted` (not delivered; the message names the
  subject), its watches not yet confirmed end with a ``Terminated`` carrying that
  error, and the tells not yet confirmed become dead letters, reason
  ``"refused"``;
* ``P.shared.<name>.<this node>`` -- messages to a shared name's group: those no
  member has taken yet fail as above (an ask with ``NotPermitted``, tells dead
  letters ``"refused"``); what a member took came on that subject before the
  refusal, and ends as it would have;
* anything else (its heartbeats, announcements, acknowledgements, answers,
  lookups): this node's own control messages, refused because the server's
  permissions do not match the node -- an error in the log, naming the subject.

Each refused message (one ``-ERR``; a message of tells may hold many) is counted in
:attr:`Node.not_permitted <._node.Node.not_permitted>`; refused tells are counted as dead letters
too.
A refused subscription is said in the log (the node then misses what it would
have heard).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Final

from .._errors import NotPermitted
from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._node import Node

__all__ = ["on_server_error"]

_log = logging.getLogger("trio_actors")
_REFUSED: Final = re.compile(r"Permissions Violation for (Publish|Subscription) to \"([^\"]*)\"")


def on_server_error(node: Node, said: str) -> None:
    """The server sent ``-ERR said`` to ``node``'s connection. Never raises."""
    found = _REFUSED.search(said)
    if found is None:
        return
    what, subject = found.groups()
    if what == "Subscription":
        _log.error(
            "node %s: the server refuses its subscription to %s (its permissions do not "
            "match this node: is its configuration the one trio-actors secure wrote for "
            "it?); it will not hear what comes there",
            node.name,
            subject,
        )
        return
    node.not_permitted += 1  # (one -ERR: one message refused)
    tokens = subject.split(".")
    prefix = node.subjects.prefix
    if subject.startswith(f"{prefix}.n.") and len(tokens) == 6 and tokens[5] == node.name:
        peer = (tokens[3], tokens[4])
        why = (
            f"the NATS server refused this node's message to node {peer[0]!r} "
            f'("Permissions Violation for Publish to {subject}"): not delivered; this '
            f"node may not send to that node's actors"
        )
        # (what the first -ERR ends was all refused: those after it find nothing)
        node.requests.refused(peer, why)
        node.watches.refused(peer, NotPermitted(why))
        node.tells.fates.refused(subject, why)
        return
    if subject.startswith(f"{prefix}.shared.") and len(tokens) == 5 and tokens[4] == node.name:
        why = (
            f"the NATS server refused this node's message to a shared name "
            f'("Permissions Violation for Publish to {subject}"): not delivered; this '
            "node may not send to that name"
        )
        node.groups.refused(subject, why)
        return
    _log.error(
        "node %s: the server refused to carry its message to %s (a permissions "
        "violation: the server's permissions do not match this node -- is its "
        "configuration the one trio-actors secure wrote for it?)",
        node.name,
        subject,
    )


protect_module(globals())

"""The package's exceptions.

Each error says whose fault it is, in the manner of trio's ``ClosedResourceError``
(you closed it) and ``BrokenResourceError`` (something else broke it):

* :class:`ActorError` -- base of every error this package raises on purpose, and
  itself raised for misuse that has no better type (asking yourself, awaiting your
  own stop from inside your handler).
* :class:`ActorStopped` -- the actor you asked has stopped or is stopping; not your
  mistake, but the ask cannot be answered.
* :class:`ActorNotFound` -- no actor is registered under the name you looked up
  (also a ``LookupError``, as ``KeyError`` is).
* :class:`MailboxFull` -- a bounded mailbox had no room (your sender outpaced the
  actor; use ``send`` to wait for room instead).
* :class:`ShutdownTimeout` -- an actor's drain or ``on_stop`` outlived its shutdown
  timeout and was cancelled (logged and counted as the actor's failure).
* :class:`LifecycleError` -- an illegal lifecycle transition: always a bug in the
  runtime, never in user code; it names the actor, the state and the event.
* :class:`NodeDown` -- the node an ask went to died (or was declared dead) before
  answering: the message may or may not have been handled.
* :class:`RemoteError` -- a handler on another node raised an exception whose type
  is not allowed to be rebuilt here; it carries the type's name and the text.
"""

from __future__ import annotations

from ._interrupts import protect_module


class ActorError(Exception):
    """Base class of the errors raised by trio-actors."""


class ActorStopped(ActorError):
    """An ask that cannot be answered because the actor stopped or was stopping.

    Raised by :meth:`ActorRef.ask <trio_actors.ActorRef.ask>` for an actor that no
    longer accepts messages, and delivered to every asker whose ask was still queued
    (stranded) when the actor stopped.
    """


class ActorNotFound(ActorError, LookupError):
    """No actor is registered under a name.

    Raised by :meth:`ActorSystem.lookup <trio_actors.ActorSystem.lookup>` and
    :meth:`ActorSystem.unregister <trio_actors.ActorSystem.unregister>`; the message
    names the name. A ``LookupError``, so ``except LookupError`` catches it too.
    """


class MailboxFull(ActorError):
    """A bounded mailbox had no room for a message.

    Raised by :meth:`ActorRef.tell <trio_actors.ActorRef.tell>` to a full mailbox
    whose overflow policy is ``"fail"``, and delivered to an asker whose queued
    ask a ``"drop_old"`` tell dropped (``send`` and ``ask`` wait for room instead
    of failing). The message names the actor, the capacity and the policy, and
    says what to do: use :meth:`ActorRef.send <trio_actors.ActorRef.send>` to
    wait for room, or a larger capacity or another overflow policy.
    """


class ShutdownTimeout(ActorError):
    """An actor's stop outlived its shutdown timeout (``spawn(..., shutdown=...)``).

    Not raised to a caller: logged (with the actor's path and what was cut short --
    its drain or its ``on_stop``) and counted as the actor's failure when the
    runtime cancels what did not finish in time. ``stop()`` itself returns normally.
    """


class LifecycleError(ActorError):
    """An illegal lifecycle transition was attempted.

    The message names the actor, its state and the event; the state is left
    unchanged.
    """


class NodeDown(ActorError):
    """The node of a remote actor died, or was declared dead, before answering.

    Raised by :meth:`ActorRef.ask <trio_actors.ActorRef.ask>` to every ask still
    pending to that node, and carried by the ``Terminated`` of every actor watched
    on it. The message may or may not have been handled there.
    """


class ConnectionInterrupted(NodeDown):
    """A request to another node (an ask, a stop) ended without an answer because
    the way between the nodes changed while it was in flight, not because the node
    died: a connection was lost, a NATS server failed over, or the other node says
    it does not hold the request (it, or its answer, was lost on the way). The
    message says which. As with :class:`NodeDown` (its base class, so one
    ``except NodeDown`` covers both), the message may or may not have been handled.
    """


class NotPermitted(ActorError):
    """The NATS server refused to carry a message of this node (a permissions
    violation: the server's ``-ERR 'Permissions Violation for Publish to
    "<subject>"'``): it was **not delivered**. Raised by an ask or a stop to an
    actor whose node this node may not reach (the message names the subject; see
    ``trio-actors secure --allow``), and carried by the ``Terminated`` of a watch
    that could not be sent. Refused tells are dead letters, reason ``"refused"``.
    """


class NotSpawnable(ActorError):
    """A node refused to spawn an actor for another node: it does not list the
    actor's class as spawnable (``Cluster(spawnable=...)``, or ``spawnable`` in its
    configuration file). Raised by ``system.node.spawn``; the message names the
    class, the node and the setting. Remote spawn never runs a class the node did
    not list.
    """


class RemoteError(ActorError):
    """An exception raised on another node, whose type may not be rebuilt here.

    Exceptions cross nodes as (type name, text); only the types the cluster allows
    (the package's own errors and those the application registers) arrive as
    themselves. Every other one arrives as a ``RemoteError``.

    Attributes:
        type_name: the original exception's type, ``module.QualName``.
        text: ``str()`` of the original exception.
    """

    def __init__(self, type_name: str, text: str) -> None:
        super().__init__(f"{type_name}: {text}" if text else type_name)
        self.type_name = type_name
        self.text = text

    def __reduce__(self) -> tuple[type[RemoteError], tuple[str, str]]:
        return (RemoteError, (self.type_name, self.text))


def describe_value(value: object, limit: int = 120) -> str:
    """``repr(value)`` for an error message, made safe: at most ``limit``
    characters, and a placeholder naming the type if the repr raises (or recurses
    too deep). A user's message must never turn an error report into a crash."""
    try:
        text = repr(value)
    except Exception:  # a raising __repr__, a RecursionError on a deep structure
        return f"<{type(value).__qualname__} object (its repr failed)>"
    if len(text) > limit:
        return f"{text[: limit - 5]}...{text[-2:]}"
    return text


protect_module(globals())

__all__ = [
    "ActorError",
    "ActorNotFound",
    "ActorStopped",
    "ConnectionInterrupted",
    "LifecycleError",
    "MailboxFull",
    "NodeDown",
    "NotPermitted",
    "NotSpawnable",
    "RemoteError",
    "ShutdownTimeout",
    "describe_value",
]

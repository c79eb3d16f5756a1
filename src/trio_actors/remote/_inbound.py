"""An ask from another node, queued in a local mailbox like any ask.

A local ask parks its asker's task in the envelope (:class:`~trio_actors.mailbox.
_envelope.Ask`); an ask from another node has no task here: its envelope is queued
by the connection's reader, synchronously, in the order the node's messages
arrive -- so a tell sent after an ask is handled after it, as locally (T2) -- and
the envelope hands its end to the node, which publishes the answer to the asker's
reply subject. The asker's cancellation arrives as a ``CANCEL`` and does what a
local asker's does (the state table of ``_envelope.py``):

===========  ==================================================================
state        what the asker's ``CANCEL`` does
===========  ==================================================================
QUEUED       withdrawn: skipped when reached, never handled; no answer is sent
RUNNING      abandoned: an async handler's cancel scope is cancelled, a plain
             handler's result is dropped; no answer is sent
DONE         nothing: the answer has been published
===========  ==================================================================

Every envelope ends exactly once -- answered, failed back (the handler raised, the
actor stopped first, a full bounded mailbox refused it), withdrawn or abandoned --
and the node forgets it then (``Node.leave`` waits for the ones still owed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._envelope import Ask, AskState

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ._node import Node

_QUEUED = AskState.QUEUED
_RUNNING = AskState.RUNNING
_DONE = AskState.DONE


class RemoteAsk(Ask):
    """An ask from another node: answered by publishing to ``answer_to``."""

    __slots__ = ("answer_to", "node")

    def __init__(self, cell: ActorCell, message: Any, node: Node, answer_to: str) -> None:
        super().__init__(cell, message, None)  # type: ignore[arg-type]  # (no task waits)
        self.node = node
        self.answer_to = answer_to

    def cancel(self) -> None:
        """The asker's ``CANCEL``: see the table above. Never a checkpoint."""
        if self.asker_cancelled():
            self.node.forget_ask(self)

    def reply(self, value: Any) -> None:
        if self.state is _RUNNING:
            self.state = _DONE
            self.node.answer_ask(self, value, None)

    def fail(self, error: BaseException) -> bool:
        if self.state is _RUNNING or self.state is _QUEUED:
            self.state = _DONE
            self.node.answer_ask(self, None, error)
            return True
        return False


__all__ = ["RemoteAsk"]

"""Asks and stops from other nodes: queued like local ones, answered by publishing.

A local ask parks its asker's task in the envelope (:class:`~trio_actors.mailbox.
_envelope.Ask`); an ask from another node has no task here: its envelope
(:class:`RemoteAsk`) is queued by the connection's reader, synchronously, in the
order the node's messages arrive -- so a tell sent after an ask is handled after
it, as locally (T2) -- and the envelope hands its end to :class:`Answers`, which
publishes the answer to the asker's reply subject. The asker's cancellation arrives
as a ``CANCEL`` and does what a local asker's does (the state table of
``_envelope.py``):

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
and :class:`Answers` forgets it then (``Node.leave`` waits for the ones still owed).
A stop from another node stops the actor, and answers once it has (a ``stop``), or
answers nothing (a ``stop_nowait``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .._core._envelope import Ask, AskState
from .._core._ref import new_ref
from .._errors import ActorStopped
from .._interrupts import protect_module
from ._subjects import NONE, encode

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..nats import Headers
    from ._node import Node

__all__ = ["Answers", "RemoteAsk"]

_QUEUED = AskState.QUEUED
_RUNNING = AskState.RUNNING
_DONE = AskState.DONE


class RemoteAsk(Ask):
    """An ask from another node: answered by publishing to ``answer_to``."""

    __slots__ = ("answer_to", "answers")

    def __init__(self, cell: ActorCell, message: Any, answers: Answers, answer_to: str) -> None:
        super().__init__(cell, message, None)  # type: ignore[arg-type]  # (no task waits)
        self.answers = answers
        self.answer_to = answer_to

    def cancel(self) -> None:
        """The asker's ``CANCEL``: see the table above. Never a checkpoint."""
        if self.asker_cancelled():
            self.answers.forget(self)

    def taken_by_task(self) -> None:
        """Its actor takes asks only from a task (a pool): a task of the node asks on
        its behalf (:meth:`ask_from_task`), running from now on."""
        self.start()

    def ask_from_task(self) -> Coroutine[Any, Any, Any]:
        """The ask the node's task makes on its behalf (awaited in that task)."""
        return new_ref(self.cell).ask(self.message)

    def reply(self, value: Any) -> None:
        if self.state is _RUNNING:
            self.state = _DONE
            self.answers.answer(self, value, None)

    def fail(self, error: BaseException) -> bool:
        if self.state is _RUNNING or self.state is _QUEUED:
            self.state = _DONE
            self.answers.answer(self, None, error)
            return True
        return False


class Answers:
    """The asks from other nodes this node owes an answer, by reply subject; and
    the stops from other nodes."""

    __slots__ = ("_all_answered", "_node", "owed", "stopping")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.owed: dict[str, RemoteAsk] = {}
        self.stopping: set[str] = set()  # the reply subjects of stops under way
        self._all_answered: trio.Event | None = None  # (leave() waits for it)

    def held(self, prefix: str, numbers: list[int]) -> list[int]:
        """Of the requests ``numbers`` of the node whose replies from this node go
        to ``prefix`` (``P.r.<node>.<incarnation>.<this node>``), those this node
        holds: asks it owes an answer, stops under way (a confirm round's
        question); and tells to a shared name taken here, not yet ended
        (``_groups.py``)."""
        owed, stopping, shared = self.owed, self.stopping, self._node.groups.taken_here
        held = []
        for number in numbers:
            reply = f"{prefix}.{number}"
            if reply in owed or reply in stopping or reply in shared:
                held.append(number)
        return held

    def receive_ask(
        self,
        cell: ActorCell | None,
        path: str,
        body: Any,
        reply: str,
        headers: Headers | None = None,
    ) -> None:
        """Queue an ask from another node, now, in arrival order (``headers``: those
        it came with, on an observed node: its observer may make its envelope)."""
        node = self._node
        try:
            message = node.codec.decode(body)
            if cell is None:
                raise ActorStopped(f"{node.name}:{path} has stopped; ask not accepted")
        except Exception as error:
            error_body = msgspec.Raw(node.codec.encode_error(error))
            node.tells.publish(reply, encode((False, error_body)))
            return
        observed = None
        if headers is not None and node.observer is not None:
            observed = node.observer.received_ask(cell, message, self, reply, headers)
        envelope = RemoteAsk(cell, message, self, reply) if observed is None else observed
        self.owed[reply] = envelope
        if not cell.accept_ask(envelope):
            envelope.taken_by_task()  # (running from now on: a task asks for it)
            envelope.scope = trio.CancelScope()
            node.start(self._ask_by_task, envelope)

    def cancel(self, reply: str) -> None:
        """The asker's ``CANCEL`` of the ask it made with ``reply``."""
        envelope = self.owed.get(reply)
        if envelope is not None:
            envelope.cancel()

    async def _ask_by_task(self, envelope: RemoteAsk) -> None:
        """Ask ``envelope``'s actor from a task of the node (an actor that takes
        asks only so: a pool). Its asker's ``CANCEL`` cancels the task's ask."""
        assert envelope.scope is not None
        try:
            with envelope.scope:
                try:
                    value = await envelope.ask_from_task()
                except Exception as error:
                    envelope.fail(error)
                else:
                    envelope.reply(value)
        finally:  # (cancelled with the node: nobody will answer any more)
            envelope.handler_ended(ActorStopped(f"{envelope.cell.path} stopped while answering"))

    def answer(self, envelope: RemoteAsk, value: Any, error: BaseException | None) -> None:
        """Publish the end of an ask from another node: ``value``, or ``error``
        (also when the value, or the answer, cannot go). Never raises."""
        self.forget(envelope)
        tells, codec, reply = self._node.tells, self._node.codec, envelope.answer_to
        if error is None:
            try:
                tells.out(reply, encode((True, msgspec.Raw(codec.encode(value)))))
                return
            except Exception as cannot_go:  # (unencodable, over max_payload, closed)
                error = cannot_go
        tells.publish(reply, encode((False, msgspec.Raw(codec.encode_error(error)))))

    def forget(self, envelope: RemoteAsk) -> None:
        """An ask from another node ended: answered, withdrawn or abandoned."""
        self.owed.pop(envelope.answer_to, None)
        if not self.owed and self._all_answered is not None:
            self._all_answered.set()

    async def all_answered(self, within: float) -> None:
        """Wait until every ask owed is answered, at most ``within`` seconds. A
        checkpoint if something is owed."""
        if self.owed:
            self._all_answered = trio.Event()
            with trio.move_on_after(within):
                await self._all_answered.wait()

    def receive_stop(self, cell: ActorCell | None, drain: bool, reply: str | None) -> None:
        """A stop of a local actor from another node (answered on ``reply``, if
        given, once the actor has stopped)."""
        node = self._node
        if cell is None:
            if reply:
                node.tells.publish(reply, encode((True, NONE)))
            return
        ref = new_ref(cell)
        if reply is None:
            ref.stop_nowait(drain=drain)
            return
        if reply in self.stopping:
            return  # (sent again by a confirm round: the first one answers)
        self.stopping.add(reply)

        async def stop_and_answer() -> None:
            try:
                await ref.stop(drain=drain)
                node.tells.publish(reply, encode((True, NONE)))
            finally:
                self.stopping.discard(reply)

        node.start(stop_and_answer)


protect_module(globals())

"""The :class:`Probe`: a test's window on the messages an actor sends.

A probe is a real actor (its :attr:`Probe.ref` can be given to the actors under
test, watched, asked, stopped) whose handler only records what arrives. The test
then awaits what it expects, in order, with a timeout in trio-clock seconds -- under
an autojumping ``MockClock`` a missing message fails at once instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

from .. import Actor, ActorRef, ActorSystem, Terminated

DEFAULT_WITHIN = 1.0
"""Trio-clock seconds a probe waits for a message before failing the test."""


def matches(match: Any, message: Any) -> bool:
    """Whether ``message`` matches ``match``: a type (``isinstance``), a predicate
    (a callable returning true), or a value (``==``)."""
    if isinstance(match, type):
        return isinstance(message, match)
    if callable(match):
        return bool(match(message))
    return bool(message == match)


def describe(match: Any) -> str:
    if isinstance(match, type):
        return f"an instance of {match.__qualname__}"
    if callable(match):
        return f"a message for which {getattr(match, '__qualname__', match)!s} is true"
    return repr(match)


@attrs.frozen
class _Watch:
    """The probe's own instruction to itself: watch ``ref`` (never recorded)."""

    ref: ActorRef
    watch: bool  # False: unwatch


class _ProbeActor(Actor):
    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def receive(self, message: Any) -> Any:
        if type(message) is _Watch:
            (self.watch if message.watch else self.unwatch)(message.ref)
            return None
        return self.probe._arrived(message)


class Probe:
    """An actor that records every message it receives, for tests to await.

    Args:
        system: the actor system to spawn the probe actor in.
        name: the probe actor's name (generated if omitted).
        reply: called with each message; its result answers an ``ask`` to the
            probe (default: every ask is answered with ``None``).

    Attributes:
        ref: the probe actor's ref: hand it to the actors under test.
        messages: every message received so far, oldest first.

    ``receive``, ``expect``, ``wait_for`` and ``expect_no_message`` are checkpoints
    and raise ``AssertionError`` (with what did arrive) when their expectation
    fails. Cancelled, they consume nothing more -- the message they would have
    returned stays unread (messages ``wait_for`` had already skipped stay read).
    """

    def __init__(
        self,
        system: ActorSystem,
        *,
        name: str | None = None,
        reply: Callable[[Any], Any] | None = None,
    ) -> None:
        self.messages: list[Any] = []
        self._read = 0  # messages[:_read] have been consumed by receive/expect/wait_for
        self._reply = reply
        self._event = trio.Event()
        self.ref: ActorRef = system.spawn(_ProbeActor, self, name=name)

    def _arrived(self, message: Any) -> Any:
        self.messages.append(message)
        self._event.set()
        self._event = trio.Event()
        return None if self._reply is None else self._reply(message)

    @property
    def unread(self) -> list[Any]:
        """Messages received and not yet consumed, oldest first."""
        return self.messages[self._read :]

    async def receive(self, *, within: float = DEFAULT_WITHIN) -> Any:
        """The next unread message, waiting up to ``within`` seconds for it. A
        checkpoint."""
        with trio.move_on_after(within):
            while self._read >= len(self.messages):
                await self._event.wait()
        if self._read >= len(self.messages):
            raise AssertionError(
                f"{self.ref.name} received no message within {within:g}s "
                f"(received so far: {self.messages!r})"
            )
        await trio.lowlevel.checkpoint()  # cancelled here: the message stays unread
        self._read += 1
        return self.messages[self._read - 1]

    async def expect(self, match: Any, *, within: float = DEFAULT_WITHIN) -> Any:
        """The next unread message, which must match ``match`` (see :func:`matches`).
        A checkpoint."""
        message = await self.receive(within=within)
        if not matches(match, message):
            raise AssertionError(
                f"{self.ref.name} expected {describe(match)}, received {message!r}"
            )
        return message

    async def wait_for(self, match: Any, *, within: float = DEFAULT_WITHIN) -> Any:
        """Skip unread messages until one matches ``match``, waiting up to ``within``
        seconds in all; return it. The skipped ones count as read. A checkpoint."""
        skipped: list[Any] = []
        found = False
        with trio.move_on_after(within):
            while not found:
                while self._read >= len(self.messages):
                    await self._event.wait()
                if matches(match, self.messages[self._read]):
                    found = True
                else:
                    skipped.append(self.messages[self._read])
                    self._read += 1
        if not found:
            raise AssertionError(
                f"{self.ref.name} received no message matching {describe(match)} within "
                f"{within:g}s (skipped: {skipped!r})"
            )
        await trio.lowlevel.checkpoint()  # cancelled here: the match stays unread
        self._read += 1
        return self.messages[self._read - 1]

    async def expect_no_message(self, *, within: float = 0.1) -> None:
        """Wait ``within`` seconds; fail if any unread message is (or arrives) there.
        A checkpoint (``trio.sleep``)."""
        await trio.sleep(within)
        if self.unread:
            raise AssertionError(f"{self.ref.name} expected no message, received {self.unread!r}")

    def watch(self, ref: ActorRef) -> None:
        """Death-watch ``ref`` from the probe: when it stops, the probe receives its
        :class:`~trio_actors.Terminated` (once, as any watcher; at once if it has
        stopped already). Never blocks, never a checkpoint: the watch is made in
        the probe's next turn, which cannot miss the stop (see
        :meth:`Actor.watch <trio_actors.Actor.watch>`). Akka's ``probe.watch``."""
        self.ref.tell(_Watch(ref, watch=True))

    def unwatch(self, ref: ActorRef) -> None:
        """Withdraw :meth:`watch` (a ``Terminated`` not yet received is withdrawn
        too). Never blocks, never a checkpoint."""
        self.ref.tell(_Watch(ref, watch=False))

    async def expect_terminated(
        self, ref: ActorRef, *, within: float = DEFAULT_WITHIN
    ) -> Terminated:
        """Skip unread messages until ``ref``'s :class:`~trio_actors.Terminated`
        arrives (after :meth:`watch`), waiting up to ``within`` seconds; return it.
        A checkpoint; fails with ``AssertionError`` as :meth:`wait_for` does.
        Akka's ``expectTerminated``."""

        def terminated(message: Any) -> bool:
            return type(message) is Terminated and message.ref == ref

        try:
            message: Terminated = await self.wait_for(terminated, within=within)
        except AssertionError as error:
            raise AssertionError(
                f"{self.ref.name} received no Terminated of {ref.path} within {within:g}s "
                f"(watched with probe.watch(ref)?); {error}"
            ) from None
        return message

    def __repr__(self) -> str:
        return f"<Probe {self.ref.path}: {len(self.messages)} received, {len(self.unread)} unread>"


__all__ = ["DEFAULT_WITHIN", "Probe", "matches"]

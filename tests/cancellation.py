"""A stray ``trio.Cancelled`` for tests: one that no cancel scope of the run it is
raised in has asked for (a handler that kept one and raised it again)."""

import trio


def a_stray_cancelled(reason: str = "") -> trio.Cancelled:
    """A real ``trio.Cancelled``, caught in a ``trio.run`` of its own and returned."""
    kept: list[trio.Cancelled] = []

    async def catch_one() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as cancelled:
                kept.append(cancelled)
                raise

    trio.run(catch_one)
    return kept[0]

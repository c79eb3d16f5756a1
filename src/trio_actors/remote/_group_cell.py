"""A shared name's group as a ref's record (``_groups.py`` tells the whole story):
each ``tell``, ``ask`` or ``send`` through the ref goes to one member, by way of
the node's :class:`~._group_sends.GroupSends`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import trio

from .._errors import ActorError
from .._interrupts import protect_module

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from .._statistics import ActorStatistics
    from ..lifecycle import Terminated
    from ._group_sends import GroupSends

__all__ = ["GroupCell"]


class GroupCell:
    """A shared name's group, as a ref's record: each tell, ask or send goes to
    one member (``_groups.py``). One per name per node (kept weakly), so refs to a
    group are equal and hash alike. Implements the kernel's ``ForeignCell``."""

    __slots__ = ("__weakref__", "dispatcher", "groups", "shared_name", "subject")

    remote: Literal[True] = True
    fast_tell: Literal[False] = False
    activates: Literal[False] = False

    def __init__(self, groups: GroupSends, name: str) -> None:
        self.groups = groups
        self.shared_name = name  # (the codec sends a group's ref as this name)
        self.dispatcher = groups.node.system._dispatcher
        node = groups.node
        self.subject = node.subjects.to_shared(name, node.name)  # (where its messages go)

    @property
    def name(self) -> str:
        return self.shared_name

    @property
    def path(self) -> str:
        """``shared:<name>``: a group has no place of its own."""
        return f"shared:{self.shared_name}"

    def __repr__(self) -> str:
        return f"<GroupCell {self.shared_name!r}>"

    def tell(self, message: Any) -> None:
        self.groups.tell(self, message)

    def ask_message(self, message: Any) -> Any:
        return self.groups.ask(self, message)

    async def send_message(self, message: Any) -> None:
        await self.groups.send(self, message)

    def _not_an_actor(self, operation: str) -> ActorError:
        return ActorError(
            f"{operation} of {self.path}: a shared name's group is not one actor: stop "
            "its members (or watch them) -- the actors registered under the name with "
            "shared=True, each on its node"
        )

    async def stop_and_wait(self, *, drain: bool) -> None:
        await trio.lowlevel.checkpoint()
        raise self._not_an_actor("stop()")

    def request_stop(self, *, drain: bool) -> None:
        raise self._not_an_actor("stop_nowait()")

    async def wait_terminated(self) -> Terminated:
        await trio.lowlevel.checkpoint()
        raise self._not_an_actor("wait_stopped()")

    def watch_from(self, watcher: ActorCell) -> None:
        raise self._not_an_actor("watch()")

    def unwatch_from(self, watcher: ActorCell) -> None:
        """Nothing to withdraw: a group is never watched."""

    def forget_watcher(self, watcher: ActorCell) -> None:
        """Nothing to forget: a group is never watched."""

    def snapshot(self) -> ActorStatistics:
        raise self._not_an_actor("statistics()")


protect_module(globals())

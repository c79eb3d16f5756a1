"""The nodes the contracts across nodes run on: one cluster over the in-memory bus.

:func:`nodes` opens one system per node name, all of one
:class:`~trio_actors.Cluster` on a :class:`~trio_actors.remote.MemoryBus` (or a bus
a contract brings: one that counts or cuts), with a short heartbeat so that a silent
node is declared down within virtual seconds; :func:`reach` gives one node's actor
to another the way a user would (registered, then looked up).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ... import ActorRef, ActorSystem, Cluster, ServingPolicy, open_actor_system
from ...remote import MemoryBus

HEARTBEAT = 0.5  # virtual seconds; a node silent for 3 beats is down


@asynccontextmanager
async def nodes(
    policy: ServingPolicy, *names: str, bus: MemoryBus | None = None
) -> AsyncIterator[list[ActorSystem]]:
    """One system per name, each a node of one cluster on ``bus`` (a fresh one by
    default), opened in the order named and closed in reverse."""
    cluster = Cluster(bus=bus or MemoryBus(), heartbeat=HEARTBEAT)
    async with _open(policy, cluster, list(names)) as systems:
        yield systems


@asynccontextmanager
async def _open(
    policy: ServingPolicy, cluster: Cluster, names: list[str]
) -> AsyncIterator[list[ActorSystem]]:
    """The nodes of ``names``, one nested in the next (so they close in reverse)."""
    if not names:
        yield []
        return
    async with (
        open_actor_system(serving=policy, cluster=cluster, node=names[0]) as system,
        _open(policy, cluster, names[1:]) as others,
    ):
        yield [system, *others]


async def reach(owner: ActorSystem, user: ActorSystem, ref: ActorRef, name: str) -> ActorRef:
    """``ref`` (of ``owner``) as ``user`` reaches it: registered, then looked up."""
    owner.register(name, ref)
    assert owner.node is not None
    await owner.node.flush()
    return await user.lookup(name)


__all__ = ["HEARTBEAT", "nodes", "reach"]

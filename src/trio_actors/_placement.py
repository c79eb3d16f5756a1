"""Where ``system.node.spawn`` puts an actor: a node's name, or a placement rule.

Values only (like :class:`~trio_actors.ServingPolicy`). A rule chooses among the
members (``system.node.members()``, this node included) that list the actor's class
as spawnable (``Cluster(spawnable=...)``); the node that spawns reads each rule
(``remote/_spawning.py``; ``docs/remote.rst``, "Spawning on another node").
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from ._interrupts import protect_module

__all__ = ["FewestActors", "Placement", "RoundRobin"]


@attrs.frozen
class RoundRobin:
    """Each spawn of a class on the next member, in name order, that spawns it --
    this node included if it lists the class. Nothing is asked beforehand: a member
    that does not list the class says so when asked, the spawn goes on to the next,
    and that member is passed over for the class from then on (until it restarts:
    its list is its configuration's). One request per spawn once they are known."""


@attrs.frozen
class FewestActors:
    """On the member with the fewest live actors (at every level, pools' workers
    included) -- with this node's spawns still on their way to it -- among those
    that list the class as spawnable; ties go to the name.
    Every member is asked at the spawn (one request each, answered at once; one
    that has not answered within a heartbeat period is tried only after those that
    did, in name order), so the count is the one of now, not of the last heartbeat.
    Mailbox depths are not asked: a node would have to walk every mailbox to sum
    them."""


Placement: TypeAlias = RoundRobin | FewestActors
"""A placement rule for ``system.node.spawn(..., on=...)``."""


protect_module(globals())

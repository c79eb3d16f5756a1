"""Actors, refs and the actor system: what application code touches."""

from .._core import _debug  # noqa: F401 - installs the debug checks if TRIO_ACTORS_DEBUG is set
from .._core._actor import Actor as Actor
from .._core._ref import ActorRef as ActorRef
from .._core._timers import Timer as Timer
from ._pool import Broadcast as Broadcast
from ._pool import Pool as Pool
from ._pool import Resize as Resize
from ._pool import Routing as Routing
from ._system import ActorSystem as ActorSystem
from ._system import open_actor_system as open_actor_system

__all__ = [
    "Actor",
    "ActorRef",
    "ActorSystem",
    "Broadcast",
    "Pool",
    "Resize",
    "Routing",
    "Timer",
    "open_actor_system",
]

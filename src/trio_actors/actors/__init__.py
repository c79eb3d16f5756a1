"""The actor system and what lives in it as application code sees it: ``Actor``,
``ActorRef``, ``ActorSystem``, pools and timers (the kernel's own records are in
``_core``)."""

from .._core import _debug  # noqa: F401 - installs the debug checks if TRIO_ACTORS_DEBUG is set
from .._core._ref import ActorRef as ActorRef
from .._core._timers import Timer as Timer
from ._actor import Actor as Actor
from ._cluster_node import ClusterNode as ClusterNode
from ._pool import Broadcast as Broadcast
from ._pool import Pool as Pool
from ._pool import Resize as Resize
from ._pool import Routing as Routing
from ._system import ActorSystem as ActorSystem

__all__ = [
    "Actor",
    "ActorRef",
    "ActorSystem",
    "ClusterNode",
    "Broadcast",
    "Pool",
    "Resize",
    "Routing",
    "Timer",
]

"""trio-actors: an actor runtime for trio.

Layers, bottom up; a module imports only from its own layer and those below it --
at its top, inside a function and under ``TYPE_CHECKING`` alike -- and modules
import each other in a circle only inside one package; ``tests/test_layers.py``
checks both by reading every import:

0. ``nats`` -- the NATS client (sans-io protocol core, trio transport): it imports
   nothing of the runtime, which may use it (the remote layer);
1. ``_errors``, ``_policy``, ``_statistics``, ``_cluster``, ``_supervision``,
   ``_membership``, ``_placement``, ``_stream``, ``_monitoring``, ``_interrupts`` -- exceptions,
   the serving policy, the statistics records, the cluster's configuration, the
   supervision strategies, the cluster's members (values, and the stream of
   membership changes), where a remote spawn places an actor, the bounded stream
   both the membership changes and a dead-letter subscription are, the
   statistics service's subjects and documents, and the rule that makes every
   function of the runtime (layers 1-6) KI-protected;
2. ``_core`` -- the kernel: the actor base, the ref, the cell, the state tables,
   the serving loop (the only user of trio's scheduling primitives), and the
   sequences that end or renew a life (stop, stranded cleanup, restart, failure,
   death watch, dead letters, timers). Its modules know each other; it knows the
   system above it only as the ``Host`` protocol;
3. ``actors`` -- ``Actor``, ``ActorSystem``, pools; ``lifecycle`` and ``mailbox`` --
   the public faces of the kernel's rules and mailboxes;
4. ``remote`` -- nodes on NATS, remote refs, the codec;
5. ``observe`` -- what a system does, through OpenTelemetry: traces and metrics (the
   observer the kernel and a node call); its face (``Tracing``, ``Metrics``) imports
   no OpenTelemetry, the rest is imported only for a system opened with
   ``tracing=`` or ``metrics=``;
6. ``_opener`` -- ``open_actor_system``: a system, and with ``cluster=`` a node (the
   remote layer, and msgspec, are imported only then);
7. ``contracts``, ``sweeps``, ``testing`` -- built on the public API only: they
   import the package's names from ``trio_actors`` itself; and ``top``, the live
   view of a cluster (``trio-actors top``), which reads the statistics service's
   documents (``_monitoring``).

This module only re-exports the public API.
"""

from ._cluster import Cluster as Cluster
from ._cluster import InputLimits as InputLimits

# Whether the kernel's hot modules run compiled with mypyc (a wheel built with
# TRIO_ACTORS_COMPILE=1) or as pure Python: docs/performance.rst.
from ._core._compiled import compiled as compiled
from ._errors import ActorError as ActorError
from ._errors import ActorNotFound as ActorNotFound
from ._errors import ActorStopped as ActorStopped
from ._errors import ConnectionInterrupted as ConnectionInterrupted
from ._errors import MailboxFull as MailboxFull
from ._errors import NodeDown as NodeDown
from ._errors import NotPermitted as NotPermitted
from ._errors import NotSpawnable as NotSpawnable
from ._errors import RemoteError as RemoteError
from ._errors import ShutdownTimeout as ShutdownTimeout
from ._membership import Member as Member
from ._membership import MemberDown as MemberDown
from ._membership import MemberJoined as MemberJoined
from ._membership import MemberLeft as MemberLeft
from ._membership import MembershipEvents as MembershipEvents
from ._opener import open_actor_system as open_actor_system
from ._placement import FewestActors as FewestActors
from ._placement import Placement as Placement
from ._placement import RoundRobin as RoundRobin
from ._policy import DEFAULT_BATCH as DEFAULT_BATCH
from ._policy import DEFAULT_CLEANUP_BATCH as DEFAULT_CLEANUP_BATCH
from ._policy import DEFAULT_TIME_SLICE as DEFAULT_TIME_SLICE
from ._policy import ServingPolicy as ServingPolicy
from ._statistics import ActorStatistics as ActorStatistics
from ._statistics import BadInputCounts as BadInputCounts
from ._statistics import DeadLetterCounts as DeadLetterCounts
from ._statistics import NodeStatistics as NodeStatistics
from ._statistics import SystemStatistics as SystemStatistics
from .actors import Actor as Actor
from .actors import ActorRef as ActorRef
from .actors import ActorSystem as ActorSystem
from .actors import Broadcast as Broadcast
from .actors import Pool as Pool
from .actors import Resize as Resize
from .actors import Routing as Routing
from .actors import Timer as Timer
from .lifecycle import Backoff as Backoff
from .lifecycle import DeadLetter as DeadLetter
from .lifecycle import DeadLetters as DeadLetters
from .lifecycle import DeadLetterSubscription as DeadLetterSubscription
from .lifecycle import Escalate as Escalate
from .lifecycle import GroupStrategy as GroupStrategy
from .lifecycle import OneForAll as OneForAll
from .lifecycle import OneForOne as OneForOne
from .lifecycle import Restart as Restart
from .lifecycle import RestartType as RestartType
from .lifecycle import RestForOne as RestForOne
from .lifecycle import Resume as Resume
from .lifecycle import Stop as Stop
from .lifecycle import Supervision as Supervision
from .lifecycle import SupervisionStrategy as SupervisionStrategy
from .lifecycle import Terminated as Terminated
from .mailbox import Bounded as Bounded

__all__ = [
    "Actor",
    "ActorError",
    "ActorNotFound",
    "ActorRef",
    "ActorStatistics",
    "ActorStopped",
    "ActorSystem",
    "Backoff",
    "BadInputCounts",
    "Bounded",
    "Broadcast",
    "Cluster",
    "ConnectionInterrupted",
    "DEFAULT_BATCH",
    "DEFAULT_CLEANUP_BATCH",
    "DEFAULT_TIME_SLICE",
    "DeadLetter",
    "DeadLetterCounts",
    "DeadLetterSubscription",
    "DeadLetters",
    "Escalate",
    "FewestActors",
    "GroupStrategy",
    "InputLimits",
    "MailboxFull",
    "Member",
    "MemberDown",
    "MemberJoined",
    "MemberLeft",
    "MembershipEvents",
    "NodeDown",
    "NodeStatistics",
    "NotPermitted",
    "NotSpawnable",
    "OneForAll",
    "OneForOne",
    "Placement",
    "Pool",
    "RemoteError",
    "Resize",
    "RestForOne",
    "Restart",
    "RestartType",
    "Resume",
    "RoundRobin",
    "Routing",
    "ServingPolicy",
    "ShutdownTimeout",
    "Stop",
    "Supervision",
    "SupervisionStrategy",
    "SystemStatistics",
    "Terminated",
    "Timer",
    "compiled",
    "open_actor_system",
]

__version__ = "0.1.0"  # the one source: pyproject.toml reads it


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.Actor, not trio_actors._core._actor.Actor.
    for name in __all__:
        obj = globals()[name]
        if hasattr(obj, "__module__") and isinstance(obj, type | type(open_actor_system)):
            obj.__module__ = __name__


_fix_module_names()
del _fix_module_names

"""trio-actors: an actor runtime for trio.

Layers, bottom up (each imports only from those below it):

1. ``_errors``, ``_policy`` -- exceptions and the serving policy (values only);
2. ``lifecycle`` -- the state table, dead letters, the stop sequence;
3. ``mailbox`` -- asks in flight, the serving loop, stranded cleanup (the only
   user of trio's scheduling primitives);
4. ``actors`` -- ``Actor``, ``ActorRef``, ``ActorSystem``;
5. ``contracts``, ``sweeps``, ``testing`` -- built on the public API.

This module only re-exports the public API.
"""

from ._errors import ActorError as ActorError
from ._errors import ActorStopped as ActorStopped
from ._errors import MailboxFull as MailboxFull
from ._policy import DEFAULT_BATCH as DEFAULT_BATCH
from ._policy import DEFAULT_CLEANUP_BATCH as DEFAULT_CLEANUP_BATCH
from ._policy import DEFAULT_TIME_SLICE as DEFAULT_TIME_SLICE
from ._policy import ServingPolicy as ServingPolicy
from ._statistics import ActorStatistics as ActorStatistics
from ._statistics import DeadLetterCounts as DeadLetterCounts
from ._statistics import SystemStatistics as SystemStatistics
from .actors import Actor as Actor
from .actors import ActorRef as ActorRef
from .actors import ActorSystem as ActorSystem
from .actors import Timer as Timer
from .actors import open_actor_system as open_actor_system
from .lifecycle import Backoff as Backoff
from .lifecycle import DeadLetter as DeadLetter
from .lifecycle import DeadLetters as DeadLetters
from .lifecycle import Escalate as Escalate
from .lifecycle import Restart as Restart
from .lifecycle import Resume as Resume
from .lifecycle import Stop as Stop
from .lifecycle import SupervisionStrategy as SupervisionStrategy
from .lifecycle import Terminated as Terminated
from .mailbox import Bounded as Bounded

__all__ = [
    "Actor",
    "ActorError",
    "ActorRef",
    "ActorStatistics",
    "ActorStopped",
    "ActorSystem",
    "Backoff",
    "Bounded",
    "DEFAULT_BATCH",
    "DEFAULT_CLEANUP_BATCH",
    "DEFAULT_TIME_SLICE",
    "DeadLetter",
    "DeadLetterCounts",
    "DeadLetters",
    "Escalate",
    "MailboxFull",
    "Restart",
    "Resume",
    "ServingPolicy",
    "Stop",
    "SupervisionStrategy",
    "SystemStatistics",
    "Terminated",
    "Timer",
    "open_actor_system",
]

__version__ = "0.1.0"  # the one source: pyproject.toml reads it


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.Actor, not trio_actors.actors._actor.Actor.
    for name in __all__:
        obj = globals()[name]
        if hasattr(obj, "__module__") and isinstance(obj, type | type(open_actor_system)):
            obj.__module__ = __name__


_fix_module_names()
del _fix_module_names

"""The actor lifecycle: states and transitions (one table), who serves an actor
(a second table), stopping, supervision
and restarts, death watch, and dead letters."""

from .._core._dead_letters import DeadLetter as DeadLetter
from .._core._dead_letters import DeadLetters as DeadLetters
from .._core._dead_letters import DeadLetterSubscription as DeadLetterSubscription
from .._core._state import SERVING_TRANSITIONS as SERVING_TRANSITIONS
from .._core._state import TRANSITIONS as TRANSITIONS
from .._core._state import ActorState as ActorState
from .._core._state import LifecycleEvent as LifecycleEvent
from .._core._state import Serving as Serving
from .._core._watch import Terminated as Terminated
from .._supervision import Backoff as Backoff
from .._supervision import Escalate as Escalate
from .._supervision import GroupStrategy as GroupStrategy
from .._supervision import OneForAll as OneForAll
from .._supervision import OneForOne as OneForOne
from .._supervision import Restart as Restart
from .._supervision import RestartType as RestartType
from .._supervision import RestForOne as RestForOne
from .._supervision import Resume as Resume
from .._supervision import Stop as Stop
from .._supervision import Supervision as Supervision
from .._supervision import SupervisionStrategy as SupervisionStrategy

__all__ = [
    "SERVING_TRANSITIONS",
    "TRANSITIONS",
    "ActorState",
    "Backoff",
    "DeadLetter",
    "DeadLetterSubscription",
    "DeadLetters",
    "Escalate",
    "GroupStrategy",
    "LifecycleEvent",
    "OneForAll",
    "OneForOne",
    "RestForOne",
    "Restart",
    "RestartType",
    "Resume",
    "Serving",
    "Stop",
    "Supervision",
    "SupervisionStrategy",
    "Terminated",
]

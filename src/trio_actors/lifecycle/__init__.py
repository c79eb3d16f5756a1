"""The actor lifecycle: states and transitions (one table), the stop sequence, and
dead letters."""

from ._dead_letters import DeadLetter as DeadLetter
from ._dead_letters import DeadLetters as DeadLetters
from ._state import TRANSITIONS as TRANSITIONS
from ._state import ActorState as ActorState
from ._state import LifecycleEvent as LifecycleEvent

__all__ = ["TRANSITIONS", "ActorState", "DeadLetter", "DeadLetters", "LifecycleEvent"]

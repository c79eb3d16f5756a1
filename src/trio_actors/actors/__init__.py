"""Actors, refs and the actor system: what application code touches."""

from ._actor import Actor as Actor
from ._ref import ActorRef as ActorRef
from ._system import ActorSystem as ActorSystem
from ._system import open_actor_system as open_actor_system

__all__ = ["Actor", "ActorRef", "ActorSystem", "open_actor_system"]

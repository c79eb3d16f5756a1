"""Routers: a pool of workers behind one ref (Akka's pool routers).

The package: ``_messages`` (what a pool is told besides work: ``Broadcast``,
``Resize``; the routings), ``_actor`` (``Pool``, the factory, and ``PoolActor``,
the pool's own actor), ``_cell`` (``PoolCell``: routing, the workers, the pool's
part of the stop sequence, statistics), ``_balancing`` (what a balancing pool's
shared queue holds, and its bound), ``_counts`` (a pool's counts summed over its
workers, for its statistics).


``system.spawn(Pool(Worker, size=8, routing="balancing"), name="workers")`` spawns an
actor whose ref hands each message to one of ``size`` workers -- its children, each
an instance of ``Worker`` supervised by the pool's ``supervision``. Three routings:

``"round_robin"``
   each message to the next worker in turn. Cheapest (a tell is the worker's tell),
   but one slow worker holds every ``size``-th message while the others idle.
``"smallest_mailbox"``
   each message to an idle worker if there is one, else to the one with the fewest
   queued (Akka's ``SmallestMailboxPool``; a scan of the workers per message).
``"balancing"``
   the workers share one queue (Akka's ``BalancingPool``): a message waits in the
   pool until a worker is free, and each worker holds one message at a time -- so a
   slow worker never holds work another could take. A tell reaches its worker as an
   ask made by the worker's *feeder* task (which is how the pool learns that the
   worker is free again); an ``ask`` waits in the shared queue for a free worker
   and then asks it from the asker's own task, so cancellation works exactly as for
   any ask (withdrawn while it waits, the worker's ``async`` handler cancelled once
   it runs). A worker restarting (through its backoff) is given nothing until its
   fresh instance has started, nor one still unwinding a handler whose asker was
   cancelled, until the handler has ended.

Bounds: ``Pool(..., mailbox=Bounded(k, overflow))`` gives each worker that mailbox.
Under ``"round_robin"`` and ``"smallest_mailbox"`` the chosen worker's bound applies
(``send`` and ``ask`` wait for room there, ``tell`` meets its overflow policy). The
workers of a balancing pool share the pool's queue, so there it bounds that queue:
at most ``k`` messages wait in it, ``send`` and ``ask`` to a full pool wait for room
(one line, first come first served), ``tell`` meets the overflow policy as the
pool's own (see ``_balancing``).

``Broadcast(message)`` told to the pool reaches every worker; ``Resize(size)`` grows
or shrinks the pool (the workers removed, newest first, are stopped with
``drain=True``). The pool stops when it is stopped (its workers stop first, newest
first, as any children) or when its last worker has stopped. What is still queued in
a balancing pool when it stops is stranded as any mailbox is: asks fail with
:exc:`ActorStopped`, tells become dead letters.

Decisions (the spec names the routings and ``broadcast``, nothing more): a pool is
an actor (its ref is an :class:`ActorRef`, so it can be registered, watched,
stopped, supervised); its workers are its children (``self.children`` from the
pool's view, named ``worker-1`` ...); ``Broadcast`` and ``Resize`` are messages, as
in Akka, because a ref's public names are pinned; the workers' own ``mailbox=`` and
``shutdown=`` are the pool's arguments of those names.
"""

from ._actor import Pool as Pool
from ._actor import PoolActor as PoolActor
from ._cell import PoolCell as PoolCell
from ._messages import ROUTINGS as ROUTINGS
from ._messages import Broadcast as Broadcast
from ._messages import Resize as Resize
from ._messages import Routing as Routing

__all__ = ["ROUTINGS", "Broadcast", "Pool", "PoolActor", "PoolCell", "Resize", "Routing"]

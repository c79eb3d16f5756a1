"""Contracts RT1--RT36: what holds across nodes (listed in ``docs/contracts.rst``).

Each runs two or three nodes of one cluster in one ``trio.run`` over the in-memory
bus (:class:`trio_actors.remote.MemoryBus`: subjects, per-publisher order,
no-responders, a node's connection cut as by ``kill -9``) under an autojumping
``MockClock``: deterministic, no server. The same behaviour over a real
``nats-server`` is what ``tests/remote`` checks. Registered only where the
``cluster`` extra (msgspec) is installed.

By group, as the contracts in one system are:

* ``_messaging``: RT1 ask round trip, RT2 order, RT4 checkpoints, RT5 stopped or
  unreachable actor;
* ``_cancellation``: RT6 a cancelled ask withdrawn, RT7 one cancelled while handled,
  RT9 stranded asks failed back and drain;
* ``_node_death``: RT19 death watch and node death, RT21 nothing lost with a node
  dying mid-stream;
* ``_backpressure``: RT32 ``send`` to a slow bounded actor on another node;
* ``_membership``: RT33 membership converges after a join, a clean leave and a
  death;
* ``_shared_names``: RT34 a shared name spreads its messages and loses none when a
  member's node dies;
* ``_children``: RT35 a remote child's failure reaches its parent once, RT36 a child
  whose node dies is restarted on a live node within its intensity;
* ``_nodes`` and ``_actors``: the nodes they run on and the actors they share.
"""

from . import (
    _backpressure,
    _cancellation,
    _children,
    _membership,
    _messaging,
    _node_death,
    _shared_names,
)

del (
    _backpressure,
    _cancellation,
    _children,
    _membership,
    _messaging,
    _node_death,
    _shared_names,
)  # (registered)

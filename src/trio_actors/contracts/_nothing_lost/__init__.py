"""Contract T21, nothing lost: random programs over several actors, one invariant.

A *program* is drawn up front (so each example is one deterministic ``trio.run``
under a ``MockClock``) and then run: actors of both handler kinds, top-level or
children of earlier ones, each with a supervision strategy (restart, resume, stop,
and for children escalate), a group strategy for its own children (one-for-one,
one-for-all, rest-for-one) and an unbounded or a small bounded mailbox (any overflow
policy) -- some of them pools of two such actors behind one ref (round robin,
smallest mailbox, balancing), whose counts are the pool's -- virtual handler costs
and failing messages (failures, and expected errors that are replies), receive
tells, sends and asks (with and without deadlines) while asks and sends are
cancelled, actors watch and unwatch each other from their plain or async handlers,
actors are stopped, drain-stopped and stopped without waiting
(``stop_nowait``), a handler raises ``KeyboardInterrupt``, and the system block is
cancelled from outside; then the block is left (or the interrupt ends it). The
invariant checked at the end:

* every tell was handled (its handler ran), is exactly one dead letter, or was
  refused at once with ``MailboxFull`` -- exactly one of these;
* every send ended in its sender exactly once: returned (then the message was
  handled or became a dead letter, once), ``ActorStopped`` (never queued) or
  ``Cancelled`` (never queued, never handled);
* every ask ended in its asker exactly once, as one of: a reply or the handler's
  exception (handled), ``Cancelled`` (withdrawn, or abandoned while handled), or
  ``ActorStopped`` or ``MailboxFull`` (failed back); a withdrawn ask never ran,
  an answered one did, and no ask became a dead letter;
* no handler ran twice for one message, and no task is left behind;
* no watcher got more ``Terminated`` notices for an actor than it asked for, and
  none for an actor that did not stop;
* the runtime counted as withdrawn every cancelled ask or send that never ran, and
  besides them at most one notice per ``unwatch``.

T31 checks the same runs against the runtime's own statistics (:func:`conserved`).

The registered contracts run fixed seeded programs (``_seeded``); the pytest suite
draws programs with hypothesis (2,000 examples in CI) and runs them the same way.

One concept per module, in the order they build on each other:

* ``_program``: what a program is (actors, steps) and how one is drawn from a seed;
* ``_probes``: the actors a program runs, which record what their handlers see;
* ``_invariants``: what a run records (the ledger) and what is checked after it --
  T21's invariant above and T31's law;
* ``_run``: the interpreter, one ``match`` on a step's kind, in one ``trio.run``;
* ``_seeded``: T21 and T31 registered, over seeded programs.
"""

from . import _seeded
from ._invariants import ProgramRun as ProgramRun
from ._invariants import conserved as conserved
from ._program import GROUPS as GROUPS
from ._program import OP_KINDS as OP_KINDS
from ._program import OVERFLOWS as OVERFLOWS
from ._program import POOL_SIZE as POOL_SIZE
from ._program import ROUTINGS as ROUTINGS
from ._program import STRATEGIES as STRATEGIES
from ._program import ActorSpec as ActorSpec
from ._program import Op as Op
from ._program import Program as Program
from ._program import mailbox_for as mailbox_for
from ._program import random_program as random_program
from ._program import strategy_for as strategy_for
from ._run import run_program as run_program
from ._seeded import CONSERVATION_PROGRAMS as CONSERVATION_PROGRAMS
from ._seeded import SEEDED_PROGRAMS as SEEDED_PROGRAMS

del _seeded  # (imported for its contracts' registration)

__all__ = [
    "CONSERVATION_PROGRAMS",
    "GROUPS",
    "OP_KINDS",
    "OVERFLOWS",
    "POOL_SIZE",
    "ROUTINGS",
    "SEEDED_PROGRAMS",
    "STRATEGIES",
    "ActorSpec",
    "Op",
    "Program",
    "ProgramRun",
    "conserved",
    "mailbox_for",
    "random_program",
    "run_program",
    "strategy_for",
]

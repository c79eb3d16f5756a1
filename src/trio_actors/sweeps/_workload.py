"""A user's own workload for the sweep: ``--workload MODULE:FACTORY``.

The factory's contract
    ``FACTORY()`` takes no arguments and returns a pair ``(actor, messages)``: a new
    :class:`~trio_actors.Actor` instance (its ``receive`` is what gets measured)
    and an iterable of messages for it, long enough for one measurement (the
    sweep takes up to its tell count, 200,000 at full size; an endless generator is
    fine). It is called once per measurement session, in the measuring process, so
    it must be importable there: a module on ``sys.path`` or in the current
    directory. Make the messages deterministic (a seeded generator) so that every
    candidate gets the same work.

What is measured with a workload
    S1's hot tell with the user's actor instead of the counting handler: the
    messages are taken from the iterable *before* the clock starts, then all told,
    and the clock stops when ``await ref.stop(drain=True)`` returns -- every message
    handled. The other measurements (ask, probe, cleanup) and the contract suite do
    not change: they are properties of the runtime under the candidate policy.

:mod:`trio_actors.sweeps.example_workload` is a complete example.
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .. import Actor

WorkloadFactory = Callable[[], tuple[Actor, Iterable[Any]]]


class WorkloadError(Exception):
    """The ``--workload`` option names something that is not a usable workload."""


def load_workload(spec: str) -> WorkloadFactory:
    """Import ``MODULE:FACTORY``; the current directory is searched too.

    Raises:
        WorkloadError: the spec is malformed, the module does not import, or the
            attribute is missing or not callable (the message says which).
    """
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise WorkloadError(f"--workload {spec!r}: expected MODULE:FACTORY, e.g. mymod:workload")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise WorkloadError(
            f"--workload {spec!r}: module {module_name!r} does not import: "
            f"{type(error).__name__}: {error}"
        ) from None
    try:
        factory = getattr(module, attribute)
    except AttributeError:
        raise WorkloadError(
            f"--workload {spec!r}: module {module_name!r} has no attribute {attribute!r}"
        ) from None
    if not callable(factory):
        raise WorkloadError(f"--workload {spec!r}: {attribute!r} is not callable")
    return factory  # type: ignore[no-any-return]


def make_workload(factory: WorkloadFactory, spec: str, count: int) -> tuple[Actor, list[Any]]:
    """Call the factory; return its actor and its first ``count`` messages.

    Raises:
        WorkloadError: the factory raised, or returned something other than a new
            actor and an iterable with at least ``count`` messages.
    """
    try:
        made = factory()
    except Exception as error:
        raise WorkloadError(
            f"--workload {spec!r}: the factory raised {type(error).__name__}: {error}"
        ) from None
    if not (isinstance(made, tuple) and len(made) == 2):
        raise WorkloadError(
            f"--workload {spec!r}: the factory must return (actor, messages), got {made!r}"
        )
    actor, messages = made
    if not isinstance(actor, Actor):
        raise WorkloadError(
            f"--workload {spec!r}: the factory returned {actor!r} as its actor, "
            "not a trio_actors.Actor instance"
        )
    if actor._trio_actors_cell is not None:
        raise WorkloadError(f"--workload {spec!r}: the factory must return a new actor each time")
    try:
        taken = list(itertools.islice(messages, count))
    except TypeError:
        raise WorkloadError(
            f"--workload {spec!r}: the factory returned {messages!r} as its messages, "
            "not an iterable"
        ) from None
    if len(taken) < count:
        raise WorkloadError(
            f"--workload {spec!r}: the messages ran out after {len(taken)}; "
            f"one measurement needs {count}"
        )
    return actor, taken


__all__ = ["WorkloadError", "WorkloadFactory", "load_workload", "make_workload"]

"""Observing a running system: traces with OpenTelemetry (``docs/tracing.rst``).

``open_actor_system(tracing=True)`` (or a ``TracerProvider``, or a :class:`Tracing`)
makes the system an *observed* one: the kernel calls an observer
(``_core/_observer.py``) made here, and a node calls it too
(``remote/_observed.py``). This package's face, :class:`Tracing`, is a value and
imports no OpenTelemetry; the modules that do are imported only when a system is
opened with ``tracing=``. One concept per module:

* ``_options.py`` -- :class:`Tracing`, the options;
* ``_spans.py`` -- the spans of a traced system: names, kinds, parents, attributes,
  outcomes;
* ``_envelopes.py`` -- traced asks and tells, which carry their trace context to the
  actor and make the span of their handling;
* ``_cells.py`` -- observed cells: how a traced system's actors take asks and tells;
* ``_tracer.py`` -- the observer the kernel calls: cell and dispatcher classes,
  failures, restarts and stops, dead letters; contexts and trio tasks;
* ``_remote.py`` -- the trace context across nodes, in NATS message headers
  (imported only for a node).
"""

from ._options import Tracing as Tracing

__all__ = ["Tracing"]


def _fix_module_names() -> None:
    """Public objects say they live in ``trio_actors.observe`` (tracebacks, docs)."""
    for name in __all__:
        globals()[name].__module__ = __name__


_fix_module_names()
del _fix_module_names

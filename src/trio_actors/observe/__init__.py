"""Observing a running system with OpenTelemetry: traces and metrics
(``docs/observing.rst``).

``open_actor_system(tracing=True)`` (or a ``TracerProvider``, or a :class:`Tracing`)
and ``open_actor_system(metrics=True)`` (or a ``MeterProvider``, or a
:class:`Metrics`) make the system an *observed* one: the kernel calls an observer
(``_core/_observer.py``) made here, and a node calls it too
(``remote/_observed.py``). This package's face, :class:`Tracing` and
:class:`Metrics`, are values and import no OpenTelemetry; the modules that do are
imported only when a system is opened with ``tracing=`` or ``metrics=``. One concept
per module:

* ``_options.py`` -- :class:`Tracing` and :class:`Metrics`, the options;
* ``_spans.py`` -- the spans of a traced system: names, kinds, parents, attributes,
  outcomes;
* ``_envelopes.py`` -- traced asks and tells, which carry their trace context to the
  actor and make the span of their handling;
* ``_cells.py`` -- observed cells: how a traced system's actors take asks and tells;
* ``_tracer.py`` -- the observer the kernel calls: cell and dispatcher classes,
  failures, restarts and stops, dead letters; contexts and trio tasks;
* ``_remote.py`` -- the trace context across nodes, in NATS message headers
  (imported only for a node);
* ``_instruments.py`` -- the metrics' instruments, made once per meter, and the
  callbacks that read every system measured on it;
* ``_source.py`` -- a system as a source of metrics: the walk of its actors, the
  counts its hooks keep, the snapshots an exporter's thread asks for;
* ``_turns.py`` -- the round clock that times turns for the metrics;
* ``_metered.py`` -- the observer of a metered system (and its timed asks);
* ``_both.py`` -- the observer of a system both traced and metered.
"""

from ._options import Metrics as Metrics
from ._options import Tracing as Tracing

__all__ = ["Metrics", "Tracing"]


def _fix_module_names() -> None:
    """Public objects say they live in ``trio_actors.observe`` (tracebacks, docs)."""
    for name in __all__:
        globals()[name].__module__ = __name__


_fix_module_names()
del _fix_module_names

"""Opening an actor system: :func:`open_actor_system`, the block that owns the
lifetime of its actors.

It opens a nursery that owns everything the runtime runs: the dispatcher task, the
short-lived tasks of actors whose handlers are ``async def``, and stop tasks. With
``cluster=`` the system becomes a node (``remote/``): this module sits above the
remote layer, and imports it only then; with ``tracing=`` the system is observed
(``observe/``, and OpenTelemetry: imported only then). Leaving the block stops every actor still
alive (T16), newest first and one at a time (T29, T25), then leaves the cluster and
cancels the nursery: no task is left behind.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from os import PathLike
from typing import TYPE_CHECKING, Any

import trio

from ._cluster import Cluster, as_cluster, check_token, read_cluster_file
from ._core._dead_letters import DEFAULT_RECENT_DEAD_LETTERS, DeadLetters
from ._core._round_clock import is_default_clock
from ._core._turn_sampler import DEFAULT_TURN_SAMPLING, SAMPLER
from ._interrupts import protect_module
from ._policy import ServingPolicy
from .actors import ActorSystem

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .observe import Metrics, Tracing
    from .observe._both import BothObservers
    from .observe._metered import MetricsObserver
    from .observe._tracer import TracingObserver
    from .remote import Node

__all__ = ["open_actor_system"]


def _checked_seed(seed: object) -> int:
    """``seed`` if it is an int; a fresh one from the OS for ``None``."""
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    return seed


def _checked_turn_sampling(turn_sampling: object) -> bool:
    """Whether to sample (``turn_sampling`` is seconds, or ``None`` for no).

    Raises:
        TypeError: neither a number nor ``None``.
        ValueError: under 1 ms (a thread waking more often would cost the trio
            thread its GIL), or not finite.
    """
    if turn_sampling is None:
        return False
    if isinstance(turn_sampling, bool) or not isinstance(turn_sampling, int | float):
        raise TypeError(f"turn_sampling must be seconds (a float) or None, got {turn_sampling!r}")
    if not 0.001 <= turn_sampling < math.inf:
        raise ValueError(
            f"turn_sampling must be at least 0.001 seconds and finite, got {turn_sampling!r}"
        )
    return True


def _real_clock() -> bool:
    """Whether the run's clock is trio's default one (whose time is the wall
    clock's: the turn sampler's readings are comparable with it)."""
    return is_default_clock(trio.lowlevel.current_clock())


def open_actor_system(
    *,
    serving: ServingPolicy | None = None,
    dead_letters_kept: int = DEFAULT_RECENT_DEAD_LETTERS,
    seed: int | None = None,
    turn_sampling: float | None = DEFAULT_TURN_SAMPLING,
    cluster: str | Cluster | PathLike[str] | None = None,
    node: str | None = None,
    tracing: bool | TracerProvider | Tracing = False,
    metrics: bool | Metrics | Any = False,
) -> AbstractAsyncContextManager[ActorSystem]:
    """Open an actor system whose actors live as long as the ``async with`` block.

    Entering is a checkpoint (it starts the system's dispatcher task in a nursery
    of its own); cancelled there, no system is opened.

    Args:
        serving: how mailboxes are served; the default is ``ServingPolicy()``
            (batch 64, cleanup batch 32, time slice 16 ms).
        dead_letters_kept: how many recent dead letters ``dead_letters.recent``
            keeps.
        seed: seeds every random choice the runtime makes (today: the jitter of
            :class:`~trio_actors.Backoff`), so that under ``MockClock`` a program
            runs the same every time (contract T30). ``None`` (the default) draws
            a fresh seed from the operating system, so that systems in different
            processes do not restart in lockstep; :attr:`ActorSystem.seed` tells
            which, to replay a run.
        turn_sampling: seconds between the turn sampler's looks at whose message
            the trio thread handles (``_core/_turn_sampler.py``), which make a
            handler that blocks it (a ``time.sleep``, a CPU-bound loop) show in its
            actor's ``longest_turn_seconds``; ``None`` for none. The serving paths
            keep the record it reads either way (a store per activation). Sampled
            only under trio's default clock (its time is the wall clock's).
        cluster, node: make the system a node named ``node`` of a cluster of
            systems in other processes or machines (``cluster``: a ``nats://`` URL
            or a :class:`~trio_actors.Cluster`): refs travel in messages and work
            across nodes, and the registry answers across them. Entering connects
            (and fails as :func:`trio_actors.nats.connect` does); leaving stops
            the actors first, then leaves the cluster. ``cluster`` may also be a
            :class:`~pathlib.Path` to a node configuration file (TOML: see
            :meth:`Cluster.from_toml <trio_actors.Cluster.from_toml>` and the CLI
            reference); its ``node`` key names the node unless ``node`` is given.
        tracing: trace asks (and tells) with OpenTelemetry (:ref:`traces`):
            ``True`` with the global tracer provider, a ``TracerProvider``, or a
            :class:`~trio_actors.observe.Tracing` with more options. Needs the
            ``otel`` extra (``pip install "trio-actors[otel]"``: the OpenTelemetry
            API; without it, entering raises ``ModuleNotFoundError`` saying so).
            ``False`` (the default) costs nothing: OpenTelemetry is not even
            imported.
        metrics: report what the actors do through the OpenTelemetry metrics
            API (``pip install "trio-actors[otel]"``): ``True`` for the global
            meter provider, a ``MeterProvider``, or a
            :class:`~trio_actors.observe.Metrics` with more options. The
            instruments and their attributes are in "Observing a running system";
            nothing of it runs on the serving paths, and with ``False`` (the
            default) nothing of OpenTelemetry is imported.

    Leaving the block stops every actor still alive, children before their parents,
    newest first and one at a time (an actor not yet reached keeps serving): queued
    asks fail
    with :class:`~trio_actors.ActorStopped`, queued tells become dead letters,
    running async handlers are cancelled, ``on_stop`` hooks run; then no task of the
    system is left. This cleanup finishes even if the block is being cancelled.
    Like a nursery, an exception leaving the block comes wrapped in an
    ``ExceptionGroup``.

    Used without ``async with`` (``system = open_actor_system()``, or ``await``-ed),
    the first use says how to open it instead of failing obscurely.
    """
    return _SystemOpener(
        _open(serving, dead_letters_kept, seed, turn_sampling, cluster, node, tracing, metrics)
    )


class _SystemOpener:
    """What :func:`open_actor_system` returns: an async context manager, only that."""

    __slots__ = ("_manager",)

    def __init__(self, manager: AbstractAsyncContextManager[ActorSystem]) -> None:
        self._manager = manager

    async def __aenter__(self) -> ActorSystem:
        return await self._manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"open_actor_system() returns an async context manager, not the system "
            f"(no .{name}): write 'async with open_actor_system() as system:' and use "
            f"system.{name} inside the block"
        )

    def __await__(self) -> Any:
        raise TypeError(
            "open_actor_system() is not awaited: write 'async with open_actor_system() as system:'"
        )

    def __enter__(self) -> Any:
        raise TypeError(
            "open_actor_system() is an async context manager: write "
            "'async with open_actor_system() as system:' (inside a trio run)"
        )

    def __exit__(self, *exc_info: Any) -> None:  # pragma: no cover - __enter__ raised
        pass


@asynccontextmanager
async def _open(
    serving: ServingPolicy | None,
    dead_letters_kept: int,
    seed: int | None,
    turn_sampling: float | None,
    cluster: Any,
    node: str | None,
    tracing: object,
    metrics: object,
) -> AsyncIterator[ActorSystem]:
    """The body of :func:`open_actor_system`."""
    if serving is None:
        serving = ServingPolicy()
    elif not isinstance(serving, ServingPolicy):
        raise TypeError(f"serving must be a ServingPolicy, got {serving!r}")
    dead_letters = DeadLetters(dead_letters_kept)
    seed = _checked_seed(seed)
    sampled = _checked_turn_sampling(turn_sampling) and _real_clock()
    if isinstance(cluster, PathLike):  # a node configuration file (read here: its errors too)
        cluster, named = read_cluster_file(cluster)
        node = named if node is None else node
    if (cluster is None) != (node is None):
        raise TypeError(
            "a node needs both cluster= (a nats:// URL, a Cluster, or a configuration file) "
            "and node= (its name, or the file's node key); "
            f"got cluster={cluster!r}, node={node!r}"
        )
    open_node = None
    if cluster is not None:  # (checked here, so that a mistake is not in a group)
        cluster = as_cluster(cluster)
        check_token(node, "node")
        open_node = _import_open_node()
        from .remote import spawnable_classes

        spawnable_classes(cluster)  # (a TypeError for a class that is no actor)
    tracer = None if tracing is False else _tracing_observer(tracing)
    meter = _metrics_observer(metrics)
    observer = _observer(tracer, meter)
    async with trio.open_nursery() as nursery:
        system = ActorSystem(nursery, serving, dead_letters, seed, observer)
        if tracer is not None:
            tracer.attach(system)
        source = None if meter is None else meter.attach(system)
        with _outside_traces(tracer):  # (the dispatcher serves every trace's messages)
            await nursery.start(system._dispatcher.run, name="trio-actors dispatcher")
        if sampled:
            assert turn_sampling is not None
            SAMPLER.add(system._dispatcher.serving_now, turn_sampling)
        try:
            async with _node_of(system, open_node, cluster, node, tracer):
                if source is not None and system.node is not None:
                    source.set_node(system.node)
                try:
                    yield system
                finally:
                    await system._shutdown()  # (the node serves until its actors stopped)
        finally:
            if sampled:
                SAMPLER.remove(system._dispatcher.serving_now)
            dead_letters.close_subscriptions()  # (the exit's own letters are in)
            if source is not None:
                source.close()  # (its counters stay in the sums of later collections)
            system._close()
            nursery.cancel_scope.cancel()


def _tracing_observer(tracing: object) -> TracingObserver:
    """The observer of a system opened with ``tracing=tracing`` (see
    :func:`open_actor_system`); OpenTelemetry is imported only now.

    Raises:
        TypeError: ``tracing`` is not one of what ``tracing=`` takes.
        ModuleNotFoundError: the OpenTelemetry API is not installed (the message
            says what to install).
    """
    from .observe import Tracing

    if not (isinstance(tracing, bool | Tracing) or callable(getattr(tracing, "get_tracer", None))):
        raise TypeError(
            "tracing must be True or False, an OpenTelemetry TracerProvider, or a "
            f"trio_actors.observe.Tracing; got {tracing!r}"
        )
    try:
        from .observe._tracer import tracing_observer
    except ModuleNotFoundError as missing:
        if not (missing.name or "").startswith("opentelemetry"):
            raise
        raise ModuleNotFoundError(
            'tracing needs OpenTelemetry (its API): pip install "trio-actors[otel]"',
            name="opentelemetry",
        ) from None
    return tracing_observer(tracing)


def _metrics_observer(metrics: object) -> MetricsObserver | None:
    """The observer of a system opened with ``metrics=metrics`` (``None``: no
    metrics); OpenTelemetry is imported only then.

    Raises:
        TypeError: ``metrics`` is not one of what ``metrics=`` takes.
        ModuleNotFoundError: the OpenTelemetry API is not installed (the message
            says what to install).
    """
    if metrics is False or metrics is None:
        return None
    from .observe import Metrics

    try:
        from opentelemetry.metrics import MeterProvider

        from .observe._metered import MetricsObserver
    except ModuleNotFoundError as missing:
        if not (missing.name or "").startswith("opentelemetry"):
            raise
        raise ModuleNotFoundError(
            'metrics needs OpenTelemetry (its API): pip install "trio-actors[otel]"',
            name="opentelemetry",
        ) from None
    if metrics is True:
        return MetricsObserver(Metrics())
    if isinstance(metrics, Metrics):
        return MetricsObserver(metrics)
    if isinstance(metrics, MeterProvider):
        return MetricsObserver(Metrics(provider=metrics))
    raise TypeError(
        "metrics must be True or False, an OpenTelemetry MeterProvider, or a "
        f"trio_actors.observe.Metrics; got {metrics!r}"
    )


def _observer(
    tracer: TracingObserver | None, meter: MetricsObserver | None
) -> TracingObserver | MetricsObserver | BothObservers | None:
    """The system's one observer: the tracer's, the meter's, or both."""
    if tracer is None or meter is None:
        return tracer or meter
    from .observe._both import BothObservers

    return BothObservers(tracer, meter)


def _outside_traces(observer: TracingObserver | None) -> AbstractContextManager[None]:
    """No span current for the block, in a traced system (the tasks started in it
    serve every trace's messages); nothing otherwise."""
    return nullcontext() if observer is None else observer.outside_traces()


def _import_open_node() -> Callable[..., AbstractAsyncContextManager[Node]]:
    """``remote.open_node``, imported only for a system with ``cluster=`` (without
    one, nothing of the remote layer, nor msgspec, is imported)."""
    try:
        from .remote import open_node
    except ModuleNotFoundError as missing:
        if missing.name != "msgspec":
            raise
        raise ModuleNotFoundError(
            'a node needs msgspec (messages cross as msgpack): pip install "trio-actors[cluster]"',
            name="msgspec",
        ) from None
    return open_node


@asynccontextmanager
async def _node_of(
    system: ActorSystem,
    open_node: Callable[..., AbstractAsyncContextManager[Node]] | None,
    cluster: Cluster | None,
    node: str | None,
    observer: TracingObserver | None,
) -> AsyncIterator[None]:
    """The system as a node of ``cluster`` for the block (nothing without one). The
    node's tasks (its connection's reader among them) start outside any trace."""
    if open_node is None:
        yield
        return
    async with AsyncExitStack() as stack:
        with _outside_traces(observer):
            opened = await stack.enter_async_context(open_node(system, cluster, node))
        system._join(opened, opened)
        try:
            yield
        finally:
            system._leave()


protect_module(globals())

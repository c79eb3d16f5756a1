"""The ``trio-actors`` command (also ``python -m trio_actors``).

``trio-actors contracts [--batch N] [--cleanup-batch N] [--time-slice S|none]
[--only T1,T2]`` runs the contract suite under one policy, prints a table and exits
non-zero when any contract fails.

``trio-actors sweep [--batches LIST] [--cleanup-batches LIST] [--time-slices LIST]
[--workload MODULE:FACTORY] [--quick] [--rounds N] [--json PATH] [--plot PATH]``
checks and measures candidate policies and recommends one
(:mod:`trio_actors.sweeps._sweep`); exit code 1 when no candidate passes every
contract.

``trio-actors node`` and ``trio-actors cluster`` run nodes of a cluster
(:mod:`trio_actors.sweeps._nodes`); ``trio-actors top`` shows a running cluster
(:mod:`trio_actors.top`, which needs rich: the ``top`` extra, but for ``--json``).

Bad options are one-line errors with exit code 2, never tracebacks. So is a sweep
without its extra: the runtime needs only trio and attrs, the sweep also pyperf and
rich (``pip install "trio-actors[sweep]"``), which are imported only once the sweep
command is chosen -- ``contracts`` runs without them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import DEFAULT_BATCH, DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE, ServingPolicy, compiled

if TYPE_CHECKING:  # (the sweep's modules import pyperf and rich: only when it runs)
    from rich.console import Console

    from ._recommend import Candidate
    from ._sweep import Settings, Sweep


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _time_slice(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected seconds (e.g. 0.016) or 'none', got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return value


def _listed(item: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        parts = [part.strip() for part in text.split(",")]
        if not text.strip() or any(not part for part in parts):
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list without empty items, got {text!r}"
            )
        return [item(part) for part in parts]

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-actors",
        description="trio-actors tools: the contract suite, the batch-size sweep, "
        "nodes of a cluster, and a live view of one.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_contracts_command(commands)
    _add_sweep_command(commands)
    _add_node_commands(commands)
    _add_secure_command(commands)
    _add_top_command(commands)
    return parser


def _add_contracts_command(commands: Any) -> None:
    """``contracts``: the suite under one policy."""
    contracts = commands.add_parser(
        "contracts",
        help="run the lifecycle and ask-cancellation contract suite under one policy",
        description="Run the contract suite under one serving policy; exit 1 if any "
        "contract fails.",
    )
    contracts.add_argument(
        "--batch",
        type=_positive_int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"messages per mailbox turn (default {DEFAULT_BATCH})",
    )
    contracts.add_argument(
        "--cleanup-batch",
        type=_positive_int,
        default=DEFAULT_CLEANUP_BATCH,
        metavar="N",
        help=f"stranded messages per cleanup step (default {DEFAULT_CLEANUP_BATCH})",
    )
    contracts.add_argument(
        "--time-slice",
        type=_time_slice,
        default=DEFAULT_TIME_SLICE,
        metavar="S|none",
        help=f"seconds of trio time per round, or 'none' (default {DEFAULT_TIME_SLICE})",
    )
    contracts.add_argument(
        "--only",
        default=None,
        metavar="IDS",
        help="comma-separated contract ids to run (default: all)",
    )


def _add_sweep_command(commands: Any) -> None:
    """``sweep``: the candidate policies to check and measure, and the outputs."""
    sweep = commands.add_parser(
        "sweep",
        help="check and measure candidate serving policies; recommend one",
        description="Run the contract suite and pyperf measurements (S1 tell "
        "throughput, S2 ask round trip, S6 probe delay; S7 for cleanup candidates) "
        "for each candidate policy, and recommend the fastest that keeps every "
        "contract. Each dimension is swept around the defaults, the others held.",
    )
    sweep.add_argument(
        "--batches",
        type=_listed(_positive_int),
        metavar="LIST",
        help="candidate batch sizes (default 16,32,64,128,256,512; --quick 32,64,128)",
    )
    sweep.add_argument(
        "--cleanup-batches",
        type=_listed(_positive_int),
        metavar="LIST",
        help="candidate cleanup batches (default 16,32,64; --quick 32,64)",
    )
    sweep.add_argument(
        "--time-slices",
        type=_listed(_time_slice),
        metavar="LIST",
        help="candidate time slices in seconds or 'none' (default none,0.004,0.016,0.064; "
        "--quick none,0.016)",
    )
    sweep.add_argument(
        "--quick",
        action="store_true",
        help="fewer candidates, one round at small sizes (about a minute)",
    )
    sweep.add_argument(
        "--rounds",
        type=_positive_int,
        metavar="N",
        help="interleaved measuring rounds (default 10; --quick 1)",
    )
    sweep.add_argument(
        "--workload",
        metavar="MODULE:FACTORY",
        help="measure tell throughput with your own actor and messages: FACTORY() returns "
        "(actor, messages); see trio_actors.sweeps.example_workload",
    )
    sweep.add_argument("--json", metavar="PATH", help="write the results as JSON")
    sweep.add_argument("--plot", metavar="PATH", help="write a PNG plot (needs matplotlib)")


def _add_node_commands(commands: Any) -> None:
    """``node`` and ``cluster`` (run by :mod:`trio_actors.sweeps._nodes`, imported only
    when one of them is chosen)."""
    node = commands.add_parser(
        "node",
        help="run one node of a cluster: await MODULE:FUNCTION(system)",
        description="Open an actor system as a node of the cluster and await "
        "FUNCTION(system) from MODULE; exit 0 when it returns (or on SIGTERM: a clean "
        "leave), 1 when it raises, 130 on Ctrl-C.",
    )
    node.add_argument(
        "--name", help="the node's name (default: the file's node key, else <host>-<pid>)"
    )
    node.add_argument(
        "--system-user",
        metavar="USER",
        help="a subscribe-only user of the servers' system account, for disconnect "
        "advisories (with --system-password-file)",
    )
    node.add_argument(
        "--system-password-file",
        metavar="FILE",
        help="a file holding the --system-user's password",
    )
    cluster = commands.add_parser(
        "cluster",
        help="run N nodes on this machine (and a nats-server if none answers)",
        description="Start a nats-server at the cluster's first server unless one "
        "answers there, then N node processes running MODULE:FUNCTION; Ctrl-C, SIGTERM "
        "or SIGHUP stops them all and the server; exit non-zero if any node failed.",
    )
    cluster.add_argument("--nodes", type=int, default=2, metavar="N", help="how many (2)")
    for command in (node, cluster):
        command.add_argument("target", metavar="MODULE:FUNCTION")
        command.add_argument(
            "--config",
            metavar="FILE",
            help="a node configuration file (TOML: servers, cluster name, types, errors, "
            "TLS, credentials, system user, heartbeat); the options below change it",
        )
        command.add_argument(
            "--cluster",
            metavar="URL",
            help="a nats:// URL (default: the file's servers, else nats://127.0.0.1:4222)",
        )
        command.add_argument(
            "--cluster-name", help="the cluster's name (default: the file's, else trio-actors)"
        )
        command.add_argument(
            "--heartbeat",
            type=float,
            metavar="SECONDS",
            help="between heartbeats (a node silent for 3 is down; default: the file's, else 1.0)",
        )
        command.add_argument(
            "--tracing",
            action="store_true",
            help="trace with OpenTelemetry's global tracer provider, which MODULE sets up "
            'when imported (needs pip install "trio-actors[otel]")',
        )
        command.add_argument(
            "--metrics",
            action="store_true",
            help="report the node's metrics through OpenTelemetry's global meter provider, "
            "which MODULE sets up when it is imported (needs trio-actors[otel])",
        )
    cluster.set_defaults(system_user=None, system_password_file=None)


def _add_secure_command(commands: Any) -> None:
    """``secure`` (run by :mod:`trio_actors.sweeps._secure`, imported only then)."""
    secure = commands.add_parser(
        "secure",
        help="write a nats-server configuration and node files for a secure cluster",
        description="Write into DIR a nats-server configuration (one user per node, "
        "subject permissions so that only a node speaks for itself, a subscribe-only "
        "advisories user) and one configuration file per node (its credentials).",
    )
    secure.add_argument("nodes", nargs="+", metavar="NODE", help="the nodes' names")
    secure.add_argument("--out", required=True, metavar="DIR", help="where to write")
    secure.add_argument(
        "--cluster-name", default="trio-actors", help="the cluster's name (trio-actors)"
    )
    secure.add_argument(
        "--cluster",
        action="append",
        metavar="URL",
        help="a server the nodes connect to (repeatable; default nats://127.0.0.1:4222; "
        "the server's port is the first's)",
    )
    secure.add_argument(
        "--allow",
        action="append",
        metavar="NODE:NODE,...",
        help="which nodes' actors a node may send to (repeatable); without it, every "
        "node may reach every other; with it, a node not listed reaches none",
    )
    secure.add_argument(
        "--monitor",
        nargs="?",
        const="ta-monitor",
        metavar="NAME",
        help="also a monitor user NAME (default ta-monitor) and its file NAME.toml, for "
        "trio-actors top: it may ask the nodes' statistics, nothing else (give it after "
        "the node names, or as --monitor=NAME)",
    )


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None


def _add_top_command(commands: Any) -> None:
    """``top`` (run by :mod:`trio_actors.top`, imported only then)."""
    top = commands.add_parser(
        "top",
        help="a live view of a running cluster: its nodes, and a node's busiest actors",
        description="Show every node of a cluster (uptime, actors, messages and dead "
        "letters per second, tells in doubt, the longest turn and whose), and a "
        "selected node's busiest actors, refreshed every --interval seconds; press ? "
        "for the keys. --once prints one snapshot and exits (1 if no node answered).",
    )
    top.add_argument(
        "--config",
        metavar="FILE",
        help="a configuration file (TOML: servers, cluster name, TLS, credentials -- a "
        "secure deployment's monitor file, trio-actors secure --monitor)",
    )
    top.add_argument(
        "--cluster",
        action="append",
        metavar="URL",
        help="a nats:// URL (repeatable; default: the file's servers, else nats://127.0.0.1:4222)",
    )
    top.add_argument(
        "--cluster-name", help="the cluster's name (default: the file's, else trio-actors)"
    )
    top.add_argument(
        "--interval", type=_seconds, default=1.0, metavar="SECONDS", help="between polls (1.0)"
    )
    top.add_argument(
        "--wait",
        type=_seconds,
        default=0.5,
        metavar="SECONDS",
        help="how long a poll waits for the nodes' answers (0.5; less once every node "
        "known has answered)",
    )
    top.add_argument(
        "--actors",
        type=_positive_int,
        default=20,
        metavar="N",
        help="busiest actors shown for the selected node (20; at most 100)",
    )
    top.add_argument(
        "--once", action="store_true", help="print one snapshot of the nodes as a table and exit"
    )
    top.add_argument(
        "--json",
        action="store_true",
        help="print one snapshot of the nodes' summaries as JSON and exit (needs no rich)",
    )


SWEEP_EXTRA = 'pip install "trio-actors[sweep]"'
"""How to install what the sweep needs beyond the runtime (pyperf and rich)."""


def _require_sweep_extra() -> None:
    """Exit 2 with a one-line error, before anything is measured, when the sweep's
    own dependencies are not installed."""
    missing = []
    for name in ("pyperf", "rich"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        print(
            f"trio-actors sweep: needs {' and '.join(missing)}, not installed; "
            f"install the sweep extra: {SWEEP_EXTRA}",
            file=sys.stderr,
        )
        raise SystemExit(2)


TOP_EXTRA = 'pip install "trio-actors[top]"'
"""How to install what ``top`` needs beyond the runtime (rich)."""


def _require_top_extra() -> None:
    """Exit 2 with a one-line error when rich is not installed."""
    try:
        importlib.import_module("rich")
    except ImportError:
        print(
            f"trio-actors top: needs rich, not installed; install the top extra: {TOP_EXTRA} "
            "(--json needs no rich)",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


def _run_sweep(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``trio-actors sweep``: plan, sweep with a progress bar, report. Exit 0 with a
    recommendation, 1 without one, 2 when the sweep itself failed."""
    _require_sweep_extra()  # before the imports below, which need pyperf and rich
    from rich.console import Console

    candidates, settings = _sweep_plan(args, parser)
    console = Console()
    errors = Console(stderr=True)
    errors.print(
        f"sweeping {len(candidates)} candidates: contracts, then {settings.rounds} "
        f"interleaved measuring round(s) at scale {settings.scale:g}"
    )
    sweep = _sweep_with_progress(candidates, settings, errors)
    if sweep is None:
        return 2
    _report_sweep(args, sweep, settings, console)
    return 0 if sweep.recommended is not None else 1


def _sweep_plan(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> tuple[list[Candidate], Settings]:
    """The candidates and settings the options ask for; a bad option (no plotting
    library for ``--plot``, a workload that does not load) exits through ``parser``
    before anything is measured."""
    import attrs

    from ._recommend import DEFAULT_BATCHES, DEFAULT_CLEANUP_BATCHES, DEFAULT_TIME_SLICES
    from ._recommend import candidates as make_candidates
    from ._report import PLOT_MISSING
    from ._sweep import QUICK, Settings
    from ._workload import WorkloadError, load_workload, make_workload
    from .bench import tell_count

    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error(PLOT_MISSING)
    quick_lists = ([32, 64, 128], [32, 64], [None, 0.016])
    full_lists = (list(DEFAULT_BATCHES), list(DEFAULT_CLEANUP_BATCHES), list(DEFAULT_TIME_SLICES))
    batches, cleanups, slices = quick_lists if args.quick else full_lists
    candidates = make_candidates(
        args.batches or batches, args.cleanup_batches or cleanups, args.time_slices or slices
    )
    settings = QUICK if args.quick else Settings()
    if args.rounds is not None:
        settings = attrs.evolve(settings, rounds=args.rounds)
    if args.workload is not None:
        try:  # here, before measuring anything: a bad workload is a bad option
            count = tell_count(settings.scale)
            make_workload(load_workload(args.workload), args.workload, count)
        except WorkloadError as error:
            parser.error(str(error))
        settings = attrs.evolve(settings, workload=args.workload)
    return candidates, settings


def _sweep_with_progress(
    candidates: list[Candidate], settings: Settings, errors: Console
) -> Sweep | None:
    """Run the sweep under a progress bar on ``errors``; ``None`` (said there) if it
    failed."""
    from rich.progress import Progress

    from ._sweep import SweepError, run_sweep, steps_of

    with Progress(console=errors, transient=True) as progress:
        task = progress.add_task("starting", total=steps_of(candidates, settings))
        first = [True]

        def step(next_step: str) -> None:
            if not first[0]:
                progress.advance(task)
            first[0] = False
            progress.update(task, description=next_step)

        try:
            sweep = run_sweep(candidates, settings, step)
        except SweepError as error:
            errors.print(f"trio-actors sweep: {error}")
            return None
        progress.advance(task)
    return sweep


def _report_sweep(
    args: argparse.Namespace, sweep: Sweep, settings: Settings, console: Console
) -> None:
    """The table and the recommendation on ``console``; the JSON and the plot where
    the options ask for them."""
    import json

    from ._recommend import to_json
    from ._report import plot, table

    console.print(table(sweep))
    if sweep.recommended is None:
        console.print("no candidate passed every contract: no recommendation")
    else:
        console.print(f"recommended: {sweep.recommended.candidate.describe()}")
    if settings.rounds < 5:
        console.print(
            f"({settings.rounds} measuring round(s): the contracts columns are exact,\n"
            " the timings only indicative; choose with a full sweep, 10 rounds by default)"
        )
    if args.json is not None:
        document = to_json(sweep.results, sweep.recommended, sweep.environment)
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
    if args.plot is not None:
        from pathlib import Path

        plot(sweep, Path(args.plot))


def _run_contracts(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..contracts import REGISTRY, run_contracts

    policy = ServingPolicy(args.batch, args.cleanup_batch, args.time_slice)
    ids = list(REGISTRY)
    if args.only:
        ids = [part.strip().upper() for part in args.only.split(",") if part.strip()]
        unknown = [i for i in ids if i not in REGISTRY]
        if unknown or not ids:
            parser.error(f"--only: unknown contract ids {unknown}; known: {', '.join(REGISTRY)}")
    build = "compiled (mypyc)" if compiled else "pure Python"
    print(f"trio-actors contract suite: {policy.describe()}; kernel: {build}")
    failed = 0
    start = time.perf_counter()
    width = max(len(REGISTRY[i].title) for i in ids)
    for result in (run_contracts(policy, [i])[0] for i in ids):  # the table grows live
        mark = "pass" if result.passed else "FAIL"
        line = f"  {result.id:<4} {result.title:<{width}}  {mark}"
        if not result.passed:
            failed += 1
            line += f"  {result.reason}"
        print(line, flush=True)
    elapsed = time.perf_counter() - start
    passed = len(ids) - failed
    print(f"contracts: {passed} passed, {failed} failed ({elapsed:.1f}s)")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trio-actors`` console script."""
    import logging

    logging.getLogger("trio_actors").addHandler(logging.NullHandler())
    logging.getLogger("trio_actors").propagate = False  # contracts fail handlers on purpose
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "contracts":
        return _run_contracts(args, parser)
    if args.command == "sweep":
        return _run_sweep(args, parser)
    if args.command in ("node", "cluster"):
        from ._nodes import run_cluster, run_node

        return (run_node if args.command == "node" else run_cluster)(args, parser)
    if args.command == "secure":
        from ._secure import run_secure

        return run_secure(args, parser)
    if args.command == "top":
        if not args.json:
            _require_top_extra()
        from ..top import run_top

        return run_top(args, parser)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

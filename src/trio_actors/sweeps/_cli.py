"""The ``trio-actors`` command (also ``python -m trio_actors``).

``trio-actors contracts [--batch N] [--cleanup-batch N] [--time-slice S|none]
[--only T1,T2]`` runs the contract suite under one policy, prints a table and exits
non-zero when any contract fails. Bad options are one-line errors with exit code 2,
never tracebacks.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from .._policy import (
    DEFAULT_BATCH,
    DEFAULT_CLEANUP_BATCH,
    DEFAULT_TIME_SLICE,
    ServingPolicy,
)


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-actors",
        description="trio-actors tools: the contract suite (and, later, the sweep).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
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
        help=f"seconds of trio time per turn, or 'none' (default {DEFAULT_TIME_SLICE})",
    )
    contracts.add_argument(
        "--only",
        default=None,
        metavar="IDS",
        help="comma-separated contract ids to run (default: all)",
    )
    return parser


def _run_contracts(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..contracts import REGISTRY, run_contracts

    policy = ServingPolicy(args.batch, args.cleanup_batch, args.time_slice)
    ids = list(REGISTRY)
    if args.only:
        ids = [part.strip().upper() for part in args.only.split(",") if part.strip()]
        unknown = [i for i in ids if i not in REGISTRY]
        if unknown or not ids:
            parser.error(f"--only: unknown contract ids {unknown}; known: {', '.join(REGISTRY)}")
    print(f"trio-actors contract suite: {policy.describe()}")
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
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

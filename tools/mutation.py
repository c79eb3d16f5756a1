"""Mutation testing of the core: does the test suite notice a broken runtime?

A small AST mutator of our own (no dependency): it lists every place in the core
modules -- the kernel's mailbox, lifecycle and cell modules in ``_core/`` -- where one of the
operators below applies, samples ``--mutants`` of them with a fixed seed, and for
each one runs the whole test suite against a copy of the package with that one
change (``PYTHONPATH`` puts the copy first), with a per-test timeout (20 s: every
test but T21's hypothesis test, which has its own, takes at most a few seconds, so a
timeout is a hang), stopping at the first failure. A mutant the suite fails on is
*killed*; one it passes on *survived* and is listed, for a person to decide whether
it is equivalent (changes nothing observable) or a test is missing.

Operators: a comparison replaced by its opposite (``==``/``!=``, ``<``/``>=``,
``<=``/``>``, ``is``/``is not``, ``in``/``not in``), ``and``/``or`` swapped, a
``not`` dropped, ``True``/``False`` swapped, a small integer constant off by one,
``+=``/``-=`` and ``+``/``-`` swapped, and a statement removed (a call whose value
is unused, or an assignment to an attribute).

Usage (from the repository root, in the dev venv)::

    python tools/mutation.py --mutants 220 --jobs 2 -o mutation/results.json [--resume]

The results file is rewritten after every mutant, so an interrupted run keeps what it
did; ``--resume`` runs only the sampled mutants not yet in it.

Docstrings, ``assert`` statements, ``__all__`` and code under ``TYPE_CHECKING``
are not mutated; neither are f-strings (messages).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "trio_actors"
TARGETS = [
    # The kernel's mailbox, lifecycle and cell modules (before the kernel became one
    # package: mailbox/, lifecycle/ and actors/_cell.py, _bounded_cell.py), and the
    # supervision values.
    *(
        PACKAGE / "_core" / f"{name}.py"
        for name in (
            "_bounded",
            "_dispatcher",
            "_envelope",
            "_foreign",
            "_handler_call",
            "_idle_ask",
            "_round_clock",
            "_serving_now",
            "_task_serving",
            "_turn_sampler",
            "_dead_letters",
            "_failure",
            "_restarting",
            "_state",
            "_stopping",
            "_stranded",
            "_watch",
            "_cell",
            "_bounded_cell",
        )
    ),
    PACKAGE / "_supervision.py",
]

FIRST = [
    "tests/test_contracts.py",
    "tests/lifecycle",
    "tests/mailbox",
    "tests/actors",
    "tests/test_nothing_lost.py",
]
"""Test paths run before the rest of ``tests`` (pytest collects each file once)."""

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _skipped(tree: ast.Module) -> set[int]:
    """The ids of nodes never mutated: docstrings, asserts, ``__all__``,
    ``TYPE_CHECKING`` blocks, f-strings and everything inside them."""
    skipped: set[int] = set()

    def skip(node: ast.AST) -> None:
        skipped.update(id(child) for child in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                skip(body[0])
        if isinstance(node, ast.Assert | ast.JoinedStr):
            skip(node)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip(node)
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            skip(node)
    return skipped


def _sites(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Every mutation of ``tree``: (index of the node in ``ast.walk`` order, operator,
    description)."""
    skipped = _skipped(tree)
    sites = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skipped:
            continue
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = type(node.ops[0])
            if op in _COMPARE_SWAPS:
                name = _COMPARE_SWAPS[op].__name__
                sites.append((index, "compare", f"line {line}: {op.__name__} -> {name}"))
        elif isinstance(node, ast.BoolOp):
            sites.append((index, "boolop", f"line {line}: and/or swapped"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            sites.append((index, "not", f"line {line}: not dropped"))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            sites.append((index, "bool", f"line {line}: {node.value} -> {not node.value}"))
        elif isinstance(node, ast.Constant) and type(node.value) is int and node.value < 100:
            sites.append((index, "int", f"line {line}: {node.value} -> {node.value + 1}"))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
            sites.append((index, "augassign", f"line {line}: += / -= swapped"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            sites.append((index, "binop", f"line {line}: + / - swapped"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
            sites.append((index, "delete", f"line {line}: call removed"))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) for t in node.targets
        ):
            sites.append((index, "delete", f"line {line}: attribute assignment removed"))
    return sites


def _mutate(tree: ast.Module, index: int, operator: str) -> ast.Module:
    """A copy of ``tree`` with the node at ``index`` (``ast.walk`` order) mutated."""
    mutated = copy.deepcopy(tree)
    node: Any = next(n for i, n in enumerate(ast.walk(mutated)) if i == index)
    if operator == "compare":
        node.ops = [_COMPARE_SWAPS[type(node.ops[0])]()]
    elif operator == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif operator == "not":
        _replace(mutated, node, node.operand)
    elif operator == "bool":
        node.value = not node.value
    elif operator == "int":
        node.value += 1
    elif operator in ("augassign", "binop"):
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    elif operator == "delete":
        _replace(mutated, node, ast.Pass())
    return ast.fix_missing_locations(mutated)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[value.index(old)] = new
                return
    raise AssertionError("node not found")


def all_mutants() -> list[dict[str, Any]]:
    """Every mutant of the target modules, as (module, site) records."""
    mutants = []
    for path in TARGETS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for index, operator, description in _sites(tree):
            mutants.append(
                {
                    "module": str(path.relative_to(PACKAGE)),
                    "index": index,
                    "operator": operator,
                    "change": description,
                }
            )
    return mutants


def run_mutant(
    mutant: dict[str, Any], timeout: float, per_test: int, deselect: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Run the suite against one mutant; return the record with its outcome."""
    path = PACKAGE / mutant["module"]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    source = ast.unparse(_mutate(tree, mutant["index"], mutant["operator"]))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        copy_root = Path(scratch) / "trio_actors"
        shutil.copytree(PACKAGE, copy_root, ignore=shutil.ignore_patterns("__pycache__"))
        (copy_root / mutant["module"]).write_text(source, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": scratch, "PYTHONDONTWRITEBYTECODE": "1"}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--timeout={per_test}",
            *(f"--deselect={test}" for test in deselect),
            *FIRST,  # the broad, quick tests first: most mutants die in seconds
            "tests",
            "examples/testing",
        ]
        # Its own session, so that a hang is ended with everything it started (the
        # SIGINT-under-load test runs a child process of its own).
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            outcome, detail = "killed", f"the suite ran over {timeout:.0f} s (a hang)"
        else:
            if process.returncode == 0:
                outcome, detail = "survived", ""
            else:
                lines = stdout.splitlines()
                failed = [  # pytest's summary lines, not captured ERROR log records
                    line
                    for line in lines
                    if line.startswith(("FAILED tests", "ERROR tests", "FAILED examples"))
                ]
                outcome = "killed"
                detail = failed[0] if failed else f"pytest exited {process.returncode}"
                if "Timeout (>" in stdout:
                    detail += " [a test timed out]"
    return {**mutant, "outcome": outcome, "detail": detail, "seconds": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=220, help="how many to sample")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=2, help="suites run at once")
    parser.add_argument("--per-test-timeout", type=int, default=20, help="seconds")
    parser.add_argument("--suite-timeout", type=float, default=900.0, help="seconds")
    parser.add_argument("-o", "--output", type=Path, required=True, help="results JSON")
    parser.add_argument(
        "--resume", action="store_true", help="keep the results already in OUTPUT, run the rest"
    )
    parser.add_argument(
        "--rerun-timeouts",
        action="store_true",
        help="with --resume: run again the mutants killed only by a timeout (a machine "
        "busy with other work can make a sound test time out)",
    )
    parser.add_argument(
        "--rerun-unconfirmed",
        action="store_true",
        help="with --resume: run again the mutants marked unconfirmed (killed only by a "
        "timeout in a loaded run, and not run again since)",
    )
    parser.add_argument(
        "--deselect",
        action="append",
        default=[],
        metavar="NODEID",
        help="leave a test out (pytest's --deselect; repeatable), e.g. one that decides "
        "by the wall clock, to see whether the deterministic tests kill the mutants",
    )
    args = parser.parse_args(argv)

    everything = all_mutants()
    sample = random.Random(args.seed).sample(everything, min(args.mutants, len(everything)))
    results: list[dict[str, Any]] = []
    if args.resume and args.output.exists():
        results = json.loads(args.output.read_text(encoding="utf-8"))["mutants"]
        if args.rerun_timeouts:
            results = [record for record in results if not _timed_out(record)]
        if args.rerun_unconfirmed:
            results = [record for record in results if record["outcome"] != "unconfirmed"]
        done = {_key(record) for record in results}
        sample = [m for m in sample if _key(m) not in done]
    print(f"{len(everything)} mutants in {len(TARGETS)} modules;", end=" ")
    print(f"{len(results)} done, running {len(sample)}")
    command = "python tools/mutation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(
                run_mutant, m, args.suite_timeout, args.per_test_timeout, tuple(args.deselect)
            )
            for m in sample
        ]
        for number, future in enumerate(concurrent.futures.as_completed(futures), 1):
            record = future.result()
            results.append(record)
            _write(args.output, command, everything, results)  # an interrupted run keeps them
            print(
                f"[{number}/{len(sample)}] {record['outcome']:8} {record['module']} "
                f"{record['change']} ({record['seconds']:.0f} s)",
                flush=True,
            )
    summary = _write(args.output, command, everything, results)
    print(f"\nkilled {summary['killed']} of {summary['sampled']} ({summary['score']:.1%})")
    for module, counts in summary["by_module"].items():
        print(f"  {module:32} {counts.get('killed', 0):3} / {sum(counts.values()):3}")
    survivors = [r for r in summary["mutants"] if r["outcome"] == "survived"]
    if survivors:
        print("\nsurvivors:")
        for record in survivors:
            print(f"  {record['module']} {record['change']} ({record['operator']})")
    return 0


def _timed_out(record: dict[str, Any]) -> bool:
    """Whether a record's kill was a timeout (of a test, or of the whole suite)."""
    detail = record.get("detail", "")
    return record["outcome"] == "killed" and ("timed out" in detail or "(a hang)" in detail)


def _key(record: dict[str, Any]) -> tuple[str, int, str]:
    return record["module"], record["index"], record["operator"]


def _write(
    output: Path, command: str, everything: list[dict[str, Any]], results: list[dict[str, Any]]
) -> dict[str, Any]:
    """Write the results so far (sorted, with the kill rate per module); return them."""
    results = sorted(results, key=_key)
    by_module: dict[str, Counter[str]] = {}
    for record in results:
        by_module.setdefault(record["module"], Counter())[record["outcome"]] += 1
    killed = sum(1 for r in results if r["outcome"] == "killed")
    summary: dict[str, Any] = {
        "command": command,
        "sites": len(everything),
        "sampled": len(results),
        "killed": killed,
        "score": killed / len(results) if results else 0.0,
        "by_module": {module: dict(counts) for module, counts in sorted(by_module.items())},
        "mutants": results,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    sys.exit(main())

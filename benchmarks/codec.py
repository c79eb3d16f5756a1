"""What the codec costs a message: ``Codec.encode`` and ``Codec.decode`` of typical
tells, this checkout's codec against another revision's, paired in one process.

Usage::

    python -m benchmarks.codec [--against REV] [--rounds N] [--number N]

Loads ``src/trio_actors/remote/_codec.py`` as it is at ``REV`` (default ``main``,
read with ``git show``) beside this checkout's, and times each message's encode (and
decode) with both, alternating which goes first, ``--rounds`` times; prints the
fastest time of each and the median of the per-round ratios (this / REV: below 1 is
faster here). Wall-clock ratios on a loaded machine move by tens of percent round to
round; the median of many paired rounds is what to read.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

import trio_actors.remote._codec as this_codec


class Order(msgspec.Struct):
    item: str
    quantity: int


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


MESSAGES: dict[str, Any] = {
    "bytes (R2's)": b"0123456789abcdef",
    "str": "hello",
    "int": 12345,
    "tuple": ("add", 1),
    "dict": {"op": "add", "n": 1, "items": [1, 2, 3]},
    "list of 10": list(range(10)),
    "Struct": Order("apple", 3),
}


def codec_at(revision: str) -> Any:
    """The ``_codec`` module as it is at ``revision``, loaded into the package."""
    source = subprocess.run(
        ["git", "show", f"{revision}:src/trio_actors/remote/_codec.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "_codec_then.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("trio_actors.remote._codec_then", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def paired(
    this: Callable[[], Any], then: Callable[[], Any], rounds: int, number: int
) -> tuple[float, float, float]:
    """(fastest here, fastest then, median of the ratios here / then) in seconds."""
    here, there, ratios = [], [], []
    for round_ in range(rounds):
        first, second = (this, then) if round_ % 2 else (then, this)
        a, b = (timeit.timeit(f, number=number) / number for f in (first, second))
        mine, theirs = (a, b) if round_ % 2 else (b, a)
        here.append(mine)
        there.append(theirs)
        ratios.append(mine / theirs)
    return min(here), min(there), statistics.median(ratios)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="main", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing")
    args = parser.parse_args(argv)
    then_module = codec_at(args.against)
    no_refs: dict[str, Any] = {"ref_to_wire": None, "ref_from_wire": None}
    this = this_codec.Codec(types=[Order, Point], **no_refs)
    then = then_module.Codec(types=[Order], **no_refs)
    print(f"this checkout against {args.against}: fastest of {args.rounds} rounds, and the")
    print("median of the paired ratios (below 1: faster here)")
    for label, message in MESSAGES.items():
        mine, theirs = this.encode(message), then.encode(message)
        for what, here, there in (
            ("encode", partial(this.encode, message), partial(then.encode, message)),
            ("decode", partial(this.decode, mine), partial(then.decode, theirs)),
        ):
            fastest_here, fastest_then, ratio = paired(here, there, args.rounds, args.number)
            print(
                f"  {label:13} {what}: {fastest_here * 1e9:6.0f} ns here, "
                f"{fastest_then * 1e9:6.0f} ns then, median ratio {ratio:.3f}"
            )


if __name__ == "__main__":
    main()

"""Actors across nodes (issue 18): R1, R2 and R3 of the remote specification, each beside
its floor -- the raw NATS client through the same server -- in the same run.

Usage (from the repository root; pyperf re-runs this module in fresh workers)::

    python -m benchmarks.remote -p 1 -l 1 -n 3 -w 1 --append RESULT.json   # a round
    python -m benchmarks.remote --quick --debug-single-value -o /tmp/smoke.json
    python -m benchmarks.compare RESULT.json

The master process starts one ``nats-server`` (as ``benchmarks/nats_client.py``
does) and two helper processes for the whole run: a **node** (``node="far"``) with
an echo actor registered as ``echo`` and a counting actor registered as
``counter``, and a **raw** process of the bare client with an echo responder and a
counting subscriber. Every value is seconds per round trip or per message.

``R1-remote-ask``
    a node (``node="near"``) asks the far node's echo actor, one ask at a time:
    ``await echo.ask(payload)``, a 16-byte ``bytes`` payload.
``R1-floor``
    the raw client's ``await nc.request(subject, payload)`` to the raw process's
    echo responder (``async for msg in sub: nc.publish(msg.reply, msg.data)``).
    Target: ``R1-remote-ask`` median <= 1.15 x this.
``R2-remote-tell``
    :data:`TELLS` tells of a 16-byte payload from the near node to the far node's
    counting actor, then one ask of it (which arrives after them: one sender node,
    one receiver), timed from the first tell to the count's reply.
``R2-floor``
    the raw client publishes the same number of 16-byte messages to the raw
    process's counting subscriber (a callback subscription: no task hop), then
    requests its count on the same connection.
    Target: ``R2-remote-tell`` throughput >= 0.6 x this. (A burst of tells to a
    node leaves as few NATS messages, ``remote/_tells.py``; the floor publishes
    one message per message, as a raw client does.)
``R2-lone-tell`` / ``R2-lone-floor``
    the same, but the sender yields after every tell (publish): each tell leaves
    as a NATS message of its own, so this is the per-message path without
    coalescing. Reported beside each other, no target.
``R3-two-nodes``
    a CPU-bound fan-out over two nodes on this 2-core machine: :data:`WORK` tells of a
    job of :data:`BURN` seconds of busy CPU each, every other one to a burner actor
    on the near node and the rest to the far node's (one node is one ``trio.run``,
    one core), then one ask of each burner's count (which arrives after its tells).
``R3-one-node``
    the same jobs, all to the near node's burner: one node, one core.
    Target: ``R3-two-nodes`` throughput >= 1.5 x this.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pyperf  # type: ignore[import-untyped]
import trio

import trio_actors as ta
from benchmarks.nats_client import helper, nats_server
from trio_actors import nats

PAYLOAD = b"0123456789abcdef"
ROUND_TRIPS = 2_000
TELLS = 100_000
WORK = 10_000
BURN = 50e-6  # seconds of CPU per job (remote.md's R3: 50 µs handlers)
QUICK = {"rr": 50, "tells": 2_000, "work": 100}
MODULE = "benchmarks.remote"
RAW_ECHO = "bench.raw.echo"
RAW_SINK = "bench.raw.sink"
RAW_COUNT = "bench.raw.count"


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Counter(ta.Actor):
    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> Any:
        if message == "count":
            return self.count
        self.count += 1
        return None


class Burner(ta.Actor):
    """Spends :data:`BURN` seconds of CPU per job; ``"count"``: the jobs done."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> Any:
        if message == "count":
            return self.count
        end = time.perf_counter() + BURN
        while time.perf_counter() < end:
            pass
        self.count += 1
        return None


# --- the helper processes -------------------------------------------------------------


async def _far_node(url: str) -> None:
    async with ta.open_actor_system(cluster=url, node="far") as system:
        system.register("echo", system.spawn(Echo, name="echo"))
        system.register("counter", system.spawn(Counter, name="counter"))
        system.register("burner", system.spawn(Burner, name="burner"))
        assert system.node is not None
        await system.node.flush()
        print("ready", flush=True)
        await trio.sleep_forever()


async def _raw(url: str) -> None:
    count = 0

    def counted(message: nats.Msg) -> None:
        nonlocal count
        count += 1

    async with (
        nats.connect(url) as nc,
        nc.subscribe(RAW_ECHO) as echo,
        nc.subscribe(RAW_SINK, callback=counted),
        nc.subscribe(RAW_COUNT, callback=lambda m: nc.publish(m.reply or "", b"%d" % count)),
    ):
        await nc.flush()
        print("ready", flush=True)
        async for message in echo:
            nc.publish(message.reply or "", message.data)


def _run_helper(kind: str, url: str) -> None:
    if kind == "far-node":
        trio.run(_far_node, url)
    elif kind == "raw":
        trio.run(_raw, url)
    else:
        raise SystemExit(f"unknown helper {kind!r}")


# --- the benchmarks -------------------------------------------------------------------


def remote_ask(loops: int, size: int, url: str) -> float:
    async def main() -> float:
        async with ta.open_actor_system(cluster=url, node="near") as system:
            echo = await system.lookup("echo")
            await echo.ask(PAYLOAD)
            start = time.perf_counter()
            for _ in range(loops * size):
                await echo.ask(PAYLOAD)
            return time.perf_counter() - start

    return trio.run(main)


def raw_request(loops: int, size: int, url: str) -> float:
    async def main() -> float:
        async with nats.connect(url) as nc:
            await nc.request(RAW_ECHO, PAYLOAD)
            start = time.perf_counter()
            for _ in range(loops * size):
                await nc.request(RAW_ECHO, PAYLOAD)
            return time.perf_counter() - start

    return trio.run(main)


def remote_tells(loops: int, size: int, url: str, *, lone: bool = False) -> float:
    async def main() -> float:
        async with ta.open_actor_system(cluster=url, node="near") as system:
            counter = await system.lookup("counter")
            before = await counter.ask("count")
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    counter.tell(PAYLOAD)
                    if lone:
                        await trio.lowlevel.checkpoint()
                before += size
                got = await counter.ask("count")
                if got != before:
                    raise AssertionError(f"R2: the counter has {got} tells, not {before}")
            return time.perf_counter() - start

    return trio.run(main)


def remote_lone_tells(loops: int, size: int, url: str) -> float:
    return remote_tells(loops, size, url, lone=True)


def raw_publish(loops: int, size: int, url: str, *, lone: bool = False) -> float:
    async def main() -> float:
        async with nats.connect(url) as nc:
            before = int((await nc.request(RAW_COUNT, b"")).data)
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    nc.publish(RAW_SINK, PAYLOAD)
                    if lone:
                        await trio.lowlevel.checkpoint()
                before += size
                got = int((await nc.request(RAW_COUNT, b"")).data)
                if got != before:
                    raise AssertionError(f"R2 floor: the sink has {got}, not {before}")
            return time.perf_counter() - start

    return trio.run(main)


def raw_lone_publish(loops: int, size: int, url: str) -> float:
    return raw_publish(loops, size, url, lone=True)


def _fan_out(loops: int, size: int, url: str, *, nodes: int) -> float:
    async def main() -> float:
        async with ta.open_actor_system(cluster=url, node="near") as system:
            burners = [system.spawn(Burner)]
            if nodes == 2:
                burners.append(await system.lookup("burner"))
            counts = [await burner.ask("count") for burner in burners]
            start = time.perf_counter()
            for _ in range(loops):
                for number in range(size):
                    burners[number % nodes].tell(number)
                for index, burner in enumerate(burners):
                    counts[index] += len(range(index, size, nodes))
                    got = await burner.ask("count")
                    if got != counts[index]:
                        raise AssertionError(f"R3: burner {index} did {got}, not {counts[index]}")
            return time.perf_counter() - start

    return trio.run(main)


def two_nodes(loops: int, size: int, url: str) -> float:
    return _fan_out(loops, size, url, nodes=2)


def one_node(loops: int, size: int, url: str) -> float:
    return _fan_out(loops, size, url, nodes=1)


@attrs.frozen
class Bench:
    name: str
    func: Any
    group: str  # "rr" or "tells"
    unit: str


BENCHES = [
    Bench("R1-remote-ask", remote_ask, "rr", "round trip"),
    Bench("R1-floor", raw_request, "rr", "round trip"),
    Bench("R2-remote-tell", remote_tells, "tells", "message"),
    Bench("R2-floor", raw_publish, "tells", "message"),
    Bench("R2-lone-tell", remote_lone_tells, "tells", "message"),
    Bench("R2-lone-floor", raw_lone_publish, "tells", "message"),
    Bench("R3-two-nodes", two_nodes, "work", "job"),
    Bench("R3-one-node", one_node, "work", "job"),
]


@contextlib.contextmanager
def running_cluster() -> Iterator[str]:
    """A server, the far node and the raw process, for as long as the block runs."""
    import tempfile

    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = stack.enter_context(nats_server(directory))
        stack.enter_context(helper(MODULE, "far-node", url))
        stack.enter_context(helper(MODULE, "raw", url))
        yield url


def _add_cmdline_args(cmd: list[str], args: argparse.Namespace) -> None:
    if args.quick:
        cmd.append("--quick")
    if args.nats_url is not None:
        cmd.extend(("--nats-url", args.nats_url))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--helper":
        _run_helper(*sys.argv[2:])
        return
    runner = pyperf.Runner(add_cmdline_args=_add_cmdline_args, program_args=("-m", MODULE))
    runner.argparser.add_argument("--quick", action="store_true", help="tiny sizes")
    runner.argparser.add_argument("--nats-url", help="(given to workers) the server")
    args = runner.parse_args()
    with contextlib.ExitStack() as stack:
        if args.nats_url is None:
            args.nats_url = stack.enter_context(running_cluster())
        sizes = QUICK if args.quick else {"rr": ROUND_TRIPS, "tells": TELLS, "work": WORK}
        for bench in BENCHES:
            size = sizes[bench.group]
            runner.bench_time_func(
                bench.name,
                bench.func,
                size,
                args.nats_url,
                inner_loops=size,
                metadata={"description": f"seconds per {bench.unit}", "shape_size": size},
            )


if __name__ == "__main__":
    main()

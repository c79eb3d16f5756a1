r"""Actors across nodes (issues 18, 31 and 32): R1, R2, R3, R6 and R7 of the remote
specification, each beside its floor in the same run -- the raw NATS client through
the same server, or (R6) the same actor in one process.

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
``R7-two-nodes``
    R3's fan-out through a shared name (``remote/_groups.py``): a burner on each
    node registered ``shared=True`` as ``burners`` (the far node's from its start,
    the near node's for the benchmark), the near node tells :data:`WORK` jobs to the
    group -- each to one member, the NATS server's choice; past
    ``remote/_groups.TELLS_IN_FLIGHT`` jobs in flight, ``send`` waits for room -- and waits
    until every one has been said to have ended (``groups.in_flight == 0``), then
    checks the two burners' counts add up.
``R7-one-node``
    the same through a shared name served only by the near node's burner
    (``burners-here``): every job takes the same path, through the server, to one
    node, one core.
    Target: ``R7-two-nodes`` throughput >= 1.5 x this (and, reported beside it,
    against ``R3-one-node``: local tells, no shared name).
``R6-remote-send``
    :data:`SENDS` ``await slow.send(number)`` from the near node to the far node's
    slow actor -- :data:`SLOW` seconds of busy CPU per message (a loop on
    ``time.perf_counter``), then one ask of its count (which arrives after them),
    timed from the first send to the count's reply. ``send`` waits while the link's
    window (``remote/_link.py``: 4,096 tells not yet acknowledged) is full, so the
    sender goes at the receiver's pace.
``R6-floor``
    the receiver's own handling rate: the same slow actor in a system of the
    worker's own (no cluster), the same number of local tells (all queued, then
    handled one after the other), then one ask of its count.
    Target: ``R6-remote-send`` throughput >= 0.9 x this.
``R6-remote-tell``
    ``R6-remote-send`` with ``slow.tell(number)`` in place of ``await
    slow.send(number)``: no wait (past the window the sender holds them, and sends
    them as acknowledgements free it), the tells coalesced. Reported against ``R6-floor``, no
    target: it shows what the ``send`` path itself costs.

R6's other half, the sender's memory (flat: bounded by the window, not by the
number of messages), is not a pyperf benchmark: ``python -m benchmarks.remote
--sender-memory [N ...]`` starts the server and the far node, then, for each ``N``
(default 100,000 and 400,000), a fresh sender process that sends ``N`` tells
to the slow actor and prints its peak RSS (``getrusage``) and, in another fresh
process, the peak of Python's own allocations while sending (``tracemalloc``,
started once the node is up); the same again with ``tell``, which does not wait:
past what a link holds (``remote/_link.py``, ``HELD``) it raises ``MailboxFull``,
and the sender backs off a millisecond and tells again (counted: ``mailbox_full``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pyperf  # type: ignore[import-untyped]
import trio

import trio_actors as ta
from benchmarks.nats_client import helper, nats_server
from trio_actors import nats
from trio_actors.remote import Node

PAYLOAD = b"0123456789abcdef"
ROUND_TRIPS = 2_000
TELLS = 100_000
WORK = 10_000
BURN = 50e-6  # seconds of CPU per job (remote.md's R3: 50 µs handlers)
SENDS = 20_000  # R6: five windows' worth, so the window is full most of the run
SLOW = 30e-6  # seconds of CPU per message (remote.md's R6: a 30 µs handler)
MEMORY_SENDS = (100_000, 400_000)  # R6's sender memory: N and 4 N
QUICK = {"rr": 50, "tells": 2_000, "work": 100, "sends": 500}
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


class Slow(ta.Actor):
    """Spends :data:`SLOW` seconds of CPU per message; ``"count"``: the messages done."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> Any:
        if message == "count":
            return self.count
        end = time.perf_counter() + SLOW
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
        system.register("slow", system.spawn(Slow, name="slow"))
        shared = system.spawn(Burner, name="shared-burner")
        system.register("burners", shared, shared=True)  # (R7: one member of the group)
        system.register("burners-far", shared)  # (R7: its count)
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


def _run_helper(kind: str, url: str, *arguments: str) -> None:
    if kind == "far-node":
        trio.run(_far_node, url)
    elif kind == "raw":
        trio.run(_raw, url)
    elif kind == "sender-memory":
        how, count, traced = arguments
        print(json.dumps(_sender_memory(url, how, int(count), traced == "traced")), flush=True)
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


def _shared_fan_out(loops: int, size: int, url: str, *, nodes: int) -> float:
    async def main() -> float:
        async with ta.open_actor_system(cluster=url, node="near") as system:
            here = system.spawn(Burner)
            name = "burners" if nodes == 2 else "burners-here"
            system.register(name, here, shared=True)
            burners = [here]
            if nodes == 2:
                burners.append(await system.lookup("burners-far"))
            groups = Node.of(system).groups
            assert system.node is not None
            await system.node.flush()
            group = await system.lookup(name)
            done = sum([await burner.ask("count") for burner in burners])
            start = time.perf_counter()
            for _ in range(loops):
                for number in range(size):
                    try:
                        group.tell(number)
                    except ta.MailboxFull:  # (TELLS_IN_FLIGHT in flight: wait for room)
                        await group.send(number)
                # (each job is said to have ended once handled: polled, at most a
                # millisecond late per round of 10,000 jobs)
                while groups.in_flight:  # noqa: ASYNC110
                    await trio.sleep(0.001)
                done += size
                got = sum([await burner.ask("count") for burner in burners])
                if got != done:
                    raise AssertionError(f"R7: the burners did {got}, not {done}")
            return time.perf_counter() - start

    return trio.run(main)


def shared_two_nodes(loops: int, size: int, url: str) -> float:
    return _shared_fan_out(loops, size, url, nodes=2)


def shared_one_node(loops: int, size: int, url: str) -> float:
    return _shared_fan_out(loops, size, url, nodes=1)


def remote_sends(loops: int, size: int, url: str, *, how: str = "send") -> float:
    async def main() -> float:
        async with ta.open_actor_system(cluster=url, node="near") as system:
            slow = await system.lookup("slow")
            before = await slow.ask("count")
            start = time.perf_counter()
            for _ in range(loops):
                for number in range(size):
                    if how == "send":
                        await slow.send(number)
                    else:
                        slow.tell(number)
                before += size
                got = await slow.ask("count")
                if got != before:
                    raise AssertionError(f"R6: the slow actor did {got}, not {before}")
            return time.perf_counter() - start

    return trio.run(main)


def remote_tells_to_slow(loops: int, size: int, url: str) -> float:
    return remote_sends(loops, size, url, how="tell")


def local_tells(loops: int, size: int, url: str) -> float:
    async def main() -> float:
        async with ta.open_actor_system() as system:
            slow = system.spawn(Slow)
            start = time.perf_counter()
            for _ in range(loops):
                for number in range(size):
                    slow.tell(number)
                await slow.ask("count")
            return time.perf_counter() - start

    return trio.run(main)


def _sender_memory(url: str, how: str, count: int, traced: bool) -> dict[str, Any]:
    """Send (``how``: "send" or "tell") ``count`` messages to the far slow actor
    from a fresh node, then ask its count; the process's peak RSS, and (``traced``)
    the peak of Python's allocations from the node's start to the answer."""

    async def main() -> dict[str, Any]:
        async with ta.open_actor_system(cluster=url, node="sender") as system:
            slow = await system.lookup("slow")
            before = await slow.ask("count")
            if traced:
                tracemalloc.start()
            start = time.perf_counter()
            refused = 0
            for number in range(count):
                if how == "send":
                    await slow.send(number)
                    continue
                while True:
                    try:
                        slow.tell(number)
                        break
                    except ta.MailboxFull:  # (its link holds all it may: back off)
                        refused += 1
                        await trio.sleep(0.001)
            got = await slow.ask("count")
            seconds = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] if traced else None
            tracemalloc.stop()
            if got != before + count:
                raise AssertionError(f"R6 memory: the slow actor did {got - before}, not {count}")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (KiB on Linux)
        return {
            "how": how,
            "messages": count,
            "seconds": round(seconds, 2),
            "peak_rss_mib": round(rss / 1024, 1),
            "mailbox_full": refused,
            "traced_peak_mib": None if peak is None else round(peak / 2**20, 2),
        }

    return trio.run(main)


def sender_memory(counts: list[int]) -> None:
    """R6's sender memory: for each way and count, fresh sender processes (one for
    the RSS, one traced); print one JSON line each."""
    with running_cluster() as url:
        for how in ("send", "tell"):
            for count in counts:
                for traced in ("rss", "traced"):
                    command = [sys.executable, "-m", MODULE, "--helper", "sender-memory"]
                    command += [url, how, str(count), traced]
                    result = subprocess.run(command, check=True, capture_output=True, text=True)
                    print(result.stdout.strip(), flush=True)


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
    Bench("R7-two-nodes", shared_two_nodes, "work", "job"),
    Bench("R7-one-node", shared_one_node, "work", "job"),
    Bench("R6-remote-send", remote_sends, "sends", "message"),
    Bench("R6-floor", local_tells, "sends", "message"),
    Bench("R6-remote-tell", remote_tells_to_slow, "sends", "message"),
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
    if args.only is not None:
        cmd.extend(("--only", args.only))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--helper":
        _run_helper(*sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--sender-memory":
        sender_memory([int(count) for count in sys.argv[2:]] or list(MEMORY_SENDS))
        return
    runner = pyperf.Runner(add_cmdline_args=_add_cmdline_args, program_args=("-m", MODULE))
    runner.argparser.add_argument("--quick", action="store_true", help="tiny sizes")
    runner.argparser.add_argument("--nats-url", help="(given to workers) the server")
    runner.argparser.add_argument(
        "--only", help="comma-separated name prefixes: run only those benchmarks (e.g. R6)"
    )
    args = runner.parse_args()
    prefixes = tuple(args.only.split(",")) if args.only else ("",)
    with contextlib.ExitStack() as stack:
        if args.nats_url is None:
            args.nats_url = stack.enter_context(running_cluster())
        sizes = (
            QUICK
            if args.quick
            else {
                "rr": ROUND_TRIPS,
                "tells": TELLS,
                "work": WORK,
                "sends": SENDS,
            }
        )
        for bench in [bench for bench in BENCHES if bench.name.startswith(prefixes)]:
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

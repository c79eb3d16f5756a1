"""A soak of hostile input against a real nats-server: a raw client (the package's own
NATS client) publishes mixed bad messages on every subject kind a node listens on
-- garbage, deep nesting, subjects that end in no number, forged heartbeats, names,
watches and tells from made-up nodes, undecodable tells of 10 KB, and (from a user
of the system account) disconnect advisories nested deep -- while another
node asks it normally throughout. The node must answer every ask, count what it
ignored, and its process's resident memory must stay within a few MB.

It sends 100,000 messages (12--13 s on a 2-core machine at a load of 5);
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
KINDS = 13
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


SYSTEM_ACCOUNT = """
accounts {
  SYS { users = [ { user: sys, password: sys } ] }
  APP { users = [ { user: app, password: app } ] }
}
system_account: SYS
"""
ADVISORIES = "$SYS.ACCOUNT.APP.DISCONNECT"


def bad_message(n: int, node: Node, echo_number: int) -> tuple[str, bytes, str | None]:
    """The ``n``-th bad message: (subject, payload, reply), cycling through kinds
    (an advisory is published by the system account's user)."""
    s = node.subjects
    me = (node.name, node.incarnation)
    forger = (f"forger{n}", f"{n:012x}")
    to_me = s.to_node(*me, forger[0])  # (from the forger, as its subject says)
    none = msgspec.Raw(encode(None))
    match n % KINDS:
        case 0:
            return to_me, b"\xc1" + bytes(n % 200), None
        case 1:
            return to_me, b"\x91" * 50_000 + b"\xc0", None
        case 2:
            return f"{s.replies(*me)}.{forger[0]}.x{n}", b"", None
        case 3:
            return f"{s.unreachable(*me)}.{'9' * 30}", b"", None
        case 4:
            return f"{s.terminations(*me, forger[0])}.-{n}", b"", None
        case 5:
            return f"{s.prefix}.a.{forger[0]}.{forger[1]}.{me[0]}.{me[1]}", encode(["a", n]), None
        case 6:
            return s.heartbeat(*forger), b"", None
        case 7:
            return s.names(*forger), encode((0, f"name-{n}", *forger, "x", 1, 0)), None
        case 8:
            watch = encode((WATCH, echo_number, "echo", none))
            return to_me, watch, f"{s.terminations(*forger, me[0])}.{n}"
        case 9:
            tell = encode((TELL, 0, "", (0, [(echo_number, "echo", msgspec.Raw(encode(n)))])))
            return to_me, tell, f"{s.unreachable(*forger)}.{n}"
        case 10:
            undecodable = msgspec.Raw(encode(msgspec.msgpack.Ext(99, b"x" * 10_000)))
            tell = encode((TELL, 0, "", (0, [(echo_number, "echo", undecodable)])))
            return to_me, tell, None
        case 11:
            return s.heartbeat(*forger), b"neither", None
        case _:
            return ADVISORIES, b"[" * 5_000 + b"]" * 5_000, None  # (RecursionError in json)


async def soak(url: str, messages: int) -> dict[str, Any]:
    cluster = ta.Cluster(
        url, name="soak", user="app", password="app", system_user="sys", system_password="sys"
    )
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        nats.connect(url, name="raw", user="app", password="app") as raw,
        nats.connect(url, name="raw-system", user="sys", password="sys") as system,
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
            (system if subject == ADVISORIES else raw).publish(subject, payload, reply=reply)
            if (n + 1) % ASK_EVERY == 0:
                await raw.flush()
                await system.flush()
                with trio.fail_after(30):
                    assert await there.ask(("ask", n)) == ("ask", n)
                asks += 1
                rss = resident_bytes()
                if baseline is None and n + 1 >= messages * WARM_UP:
                    baseline = rss
                peak = max(peak, rss)
        await raw.flush()
        await system.flush()
        with trio.fail_after(30):
            assert await there.ask("last") == "last"
            # The advisories come on the node's other connection: all are read in time.
            sent = sum(1 for n in range(messages) if n % KINDS == KINDS - 1)
            while node.statistics().bad_input.advisories < sent:  # noqa: ASYNC110 (a counter)
                await trio.sleep(0.05)
        assert baseline is not None
        return {
            "messages": messages,
            "asks": asks + 1,
            "seconds": round(trio.current_time() - began, 2),
            "start": start,
            "baseline": baseline,
            "peak": peak,
            # (from the higher of the two: the process may carry earlier tests'
            # memory, returned to the system during the warm-up and taken again)
            "growth": peak - max(baseline, start),
            "statistics": node.statistics(),
            "recent dead letters": len(a.dead_letters.recent),
        }


async def test_a_node_soaked_in_bad_input_answers_and_holds_its_memory(tmp_path: Path) -> None:
    with running_nats_server(tmp_path, config=SYSTEM_ACCOUNT) as server:
        result = await soak(server.url, MESSAGES)
    print(result)
    statistics = result["statistics"]
    bad = statistics.bad_input
    # Every kind of garbage was counted (tells that decode, and watches and names
    # admitted before the tables filled, are not bad input).
    assert bad.messages >= MESSAGES // KINDS * 2
    assert bad.replies >= MESSAGES // KINDS
    assert bad.bounces >= MESSAGES // KINDS
    assert bad.terminations >= MESSAGES // KINDS
    assert bad.acks >= MESSAGES // KINDS
    assert bad.heartbeats >= MESSAGES // KINDS
    assert bad.tells >= MESSAGES // KINDS
    assert bad.advisories == sum(1 for n in range(MESSAGES) if n % KINDS == KINDS - 1)
    assert statistics.undecodable_bytes <= ta.InputLimits().undecodable_bytes
    assert statistics.peers <= ta.InputLimits().peers
    assert result["growth"] <= RSS_GROWTH_ALLOWED, result

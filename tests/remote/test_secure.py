"""A secure deployment with a real ``nats-server``: the configuration ``trio-actors
secure`` writes lets each node speak for itself only. Node c's credentials cannot
publish b's heartbeat or ``bye``, answer into b's requests in another node's name,
announce names as b, or subscribe to b's inbound subjects; a client without
credentials is refused; two nodes with their own credentials tell, ask, watch,
stop and look up with no error from the server; a ``kill -9`` is seen through the
subscribe-only advisories user."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_actors as ta
from helpers import Watcher
from nats_server import NatsServer, running_nats_server
from trio_actors import nats
from trio_actors.remote import NatsTransport, Node
from trio_actors.remote._peers import PeerState
from trio_actors.sweeps._secure import write_deployment

NODES = ("a", "b", "c")
REFUSED = nats.ServerError


@contextmanager
def secure_server(tmp_path: Path) -> Iterator[tuple[NatsServer, Path]]:
    """A server with the configuration ``trio-actors secure a b c`` writes."""
    out = tmp_path / "secure"
    write_deployment(out, NODES, cluster="shop")
    with running_nats_server(tmp_path, config=(out / "nats-server.conf").read_text()) as server:
        yield server, out


def configured(out: Path, node: str, server: NatsServer, **changes: Any) -> ta.Cluster:
    return attrs.evolve(ta.Cluster.from_toml(out / f"{node}.toml"), servers=server.url, **changes)


def password(out: Path, node: str) -> str:
    secret = ta.Cluster.from_toml(out / f"{node}.toml").password
    assert secret is not None
    return secret


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


@asynccontextmanager
async def errors_of(client: nats.Client) -> AsyncIterator[list[str]]:
    """The server's ``-ERR`` messages to ``client`` during the block (read up to a
    flush at its end)."""
    said: list[str] = []
    async with client.events() as events, trio.open_nursery() as nursery:

        async def read() -> None:
            async for event in events:
                if isinstance(event, nats.ServerErrorReported):
                    said.append(event.message)

        nursery.start_soon(read)
        yield said
        await client.flush()
        await trio.sleep(0.05)  # (the reader's turn: events after the flush's PONG)
        nursery.cancel_scope.cancel()


def server_errors(system: ta.ActorSystem) -> int:
    transport = Node.of(system).transport
    assert isinstance(transport, NatsTransport)
    return transport.client.server_errors


async def test_two_nodes_with_their_own_credentials_work_without_a_server_error(
    tmp_path: Path,
) -> None:
    with secure_server(tmp_path) as (server, out), trio.fail_after(60):
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a") as a,
            ta.open_actor_system(cluster=configured(out, "b", server), node="b") as b,
        ):
            a.register("echo", a.spawn(Echo, name="echo"))
            await Node.of(a).flush()
            echo = await b.lookup("echo")  # lookup
            assert await echo.ask(("hello", 1)) == ("hello", 1)  # ask
            echo.tell("told")  # tell
            watcher = b.spawn(Watcher)
            await watcher.ask(("watch", echo))  # watch
            await Node.of(b).flush()
            await trio.sleep(0.2)
            await echo.stop()  # stop
            for _ in range(200):  # (the stop's report: a few ms)
                if await watcher.ask("notices"):
                    break
                await trio.sleep(0.05)
            assert [error for _ref, error in await watcher.ask("notices")] == [None]
            assert Node.of(b).unconfirmed == 0
            taken = Node.of(a).tells.taken.records[f"ta.shop.u.b.{Node.of(b).incarnation}"]
            assert taken.received == 1
            assert (taken.streams, taken.mark(echo._cell.eid)) == ({}, 1)  # type: ignore[union-attr]
            assert (server_errors(a), server_errors(b)) == (0, 0)
            assert (
                Node.of(a).statistics().bad_input.total
                == Node.of(b).statistics().bad_input.total
                == 0
            )


async def test_a_nodes_credentials_cannot_speak_for_another_node(tmp_path: Path) -> None:
    with secure_server(tmp_path) as (server, out), trio.fail_after(60):
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a") as a,
            ta.open_actor_system(cluster=configured(out, "b", server), node="b") as b,
            nats.connect(server.url, user="c", password=password(out, "c")) as c,
        ):
            a.register("echo", a.spawn(Echo, name="echo"))
            await Node.of(a).flush()
            echo = await b.lookup("echo")
            i = Node.of(b).incarnation
            refused = [
                f"ta.shop.hb.b.{i}",  # b's heartbeat (and "bye")
                f"ta.shop.names.b.{i}",  # b's name announcements
                f"ta.shop.r.b.{i}.a.1",  # an answer into b's request to a
                f"ta.shop.t.b.{i}.a.1",  # the stop of a's actor that b watches
                f"ta.shop.a.b.{i}.a.{Node.of(a).incarnation}",  # b acknowledging a's tells
                f"ta.shop.n.a.{Node.of(a).incarnation}.b",  # a message to a's actors as b
            ]
            async with errors_of(c) as said:
                for subject in refused:
                    c.publish(subject, b"bye")
            assert said == [f'Permissions Violation for Publish to "{s}"' for s in refused]
            async with errors_of(c) as said:
                c.subscribe_nowait(f"ta.shop.n.b.{i}.*", callback=lambda message: None)
                c.subscribe_nowait("ta.shop.>", callback=lambda message: None)
            assert said == [
                f'Permissions Violation for Subscription to "{s}"'
                for s in (f"ta.shop.n.b.{i}.*", "ta.shop.>")
            ]
            await trio.sleep(0.1)
            assert Node.of(a).peers.state(("b", i)) is PeerState.UP  # (no forged bye)
            assert await echo.ask("still") == "still"


async def test_a_client_without_credentials_is_refused(tmp_path: Path) -> None:
    with secure_server(tmp_path) as (server, _out), trio.fail_after(60):
        with pytest.raises(REFUSED, match=r"(?i)authorization violation"):
            async with nats.connect(server.url):
                pass
        with pytest.raises(REFUSED, match=r"(?i)authorization violation"):
            async with nats.connect(server.url, user="a", password="wrong"):
                pass


FAR_NODE = """
import sys

import attrs
import trio

import trio_actors as ta


class Gate(ta.Actor):
    async def receive(self, message):
        await trio.sleep_forever()


async def main() -> None:
    cluster = attrs.evolve(ta.Cluster.from_toml(sys.argv[1]), servers=sys.argv[2], heartbeat=30)
    async with ta.open_actor_system(cluster=cluster, node="b") as system:
        system.register("gate", system.spawn(Gate, name="gate"))
        await system.node.flush()
        print("ready", flush=True)
        await trio.sleep_forever()


trio.run(main)
"""


async def test_a_kill_9_is_seen_through_the_advisories_user(tmp_path: Path) -> None:
    with secure_server(tmp_path) as (server, out), trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", FAR_NODE, str(out / "b.toml"), server.url],
            stdout=subprocess.PIPE,
        )
        try:
            assert process.stdout is not None
            said = b""
            while not said.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, f"the far node ended: {said!r}"
                said += chunk
            assert said == b"ready\n"
            cluster = configured(out, "a", server, heartbeat=30)  # (silence: 90 s)
            async with ta.open_actor_system(cluster=cluster, node="a") as a:
                gate = await a.lookup("gate")
                failed: list[ta.NodeDown] = []

                async def pending() -> None:
                    with pytest.raises(ta.NodeDown, match="disconnect advisory") as raised:
                        await gate.ask("wait")
                    failed.append(raised.value)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pending)
                    await trio.sleep(0.2)
                    process.kill()  # SIGKILL: no bye
                assert len(failed) == 1
        finally:
            process.kill()
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


def test_the_secure_command_writes_secret_files_and_refuses_mistakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_actors.sweeps._cli import main

    out = tmp_path / "deploy"
    assert main(["secure", "a", "b", "--out", str(out), "--cluster-name", "shop"]) == 0
    assert "nats-server -c" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["a.toml", "b.toml", "nats-server.conf"]
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o600}
    assert out.stat().st_mode & 0o777 == 0o700
    cluster = ta.Cluster.from_toml(out / "a.toml")
    assert (cluster.name, cluster.user, cluster.system_user) == ("shop", "a", "ta-advisories")
    for argv, said in (
        (["a", "--out", str(out)], "exists: not overwritten"),
        (["a", "b", "--allow", "a:z", "--out", str(tmp_path / "x")], "'z', which is not one"),
        (["a", "a", "--out", str(tmp_path / "y")], "named twice"),
        (["a", "-", "--out", str(tmp_path / "v")], "stands for no node"),
        (["a.b", "--out", str(tmp_path / "z")], "letters, digits"),
        (["a", "--allow", "a", "--out", str(tmp_path / "w")], "NODE:NODE"),
    ):
        with pytest.raises(SystemExit):
            main(["secure", *argv])
        assert said in capsys.readouterr().err


def test_an_allow_list_limits_which_nodes_actors_a_node_reaches() -> None:
    from trio_actors.sweeps._secure import node_permissions

    everyone = node_permissions("shop", "a", None)["publish"]
    listed = node_permissions("shop", "a", ["b"])["publish"]
    assert "ta.shop.n.*.*.a" in everyone
    assert "ta.shop.n.b.*.a" in listed
    assert not any(subject.startswith("ta.shop.n.") and "b" not in subject for subject in listed)


async def test_what_the_server_refuses_fails_the_tell_ask_stop_or_watch_that_sent_it(
    tmp_path: Path,
) -> None:
    """With ``--allow a:b`` (b may reach no node's actors), b's ask and stop to a's
    actor fail at once with NotPermitted naming the subject, its tell is a dead
    letter "refused", its watch ends with NotPermitted; a still reaches b."""
    out = tmp_path / "secure"
    write_deployment(out, NODES, cluster="shop", allowed={"a": ["b"]})
    config = (out / "nats-server.conf").read_text()
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(60):
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a") as a,
            ta.open_actor_system(cluster=configured(out, "b", server), node="b") as b,
        ):
            a.register("echo", a.spawn(Echo, name="echo"))
            b.register("echo-b", b.spawn(Echo, name="echo-b"))
            await Node.of(a).flush()
            await Node.of(b).flush()
            assert await (await a.lookup("echo-b")).ask("a to b") == "a to b"
            echo = await b.lookup("echo")  # (a lookup is allowed: a ref to a's actor)
            subject = f"ta.shop.n.a.{Node.of(a).incarnation}.b"
            with trio.fail_after(5):  # (at once: not the caller's timeout)
                with pytest.raises(ta.NotPermitted, match=f"Publish to {subject}"):
                    await echo.ask("b to a")
                with pytest.raises(ta.NotPermitted, match="not delivered"):
                    await echo.stop()
            echo.tell("told")
            terminated = await echo.wait_stopped()
            assert isinstance(terminated.error, ta.NotPermitted)
            await Node.of(b).flush()
            for _ in range(100):  # (the tell's -ERR: one round trip)
                if b.statistics().dead_letters.refused:
                    break
                await trio.sleep(0.02)
            assert b.statistics().dead_letters.refused == 1
            assert [(d.reason, d.message) for d in b.dead_letters.recent] == [("refused", "told")]
            assert Node.of(b).not_permitted == 4  # (the messages: ask, stop, tells, watch)
            assert Node.of(b).unconfirmed == 0
            assert await (await a.lookup("echo-b")).ask("still") == "still"


def test_a_node_without_credentials_is_warned_of_a_server_off_this_machine() -> None:
    from trio_actors.remote import open_server_warning

    name = "ta.shop.a.1234"
    for servers in ("nats://10.0.0.5:4222", ["nats://127.0.0.1:4222", "nats://nats.shop:4222"]):
        warning = open_server_warning(ta.Cluster(servers), name)
        assert warning is not None
        assert "without credentials" in warning
        assert "trusted network only" in warning
    for servers in ("nats://127.0.0.1:4222", "nats://localhost:4222", "nats://[::1]:4222"):
        assert open_server_warning(ta.Cluster(servers), name) is None
    assert (
        open_server_warning(ta.Cluster("nats://10.0.0.5:4222", user="a", password="p"), name)
        is None
    )
    assert open_server_warning(ta.Cluster("nats://10.0.0.5:4222", token="t"), name) is None


WARNS = """
import logging


async def main(system):
    logging.getLogger("trio_actors").warning("heard %s", "from the runtime")
"""


def test_the_node_command_shows_the_runtimes_warnings(tmp_path: Path) -> None:
    """``trio-actors node`` prints the runtime's warnings (the warning of a server
    without credentials off this machine among them) on stderr."""
    (tmp_path / "warns.py").write_text(WARNS)
    with running_nats_server(tmp_path) as server:
        done = subprocess.run(
            [sys.executable, "-m", "trio_actors", "node", "warns:main", "--cluster", server.url],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert "WARNING: heard from the runtime" in done.stderr


async def test_shared_names_work_with_each_nodes_own_credentials(tmp_path: Path) -> None:
    """The permissions ``trio-actors secure`` writes let nodes serve a shared name in
    its queue group, and tell, ask and probe it, with no error from the server."""
    with secure_server(tmp_path) as (server, out), trio.fail_after(60):
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a") as a,
            ta.open_actor_system(cluster=configured(out, "b", server), node="b") as b,
            ta.open_actor_system(cluster=configured(out, "c", server), node="c") as c,
        ):
            a.register("work", a.spawn(Echo), shared=True)
            b.register("work", b.spawn(Echo), shared=True)
            await Node.of(a).flush()
            await Node.of(b).flush()
            group = await c.lookup("work")
            assert [await group.ask(number) for number in range(20)] == list(range(20))
            for number in range(20):
                group.tell(number)
            for _ in range(200):  # (each tell said to have ended: a few ms)
                if not Node.of(c).groups.in_flight:
                    break
                await trio.sleep(0.05)
            assert Node.of(c).groups.in_flight == 0
            assert await Node.of(c).groups.probe("work") == group
            assert c.dead_letters.count == 0
            assert (server_errors(a), server_errors(b), server_errors(c)) == (0, 0, 0)
            assert sum(Node.of(s).statistics().bad_input.total for s in (a, b, c)) == 0

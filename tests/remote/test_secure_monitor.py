"""The monitor of a secure deployment (``trio-actors secure ... --monitor``) with a
real ``nats-server``: it asks every node's statistics service and hears the answers,
and nothing else -- it cannot tell, ask, stop or look up an actor, hear heartbeats,
or answer as a node; a node cannot answer a monitor as another node; without
``--monitor`` there is no such user."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from test_secure import NODES, REFUSED, Echo, configured, errors_of, password, server_errors

import trio_actors as ta
from nats_server import NatsServer, running_nats_server
from trio_actors import _monitoring as wire
from trio_actors import nats
from trio_actors.remote import Node
from trio_actors.sweeps._secure import MONITOR_USER, write_deployment

ANSWERS_WITHIN = 20.0  # seconds: a safety net for a loaded machine, not a speed check


@contextmanager
def deployment(tmp_path: Path, monitor: str | None) -> Iterator[tuple[NatsServer, Path]]:
    out = tmp_path / "secure"
    write_deployment(out, NODES, cluster="shop", monitor=monitor)
    with running_nats_server(tmp_path, config=(out / "nats-server.conf").read_text()) as server:
        yield server, out


class Answers(list[nats.Msg]):
    """The messages a subscription's callback appends; :meth:`wait` for a count."""

    def __init__(self) -> None:
        super().__init__()
        self._more = trio.Event()

    def add(self, message: nats.Msg) -> None:
        self.append(message)
        self._more.set()

    async def wait(self, count: int) -> None:
        with trio.fail_after(ANSWERS_WITHIN):
            while len(self) < count:
                await self._more.wait()
                self._more = trio.Event()


async def test_the_monitor_asks_every_nodes_statistics_and_nothing_else(tmp_path: Path) -> None:
    with deployment(tmp_path, MONITOR_USER) as (server, out), trio.fail_after(60):
        monitor_file = ta.Cluster.from_toml(out / f"{MONITOR_USER}.toml")
        assert (monitor_file.name, monitor_file.user) == ("shop", MONITOR_USER)
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a") as a,
            ta.open_actor_system(cluster=configured(out, "b", server), node="b") as b,
            nats.connect(server.url, user=MONITOR_USER, password=monitor_file.password) as monitor,
        ):
            a.register("echo", a.spawn(Echo, name="echo"))
            await Node.of(a).flush()
            answers = Answers()
            replies = wire.monitor_replies("shop", MONITOR_USER)
            monitor.subscribe_nowait(replies, callback=answers.add)
            await monitor.flush()
            async with errors_of(monitor) as said:
                reply = f"ta.shop.m.{MONITOR_USER}"
                monitor.publish("$SRV.PING", reply=f"{reply}.-.1")
                monitor.publish("$SRV.STATS.ta-shop", reply=f"{reply}.-.2")
                monitor.publish("$SRV.INFO.ta-shop.b", reply=f"{reply}.b.3")
                monitor.publish("ta.shop.s.a", b'{"limit": 5}', reply=f"{reply}.a.4")
                await answers.wait(6)
            assert said == []
            assert sorted(message.subject.removeprefix(reply) for message in answers) == [
                ".a.1",
                ".a.2",
                ".a.4",
                ".b.1",
                ".b.2",
                ".b.3",
            ]
            [actors] = [m for m in answers if m.subject.endswith(".a.4")]
            assert [row.path for row in wire.parse_actors(actors.data, "a").actors] == [
                "system/echo"
            ]
            [stats] = [m for m in answers if m.subject.endswith(".b.2")]
            assert wire.parse_stats(stats.data, "shop", "b").members == 2
            i = Node.of(a).incarnation
            refused = [
                f"ta.shop.n.a.{i}.{MONITOR_USER}",  # a message to a's actors (tell, ask, stop)
                f"ta.shop.name.{b'echo'.hex()}.{MONITOR_USER}",  # a lookup
                f"ta.shop.hb.{MONITOR_USER}.0",  # a heartbeat
                f"ta.shop.m.{MONITOR_USER}.a.9",  # an answer as node a
                f"ta.shop.r.a.{i}.b.1",  # an answer into a's requests
            ]
            async with errors_of(monitor) as said:
                for subject in refused:
                    monitor.publish(subject, b"x")
            assert said == [f'Permissions Violation for Publish to "{s}"' for s in refused]
            unheard = ["ta.shop.hb.*.*", f"ta.shop.n.a.{i}.*", "ta.shop.names.*.*", "$SRV.>"]
            async with errors_of(monitor) as said:
                for subject in unheard:
                    monitor.subscribe_nowait(subject, callback=lambda message: None)
            assert said == [f'Permissions Violation for Subscription to "{s}"' for s in unheard]
            assert await (await b.lookup("echo")).ask("still") == "still"
            assert (server_errors(a), server_errors(b)) == (0, 0)


async def test_a_node_answers_a_monitor_only_as_itself(tmp_path: Path) -> None:
    with deployment(tmp_path, MONITOR_USER) as (server, out), trio.fail_after(60):
        async with nats.connect(server.url, user="c", password=password(out, "c")) as c:
            forged = f"ta.shop.m.{MONITOR_USER}.b.1"
            async with errors_of(c) as said:
                c.publish(forged, json.dumps({"type": wire.PING_RESPONSE}).encode())
                c.publish(f"ta.shop.m.{MONITOR_USER}.c.1", b"{}")  # (as itself: allowed)
                c.publish("$SRV.PING", reply=f"ta.shop.m.{MONITOR_USER}.-.1")  # (not a monitor)
            assert said == [
                f'Permissions Violation for Publish to "{forged}"',
                'Permissions Violation for Publish to "$SRV.PING"',
            ]


async def test_without_monitor_there_is_no_monitor_user(tmp_path: Path) -> None:
    with deployment(tmp_path, None) as (server, out), trio.fail_after(60):
        assert not (out / f"{MONITOR_USER}.toml").exists()
        with pytest.raises(REFUSED, match=r"(?i)authorization violation"):
            async with nats.connect(server.url, user=MONITOR_USER, password="anything"):
                pass


def test_the_secure_command_writes_the_monitors_file_and_refuses_a_bad_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_actors.sweeps._cli import main

    out = tmp_path / "deploy"
    assert main(["secure", "a", "b", "--monitor", "--out", str(out)]) == 0
    assert f"trio-actors top --config {out / 'ta-monitor.toml'}" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "a.toml",
        "b.toml",
        "nats-server.conf",
        "ta-monitor.toml",
    ]
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o600}
    named = tmp_path / "named"
    assert main(["secure", "a", "--monitor=watcher", "--out", str(named)]) == 0
    assert ta.Cluster.from_toml(named / "watcher.toml").user == "watcher"
    for argv, said in (
        (["a", "--monitor=a", "--out", str(tmp_path / "x")], "is a node's"),
        (["a", "--monitor=ta-advisories", "--out", str(tmp_path / "y")], "advisories"),
        (["a", "--monitor=-", "--out", str(tmp_path / "z")], "not '-'"),
        (["a", "--monitor=x.y", "--out", str(tmp_path / "w")], "letters, digits"),
    ):
        with pytest.raises(SystemExit):
            main(["secure", *argv])
        assert said in capsys.readouterr().err


async def top_once(config: Path, server: NatsServer) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "trio_actors", "top", "--once", "--config", str(config)]
    command += ["--cluster", server.url, "--interval", "0.3", "--wait", "0.2"]
    return await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)


async def test_top_with_the_monitors_file_shows_the_nodes_and_with_a_nodes_is_refused(
    tmp_path: Path,
) -> None:
    with deployment(tmp_path, MONITOR_USER) as (server, out), trio.fail_after(60):
        async with (
            ta.open_actor_system(cluster=configured(out, "a", server), node="a"),
            ta.open_actor_system(cluster=configured(out, "b", server), node="b"),
        ):
            done = await top_once(out / f"{MONITOR_USER}.toml", server)
            assert done.returncode == 0, done.stderr
            rows = [line.split()[0] for line in done.stdout.decode().splitlines()[2:]]
            assert rows == ["a", "b"]
            done = await top_once(out / "c.toml", server)  # (a node's credentials)
            assert done.returncode == 2
            said = done.stderr.decode()
            assert "the server refused: Permissions Violation for Subscription to" in said
            assert "trio-actors secure ... --monitor" in said

"""``trio-actors top --once`` and ``--json`` against real node processes and against
none, and its one-line errors: bad options, no server, no rich, no terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from busy_nodes import CLUSTER, WITHIN, busy_nodes

from nats_server import NatsServer
from trio_actors.sweeps._cli import TOP_EXTRA, main


@pytest.fixture(scope="module")
def busy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with busy_nodes(tmp_path_factory.mktemp("busy")) as url:
        yield url


def top(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_actors", "top", *arguments],
        capture_output=True,
        text=True,
        timeout=WITHIN,
        stdin=subprocess.DEVNULL,
    )


def test_once_prints_a_row_per_node_with_its_rates(busy_cluster: str) -> None:
    done = top("--once", "--cluster", busy_cluster, "--cluster-name", CLUSTER)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "NODE", "UP", "ACTORS", "MSG/S", "DEAD/S", "IN", "DOUBT", "LONGEST", "TURN", "ACTOR",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert sorted(rows) == ["n0", "n1"]
    for row in rows.values():
        assert row[2] == "4"  # (a producer, three workers)
        assert re.fullmatch(r"\d+(\.\d)?k?", row[3]), row  # (messages per second)
        assert row[3] != "0"
    assert done.stderr == ""


def test_json_prints_every_nodes_summary_and_rates(busy_cluster: str) -> None:
    done = top("--json", "--cluster", busy_cluster, "--cluster-name", CLUSTER, "--interval", "0.5")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["cluster"] == CLUSTER
    nodes = {node["node"]: node for node in document["nodes"]}
    assert sorted(nodes) == ["n0", "n1"]
    for node in nodes.values():
        assert node["type"] == "io.trio_actors.node_statistics.v1"
        assert node["live_actors"] == 4
        assert node["handled"] > 0
        assert node["messages_per_second"] > 0
        assert node["members"] == 2
        assert node["answered"] is True


def test_once_without_any_node_exits_1(nats_server: NatsServer) -> None:
    done = top("--once", "--cluster", nats_server.url, "--interval", "0.2", "--wait", "0.1")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"trio-actors top: no node of cluster 'trio-actors' answered at {nats_server.url}"
    ]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--once", "--cluster", "nats://127.0.0.1:1"], "cannot connect to nats://127.0.0.1:1"),
        (["--once", "--cluster", "http://x"], "nats://host:port"),
        (["--once", "--interval", "0"], "--interval is seconds > 0"),
        (["--once", "--wait", "x"], "--wait: expected seconds, got 'x'"),
        (["--once", "--actors", "101"], "--actors is a whole number from 1 to 100"),
        (["--once", "--cluster-name", "a.b"], "Cluster name must be letters"),
        (["--once", "--config", "/nonexistent.toml"], "cannot read the configuration"),
        ([], "the live view needs a terminal: use --once or --json"),
    ],
)
def test_mistakes_are_one_line_errors_with_exit_code_2(arguments: list[str], said: str) -> None:
    done = top(*arguments)
    assert done.returncode == 2, done
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_without_rich_top_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich fails
    with pytest.raises(SystemExit) as exit_:
        main(["top", "--once"])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("trio-actors top: needs rich, not installed;")
    assert TOP_EXTRA in line
    assert TOP_EXTRA == 'pip install "trio-actors[top]"'


def test_json_needs_no_rich(
    busy_cluster: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    for name in [name for name in sys.modules if name.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["top", "--json", "--cluster", busy_cluster, "--cluster-name", CLUSTER]) == 0
    assert sorted(node["node"] for node in json.loads(capsys.readouterr().out)["nodes"]) == [
        "n0",
        "n1",
    ]

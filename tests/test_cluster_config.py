"""The node configuration file: every key reaches ``Cluster``, and every mistake
says the file, the key and what was wrong."""

from __future__ import annotations

import dataclasses
import re
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

import trio_actors as ta


@dataclasses.dataclass
class Order:  # (a class Cluster(types=...) takes)
    item: str


class Packer(ta.Actor):  # (a class Cluster(spawnable=...) takes)
    def receive(self, message: object) -> None:
        pass


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(text)
    return path


def test_every_key_reaches_the_cluster(tmp_path: Path) -> None:
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server = authority.issue_cert("nats.test")
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "node.pem"))
    path = write(
        tmp_path,
        """
servers = ["nats://10.0.0.5:4222", "nats://10.0.0.6:4222"]
cluster = "shop"
node = "worker-1"
types = ["test_cluster_config:Order"]
errors = ["builtins:LookupError"]
spawnable = ["test_cluster_config:Packer"]
heartbeat = 0.5
heartbeats_missed = 4
monitoring = false

[tls]
ca = "ca.pem"
cert = "node.pem"
key = "node.pem"
hostname = "nats.test"

[auth]
user = "worker-1"
password = "secret"

[system]
user = "advisories"
password = "also-secret"
""",
    )
    cluster = ta.Cluster.from_toml(path)
    assert cluster.servers == ("nats://10.0.0.5:4222", "nats://10.0.0.6:4222")
    assert cluster.name == "shop"
    assert cluster.types == (Order,)
    assert cluster.errors == (LookupError,)
    assert cluster.spawnable == (Packer,)
    assert (cluster.heartbeat, cluster.heartbeats_missed) == (0.5, 4)
    assert cluster.monitoring is False
    assert isinstance(cluster.tls, ssl.SSLContext)
    assert cluster.tls_hostname == "nats.test"
    assert (cluster.user, cluster.password) == ("worker-1", "secret")
    assert (cluster.system_user, cluster.system_password) == ("advisories", "also-secret")


def test_an_empty_file_is_the_default_cluster(tmp_path: Path) -> None:
    assert ta.Cluster.from_toml(write(tmp_path, "")) == ta.Cluster()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("hearbeat = 1", "hearbeat: unknown key"),
        ("heartbeat = -1", "heartbeat: expected seconds > 0, got -1"),
        ('heartbeat = "1"', "heartbeat: expected seconds (a number)"),
        ("heartbeats_missed = 0", "heartbeats_missed: expected a whole number >= 1"),
        ('servers = ["http://x"]', "servers[0]: "),
        ('cluster = "a.b"', "cluster: expected letters, digits"),
        ('types = ["nothing"]', 'types[0]: expected "module:name"'),
        ('types = ["no_such_module:X"]', "types[0]: cannot import 'no_such_module'"),
        ('errors = ["builtins:len"]', "errors[0]: builtins has no class 'len'"),
        ('errors = ["builtins:int"]', "errors[0]: int is not an exception class"),
        ('spawnable = ["test_cluster_config:Nothing"]', "spawnable[0]: test_cluster_config has"),
        ('spawnable = ["builtins:int"]', "spawnable[0]: int is not an actor class"),
        ("spawnable = 3", 'spawnable: expected a list of "module:name" strings'),
        ('[tls]\nca = "missing.pem"', "tls.ca: no such file: "),
        ('[tls]\ncert = "x"', "tls.cert: no such file"),
        ('[auth]\ntoken = "t"\nuser = "u"\npassword = "p"', "auth: one way to authenticate"),
        ('[auth]\nuser = "u"', "auth: user and password go together"),
        ('[system]\nusr = "u"', "system.usr: unknown key"),
        ("pickle = 1", "pickle: expected true or false"),
        ('monitoring = "no"', "monitoring: expected true or false"),
        ("servers = [", "not valid TOML"),
    ],
)
def test_a_mistake_names_the_file_and_the_key(tmp_path: Path, text: str, said: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        ta.Cluster.from_toml(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert said in str(caught.value)


async def test_open_actor_system_reads_a_file_and_its_node_name(tmp_path: Path) -> None:
    path = write(tmp_path, 'node = "bad.name"')
    with pytest.raises(ValueError, match="node: expected letters"):
        async with ta.open_actor_system(cluster=path):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match=r"node\.toml: nope: unknown key"):
        async with ta.open_actor_system(cluster=write(tmp_path, "nope = 1"), node="a"):
            pass  # pragma: no cover


def test_the_node_command_says_the_mistake_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "heartbeat = 0")
    result = subprocess.run(
        [sys.executable, "-m", "trio_actors", "node", "pingpong:main", "--config", str(path)],
        cwd=Path(__file__).parent / "remote" / "apps",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}: heartbeat: expected seconds > 0, got 0" in result.stderr
    assert "Traceback" not in result.stderr

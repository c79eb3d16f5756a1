"""TLS and authentication against a real ``nats-server``: TLS with a CA of the test's
own (``trustme``), an untrusted certificate, the default context, a server without
TLS, optional TLS, client certificates, ``tls_hostname``, TLS before ``INFO``; a
token, a user and password (keyword arguments and URL), an nkey, a credentials
file in operator mode (JWTs made by ``nats_jwt.py``); the errors for misuse; and a
``kill -9`` of a subscriber seen through the system account's disconnect advisory."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import nats_jwt
import pytest
import trio
import trustme

from nats_server import NatsServer, running_nats_server
from trio_actors import nats
from trio_actors.nats._handshake import ConnectSettings, open_connection, parse_url


async def round_trip(nc: nats.Client) -> None:
    """Publish/subscribe and request/reply work on ``nc``."""

    async def echo(sub: nats.Subscription) -> None:
        async for message in sub:
            assert message.reply is not None
            nc.publish(message.reply, b"echo: " + message.data)

    async with (
        nc.subscribe("events") as events,
        nc.subscribe("echo") as requests,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(echo, requests)
        await nc.flush()
        nc.publish("events", b"one")
        assert (await events.receive()).data == b"one"
        assert (await nc.request("echo", b"two")).data == b"echo: two"
        nursery.cancel_scope.cancel()


# --- TLS --------------------------------------------------------------------------------


@attrs.frozen
class Certificates:
    ca: trustme.CA
    cert_file: Path
    key_file: Path
    ca_file: Path

    def trusting(self) -> ssl.SSLContext:
        """A client context that trusts this CA (and checks the host name)."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    def server_config(self, extra: str = "") -> str:
        files = f'  cert_file: "{self.cert_file}"\n  key_file: "{self.key_file}"\n'
        return f"tls {{\n{files}{extra}}}\n"


def make_certificates(directory: Path, *hostnames: str) -> Certificates:
    """A CA of the test's own and a server certificate it issued for ``hostnames``."""
    directory.mkdir(exist_ok=True)
    ca = trustme.CA()
    issued = ca.issue_cert(*hostnames)
    certificates = Certificates(
        ca, directory / "server.pem", directory / "server.key", directory / "ca.pem"
    )
    issued.cert_chain_pems[0].write_to_path(str(certificates.cert_file))
    issued.private_key_pem.write_to_path(str(certificates.key_file))
    ca.cert_pem.write_to_path(str(certificates.ca_file))
    return certificates


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path / "certificates", "127.0.0.1", "localhost")


@pytest.fixture
def tls_server(tmp_path: Path, certificates: Certificates) -> Iterator[NatsServer]:
    with running_nats_server(tmp_path, config=certificates.server_config()) as server:
        yield server


async def test_over_tls_publish_subscribe_and_request_work(
    tls_server: NatsServer, certificates: Certificates
) -> None:
    assert tls_server.url.startswith("tls://")  # (the server requires TLS)
    plain_url = f"nats://{tls_server.host}:{tls_server.port}"
    with trio.fail_after(20):
        # Both the tls:// URL and INFO's tls_required (a nats:// URL) secure it.
        for url in (tls_server.url, plain_url):
            async with nats.connect(url, tls=certificates.trusting()) as nc:
                assert nc.server_info["tls_required"] is True
                await round_trip(nc)
        stream, _ = await open_connection(
            parse_url(plain_url), ConnectSettings(tls=certificates.trusting())
        )
        async with stream:
            assert isinstance(stream, trio.SSLStream)
            assert stream.version() in ("TLSv1.2", "TLSv1.3")


async def test_a_context_that_does_not_trust_the_ca_fails_saying_so(
    tls_server: NatsServer, tmp_path: Path
) -> None:
    other = make_certificates(tmp_path / "other", "127.0.0.1")
    with trio.fail_after(20):
        with pytest.raises(nats.TLSError) as caught:
            async with nats.connect(tls_server.url, tls=other.trusting(), reconnect=None):
                pytest.fail("connected with a certificate the context does not trust")
    message = str(caught.value)
    assert f"TLS with {tls_server.url} failed" in message
    assert "certificate verify failed" in message
    assert "not accepted by the ssl.SSLContext given as tls=" in message
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)


async def test_without_a_context_the_default_one_is_used_and_refuses_a_private_ca(
    tls_server: NatsServer,
) -> None:
    # No tls=: the server requires TLS, so ssl.create_default_context() -- the
    # system's CAs, which do not include the test's CA.
    with trio.fail_after(20):
        with pytest.raises(nats.TLSError, match=r"certificate verify failed") as caught:
            async with nats.connect(tls_server.url):
                pytest.fail("the default context trusted the test's CA")
    assert "the default context (no tls= was given" in str(caught.value)


async def test_tls_hostname_names_the_certificate_s_host(tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path / "certificates", "nats.example")
    with running_nats_server(tmp_path, config=certificates.server_config()) as server:
        with trio.fail_after(20):
            with pytest.raises(nats.TLSError, match=r"tls_hostname= if the certificate") as caught:
                async with nats.connect(server.url, tls=certificates.trusting()):
                    pytest.fail("the certificate is for nats.example, not 127.0.0.1")
            assert "'127.0.0.1'" in str(caught.value)
            tls = certificates.trusting()
            async with nats.connect(server.url, tls=tls, tls_hostname="nats.example") as nc:
                await round_trip(nc)


async def test_a_context_for_a_server_without_tls_is_refused(
    nats_server: NatsServer, certificates: Certificates
) -> None:
    tls_url = f"tls://{nats_server.host}:{nats_server.port}"
    with trio.fail_after(20):
        with pytest.raises(nats.TLSError, match=r"does not offer TLS .* yet tls= was given"):
            async with nats.connect(nats_server.url, tls=certificates.trusting()):
                pytest.fail("connected without TLS although tls= was given")
        with pytest.raises(nats.TLSError, match=rf"does not offer TLS .* yet the URL is {tls_url}"):
            async with nats.connect(tls_url):
                pytest.fail("connected without TLS although the URL is tls://")


async def test_optional_tls_is_used_when_the_client_asks(
    tmp_path: Path, certificates: Certificates
) -> None:
    config = certificates.server_config() + "allow_non_tls: true\n"
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        assert server.url.startswith("nats://")
        stream, protocol = await open_connection(parse_url(server.url), ConnectSettings())
        async with stream:
            assert protocol.server_info["tls_available"] is True
            assert not isinstance(stream, trio.SSLStream)  # (nobody asked for TLS)
        for settings in (ConnectSettings(tls=certificates.trusting()), ConnectSettings()):
            url = server.url if settings.tls else f"tls://{server.host}:{server.port}"
            if settings.tls is None:
                with pytest.raises(nats.TLSError, match="certificate verify failed"):
                    await open_connection(parse_url(url), settings)  # (the default context)
                continue
            stream, _ = await open_connection(parse_url(url), settings)
            async with stream:
                assert isinstance(stream, trio.SSLStream)
        async with nats.connect(server.url, tls=certificates.trusting()) as nc:
            await round_trip(nc)


async def test_a_server_that_verifies_clients_wants_the_client_s_certificate(
    tmp_path: Path, certificates: Certificates
) -> None:
    verify = f'  ca_file: "{certificates.ca_file}"\n  verify: true\n'
    config = certificates.server_config(verify)
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        # (The server refuses after the TLS handshake: the client sees its alert,
        # "certificate required", or only the connection ending; either says this.)
        with pytest.raises(nats.TLSError, match=r"verifies clients' certificates .tls_verify"):
            async with nats.connect(server.url, tls=certificates.trusting(), reconnect=None):
                pytest.fail("the server took a client without a certificate")
        tls = certificates.trusting()
        certificates.ca.issue_cert("client@example.org").configure_cert(tls)
        async with nats.connect(server.url, tls=tls) as nc:
            assert nc.server_info["tls_verify"] is True
            await round_trip(nc)


async def test_tls_before_info_for_a_handshake_first_server(
    tmp_path: Path, tls_server: NatsServer, certificates: Certificates
) -> None:
    # (connect() has no parameter for it yet: ConnectSettings does.)
    settings = ConnectSettings(tls=certificates.trusting(), tls_handshake_first=True)
    config = certificates.server_config("  handshake_first: true\n")
    with running_nats_server(tmp_path, config=config, name="first") as server:
        with trio.fail_after(20):
            stream, protocol = await open_connection(parse_url(server.url), settings)
            async with stream:
                assert isinstance(stream, trio.SSLStream)
                assert protocol.server_info["tls_required"] is True
            # A server that sends INFO first: its INFO is not TLS.
            with pytest.raises(nats.TLSError, match=r"does the server have tls { handshake_f"):
                await open_connection(parse_url(tls_server.url), settings)


# --- authentication ---------------------------------------------------------------------


async def test_a_token(tmp_path: Path) -> None:
    config = 'authorization { token: "s3cr3t" }\n'
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        async with nats.connect(server.url, token="s3cr3t") as nc:
            assert nc.server_info["auth_required"] is True
            await round_trip(nc)
        async with nats.connect(f"nats://s3cr3t@{server.host}:{server.port}") as nc:
            await nc.flush()  # (a URL's user without a password is a token)
        with pytest.raises(nats.ServerError, match=r"refused the connection: Authorization Viol"):
            async with nats.connect(server.url, token="wrong", reconnect=None):
                pytest.fail("a wrong token was taken")
        with pytest.raises(
            nats.ServerError,
            match=r"Authorization Violation \(the server requires authentication and none was",
        ):
            async with nats.connect(server.url, reconnect=None):
                pytest.fail("no token was taken")


async def test_a_user_and_password_by_keyword_or_in_the_url(tmp_path: Path) -> None:
    config = 'authorization { users = [ { user: "alice", password: "p@ss w:rd" } ] }\n'
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        async with nats.connect(server.url, user="alice", password="p@ss w:rd") as nc:
            await round_trip(nc)
        in_url = f"nats://alice:p%40ss%20w%3Ard@{server.host}:{server.port}"
        async with nats.connect(in_url) as nc:
            await nc.flush()
        # The keyword credentials win over the URL's (they are every server's).
        wrong_in_url = f"nats://alice:wrong@{server.host}:{server.port}"
        async with nats.connect(wrong_in_url, user="alice", password="p@ss w:rd") as nc:
            await nc.flush()
        with pytest.raises(nats.ServerError, match="Authorization Violation"):
            async with nats.connect(wrong_in_url, reconnect=None):
                pytest.fail("a wrong password in the URL was taken")
        with pytest.raises(nats.ServerError, match="Authorization Violation"):
            async with nats.connect(server.url, user="alice", password="wrong", reconnect=None):
                pytest.fail("a wrong password was taken")


async def test_an_nkey_seed_as_a_string_or_a_file(tmp_path: Path) -> None:
    user, stranger = nats_jwt.new_key("user"), nats_jwt.new_key("user")
    config = f"authorization {{ users = [ {{ nkey: {nats_jwt.public(user)} }} ] }}\n"
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(nats_jwt.seed(user) + "\n")
    decorated = tmp_path / "user-decorated.nk"
    decorated.write_text(
        f"-----BEGIN USER NKEY SEED-----\n{nats_jwt.seed(user)}\n------END USER NKEY SEED------\n"
    )
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        async with nats.connect(server.url, nkey_seed=nats_jwt.seed(user)) as nc:
            await round_trip(nc)
        for source in (seed_file, str(seed_file), decorated):
            async with nats.connect(server.url, nkey_seed=source) as nc:
                await nc.flush()
        with pytest.raises(nats.ServerError, match="Authorization Violation"):
            async with nats.connect(server.url, nkey_seed=nats_jwt.seed(stranger), reconnect=None):
                pytest.fail("an unknown nkey was taken")


async def test_a_credentials_file_in_operator_mode(tmp_path: Path) -> None:
    operator, account = nats_jwt.new_key("operator"), nats_jwt.new_key("account")
    config = nats_jwt.server_config(operator, {"APP": account})
    creds = tmp_path / "app-user.creds"
    creds.write_text(nats_jwt.credentials_file(account, nats_jwt.new_key("user"), "app-user"))
    unknown_account = nats_jwt.new_key("account")  # (no JWT of it on the server)
    stranger = tmp_path / "stranger.creds"
    stranger.write_text(
        nats_jwt.credentials_file(unknown_account, nats_jwt.new_key("user"), "stranger")
    )
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(20):
        for source in (creds, str(creds)):
            async with nats.connect(server.url, credentials=source) as nc:
                await round_trip(nc)
        with pytest.raises(nats.ServerError, match="Authorization Violation"):
            async with nats.connect(server.url, credentials=stranger, reconnect=None):
                pytest.fail("a user of an account the operator never signed was taken")
        with pytest.raises(
            nats.ServerError, match=r"Authorization Violation \(the server requires authentication"
        ):
            async with nats.connect(server.url, reconnect=None):
                pytest.fail("connected without credentials")


async def test_a_reconnect_secures_and_signs_again_reading_the_seed_file_anew(
    tmp_path: Path, certificates: Certificates
) -> None:
    def config(user: nats_jwt.KeyPair) -> str:
        users = f"authorization {{ users = [ {{ nkey: {nats_jwt.public(user)} }} ] }}\n"
        return users + certificates.server_config()

    first, second = nats_jwt.new_key("user"), nats_jwt.new_key("user")
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(nats_jwt.seed(first))
    fast = nats.Reconnect(wait=0.01, max_wait=0.05, max_rounds=None)
    with running_nats_server(tmp_path, config=config(first)) as server, trio.fail_after(20):
        async with (
            nats.connect(
                server.url, tls=certificates.trusting(), nkey_seed=seed_file, reconnect=fast
            ) as nc,
            nc.events() as events,
        ):
            await round_trip(nc)
            server.kill()
            # The server comes back knowing only the second user (and with a new
            # nonce to sign); the file now holds the second user's seed.
            seed_file.write_text(nats_jwt.seed(second))
            again = running_nats_server(
                tmp_path, config=config(second), port=server.port, name="again"
            )
            with again:
                async for event in events:
                    if isinstance(event, nats.Reconnected):
                        break
                await round_trip(nc)
                await nc.close()  # (while the server runs)


async def test_misuse_is_refused_before_connecting_saying_what_was_wrong(tmp_path: Path) -> None:
    # (No server: each fails in connect() before any connection is tried.)
    seed = nats_jwt.seed(nats_jwt.new_key("user"))
    account_seed = nats_jwt.seed(nats_jwt.new_key("account"))
    typo = seed[:20] + ("B" if seed[20] == "A" else "A") + seed[21:]  # (one letter wrong)
    not_creds = tmp_path / "not.creds"
    not_creds.write_text("hello\n")
    only_jwt = tmp_path / "only-jwt.creds"
    only_jwt.write_text(
        "-----BEGIN NATS USER JWT-----\neyJ0.eyJ1.c2ln\n------END NATS USER JWT------\n"
    )
    missing = tmp_path / "missing.creds"
    cases: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"token": "t", "user": "u", "password": "p"}, ValueError, "got token= and user= and pas"),
        ({"token": "t", "nkey_seed": seed}, ValueError, "one kind of credentials, got token= and "),
        ({"nkey_seed": seed, "credentials": not_creds}, ValueError, "nkey_seed= and credentials"),
        ({"user": "u"}, ValueError, "user= needs password= too"),
        ({"password": "p"}, ValueError, "password= needs user= too"),
        ({"token": ""}, TypeError, "token= is a non-empty str"),
        ({"user": 1, "password": "p"}, TypeError, "user= is a non-empty str"),
        ({"tls": True}, TypeError, r"tls= is an ssl.SSLContext"),
        ({"credentials": 42}, TypeError, "credentials= is a non-empty str or a pathlib.Path"),
        ({"nkey_seed": "SU" + "A" * 56}, ValueError, "given is not a valid nkey seed .its len"),
        ({"nkey_seed": typo}, ValueError, "given is not a valid nkey seed .its length or check"),
        ({"nkey_seed": "SUnot-a-seed"}, FileNotFoundError, "nkey_seed=: cannot read 'SUnot-a-s"),
        ({"nkey_seed": account_seed}, ValueError, "is not a user nkey seed"),
        ({"nkey_seed": not_creds}, ValueError, "holds no user nkey seed"),
        ({"credentials": not_creds}, ValueError, "holds no '-----BEGIN NATS USER JWT-----' block"),
        ({"credentials": only_jwt}, ValueError, "holds no '-----BEGIN USER NKEY SEED-----' block"),
        ({"credentials": missing}, FileNotFoundError, "credentials=: cannot read .*missing.creds"),
    ]
    for keywords, error, message in cases:
        with pytest.raises(error, match=message):
            async with nats.connect("nats://127.0.0.1:1", **keywords):  # type: ignore[arg-type]
                pytest.fail(f"{keywords} was taken")
    assert seed not in repr(ConnectSettings(nkey_seed=seed))  # (secrets stay out of reprs)
    assert "p@ss" not in repr(parse_url("nats://alice:p%40ss@h"))
    with pytest.raises(ValueError, match=r"nats://host:port, got 'http://h' \(tls://host:port"):
        parse_url("http://h")
    assert parse_url("tls://h:4443").url == "tls://h:4443"


def test_without_nkeys_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = nats_jwt.seed(nats_jwt.new_key("user"))
    monkeypatch.setitem(sys.modules, "nkeys", None)  # (import nkeys raises ImportError)
    with pytest.raises(ImportError, match=r"pip install 'trio-actors\[nats\]'"):
        ConnectSettings(nkey_seed=seed)


# --- the system account: a kill -9 seen as a disconnect advisory -------------------------

SYSTEM_ACCOUNT_CONFIG = """
accounts {
  SYS { users = [ { user: sys, password: sys } ] }
  APP { users = [ { user: app, password: app } ] }
}
system_account: SYS
"""

# A subscriber in its own process, to be killed with SIGKILL: it connects as app,
# subscribes, says "ready" once the server has the subscription, and waits.
SUBSCRIBER = """
import sys

import trio

from trio_actors import nats


async def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    async with nats.connect(url, name=name, user="app", password="app") as nc:
        async with nc.subscribe("work"):
            await nc.flush()
            print("ready", flush=True)
            await trio.sleep_forever()


trio.run(main)
"""


async def read_line(stream: trio.abc.ReceiveStream) -> bytes:
    """Bytes up to and including the first newline (or all there were, at EOF)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    return data


async def test_a_killed_subscriber_is_seen_in_the_system_account_s_disconnect_advisory(
    tmp_path: Path,
) -> None:
    name = "doomed-subscriber"
    with (
        running_nats_server(tmp_path, config=SYSTEM_ACCOUNT_CONFIG) as server,
        trio.fail_after(20),
    ):
        async with (
            nats.connect(server.url, name="watcher", user="sys", password="sys") as nc,
            nc.subscribe("$SYS.ACCOUNT.*.DISCONNECT") as advisories,
        ):
            await nc.flush()
            stderr_file = tmp_path / "subscriber.stderr"
            with stderr_file.open("wb") as stderr:
                process = await trio.lowlevel.open_process(
                    [sys.executable, "-c", SUBSCRIBER, server.url, name],
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                )
            try:
                assert process.stdout is not None
                line = await read_line(process.stdout)
                assert line == b"ready\n", stderr_file.read_text()
                process.kill()  # SIGKILL: no goodbye; the kernel closes the socket
                assert await process.wait() == -9
            finally:
                process.kill()
                await process.wait()
                if process.stdout is not None:
                    await process.stdout.aclose()
            async for message in advisories:
                advisory = json.loads(message.data)
                if advisory["client"].get("name") == name:
                    break
    assert message.subject == "$SYS.ACCOUNT.APP.DISCONNECT"
    assert advisory["type"] == "io.nats.server.advisory.v1.client_disconnect"
    client = advisory["client"]
    assert (client["acc"], client["user"], client["lang"]) == ("APP", "app", "python-trio")
    # The dead process's socket was closed by its kernel (FIN): the server read EOF.
    assert advisory["reason"] == "Client Closed"
    assert advisory["received"]["msgs"] == 0


PERMISSIONS = """
authorization {
  users = [
    { user: "limited", password: "p", permissions: { publish: { allow: ["allowed"] } } }
  ]
}
"""


async def test_a_refused_publish_reaches_on_server_error_before_a_later_flush(
    tmp_path: Path,
) -> None:
    """The server's permissions violation is given to ``on_server_error`` from the
    reader -- before the flush sent after the refused publish returns -- and also
    reported as an event; a removed callback hears nothing more."""
    with running_nats_server(tmp_path, config=PERMISSIONS) as server, trio.fail_after(20):
        async with nats.connect(server.url, user="limited", password="p") as nc:
            heard: list[str] = []
            remove = nc.on_server_error(heard.append)
            nc.publish("allowed", b"")
            nc.publish("forbidden", b"")
            await nc.flush()
            assert heard == ['Permissions Violation for Publish to "forbidden"']
            assert nc.last_error == heard[0]
            remove()
            nc.publish("forbidden", b"")
            await nc.flush()
            assert heard == ['Permissions Violation for Publish to "forbidden"']
            assert nc.server_errors == 2
            assert nc.status == "connected"

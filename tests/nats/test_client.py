"""The trio NATS client against a real ``nats-server``: publish (synchronous, never
a checkpoint), subscriptions and queue groups, request/reply, no responders,
cancellation of a request, flush, the errors for bad input and a closed server."""

from __future__ import annotations

import inspect
import logging
import os

import pytest
import trio
import trio.testing

from nats_server import NatsServer
from trio_actors import nats
from trio_actors.nats import _writer


async def test_publish_and_subscribe(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("orders.*") as sub:
            await nc.flush()  # (the SUB has reached the server)
            for number in range(100):
                nc.publish("orders.new", str(number).encode(), headers={"N": str(number)})
            received = [await sub.receive() for _ in range(100)]
            assert [m.data for m in received] == [str(n).encode() for n in range(100)]
            assert [m.headers["N"] for m in received if m.headers] == [str(n) for n in range(100)]
            assert received[0].subject == "orders.new"
            assert (nc.messages_out, nc.messages_in) == (100, 100)


async def test_publish_is_never_a_checkpoint(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            assert not inspect.iscoroutinefunction(nc.publish)  # (a coroutine would not run)
            with trio.testing.assert_no_checkpoints():
                nc.publish("a", b"x")
                nc.publish("a", b"y", reply="b", headers={"K": "v"})


async def test_what_a_before_writing_callback_publishes_joins_the_writer_s_turn(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("held.*") as sub:
            await nc.flush()
            held: list[bytes] = []
            turns: list[bool] = []

            def release() -> None:
                turns.append(nc.waiting_to_write)
                while held:
                    nc.publish("held.late", held.pop(0))

            remove = nc.before_writing(release)
            nc.publish("held.first", b"1")  # (written through: nothing waits)
            nc.publish("held.first", b"2")  # (waits for the writer's turn)
            assert nc.waiting_to_write
            held.append(b"3")  # (held back while something waits)
            got = [await sub.receive() for _ in range(3)]
            assert [m.data for m in got] == [b"1", b"2", b"3"]
            assert turns[0]  # (called before the writer took what waited)
            assert not nc.waiting_to_write
            remove()
            remove()  # (idempotent)
            calls = len(turns)
            await nc.flush()
            assert len(turns) == calls  # (removed: not called at later turns)


async def test_a_before_writing_callback_that_raises_or_removes_itself_harms_nothing(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="trio_actors.nats")
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise ValueError("a bug in the callback")

    def once() -> None:
        calls.append("once")
        remove_once()

    def every() -> None:
        calls.append("every")

    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("x") as sub:
            nc.before_writing(broken)
            remove_once = nc.before_writing(once)
            nc.before_writing(every)
            await nc.flush()
            await nc.flush()
            assert calls[:3] == ["broken", "once", "every"]  # (none skipped)
            assert "once" not in calls[3:]
            assert "a bug in the callback" in caplog.text
            nc.publish("x", b"still connected")
            assert (await sub.receive()).data == b"still connected"


async def test_a_queue_group_shares_the_messages(nats_server: NatsServer) -> None:
    got: dict[str, list[bytes]] = {"first": [], "second": []}
    all_in = trio.Event()

    async def consume(name: str, sub: nats.Subscription) -> None:
        async for message in sub:
            got[name].append(message.data)
            if sum(map(len, got.values())) == 200:
                all_in.set()

    with trio.fail_after(20):
        async with (
            nats.connect(nats_server.url) as nc,
            nc.subscribe("jobs", queue="workers") as first,
            nc.subscribe("jobs", queue="workers") as second,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(consume, "first", first)
            nursery.start_soon(consume, "second", second)
            await nc.flush()
            for number in range(200):
                nc.publish("jobs", b"%d" % number)
            await all_in.wait()
            assert sorted(got["first"] + got["second"]) == sorted(b"%d" % n for n in range(200))
            assert got["first"]
            assert got["second"]  # (the server spreads a queue group's messages)
            nursery.cancel_scope.cancel()


async def test_request_reply_and_no_responders(nats_server: NatsServer) -> None:
    async def echo(nc: nats.Client, sub: nats.Subscription) -> None:
        async for message in sub:
            assert message.reply is not None
            nc.publish(message.reply, b"echo: " + message.data)

    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, trio.open_nursery() as nursery:
            async with nc.subscribe("echo") as sub:
                nursery.start_soon(echo, nc, sub)
                await nc.flush()
                replies = [await nc.request("echo", b"%d" % n) for n in range(20)]
                assert [r.data for r in replies] == [b"echo: %d" % n for n in range(20)]
            with pytest.raises(nats.NoResponders, match="no responders for 'nobody'"):
                await nc.request("nobody", b"?")


async def test_a_cancelled_request_leaves_nothing_behind(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("slow") as sub:
            await nc.flush()
            with trio.move_on_after(0.01):
                await nc.request("slow", b"?")  # nobody answers in time
            assert nc._conn.requests == {}
            late = await sub.receive()
            assert late.reply is not None
            nc.publish(late.reply, b"too late")  # dropped: nobody waits for it
            await nc.flush()
            assert nc._conn.requests == {}


async def test_bad_input_and_max_payload_are_refused_before_anything_is_sent(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            with pytest.raises(ValueError, match="only subscriptions may"):
                nc.publish("a.*", b"")
            limit = nc.server_info["max_payload"]
            with pytest.raises(nats.MaxPayloadExceeded, match=f"max_payload of {limit} bytes"):
                nc.publish("a", b"x" * (limit + 1))
            assert nc.messages_out == 0


async def test_a_full_send_buffer_raises_rather_than_dropping(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url, max_pending_bytes=1000) as nc:
            nc.publish("a", b"x" * 500)  # written through: nothing was buffered
            nc.publish("a", b"x" * 500)  # buffered: the writer has not run yet
            assert nc.statistics().pending_bytes == len(b"PUB a 500\r\n\r\n") + 500
            with pytest.raises(nats.BufferFull, match=r"over max_pending_bytes=1000"):
                nc.publish("a", b"x" * 500)
            assert nc.messages_out == 2


async def test_no_server_is_an_oserror() -> None:
    with trio.fail_after(20), pytest.raises(OSError, match="connect"):
        async with nats.connect("nats://127.0.0.1:1"):
            pass  # pragma: no cover


async def test_bad_urls_are_refused() -> None:
    with pytest.raises(ValueError, match=r"must look like nats://host:port, got 'http://x'"):
        async with nats.connect("http://x"):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="at least one"):
        async with nats.connect([]):
            pass  # pragma: no cover


async def test_close_sends_what_is_buffered_then_ends_the_connection(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as listener, listener.subscribe("c") as sub:
            await listener.flush()
            async with nats.connect(nats_server.url) as nc:
                for number in range(50):
                    nc.publish("c", b"%d" % number)
                await nc.close()  # the 50 reach the server first
                assert nc.closed
                with pytest.raises(nats.ConnectionClosed):
                    nc.publish("c", b"after")
                await nc.close()  # idempotent
            got = [(await sub.receive()).data for _ in range(50)]
            assert got == [b"%d" % n for n in range(50)]


async def test_drain_ends_each_subscription_after_what_it_already_has(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            sub = nc.subscribe_nowait("d")
            await nc.flush()
            for number in range(10):
                nc.publish("d", b"%d" % number)
            await nc.flush()  # (the server has sent them back before the PONG)
            await nc.drain()
            assert [m.data async for m in sub] == [b"%d" % n for n in range(10)]
            assert nc.closed


async def test_drain_keeps_what_is_still_on_the_wire(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            sub = nc.subscribe_nowait("w")
            await nc.flush()
            for number in range(1000):
                nc.publish("w", b"%d" % number)
            await nc.drain()  # at once: most of them have not come back yet
            assert [m.data async for m in sub] == [b"%d" % n for n in range(1000)]
            assert nc.closed


async def test_publishing_from_another_thread_is_refused_saying_how(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            with pytest.raises(RuntimeError, match=r"trio.from_thread.run_sync\(nc.publish"):
                await trio.to_thread.run_sync(nc.publish, "a", b"x")
            assert nc.messages_out == 0

            def from_a_thread() -> None:
                trio.from_thread.run_sync(nc.publish, "a", b"x")

            await trio.to_thread.run_sync(from_a_thread)
            assert nc.messages_out == 1


async def test_a_subscription_read_too_slowly_drops_and_says_so_once(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("s", pending=10) as sub:
            await nc.flush()
            for number in range(50):
                nc.publish("s", b"%d" % number)
            await nc.flush()  # (all 50 came back before the PONG: 40 did not fit)
            with pytest.raises(nats.SlowConsumer, match="dropped 40 messages"):
                await sub.receive()
            kept = [(await sub.receive()).data for _ in range(10)]
            assert kept == [b"%d" % n for n in range(10)]  # the oldest are kept
            assert (sub.delivered, sub.dropped) == (10, 40)
            assert nc.statistics().dropped == 40


async def test_statistics_count_messages_and_bytes_both_ways(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("t") as sub:
            await nc.flush()
            nc.publish("t", b"abc")
            nc.publish("t", b"de", headers={"K": "v"})
            await nc.flush()
            assert [(await sub.receive()).data for _ in range(2)] == [b"abc", b"de"]
            statistics = nc.statistics()
            assert statistics == nats.ClientStatistics(
                status="connected",
                server=nats_server.url,
                messages_in=2,
                bytes_in=5,
                messages_out=2,
                bytes_out=5,
                reconnects=0,
                pending_bytes=0,
                subscriptions=1,
                dropped=0,
                server_errors=0,
                unsent=0,
            )


# --- write-through and the subscription's yield batches ---------------------------------


class _ShortWrites:
    """Stands in for the ``os`` module of the client: each write hands the socket
    only ``take`` bytes (a socket whose buffer is nearly full)."""

    def __init__(self, take: int) -> None:
        self.take = take
        self.writes: list[int] = []

    def write(self, fd: int, data: bytes) -> int:
        self.writes.append(len(data))
        return os.write(fd, data[: self.take])


@pytest.mark.parametrize("take", [0, 1, 7, 10_000])
async def test_a_frame_the_socket_takes_only_part_of_is_finished_by_the_writer_in_order(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch, take: int
) -> None:
    short = _ShortWrites(take)
    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc, nc.subscribe("n") as sub:
            await nc.flush()
            monkeypatch.setattr(_writer, "os", short)
            for round_number in range(20):
                for number in range(5):  # the first of each round is written through
                    nc.publish("n", b"%02d.%d" % (round_number, number) + b"x" * 200)
                await nc.flush()  # (the reader and writer run: the next may write through)
            # At most one write-through per round (its first publish; none where the
            # writer was still finishing its send_all), never one per publish.
            assert 1 <= len(short.writes) <= 20
            assert set(short.writes) == {len(b"PUB n 204\r\n\r\n") + 204}
            got = [(await sub.receive()).data for _ in range(100)]
    assert got == [b"%02d.%d" % (r, n) + b"x" * 200 for r in range(20) for n in range(5)]


async def test_a_request_is_written_through_not_left_for_the_writer(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = _ShortWrites(10_000)

    async def echo(sub: nats.Subscription, nc: nats.Client) -> None:
        async for message in sub:
            assert message.reply is not None
            nc.publish(message.reply, message.data)

    with trio.fail_after(20):
        async with (
            nats.connect(nats_server.url) as nc,
            nc.subscribe("echo") as sub,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(echo, sub, nc)
            await nc.request("echo", b"warm up")  # (the inbox's SUB)
            monkeypatch.setattr(_writer, "os", short)
            for number in range(10):
                assert (await nc.request("echo", b"%d" % number)).data == b"%d" % number
            # Each request, and each reply, went out in a write of its own.
            assert len(short.writes) == 20
            nursery.cancel_scope.cancel()


async def test_a_subscription_yields_once_per_batch_and_is_cancelled_at_any_message(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with (
            nats.connect(nats_server.url) as nc,
            nc.subscribe("b") as sub,
            nc.subscribe("sentinel") as sentinel,
        ):
            await nc.flush()
            for number in range(3 * nats.YIELD_EVERY):
                nc.publish("b", b"%d" % number)
            nc.publish("sentinel")
            await sentinel.receive()  # (one connection's messages arrive in order)
            assert sub.delivered == 3 * nats.YIELD_EVERY
            steps = 0

            async def count_steps() -> None:
                nonlocal steps
                while True:
                    await trio.lowlevel.checkpoint()
                    steps += 1

            async with trio.open_nursery() as nursery:
                nursery.start_soon(count_steps)
                await trio.lowlevel.checkpoint()  # (it has started)
                before = steps
                got = [await sub.receive() for _ in range(2 * nats.YIELD_EVERY)]
                # The other task ran between the batches (two yields), not once for
                # every message (the last batch's step may come after this line).
                assert 1 <= steps - before <= 3
                nursery.cancel_scope.cancel()
            assert [m.data for m in got] == [b"%d" % n for n in range(2 * nats.YIELD_EVERY)]
            # ... and a cancelled scope stops the reader at the very next message.
            with trio.CancelScope() as scope:
                scope.cancel()
                await sub.receive()
            assert scope.cancelled_caught
            rest = [(await sub.receive()).data for _ in range(nats.YIELD_EVERY)]
            assert rest == [b"%d" % n for n in range(2 * nats.YIELD_EVERY, 3 * nats.YIELD_EVERY)]


async def test_a_callback_subscription_gets_each_message_from_the_reader_in_order(
    nats_server: NatsServer,
) -> None:
    got: list[bytes] = []
    all_in = trio.Event()

    def collect(message: nats.Msg) -> None:
        got.append(message.data)
        if len(got) == 500:
            all_in.set()

    with trio.fail_after(20):
        async with nats.connect(nats_server.url) as nc:
            async with nc.subscribe("c.*", callback=collect) as sub:
                await nc.flush()
                for number in range(500):
                    nc.publish("c.x", b"%d" % number)
                await all_in.wait()
                assert got == [b"%d" % n for n in range(500)]
                assert sub.delivered == 500
                with pytest.raises(TypeError, match="hands its messages to"):
                    await sub.receive()
            with pytest.raises(TypeError, match="callback must be callable"):
                nc.subscribe_nowait("c", callback="no")  # type: ignore[arg-type]


async def test_an_exception_in_a_callback_ends_the_connection_block(
    nats_server: NatsServer,
) -> None:
    def explode(message: nats.Msg) -> None:
        raise KeyError(message.data)

    caught = pytest.RaisesGroup(pytest.RaisesExc(KeyError, match="boom"), flatten_subgroups=True)
    with trio.fail_after(20), caught:
        async with nats.connect(nats_server.url) as nc, nc.subscribe("x", callback=explode):
            await nc.flush()
            nc.publish("x", b"boom")
            await trio.sleep_forever()

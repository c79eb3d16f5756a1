"""Tells in one traced process: a PRODUCER span for the teller and a CONSUMER span for
the handling, as ``Tracing(tells=...)`` says; traced tells keep their place among the
plain ones; a traced tell that is never handled is a dead letter of the user's own
message; what is never traced (bounded mailboxes, ``send``, other threads) stays as
it was, and ``tells="none"`` keeps the tell fast paths."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

import trio_actors as ta
from helpers import Echo
from traces import ALWAYS_ON, Recorded, attributes, events, is_child, outcome
from trio_actors._core._ref import local_cell
from trio_actors.observe import Tracing

pytestmark = pytest.mark.usefixtures("no_context_left_behind")


class Log(ta.Actor):
    """Records what it is told; ``"log"`` answers the record."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "log":
            return list(self.seen)
        self.seen.append(message)
        return None


class AsyncLog(Log):
    async def receive(self, message: Any) -> Any:
        return super().receive(message)


class Gate(ta.Actor):
    """Holds its turn on ``"hold"``, until it is stopped."""

    async def receive(self, message: Any) -> Any:
        if message == "hold":
            await trio.sleep_forever()
        return message


@pytest.mark.parametrize("actor", [Log, AsyncLog], ids=["plain", "async"])
async def test_a_tell_in_a_trace_is_a_producer_span_and_its_handling_a_consumer_span(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        log = system.spawn(actor, name="log")
        log.tell("outside any trace")  # (tells="in_trace", the default: not traced)
        with tracer.start_as_current_span("request"):
            log.tell("inside")
        assert await log.ask("log") == ["outside any trace", "inside"]
    name = actor.__name__
    producer = recorded.one(f"tell {name}", SpanKind.PRODUCER)
    consumer = recorded.one(f"receive {name}", SpanKind.CONSUMER)
    assert is_child(producer, recorded.one("request"))
    assert is_child(consumer, producer)
    assert attributes(producer) == {
        "trio_actors.actor.path": "system/log",
        "trio_actors.actor.class": name,
        "trio_actors.message.type": "str",
    }
    assert outcome(consumer) == "value"
    assert attributes(consumer)["trio_actors.queued.seconds"] == 0.0


async def test_with_tells_all_a_tell_outside_a_trace_starts_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded(ALWAYS_ON)
    async with ta.open_actor_system(
        tracing=Tracing(provider=recorded.provider, tells="all")
    ) as system:
        log = system.spawn(Log)
        log.tell("root")
        await log.ask("log")
    producer = recorded.one("tell Log")
    assert producer.parent is None
    assert is_child(recorded.one("receive Log", SpanKind.CONSUMER), producer)


async def test_with_tells_none_no_tell_is_traced_and_the_fast_paths_stay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(
        tracing=Tracing(provider=recorded.provider, tells="none")
    ) as system:
        log = system.spawn(Log)
        with tracer.start_as_current_span("request"):
            log.tell(1)
            assert local_cell(log).activates  # (an idle actor is activated inline)
            log.tell(2)
            assert local_cell(log).fast_tell  # (busy: appending is all a tell does)
        assert await log.ask("log") == [1, 2]
    assert sorted(recorded.names()) == ["ask Log", "receive Log", "request"]


async def test_traced_and_plain_tells_are_handled_in_the_order_they_were_told(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        logs = [system.spawn(Log), system.spawn(AsyncLog)]
        with tracer.start_as_current_span("request") as request:
            inside = trace.set_span_in_context(request)
            for number in range(2_000):
                traced = number % 3 != 1  # (runs of two traced, one plain)
                token = otel_context.attach(inside if traced else otel_context.Context())
                try:
                    for log in logs:
                        log.tell(number)
                finally:
                    otel_context.detach(token)
        for log in logs:
            assert await log.ask("log") == list(range(2_000))
    consumers = [s for s in recorded.spans if s.kind is SpanKind.CONSUMER]
    assert len(consumers) == 2 * len([n for n in range(2_000) if n % 3 != 1])


async def test_a_traced_tell_never_handled_is_a_dead_letter_of_the_users_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        gate = system.spawn(Gate)

        async def hold() -> None:
            with pytest.raises(ta.ActorStopped, match="stopped while answering"):
                await gate.ask("hold")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            with tracer.start_as_current_span("request"):
                for number in range(3):
                    gate.tell(("queued", number))
            await gate.stop()  # (strands the three)
        with tracer.start_as_current_span("late"):
            gate.tell("after the stop")
    letters = [(letter.message, letter.reason) for letter in system.dead_letters.recent]
    assert letters == [
        (("queued", 0), "stranded"),
        (("queued", 1), "stranded"),
        (("queued", 2), "stranded"),
        ("after the stop", "stopped"),
    ]
    assert len(recorded.named("tell Gate")) == 3  # (the refused one: no span)
    assert not [s for s in recorded.spans if s.kind is SpanKind.CONSUMER]
    late = recorded.one("late")
    assert events(late) == ["dead_letters"]
    assert (late.events[0].attributes or {})["trio_actors.dead_letter.reason"] == "stopped"


async def test_tells_that_are_never_traced_bounded_mailboxes_send_and_other_threads(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded(ALWAYS_ON)
    async with ta.open_actor_system(
        tracing=Tracing(provider=recorded.provider, tells="all")
    ) as system:
        bounded = system.spawn(Log, mailbox=ta.Bounded(10))
        bounded.tell("bounded")
        plain = system.spawn(Log)
        await plain.send("sent")
        thread = threading.Thread(target=plain.tell, args=("from a thread",))
        thread.start()
        await trio.to_thread.run_sync(thread.join)
        await trio.testing.wait_all_tasks_blocked()
        assert await bounded.ask("log") == ["bounded"]
        assert await plain.ask("log") == ["sent", "from a thread"]
    assert not [s for s in recorded.spans if s.kind in (SpanKind.PRODUCER, SpanKind.CONSUMER)]


async def test_a_failing_traced_tell_is_a_failure_event_on_its_consumer_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Failing(ta.Actor):
        def receive(self, message: Any) -> None:
            raise ValueError(message)

    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        failing = system.spawn(Failing, supervision=ta.Resume())
        with tracer.start_as_current_span("request"):
            failing.tell("bad")
        await trio.testing.wait_all_tasks_blocked()
        echo = system.spawn(Echo)
        assert await echo.ask("still serving") == "still serving"
    consumer = recorded.one("receive Failing", SpanKind.CONSUMER)
    assert outcome(consumer) == "exception"
    assert events(consumer) == ["failure", "exception"]

"""Asks in one traced process: a CLIENT span for the asker, a SERVER span for the
handling, child of it, with the attributes and the outcome docs/observing.rst lists;
what a handler asks is the grandchild; an untraced message sees no span; the
samplers and ``roots`` decide, and an ask sampled out takes the untraced path.
Spans from the SDK's in-memory exporter, under an autojumping MockClock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, StatusCode

import trio_actors as ta
from helpers import Echo
from traces import ALWAYS_OFF, Recorded, attributes, events, is_child, outcome
from trio_actors.observe import Tracing

pytestmark = pytest.mark.usefixtures("no_context_left_behind")

PATH = "trio_actors.actor.path"
CLASS = "trio_actors.actor.class"
MESSAGE = "trio_actors.message.type"
QUEUED = "trio_actors.queued.seconds"
OUTCOME = "trio_actors.outcome"


class AsyncEcho(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return message


class Raising(ta.Actor):
    def receive(self, message: Any) -> Any:
        raise ValueError(message)


class AsyncRaising(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        raise ValueError(message)


class Sleeper(ta.Actor):
    """``("sleep", s)`` takes ``s`` seconds; anything else is answered at once."""

    async def receive(self, message: Any) -> Any:
        if isinstance(message, tuple):
            await trio.sleep(message[1])
        return message


class Front(ta.Actor):
    """Asks ``back`` whatever it gets, and answers with the answer."""

    def __init__(self, back: ta.ActorRef) -> None:
        self.back = back

    async def receive(self, message: Any) -> Any:
        return await self.back.ask(message)


class WhichTask(ta.Actor):
    def receive(self, message: Any) -> Any:
        return trio.lowlevel.current_task()


@pytest.mark.parametrize("actor", [Echo, AsyncEcho], ids=["plain", "async"])
async def test_an_ask_is_a_client_span_and_its_handling_a_server_span_child_of_it(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        ref = system.spawn(actor, name="echo")
        assert await ref.ask(7) == 7
    name = actor.__name__
    client = recorded.one(f"ask {name}", SpanKind.CLIENT)
    server = recorded.one(f"receive {name}", SpanKind.SERVER)
    assert client.parent is None  # (asked outside any trace: a root)
    assert is_child(server, client)
    common = {PATH: "system/echo", CLASS: name, MESSAGE: "int", OUTCOME: "value"}
    assert attributes(client) == common
    assert attributes(server) == {**common, QUEUED: 0.0}
    assert client.status.status_code is StatusCode.UNSET
    assert server.status.status_code is StatusCode.UNSET
    assert len(recorded.spans) == 2


@pytest.mark.parametrize("actor", [Raising, AsyncRaising], ids=["plain", "async"])
async def test_a_handler_that_raises_is_an_exception_on_both_spans_and_a_failure_event(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        ref = system.spawn(actor, supervision=ta.Resume())
        with pytest.raises(ValueError, match="bad"):
            await ref.ask("bad")
    client = recorded.one(f"ask {actor.__name__}")
    server = recorded.one(f"receive {actor.__name__}")
    assert (outcome(client), outcome(server)) == ("exception", "exception")
    assert client.status.status_code is StatusCode.ERROR
    assert server.status.status_code is StatusCode.ERROR
    assert events(client) == ["exception"]
    assert events(server) == ["failure", "exception"]  # supervision counted it
    failure = server.events[0].attributes or {}
    assert failure["trio_actors.failure.where"] == "handling a str"
    assert failure["exception.type"] == "ValueError"


@pytest.mark.parametrize("actor", [Raising, AsyncRaising], ids=["plain", "async"])
async def test_an_expected_error_is_an_exception_outcome_without_a_failure_event(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    expecting = type(f"Expecting{actor.__name__}", (actor,), {"expected_errors": (ValueError,)})
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        ref = system.spawn(expecting)
        with pytest.raises(ValueError, match="a reply"):
            await ref.ask("a reply")
        assert ref.statistics().failures == 0
    server = recorded.one(f"receive {expecting.__name__}")
    assert outcome(server) == "exception"
    assert events(server) == ["exception"]  # (a reply: no failure, no restart)
    assert not recorded.named(f"restart {expecting.__name__}")


async def test_an_ask_cancelled_while_queued_is_a_client_span_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        sleeper = system.spawn(Sleeper)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper.ask, ("sleep", 10))
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1):
                await sleeper.ask("queued behind")
    queued = [s for s in recorded.named("ask Sleeper") if attributes(s)[MESSAGE] == "str"]
    assert [outcome(s) for s in queued] == ["cancelled_while_queued"]
    assert queued[0].status.status_code is StatusCode.UNSET  # (the asker's choice)
    handled = [attributes(s)[MESSAGE] for s in recorded.named("receive Sleeper")]
    assert handled == ["tuple"]  # never handled: no SERVER span


async def test_an_ask_cancelled_while_its_async_handler_runs_abandons_the_handling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        sleeper = system.spawn(Sleeper)
        with trio.move_on_after(1):
            await sleeper.ask(("sleep", 10))
        assert await sleeper.ask("next") == "next"  # (the actor goes on)
    client, _next = _in_order(recorded)
    assert outcome(client) == "cancelled"
    server = recorded.named("receive Sleeper")[0]
    assert outcome(server) == "abandoned"
    assert is_child(server, client)


def _in_order(recorded: Recorded) -> tuple[Any, Any]:
    asks = sorted(recorded.named("ask Sleeper"), key=lambda s: s.start_time or 0)
    return asks[0], asks[1]


async def test_what_a_handler_asks_is_a_child_of_its_handling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        front = system.spawn(Front, system.spawn(Echo))
        assert await front.ask("x") == "x"
    ask_front = recorded.one("ask Front")
    receive_front = recorded.one("receive Front")
    ask_echo = recorded.one("ask Echo")
    receive_echo = recorded.one("receive Echo")
    assert is_child(receive_front, ask_front)
    assert is_child(ask_echo, receive_front)
    assert is_child(receive_echo, ask_echo)
    assert len({s.context.trace_id for s in recorded.spans if s.context}) == 1


async def test_a_message_handled_after_a_traced_one_sees_no_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The traced handling's context is detached when it ends: the untraced tell that
    # follows (told outside any trace) starts a trace of its own when it asks.
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        front = system.spawn(Front, system.spawn(Echo))
        await front.ask("traced")
        front.tell("untraced")
        await trio.testing.wait_all_tasks_blocked()
    asks = sorted(recorded.named("ask Echo"), key=lambda s: s.start_time or 0)
    assert len(asks) == 2
    assert asks[0].parent is not None
    assert asks[1].parent is None  # a root: nothing of the first trace was left current
    assert not recorded.named("receive Front")[1:]  # (the tell itself: untraced)


async def test_an_ask_sampled_out_makes_no_span_and_is_answered_in_the_askers_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded(ALWAYS_OFF)
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        which = system.spawn(WhichTask)
        await which.ask("first")  # (its first activation binds its receive)
        assert await which.ask("?") is trio.lowlevel.current_task()  # (the idle fast path)
        front = system.spawn(Front, system.spawn(Echo))
        assert await front.ask("x") == "x"
    assert recorded.spans == ()


async def test_a_sampled_ask_is_queued_also_to_an_idle_plain_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # (its handler then runs in the dispatcher, with its own span current)
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        which = system.spawn(WhichTask)
        await which.ask("first")  # (its first activation binds its receive)
        assert await which.ask("?") is not trio.lowlevel.current_task()
    assert len(recorded.named("receive WhichTask")) == 2


async def test_without_roots_only_asks_inside_a_trace_are_traced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracing = Tracing(provider=recorded.provider, roots=False)
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=tracing) as system:
        echo = system.spawn(Echo)
        await echo.ask("outside")
        assert recorded.spans == ()
        with tracer.start_as_current_span("request"):
            await echo.ask("inside")
    request = recorded.one("request")
    assert is_child(recorded.one("ask Echo"), request)
    assert is_child(recorded.one("receive Echo"), recorded.one("ask Echo"))


@pytest.mark.parametrize(
    ("how", "expected"),
    [("stopped", "stopped"), ("itself", "exception")],
)
async def test_a_refused_ask_and_a_self_ask_end_their_client_span_with_what_they_raised(
    autojump_clock: trio.testing.MockClock, how: str, expected: str
) -> None:
    class AsksItself(ta.Actor):
        async def receive(self, message: Any) -> Any:
            return await self.ref.ask("again")

    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        if how == "stopped":
            echo = system.spawn(Echo)
            await echo.stop()
            with pytest.raises(ta.ActorStopped):
                await echo.ask("late")
            name = "ask Echo"
        else:
            asker = system.spawn(AsksItself)
            with pytest.raises(ta.ActorError, match="asked itself"):
                await asker.ask("go")
            name = "ask AsksItself"
    spans = sorted(recorded.named(name), key=lambda s: s.start_time or 0)
    assert outcome(spans[-1]) == expected
    assert spans[-1].status.status_code is StatusCode.ERROR


async def test_the_dispatcher_and_serving_tasks_start_outside_the_openers_trace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Opened inside a user's span: an untraced handling -- in the dispatcher (plain)
    # or in a serving task started from inside that span (async) -- sees no span.
    class Relay(ta.Actor):
        def __init__(self, to: ta.ActorRef) -> None:
            self.to = to

        def receive(self, message: Any) -> None:
            self.to.tell(message)  # (traced only inside a sampled span)

    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    with tracer.start_as_current_span("user"):
        async with ta.open_actor_system(tracing=recorded.provider) as system:
            echo = system.spawn(Echo, name="echo")
            relay = system.spawn(Relay, echo)
            front = system.spawn(Front, echo)
            front.tell("traced: starts front's serving task inside the span")
            token = otel_context.attach(otel_context.Context())  # (no span from here)
            try:
                relay.tell("untraced")
                front.tell("untraced too")  # (served by that same serving task)
                await trio.testing.wait_all_tasks_blocked()
            finally:
                otel_context.detach(token)
    assert not recorded.named("tell Echo")  # (the relay's tell saw no span)
    user = recorded.one("user")
    asks = sorted(recorded.named("ask Echo"), key=lambda s: s.start_time or 0)
    assert len(asks) == 2
    consumer = recorded.one("receive Front", SpanKind.CONSUMER)
    assert is_child(consumer, recorded.one("tell Front"))
    assert is_child(recorded.one("tell Front"), user)
    assert is_child(asks[0], consumer)
    assert asks[1].parent is None  # not the user's span, nor the first message's


async def test_tracing_accepts_true_a_provider_or_tracing_and_refuses_anything_else() -> None:
    with pytest.raises(TypeError, match="tracing must be True or False"):
        async with ta.open_actor_system(tracing="yes"):  # type: ignore[arg-type]
            raise AssertionError("opened")
    with pytest.raises(ValueError, match=r"tells=.*one of none, in_trace, all"):
        Tracing(tells="some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"provider=.*TracerProvider"):
        Tracing(provider=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"roots=.*True or False"):
        Tracing(roots=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"propagator=.*TextMapPropagator"):
        Tracing(propagator="w3c")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (trio.Cancelled._create(source="deadline"), "cancelled"),
        (ta.ConnectionInterrupted("lost"), "in_doubt"),  # (a NodeDown: told apart first)
        (ta.NodeDown("down"), "node_down"),
        (ta.NotPermitted("refused"), "not_permitted"),
        (ta.MailboxFull("full"), "mailbox_full"),
        (ta.ActorStopped("stopped"), "stopped"),
        (ta.ActorNotFound("nobody"), "not_found"),
        (KeyError("mine"), "exception"),
    ],
)
def test_what_an_ask_raised_is_its_askers_outcome(error: BaseException, expected: str) -> None:
    from trio_actors.observe._outcomes import outcome_of

    assert outcome_of(error) == expected


async def test_a_traced_ask_a_full_mailbox_drops_is_a_mailbox_full_outcome(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        sleeper = system.spawn(Sleeper, mailbox=ta.Bounded(1, "drop_old"))
        dropped: list[BaseException] = []

        async def ask_dropped() -> None:
            with pytest.raises(ta.MailboxFull) as raised:
                await sleeper.ask("dropped")
            dropped.append(raised.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper.ask, ("sleep", 10))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask_dropped)
            await trio.testing.wait_all_tasks_blocked()
            sleeper.tell("newer")  # (drops the oldest queued: the ask)
        assert len(dropped) == 1
    outcomes = {attributes(s)[MESSAGE]: outcome(s) for s in recorded.named("ask Sleeper")}
    assert outcomes == {"tuple": "value", "str": "mailbox_full"}

"""Two worker nodes and a client node (issue 18's example): run it with

    trio-actors node app:worker --cluster nats://127.0.0.1:4222 --name worker-0
    trio-actors node app:worker --cluster nats://127.0.0.1:4222 --name worker-1
    trio-actors node app:client --cluster nats://127.0.0.1:4222 --name client

(from this folder, with a ``nats-server`` running; add ``--heartbeat 0.2`` to each
for a death seen in ~0.6 s rather than ~3 s), then ``kill -9`` the process of
``worker-0`` when the client says ``kill worker-0 now``. What the client shows:

* it finds the ``counter`` (on worker-0) by name, tells and asks it;
* it cancels an ask still queued behind a slow one: withdrawn on worker-0;
* it watches the counter; when worker-0 dies, an ask pending there fails with
  ``NodeDown``, and the watch ends with ``Terminated(error=NodeDown(...))``;
* its supervisor then has worker-1's spawner start a new counter under the same
  name, and goes on with it;
* a tell to the dead counter's ref is a dead letter here, reason ``"unreachable"``.

``tests/test_examples.py`` runs all of it against a real server and a real
``kill -9``.
"""

from __future__ import annotations

from typing import Any

import trio

import trio_actors as ta


class Counter(ta.Actor):
    """Counts what it is told; answers ``"count"``; ``("slow", seconds)`` takes long."""

    def __init__(self) -> None:
        self.count = 0

    async def receive(self, message: Any) -> Any:
        match message:
            case "count":
                return self.count
            case ("slow", seconds):
                await trio.sleep(seconds)
                return "slow done"
            case int(n):
                self.count += n
        return None


class Spawner(ta.Actor):
    """Spawns a counter on its node when asked, under the name it is given."""

    def receive(self, message: Any) -> Any:
        match message:
            case ("spawn counter", str(name)):
                counter = self.spawn(Counter, name=name)
                self.system.register(name, counter)
                return counter
        return None


async def worker(system: ta.ActorSystem) -> None:
    """A worker node: a spawner registered as ``spawner-<node>``; worker-0 also
    starts the first ``counter``."""
    assert system.node is not None
    name = system.node.name
    spawner = system.spawn(Spawner, name="spawner")
    system.register(f"spawner-{name}", spawner)
    if name == "worker-0":
        await spawner.ask(("spawn counter", "counter"))
    await system.node.flush()
    print(f"{name} ready", flush=True)
    await trio.sleep_forever()


async def lookup(system: ta.ActorSystem, name: str) -> ta.ActorRef:
    """``name``'s actor, waiting (a little) for its node to have registered it."""
    with trio.fail_after(30):
        while True:
            try:
                return await system.lookup(name)
            except ta.ActorNotFound:
                await trio.sleep(0.05)


class Supervisor(ta.Actor):
    """Watches the counter; when it is gone with its node, has worker-1 start a new
    one (by name), and keeps the newest ref."""

    def __init__(self, counter: ta.ActorRef, replaced: trio.Event) -> None:
        self.counter = counter
        self.replaced = replaced

    def on_start(self) -> None:
        self.watch(self.counter)

    async def receive(self, message: Any) -> Any:
        match message:
            case ta.Terminated(ref=ref, error=error) if ref == self.counter:
                print(f"client: {ref.path} terminated: {type(error).__name__}", flush=True)
                spawner = await lookup(self.system, "spawner-worker-1")
                self.counter = await spawner.ask(("spawn counter", "counter"))
                self.watch(self.counter)
                self.replaced.set()
            case "counter":
                return self.counter
        return None


async def client(system: ta.ActorSystem) -> None:
    """The client node: see the module's docstring."""
    counter = await lookup(system, "counter")
    print(f"client: found {counter.path}", flush=True)
    for n in (1, 2, 3):
        counter.tell(n)
    print(f"client: count is {await counter.ask('count')}", flush=True)

    # A queued ask, cancelled: withdrawn over there (the counter never handles it).
    async with trio.open_nursery() as nursery:
        nursery.start_soon(counter.ask, ("slow", 0.5))
        await trio.sleep(0.1)
        with trio.move_on_after(0.1):
            await counter.ask(4)
        print("client: a queued ask cancelled", flush=True)
    print(f"client: count is still {await counter.ask('count')}", flush=True)

    replaced = trio.Event()
    supervisor = system.spawn(Supervisor, counter, replaced, name="supervisor")
    async with trio.open_nursery() as nursery:

        async def pending_ask() -> None:
            try:
                await counter.ask(("slow", 60))
            except ta.NodeDown:
                print("client: the pending ask failed with NodeDown", flush=True)

        nursery.start_soon(pending_ask)
        await trio.sleep(0.2)
        print("client: kill worker-0 now", flush=True)
        await replaced.wait()
    fresh = await supervisor.ask("counter")
    print(f"client: the new counter is {fresh.path}", flush=True)
    fresh.tell(10)
    print(f"client: its count is {await fresh.ask('count')}", flush=True)
    with system.dead_letters.subscribe() as letters, trio.fail_after(10):
        counter.tell(99)  # to the dead one: a dead letter here
        letter = await letters.receive()
    print(f"client: told the dead counter {letter.message}: {letter.reason}", flush=True)

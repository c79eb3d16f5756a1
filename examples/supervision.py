"""Supervision, worked: a flaky worker restarted with backoff, a parent escalating.

A ``Fetcher`` fails on every third job (a flaky dependency). Its parent, a
``Pipeline``, spawned it with ``Restart(backoff=...)``: each failure gives a fresh
``Fetcher`` after a growing delay, the failing job's asker gets the exception, and
jobs told meanwhile wait in the mailbox -- none is lost. A second child, ``Auditor``,
is spawned with ``Escalate()``: when it fails, the ``Pipeline`` fails as if its own
handler had raised, and the pipeline's own strategy (``Restart``) restarts it --
stopping both children first and spawning them anew in ``on_start``.

Run it: ``python examples/supervision.py``. The test suite runs it under a
``MockClock`` so that the backoff costs no real time.
"""

from __future__ import annotations

from typing import Any

import trio

import trio_actors as ta


class FlakyDependency(Exception):
    pass


class Fetcher(ta.Actor):
    instances = 0

    def __init__(self) -> None:
        Fetcher.instances += 1
        self.jobs = 0

    def receive(self, job: int) -> str:
        self.jobs += 1
        if job % 3 == 2:
            raise FlakyDependency(f"job {job} hit the flaky dependency")
        return f"job {job} fetched by fetcher #{Fetcher.instances}"


class Auditor(ta.Actor):
    def receive(self, message: Any) -> Any:
        if message == "corrupt":
            raise ValueError("audit found corrupt data")
        return "ok"


class Pipeline(ta.Actor):
    starts = 0

    def on_start(self) -> None:
        Pipeline.starts += 1
        backoff = ta.Backoff(min_delay=0.1, max_delay=2.0, factor=2.0, jitter=0.0)
        self.fetcher = self.spawn(
            Fetcher,
            name="fetcher",
            supervision=ta.Restart(max_restarts=5, within=10.0, backoff=backoff),
        )
        self.auditor = self.spawn(Auditor, name="auditor", supervision=ta.Escalate())

    async def receive(self, message: Any) -> Any:
        kind, value = message
        if kind == "fetch":
            try:
                return await self.fetcher.ask(value)
            except FlakyDependency as error:
                # The child's failure reaches us as the ask's exception. Handled
                # here, it is not a failure of the pipeline (unhandled, it would be).
                return f"failed: {error}"
        if kind == "audit":
            self.auditor.tell(value)
            return None
        return None


async def main() -> list[str]:
    report: list[str] = []
    async with ta.open_actor_system() as system:
        pipeline = system.spawn(Pipeline, name="pipeline")
        for job in range(6):
            start = trio.current_time()
            result = await pipeline.ask(("fetch", job))
            report.append(f"{result} (waited {trio.current_time() - start:.1f}s)")
        pipeline.tell(("audit", "corrupt"))  # the auditor escalates: the pipeline restarts
        await trio.sleep(0.5)
        report.append(f"pipeline started {Pipeline.starts} times")
        report.append(await pipeline.ask(("fetch", 0)))
    return report


if __name__ == "__main__":
    for line in trio.run(main):
        print(line)

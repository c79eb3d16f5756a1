"""An example workload for ``trio-actors sweep --workload``: a stock-keeping actor.

Try it::

    trio-actors sweep --quick --workload trio_actors.sweeps.example_workload:workload

:func:`workload` follows the factory contract of the sweep (see
:mod:`trio_actors.sweeps._workload`): it returns a new actor and an endless,
seeded stream of messages. The mix is meant to look like an application's rather
than a benchmark's: most messages are cheap updates of a dictionary, a few are
reports that walk all of it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from trio_actors import Actor

SKUS = 500
"""Distinct items in stock."""
REPORT_EVERY = 1_000
"""About one message in this many is a report over the whole stock."""


class Stock(Actor):
    """Keeps quantities per item; answers reports with the total."""

    def __init__(self) -> None:
        self.quantities: dict[int, int] = {}

    def receive(self, message: tuple[Any, ...]) -> int | None:
        match message:
            case ("add", sku, quantity):
                self.quantities[sku] = self.quantities.get(sku, 0) + quantity
            case ("remove", sku, quantity):
                left = self.quantities.get(sku, 0) - quantity
                self.quantities[sku] = max(left, 0)
            case ("report",):
                return sum(self.quantities.values())
            case _:
                raise ValueError(f"unknown message {message!r}")
        return None


def messages(seed: int = 2026) -> Iterator[tuple[Any, ...]]:
    """An endless, reproducible stream of stock messages."""
    rng = random.Random(seed)
    while True:
        roll = rng.randrange(REPORT_EVERY)
        if roll == 0:
            yield ("report",)
        elif roll % 3 == 0:
            yield ("remove", rng.randrange(SKUS), rng.randrange(1, 5))
        else:
            yield ("add", rng.randrange(SKUS), rng.randrange(1, 10))


def workload() -> tuple[Stock, Iterator[tuple[Any, ...]]]:
    """The factory ``--workload`` calls: a new actor and its messages."""
    return Stock(), messages()

"""``open_actor_system(seed=...)``: the runtime's random source (T30 is the contract)."""

from __future__ import annotations

from typing import Any

import pytest

from trio_actors import open_actor_system


@pytest.mark.parametrize("seed", [1.5, "7", True, b"x"])
async def test_a_seed_that_is_not_an_int_is_refused(seed: Any) -> None:
    with pytest.raises(TypeError, match=r"seed must be an int or None, got "):
        async with open_actor_system(seed=seed):
            pytest.fail("opened")  # pragma: no cover


async def test_the_seed_given_is_the_systems_and_none_draws_a_fresh_one() -> None:
    async with open_actor_system(seed=-12) as system:
        assert system.seed == -12
    drawn = set()
    for _ in range(3):
        async with open_actor_system() as system:
            assert isinstance(system.seed, int)
            drawn.add(system.seed)
    assert len(drawn) == 3  # 64 random bits each: a repeat would be a broken draw

"""Which kernel runs -- pure Python or compiled with mypyc -- is said, never half.

The same suite runs on both builds (``.ci/run`` installs the compiled wheel in a
venv of its own and runs it there); these check the flag and what depends on it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import trio_actors as ta
from trio_actors._core._compiled import COMPILED_MODULES, compiled_modules
from trio_actors._core._debug import enable_serving_checks


def test_the_flag_says_which_build_runs_and_no_build_is_half_compiled() -> None:
    found = compiled_modules()
    assert found in ([], list(COMPILED_MODULES))
    assert ta.compiled is bool(found)


def test_the_contract_suite_says_which_kernel_it_ran() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_actors", "contracts", "--only", "T1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kernel = "compiled (mypyc)" if ta.compiled else "pure Python"
    assert f"kernel: {kernel}" in done.stdout.splitlines()[0]


@pytest.mark.skipif(not ta.compiled, reason="the compiled kernel's refusal: runs on that build")
def test_debug_mode_on_the_compiled_kernel_says_it_needs_the_pure_build() -> None:
    with pytest.raises(RuntimeError, match=r"debug mode .* needs the pure-Python build"):
        enable_serving_checks()

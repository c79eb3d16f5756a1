"""Which kernel runs -- pure Python or compiled with mypyc -- is said, never half.

The same suite runs on both builds (``.ci/run`` installs the compiled wheel in a
venv of its own and runs it there); these check the flag and what depends on it.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trio_actors as ta
from helpers import Echo
from trio_actors._core import _cell
from trio_actors._core._compiled import COMPILED_MODULES, compiled_modules
from trio_actors._core._debug import enable_serving_checks
from trio_actors.actors import _system


def test_the_flag_says_which_build_runs_and_no_build_is_half_compiled() -> None:
    found = compiled_modules()
    assert found in ([], list(COMPILED_MODULES))
    assert ta.compiled is bool(found)


async def test_spawn_makes_refs_without_their_constructor_only_on_the_pure_build() -> None:
    # (pure: object.__new__ and a store, where the constructor is an interpreted
    # __init__; compiled: the constructor, which is C -- and the only way)
    assert _system._REF_BY_STORE is not ta.compiled
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        assert type(ref) is ta.ActorRef
        assert await ref.ask("made") == "made"
        assert ref.path.endswith("/Echo-1")
        assert ref != system.spawn(Echo)


def test_the_cell_binds_the_functions_its_methods_only_call() -> None:
    # (on both builds: a compiled class that interpreted classes extend is mutable)
    assert _cell.FUNCTIONS_BOUND
    for name, function in _cell.CALLS_THROUGH:
        assert getattr(_cell.ActorCell, name) is function, name


def test_each_method_bound_so_only_passes_its_arguments_to_its_function() -> None:
    # What the compiled build runs: the method, whose body is one call of the
    # function with the method's own parameters, in order (so binding the function
    # in its place changes nothing but a frame).
    # (the .py beside the module: a compiled wheel ships it beside the extension)
    source = (Path(_cell.__file__).parent / "_cell.py").read_text(encoding="utf-8")
    methods = {
        node.name: node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    for name, function in _cell.CALLS_THROUGH:
        method = methods[name]
        (statement,) = method.body
        call = statement.value  # type: ignore[attr-defined]
        if isinstance(call, ast.Await):
            call = call.value
        assert isinstance(call, ast.Call), name
        assert ast.unparse(call.func) == f"{function.__module__.rpartition('.')[2]}.{name}"
        parameters = [a.arg for a in method.args.args]
        assert [ast.unparse(a) for a in call.args] == parameters, name
        keywords = [a.arg for a in method.args.kwonlyargs]
        assert [(k.arg, ast.unparse(k.value)) for k in call.keywords] == [
            (k, k) for k in keywords
        ], name
        assert list(inspect.signature(function).parameters)[1:] == parameters[1:] + keywords


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
def test_debug_mode_asked_for_once_the_kernel_runs_compiled_says_how_to_get_it() -> None:
    with pytest.raises(RuntimeError, match=r"Set TRIO_ACTORS_DEBUG=1 before trio_actors is"):
        enable_serving_checks()


_DEBUG_PROGRAM = """
import sys
from importlib.machinery import EXTENSION_SUFFIXES

import trio
import trio.testing

import trio_actors as ta
from trio_actors._core import _cell, _debug
from trio_actors._core import _cell
from trio_actors._core._compiled import COMPILED_MODULES

assert not ta.compiled and _debug.enabled()
files = [sys.modules[name].__file__ for name in COMPILED_MODULES]
assert all(file.endswith(".py") for file in files), files
assert not [name for name in sys.modules if name.endswith("__mypyc")]


class Slow(ta.Actor):
    async def receive(self, message):
        await trio.sleep(1)


async def main():
    async with ta.open_actor_system() as system:
        ref = system.spawn(Slow)
        for number in range(3):
            ref.tell(number)  # (a deque: the append fast path is open)
        await trio.sleep(0.5)
        ref.stop_nowait()  # ...and, broken, it stays open while the actor stops
        ref.tell(3)
        await ref.wait_stopped()


_cell.ActorCell.close_tell_paths = lambda self: None
with _debug.collecting_violations() as found:
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
print(found)
"""


def test_debug_mode_runs_the_kernel_from_its_source_on_either_build() -> None:
    # TRIO_ACTORS_DEBUG at import loads the kernel from its source -- on the compiled
    # build from the .py files its wheel ships -- and the checks catch a broken one.
    done = subprocess.run(
        [sys.executable, "-c", _DEBUG_PROGRAM],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TRIO_ACTORS_DEBUG": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "tell paths (fast_tell, activates) were (True, False)" in done.stdout

"""Every function of the runtime is KI-protected by construction (``_interrupts.py``).

Found independently of ``protect_module``: each runtime module is imported and
every function whose code lives in its file -- module functions, methods,
properties, static and class methods, the methods attrs generated for its classes
-- must be marked protected in trio's table. A module that forgets to call
``protect_module`` fails here. The tools built on the public API and the NATS
client are not the runtime's bookkeeping and are not marked (Ctrl-C interrupts them
as any Python code). And a real ``SIGINT`` that arrives while runtime code runs
for an unprotected caller (a user's task calling ``ref.tell``) is delivered at the
next checkpoint, with the runtime's bookkeeping whole.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
from types import FunctionType, ModuleType

import pytest
from trio._core._ki import _CODE_KI_PROTECTION_STATUS_WMAP

import trio_actors as ta
from test_layers import layer_of
from trio_actors._core._kinds import handler_kinds

# The runtime: layers 1-6 of trio_actors/__init__.py (tests/test_layers.py lists
# them); below it the NATS client, above it the tools built on the public API.
RUNTIME_LAYERS = range(1, 7)


def all_modules() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(ta.__path__, "trio_actors.")
        if not info.name.endswith("__main__")
    ]


def is_runtime(name: str) -> bool:
    return layer_of(name.removeprefix("trio_actors.")) in RUNTIME_LAYERS


def functions_defined_in(module: ModuleType, generated: bool = True) -> list[FunctionType]:
    """Every interpreted function whose code is in ``module``'s file, and (if
    ``generated``) the methods attrs generated for the classes that say they are
    the module's."""
    filename = module.__file__
    found: dict[int, FunctionType] = {}

    def consider(candidate: object, generated: bool = False) -> None:
        while isinstance(candidate, FunctionType) and hasattr(candidate, "__wrapped__"):
            candidate = candidate.__wrapped__
        if isinstance(candidate, FunctionType):
            code = candidate.__code__.co_filename
            if code == filename or (generated and code.startswith("<attrs generated")):
                found[id(candidate)] = candidate

    for value in vars(module).values():
        if inspect.isclass(value):  # (another module's class: other files, skipped)
            ours = generated and value.__module__ == module.__name__
            for member in vars(value).values():
                if isinstance(member, property):
                    for part in (member.fget, member.fset, member.fdel):
                        consider(part)
                elif isinstance(member, staticmethod | classmethod):
                    consider(member.__func__)
                else:
                    consider(member, generated=ours)
        else:
            consider(value)
    return list(found.values())


def protection_of(function: FunctionType) -> bool | None:
    try:
        return _CODE_KI_PROTECTION_STATUS_WMAP[function.__code__]
    except KeyError:
        return None


def test_every_function_of_the_runtime_is_ki_protected() -> None:
    unprotected = []
    counted = 0
    for name in all_modules():
        if not is_runtime(name):
            continue
        module = importlib.import_module(name)
        for function in functions_defined_in(module):
            counted += 1
            if protection_of(function) is not True:
                unprotected.append(f"{name}: {function.__qualname__}")
    assert counted > 1_000  # (the walk finds the runtime's functions at all)
    assert not unprotected, "not KI-protected (protect_module(globals()) missing?):\n" + (
        "\n".join(unprotected)
    )


def test_the_tools_on_the_public_api_are_left_interruptible() -> None:
    marked = []
    for name in all_modules():
        if is_runtime(name):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - (an extra's module)
            continue
        marked += [
            f"{name}: {f.__qualname__}"
            for f in functions_defined_in(module, generated=False)
            if protection_of(f) is True and not _is_trio_decorated(f)
        ]
    assert not marked


def _is_trio_decorated(function: FunctionType) -> bool:
    """The tools mark a few functions themselves (a load task that must count
    exactly): those say so in their source."""
    try:
        source = inspect.getsource(function)
    except OSError:  # pragma: no cover
        return False
    return "enable_ki_protection" in source


def test_an_actor_class_of_the_runtime_keeps_its_handlers_protected() -> None:
    """``_kinds`` unprotects the user's handlers when it first checks their class,
    never the runtime's own (a pool's, say)."""
    checked = 0
    for name in all_modules():
        if not is_runtime(name):
            continue
        for value in vars(importlib.import_module(name)).values():
            if (
                inspect.isclass(value)
                and issubclass(value, ta.Actor)
                and value.__module__ == name
                and isinstance(value.__dict__.get("receive"), FunctionType)
            ):
                handler_kinds(value)
                assert protection_of(value.__dict__["receive"]) is True, value
                checked += 1
    assert checked


# Run in a fresh interpreter: the suite's debug checks (tests/conftest.py) wrap
# ActorRef.tell in a function of their own, which would hide the path under test.
SIGINT_DURING_A_DEAD_LETTER = """
import json, signal, trio
import trio_actors as ta

class Recorder(ta.Actor):
    def receive(self, message):
        pass

interrupted = []

class Interrupting(dict):
    # The dead letters' counts by reason: reading one (inside DeadLetters.record,
    # between its updates) raises the signal. trio's handler runs at once, here:
    # whether it raises depends on the frames out from this one -- record's, then
    # (in the pure build) the tell's, or (compiled) straight the user's task.
    def __getitem__(self, reason):
        signal.raise_signal(signal.SIGINT)
        interrupted.append(trio.lowlevel.currently_ki_protected())
        return super().__getitem__(reason)

seen = {}

async def tell_late(ref):
    # A task of the user's: not KI-protected (trio's default for a task that
    # start_soon starts).
    ref.tell("late")
    seen["told"] = True
    await trio.sleep(1)  # (a checkpoint: a deferred interrupt arrives by here)

async def main():
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder)
        await ref.stop()
        system.dead_letters.by_reason = Interrupting(system.dead_letters.by_reason)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tell_late, ref)
        finally:
            seen["actor"] = ref.statistics().dead_letters.stopped
            seen["system"] = dict.__getitem__(system.dead_letters.by_reason, "stopped")

try:
    trio.run(main)
except BaseException as error:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    seen["raised"] = type(error).__name__
print(json.dumps({"interrupted": interrupted, **seen}))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="raises SIGINT")
def test_a_sigint_inside_the_runtime_for_an_unprotected_caller_waits_for_a_checkpoint() -> None:
    """A user's task (unprotected) tells a stopped actor; the SIGINT arrives while
    the dead letter is being recorded (by the system: the actor has counted it).
    Delivered there, the dead letter would be half recorded (the actor's count and
    the system's total, not the system's count by reason); deferred, it surfaces at
    the task's next checkpoint, after the whole tell. On the compiled build too,
    where the frames out from the dead letters' are the user's task's."""
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_DURING_A_DEAD_LETTER],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "TRIO_ACTORS_DEBUG"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "interrupted": [True],
        "told": True,
        "actor": 1,
        "system": 1,
        "raised": "KeyboardInterrupt",
    }

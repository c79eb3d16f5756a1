"""The build: pure Python, or with the kernel's hot modules compiled by mypyc.

Pure Python unless ``TRIO_ACTORS_COMPILE`` is set (to anything but ``0``) when a
wheel is built: ``TRIO_ACTORS_COMPILE=1 pip install .``. Then the modules listed
in ``trio_actors/_core/_compiled.py`` are compiled (the same source, type-checked
by mypyc first); ``trio_actors.compiled`` says which build runs. An editable
install is never compiled.

Compiling can fail -- mypyc missing, its type check failing, no C compiler, a
compiler error: the build then says so on standard error and makes the
pure-Python wheel, tagged as pure (``py3-none-any``), with no compiled module left
in it.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # (setuptools < 70.1, without the build's isolation: pyproject.toml)
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).parent


def say(message: str) -> None:
    print(f"trio-actors build: {message}", file=sys.stderr, flush=True)


def compiled_modules() -> list[str]:
    """``COMPILED_MODULES`` of ``_core/_compiled.py``, read without importing it."""
    source = (HERE / "src/trio_actors/_core/_compiled.py").read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "COMPILED_MODULES"
            for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise RuntimeError("src/trio_actors/_core/_compiled.py has no COMPILED_MODULES")


def ext_modules() -> list[Any]:
    """The compiled modules' extensions, or none (pure Python)."""
    if os.environ.get("TRIO_ACTORS_COMPILE", "") in ("", "0"):
        return []
    if "editable_wheel" in sys.argv or "develop" in sys.argv:
        say("an editable install is never compiled: pure Python")
        return []
    if not {"bdist_wheel", "build_ext", "build"} & set(sys.argv):
        return []  # (the metadata steps, before the build's requirements are in)
    try:
        from mypyc.build import mypycify
    except ImportError:
        say("TRIO_ACTORS_COMPILE is set but mypyc is missing (pip install mypy): pure Python")
        return []
    paths = ["src/" + name.replace(".", "/") + ".py" for name in compiled_modules()]
    say(f"compiling {len(paths)} modules of the kernel with mypyc")
    try:
        # Only the compiled modules' own errors stop the build: what they import is
        # analysed silently (the build's environment has trio and attrs, not the
        # extras' msgspec or OpenTelemetry, which only other modules import).
        return list(mypycify(["--follow-imports=silent", *paths], opt_level="3"))
    except (Exception, SystemExit) as error:  # (mypyc's type check exits)
        say(f"mypyc could not compile the kernel ({error!r}): pure Python")
        return []


class BuildExtOrPure(build_ext):
    """Compile the extensions; if that fails, build none (and leave none built)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # (no compiler, a compiler error, a link error)
            say(f"compiling the kernel failed ({error}): building the pure-Python package")
            for extension in self.extensions:
                built = Path(self.get_ext_fullpath(extension.name))
                built.unlink(missing_ok=True)
            self.distribution.ext_modules = []
            self.extensions = []


class WheelTaggedByContent(bdist_wheel):
    """Lay out and tag the wheel by what it holds, known only after the build: a
    compile that failed leaves a pure wheel, which must not say it is
    platform-specific (bdist_wheel decides before building)."""

    def run(self) -> None:
        self.run_command("build")  # (build_ext may have fallen back to pure Python)
        self.root_is_pure = not self.distribution.has_ext_modules()
        super().run()


setup(
    ext_modules=ext_modules(),
    cmdclass={"build_ext": BuildExtOrPure, "bdist_wheel": WheelTaggedByContent},
)

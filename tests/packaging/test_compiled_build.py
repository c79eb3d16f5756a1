"""The optional compiled build (``setup.py``): asked for where compiling fails, it
makes the pure-Python wheel, tagged as pure, with nothing compiled in it, and says
why -- never a wheel tagged for a platform that holds no compiled code, nor one
with some of the kernel compiled and the rest not.

(The compiled build itself is built and its suite run by ``.ci/run``; this checks
the fallback, which a machine with a working compiler never takes by itself.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trio_actors._core._compiled import COMPILED_MODULES

ROOT = Path(__file__).parents[2]

# The builds need the source tree (not there where .ci/run tests an installed wheel).
pytestmark = pytest.mark.skipif(
    not (ROOT / "setup.py").is_file(), reason="builds from the source tree, absent here"
)


def build_wheel(tmp_path: Path, **environment: str) -> tuple[Path, str]:
    """``pip wheel`` of the project (isolated, as a user's install), with
    ``environment`` added; the wheel and what the build said.

    It builds a copy of the sources: pip builds a local project in place, and
    setuptools would take the extension a developer's compiled build left in
    ``build/`` as up to date."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("src", "build_support", "setup.py", "pyproject.toml", "README.md"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, tree / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = tmp_path.glob("trio_actors-*.whl")
    return wheel, done.stdout + done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="CC=false is a POSIX command")
def test_a_compiler_that_fails_gives_the_pure_wheel_tagged_as_pure(tmp_path: Path) -> None:
    wheel, said = build_wheel(tmp_path, TRIO_ACTORS_COMPILE="1", CC="false")
    compiling = f"compiling {len(COMPILED_MODULES)} modules of the kernel with mypyc"
    assert compiling in said  # (it did try)
    assert "compiling the kernel failed" in said
    assert "building the pure-Python package" in said
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = archive.read(next(n for n in names if n.endswith(".dist-info/WHEEL")))
    assert not [n for n in names if n.endswith((".so", ".pyd"))], names
    assert b"Root-Is-Purelib: true" in wheel_file
    assert "trio_actors/_core/_dispatcher.py" in names


def test_without_the_variable_nothing_is_compiled_nor_installed_for_it(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "TRIO_ACTORS_COMPILE"}
    wheel, said = build_wheel(tmp_path, **environment)
    assert "mypyc" not in said
    assert "mypy" not in said.split("Installing build dependencies")[-1].split("\n")[0]
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name

"""The build backend: setuptools', and mypyc in the build's requirements when asked.

``TRIO_ACTORS_COMPILE=1 pip install .`` (or ``pip wheel .``) builds the wheel with the
kernel's hot modules compiled (``setup.py``); for that the isolated build
environment needs mypy (mypyc is part of it) and what the compiled modules import,
which mypyc type-checks: trio and attrs. Without the variable nothing more is
installed, and the package is pure Python -- also for an editable install, which
is never compiled.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook not overridden below

# The mypy that built and measured the compiled kernel (docs/performance.rst).
COMPILE_REQUIRES = ["mypy==2.4.1", "trio>=0.25", "attrs>=23.1"]


def compiling() -> bool:
    """Whether this build is asked to compile (``TRIO_ACTORS_COMPILE`` set, not 0)."""
    return os.environ.get("TRIO_ACTORS_COMPILE", "") not in ("", "0")


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    requires: list[str] = _setuptools.get_requires_for_build_wheel(config_settings)
    return requires + COMPILE_REQUIRES if compiling() else requires

"""The layers stated in ``trio_actors/__init__.py`` are kept: every import, read
from the source, goes to the same layer or a lower one, and the contracts, the
sweep tool and the testing kit use only the package's public names."""

from __future__ import annotations

import ast
from pathlib import Path

import trio_actors

PACKAGE = Path(trio_actors.__file__).parent

# Bottom up, as in trio_actors/__init__.py (numbered from 0). A prefix names every
# module under it.
LAYERS: list[list[str]] = [
    ["nats"],  # the NATS client: nothing of the runtime
    ["_errors", "_policy", "_statistics", "_cluster", "_supervision"],  # values only
    ["_core"],  # the kernel: its modules know each other, nothing above them
    ["actors", "lifecycle", "mailbox"],  # the system, pools; public faces of the kernel
    ["remote"],  # nodes on NATS: imported only with open_actor_system(cluster=...)
    ["contracts", "sweeps", "testing", "__main__", ""],  # "": trio_actors itself
]
# The one import upwards, and why: open_actor_system(cluster=...) is where a system
# becomes a node, and it imports the remote layer there, inside the function, only
# when asked (without a cluster, nothing of it -- nor msgspec -- is imported).
LAZY_UPWARDS = {("actors._system", "remote")}
PUBLIC_ONLY = ("contracts", "sweeps", "testing")
# Packages whose own public face (their __init__, no private module) the layer above
# may use too: the NATS client and the remote layer are documented, public packages.
PUBLIC_FACES = (*PUBLIC_ONLY, "nats", "remote")


def layer_of(module: str) -> int:
    """The layer of a module (dotted, relative to trio_actors): its longest prefix."""
    best, found = -1, -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix and module.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, found = len(prefix), number
    if found < 0:
        raise AssertionError(f"module {module!r} is in no layer: add it to LAYERS")
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            exempt.update(id(inner) for inner in ast.walk(node))
    return exempt


def imports_of(path: Path, root: Path) -> list[tuple[str, list[str], int]]:
    """The package modules ``path`` imports at run time: (module, names, line)."""
    relative = path.relative_to(root).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        package = parts
    else:
        package = parts[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.append((target, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trio_actors"):
            target = (node.module or "").removeprefix("trio_actors").removeprefix(".")
            found.append((target, [alias.name for alias in node.names], node.lineno))
    return found


def violations(root: Path, public: set[str]) -> list[str]:
    """Every import under ``root`` that breaks the layers, as readable lines."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = [part for part in relative.parts if part != "__init__"]
        module = ".".join(parts)
        own = layer_of(module)
        for target, names, line in imports_of(path, root):
            where = f"{path.relative_to(root)}:{line}"
            if module.startswith(PUBLIC_ONLY) and target.split(".")[0] != module.split(".")[0]:
                # trio_actors itself (public names only), or a public package through
                # its own public face (no private module).
                face = target.startswith(PUBLIC_FACES) and "._" not in f".{target}"
                private = [name for name in names if not target and name not in public]
                if (target and not face) or private:
                    problems.append(
                        f"{where}: {module} imports {names} from {target or 'trio_actors'}; "
                        "it may use only the public names, from trio_actors itself"
                    )
                continue
            if target and layer_of(target) > own and (module, target) not in LAZY_UPWARDS:
                problems.append(
                    f"{where}: {module} (layer {own}) imports {target} (layer {layer_of(target)})"
                )
    return problems


def test_every_import_keeps_the_layers() -> None:
    assert violations(PACKAGE, set(trio_actors.__all__) | {"__version__"}) == []


def test_the_layer_check_finds_an_import_upwards_and_a_private_name(tmp_path: Path) -> None:
    # The check itself can fail: a small package tree with both kinds of violation.
    for name in ("_core", "actors", "contracts"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "_core" / "_state.py").write_text("from ..actors._system import D\n")
    (tmp_path / "actors" / "_system.py").write_text("from .._core._state import S\n")
    (tmp_path / "contracts" / "_c.py").write_text(
        "from .. import Actor\nfrom ..actors._cell import ActorCell\nfrom .. import secret\n"
    )
    found = "\n".join(violations(tmp_path, {"Actor"}))
    assert found.count("\n") == 2, found
    assert "_core._state (layer 2) imports actors._system (layer 3)" in found
    assert "imports ['ActorCell'] from actors._cell" in found
    assert "imports ['secret'] from trio_actors" in found

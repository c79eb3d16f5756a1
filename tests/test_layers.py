"""The layers stated in ``trio_actors/__init__.py`` are kept: every import, read
from the source -- at the top of a module, inside a function, or under
``TYPE_CHECKING`` alike -- goes to the same layer or a lower one; modules import
each other in a circle only inside one package; and the contracts, the sweep tool
and the testing kit use only the package's public names."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import trio_actors

PACKAGE = Path(trio_actors.__file__).parent

# Bottom up, as in trio_actors/__init__.py (numbered from 0). A prefix names every
# module under it.
LAYERS: list[list[str]] = [
    ["nats"],  # the NATS client: nothing of the runtime
    # values only
    [
        "_errors",
        "_policy",
        "_statistics",
        "_cluster",
        "_cluster_config",
        "_supervision",
        "_membership",
        "_placement",
        "_stream",
        "_monitoring",  # the statistics service's subjects and documents
        "_interrupts",  # every runtime function KI-protected
    ],
    ["_core"],  # the kernel: its modules know each other, nothing above them
    ["actors", "lifecycle", "mailbox"],  # the system, pools; public faces of the kernel
    ["remote"],  # nodes on NATS
    ["observe"],  # traces and metrics (OpenTelemetry): the observer the kernel calls
    ["_opener"],  # open_actor_system: a system, and with cluster= a node
    ["contracts", "sweeps", "testing", "top", "__main__", ""],  # "": trio_actors itself
]
PUBLIC_ONLY = ("contracts", "sweeps", "testing")
# Packages whose own public face (their __init__, no private module) the layer above
# may use too: the NATS client and the remote layer are documented, public packages,
# and so is observe (its options); top's face is its command (run by the CLI, in sweeps).
PUBLIC_FACES = (*PUBLIC_ONLY, "nats", "remote", "observe", "top")


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


def module_name(path: Path, root: Path) -> str:
    """``path``'s module, dotted and relative to the package (``""``: the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(part for part in parts if part != "__init__")


def imports_of(path: Path, root: Path) -> list[tuple[str, list[str], int]]:
    """Every package module ``path`` imports, wherever the import statement is:
    (module, names, line)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    package = parts[:-1]  # (the package of a module, or the package an __init__ is)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.append((target, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trio_actors"):
            target = (node.module or "").removeprefix("trio_actors").removeprefix(".")
            found.append((target, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "trio_actors" or alias.name.startswith("trio_actors."):
                    target = alias.name.removeprefix("trio_actors").removeprefix(".")
                    found.append((target, [], node.lineno))
    return found


def _modules(root: Path) -> set[str]:
    return {module_name(path, root) for path in root.rglob("*.py")}


def _edge_targets(target: str, names: list[str], modules: set[str]) -> list[str]:
    """The modules an import reaches: ``from pkg import _mod`` reaches ``pkg._mod``
    (and ``pkg`` itself, whose ``__init__`` runs)."""
    reached = [target]
    for name in names:
        sub = f"{target}.{name}" if target else name
        if sub in modules:
            reached.append(sub)
    return reached


def violations(root: Path, public: set[str]) -> list[str]:
    """Every import under ``root`` that breaks the layers, as readable lines."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
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
            if target and layer_of(target) > own:
                problems.append(
                    f"{where}: {module} (layer {own}) imports {target} (layer {layer_of(target)})"
                )
    return problems


def _package_of(module: str) -> str:
    """The package a module belongs to: ``_core._cell`` -> ``_core``; a top-level
    module (``_opener``) is its own."""
    return module.split(".")[0]


def circles_across_packages(root: Path) -> list[list[str]]:
    """The circles of imports (strongly connected modules) that span more than one
    package, each sorted."""
    modules = _modules(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for path in root.rglob("*.py"):
        module = module_name(path, root)
        for target, names, _line in imports_of(path, root):
            for reached in _edge_targets(target, names, modules):
                if reached in modules and reached != module and reached != "":
                    graph[module].add(reached)
    # Tarjan's algorithm, iteratively (the graph has ~170 nodes).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len({_package_of(member) for member in component}) > 1:
                    found.append(sorted(component))
    return found


def test_every_import_keeps_the_layers() -> None:
    assert violations(PACKAGE, set(trio_actors.__all__) | {"__version__"}) == []


def test_modules_import_each_other_in_a_circle_only_inside_one_package() -> None:
    assert circles_across_packages(PACKAGE) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent != Path("."):
                (root / parent / "__init__.py").touch()
        path.write_text(text)
    return root


def test_the_layer_check_finds_an_import_upwards_and_a_private_name(tmp_path: Path) -> None:
    # The check itself can fail: a small package tree with both kinds of violation.
    root = _tree(
        tmp_path,
        {
            "_core/_state.py": "from ..actors._system import D\n",
            "actors/_system.py": "from .._core._state import S\n",
            "contracts/_c.py": (
                "from .. import Actor\nfrom .._core._cell import ActorCell\nfrom .. import secret\n"
            ),
        },
    )
    found = "\n".join(violations(root, {"Actor"}))
    assert found.count("\n") == 2, found
    assert "_core._state (layer 2) imports actors._system (layer 3)" in found
    assert "imports ['ActorCell'] from _core._cell" in found
    assert "imports ['secret'] from trio_actors" in found


def test_the_layer_check_counts_imports_for_annotations_and_inside_functions(
    tmp_path: Path,
) -> None:
    # An annotation-only back edge (under TYPE_CHECKING) and a lazy one (inside a
    # function) are imports upwards like any other.
    root = _tree(
        tmp_path,
        {
            "_core/_cell.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..actors._system import ActorSystem\n"
            ),
            "actors/_system.py": "def open_node():\n    from ..remote import open_node\n",
            "remote/_node.py": "import trio_actors._opener\n",
        },
    )
    found = violations(root, set())
    assert found == [
        "_core/_cell.py:3: _core._cell (layer 2) imports actors._system (layer 3)",
        "actors/_system.py:2: actors._system (layer 3) imports remote (layer 4)",
        "remote/_node.py:1: remote._node (layer 4) imports _opener (layer 6)",
    ], found


def test_the_circle_check_finds_a_circle_across_packages_and_allows_one_inside(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "_core/_cell.py": "from . import _stopping\n",
            "_core/_stopping.py": "from ._cell import ActorCell\n",  # inside: allowed
            "actors/_system.py": "from ..lifecycle import _faces\n",
            "lifecycle/_faces.py": "from ..actors._system import ActorSystem\n",
        },
    )
    assert circles_across_packages(root) == [["actors._system", "lifecycle._faces"]]

"""Sphinx configuration for trio-actors.

Build (warnings are errors, as in CI)::

    sphinx-build -W --keep-going -n -b html docs docs/_build/html

The package is imported from the installed (editable) distribution, not from a path
added here: the docs describe what users get.

Two tables are generated from the code at build time, by the directives defined at
the bottom of this file, so that they cannot drift from it: the lifecycle transition
table (from ``trio_actors.lifecycle.TRANSITIONS``) and the contract table (from
``trio_actors.contracts.REGISTRY``, once that module exists).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import opentelemetry.propagators.textmap
import opentelemetry.trace
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

import trio_actors
from trio_actors import _opener, observe
from trio_actors.observe import _options

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent

# -- Project -------------------------------------------------------------------------

project = "trio-actors"
author = "The trio-actors authors"
copyright = "the trio-actors authors"
release = trio_actors.__version__
version = ".".join(release.split(".")[:2])

# -- General -------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinxcontrib_trio",
]

exclude_patterns = ["_build", "_inventories", "_generated"]
nitpicky = True
# ``text`` in prose stays title text; cross-references are always explicit roles.
default_role = None

# -- autodoc and napoleon ------------------------------------------------------------

# Public classes are re-exported with ``__module__`` rewritten to ``trio_actors``, so
# autodoc cannot read their source order; pages that care list members explicitly.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" sections become :ivar: fields of their class rather than separate
# attribute entries, so they never collide with members autodoc documents itself.
napoleon_use_ivar = True

# -- intersphinx ---------------------------------------------------------------------
#
# The build machine has no network access. Sphinx reports an inventory it cannot
# fetch as a warning, and -W turns that into a failed build, so an unconditional
# mapping to the online inventories would make every offline build fail. The robust
# choice: a project is mapped only when its inventory is actually available --
#
# * a local copy in docs/_inventories/<name>.inv (always used when present), or
# * the online inventory, when the build opts in with TRIO_ACTORS_DOCS_INTERSPHINX=1
#   (a CI job with network access).
#
# Links point at the online documentation either way. For each project left
# unmapped, the handful of its names our signatures mention are added to
# nitpick_ignore below; a mapped project adds no ignores, so its references are
# checked for real.

_INTERSPHINX = {
    "python": "https://docs.python.org/3",
    "trio": "https://trio.readthedocs.io/en/stable",
    "attrs": "https://www.attrs.org/en/stable",
}
_ONLINE = os.environ.get("TRIO_ACTORS_DOCS_INTERSPHINX") == "1"

intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
for _name, _uri in _INTERSPHINX.items():
    _local = HERE / "_inventories" / f"{_name}.inv"
    if _local.is_file():
        intersphinx_mapping[_name] = (_uri, str(_local))
    elif _ONLINE:
        intersphinx_mapping[_name] = (_uri, None)
intersphinx_timeout = 10

# -- nitpicky: names that cannot resolve without the project's inventory ---------------
#
# Builtins and ``typing`` names resolve without any inventory (Sphinx's Python domain
# knows them); these do not. Keep each list to names that really appear in rendered
# signatures.

_UNRESOLVABLE_WITHOUT_INVENTORY: dict[str, list[tuple[str, str]]] = {
    "python": [
        ("py:class", "collections.abc.AsyncIterator"),
        ("py:class", "collections.abc.Awaitable"),
        ("py:class", "collections.abc.Callable"),
        ("py:class", "collections.abc.Iterator"),
        ("py:class", "collections.abc.Mapping"),
        ("py:class", "collections.abc.Sequence"),
        ("py:class", "contextlib.AbstractAsyncContextManager"),
        ("py:class", "random.Random"),
        ("py:class", "ssl.SSLContext"),
        ("py:class", "pathlib.Path"),
        ("py:class", "os.PathLike"),
    ],
    "trio": [
        ("py:exc", "trio.EndOfChannel"),
        ("py:exc", "trio.WouldBlock"),
        ("py:class", "trio.abc.Stream"),
    ],
    "attrs": [],
}

nitpick_ignore: list[tuple[str, str]] = [
    target
    for _name, targets in _UNRESOLVABLE_WITHOUT_INVENTORY.items()
    if _name not in intersphinx_mapping
    for target in targets
]
# A TypeVar in a signature: Sphinx renders it as a class reference it cannot find.
nitpick_ignore.append(("py:class", "trio_actors.testing._virtual.T"))
nitpick_ignore.append(("py:class", "trio_actors._stream.T"))  # (Stream[T], a base)
# The type of the NEED_DATA sentinel (documented as the value itself, as h11 does).
nitpick_ignore.append(("py:class", "trio_actors.nats._protocol._NeedData"))
# pathlib.Path as attrs writes it in Cluster's signature (unqualified).
nitpick_ignore.append(("py:class", "Path"))
# Cluster(bus=...)'s type: the protocol that MemoryBus (documented) implements; the
# value sits below the remote layer and cannot name MemoryBus.
nitpick_ignore += [("py:class", "Bus"), ("py:class", "trio_actors._cluster.Bus")]

# -- Names imported only for type checking ---------------------------------------------
#
# ``open_actor_system(tracing=..., metrics=...)`` and ``trio_actors.observe.Tracing``
# name OpenTelemetry's TracerProvider and TextMapPropagator (and the observe layer's
# options), imported under TYPE_CHECKING only: the runtime imports OpenTelemetry for
# an observed system alone. autodoc evaluates
# the signatures, so the modules are given those names here (the docs group installs
# the API); without an inventory of OpenTelemetry's docs, the references are ignored.

for _module in (_opener, _options, observe):
    _module.TracerProvider = opentelemetry.trace.TracerProvider  # type: ignore[attr-defined]
    _module.TextMapPropagator = opentelemetry.propagators.textmap.TextMapPropagator  # type: ignore[attr-defined]
_opener.Tracing = observe.Tracing  # type: ignore[attr-defined]
_opener.Metrics = observe.Metrics  # type: ignore[attr-defined]
nitpick_ignore += [
    ("py:class", "opentelemetry.trace.TracerProvider"),
    ("py:class", "opentelemetry.propagators.textmap.TextMapPropagator"),
    # (as napoleon writes the types of Tracing's attributes: their annotations)
    ("py:class", "TracerProvider"),
    ("py:class", "TextMapPropagator"),
]

# -- HTML ----------------------------------------------------------------------------

html_theme = "alabaster"
html_theme_options = {
    "description": "Actors for trio",
    "fixed_sidebar": True,
}
html_static_path: list[str] = []


# -- Docstrings of re-exported data ---------------------------------------------------
#
# Classes and functions carry their docstrings with them when a façade re-exports
# them; a module-level int or dict cannot. autodoc reads attribute docstrings from the
# source of the module it was told (``trio_actors/__init__.py`` for
# ``trio_actors.DEFAULT_BATCH``), finds none there, and falls back to the docstring of
# the value's type -- ``int`` or ``dict``. So for data documented under a package, take
# the attribute docstring from the module of the package that defines it; if there is none, say
# so (an error under -W) rather than show the type's docstring.


def _attribute_docstring(modname: str, attr: str) -> list[str] | None:
    try:
        analyzer = ModuleAnalyzer.for_module(modname)
    except PycodeError:
        return None
    doc = analyzer.find_attr_docs().get(("", attr))
    return list(doc) if doc else None


def _docstring_of_reexported_data(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what != "data":
        return
    modname, _, attr = name.rpartition(".")
    if _attribute_docstring(modname, attr) is not None:
        return
    missing = object()
    package = modname.partition(".")[0]  # a public face re-exports from the kernel too
    for candidate in sorted(sys.modules):
        if not candidate.startswith(package + "."):
            continue
        if getattr(sys.modules[candidate], attr, missing) is not obj:
            continue
        doc = _attribute_docstring(candidate, attr)
        if doc is not None:
            lines[:] = doc
            return
    logger.warning("%s has no attribute docstring where it is defined", name)
    lines[:] = []


# -- Generated tables ----------------------------------------------------------------


def _note_module_dependency(directive: SphinxDirective, module: Any) -> None:
    """Re-read the page when ``module``'s source changes (incremental builds)."""
    try:
        source = inspect.getsourcefile(module)
    except TypeError:
        return
    if source:
        directive.env.note_dependency(source)


def _list_table(header: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    """reST lines of a ``list-table`` (cells are reST source, one line each)."""
    lines = [".. list-table::", "   :header-rows: 1"]
    lines += [f"   :widths: {' '.join(map(str, widths))}", ""]
    for row in [header, *rows]:
        first, *rest = row
        lines.append(f"   * - {first}")
        lines += [f"     - {cell}" for cell in rest]
    return lines


class LifecycleTransitions(SphinxDirective):
    """``.. lifecycle-transitions::`` -- the table ``TRANSITIONS``, one row each.

    Rows follow the order of the states and events in their enums, so the table reads
    from birth to death.
    """

    has_content = False

    def run(self) -> list[nodes.Node]:
        from trio_actors import lifecycle

        _note_module_dependency(self, inspect.getmodule(lifecycle.ActorState))
        states = list(lifecycle.ActorState)
        events = list(lifecycle.LifecycleEvent)
        from trio_actors._core._state import NO_OPS

        table = {**lifecycle.TRANSITIONS, **dict.fromkeys(NO_OPS)}
        keys = sorted(table, key=lambda k: (states.index(k[0]), events.index(k[1])))

        def state(s: Any) -> str:
            return f":py:attr:`~trio_actors.lifecycle.ActorState.{s.name}`"

        def event(e: Any) -> str:
            return f":py:attr:`~trio_actors.lifecycle.LifecycleEvent.{e.name}`"

        def target(s: Any, e: Any) -> str:
            new = table[s, e]
            return "unchanged (a declared no-op)" if new is None else state(new)

        rows = [[state(s), event(e), target(s, e)] for s, e in keys]
        lines = _list_table(["state", "event", "new state"], rows, [30, 30, 30])
        container = nodes.container()
        source, _line = self.get_source_info()
        self.state.nested_parse(StringList(lines, source=source), 0, container)
        return list(container.children)


class ServingTransitions(SphinxDirective):
    """``.. serving-transitions::`` -- the table ``SERVING_TRANSITIONS``, one row each,
    in the order of the ``Serving`` members, with why each hand-over happens."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from trio_actors import lifecycle

        _note_module_dependency(self, inspect.getmodule(lifecycle.Serving))
        order = list(lifecycle.Serving)
        table = lifecycle.SERVING_TRANSITIONS
        keys = sorted(table, key=lambda k: (order.index(k[0]), order.index(k[1])))

        def server(s: Any) -> str:
            return f":py:attr:`~trio_actors.lifecycle.Serving.{s.name}`"

        rows = [[server(a), server(b), table[a, b]] for a, b in keys]
        lines = _list_table(["served by", "handed to", "when"], rows, [20, 20, 60])
        container = nodes.container()
        source, _line = self.get_source_info()
        self.state.nested_parse(StringList(lines, source=source), 0, container)
        return list(container.children)


class LifecycleStates(SphinxDirective):
    """``.. lifecycle-states::`` -- what each ``ActorState`` allows, from its members."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from trio_actors import lifecycle

        _note_module_dependency(self, inspect.getmodule(lifecycle.ActorState))

        def mark(value: bool) -> str:
            return "yes" if value else "--"

        rows = [
            [
                f":py:attr:`~trio_actors.lifecycle.ActorState.{s.name}`",
                mark(s.accepts),
                mark(s.serves),
                mark(s.may_spawn),
                mark(s.may_start_timers),
            ]
            for s in lifecycle.ActorState
        ]
        header = ["state", "accepts messages", "serves its queue", "may spawn", "may start timers"]
        lines = _list_table(header, rows, [28, 18, 18, 18, 18])
        container = nodes.container()
        source, _line = self.get_source_info()
        self.state.nested_parse(StringList(lines, source=source), 0, container)
        return list(container.children)


class ContractTable(SphinxDirective):
    """``.. contract-table::`` -- the contracts in ``trio_actors.contracts.REGISTRY``.

    ``REGISTRY`` maps an id (``"T1"`` ...) to an object with ``title`` and
    ``description``. While the module does not exist yet, or has no ``REGISTRY``, the
    directive's content (a short note) is shown instead. Titles and descriptions are
    not parsed as reST, so no markup in them can break the build: text between code
    marks (``x`` or `x`) becomes a literal, the rest stays plain text. An entry that
    lacks either attribute is a warning (an error under -W), not a silent gap.
    """

    has_content = True
    option_spec: ClassVar[dict[str, Callable[[str], Any]]] = {"module": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        module_name = self.options.get("module", "trio_actors.contracts")
        registry = self._load_registry(module_name)
        if registry is None:
            container = nodes.container()
            self.state.nested_parse(self.content, self.content_offset, container)
            return list(container.children)
        return [self._table(registry, module_name)]

    def _load_registry(self, module_name: str) -> Any:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name == module_name:
                return None  # not written yet: show the note
            self._import_failed(module_name, error)
            return None
        except Exception as error:
            self._import_failed(module_name, error)
            return None
        _note_module_dependency(self, module)
        registry = getattr(module, "REGISTRY", None)
        if registry is None:
            return None
        if not hasattr(registry, "items"):
            logger.warning(
                "%s.REGISTRY is a %s, not a mapping of id -> contract",
                module_name,
                type(registry).__name__,
                location=self.get_location(),
            )
            return None
        return registry

    def _import_failed(self, module_name: str, error: Exception) -> None:
        # The module exists but does not import: a real bug, so a warning (an error
        # under -W) rather than the quiet note.
        logger.warning(
            "cannot import %s for the contract table: %s: %s",
            module_name,
            type(error).__name__,
            error,
            location=self.get_location(),
        )

    def _table(self, registry: Any, module_name: str) -> nodes.Node:
        def sort_key(item: tuple[Any, Any]) -> tuple[int, str]:
            key = str(item[0])
            number = key[1:] if key[:1] in "Tt" else key
            return (int(number), key) if number.isdigit() else (1 << 30, key)

        table = nodes.table()
        group = nodes.tgroup(cols=3)
        table += group
        for width in (8, 25, 67):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += self._row(["id", "title", "what must hold"])
        body = nodes.tbody()
        group += body
        for key, contract in sorted(registry.items(), key=sort_key):
            missing = [a for a in ("title", "description") if not hasattr(contract, a)]
            if missing:
                logger.warning(
                    "%s.REGISTRY[%r] has no %s",
                    module_name,
                    key,
                    " or ".join(missing),
                    location=self.get_location(),
                )
            title = str(getattr(contract, "title", ""))
            description = " ".join(str(getattr(contract, "description", "")).split())
            body += self._row([str(key), title, description])
        return table

    @staticmethod
    def _row(cells: list[str]) -> nodes.row:
        row = nodes.row()
        for text in cells:
            paragraph = nodes.paragraph()
            # Code marks (``x`` or `x`) become literals; everything else stays text.
            for i, part in enumerate(_CODE_MARK.split(text)):
                if i % 3 == 0:
                    if part:
                        paragraph += nodes.Text(part)
                elif part is not None:
                    paragraph += nodes.literal(part, part)
            entry = nodes.entry()
            entry += paragraph
            row += entry
        return row


_CODE_MARK = re.compile(r"``(.+?)``|`([^`]+)`")


def _draw_lifecycle_diagram(app: Sphinx) -> None:
    # The diagram is drawn from TRANSITIONS on every build (lifecycle_diagram.py), so
    # the picture can never drift from the table in the code.
    sys.path.insert(0, str(HERE))
    try:
        import lifecycle_diagram
    finally:
        sys.path.remove(str(HERE))
    generated = HERE / "_generated"
    lifecycle_diagram.write(generated / "lifecycle.svg", generated / "serving.svg")


def _plot_performance(app: Sphinx) -> None:
    # The plot and the table of docs/performance.rst come from the committed result
    # file on every build, like the lifecycle diagram.
    sys.path.insert(0, str(HERE))
    try:
        import performance_plot
    finally:
        sys.path.remove(str(HERE))
    results_file = performance_plot.RESULTS_OF_RECORD
    performance_plot.write(results_file, HERE / "_generated" / "performance.svg")
    performance_plot.write_table(results_file, HERE / "_generated" / "performance_table.rst")


# A keyword-only parameter whose name starts with ``_`` is private (pytest's
# ``_ispytest`` convention): ``ActorSystem.spawn(..., _parent=)`` is how
# ``Actor.spawn`` names a child's parent. It is left out of documented signatures.
_PRIVATE_PARAMETER = re.compile(r",\s*_[A-Za-z]\w*(?::[^,=()]*)?\s*=\s*[^,()]+(?=[,)])")


def _hide_private_parameters(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: object,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    if signature is None or ", _" not in signature:
        return None
    return _PRIVATE_PARAMETER.sub("", signature), return_annotation


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-signature", _hide_private_parameters)
    app.connect("builder-inited", _draw_lifecycle_diagram)
    app.connect("builder-inited", _plot_performance)
    # Before napoleon (priority 500), so that the replacement is napoleon-processed.
    app.connect("autodoc-process-docstring", _docstring_of_reexported_data, priority=400)
    app.add_directive("lifecycle-transitions", LifecycleTransitions)
    app.add_directive("lifecycle-states", LifecycleStates)
    app.add_directive("serving-transitions", ServingTransitions)
    app.add_directive("contract-table", ContractTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

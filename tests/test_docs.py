"""The documentation's gates: every public name is in the reference, and every
Python example on a page runs."""

import re
from pathlib import Path

import trio_actors
import trio_actors.testing

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.rst"))
DIRECTIVE = re.compile(
    r"^\s*\.\. (?:autoclass|autofunction|autoexception|autodata|automodule|module|"
    r"currentmodule):: ([\w.]+)",
    re.MULTILINE,
)


def documented() -> set[str]:
    """Every name an autodoc directive documents, qualified as the pages resolve it."""
    names = set()
    for page in PAGES:
        module = "trio_actors"
        for line in page.read_text(encoding="utf-8").splitlines():
            found = DIRECTIVE.match(line)
            if not found:
                continue
            target = found.group(1)
            if ".. module::" in line or ".. currentmodule::" in line:
                module = target
            elif "." in target:
                names.add(target)
            else:
                names.add(f"{module}.{target}")
    return names


def test_every_public_name_is_in_the_reference() -> None:
    names = documented()
    missing = [f"trio_actors.{n}" for n in trio_actors.__all__ if f"trio_actors.{n}" not in names]
    missing += [
        f"trio_actors.testing.{n}"
        for n in trio_actors.testing.__all__
        if f"trio_actors.testing.{n}" not in names
    ]
    assert missing == []


def test_every_python_example_on_a_page_runs() -> None:
    # Longer examples are files under examples/ (run by test_examples.py) that the
    # pages include; a code block written on a page must be a whole program.
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text):
            code = "\n".join(line[3:] for line in match.group(1).splitlines())
            blocks.append((page.name, code))
    assert blocks, "the index page's example at least"
    for name, code in blocks:
        exec(compile(code, name, "exec"), {"__name__": f"docs_{name}"})

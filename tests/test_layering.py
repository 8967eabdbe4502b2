"""The parts import each other in one direction only, and library code never imports the
command line (docs/ARCHITECTURE.md, "The parts and what they may import").

A scan of every module's imports, those inside functions too (a lazy import is still a
dependency):

- ``model/`` and ``scenarios/`` are leaves; ``impl/`` may import ``model/``'s contracts;
  ``conformance/`` builds on the three; ``reports/`` on ``conformance/``; nothing outside
  ``reports/`` imports it.
- Only a front end imports ``conformance.cli``: a module that is one (it uses ``click``)
  or the pytest plugin. The errors and exit codes library code shares with the command
  line live in ``conformance.errors``, the signal handling in
  ``conformance.running.interrupts``: modules of neither.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.imports import imported_modules

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("model", "impl", "scenarios", "conformance", "reports")

#: What each part may import of the others (itself always).
MAY_IMPORT = {
    "model": set(),
    "scenarios": set(),
    "impl": {"model"},
    "conformance": {"model", "impl", "scenarios"},
    "reports": {"model", "impl", "scenarios", "conformance"},
}

#: Front ends that are not click commands themselves.
FRONT_ENDS = {"conformance/pytest_plugin.py"}


def _imported(tree: ast.AST) -> Iterator[str]:
    """Every absolute module name the tree imports, ``rmqsim.`` taken off."""
    for _line, name in imported_modules(tree):
        yield name.removeprefix("rmqsim.")


@functools.cache
def _sources(part: str) -> tuple[tuple[str, ast.Module], ...]:
    """Each module of ``part`` (its path from the root) and its syntax tree, parsed once."""
    return tuple(
        (path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted((ROOT / part).rglob("*.py"))
    )


def _crossings(part: str, tree: ast.AST) -> Iterator[str]:
    for name in _imported(tree):
        top = name.split(".")[0]
        if top in PARTS and top != part and top not in MAY_IMPORT[part]:
            yield name


@pytest.mark.parametrize("part", PARTS)
def test_a_part_imports_only_the_parts_below_it(part: str) -> None:
    found = [
        f"{where} imports {name}"
        for where, tree in _sources(part)
        for name in _crossings(part, tree)
    ]
    assert not found, f"{part}/ may import only {sorted(MAY_IMPORT[part])}:\n" + "\n".join(found)


def _is_front_end(where: str, tree: ast.AST) -> bool:
    return where in FRONT_ENDS or "click" in set(_imported(tree))


def _library_modules_importing_the_command_line() -> Iterator[str]:
    for part in ("conformance", "reports"):
        for where, tree in _sources(part):
            if where.startswith("conformance/cli/") or _is_front_end(where, tree):
                continue
            for name in _imported(tree):
                if name == "conformance.cli" or name.startswith("conformance.cli."):
                    yield f"{where} imports {name}"


def test_library_code_never_imports_the_command_line() -> None:
    found = list(_library_modules_importing_the_command_line())
    assert not found, "library modules importing the command line:\n" + "\n".join(found)


def test_the_scan_sees_a_lazy_import_and_a_crossing() -> None:
    """The checks above are live: an import inside a function is seen, and a leaf that
    imports the harness is a crossing."""
    tree = ast.parse("def f():\n    from rmqsim.conformance.cli.common import fail\n")
    assert list(_imported(tree)) == ["conformance.cli.common"]
    assert list(_crossings("model", tree)) == ["conformance.cli.common"]
    assert list(_crossings("reports", tree)) == []
    assert not _is_front_end("reports/tasks.py", tree)
    assert _is_front_end("reports/x.py", ast.parse("import click\n"))

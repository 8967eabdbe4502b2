"""Every module a syntax tree imports, those inside functions too: the scans of
tests/test_layering.py and tests/test_install.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["imported_modules"]


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each absolute import's line and module name (``import a.b``: ``a.b``; ``from a.b
    import c``: ``a.b``); relative imports are left out."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield node.lineno, name

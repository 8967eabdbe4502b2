"""MkDocs hook: a page's link to the repository's README.md (the front page, outside docs/)
goes to the site's home page, which holds what the README says and more.

On GitHub a page under docs/ links the README as ``../README.md``; the site has no such
file, so a strict build would stop on that link. Anchors into the README are dropped (the
home page's headings differ)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["on_page_markdown", "to_home"]


def to_home(markdown: str, depth: int) -> str:
    """``markdown`` of a page ``depth`` folders below docs/, its README links to the home
    page (``index.md`` relative to it)."""
    readme = re.escape("../" * (depth + 1) + "README.md")
    home = "../" * depth + "index.md"
    return re.sub(rf"\]\({readme}(#[^)\s]*)?\)", f"]({home})", markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return to_home(markdown, page.file.src_uri.count("/"))

"""Links to repository files that the site shows as pages.

README.md and CHANGELOG.md live at the repository's root, where GitHub shows them, and the
site shows them as its front page (index) and its changelog page (changelog). A link to
either, from a page in docs/ (``../README.md#install``) or from the README included on the
front page (``CHANGELOG.md``), is rewritten to the page's source before myst-parser reads
it, so that it becomes a checked link to that page: a missing page or anchor is a warning.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from sphinx.application import Sphinx

#: Repository file (from the repository's root) -> the page (in docs/) that shows it.
PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md"}

# A Markdown inline link's destination: "](target)" or "](target#anchor)".
_LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")


def _rewrite(text: str, page_for: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        page = page_for.get(match["target"])
        return match[0] if page is None else f"]({page}{match['anchor'] or ''})"

    return _LINK.sub(replace, text)


def _docs_page_links(app: Sphinx, docname: str, source: list[str]) -> None:
    # A page docs/a/b.md reaches the repository's root through "../../".
    up = "../" * (len(PurePosixPath(docname).parts))
    own_level = "../" * (len(PurePosixPath(docname).parts) - 1)
    page_for = {up + file: own_level + page for file, page in PAGES.items()}
    source[0] = _rewrite(source[0], page_for)


def _included_links(app: Sphinx, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    # The included README's links are relative to the repository's root; the include
    # directive's :relative-docs: docs/ makes "docs/..." links relative to the page.
    if PurePosixPath(relative_path.as_posix()).name not in PAGES:
        return
    page_for = {file: "docs/" + page for file, page in PAGES.items()}
    content[0] = _rewrite(content[0], page_for)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("source-read", _docs_page_links)
    app.connect("include-read", _included_links)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

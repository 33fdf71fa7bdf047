"""The ``grouper-table`` directive: the table of every grouper, read from the registry
(:func:`keysplit.groupers`) when the site is built, so that it cannot go stale.

Usage in a Markdown page::

    ```{grouper-table}
    ```

    ```{grouper-table}
    :names: pkg, d_choices, elastic
    :meanings:
    ```

Columns: the grouper's name (what ``keysplit.Grouper(name, ...)`` takes), its title, the
publication it follows, and its default parameters. ``:names:`` keeps only the groupers
listed, in registry order; ``:meanings:`` adds each parameter's meaning under its default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

import keysplit

if TYPE_CHECKING:
    from sphinx.application import Sphinx

COLUMNS = (("name", 12), ("grouper", 28), ("follows", 40), ("default parameters", 30))


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.replace(",", " ").split() if name.strip()]


def _text_cell(text: str) -> nodes.entry:
    return nodes.entry("", nodes.paragraph("", text))


def _literal_cell(text: str) -> nodes.entry:
    return nodes.entry("", nodes.paragraph("", "", nodes.literal(text, text)))


class GrouperTable(SphinxDirective):
    """Renders :func:`keysplit.groupers` as a table node."""

    has_content = False
    option_spec: ClassVar[dict] = {"names": _names, "meanings": directives.flag}

    def run(self) -> list[nodes.Node]:
        registry = keysplit.groupers()
        wanted = self.options.get("names")
        if wanted:
            known = {info.name for info in registry}
            unknown = [name for name in wanted if name not in known]
            if unknown:
                raise self.error(
                    f"grouper-table: unknown grouper {', '.join(unknown)}; known: {', '.join(sorted(known))}"
                )
            registry = [info for info in registry if info.name in wanted]
        meanings = "meanings" in self.options

        group = nodes.tgroup(cols=len(COLUMNS))
        for _, width in COLUMNS:
            group += nodes.colspec(colwidth=width)
        header = nodes.row()
        for title, _ in COLUMNS:
            header += _text_cell(title)
        group += nodes.thead("", header)
        body = nodes.tbody()
        for info in registry:
            row = nodes.row()
            row += _literal_cell(info.name)
            row += _text_cell(info.title)
            row += _text_cell(info.paper)
            row += self._defaults_cell(info, meanings)
            body += row
        group += body
        table = nodes.table("", group, classes=["grouper-table"])
        self.set_source_info(table)
        return [table]

    @staticmethod
    def _defaults_cell(info: keysplit.GrouperInfo, meanings: bool) -> nodes.entry:
        cell = nodes.entry()
        if not info.defaults:
            cell += nodes.paragraph("", "none")
            return cell
        for name, value in info.defaults.items():
            shown = f"{name}={value!r}"
            paragraph = nodes.paragraph("", "", nodes.literal(shown, shown))
            if meanings and info.param_docs.get(name):
                paragraph += nodes.Text(": " + info.param_docs[name])
            cell += paragraph
        return cell


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("grouper-table", GrouperTable)
    return {"version": keysplit.__version__, "parallel_read_safe": True, "parallel_write_safe": True}

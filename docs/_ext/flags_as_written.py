"""Command-line flags in prose stay as written.

Smart quotes turn "--" into an en dash, which is right for prose and the "name -- meaning"
of parameter lists, but makes "--output" in an argparse help text (docs/cli.md) or a
sentence read "–output". Every ``--flag`` outside code is wrapped in a node that smart
quotes leave alone, before they run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from docutils import nodes
from sphinx.transforms import SphinxTransform

if TYPE_CHECKING:
    from sphinx.application import Sphinx

# "--output", "--no-progress": two hyphens starting a word, followed by a letter.
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")


class KeepFlagsAsWritten(SphinxTransform):
    # Before Sphinx's SmartQuotes (750).
    default_priority = 740

    def apply(self, **kwargs: object) -> None:
        for text in list(self.document.findall(nodes.Text)):
            parent = text.parent
            if parent is None or isinstance(parent, (nodes.literal, nodes.FixedTextElement)):
                continue
            source = str(text)
            if not FLAG.search(source):
                continue
            pieces: list[nodes.Node] = []
            position = 0
            for match in FLAG.finditer(source):
                if match.start() > position:
                    pieces.append(nodes.Text(source[position : match.start()]))
                pieces.append(nodes.inline(match[0], match[0], support_smartquotes=False))
                position = match.end()
            if position < len(source):
                pieces.append(nodes.Text(source[position:]))
            parent.replace(text, pieces)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_transform(KeepFlagsAsWritten)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

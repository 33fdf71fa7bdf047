"""Every Python block of README.md and docs/*.md runs, page by page, as a reader following
the page would run it: its blocks in order, in one namespace, in a fresh working directory,
against the installed wheel (the Spark ones on the embedded server they start). A block that
cannot run begins with the line ``# Not run: <why>``, which the page shows to its readers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"# Not run: (\S.*)")


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(the line of the block's first code line, its code) of each block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, block.start(1)) + 1, block.group(1)) for block in PYTHON_BLOCK.finditer(text)]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", [page for page in PAGES if python_blocks(page)], ids=_name)
def test_the_python_blocks_of_a_page_run_in_order(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line, code in python_blocks(page):
        if NOT_RUN.match(code):
            continue
        # Padded so that a traceback's line numbers are the page's.
        exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)


def test_every_page_has_runnable_blocks_and_a_skipped_one_says_why() -> None:
    assert python_blocks(ROOT / "README.md"), "the README's tour is a Python block"
    for page in PAGES:
        for line, code in python_blocks(page):
            first = code.split("\n", 1)[0]
            if first.startswith("# Not run"):
                assert NOT_RUN.fullmatch(first), f"{_name(page)}:{line}: say why after '# Not run: '"

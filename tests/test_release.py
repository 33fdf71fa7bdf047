"""One version, set in the workspace ``Cargo.toml``: the installed wheel's metadata,
``keysplit.__version__``, ``keysplit --version`` and the CHANGELOG's first entry agree on it."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import keysplit

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere() -> None:
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    assert keysplit.__version__ == workspace
    assert importlib.metadata.version("keysplit") == workspace
    command = subprocess.run(
        [sys.executable, "-m", "keysplit", "--version"], check=True, capture_output=True, text=True
    )
    assert command.stdout.strip() == f"keysplit {workspace}"
    entries = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert entries and entries[0] == workspace, f"CHANGELOG.md's first entry is {entries[:1]}, the version {workspace}"


def test_changelog_lists_every_grouper() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    missing = [name for name in [info.name for info in keysplit.groupers()] if f"`{name}`" not in text]
    assert not missing, f"CHANGELOG.md's first entry does not name {missing}"


def test_the_command_line_starts_without_the_optional_packages() -> None:
    """``pip install keysplit`` has neither PyArrow nor PySpark: the command line must not
    import them to start (``keysplit --version``, ``keysplit groupers``)."""
    blocked = "import sys; sys.modules.update(dict.fromkeys(['pyarrow', 'pyspark', 'pandas']))"
    for command in (["--version"], ["groupers"]):
        started = subprocess.run(
            [sys.executable, "-c", f"{blocked}; from keysplit.cli import main; sys.exit(main({command!r}))"],
            capture_output=True,
            text=True,
        )
        assert started.returncode == 0, started.stderr


def test_the_release_smoke_test_passes_on_this_install() -> None:
    """The script the release workflow runs on each platform's runner, in a new interpreter
    as there: its pinned digests stay the Rust core's."""
    smoke = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "release_smoke.py")], capture_output=True, text=True, timeout=120
    )
    assert smoke.returncode == 0, smoke.stderr
    assert "smoke test passed" in smoke.stdout

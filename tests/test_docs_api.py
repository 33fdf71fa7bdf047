"""The API reference (docs/api/*.md) documents every public name of the public modules,
each exactly once, and nothing that does not exist.

The pages' autodoc directives are read as text, so this runs without Sphinx. A module's
public names are its ``__all__``; for a module without one, the functions and classes it
defines and the constants it assigns, less those starting with an underscore.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections import Counter
from pathlib import Path

import pytest

API_PAGES = Path(__file__).resolve().parents[1] / "docs" / "api"
PUBLIC_MODULES = [
    "keysplit",
    "keysplit.metrics",
    "keysplit.sketches",
    "keysplit.datasets",
    "keysplit.tables",
    "keysplit.simulate",
    "keysplit.spark",
]

# ".. autofunction:: keysplit.route" in an {eval-rst} block, or "```{autofunction} keysplit.route".
_DIRECTIVE = re.compile(
    r"^\s*(?:\.\.\s+(?:py:)?(?P<rst>auto\w+|function|class|exception|data|attribute|method|module)::"
    r"|`{3,}\{(?:py:)?(?P<myst>auto\w+|function|class|exception|data|attribute|method|module)\})"
    r"\s+(?P<name>[\w.]+)",
    re.MULTILINE,
)


def documented() -> tuple[Counter[str], set[str]]:
    """Objects described by the pages (how often each), and the modules they document."""
    objects: Counter[str] = Counter()
    modules: set[str] = set()
    for page in sorted(API_PAGES.glob("*.md")):
        for match in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            if (match["rst"] or match["myst"]) in {"automodule", "module"}:
                modules.add(match["name"])
            else:
                objects[match["name"]] += 1
    return objects, modules


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    defined = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module_name
    ]
    # Constants: upper-case names the module itself assigns at its top level.
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        defined += [
            target.id
            for target in targets
            if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_")
        ]
    return defined


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_documented(module_name: str) -> None:
    objects, modules = documented()
    assert module_name in modules, f"no page has '.. automodule:: {module_name}'"
    module = importlib.import_module(module_name)
    missing = []
    for name in public_names(module_name):
        value = getattr(module, name)
        if inspect.ismodule(value):
            if value.__name__ not in modules:
                missing.append(f"{name} (module {value.__name__}: no '.. automodule::')")
        elif f"{module_name}.{name}" not in objects:
            missing.append(name)
    assert not missing, f"{module_name}: public names missing from docs/api/*.md: {', '.join(missing)}"


def test_no_name_is_documented_twice() -> None:
    objects, _ = documented()
    twice = sorted(name for name, count in objects.items() if count > 1)
    assert not twice, f"documented more than once in docs/api/*.md: {', '.join(twice)}"


def test_every_documented_name_exists() -> None:
    objects, modules = documented()
    stale = []
    for full_name in sorted(objects):
        module_name, _, name = full_name.rpartition(".")
        if module_name not in PUBLIC_MODULES or not hasattr(importlib.import_module(module_name), name):
            stale.append(full_name)
    stale += sorted(module for module in modules if module not in PUBLIC_MODULES)
    assert not stale, f"docs/api/*.md documents what is not a public name: {', '.join(stale)}"

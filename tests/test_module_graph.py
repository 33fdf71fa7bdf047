"""keysplit's modules depend on each other one way, and use each other's public names only.

Like ``rust/keysplit-core/tests/module_graph.rs`` for the core, this reads the source (with
``ast``; nothing is imported) of every module of ``python/keysplit`` and builds the graph of
imports between them: at module level and inside functions, ``import keysplit.x``,
``from keysplit.x import y``, relative imports and ``importlib.import_module("keysplit.x")``.
``from keysplit.pkg import name`` where ``name`` is a submodule is an edge to that
submodule. Imports under ``if TYPE_CHECKING:`` run only for the type checker and are no
edges. Two rules:

- no cycle: a module never imports, however indirectly, a module that imports it;
- no private name crosses a module boundary: ``from keysplit.x import _name`` and
  ``x._name`` on an imported keysplit module are refused, whatever ``keysplit.x`` is, and
  under ``if TYPE_CHECKING:`` too.
  Modules may have private file names (``keysplit._grouper``) and be imported as modules;
  the compiled extension ``keysplit._core`` is exempt, its underscore names being its API.

The checks run first on small made-up packages, which they must refuse, so that a check
that cannot fail is caught too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "keysplit"
SOURCE = Path(__file__).resolve().parents[1] / "python" / PACKAGE
#: The compiled extension: a module without Python source, whose underscore names are public.
EXTENSION = f"{PACKAGE}._core"


@dataclass(frozen=True)
class Import:
    """One import of a keysplit module by another, at ``line`` of ``importer``."""

    importer: str
    imported: str
    line: int
    name: str | None = None  # the name taken from ``imported``, None for the module itself
    typing_only: bool = False  # under ``if TYPE_CHECKING:``: no edge, as it never runs


def module_name(path: Path, root: Path) -> str:
    """``keysplit.a.b`` for ``root/a/b.py``, ``keysplit.a`` for ``root/a/__init__.py``."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_sources(root: Path) -> dict[str, str]:
    """Every module under ``root`` (a package directory) by its dotted name, with its source."""
    return {module_name(path, root): path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> list[tuple[ast.AST, bool]]:
    """Every node of ``tree``, each with whether it runs only under ``if TYPE_CHECKING:``."""
    found: list[tuple[ast.AST, bool]] = []
    pending: list[tuple[ast.AST, bool]] = [(tree, False)]
    while pending:
        node, typing_only = pending.pop()
        found.append((node, typing_only))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend((child, True) for child in node.body)
            pending.extend((child, typing_only) for child in node.orelse)
            continue
        pending.extend((child, typing_only) for child in ast.iter_child_nodes(node))
    return found


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The module a ``from`` import names, relative ones resolved against ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def imports(sources: dict[str, str]) -> list[Import]:
    """Every import of a module of ``sources`` (or of the extension) in ``sources``, with
    the private attributes read off imported modules as imports of those names."""
    modules = set(sources) | {EXTENSION}
    found: list[Import] = []
    for module, text in sources.items():
        tree = ast.parse(text, filename=module)
        is_package = any(other.startswith(module + ".") for other in sources) or module == PACKAGE
        # Local names bound to a keysplit module, for ``alias._name`` reads.
        aliases: dict[str, str] = {}
        nodes = _nodes(tree)
        for node, typing_only in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        found.append(Import(module, alias.name, node.lineno, typing_only=typing_only))
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, is_package, node.level, node.module)
                if source != PACKAGE and not source.startswith(PACKAGE + "."):
                    continue
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        found.append(Import(module, submodule, node.lineno, typing_only=typing_only))
                        aliases[alias.asname or alias.name] = submodule
                    else:
                        found.append(Import(module, source, node.lineno, alias.name, typing_only))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, (ast.Attribute, ast.Name))
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in modules
            ):
                found.append(Import(module, node.args[0].value, node.lineno, typing_only=typing_only))
        for node, typing_only in nodes:
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
            ):
                found.append(Import(module, aliases[node.value.id], node.lineno, node.attr, typing_only))
    return found


def graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Each module of ``sources`` and the modules of ``sources`` it imports."""
    edges: dict[str, set[str]] = {module: set() for module in sources}
    for found in imports(sources):
        if found.imported in sources and found.imported != found.importer and not found.typing_only:
            edges[found.importer].add(found.imported)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) through each strongly connected group of modules."""
    # Tarjan's strongly connected components, then a shortest cycle inside each.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(edges[module]):
            if other not in index:
                connect(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(edges):
        if module not in index:
            connect(module)
    found = []
    for group in groups:
        start = min(group)
        # Breadth-first from start back to start, inside the group.
        previous: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in previous:
            step = []
            for module in frontier:
                for other in sorted(edges[module] & group):
                    if other not in previous:
                        previous[other] = module
                        step.append(other)
            frontier = step
        path = [start]
        while previous[path[-1]] != start:
            path.append(previous[path[-1]])
        found.append([start, *reversed(path)])
    return sorted(found)


def private_imports(sources: dict[str, str]) -> list[Import]:
    """Every private name a module of ``sources`` takes from another keysplit module."""
    return [
        found
        for found in imports(sources)
        if found.name is not None
        and _is_private(found.name)
        and found.imported != EXTENSION
        and found.imported != found.importer
    ]


def _cycle_report(found: list[list[str]]) -> str:
    return "import cycles among keysplit's modules:\n" + "\n".join("  " + " -> ".join(c) for c in found)


def _private_report(found: list[Import]) -> str:
    return "private names imported across keysplit's modules:\n" + "\n".join(
        f"  {f.importer} (line {f.line}) takes {f.name} from {f.imported}" for f in found
    )


# --- the checks on made-up packages ----------------------------------------------------

MADE_UP = {
    "keysplit": "from keysplit import a\nfrom keysplit.b import B\n",
    "keysplit._core": "",  # stands for nothing: the extension has no source
    "keysplit.a": "from keysplit._core import _raw\nimport keysplit.c as c\n",
    "keysplit.b": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from keysplit.a import _Hidden\n"
        "    from keysplit.c import C\n"
        "def f():\n"
        "    from keysplit.pkg import sub\n"
        "B = 1\n"
    ),
    "keysplit.c": "import keysplit.b\n",
    "keysplit.pkg": "from . import sub\n",
    "keysplit.pkg.sub": "from ..c import _helper\nfrom .. import a\nx = a._secret\n",
}


def test_the_graph_follows_every_kind_of_import() -> None:
    edges = graph(MADE_UP)
    assert edges["keysplit"] == {"keysplit.a", "keysplit.b"}
    assert edges["keysplit.a"] == {"keysplit._core", "keysplit.c"}
    # A function-level import counts; the TYPE_CHECKING one does not.
    assert edges["keysplit.b"] == {"keysplit.pkg.sub"}
    assert edges["keysplit.pkg"] == {"keysplit.pkg.sub"}
    assert edges["keysplit.pkg.sub"] == {"keysplit.c", "keysplit.a"}


def test_a_cycle_is_found_and_named() -> None:
    found = cycles(graph(MADE_UP))
    # b -> pkg.sub -> c -> b, and a -> c -> b -> pkg.sub -> a: one strongly connected group.
    assert len(found) == 1
    (cycle,) = found
    assert cycle[0] == cycle[-1] == "keysplit.a"
    assert set(cycle) == {"keysplit.a", "keysplit.b", "keysplit.c", "keysplit.pkg.sub"}
    assert cycles({"x": {"y"}, "y": set()}) == []
    assert cycles({"x": {"y"}, "y": {"x"}, "z": {"z"}}) == [["x", "y", "x"]]


def test_a_private_import_is_found() -> None:
    found = {(f.importer, f.imported, f.name) for f in private_imports(MADE_UP)}
    assert found == {
        ("keysplit.pkg.sub", "keysplit.c", "_helper"),
        ("keysplit.pkg.sub", "keysplit.a", "_secret"),
        # Only for the type checker, and private all the same.
        ("keysplit.b", "keysplit.a", "_Hidden"),
    }


def test_the_package_is_read() -> None:
    sources = package_sources(SOURCE)
    # The walk sees the package, its subpackages and the modules with private file names.
    assert {"keysplit", "keysplit._grouper", "keysplit.datasets.files", "keysplit.spark"} <= set(sources)
    assert graph(sources)["keysplit"] >= {"keysplit._grouper", "keysplit.datasets", "keysplit.simulate"}


# --- the checks on keysplit ------------------------------------------------------------


def test_the_modules_import_each_other_one_way() -> None:
    found = cycles(graph(package_sources(SOURCE)))
    assert not found, _cycle_report(found)


def test_no_module_imports_another_modules_private_names() -> None:
    found = private_imports(package_sources(SOURCE))
    assert not found, _private_report(found)

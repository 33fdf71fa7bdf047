"""How the API reference reads keysplit's docstrings and signatures.

- NumPy sections (``Parameters`` / ``Returns`` / ``Examples`` underlined with dashes) of
  modules, classes and callables are read with napoleon's NumPy parser. Attribute, property
  and constant docstrings are left as written: they are prose ("Bytes of routing state:
  ..."), which napoleon would read as a type before a colon.
- A constant a package re-exports (``keysplit.spark.FUNCTIONS``) gets the ``#:`` comment it
  has in the submodule that defines it.
- A type hint in a signature that names a keysplit object by its private path
  (``keysplit.spark.report.Report``) or by its bare name links to the page that documents
  it. A hint naming something the reference does not document (a type alias, a TypeVar,
  a type imported only for type checkers) is shown as text: it is code, not a hand-written
  reference. References written in docstrings (``:class:`X```) get no such help: a
  broken one stays a warning.
- A class's "Bases:" line leaves out keysplit's private base classes (their own bases
  shown instead) and ``Generic[T]``: neither is anything a reader can look up.
"""

from __future__ import annotations

import os
import sys
import typing
from typing import TYPE_CHECKING, Any

from docutils import nodes
from sphinx import addnodes
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.ext.napoleon.docstring import NumpyDocstring
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

logger = logging.getLogger(__name__)

PACKAGE = "keysplit"
NUMPY_SECTIONS_FOR = {"module", "class", "exception", "function", "method", "classmethod", "staticmethod"}
NAPOLEON = NapoleonConfig(
    napoleon_google_docstring=False,
    napoleon_numpy_docstring=True,
    napoleon_use_rtype=False,
    napoleon_use_param=True,
    napoleon_preprocess_types=False,
)


def _numpy_sections(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what in NUMPY_SECTIONS_FOR:
        lines[:] = NumpyDocstring(lines, NAPOLEON, None, what, name, obj, options).lines()


def _reexported_constant_comment(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what != "data" or any(line.strip() for line in lines) or not name.startswith(PACKAGE + "."):
        return
    package, _, attribute = name.rpartition(".")
    for module_name in sorted(m for m in list(sys.modules) if m.startswith(package + ".")):
        module = sys.modules[module_name]
        if getattr(module, attribute, None) is not obj:
            continue
        try:
            comments = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except Exception:  # noqa: BLE001, S112 - a module without source has no comments
            continue
        comment = comments.get(("", attribute))
        if comment:
            lines[:] = list(comment)
            return


def _public_bases(app: Sphinx, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    shown: list[Any] = []
    for base in bases:
        if typing.get_origin(base) is typing.Generic:
            continue
        private = getattr(base, "__name__", "").startswith("_")
        if private and getattr(base, "__module__", "").startswith(PACKAGE):
            inherited: list[Any] = list(base.__dict__.get("__orig_bases__", base.__bases__))
            _public_bases(app, name, obj, options, inherited)
            shown.extend(b for b in inherited if b is not object and b not in shown)
        elif base not in shown:
            shown.append(base)
    bases[:] = shown or [object]


def _documented_objects(env: BuildEnvironment) -> dict[str, list[str]]:
    by_last_name: dict[str, list[str]] = {}
    for full_name in env.domains.python_domain.objects:
        by_last_name.setdefault(full_name.rpartition(".")[2], []).append(full_name)
    return by_last_name


def _in_signature(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, addnodes.desc_signature):
            return True
        if isinstance(parent, addnodes.desc_content):
            return False
        parent = parent.parent
    return False


def _signature_type_names(app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref, contnode: nodes.Element):
    if node.get("refdomain") != "py" or not _in_signature(node):
        return None
    target = node["reftarget"]
    bare = "." not in target
    if not (bare or target.startswith(PACKAGE + ".")):
        return None
    # Documented under its public name: keysplit.spark.Report for keysplit.spark.report.Report,
    # the one sharing the longest prefix with the private path.
    documented = [
        name for name in _documented_objects(env).get(target.rpartition(".")[2], []) if name.startswith(PACKAGE + ".")
    ]
    if documented and not (bare and len(documented) > 1):
        best = max(documented, key=lambda name: len(os.path.commonprefix([name, target])))
        resolved = env.domains.python_domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], best, node, contnode
        )
        if resolved is not None:
            return resolved
    return contnode


def setup(app: Sphinx) -> dict[str, object]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _reexported_constant_comment)
    app.connect("autodoc-process-docstring", _numpy_sections)
    app.connect("autodoc-process-bases", _public_bases)
    # After the Python domain's own resolution (priority 500) and its builtins (900).
    app.connect("missing-reference", _signature_type_names, priority=950)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

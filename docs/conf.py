"""Sphinx configuration of the keysplit documentation site (``make docs``).

The guides are Markdown (myst-parser); the API reference is autodoc over the installed
keysplit, whose docstrings use Sphinx roles; the command-line reference is generated from
the argument parser (sphinx-argparse); the grouper table from the registry (``_ext``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import keysplit

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "keysplit"
author = "the keysplit authors"
copyright = "the keysplit authors"  # noqa: A001 - Sphinx's name for it
version = release = keysplit.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "sphinx_copybutton",
    "grouper_table",
    "repository_pages",
    "flags_as_written",
    # NumPy docstring sections (napoleon's parser, for callables and classes only), the
    # comments of re-exported constants, the type hints of signatures.
    "keysplit_api",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# Only pages live here: _ext is code, _static the stylesheet, _build and site the output of
# a build made inside.
exclude_patterns = ["_build", "site", "_ext", "_static", "**/__pycache__", "Thumbs.db", ".DS_Store"]

# Every reference must resolve: a broken reference to a keysplit name, page or anchor is a
# warning, and the strict build (-W) fails on it. Only the names of other projects, whose
# inventories this offline build does not have, are let through.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(pyspark|polars|pl|pyarrow|pa|pandas|pd|numpy|np|npt|matplotlib)(\..*)?"),
    # Type hints of the standard library, written out by autodoc (typing's internals
    # included), which the offline build cannot link to Python's documentation.
    (
        r"py:.*",
        r"(typing|typing_extensions|collections\.abc|collections|os|pathlib|datetime|"
        r"dataclasses|enum|types|contextlib|argparse|concurrent\.futures|io|subprocess)\..*",
    ),
    # Other projects' classes that docstrings and type hints name without their module.
    (
        r"py:.*",
        r"(DataFrame|LazyFrame|Series|SparkSession|Column|StructType|DataType|"
        r"StreamingQuery|GroupedData|Window|WindowSpec|Row|SparkTimeoutError|"
        r"PythonWorkerTimeoutError|Path|Random|random\.Random)",
    ),
    (
        r"py:.*",
        r"(bool|bytes|bytearray|complex|dict|float|frozenset|int|list|memoryview|"
        r"object|range|set|slice|str|tuple|type|None|NoneType|Ellipsis|EllipsisType|"
        r"BaseException|Exception|ValueError|TypeError|KeyError|RuntimeError|OSError|"
        r"ImportError|FileNotFoundError|LookupError|DeprecationWarning|Warning|"
        r"Callable|Iterable|Iterator|Mapping|Sequence|Any|Literal|TypeAlias)",
    ),
]

# Markdown pages: headings get anchors down to ####, so that a link to page.md#section
# resolves, and one to a heading that does not exist is a warning.
myst_heading_anchors = 4
# No myst syntax extensions: the pages are CommonMark with GitHub tables, and directives
# are backtick fences.
myst_enable_extensions: list[str] = []
# Links to pages of this site are checked; only these schemes are left as they are.
myst_url_schemes = ["http", "https", "mailto"]
# The guides' heading levels are theirs to choose (reproduction.md's tables sit under ####).
suppress_warnings = ["myst.header"]

# Exceptions show their bases (a ConfigError is a ValueError) with :show-inheritance: on
# the page; for other classes "Bases: object" would be noise.
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# Signatures name these aliases rather than spelling out the Literal of every grouper.
autodoc_type_aliases = {"GrouperName": "keysplit.GrouperName", "NullPolicy": "keysplit.NullPolicy"}
python_use_unqualified_type_names = True
add_module_names = False

html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_title = f"keysplit {release}"
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": True,
    "top_of_page_buttons": [],
}
# Prompts and output are not copied with a code block.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

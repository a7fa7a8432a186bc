"""Sphinx configuration for the sklearn-attn documentation.

Build (from the repository root)::

    python -m pip install -e ".[docs]"
    python -m sphinx -n -W --keep-going -b html docs docs/_build/html

The build needs no network: MathJax is served from the built site
(sphinx-mathjax-offline), the theme ships its own assets, references to
scikit-learn, NumPy and SciPy are resolved to their documentation's addresses
without downloading an inventory (see ``_resolve_external`` below), and the
gallery runs the scripts in ``examples/`` on the local machine.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

# Make the package importable when the docs are built from a source checkout,
# and the local extensions of _ext/.
sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

import sklearn_attn  # noqa: E402

# -- Project information -------------------------------------------------------------

project = "sklearn-attn"
author = "sklearn-attn developers"
copyright = "sklearn-attn developers"
release = sklearn_attn.__version__
version = re.sub(r"(\.dev\d*|rc\d*|a\d*|b\d*)$", "", release)

# -- General configuration -----------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    # A packaged copy of MathJax 3, copied into _static/mathjax of the built site.
    "sphinx-mathjax-offline",
    # :measured:`FILE...:VALUE:SPEC`, a number read from benchmarks/results/.
    "measured",
    # The reproductions' figures, drawn from their committed tables.
    "reproduction_figures",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "Thumbs.db", ".DS_Store"]
root_doc = "index"
default_role = "literal"
# Every cross-reference must resolve (the build runs with -W).
nitpicky = True

# autosummary writes one stub page per public object under docs/generated/
# (git-ignored), from the templates in docs/_templates/autosummary/.
autosummary_generate = True
autosummary_generate_overwrite = True

autodoc_default_options = {
    "members": True,
    "inherited-members": True,
}
autodoc_typehints = "none"
autoclass_content = "class"

# numpydoc renders the Parameters / Attributes / Examples sections; the class
# template lists the methods itself (as scikit-learn's does).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# -- Gallery -------------------------------------------------------------------------
#
# The scripts in examples/FAMILY/ are run at every build (each takes under a minute
# on two cores); their figures are embedded in the user guide from
# auto_examples/FAMILY/images/. An example that raises fails the build.

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # One section per family, each a folder of examples/ with its README.txt.
    "subsection_order": [
        "../examples/random_features",
        "../examples/attention",
        "../examples/potts",
        "../examples/model_selection",
    ],
    "within_subsection_order": "FileNameSortKey",
    # matplotlib's defaults, then the house style (figures.mplstyle), before each
    # example; the figures are saved at 1x and 2x (for high-density screens), the
    # user guide shows the 2x ones.
    "reset_modules": ("matplotlib", "house_style.reset"),
    "image_srcset": ["2x"],
    # Thumbnails of about twice the size the gallery's cards show them (the CSS).
    "thumbnail_size": (640, 400),
    # "Examples using X" under each API page.
    "doc_module": ("sklearn_attn",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"sklearn_attn": None},
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 1,
    "show_memory": False,
    # Its timing tables load scripts from a CDN; each example states its own time.
    "write_computation_times": False,
}

# -- HTML output -------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"sklearn-attn {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
html_context = {"default_mode": "light"}
# Layout rules the theme leaves to the page (tables that wrap, equations and titles
# that fit the column, the gallery's cards); see the file's comments.
html_static_path = ["_static"]
html_css_files = ["sklearn_attn.css"]

# -- Break points in long literals ---------------------------------------------------
#
# Sphinx writes literal text as one <span class="pre"> per word, which never breaks,
# so a test name or a dotted path in a table cell sets the width of its column. A
# <wbr> after its underscores, dots and slashes lets it break there when it must
# (the CSS lets a table cell break it anywhere only when a part is still too long).
# Copying the text copies no break.

_PRE_SPAN = re.compile(r'<span class="pre">([^<]{16,})</span>')
_AFTER_SEPARATOR = re.compile(r"(?<=[_./])(?=[^_./])")


def _break_points(match):
    parts = _AFTER_SEPARATOR.split(match.group(1))
    return "<wbr>".join(f'<span class="pre">{part}</span>' for part in parts)


def _mark_break_points(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = _PRE_SPAN.sub(_break_points, context["body"])


# -- Docstrings inherited from scikit-learn ------------------------------------------
#
# Methods such as ``score``, ``set_output`` or ``set_fit_request`` come from
# scikit-learn, whose docstrings point into scikit-learn's own documentation
# with ``:ref:`` and ``:term:`` roles. Without intersphinx (no network) those
# targets do not exist here, so for objects defined inside scikit-learn the two
# roles are turned into plain text. Docstrings of this package are left as
# they are, so a broken reference in them still fails the build.

_SKLEARN_ROLE = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<[^`>]*>)?`", re.DOTALL)


def _plain_text(match):
    return match.group(1).strip() or "the scikit-learn documentation"


def _strip_sklearn_xrefs(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or ""
    if not (module == "sklearn" or module.startswith("sklearn.")):
        return
    text = "\n".join(lines)
    if ":ref:`" in text or ":term:`" in text:
        # On the joined text, so that a role wrapped over two lines is caught too.
        lines[:] = _SKLEARN_ROLE.sub(_plain_text, text).split("\n")


# -- References to scikit-learn, NumPy and SciPy -------------------------------------
#
# Their API pages have predictable addresses, so a reference such as
# :class:`sklearn.pipeline.Pipeline` is linked there without intersphinx (which
# would download an inventory). The target is imported first: a misspelt name
# is left unresolved, and the nitpicky build fails on it.

_EXTERNAL_PAGES = {
    "sklearn": "https://scikit-learn.org/stable/modules/generated/{page}.html",
    "numpy": "https://numpy.org/doc/stable/reference/generated/{page}.html",
    "scipy": "https://docs.scipy.org/doc/scipy/reference/generated/{page}.html",
}


def _external_page(target):
    """``(page, anchor)`` of an importable public object, or None.

    The page is the object's module path plus one name (the class or the
    function); a method or an attribute is an anchor on its class's page.
    """
    parts = target.split(".")
    for stop in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:stop]))
        except ImportError:
            continue
        for name in parts[stop:]:
            obj = getattr(obj, name, None)
            if obj is None or name.startswith("_"):
                return None
        return ".".join(parts[: stop + 1]), target
    return None


def _resolve_external(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    url = _EXTERNAL_PAGES.get(target.split(".")[0])
    found = _external_page(target) if url else None
    if found is None:
        return None
    from docutils import nodes

    page, anchor = found
    refuri = url.format(page=page)
    if anchor != page:
        refuri += "#" + anchor
    reference = nodes.reference("", "", internal=False, refuri=refuri)
    reference.append(contnode)
    return reference


def setup(app):
    # Run before numpydoc (priority 500) parses the docstring.
    app.connect("autodoc-process-docstring", _strip_sklearn_xrefs, priority=400)
    app.connect("missing-reference", _resolve_external)
    app.connect("html-page-context", _mark_break_points)

"""Sphinx configuration for the sklearn-attn documentation.

Build (from the repository root)::

    PYTHONPATH=. python -m sphinx -W --keep-going -b html docs docs/_build/html

Only extensions shipped with Sphinx itself and numpydoc are used; nothing is
fetched from the network (no intersphinx), so the build works offline.
"""

from __future__ import annotations

import os
import re
import sys

# Make the package importable when the docs are built from a source checkout.
sys.path.insert(0, os.path.abspath(".."))

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
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "Thumbs.db", ".DS_Store"]
root_doc = "index"
default_role = "literal"

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

# -- HTML output -------------------------------------------------------------------

html_theme = "alabaster"
html_title = f"sklearn-attn {release}"
html_theme_options = {
    "description": "Learning single attention layers, the scikit-learn way",
    "fixed_sidebar": True,
    "show_relbars": True,
}
html_sidebars = {
    "**": ["about.html", "navigation.html", "relations.html", "searchbox.html"],
}
html_show_sourcelink = False

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


def setup(app):
    # Run before numpydoc (priority 500) parses the docstring.
    app.connect("autodoc-process-docstring", _strip_sklearn_xrefs, priority=400)

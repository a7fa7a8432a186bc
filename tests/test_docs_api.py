"""The API reference (docs/api.rst) documents every public name of every public module.

A public module is any module of the package whose dotted path has no part starting
with an underscore; its public names are its ``__all__``. A name counts as documented
where ``api.rst`` lists it (in an ``autosummary`` block or an ``auto*`` directive)
under that module, or, for a name a module re-exports (``sklearn_attn.potts``'s
``PottsPseudoLikelihood`` is ``sklearn_attn.PottsPseudoLikelihood``), where the same
object is documented under another module.
"""

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import sklearn_attn

API_RST = Path(__file__).resolve().parents[1] / "docs" / "api.rst"

_MODULE_DIRECTIVE = re.compile(r"^\.\. (?:currentmodule|automodule|module):: (\S+)")
_OBJECT_DIRECTIVE = re.compile(r"^\.\. auto(?:class|function|data|attribute):: (\S+)")


def public_modules():
    names = ["sklearn_attn"]
    for info in pkgutil.walk_packages(sklearn_attn.__path__, "sklearn_attn."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def documented_entries(text):
    """``(module, name)`` pairs of the objects api.rst documents, and its modules."""
    entries, modules = [], set()
    module, in_autosummary = None, False
    for line in text.splitlines():
        match = _MODULE_DIRECTIVE.match(line)
        if match:
            module, in_autosummary = match.group(1), False
            if not line.startswith(".. currentmodule::"):
                modules.add(module)
            continue
        match = _OBJECT_DIRECTIVE.match(line)
        if match:
            entries.append((module, match.group(1)))
            continue
        if line.startswith(".. autosummary::"):
            in_autosummary = True
            continue
        if in_autosummary:
            item = line.strip()
            if line and not line[0].isspace():
                in_autosummary = False
            elif item and not item.startswith(":"):
                entries.append((module, item.lstrip("~")))
    return entries, modules


@pytest.fixture(scope="module")
def api():
    return documented_entries(API_RST.read_text(encoding="utf-8"))


def test_parser_reads_autosummary_blocks():
    text = """
.. currentmodule:: sklearn_attn

.. autosummary::
   :toctree: generated/

   BiasedRFA
   RFMLP

Text after the block.

.. automodule:: sklearn_attn.potts

.. autodata:: ALPHABETS
"""
    entries, modules = documented_entries(text)
    assert entries == [
        ("sklearn_attn", "BiasedRFA"),
        ("sklearn_attn", "RFMLP"),
        ("sklearn_attn.potts", "ALPHABETS"),
    ]
    assert modules == {"sklearn_attn.potts"}


def test_every_public_module_has_a_section(api):
    _, modules = api
    assert set(public_modules()) - modules == set()


def test_documented_names_are_public(api):
    entries, _ = api
    assert entries, "no entries read from api.rst"
    for module_name, name in entries:
        module = importlib.import_module(module_name)
        assert name in module.__all__, f"{module_name}.{name} is not in __all__"


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_documented(api, module_name):
    entries, _ = api
    documented = {(m, n) for m, n in entries}
    documented_objects = [getattr(importlib.import_module(m), n) for m, n in entries]
    module = importlib.import_module(module_name)
    missing = [
        name
        for name in module.__all__
        if name != "__version__"
        and (module_name, name) not in documented
        and not any(getattr(module, name) is obj for obj in documented_objects)
    ]
    assert missing == [], f"{module_name}: not in docs/api.rst: {missing}"

"""The user guide and the docstrings read as documentation, not as a lab notebook.

Three kinds of phrase belong to measurement logs, not to documentation:

``load average``
    how busy the machine was while something was timed;
``session``
    the voice of one working session: "pilot runs", "we measured", "today",
    "this session", "short of the twice it aims at", the ``[recalled]`` tags
    (each family page states once, in a box, which of its choices are recalled),
    "shared with other work", ``/usr/bin/time``, "in one run of", "in the quick
    run", "on a two-core machine", "at a load of", a development version;
``benchmark path``
    paths into ``benchmarks/`` or its ``results/*.json`` files, which a user who
    installed the package does not have.

The user guide is every ``.rst`` page under ``docs/`` but the pages of
:data:`NOT_USER_GUIDE`; the docstrings and comments are those of every module of
``sklearn_attn``. Measurements belong on the pages generated from the committed
result files (numbers through the ``:measured:`` role), and the development page
names the benchmark scripts.

Run as a script, ``python tests/test_docs_prose.py`` prints the count of each
kind per file, exceptions included.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "sklearn_attn"

PHRASES = {
    "load average": re.compile(r"load\s+average", re.IGNORECASE),
    "session": re.compile(
        r"pilot\s+runs?\b|\bwe\s+measured\b|measured\s+today|\btoday\b"
        r"|this\s+session|short\s+of\s+the\s+twice|\[recalled"
        r"|shared\s+with\s+other\s+(?:work|jobs)|/usr/bin/time"
        r"|in\s+one\s+run\s+of|in\s+(?:our|the\s+quick)\s+runs?\b"
        r"|in\s+our\s+(?:benchmark|pilot)|two-core\s+machine|at\s+a\s+load\s+of"
        r"|nearly\s+free\s+cores|\b\d+\.\d+\.\d+\.dev\d",
        re.IGNORECASE,
    ),
    "benchmark path": re.compile(r"benchmarks/|results/[\w./*-]*\.json"),
}

# Pages under docs/ that are not the user guide, and why.
NOT_USER_GUIDE = {
    # For developers: it names the benchmark scripts and how to run them.
    "docs/development.rst": "the developers' guide",
    # A pointer to CHANGELOG.md, the project's history.
    "docs/changelog.rst": "the changelog",
}


_BUILT = {"_build", "generated", "auto_examples", "_templates"}


def user_guide_pages():
    return [
        path
        for path in sorted(DOCS.rglob("*.rst"))
        if not _BUILT & set(path.relative_to(DOCS).parts)
        and _name(path) not in NOT_USER_GUIDE
    ]


def package_modules():
    return sorted(PACKAGE.rglob("*.py"))


def _name(path):
    return path.relative_to(ROOT).as_posix()


def docstrings_and_comments(source):
    """``(line, text)`` of every docstring and comment of a Python source."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.append((body[0].lineno, body[0].value.value))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return found


def phrases(text, first_line=1):
    """``(kind, line, phrase)`` of every log phrase of a text."""
    hits = []
    for kind, pattern in PHRASES.items():
        for match in pattern.finditer(text):
            line = first_line + text.count("\n", 0, match.start())
            hits.append((kind, line, " ".join(match.group().split())))
    return sorted(hits, key=lambda hit: hit[1])


def page_phrases(path):
    return phrases(path.read_text(encoding="utf-8"))


def module_phrases(path):
    hits = []
    for line, text in docstrings_and_comments(path.read_text(encoding="utf-8")):
        hits.extend(phrases(text, line))
    return sorted(hits, key=lambda hit: hit[1])


def all_hits():
    """``{file: hits}`` over the user guide and the package, exceptions included."""
    hits = {_name(p): page_phrases(p) for p in user_guide_pages()}
    hits.update({_name(p): module_phrases(p) for p in package_modules()})
    return {name: found for name, found in hits.items() if found}


@pytest.mark.parametrize(
    "text, kinds",
    [
        ("took 385 s (load average 5 to 6.6)", ["load average"]),
        ("in pilot runs at d = 6", ["session"]),
        ("the identity **[recalled, low confidence]**", ["session"]),
        ("see ``benchmarks/bench_dask.py``", ["benchmark path"]),
        ("in ``results/mha_threshold_long.json``", ["benchmark path"]),
        ("by a pilot mean from the first block", []),
        ("the recalled choices are parameters", []),
        ("stopped short of ``tol``", []),
    ],
)
def test_phrases(text, kinds):
    assert [kind for kind, _, _ in phrases(text)] == kinds


def test_docstrings_and_comments_are_read_not_code():
    source = (
        '"""Module: pilot runs."""\n'
        "x = 'load average'  # this session\n"
        "def f():\n"
        '    """benchmarks/ here."""\n'
    )
    found = docstrings_and_comments(source)
    assert sorted(line for line, _ in found) == [1, 2, 4]
    assert not any("x =" in text for _, text in found)


def test_exceptions_name_existing_files():
    for name in NOT_USER_GUIDE:
        assert (ROOT / name).is_file(), name


@pytest.mark.parametrize("path", user_guide_pages(), ids=_name)
def test_user_guide_reads_as_documentation(path):
    hits = page_phrases(path)
    assert not hits, "\n".join(
        f"{_name(path)}:{line}: {kind}: {phrase!r}" for kind, line, phrase in hits
    )


@pytest.mark.parametrize("path", package_modules(), ids=_name)
def test_docstrings_and_comments_read_as_documentation(path):
    hits = module_phrases(path)
    assert not hits, "\n".join(
        f"{_name(path)}:{line}: {kind}: {phrase!r}" for kind, line, phrase in hits
    )


if __name__ == "__main__":
    hits = all_hits()
    width = max((len(name) for name in hits), default=0)
    totals = dict.fromkeys(PHRASES, 0)
    for name, found in hits.items():
        counts = {kind: sum(k == kind for k, _, _ in found) for kind in PHRASES}
        for kind, count in counts.items():
            totals[kind] += count
        cells = "  ".join(f"{kind}: {count}" for kind, count in counts.items())
        print(f"{name:{width}s}  {cells}")
    print(
        f"{'total':{width}s}  "
        + "  ".join(f"{kind}: {count}" for kind, count in totals.items())
    )
    sys.exit(0)

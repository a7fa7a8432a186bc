"""The claims ledger (docs/user_guide/claims.rst) points at things that exist.

Every table it names is a CSV file that the reproductions document as an output,
every benchmark is a script of ``benchmarks/``, every test a test function of
``tests/``, and every row's outcome starts with one of the four labels. Every
``:measured:`` number of the docs resolves to a committed result file, and the
converted sections of the ledger type no measured-looking number by hand.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "docs" / "user_guide" / "claims.rst"
REPRODUCING = ROOT / "docs" / "user_guide" / "reproducing.rst"
OUTCOMES = ("reproduced", "caveat", "disagrees", "not tested")


def claim_rows(text):
    """The ``(claim, test, outcome)`` cells of every list-table row."""
    rows, cells = [], None
    for line in text.splitlines():
        if line.startswith("   * - "):
            cells = [line[len("   * - ") :]]
            rows.append(cells)
        elif line.startswith("     - ") and cells is not None:
            cells.append(line[len("     - ") :])
        elif line.startswith("       ") and cells is not None:
            cells[-1] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            cells = None
    return [row for row in rows if row[0] != "Claim"]


@pytest.fixture(scope="module")
def claims_text():
    return CLAIMS.read_text(encoding="utf-8")


def test_every_row_has_a_claim_a_test_and_an_outcome(claims_text):
    rows = claim_rows(claims_text)
    # Four papers, several claims each.
    assert len(rows) >= 16
    for claim, test, outcome in rows:
        assert claim and test
        label = re.match(r"\*\*([a-z ]+)[.*]", outcome)
        assert label is not None and label.group(1) in OUTCOMES, outcome


def test_tables_are_documented_outputs(claims_text):
    outputs = set(
        re.findall(r"``(\w+\.csv)``", REPRODUCING.read_text(encoding="utf-8"))
    )
    named = set(re.findall(r"``(\w+\.csv)``", claims_text))
    assert named, "the ledger names no table"
    assert named <= outputs, sorted(named - outputs)


def test_benchmarks_and_tests_exist(claims_text):
    for script in set(re.findall(r"``(bench_\w+\.py)``", claims_text)):
        assert (ROOT / "benchmarks" / script).is_file(), script
    sources = "".join(
        path.read_text(encoding="utf-8") for path in (ROOT / "tests").rglob("test_*.py")
    )
    for name in set(re.findall(r"``(test_\w+)``", claims_text)):
        assert re.search(rf"^def {name}\(", sources, re.MULTILINE), name


# -- Measured numbers ----------------------------------------------------------------
#
# docs/_ext/measured.py renders ``:measured:`FILE...:VALUE:SPEC``` from a file of
# benchmarks/results/ at build time; it is loaded here from its path, so that the
# tests and the build resolve references with the same code.

_spec = importlib.util.spec_from_file_location(
    "measured", ROOT / "docs" / "_ext" / "measured.py"
)
measured = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(measured)

DOCS_SOURCES = [
    path
    for path in sorted((ROOT / "docs").rglob("*.rst"))
    if not {"_build", "generated", "auto_examples"} & set(path.parts)
]

# The ledger's sections: every outcome cites its measured numbers by role.
TRACKED_SECTIONS = ("claims_rfa", "claims_potts", "claims_mha", "claims_implicit_bias")


def test_every_measured_reference_resolves():
    """Every ``:measured:`` reference of the docs names a file, a unique row (or
    an aggregate), a present field and a format that applies."""
    failures, count = [], 0
    for path in DOCS_SOURCES:
        for reference in measured.references(path.read_text(encoding="utf-8")):
            count += 1
            try:
                measured.resolve(reference)
            except measured.MeasuredError as exc:
                failures.append(f"{path.relative_to(ROOT)}: {exc}")
    assert count, "no :measured: reference in the docs"
    assert not failures, "\n".join(failures)


def section(text, label):
    """The text of the ledger's section ``label``, up to the next section."""
    start = text.index(f".. _{label}:")
    end = text.find(".. _claims_", start + 1)
    return text[start : end if end >= 0 else len(text)]


# What looks measured: a decimal fraction (0.3, 1.87), a percentage (16%, 6\%),
# thousands separators (25,600, 25{,}600), e-notation (1e-5) or a power of ten
# (10^{-15}).
MEASURED_LOOKING = re.compile(
    r"\d*\.\d+|\d+\s*\\?%|\d{1,3}(?:,|\{,\})\d{3}|\d[eE][-+]?\d+|10\^\{?-?\d+\}?"
)
_MATH = re.compile(r":math:`([^`]*)`")
_OTHER_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`[^`]*`")
_LITERAL = re.compile(r"``.*?``")
_RELATION = re.compile(r"=|<|>|\\(?:le|leq|ge|geq|neq)(?![a-zA-Z])")


def untracked_numbers(text):
    """The measured-looking numbers of a reST text that no role produces.

    A number looks measured when it has a decimal point, a percent sign,
    thousands separators, an exponent (``1e-5``) or is a power of ten
    (``10^{-15}``): forms that settings rarely take and measurements nearly
    always do. It is exempt inside a ``:measured:`` role (read from a file),
    inside another role but ``:math:`` (``:class:``, ``:ref:``: names) or an
    inline literal (code and file names: ``tol=1e-5``), and in ``:math:``
    to the right of a relation, the form a setting is written in
    (``n = 25{,}600``, ``\\delta \\le 0.1``, ``\\gamma = 0.5, 1``). Plain
    integers (``d = 4``, 200 heads, 3 teachers) always pass: most are
    settings, and no form tells a measured count from a setting, so counts are
    cited by role by convention and left to review.
    """
    text = _LITERAL.sub(" ", text)
    text = _MATH.sub(lambda m: " " + _RELATION.split(m.group(1), maxsplit=1)[0], text)
    text = _OTHER_ROLE.sub(" ", text)
    return MEASURED_LOOKING.findall(text)


@pytest.mark.parametrize(
    "text, found",
    [
        ("excess 1.87% at n = 400", ["1.87"]),
        ("**caveat.** 16% above", ["16%"]),
        ("at 25,600 and :math:`25{,}600`", ["25,600", "25{,}600"]),
        ("error :math:`10^{-15}` and 3e-7", ["10^{-15}", "3e-7"]),
        ("at 0.3 from twice as many", ["0.3"]),
        (":measured:`a.csv[n=25600]:mean(x):.2%` at :math:`n = 25{,}600`", []),
        (":math:`\\delta \\le 0.1`, ``tol=1e-5``, :ref:`v1.2`, d = 4, 3 seeds", []),
        (":math:`\\left(0.5\\right) = 2`", ["0.5"]),
    ],
)
def test_untracked_numbers(text, found):
    assert untracked_numbers(text) == found


@pytest.mark.parametrize("label", TRACKED_SECTIONS)
def test_ledger_numbers_are_read_from_files(claims_text, label):
    """No outcome of the section types a measured-looking number by hand."""
    rows = claim_rows(section(claims_text, label))
    assert rows
    untracked = {
        claim[:60]: numbers
        for claim, _, outcome in rows
        if (numbers := untracked_numbers(outcome))
    }
    assert not untracked, "\n".join(
        f"{claim}...: {', '.join(numbers)}" for claim, numbers in untracked.items()
    )


@pytest.fixture
def results(tmp_path):
    """A results folder with one CSV table and one JSON file."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text(
        "model,n,err,note\na,100,0.25,\na,200,0.125,x\nb,100,0.5,\nb,100,0.75,\n",
        encoding="utf-8",
    )
    (tmp_path / "r.json").write_text(
        json.dumps(
            {
                "seconds": 12345.6,
                "rows": [
                    {"model": "a", "delta": 0.1, "ok": True, "fits": [{"n": 16}]},
                    {"model": "b", "delta": None, "ok": False, "fits": []},
                ],
            }
        ),
        encoding="utf-8",
    )
    return tmp_path


@pytest.mark.parametrize(
    "reference, text",
    [
        ("sub/t.csv[model=a, n=200]:err", "0.125"),
        ("sub/t.csv[model=a,n=200]:err:.1%", "12.5%"),
        ("sub/t.csv[model=b]:mean(err):.3f", "0.625"),
        ("sub/t.csv[model=b]:std(err)*100:.1f", "12.5"),
        ("sub/t.csv[n=100]:median(err)", "0.5"),
        ("sub/t.csv[err>0.2, err<=0.5]:count()", "2"),
        ("sub/t.csv[model!=a]:max(err)", "0.75"),
        ("sub/t.csv:min(n)", "100"),
        ("sub/t.csv[model=a,\n       n=200]:note", "x"),
        ("r.json:seconds:,.0f", "12,346"),
        ("r.json/rows/0/fits/0:n", "16"),
        ("r.json/rows[delta=0.1]:model", "a"),
        ("r.json/rows[ok=false]:model", "b"),
    ],
)
def test_measured_resolves(results, reference, text):
    assert measured.resolve(reference, root=results) == text


@pytest.mark.parametrize(
    "reference, message",
    [
        ("sub/t.csv[model=a]err", "expected FILE"),
        ("sub/none.csv[model=a]:err", "no file"),
        ("../outside.json:x", "is outside"),
        ("sub/t.csv[model=c]:err", "0 rows match"),
        ("sub/t.csv[model=a,\n       n=300]:err", "0 rows match"),
        ("sub/t.csv[model=b]:err", "2 rows match"),
        ("sub/t.csv[modle=a]:err", "no column 'modle'"),
        ("sub/t.csv[model=a, n=100]:error", "no field 'error'"),
        ("sub/t.csv[model=a, n=100]:note", "note is empty"),
        ("sub/t.csv[model=a]:mean(note)", "not a number"),
        ("sub/t.csv[model=c]:mean(err)", "of no rows"),
        ("sub/t.csv[model=a, n=100]:model:.2f", "cannot format 'a'"),
        ("sub/t.csv[model~a]:err", "not NAME OP VALUE"),
        ("r.json/rows/2:model", "no item 2 in a list of 2"),
        ("r.json/runs/0:model", "no key 'runs'"),
        ("r.json[model=a]:seconds", "applies to a table"),
        ("r.json:total(seconds)", "not NAME, AGGREGATE(NAME)"),
        ("r.json:seconds*1e", "not NAME, AGGREGATE(NAME)"),
        ("r.json:mean(seconds)", "applies to a table"),
    ],
)
def test_unresolved_reference_is_an_error_naming_it(results, reference, message):
    with pytest.raises(measured.MeasuredError) as excinfo:
        measured.resolve(reference, root=results)
    name = " ".join(reference.split())
    assert str(excinfo.value).startswith(f"measured reference {name!r}: ")
    assert message in str(excinfo.value)


def test_committed_reproductions_say_how_they_were_made():
    """Each folder of benchmarks/results/reproduce/ holds the tables its
    ``run.json`` lists, written by one ``reproduce NAME --run-json`` command."""
    folders = sorted(
        p for p in (measured.RESULTS / "reproduce").iterdir() if p.is_dir()
    )
    assert folders
    for folder in folders:
        record = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        assert record["command"].startswith(
            f"python -m sklearn_attn reproduce {folder.name} "
        ), record["command"]
        assert "--quick" not in record["command"].split()
        assert record["tables"] == sorted(p.name for p in folder.glob("*.csv"))


def test_sphinx_build_renders_and_fails_on_a_bad_reference(tmp_path):
    """The role in a build: a resolved number in the page, a bad one fails -W."""
    pytest.importorskip("sphinx")
    from sphinx.cmd.build import build_main

    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
        "extensions = ['measured']\n",
        encoding="utf-8",
    )
    # Wrapped, as in the docs' paragraphs.
    good = "vanilla_iterations.json/rows[teacher=0,\nmax_iter=500]:n_iter"
    (source / "index.rst").write_text(
        f"Title\n=====\n\nIt ran :measured:`{good}` iterations.\n", encoding="utf-8"
    )
    argv = ["-W", "-q", "-b", "html", str(source), str(tmp_path / "html")]
    assert build_main(argv) == 0
    expected = measured.resolve(good)
    assert f">{expected}</span> iterations" in (
        tmp_path / "html" / "index.html"
    ).read_text(encoding="utf-8")

    bad = "vanilla_iterations.json/rows[teacher=9]:n_iter"
    (source / "index.rst").write_text(
        f"Title\n=====\n\nIt ran :measured:`{bad}` iterations.\n", encoding="utf-8"
    )
    warnings = tmp_path / "warnings.txt"
    assert build_main(argv + ["-E", "-w", str(warnings)]) != 0
    assert f"measured reference {bad!r}: 0 rows match" in warnings.read_text()

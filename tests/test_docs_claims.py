"""The claims ledger (docs/user_guide/claims.rst) points at things that exist.

Every table it names is a CSV file that the reproductions document as an output,
every benchmark is a script of ``benchmarks/``, every test a test function of
``tests/``, and every row's outcome starts with one of the four labels.
"""

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
        path.read_text(encoding="utf-8") for path in (ROOT / "tests").glob("test_*.py")
    )
    for name in set(re.findall(r"``(test_\w+)``", claims_text)):
        assert re.search(rf"^def {name}\(", sources, re.MULTILINE), name

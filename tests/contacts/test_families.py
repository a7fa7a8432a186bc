"""Many families in one ``contacts`` command: each into a folder of its own, the
files of one-by-one runs, one summary table, and failures that stop nobody else.

The reference is the command run on each family alone.
"""

import csv

import pytest

from sklearn_attn.__main__ import main
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import decode_sequences

FILES = ("contacts.csv", "contacts.ec", "couplings.npz", "summary.json")


def _family(path, seed, n=80, length=8):
    codes, _ = make_potts_sequences(
        n_samples=n, n_sites=length, n_states=21, random_state=seed
    )
    sequences = decode_sequences(codes, alphabet="protein")
    path.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(sequences)))
    return path


def _contacts(*argv):
    return main(["contacts", *argv, "--max-iter", "3", "-q"])


def _read_table(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _same_files(one, other):
    for name in FILES[:3]:
        assert (one / name).read_bytes() == (other / name).read_bytes(), name


@pytest.mark.parametrize("n_jobs", ["1", "2"])
def test_families_are_fitted_as_one_by_one(tmp_path, n_jobs, capsys):
    paths = [_family(tmp_path / f"fam{k}.fasta", seed=k) for k in range(3)]
    for path in paths:
        assert _contacts(str(path), "-o", str(tmp_path / "alone" / path.stem)) == 0
    together = tmp_path / "together"
    argv = [*map(str, paths), "-o", str(together), "--n-jobs", n_jobs]
    assert _contacts(*argv) == 0
    for path in paths:
        _same_files(tmp_path / "alone" / path.stem, together / path.stem)
    rows = _read_table(together / "families.csv")
    assert [row["family"] for row in rows] == ["fam0", "fam1", "fam2"]
    assert {row["status"] for row in rows} == {"ok"}
    assert all(int(row["L"]) == 8 and row["output_dir"] for row in rows)
    assert "3 of 3 families fitted" in capsys.readouterr().err


def test_a_failing_family_stops_nobody(tmp_path, capsys):
    good = _family(tmp_path / "good.a2m", seed=0)
    bad = tmp_path / "bad.fasta"
    bad.write_text(">a\nACD\n>b\nAC\n")  # not aligned
    missing = tmp_path / "missing.fasta"
    status = _contacts(str(bad), str(good), str(missing), "-o", str(tmp_path / "out"))
    assert status == 1
    rows = {row["family"]: row for row in _read_table(tmp_path / "out/families.csv")}
    assert rows["good"]["status"] == "ok"
    assert rows["bad"]["status"].startswith("error: Record 2")
    assert rows["missing"]["status"].startswith("error: ")
    assert (tmp_path / "out" / "good" / "contacts.csv").exists()
    err = capsys.readouterr().err
    assert "bad.fasta: error: Record 2" in err and "1 of 3 families fitted" in err


def test_family_folders_are_named_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _family(tmp_path / "a" / "kunitz.fasta.gz.fasta", seed=1)
    two = _family(tmp_path / "b" / "kunitz.fasta", seed=2)
    assert _contacts(str(one), str(two), "-o", str(tmp_path / "out")) == 0
    rows = _read_table(tmp_path / "out" / "families.csv")
    assert [row["family"] for row in rows] == ["kunitz", "kunitz_2"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--distances", "d.tsv"], "one file per alignment: 2 alignment(s) but 1"),
        (["--weights", "w.txt"], "--weights names one file, so it takes one"),
        (["--save-weights", "w.txt"], "--save-weights names one file"),
    ],
)
def test_options_of_one_family_are_refused_for_several(
    tmp_path, capsys, extra, message
):
    paths = [str(_family(tmp_path / f"f{k}.fasta", seed=k)) for k in range(2)]
    assert _contacts(*paths, "-o", str(tmp_path / "out"), *extra) == 1
    assert message in capsys.readouterr().err

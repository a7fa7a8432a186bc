"""From an alignment file to contacts: alignment conventions, the estimator's
handling of unknown letters, and the ``contacts`` command.

The fits are tiny (a few L-BFGS iterations on synthetic protein-like
alignments): these tests check what is read, dropped, numbered and written,
and that dirty and clean versions of one alignment give identical files; the
statistical quality of the contacts is tested on PF00014 elsewhere.
"""

import csv
import io
import json

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.__main__ import main
from sklearn_attn.contacts import read_alignment, read_couplings
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import (
    ALPHABETS,
    apc,
    decode_sequences,
    frobenius_scores,
    sequence_weights,
)

PROTEIN = ALPHABETS["protein"]


def _sequences(seed, n=150, length=12):
    """Aligned protein-like strings with planted couplings (q = 21)."""
    codes, _ = make_potts_sequences(
        n_samples=n, n_sites=length, n_states=21, random_state=seed
    )
    return decode_sequences(codes, alphabet="protein")


def _fasta(names, sequences):
    return "".join(f">{n}\n{s}\n" for n, s in zip(names, sequences, strict=True))


# ---------------------------------------------------------------------------
# read_alignment: unknown letters and focus mode


def test_unknown_letters_dropped_gapped_or_refused():
    text = ">a\nAC-DE\n>b\nACXDE\n>c\nBCZDE\n>d\nacdef\n"
    names, seqs, info = read_alignment(
        io.StringIO(text), alphabet="protein", return_info=True
    )
    assert names == ["a", "d"] and seqs == ["AC-DE", "ACDEF"]
    assert info.dropped == ["b", "c"] and info.n_read == 4
    assert_array_equal(info.positions, [1, 2, 3, 4, 5])
    assert info.focus is None and info.residues is None
    _, seqs = read_alignment(
        io.StringIO(text), alphabet="protein", unknown_letters="gap"
    )
    assert seqs == ["AC-DE", "AC-DE", "-C-DE", "ACDEF"]
    with pytest.raises(ValueError, match=r"Record 2 \('b'\).*'X'.*unknown_letters"):
        read_alignment(io.StringIO(text), alphabet="protein", unknown_letters="error")
    with pytest.raises(ValueError, match="unknown_letters must be one of"):
        read_alignment(io.StringIO(text), alphabet="protein", unknown_letters="skip")
    # No alphabet: nothing is checked, as before.
    assert read_alignment(io.StringIO(text))[1][1] == "ACXDE"
    with pytest.raises(ValueError, match="none is left"):
        read_alignment(io.StringIO(">a\nAXC\n"), alphabet="protein")


def test_focus_keeps_its_upper_case_columns_and_numbers_residues():
    # Focus: residues 21..27 (A c D - E F g); kept columns: A D E F.
    text = ">other\nKLMNPQR\n>Q9XYZ1_HUMAN/21-27\nAcD-EFg\n>third\nAXMNPQR\n"
    names, seqs, info = read_alignment(
        io.StringIO(text), alphabet="protein", focus="Q9XYZ1", return_info=True
    )
    assert info.focus == "Q9XYZ1_HUMAN/21-27"
    assert_array_equal(info.columns, [0, 2, 4, 5])
    # A=21, c=22, D=23, E=24 (the gap is no residue), F=25.
    assert_array_equal(info.positions, [21, 23, 24, 25])
    assert info.residues == "ADEF"
    # 'third' has its X in a dropped column: it stays.
    assert names == ["other", "Q9XYZ1_HUMAN/21-27", "third"]
    assert seqs == ["KMPQ", "ADEF", "AMPQ"]


def test_focus_in_a2m_counts_insert_residues():
    # a2m: lower case and '.' are inserts, dropped before the focus is read.
    text = ">f/5-12\nAcDeE-F\n>g\nK.L.MNP\n"
    names, seqs, info = read_alignment(
        io.StringIO(text), format="a2m", focus="f/5-12", return_info=True
    )
    assert seqs == ["ADEF", "KLMP"]
    # A=5 c=6 D=7 e=8 E=9 F=10 (the deletion '-' is no residue).
    assert_array_equal(info.positions, [5, 7, 9, 10])
    assert_array_equal(info.columns, [0, 1, 2, 4])


def test_focus_errors():
    text = ">ab/1-3\nACD\n>ac/1-3\nACE\n"
    with pytest.raises(ValueError, match="prefix of 2 names"):
        read_alignment(io.StringIO(text), focus="a")
    with pytest.raises(ValueError, match="names no sequence"):
        read_alignment(io.StringIO(text), focus="zz")
    with pytest.raises(ValueError, match="no upper-case letter"):
        read_alignment(io.StringIO(">q\nac-\n>r\nACD\n"), focus="q")
    with pytest.raises(TypeError, match="focus must be"):
        read_alignment(io.StringIO(text), focus=3)


# ---------------------------------------------------------------------------
# The estimator: unknown letters, N_eff


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_estimator_drops_sequences_with_unknown_letters(global_random_seed):
    clean = _sequences(global_random_seed, n=80, length=6)
    dirty = clean[:40] + ["ACXDEF", "BBBBBB"] + clean[40:]
    weights = np.linspace(0.5, 2.0, len(clean))
    dirty_weights = np.concatenate([weights[:40], [7.0, 9.0], weights[40:]])
    kwargs = dict(parametrization="full", max_iter=5, random_state=0)
    expected = PottsPseudoLikelihood(**kwargs).fit(clean, sample_weight=weights)
    model = PottsPseudoLikelihood(**kwargs).fit(dirty, sample_weight=dirty_weights)
    assert model.n_sequences_dropped_ == 2 and expected.n_sequences_dropped_ == 0
    # The same rows and weights: the same arithmetic, bit for bit.
    assert_array_equal(model.couplings_, expected.couplings_)
    assert model.n_eff_ == pytest.approx(weights.sum())
    with pytest.raises(ValueError, match=r"X\[1\] has 'X' at position 2"):
        model.predict(["ACDEFG", "ACXEFG"])
    gapped = PottsPseudoLikelihood(unknown_letters="gap", **kwargs).fit(dirty)
    assert gapped.n_sequences_dropped_ == 0
    assert gapped.predict(["ACXEFG"]).shape == (1, 6)
    with pytest.raises(ValueError, match="not in the alphabet"):
        PottsPseudoLikelihood(unknown_letters="error", **kwargs).fit(dirty)
    with pytest.raises(ValueError, match="none is left"):
        PottsPseudoLikelihood(**kwargs).fit(["AXA", "BBB"])


def test_n_eff_is_the_sum_of_the_reweighting(global_random_seed):
    sequences = _sequences(global_random_seed, n=60, length=8)
    model = PottsPseudoLikelihood(
        "full", sequence_identity=0.5, max_iter=2, random_state=0
    )
    with pytest.warns(ConvergenceWarning):  # max_iter=2
        model.fit(sequences)
    codes = np.array([[PROTEIN.index(c) for c in s] for s in sequences])
    expected = sequence_weights(codes, identity_threshold=0.5, n_states=21).sum()
    assert model.n_eff_ == pytest.approx(expected, rel=1e-12)
    with pytest.warns(ConvergenceWarning):
        unweighted = PottsPseudoLikelihood(max_iter=1).fit(codes[:, :3])
    assert unweighted.n_eff_ == 60.0


# ---------------------------------------------------------------------------
# The command


def _run(tmp_path, alignment, *options, name="out"):
    out = tmp_path / name
    status = main(["contacts", str(alignment), "-q", "-o", str(out), *options])
    return status, out


def _distance_table(path, length, seed):
    rng = np.random.default_rng(seed)
    lines = [
        f"{i} {j} 0.0 {rng.uniform(3.0, 14.0):.2f}"
        for i in range(1, length + 1)
        for j in range(i + 1, length + 1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_contacts_command_writes_every_file(tmp_path, global_random_seed):
    sequences = _sequences(global_random_seed)
    length = len(sequences[0])
    alignment = tmp_path / "family.fasta"
    alignment.write_text(_fasta([f"s{k}" for k in range(len(sequences))], sequences))
    distances = _distance_table(tmp_path / "d.txt", length, global_random_seed)
    status, out = _run(
        tmp_path, alignment, "--max-iter", "4", "--distances", str(distances)
    )
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sequences_read"] == summary["sequences_kept"] == len(sequences)
    assert summary["L"] == length and summary["q"] == 21
    assert summary["iterations"] == 4 and summary["converged"] is False
    assert set(summary["precision"]) == {"L/5", "L/2", "L", "2L"}
    assert summary["parameters"] == length * 21 + length * (length - 1) // 2 * 441

    with open(out / "contacts.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["i", "j", "residue_i", "residue_j", "score", "score_raw"]
    assert len(rows) == length * (length - 1) // 2
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert {(int(r["i"]), int(r["j"])) for r in rows} == {
        (i, j) for i in range(1, length + 1) for j in range(i + 1, length + 1)
    }

    ec = (out / "contacts.ec").read_text().splitlines()
    assert len(ec) == len(rows) and ec[0].split()[:5] == ["1", "-", "2", "-", "0"]

    # The couplings file gives back the model's scores.
    saved = read_couplings(out / "couplings.npz")
    raw = frobenius_scores(saved.couplings)
    first = rows[0]
    i, j = int(first["i"]) - 1, int(first["j"]) - 1
    assert apc(raw)[i, j] == pytest.approx(float(first["score"]), rel=1e-7)
    assert raw[i, j] == pytest.approx(float(first["score_raw"]), rel=1e-7)
    assert "".join(saved.states) == PROTEIN


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gaps_ignore_fits_the_gapped_sites_as_missing(tmp_path, global_random_seed):
    """``--gaps ignore`` is the estimator with ``missing_state='-'``: no gap
    state in the couplings, the same numbers."""
    sequences = _sequences(global_random_seed)
    length = len(sequences[0])
    assert any("-" in s for s in sequences)
    alignment = tmp_path / "family.fasta"
    alignment.write_text(_fasta([f"s{k}" for k in range(len(sequences))], sequences))
    status, out = _run(tmp_path, alignment, "--max-iter", "4", "--gaps", "ignore")
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gaps"] == "ignore" and summary["q"] == 20
    assert summary["parameters"] == length * 20 + length * (length - 1) // 2 * 400
    saved = read_couplings(out / "couplings.npz")
    assert "".join(saved.states) == PROTEIN[1:]
    model = PottsPseudoLikelihood(
        "full",
        missing_state="-",
        sequence_identity=0.8,
        alpha_couplings=16.0,
        max_iter=4,
    ).fit(sequences)
    # The same arithmetic on codes and on text; the file stores float64.
    assert_allclose(saved.couplings, model.couplings_, rtol=1e-12, atol=1e-15)
    assert_allclose(saved.fields, model.fields_, rtol=1e-12, atol=1e-15)


def test_dirty_alignment_gives_the_contacts_of_the_clean_one(
    tmp_path, global_random_seed
):
    """Non-standard letters and lower-case inserts change nothing once cleaned."""
    rng = np.random.default_rng(global_random_seed)
    sequences = _sequences(global_random_seed)
    names = [f"s{k}" for k in range(len(sequences))]
    clean = tmp_path / "clean.fasta"
    clean.write_text(_fasta(names, sequences))
    # A2M: an insert column after column 3 (lower case, or '.' where the
    # sequence has none), lower-case inserts after column 7 in a few sequences
    # (the others get '.'), and sequences with X, B or Z that must be dropped.
    dirty_sequences, dirty_names = [], []
    for k, sequence in enumerate(sequences):
        insert = "".join(rng.choice(list("acdefg"), size=rng.integers(0, 3)))
        insert = insert or "."
        dirty = sequence[:3] + insert + sequence[3:7] + ("kl" if k % 5 else "..")
        dirty_sequences.append(dirty + sequence[7:])
        dirty_names.append(names[k])
        if k % 40 == 0:
            bad = list(sequence)
            bad[rng.integers(len(bad))] = str(rng.choice(list("XBZ")))
            dirty_sequences.append("".join(bad))
            dirty_names.append(f"bad{k}")
    dirty = tmp_path / "dirty.a2m"
    dirty.write_text(_fasta(dirty_names, dirty_sequences))
    status_clean, out_clean = _run(tmp_path, clean, "--max-iter", "6", name="c")
    status_dirty, out_dirty = _run(tmp_path, dirty, "--max-iter", "6", name="d")
    assert status_clean == status_dirty == 0
    summary = json.loads((out_dirty / "summary.json").read_text())
    assert summary["sequences_dropped"] == len(dirty_names) - len(names)
    assert all(name.startswith("bad") for name in summary["dropped_names"])
    assert (out_dirty / "contacts.csv").read_bytes() == (
        out_clean / "contacts.csv"
    ).read_bytes()
    assert_allclose(
        read_couplings(out_dirty / "couplings.npz").couplings,
        read_couplings(out_clean / "couplings.npz").couplings,
        rtol=0,
        atol=0,
    )


def test_focus_numbering_reaches_the_outputs(tmp_path, global_random_seed):
    sequences = _sequences(global_random_seed, n=60, length=8)
    first = sequences[0].replace("-", "A")  # a residue in every column
    focus = first[:2].lower() + first[2:]  # two insert residues
    names = ["FOCUS_HUMAN/101-108"] + [f"s{k}" for k in range(1, len(sequences))]
    alignment = tmp_path / "f.fasta"
    alignment.write_text(_fasta(names, [focus] + sequences[1:]))
    # Distances in focus numbering: residues 103..108.
    distances = tmp_path / "d.txt"
    distances.write_text(
        "\n".join(
            f"{i} {j} {abs(i - j) * 1.5:.1f}"
            for i in range(103, 109)
            for j in range(i + 1, 109)
        )
    )
    status, out = _run(
        tmp_path,
        alignment,
        "--focus",
        "FOCUS_HUMAN",
        "--max-iter",
        "3",
        "--distances",
        str(distances),
        "--min-separation",
        "1",
    )
    assert status == 0
    with open(out / "contacts.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {int(r["i"]) for r in rows} | {int(r["j"]) for r in rows} == set(
        range(103, 109)
    )
    residue = {int(r["i"]): r["residue_i"] for r in rows}
    assert residue[103] == first[2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["focus"] == names[0] and summary["L"] == 6
    assert summary["first_position"] == 103
    assert summary["precision"] is not None


def test_contacts_command_reports_bad_input(tmp_path, capsys):
    status, _ = _run(tmp_path, tmp_path / "missing.fasta")
    assert status == 1
    assert "error" in capsys.readouterr().err
    alignment = tmp_path / "a.fasta"
    alignment.write_text(">a\nACDE\n>b\nACDF\n")
    status, _ = _run(tmp_path, alignment, "--focus", "zz")
    assert status == 1 and "names no sequence" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["contacts", str(alignment), "--identity", "1.5"])

"""Files for other tools: ranked contact tables, plmc's coupling scores, parameters.

Round trips are exact: parameters are stored in float64 and read back bit for bit,
and the text writers' numbers are compared with the very strings they must write
(``format(x, ".8g")``, ``format(x, ".6f")``), so no tolerance is involved.
"""

import csv
import io
import json
import os
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sklearn_attn.contacts import (
    read_couplings,
    write_contacts,
    write_couplings,
    write_ec,
)
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import PottsPseudoLikelihood, apc, frobenius_scores

HEADER = ["i", "j", "residue_i", "residue_j", "score", "score_raw"]


def _write_text(writer, where, tmp_path, *args, **kwargs):
    """Call ``writer`` on a path or on a StringIO; return the text written."""
    if where == "path":
        path = tmp_path / "out.txt"
        assert writer(path, *args, **kwargs) is None
        # Read as bytes: the "\n" line endings are the ones written.
        return path.read_bytes().decode("utf-8")
    buffer = io.StringIO()
    assert writer(buffer, *args, **kwargs) is None
    return buffer.getvalue()


def _read_csv(text):
    rows = list(csv.reader(io.StringIO(text, newline="")))
    return rows[0], rows[1:]


def _random_parameters(rng, n_sites, n_states):
    couplings = rng.normal(size=(n_sites, n_states, n_sites, n_states))
    return couplings, rng.normal(size=(n_sites, n_states))


# -- write_couplings / read_couplings ------------------------------------------------


@pytest.mark.parametrize("where", ["path", "buffer"])
@pytest.mark.parametrize(
    "states", [list("ACDE-"), np.array([3, 5, 7, 11, 13]), "ACDE-"]
)
def test_couplings_round_trip(where, states, tmp_path, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    couplings, fields = _random_parameters(rng, n_sites=4, n_states=5)
    metadata = {
        "n_eff": 123.25,
        "alpha_couplings": np.float64(0.01),  # NumPy scalars stored as Python ones
        "alpha_fields": 0.0,
        "n_iter": np.int64(17),
        "objective": -1.5e300,
        "converged": True,
        "alphabet": "protein",
        "note": None,
    }
    if where == "path":
        file = tmp_path / "model.npz"
    else:
        file = io.BytesIO()
    write_couplings(
        file,
        couplings,
        fields,
        states=states,
        positions=[3, 4, 8, 20],
        residues="MKVL",
        **metadata,
    )
    if where == "buffer":
        file.seek(0)
    saved = read_couplings(file)

    assert sorted(saved) == sorted(
        ["couplings", "fields", "states", "positions", "residues", "metadata"]
    )
    assert saved.couplings.dtype == saved.fields.dtype == np.float64
    assert_array_equal(saved.couplings, couplings)
    assert_array_equal(saved.fields, fields)
    expected_states = list(states)
    assert saved.states.tolist() == [
        s.item() if isinstance(s, np.generic) else s for s in expected_states
    ]
    assert saved.states.dtype.kind == ("i" if isinstance(states, np.ndarray) else "U")
    assert saved.positions.dtype == np.int64
    assert_array_equal(saved.positions, [3, 4, 8, 20])
    assert saved.residues == "MKVL"
    assert saved.metadata == {
        key: value.item() if isinstance(value, np.generic) else value
        for key, value in metadata.items()
    }
    assert type(saved.metadata["n_iter"]) is int


def test_couplings_defaults_and_npz_layout():
    """Without positions or residues: 1..L and None; the arrays as documented."""
    couplings, fields = _random_parameters(np.random.default_rng(0), 3, 2)
    buffer = io.BytesIO()
    write_couplings(buffer, couplings.astype(np.float32), fields, states="ab")
    buffer.seek(0)
    saved = read_couplings(buffer)
    assert_array_equal(saved.positions, [1, 2, 3])
    assert saved.residues is None
    assert saved.metadata == {}
    # float32 couplings are stored exactly, as float64.
    assert_array_equal(saved.couplings, couplings.astype(np.float32))

    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(
            ["couplings", "fields", "states", "positions", "residues", "metadata"]
        )
        assert archive["couplings"].shape == (3, 2, 3, 2)
        assert archive["states"].tolist() == ["a", "b"]
        assert archive["residues"][()] == ""
        assert json.loads(archive["metadata"][()]) == {}


@pytest.mark.parametrize("compress", [False, True])
def test_couplings_are_deflated_only_when_asked(compress):
    """Same arrays either way; ``compress`` stores every member deflated,
    the default stores them as they are (zip's "stored" method)."""
    couplings = np.zeros((6, 4, 6, 4))  # zeros: deflating must shrink them
    fields = np.ones((6, 4))
    buffer = io.BytesIO()
    write_couplings(buffer, couplings, fields, states="abcd", compress=compress)
    buffer.seek(0)
    with zipfile.ZipFile(buffer) as archive:
        methods = {info.compress_type for info in archive.infolist()}
        sizes = {i.filename: (i.compress_size, i.file_size) for i in archive.infolist()}
    expected = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    assert methods == {expected}
    packed, raw = sizes["couplings.npy"]
    assert (packed < raw / 10) if compress else (packed == raw)
    buffer.seek(0)
    saved = read_couplings(buffer)
    assert_array_equal(saved.couplings, couplings)
    assert_array_equal(saved.fields, fields)


def test_couplings_path_is_used_as_given(tmp_path):
    """No ".npz" is appended to the path, so that reading the same path works."""
    path = tmp_path / "PF00014.model"
    couplings, fields = _random_parameters(np.random.default_rng(1), 2, 2)
    write_couplings(str(path), couplings, fields, states=[0, 1])
    assert os.listdir(tmp_path) == ["PF00014.model"]
    assert_array_equal(read_couplings(str(path)).couplings, couplings)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_saved_couplings_give_the_estimators_contact_scores(
    tmp_path, global_random_seed
):
    """Scores recomputed from the file equal the fitted model's, bit for bit.

    embedding_dim = 12 and beta = 0.7 (as in test_potts_estimator's ring data):
    with the defaults, a few seeds (3 of 0-99) order into a single colour, which
    cannot be fitted; with these, every seed of 0-99 shows all four states.
    """
    X, _ = make_potts_sequences(
        n_samples=300,
        n_sites=6,
        n_states=4,
        embedding_dim=12,
        beta=0.7,
        random_state=global_random_seed,
    )
    model = PottsPseudoLikelihood(
        "full", max_iter=20, random_state=global_random_seed
    ).fit(X)
    path = tmp_path / "model.npz"
    write_couplings(
        path,
        model.couplings_,
        model.fields_,
        states=model.states_,
        alpha_couplings=model.alpha_couplings_,
        n_iter=model.n_iter_,
        objective=model.objective_,
    )
    saved = read_couplings(path)
    assert_array_equal(saved.states, model.states_)
    assert saved.metadata["objective"] == model.objective_
    expected = model.contact_scores()
    assert_array_equal(apc(frobenius_scores(saved.couplings)), expected)

    # The ranked table of the same model: every pair once, best first.
    raw = model.contact_scores(apc_correction=False)
    write_contacts(tmp_path / "contacts.csv", expected, raw)
    header, rows = _read_csv((tmp_path / "contacts.csv").read_text())
    assert header == HEADER
    i, j = np.triu_indices(6, 1)
    order = np.lexsort((j, i, -expected[i, j]))
    assert [(int(r[0]), int(r[1])) for r in rows] == list(
        zip(i[order] + 1, j[order] + 1, strict=True)
    )
    assert [r[4] for r in rows] == [format(x, ".8g") for x in expected[i, j][order]]
    assert [r[5] for r in rows] == [format(x, ".8g") for x in raw[i, j][order]]


# -- write_contacts --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["path", "buffer"])
def test_write_contacts_round_trip(where, tmp_path, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_sites = 7
    scores = rng.normal(size=(n_sites, n_sites))  # not symmetric: upper triangle
    raw = rng.exponential(size=(n_sites, n_sites))
    positions = np.array([2, 3, 5, 8, 13, 21, 34])
    residues = "MKVLATG"
    text = _write_text(
        write_contacts,
        where,
        tmp_path,
        scores,
        raw,
        positions=positions,
        residues=list(residues),
    )
    assert text.startswith("i,j,residue_i,residue_j,score,score_raw\n")
    assert "\r" not in text and text.endswith("\n")
    header, rows = _read_csv(text)
    assert header == HEADER
    assert len(rows) == n_sites * (n_sites - 1) // 2

    site = {p: k for k, p in enumerate(positions)}
    pairs = [(site[int(r[0])], site[int(r[1])]) for r in rows]
    assert sorted(pairs) == [(k, l) for k in range(7) for l in range(k + 1, 7)]
    for (k, l), row in zip(pairs, rows, strict=True):
        assert row[2:4] == [residues[k], residues[l]]
        assert row[4] == format(scores[k, l], ".8g")
        assert row[5] == format(raw[k, l], ".8g")
    written = [scores[k, l] for k, l in pairs]
    assert written == sorted(written, reverse=True)

    # The same table, read with NumPy.
    table = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1, usecols=(0, 1, 4))
    assert_array_equal(table[:, :2], [[positions[k], positions[l]] for k, l in pairs])
    assert np.all(np.diff(table[:, 2]) <= 0)


def test_write_contacts_defaults():
    """1-based positions, "-" residues, an empty score_raw column."""
    scores = np.array([[0.0, 2.0, 3.0], [2.0, 0.0, 1.0], [3.0, 1.0, 0.0]])
    buffer = io.StringIO()
    write_contacts(buffer, scores)
    assert buffer.getvalue() == (
        "i,j,residue_i,residue_j,score,score_raw\n1,3,-,-,3,\n1,2,-,-,2,\n2,3,-,-,1,\n"
    )


def test_write_contacts_ties_by_pair():
    """Equal scores (and -0.0 with 0.0) are written in (i, j) order."""
    scores = np.full((4, 4), np.nan)  # below and on the diagonal: never read
    scores[0, 1] = 2.0
    scores[1, 2] = scores[0, 3] = 1.0
    scores[2, 3] = scores[1, 3] = 0.0
    scores[0, 2] = -0.0
    buffer = io.StringIO()
    write_contacts(buffer, scores, positions=[10, 20, 30, 40])
    _, rows = _read_csv(buffer.getvalue())
    assert [r[:2] + r[4:] for r in rows] == [
        ["10", "20", "2", ""],
        ["10", "40", "1", ""],
        ["20", "30", "1", ""],
        ["10", "30", "0", ""],
        ["20", "40", "0", ""],
        ["30", "40", "0", ""],
    ]


def test_write_contacts_eight_significant_digits():
    scores = np.zeros((2, 2))
    scores[0, 1] = 1 / 3
    raw = np.zeros((2, 2))
    raw[0, 1] = 123456789.0
    buffer = io.StringIO()
    write_contacts(buffer, scores, raw)
    assert buffer.getvalue().splitlines()[1] == "1,2,-,-,0.33333333,1.2345679e+08"


def test_write_contacts_quotes_residues_where_csv_needs_it():
    """A residue such as "," is quoted, so that csv readers split rows right."""
    buffer = io.StringIO()
    write_contacts(buffer, SCORES, residues=[",", '"', "A"])
    _, rows = _read_csv(buffer.getvalue())
    assert {tuple(r[:4]) for r in rows} == {
        ("1", "2", ",", '"'),
        ("1", "3", ",", "A"),
        ("2", "3", '"', "A"),
    }


@pytest.mark.parametrize("writer", [write_contacts, write_ec])
def test_long_tables_are_written_whole(writer):
    """200 sites, 19900 pairs: more than one block of rows is written."""
    scores = np.arange(200 * 200, dtype=np.float64).reshape(200, 200)
    buffer = io.StringIO()
    writer(buffer, scores)
    lines = buffer.getvalue().splitlines()
    header = 1 if writer is write_contacts else 0
    assert len(lines) == header + 19900
    assert lines.count(lines[0]) == 1
    i, j = np.triu_indices(200, 1)
    expected = [(k + 1, l + 1) for k, l in zip(i, j, strict=True)]
    if writer is write_contacts:
        expected = expected[::-1]  # scores[k, l] grows with (k, l)
    # CSV "i,j,..." or plmc's "i A_i j ...".
    separator, j_column = (",", 1) if writer is write_contacts else (" ", 2)
    fields = [line.split(separator) for line in lines[header:]]
    assert [(int(f[0]), int(f[j_column])) for f in fields] == expected


# -- write_ec ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["path", "buffer"])
def test_write_ec_format(where, tmp_path):
    """plmc's "i A_i j A_j 0 score" lines, in (i, j) order, written out by hand."""
    scores = np.array(
        [
            [0.0, 0.25, -0.0312345],
            [0.25, 0.0, 1.5],
            [-0.0312345, 1.5, 0.0],
        ]
    )
    text = _write_text(
        write_ec, where, tmp_path, scores, positions=[5, 6, 9], residues="MKV"
    )
    assert text == "5 M 6 K 0 0.250000\n5 M 9 V 0 -0.031234\n6 K 9 V 0 1.500000\n"
    # Defaults: sites 1..L and plmc's "-" for unknown residues; -0.0 as 0.
    scores[0, 1] = -0.0
    assert _write_text(write_ec, where, tmp_path, scores) == (
        "1 - 2 - 0 0.000000\n1 - 3 - 0 -0.031234\n2 - 3 - 0 1.500000\n"
    )


def test_write_ec_reads_back_as_six_columns(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    scores = rng.normal(size=(6, 6))
    buffer = io.StringIO()
    write_ec(buffer, scores, residues="ACDEFG")
    lines = buffer.getvalue().splitlines()
    i, j = np.triu_indices(6, 1)
    assert len(lines) == i.size
    for line, k, l in zip(lines, i, j, strict=True):
        fields = line.split(" ")
        assert fields == [
            str(k + 1),
            "ACDEFG"[k],
            str(l + 1),
            "ACDEFG"[l],
            "0",
            f"{scores[k, l]:.6f}",
        ]


# -- errors ------------------------------------------------------------------------

SCORES = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])


@pytest.mark.parametrize("writer", [write_contacts, write_ec])
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"scores": np.zeros((3, 2))}, ValueError, "scores must be a square"),
        ({"scores": np.zeros((1, 1))}, ValueError, "L >= 2"),
        ({"scores": np.zeros(3)}, ValueError, "scores must be a square"),
        ({"scores": [["a", "b"], ["c", "d"]]}, TypeError, "scores must hold real"),
        ({"scores": [[0.0, 1.0], [2.0]]}, ValueError, "rows have different"),
        (
            {"scores": np.triu(np.full((3, 3), np.inf))},
            ValueError,
            "scores contains NaN or infinity above the diagonal",
        ),
        ({"positions": [1, 2]}, ValueError, r"positions must be 1-D .*\(3\)"),
        ({"positions": [[1, 2, 3]]}, ValueError, "positions must be 1-D"),
        ({"positions": [1.0, 2.0, 3.0]}, TypeError, "positions must hold integers"),
        ({"positions": ["1", "2", "3"]}, TypeError, "positions must hold real"),
        ({"positions": [1, 3, 3]}, ValueError, "positions must be strictly"),
        ({"positions": [3, 2, 1]}, ValueError, "positions must be strictly"),
        ({"residues": "MK"}, ValueError, r"residues must have one letter .*\(3\)"),
        ({"residues": ["M", "KV", "L"]}, ValueError, r"'KV' at residues\[1\]"),
        ({"residues": "M L"}, ValueError, r"' ' at residues\[1\]"),
        ({"residues": ["M", 1, "L"]}, ValueError, r"1 at residues\[1\]"),
        ({"residues": 123}, TypeError, "residues must be a str"),
        ({"file": 3}, TypeError, "file must be a path or a file"),
        ({"file": io.BytesIO()}, TypeError, "file must be opened in text mode"),
    ],
)
def test_text_writers_errors(writer, kwargs, error, match):
    arguments = {"file": io.StringIO(), "scores": SCORES, **kwargs}
    with pytest.raises(error, match=match):
        writer(arguments.pop("file"), arguments.pop("scores"), **arguments)


@pytest.mark.parametrize(
    "raw_scores, error, match",
    [
        (np.zeros((2, 2)), ValueError, r"raw_scores must have the shape of scores"),
        (np.full((3, 3), np.nan), ValueError, "raw_scores contains NaN"),
        ([["a"] * 3] * 3, TypeError, "raw_scores must hold real"),
    ],
)
def test_write_contacts_raw_scores_errors(raw_scores, error, match):
    with pytest.raises(error, match=match):
        write_contacts(io.StringIO(), SCORES, raw_scores)


def test_invalid_input_writes_no_file(tmp_path):
    """Arguments are checked before the path is opened (nor truncated)."""
    path = tmp_path / "contacts.csv"
    with pytest.raises(ValueError, match="positions"):
        write_contacts(path, SCORES, positions=[1, 1, 2])
    with pytest.raises(ValueError, match="residues"):
        write_ec(path, SCORES, residues="AB")
    with pytest.raises(ValueError, match="fields"):
        write_couplings(path, np.zeros((3, 2, 3, 2)), np.zeros((3, 3)), states="ab")
    assert not path.exists()


COUPLINGS = np.zeros((3, 2, 3, 2))
FIELDS = np.zeros((3, 2))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"couplings": np.zeros((3, 2, 3))}, ValueError, r"couplings must have"),
        ({"couplings": np.zeros((3, 2, 2, 2))}, ValueError, r"\(L, q, L, q\)"),
        ({"couplings": np.zeros((0, 2, 0, 2))}, ValueError, r"L, q >= 1"),
        ({"couplings": np.full((3, 2, 3, 2), "x")}, TypeError, "couplings must hold"),
        (
            {"couplings": np.full((3, 2, 3, 2), np.nan)},
            ValueError,
            "couplings contains NaN",
        ),
        (
            {"fields": np.zeros((3, 3))},
            ValueError,
            r"fields must have shape .*\(3, 2\)",
        ),
        ({"fields": np.full((3, 2), np.inf)}, ValueError, "fields contains NaN"),
        ({"states": "abc"}, ValueError, r"one label per state \(q = 2\)"),
        ({"states": ["a", "a"]}, ValueError, "states must be distinct"),
        ({"states": [0.0, 1.0]}, TypeError, "states must be a 1-D sequence"),
        ({"states": [True, False]}, TypeError, "states must be a 1-D sequence"),
        ({"states": [["a", "b"]]}, TypeError, "states must be a 1-D sequence"),
        ({"positions": [1, 2]}, ValueError, "positions must be 1-D"),
        ({"positions": [2, 1, 3]}, ValueError, "positions must be strictly"),
        ({"residues": "ABCD"}, ValueError, "residues must have one letter"),
        ({"n_eff": [1.0, 2.0]}, TypeError, "metadata must be .* for 'n_eff'"),
        ({"objective": float("nan")}, ValueError, "metadata 'objective' must be"),
        ({"file": 3}, TypeError, "file must be a path or a file"),
        ({"file": io.StringIO()}, TypeError, "file must be opened in binary mode"),
    ],
)
def test_write_couplings_errors(kwargs, error, match):
    arguments = {
        "file": io.BytesIO(),
        "couplings": COUPLINGS,
        "fields": FIELDS,
        "states": "ab",
        **kwargs,
    }
    with pytest.raises(error, match=match):
        write_couplings(
            arguments.pop("file"),
            arguments.pop("couplings"),
            arguments.pop("fields"),
            **arguments,
        )


def _archive(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    buffer.seek(0)
    return buffer


def _valid_arrays():
    return {
        "couplings": COUPLINGS,
        "fields": FIELDS,
        "states": np.array(["a", "b"]),
        "positions": np.arange(1, 4),
        "residues": np.array(""),
        "metadata": np.array("{}"),
    }


@pytest.mark.parametrize(
    "change, match",
    [
        ({"fields": None}, r"lacks the arrays \['fields'\]"),
        ({"fields": np.zeros((3, 5))}, r"fields must have shape"),
        ({"states": np.array(["a", "b", "c"])}, "one label per state"),
        # An object array could only be read by unpickling it: refused.
        ({"states": np.array(["a", "b"], dtype=object)}, "cannot be read"),
        ({"metadata": np.array("{not json")}, "metadata of file is not valid JSON"),
        ({"metadata": np.array("[1, 2]")}, "must be a JSON object"),
        ({"residues": np.array(3)}, "'residues' of file must be a unicode string"),
    ],
)
def test_read_couplings_rejects_inconsistent_archives(change, match):
    arrays = {**_valid_arrays(), **change}
    arrays = {key: value for key, value in arrays.items() if value is not None}
    with pytest.raises(ValueError, match=match):
        read_couplings(_archive(**arrays))


def test_read_couplings_rejects_other_files(tmp_path):
    with pytest.raises(ValueError, match="not a .npz archive"):
        read_couplings(io.BytesIO(b"i,j,score\n1,2,0.5\n"))
    with pytest.raises(ValueError, match="not a .npz archive"):
        read_couplings(io.BytesIO(b"PK\x03\x04 truncated"))
    npy = io.BytesIO()
    np.save(npy, COUPLINGS)
    npy.seek(0)
    with pytest.raises(ValueError, match="single .npy array"):
        read_couplings(npy)
    with pytest.raises(TypeError, match="file must be a path or a file"):
        read_couplings(3)
    with pytest.raises(FileNotFoundError):
        read_couplings(tmp_path / "missing.npz")
    # The archive is valid: only the check above fails.
    assert read_couplings(_archive(**_valid_arrays())).residues is None

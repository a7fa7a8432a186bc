"""Alignment utilities against slow, obvious references (loops over pairs)."""

import gzip
import io
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context

from sklearn_attn.contacts import contact_precision, read_alignment
from sklearn_attn.contacts._structure import read_contact_map
from sklearn_attn.potts import (
    ALPHABETS,
    apc,
    decode_sequences,
    encode_sequences,
    filter_alignment,
    frobenius_scores,
    sequence_weights,
)

DATA = Path(__file__).resolve().parents[1] / "data"
PF00014 = Path(__file__).resolve().parents[3] / "shared" / "data" / "PF00014"


def _pf00014(name):
    path = PF00014 / name
    if not path.exists():
        pytest.skip(f"real data not found: {path} (shared/ beside the clone)")
    return path


# ---------------------------------------------------------------------------
# Reading


def test_fasta_multiline_dots_and_lower_case():
    names, sequences = read_alignment(DATA / "tiny.fasta")
    assert names == ["seq1 first record", "seq2", "seq3"]
    # FASTA: every character is a column; '.' is a gap, lower case upper-cased.
    assert sequences == ["ACDE-FG", "ACDE-FG", "-CDEFGH"]


def test_a2m_drops_insert_states():
    names, sequences = read_alignment(DATA / "tiny.a2m")  # format from the suffix
    assert names == ["query", "hit1/2-9", "hit2"]
    assert sequences == ["AC-DE", "AC-DE", "-C-DE"]
    # The same text read as plain FASTA keeps the inserts, hence is ragged.
    with pytest.raises(ValueError, match="Record 2 .'hit1/2-9'. has aligned length 8"):
        read_alignment(DATA / "tiny.a2m", format="fasta")


def test_a3m_skips_header_lines():
    text = "#A3M#\n>q\nAC-D\n>h\nAgC-D\n"
    assert read_alignment(io.StringIO(text), format="a3m") == (
        ["q", "h"],
        ["AC-D", "AC-D"],
    )


def test_gzip_path_and_binary_handle(tmp_path):
    raw = (DATA / "tiny.a2m").read_bytes()
    expected = read_alignment(DATA / "tiny.a2m")
    path = tmp_path / "tiny.a2m.gz"
    path.write_bytes(gzip.compress(raw))
    assert read_alignment(path) == expected
    assert read_alignment(str(path)) == expected
    with open(path, "rb") as handle:  # gzip recognised by content
        assert read_alignment(handle, format="a2m") == expected
    with open(DATA / "tiny.a2m") as handle:  # open text file, format from its name
        assert read_alignment(handle) == expected


def test_windows_line_endings():
    text = ">a\r\nAC\r\nD\r\n>b\r\nACE\r\n"
    assert read_alignment(io.StringIO(text)) == (["a", "b"], ["ACD", "ACE"])


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "no FASTA records"),
        ("\n  \n", "no FASTA records"),
        ("ACDE\n>a\nAC\n", "text before the first '>'"),
        (">a\nACD\n>empty\n>c\nACD\n", "Record 2 .'empty'. has no sequence"),
        (
            ">a\nACD\n>b\nACD\n>odd one\nACDE\n",
            "Record 3 .'odd one'. has aligned length 4, but record 1 .'a'. has 3",
        ),
    ],
)
def test_read_errors(text, match):
    with pytest.raises(ValueError, match=match):
        read_alignment(io.StringIO(text))


def test_read_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="format must be one of"):
        read_alignment(DATA / "tiny.fasta", format="stockholm")
    with pytest.raises(TypeError, match="source must be a path or an open file"):
        read_alignment(42)
    empty = tmp_path / "empty.fasta"
    empty.write_text("")
    with pytest.raises(ValueError, match="no FASTA records"):
        read_alignment(empty)


# ---------------------------------------------------------------------------
# Encoding


@pytest.mark.parametrize("alphabet", [*ALPHABETS, "xyz", "_*^", "AaBb"])
def test_encode_decode_round_trip(alphabet):
    letters = ALPHABETS.get(alphabet, alphabet)
    rng = np.random.default_rng(0)
    codes = rng.integers(0, len(letters), size=(30, 17))
    sequences = ["".join(letters[c] for c in row) for row in codes]  # by loops
    encoded = encode_sequences(sequences, alphabet)
    assert encoded.dtype == np.int64
    assert_array_equal(encoded, codes)
    assert decode_sequences(codes, alphabet) == sequences


def test_named_alphabets_put_the_gap_first():
    for letters in ALPHABETS.values():
        assert letters[0] == "-" and len(set(letters)) == len(letters)
    assert len(ALPHABETS["protein"]) == 21


def test_case_insensitive_only_for_upper_case_alphabets():
    assert_array_equal(
        encode_sequences(["acgt-", "ACGT-"], "dna"), [[1, 2, 3, 4, 0]] * 2
    )
    assert_array_equal(encode_sequences(["xyz"], "XYZ"), [[0, 1, 2]])
    assert_array_equal(encode_sequences(["aAbB"], "AaBb"), [[1, 0, 3, 2]])
    with pytest.raises(ValueError, match="'b' at position 0"):
        encode_sequences(["b"], "AaB")  # mixed case: exact match only


def test_encode_unknown_character_names_sequence_and_position():
    with pytest.raises(
        ValueError,
        match=r"sequences\[2\] has 'X' at position 3 \(0-based\).*2 unknown",
    ):
        encode_sequences(["ACDE", "ACDE", "ACDX", "ZCDE"])


@pytest.mark.parametrize(
    "sequences, error, match",
    [
        (["ACD", "AC", "ACD"], ValueError, r"sequences\[1\] has length 2"),
        ([], ValueError, "sequences is empty"),
        (["", ""], ValueError, "empty strings"),
        ("ACD", TypeError, "not a single string"),
        (["ACD", 7], TypeError, "found int"),
    ],
)
def test_encode_bad_sequences(sequences, error, match):
    with pytest.raises(error, match=match):
        encode_sequences(sequences)


@pytest.mark.parametrize("alphabet", ["", "ABA", 3, None])
def test_bad_alphabet(alphabet):
    with pytest.raises(ValueError, match="alphabet"):
        encode_sequences(["AB"], alphabet)


def test_decode_errors():
    with pytest.raises(ValueError, match=r"codes\[1, 0\] = 5 is outside"):
        decode_sequences([[0, 1], [5, 0]], "dna")
    with pytest.raises(TypeError, match="integer codes"):
        decode_sequences([[0.5, 1.0]], "dna")
    # Floats that hold integers are codes, as for every function taking codes.
    assert decode_sequences([[0.0, 1.0]], "dna") == ["-A"]
    with pytest.raises(ValueError, match="2-D"):
        decode_sequences([0, 1], "dna")
    with pytest.raises(ValueError, match="non-negative"):
        decode_sequences([[0, -1]], "dna")


# ---------------------------------------------------------------------------
# Filtering and weights


def _random_alignment(seed, n=60, length=10, n_states=4, n_parents=6):
    """Families of close sequences (so identity thresholds matter), with gaps."""
    rng = np.random.default_rng(seed)
    parents = rng.integers(0, n_states, size=(n_parents, length))
    codes = parents[rng.integers(0, n_parents, size=n)]
    mutate = rng.random(codes.shape) < 0.15
    codes[mutate] = rng.integers(0, n_states, size=mutate.sum())
    codes[:, 2] = np.where(rng.random(n) < 0.7, 0, codes[:, 2])  # a gappy column
    return codes


def _filter_loop(codes, col_max, row_max, gap):
    n, length = codes.shape
    columns = [
        i
        for i in range(length)
        if col_max is None or sum(codes[s, i] == gap for s in range(n)) / n <= col_max
    ]
    rows = [
        s
        for s in range(n)
        if row_max is None
        or sum(codes[s, i] == gap for i in columns) / len(columns) <= row_max
    ]
    return codes[np.ix_(rows, columns)], columns, rows


@pytest.mark.parametrize("col_max", [None, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("row_max", [None, 0.1, 0.2, 1.0])
@pytest.mark.parametrize("gap", [0, 3])
def test_filter_matches_loop(col_max, row_max, gap):
    codes = _random_alignment(1)
    original = codes.copy()
    result = filter_alignment(
        codes,
        max_gap_fraction_column=col_max,
        max_gap_fraction_sequence=row_max,
        gap_code=gap,
    )
    for got, expected in zip(
        result, _filter_loop(codes, col_max, row_max, gap), strict=True
    ):
        assert_array_equal(got, expected)
    assert_array_equal(codes, original)
    assert not np.shares_memory(result[0], codes)


def test_filter_errors():
    codes = np.array([[0, 1], [0, 0]])
    with pytest.raises(ValueError, match="max_gap_fraction_column=0.0 removes every"):
        filter_alignment([[0, 0], [0, 0]], max_gap_fraction_column=0.0)
    with pytest.raises(ValueError, match="max_gap_fraction_sequence=0.0 removes every"):
        filter_alignment(codes[1:], max_gap_fraction_sequence=0.0)
    with pytest.raises(ValueError, match="max_gap_fraction_column must be a number"):
        filter_alignment(codes, max_gap_fraction_column=1.5)
    with pytest.raises(ValueError, match="gap_code must be an integer"):
        filter_alignment(codes, gap_code="-")
    with pytest.raises(TypeError, match="codes must hold integer codes"):
        filter_alignment([["A", "-"]])


def _weights_loop(codes, threshold):
    n = codes.shape[0]
    counts = [
        sum(np.mean(codes[s] == codes[t]) >= threshold for t in range(n))
        for s in range(n)
    ]
    return 1.0 / np.array(counts, dtype=np.float64)


# 0.1 * 3 = 0.30000000000000004: with 10 columns, 3 agreements do not reach it.
@pytest.mark.parametrize("threshold", [0.0, 0.1 * 3, 0.3, 0.7, 0.8, 1.0])
def test_sequence_weights_match_loop(threshold):
    codes = _random_alignment(2)
    codes = np.vstack([codes, codes[:5]])  # exact duplicates
    original = codes.copy()
    expected = _weights_loop(codes, threshold)
    assert_array_equal(sequence_weights(codes, identity_threshold=threshold), expected)
    # Blocks of a few sequences (tiny working memory) give the same counts.
    with config_context(working_memory=0.001):
        got = sequence_weights(codes, identity_threshold=threshold, n_states=7)
    assert_array_equal(got, expected)
    assert_array_equal(codes, original)


def test_sequence_weights_errors():
    with pytest.raises(ValueError, match="identity_threshold must be a number in"):
        sequence_weights([[0, 1]], identity_threshold=80)
    with pytest.raises(ValueError, match="n_states=3"):
        sequence_weights([[0, 3]], n_states=3)
    with pytest.raises(ValueError, match="non-negative"):
        sequence_weights([[0, -1]])


def test_pf00014_effective_number_of_sequences():
    names, sequences = read_alignment(_pf00014("PF00014_mgap6.fasta.gz"))
    codes = encode_sequences(sequences)
    assert codes.shape == (13_600, 53) and len(names) == 13_600
    assert len(np.unique(codes, axis=0)) == 8_871
    weights = sequence_weights(codes, identity_threshold=0.8)
    # plmc -t 0.2 on the same file (data README).
    assert abs(weights.sum() - 4_363.86) < 0.01


# ---------------------------------------------------------------------------
# Contact scores


def _apc_loop(F):
    n = F.shape[0]
    off = [(i, j) for i in range(n) for j in range(n) if i != j]
    row = [sum(F[i, j] for j in range(n) if j != i) / (n - 1) for i in range(n)]
    col = [sum(F[i, j] for i in range(n) if i != j) / (n - 1) for j in range(n)]
    mean = sum(F[i, j] for i, j in off) / len(off)
    out = np.zeros_like(F)
    for i, j in off:
        out[i, j] = F[i, j] - row[i] * col[j] / mean
    return out


def test_apc_matches_loop():
    F = np.random.default_rng(3).random((7, 7))
    F[2, 2] = np.nan  # the diagonal is ignored
    original = F.copy()
    corrected = apc(F)
    assert_allclose(corrected, _apc_loop(F), rtol=1e-12, atol=1e-14)
    assert_array_equal(np.diag(corrected), 0.0)
    assert_array_equal(F, original)
    symmetric = apc(F + F.T)
    assert_allclose(symmetric, symmetric.T, rtol=1e-12)


def test_apc_edge_cases():
    assert_array_equal(apc(np.zeros((3, 3))), np.zeros((3, 3)))
    assert_allclose(apc([[0.0, 2.0], [2.0, 0.0]]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="square"):
        apc(np.ones((3, 4)))
    with pytest.raises(ValueError, match="NaN or infinity off the diagonal"):
        apc([[0.0, np.inf], [1.0, 0.0]])


def _frobenius_loop(J, gauge, exclude):
    n, q = J.shape[:2]
    keep = [a for a in range(q) if a not in exclude]
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            block = np.array(
                [[(J[i, a, j, b] + J[j, b, i, a]) / 2 for b in keep] for a in keep]
            )
            if gauge:
                block = (
                    block
                    - block.mean(axis=1, keepdims=True)
                    - block.mean(axis=0, keepdims=True)
                    + block.mean()
                )
            out[i, j] = np.sqrt(sum(x * x for x in block.ravel()))
    return out


@pytest.mark.parametrize("gauge", [False, True])
@pytest.mark.parametrize("exclude", [None, 0, [0, 2]])
def test_frobenius_matches_loop(gauge, exclude):
    J = np.random.default_rng(4).standard_normal((5, 4, 5, 4))  # asymmetric
    original = J.copy()
    excluded = [] if exclude is None else np.atleast_1d(exclude).tolist()
    expected = _frobenius_loop(J, gauge, excluded)
    scores = frobenius_scores(J, zero_sum_gauge=gauge, exclude_states=exclude)
    assert_allclose(scores, expected, rtol=1e-12)
    assert_array_equal(scores, scores.T)  # the blocks were symmetrised first
    with config_context(working_memory=0.001):  # one site per block
        chunked = frobenius_scores(J, zero_sum_gauge=gauge, exclude_states=exclude)
    assert_allclose(chunked, expected, rtol=1e-12)
    assert_array_equal(J, original)


def test_frobenius_errors():
    with pytest.raises(ValueError, match=r"shape \(L, q, L, q\)"):
        frobenius_scores(np.zeros((3, 2, 3, 3)))
    with pytest.raises(ValueError, match="exclude_states must be"):
        frobenius_scores(np.zeros((3, 2, 3, 2)), exclude_states=2)
    with pytest.raises(ValueError, match="removes every state"):
        frobenius_scores(np.zeros((3, 2, 3, 2)), exclude_states=[0, 1])


# ---------------------------------------------------------------------------
# Contacts


def test_contact_precision_by_hand():
    # L = 10. Pairs (0-based) with their scores and distances:
    #   (0, 9) 4.0  5 A  contact      (0, 6) 3.0  12 A  no
    #   (1, 8) 2.0  6 A  contact      (2, 3) 9.0  3 A   too close (|i-j| = 1)
    #   (7, 1) 2.0  9 A  no (tie with (1, 8); (1, 7) ranks first)
    #   (3, 9) 1.0  nan  unknown, not a candidate
    scores = np.zeros((10, 10))
    i = np.array([0, 0, 1, 2, 7, 3])
    j = np.array([9, 6, 8, 3, 1, 9])
    pairs_scores = [4.0, 3.0, 2.0, 9.0, 2.0, 1.0]
    scores[np.minimum(i, j), np.maximum(i, j)] = pairs_scores
    distance = np.array([5.0, 12.0, 6.0, 3.0, 9.0, np.nan])
    # Ranked candidates: (0,9) c, (0,6) n, (1,7) n, (1,8) c.
    got = contact_precision(scores, i, j, distance, top=[1, 2, 3, 4, 50, "L/5", "2L"])
    assert got == {1: 1.0, 2: 0.5, 3: 1 / 3, 4: 0.5, 50: 0.5, "L/5": 0.5, "2L": 0.5}
    got = contact_precision(scores, i, j, distance, top=2, min_separation=1)
    assert got == {2: 1.0}  # (2, 3) joins, ranked first
    got = contact_precision(scores, i, j, distance, top="L/10", cutoff=5.5)
    assert got == {"L/10": 1.0}


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(top="L/0"), ValueError, "top must hold"),
        (dict(top="3K"), ValueError, "top must hold"),
        (dict(top=0), ValueError, "top must hold"),
        (dict(min_separation=-1), ValueError, "min_separation"),
        (dict(cutoff=0.0), ValueError, "cutoff"),
        (dict(min_separation=20), ValueError, "No pair"),
    ],
)
def test_contact_precision_errors(kwargs, error, match):
    i, j, d = np.array([0, 1]), np.array([7, 9]), np.array([4.0, 9.0])
    with pytest.raises(error, match=match):
        contact_precision(np.zeros((10, 10)), i, j, d, **kwargs)


def test_contact_precision_bad_pairs():
    scores = np.zeros((10, 10))
    with pytest.raises(ValueError, match=r"i must hold column indices in \[0, 10\)"):
        contact_precision(scores, [10], [0], [1.0])
    with pytest.raises(ValueError, match="more than once"):
        contact_precision(scores, [0, 9], [9, 0], [1.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        contact_precision(scores, [0, 1], [9], [1.0])


@pytest.mark.filterwarnings("ignore:read_contact_map is deprecated:FutureWarning")
def test_read_contact_map_errors():
    with pytest.raises(ValueError, match="4 columns"):
        read_contact_map(io.StringIO("1 2 3.0\n"))
    with pytest.raises(ValueError, match="counted from 1"):
        read_contact_map(io.StringIO("0 7 0.1 3.0\n"))
    with pytest.raises(ValueError, match="counted from 1"):
        read_contact_map(io.StringIO("1.5 7 0.1 3.0\n"))


@pytest.mark.filterwarnings("ignore:read_contact_map is deprecated:FutureWarning")
def test_pf00014_contact_map():
    i, j, distance = read_contact_map(_pf00014("PF00014_distances.tsv"))
    assert i.dtype == j.dtype == np.int64
    assert len(i) == 1_378 and i.min() == 0 and j.max() == 52 and (i < j).all()
    far = np.abs(i - j) >= 6
    assert far.sum() == 1_128
    assert (far & (distance < 8.0)).sum() == 439
    # The ten highest scores on contacts, all others on non-contacts: precision
    # at L/5 = 10 pairs is 1 and at L/2 = 26 pairs 10/26 (L = 53).
    contacts = np.flatnonzero(far & (distance < 8.0))[:10]
    scores = np.zeros((53, 53))
    scores[i, j] = np.where(distance < 8.0, -1.0, np.linspace(0, 1, len(i)))
    scores[i[contacts], j[contacts]] = 10.0
    got = contact_precision(scores, i, j, distance)
    assert got == {"L/5": 1.0, "L/2": 10 / 26, "L": 10 / 53, "2L": 10 / 106}

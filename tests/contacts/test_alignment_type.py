"""The alignment encoded once (``Alignment``), the one distance reader, and the
names that moved from ``sklearn_attn.potts`` to the contacts application.

References: ``read_alignment`` followed by ``encode_sequences`` (the two steps the
command used to take), loops over the lines of a distance table, and the deprecated
``read_contact_map`` on the bundled PF00014 structure.
"""

import io
import warnings
from importlib import resources

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import sklearn_attn.contacts as contacts
import sklearn_attn.potts as potts
from sklearn_attn.contacts import Alignment, read_alignment, read_distances
from sklearn_attn.potts import ALPHABETS, encode_sequences

LETTERS = ALPHABETS["protein"] + "XBZ"  # and three letters outside the alphabet


def _random_alignment(rng, n_sequences=12, length=9):
    """A2M text with inserts, unknown letters and a focus sequence named with a
    residue range."""
    lines = []
    for s in range(n_sequences):
        letters = rng.choice(list(LETTERS), size=length)
        # Lower case and '.' are inserts in A2M: the first sequence gets two.
        text = "".join(letters)
        if s == 0:
            text = text[:3] + "ab." + text[3:]
            text = text.replace("X", "A").replace("B", "C").replace("Z", "D")
        name = "focus/5-40" if s == 0 else f"seq{s}"
        lines += [f">{name}", text]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("unknown_letters", ["drop", "gap"])
@pytest.mark.parametrize("focus", [None, "focus"])
def test_read_encodes_what_read_alignment_reads(
    unknown_letters, focus, global_random_seed
):
    rng = np.random.default_rng(global_random_seed)
    text = _random_alignment(rng)
    names, sequences, info = read_alignment(
        io.StringIO(text),
        format="a2m",
        alphabet="protein",
        unknown_letters=unknown_letters,
        focus=focus,
        return_info=True,
    )
    alignment = Alignment.read(
        io.StringIO(text),
        format="a2m",
        alphabet="protein",
        unknown_letters=unknown_letters,
        focus=focus,
    )
    assert alignment.names == names
    assert_array_equal(alignment.codes, encode_sequences(sequences, "protein"))
    assert alignment.sequences == sequences
    assert alignment.states == ALPHABETS["protein"]
    assert alignment.n_states == 21
    assert alignment.n_sequences, alignment.n_sites == alignment.codes.shape
    assert alignment.dropped == info.dropped
    assert alignment.n_read == info.n_read == 12
    assert_array_equal(alignment.positions, info.positions)
    assert_array_equal(alignment.columns, info.columns)
    assert alignment.focus == info.focus
    assert alignment.residues == info.residues
    assert alignment.n_sequences + len(alignment.dropped) == alignment.n_read


def test_read_applies_the_unknown_letter_rules():
    text = ">a\nACX\n>b\nACD\n>c\nBCD\n"
    dropped = Alignment.read(io.StringIO(text))
    assert dropped.names == ["b"] and dropped.dropped == ["a", "c"]
    assert_array_equal(dropped.codes, [[1, 2, 3]])
    gaps = Alignment.read(io.StringIO(text), unknown_letters="gap")
    assert gaps.sequences == ["AC-", "ACD", "-CD"] and gaps.dropped == []
    with pytest.raises(ValueError, match=r"Record 1 \('a'\) has letters outside"):
        Alignment.read(io.StringIO(text), unknown_letters="error")
    with pytest.raises(ValueError, match="none is left"):
        Alignment.read(io.StringIO(">a\nX\n"))
    with pytest.raises(ValueError, match="alphabet must name the states"):
        Alignment.read(io.StringIO(text), alphabet=None)
    with pytest.raises(ValueError, match="unknown_letters must be one of"):
        Alignment.read(io.StringIO(text), unknown_letters="skip")
    dna = Alignment.read(io.StringIO(">a\nGAT-\n"), alphabet="dna")
    assert_array_equal(dna.codes, [[3, 1, 4, 0]]) and dna.states == "-ACGT"


def test_alignment_checks_what_it_is_given():
    good = dict(
        names=["a", "b"],
        codes=np.array([[0, 1], [2, 3]]),
        states="dna",
        positions=np.array([1, 2]),
        columns=np.array([0, 1]),
    )
    alignment = Alignment(**good)
    assert alignment.states == "-ACGT" and alignment.n_read == 2
    assert repr(alignment) == (
        "Alignment(n_sequences=2, n_sites=2, states='-ACGT', dropped=0)"
    )
    for change, match in [
        (dict(names=["a"]), "names must have one name per sequence"),
        (dict(codes=np.array([[0, 5], [0, 1]])), r"states in \[0, 5\)"),
        (dict(codes=np.array([[0.5, 1], [0, 1]])), "integer states"),
        (dict(positions=np.array([1, 2, 3])), "positions must have one entry"),
        (dict(columns=np.array([0])), "columns must have one entry"),
        (dict(states="AA"), "distinct characters"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            Alignment(**{**good, **change})


# -- read_distances -----------------------------------------------------------------


def _distances_loop(lines, positions):
    """Pairs and distances by a loop over the lines: the documented rules."""
    index = {p: k for k, p in enumerate(positions)}
    out = []
    for line in lines:
        fields = line.split("#")[0].replace(",", " ").split()
        if not fields:
            continue
        a, b, d = int(float(fields[0])), int(float(fields[1])), float(fields[-1])
        if a in index and b in index and a != b:
            out.append((min(index[a], index[b]), max(index[a], index[b]), d))
    return out


@pytest.mark.parametrize("width", [3, 4, 6])
def test_read_distances_tables_against_a_loop(width, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    positions = np.sort(rng.choice(np.arange(1, 60), size=12, replace=False))
    lines = ["i j ... distance"] if global_random_seed % 2 else ["# a comment"]
    for _ in range(40):
        a, b = rng.integers(1, 60, size=2)
        middle = " ".join(f"{x:.3f}" for x in rng.random(width - 3))
        separator = "," if rng.random() < 0.3 else " "
        line = separator.join(
            filter(None, [str(a), str(b), middle, f"{rng.uniform(2, 20):.4f}"])
        )
        lines.append(line)
    expected = _distances_loop(lines[1:], positions.tolist())
    if not expected:
        with pytest.raises(ValueError, match="no pair has both residue numbers"):
            read_distances(io.StringIO("\n".join(lines)), positions)
        return
    i, j, distance = read_distances(io.StringIO("\n".join(lines)), positions)
    assert i.dtype == j.dtype == np.int64 and distance.dtype == np.float64
    assert list(zip(i.tolist(), j.tolist(), distance.tolist(), strict=True)) == expected


def test_read_distances_matrix_and_column_numbers():
    rng = np.random.default_rng(0)
    matrix = rng.uniform(2, 20, size=(5, 5))
    text = "\n".join(" ".join(f"{x:.17g}" for x in row) for row in matrix)
    i, j, distance = read_distances(io.StringIO(text), positions=[3, 4, 5, 6, 7])
    ki, kj = np.triu_indices(5, 1)
    assert_array_equal(i, ki) and assert_array_equal(j, kj)
    assert_array_equal(distance, matrix[ki, kj])
    # Without positions: column numbers from 1, every pair kept, i < j.
    i, j, distance = read_distances(io.StringIO("7 1 4.5\n2 9 12.0\n3 3 1.0\n"))
    assert_array_equal(i, [0, 1]) and assert_array_equal(j, [6, 8])
    assert_array_equal(distance, [4.5, 12.0])


@pytest.mark.parametrize(
    "text, positions, match",
    [
        ("", None, "is empty"),
        ("# nothing\n\n", None, "is empty"),
        ("1 2 x 4\n", None, "line 1 is not"),
        ("1 2 4.0\n1 x 4\n", None, "line 2 is not"),
        ("1 2\n", None, r"3 or more numbers\); found lines of 2"),
        ("1 2\n", [1, 2, 3], "or a 3 x 3 matrix"),
        ("1.5 2 4.0\n", None, "integer column numbers counted from 1"),
        ("0 2 4.0\n", None, "integer column numbers counted from 1"),
        ("1.5 2 4.0\n", [1, 2], "must be integers"),
        ("8 9 4.0\n", [1, 2], "no pair has both residue numbers"),
    ],
)
def test_read_distances_bad_files(text, positions, match):
    with pytest.raises(ValueError, match=match):
        read_distances(io.StringIO(text), positions)


def test_read_distances_bad_source():
    with pytest.raises(TypeError, match="source must be a path or an open file"):
        read_distances(None)


def test_read_distances_reads_the_bundled_structure_as_read_contact_map_did():
    folder = resources.files("sklearn_attn.datasets") / "data" / "PF00014"
    with resources.as_file(folder / "PF00014_distances.tsv") as path:
        i, j, distance = read_distances(path)
        with pytest.warns(FutureWarning, match="read_contact_map is deprecated"):
            old = contacts.read_contact_map(path)
    assert len(i) == 1_378 and (i < j).all()
    for new, before in zip((i, j, distance), old, strict=True):
        assert_array_equal(new, before)
        assert new.dtype == before.dtype


# -- names that moved ---------------------------------------------------------------

MOVED = [
    "contact_precision",
    "read_alignment",
    "read_couplings",
    "write_contacts",
    "write_couplings",
    "write_ec",
]


@pytest.mark.parametrize("name", MOVED)
def test_moved_names_warn_and_are_the_contacts_ones(name):
    with pytest.warns(FutureWarning, match=f"sklearn_attn.potts.{name} moved to"):
        old = getattr(potts, name)
    assert old is getattr(contacts, name)


def test_read_contact_map_alias_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = potts.read_contact_map
    assert [w.category for w in caught] == [FutureWarning]
    assert alias is contacts.read_contact_map


def test_the_library_does_not_know_other_names():
    with pytest.raises(AttributeError, match="has no attribute 'read_pdb'"):
        potts.read_pdb  # noqa: B018

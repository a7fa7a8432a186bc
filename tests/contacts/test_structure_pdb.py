"""Residue distances from a PDB file (``distances_from_pdb``).

References: distances worked out by hand on a tiny structure, and a loop over
every pair of atoms of every pair of residues, with the documented rules
(ATOM records of the first model and of one chain, the first alternate
location, hydrogens left out, C-alpha for a glycine's C-beta) applied to the
atoms the test wrote, not to the parsed file.
"""

import gzip
import io
import itertools
import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import sklearn_attn.contacts._structure as structure_module
from sklearn_attn.__main__ import main
from sklearn_attn.contacts import distances_from_pdb, read_distances
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import decode_sequences


def _atom(name, residue, chain, number, xyz, *, element="", location=" ", code=" "):
    """One ATOM record in the fixed columns of the PDB format."""
    return _record("ATOM", name, residue, chain, number, xyz, element, location, code)


def _record(record, name, residue, chain, number, xyz, element, location, code):
    x, y, z = xyz
    # Names of one-letter elements start in column 14, as the format has them.
    name = f" {name:<3}" if len(name) < 4 else name
    return (
        f"{record:<6}{1:>5} {name}{location}{residue:>3} {chain}{number:>4}{code}   "
        f"{x:8.3f}{y:8.3f}{z:8.3f}{1.0:6.2f}{0.0:6.2f}          {element:>2}"
    )


# Four residues of chain A, and a residue of chain B; coordinates chosen so that
# every distance is a sum of squares with a round root.
TINY = "\n".join(
    [
        "HEADER    A TINY STRUCTURE",
        _atom("N", "GLY", "A", 1, (0, 0, 0), element="N"),
        _atom("CA", "GLY", "A", 1, (1, 0, 0), element="C"),
        _atom("H", "GLY", "A", 1, (3, 0, 0), element="H"),  # not counted
        _atom("CA", "ALA", "A", 2, (4, 0, 0), element="C"),
        _atom("CB", "ALA", "A", 2, (4, 3, 0), element="C"),
        _atom("CA", "SER", "A", 3, (4, 0, 12), location="A"),
        _atom("CB", "SER", "A", 3, (4, 4, 12), location="A"),
        _atom("CA", "SER", "A", 3, (0, 0, 0), location="B"),  # second location
        _atom("OG", "SER", "A", 3, (0, 0, 0), location="B"),
        _atom("CA", "LYS", "A", 5, (1, 4, 0)),  # no C-beta in the file
        _atom("1HZ", "LYS", "A", 5, (4, 2, 0)),  # a hydrogen by its name
        _record("HETATM", "O", "HOH", "A", 101, (4, 1, 0), "O", " ", " "),
        _atom("CA", "ALA", "B", 1, (0, 0, 0)),
        "END",
    ]
)


def test_distances_worked_out_by_hand():
    structure = distances_from_pdb(io.StringIO(TINY), chain="A")
    assert_array_equal(structure.positions, [1, 2, 3, 5])
    assert structure.sequence == "GASK" and structure.chain == "A"
    pairs = list(zip(structure.residue_i, structure.residue_j, strict=True))
    assert pairs == [(1, 2), (1, 3), (1, 5), (2, 3), (2, 5), (3, 5)]
    # Heavy atoms: Gly N (0,0,0), CA (1,0,0); Ala CA (4,0,0), CB (4,3,0);
    # Ser (first location) CA (4,0,12), CB (4,4,12); Lys CA (1,4,0).
    assert structure.distance.tolist() == [3.0, 12.369, 4.0, 12.0, 3.162, 12.369]
    by_cb = distances_from_pdb(io.StringIO(TINY), chain="A", atoms="CB")
    # Gly: its CA; Lys: its CA, the file holds no CB.
    assert by_cb.distance.tolist() == [4.243, 13.0, 4.0, 12.042, 3.162, 12.369]
    by_ca = distances_from_pdb(io.StringIO(TINY), chain="A", atoms="CA")
    assert by_ca.distance.tolist() == [3.0, 12.369, 4.0, 12.0, 5.0, 13.0]
    # The other chain: one residue, no distance.
    with pytest.raises(ValueError, match="chain 'B' has 1 residue"):
        distances_from_pdb(io.StringIO(TINY), chain="B")


def _random_structure(rng):
    """A PDB text of two chains and two models, and the atoms it holds.

    Residues have hydrogens (some named only, with no element column), a few
    atoms at two alternate locations, glycines, residues without a C-beta, a
    HETATM ligand, and a second model whose atoms must not be read.
    """
    atoms = []  # (chain, number, residue, name, xyz, element, location)
    lines = ["MODEL        1"]
    for chain, first in (("A", int(rng.integers(-5, 30))), ("B", 1)):
        number = first
        for _ in range(int(rng.integers(2, 9))):
            residue = str(rng.choice(["GLY", "ALA", "LEU", "TRP", "UNK"]))
            names = ["N", "CA", "C", "O"]
            if residue != "GLY" and rng.random() < 0.8:
                names.append("CB")
            names += ["CD1", "H", "HA", "1HD1"][: int(rng.integers(0, 5))]
            centre = rng.uniform(-30, 30, size=3)
            two_locations = rng.random() < 0.3
            for name in names:
                # The coordinates as the file holds them, to 0.001.
                xyz = tuple(
                    float(f"{v:.3f}") for v in centre + rng.normal(scale=2.0, size=3)
                )
                element = "" if rng.random() < 0.5 else name.lstrip("1")[0]
                location = "A" if two_locations and name in ("CA", "CB") else " "
                atoms.append((chain, number, residue, name, xyz, element, location))
                lines.append(
                    _atom(
                        name,
                        residue,
                        chain,
                        number,
                        xyz,
                        element=element,
                        location=location,
                    )
                )
                if location == "A":
                    moved = tuple(np.round(rng.uniform(-30, 30, size=3), 3))
                    lines.append(
                        _atom(name, residue, chain, number, moved, location="B")
                    )
            number += int(rng.integers(1, 3))  # gaps in the numbering
        lines.append("TER")
    lines.append(
        _record("HETATM", "C1", "LIG", "A", 900, (0.0, 0.0, 0.0), "C", " ", " ")
    )
    lines += ["ENDMDL", "MODEL        2"]
    lines.append(_atom("CA", "ALA", "A", first, (99.0, 99.0, 99.0), element="C"))
    lines += ["ENDMDL", "END"]
    return "\n".join(lines) + "\n", atoms


def _distances_loop(atoms, chain, which):
    """Residue numbers, letters and pair distances by a loop over the atoms."""
    residues = {}
    for atom_chain, number, residue, name, xyz, element, _ in atoms:
        if atom_chain != chain:
            continue
        is_hydrogen = (element or name.lstrip("1")[0]) == "H"
        if which == "heavy":
            keep = not is_hydrogen
        elif which == "CB":
            keep = name == "CB" or (name == "CA" and residue == "GLY")
        else:
            keep = name == "CA"
        entry = residues.setdefault(number, (residue, {}))
        if keep:
            entry[1][name] = xyz
    if which == "CB":  # C-alpha where the residue has no C-beta
        for number, (_, kept) in residues.items():
            if "CB" not in kept:
                ca = [
                    xyz
                    for c, n, _, name, xyz, _, _ in atoms
                    if c == chain and n == number and name == "CA"
                ]
                kept.update({"CA": ca[0]} if ca else {})
    numbers = sorted(n for n, (_, kept) in residues.items() if kept)
    letters = {"GLY": "G", "ALA": "A", "LEU": "L", "TRP": "W"}
    sequence = "".join(letters.get(residues[n][0], "X") for n in numbers)
    pairs = []
    for a, b in itertools.combinations(numbers, 2):
        nearest = min(
            math.dist(p, q)
            for p in residues[a][1].values()
            for q in residues[b][1].values()
        )
        pairs.append((a, b, round(nearest, 3)))
    return numbers, sequence, pairs


@pytest.mark.parametrize("atoms", ["heavy", "CB", "CA"])
def test_distances_against_a_loop_over_atoms(atoms, global_random_seed, monkeypatch):
    rng = np.random.default_rng(global_random_seed)
    text, written = _random_structure(rng)
    for chain in ("A", "B"):
        numbers, sequence, pairs = _distances_loop(written, chain, atoms)
        for block in (1 << 22, 3000, 7):  # one block, blocks of a few residues, of one
            monkeypatch.setattr(structure_module, "_BLOCK_ELEMENTS", block)
            got = distances_from_pdb(io.StringIO(text), chain, atoms=atoms, offset=3)
            assert_array_equal(got.positions, np.array(numbers) + 3)
            assert got.sequence == sequence
            assert_array_equal(got.residue_i, [a + 3 for a, _, _ in pairs])
            assert_array_equal(got.residue_j, [b + 3 for _, b, _ in pairs])
            assert_allclose(got.distance, [d for _, _, d in pairs], rtol=0, atol=1e-9)


def test_table_is_what_read_distances_and_the_command_read(
    tmp_path, global_random_seed
):
    """The table, in focus numbering, scores the command's prediction."""
    rng = np.random.default_rng(global_random_seed)
    length = 8
    # Residues 11..18 of the chain are the focus sequence's residues 101..108.
    lines = [
        _atom("CA", "ALA", "A", 10 + k, tuple(rng.uniform(-9, 9, size=3)))
        for k in range(1, length + 1)
    ]
    pdb = tmp_path / "model.pdb.gz"
    pdb.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    table = tmp_path / "distances.tsv"
    structure = distances_from_pdb(pdb, atoms="CA", offset=90, output=table)
    assert_array_equal(structure.positions, np.arange(101, 109))
    assert table.read_text().splitlines()[0] == "i\tj\tdistance"

    i, j, distance = read_distances(table, positions=np.arange(101, 109))
    assert_array_equal(i + 101, structure.residue_i)
    assert_array_equal(j + 101, structure.residue_j)
    assert_array_equal(distance, structure.distance)

    codes, _ = make_potts_sequences(
        n_samples=60, n_sites=length, n_states=21, random_state=global_random_seed
    )
    sequences = decode_sequences(codes, alphabet="protein")
    sequences[0] = sequences[0].replace("-", "A")  # a residue in every column
    names = ["FOCUS_HUMAN/101-108"] + [f"s{k}" for k in range(1, len(sequences))]
    alignment = tmp_path / "family.fasta"
    alignment.write_text(
        "".join(f">{n}\n{s}\n" for n, s in zip(names, sequences, strict=True))
    )
    out = tmp_path / "out"
    options = ["--focus", "FOCUS", "--max-iter", "3", "--min-separation", "1"]
    status = main(
        ["contacts", str(alignment), "-q", "-o", str(out), "--distances", str(table)]
        + options
    )
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["first_position"] == 101 and summary["precision"] is not None


def test_reads_paths_gzip_binary_files_and_the_first_model(tmp_path):
    plain = distances_from_pdb(io.StringIO(TINY), chain="A")
    path = tmp_path / "tiny.pdb"
    path.write_text(TINY.replace("\n", "\r\n"))
    with open(path, "rb") as handle:
        from_binary = distances_from_pdb(handle, chain="A")
    for got in (distances_from_pdb(path, chain="A"), from_binary):
        assert_array_equal(got.distance, plain.distance)
    # The second model, which adds a residue 7, is not read.
    two_models = "MODEL        1\n" + TINY.replace("END", "ENDMDL\nMODEL        2")
    two_models += "\n" + _atom("CA", "ALA", "A", 7, (0, 0, 0)) + "\nENDMDL\nEND\n"
    first_model = distances_from_pdb(io.StringIO(two_models), chain="A")
    assert_array_equal(first_model.positions, plain.positions)
    assert_array_equal(first_model.distance, plain.distance)
    out = io.StringIO()
    distances_from_pdb(io.StringIO(TINY), chain="A", output=out)
    assert out.getvalue().splitlines()[1:3] == ["1\t2\t3.000", "1\t3\t12.369"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"atoms": "CG"}, ValueError, r"atoms must be one of \('heavy', 'CB', 'CA'\)"),
        ({"chain": 1}, TypeError, "chain must be a one-character string"),
        ({"chain": "AB"}, ValueError, "chain must be one character"),
        ({"chain": "C"}, ValueError, r"chain 'C' is not in .* chains 'A', 'B'"),
        ({}, ValueError, r"holds the chains 'A', 'B'; choose one with chain="),
        ({"chain": "A", "offset": 1.0}, TypeError, "offset must be an integer"),
        ({"chain": "A", "offset": True}, TypeError, "offset must be an integer"),
        ({"chain": "A", "output": 3}, TypeError, "output must be None, a path"),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        distances_from_pdb(io.StringIO(TINY), **kwargs)


def test_output_opened_in_binary_mode():
    with pytest.raises(TypeError, match="output must be opened in text mode"):
        distances_from_pdb(io.StringIO(TINY), chain="A", output=io.BytesIO())


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "holds no ATOM records"),
        ("HETATM    1  O   HOH A 101       4.000   1.000   0.000\n", "no ATOM"),
        ("ATOM      1  CA  ALA A   1       4.000\n", "line 1 is an ATOM record"),
        ("ATOM      1  CA  ALA A  x1       4.000   1.000   0.000\n", "line 1"),
        (
            _atom("CA", "ALA", "A", 1, (0, 0, 0))
            + "\n"
            + _atom("CA", "ALA", "A", 2, (0, 0, 0), code="A"),
            r"residue 2A of chain 'A' has an insertion code",
        ),
        (
            "\n".join(_atom("CA", "ALA", "A", n, (n, 0, 0)) for n in (1, 2, 1)),
            "residue number 1 of chain 'A' is given to two residues",
        ),
        (
            _atom("N", "ALA", "A", 1, (0, 0, 0))
            + "\n"
            + _atom("CA", "ALA", "A", 2, (0, 0, 0)),
            r"chain 'A' has 1 residue\(s\) with a CA atom",
        ),
    ],
)
def test_bad_files(text, match):
    with pytest.raises(ValueError, match=match):
        distances_from_pdb(io.StringIO(text), atoms="CA")


def test_bad_source():
    with pytest.raises(TypeError, match="source must be a path or an open file"):
        distances_from_pdb(None)

"""A known structure: its pair distances, and the precision of predicted contacts.

:func:`distances_from_pdb` computes a chain's residue distances from a PDB
file; :func:`read_distances` is the one reader of a structure's distances
(tables ``i j ... distance`` and ``L x L`` matrices); :func:`contact_precision`
scores ranked contact predictions against them.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable
from fractions import Fraction
from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_real_array
from ._alignment import _read_text
from ._formats import _write_rows

__all__ = ["contact_precision", "distances_from_pdb", "read_distances"]


def read_distances(source, positions=None):
    """Pairs of sites and their distances, from a table or an ``L x L`` matrix.

    A table has one pair a line, ``i j ... distance``: residue numbers ``i``
    and ``j``, any columns between (such as the score of
    ``PF00014_distances.tsv``'s ``i j score distance``) and the distance
    last. Fields are separated by white space or commas, ``#`` starts a
    comment, and a first line without numbers is a header. A matrix has
    ``len(positions)`` rows of ``len(positions)`` numbers (at least 4).

    Residue numbers are those of ``positions`` (the numbering of
    :attr:`Alignment.positions <sklearn_attn.contacts.Alignment>`); pairs
    with a number ``positions`` does not hold, and pairs of a site with
    itself, are left out. Without ``positions`` the numbers are the columns
    counted from 1, and every pair is kept.

    Parameters
    ----------
    source : str, path-like or file object
        The table or matrix, gzipped or not (recognised by its content), with
        LF, CRLF or CR line endings.
    positions : array-like of int or None, default=None
        Residue number of each site.

    Returns
    -------
    i, j : ndarray of int64, shape (n_pairs,)
        Site indices counted from 0, ``i < j``, in the order of the file.
    distance : ndarray of float64, shape (n_pairs,)

    Raises
    ------
    ValueError
        For an empty file, a line that is not numbers, lines of fewer than 3
        numbers (and not a matrix), residue numbers that are not integers
        (or, without ``positions``, not in ``[1, 2**53]``), or no pair of
        numbers among ``positions``.
    TypeError
        When ``source`` is neither a path nor an open file.

    See Also
    --------
    contact_precision : Precision of ranked contact predictions.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.contacts import read_distances
    >>> read_distances(io.StringIO("1 7 0.3 4.5\\n9 2 0.1 12.0\\n"))
    (array([0, 1]), array([6, 8]), array([ 4.5, 12. ]))
    >>> table = "i,j,distance\\n10,20,3.5\\n10,99,4.0\\n"
    >>> read_distances(io.StringIO(table), positions=[10, 15, 20])
    (array([0]), array([2]), array([3.5]))
    """
    return _read_distances(source, positions)


def _read_distances(source, positions, *, name="source", four_columns=False):
    """:func:`read_distances`; ``four_columns`` insists on ``i j score distance``
    (the deprecated ``read_contact_map``'s format)."""
    where = _source_text(source)
    shape = "i j score distance: 4 columns" if four_columns else "i j ... distance"
    count = "four numbers" if four_columns else "numbers"
    rows = []
    for number, line in enumerate(_read_text(source, name=name).split("\n"), 1):
        fields = line.partition("#")[0].replace(",", " ").split()
        if not fields:
            continue
        try:
            rows.append([float(field) for field in fields])
        except ValueError:
            if not rows and not any(_is_number(field) for field in fields):
                continue  # a header
            raise ValueError(
                f"The distance table {where} must hold {count} per line "
                f"({shape}); line {number} is not: {line.strip()[:40]!r}."
            ) from None
    if not rows:
        raise ValueError(f"The distance table {where} is empty.")
    widths = {len(row) for row in rows}
    n_sites = None if positions is None else len(positions)
    if (
        not four_columns
        and widths == {n_sites}
        and len(rows) == n_sites
        and n_sites > 3
    ):
        i, j = np.triu_indices(n_sites, 1)
        return i, j, np.asarray(rows, dtype=np.float64)[i, j]
    if four_columns and widths != {4}:
        raise ValueError(
            f"The distance table {where} must hold {count} per line ({shape}); "
            f"found lines of {sorted(widths)} number(s)."
        )
    if min(widths) < 3:
        raise ValueError(
            f"The distance table {where} must hold lines '{shape}' (3 or more "
            + (
                "numbers)"
                if n_sites is None
                else f"numbers) or a {n_sites} x {n_sites} matrix"
            )
            + f"; found lines of {min(widths)} number(s)."
        )
    table = np.array([(row[0], row[1], row[-1]) for row in rows], dtype=np.float64)
    pairs, distance = table[:, :2], table[:, 2]
    # Integers up to 2**53 are exact in float64 and fit in int64.
    if not (
        np.isfinite(pairs).all()
        and (pairs == np.round(pairs)).all()
        and (positions is not None or (pairs.min() >= 1 and pairs.max() <= 2**53))
    ):
        raise ValueError(
            f"The distance table {where}: the residue numbers i and j must be "
            + (
                "integer column numbers counted from 1."
                if positions is None
                else "integers."
            )
        )
    if positions is None:
        sites = pairs.astype(np.int64) - 1
    else:
        positions = np.asarray(positions)
        order = np.argsort(positions)
        known = np.searchsorted(positions[order], pairs).clip(0, len(positions) - 1)
        found = positions[order][known] == pairs
        sites = np.where(found, order[known], -1)
        keep = found.all(axis=1) & (pairs[:, 0] != pairs[:, 1])
        if not keep.any():
            raise ValueError(
                f"The distance table {where}: no pair has both residue numbers "
                f"among the model's ({positions.min()}..{positions.max()}); with "
                "a focus sequence the table must use its residue numbers."
            )
        sites, distance = sites[keep], distance[keep]
    distinct = sites[:, 0] != sites[:, 1]
    sites, distance = np.sort(sites[distinct], axis=1), distance[distinct]
    return sites[:, 0].copy(), sites[:, 1].copy(), distance


def read_contact_map(path):
    """Read a pair-distance table ``i j score distance`` (1-based columns).

    .. deprecated:: 0.2
        Use :func:`read_distances`, which reads these tables and more.

    Parameters
    ----------
    path : str, path-like or file object
        The table, gzipped or not.

    Returns
    -------
    i, j : ndarray of int64, shape (n_pairs,)
        The columns of each pair, counted from 0, ``i < j``.
    distance : ndarray of float64, shape (n_pairs,)
    """
    warnings.warn(
        "read_contact_map is deprecated in 0.2 and will be removed in 0.4; use "
        "sklearn_attn.contacts.read_distances.",
        FutureWarning,
        stacklevel=2,
    )
    return _read_distances(path, None, name="path", four_columns=True)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _source_text(source):
    if isinstance(source, (str, os.PathLike)):
        return repr(os.fspath(source))
    if hasattr(source, "name"):
        return repr(source.name)
    return f"read from a {type(source).__name__}"


_TOP_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?)?\s*\*?\s*L\s*(?:/\s*(\d+)\s*)?$")


def _resolve_top(k, n_sites):
    """``10``, ``"L"``, ``"L/5"``, ``"2L"`` or ``"1.5*L"`` to a number of pairs."""
    if isinstance(k, Integral) and not isinstance(k, bool) and k >= 1:
        return int(k)
    match = _TOP_PATTERN.match(k) if isinstance(k, str) else None
    if match is None or match.group(2) == "0" or float(match.group(1) or 1) == 0:
        raise ValueError(
            "top must hold positive integers or strings such as 'L/5', 'L/2', "
            f"'L', '2L'; got {k!r}."
        )
    factor = Fraction(match.group(1) or 1) / int(match.group(2) or 1)
    return max(1, math.floor(factor * n_sites))


def contact_precision(
    scores,
    i,
    j,
    distance,
    *,
    top=("L/5", "L/2", "L", "2L"),
    min_separation=6,
    cutoff=8.0,
):
    """Precision of the top-ranked pairs as contact predictions.

    The candidate pairs are the pairs of the contact map with
    ``|i - j| >= min_separation`` and a finite distance; they are ranked by
    ``scores[min(i, j), max(i, j)]`` (largest first, ties by ``(i, j)``), and
    a pair is a contact when its distance is below ``cutoff``.

    Parameters
    ----------
    scores : array-like of shape (L, L)
        Contact scores (e.g. APC-corrected Frobenius norms); NaN at a
        candidate pair is an error, as it cannot be ranked.
    i, j : array-like of int, shape (n_pairs,)
        Pairs of columns, counted from 0 (as from :func:`read_distances`).
    distance : array-like of shape (n_pairs,)
        Distance of each pair, in the unit of ``cutoff``.
    top : int, str or sequence of them, default=("L/5", "L/2", "L", "2L")
        Numbers of top pairs ``k``; strings are multiples of ``L``, the
        number of columns of ``scores`` (``"L/5"`` is ``floor(L / 5)``). A
        ``k`` above the number of candidates uses all candidates.
    min_separation : int, default=6
        Pairs closer than this along the chain are not candidates.
    cutoff : float, default=8.0
        Contact when ``distance < cutoff``.

    Returns
    -------
    precision : dict
        ``{k: fraction of contacts among the top k pairs}``, keyed by the
        entries of ``top`` as given.

    See Also
    --------
    read_distances : Pairs and distances from a table or a matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.contacts import contact_precision
    >>> scores = np.zeros((10, 10))
    >>> i, j = np.array([0, 0, 1, 2]), np.array([9, 6, 8, 3])
    >>> scores[i, j] = [4.0, 3.0, 2.0, 5.0]
    >>> distance = np.array([5.0, 12.0, 6.0, 3.0])
    >>> contact_precision(scores, i, j, distance, top=[1, 2, "L/5"])
    {1: 1.0, 2: 0.5, 'L/5': 0.5}
    """
    scores = check_real_array(scores, "scores").astype(np.float64, copy=False)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be a square (L, L) matrix; got {scores.shape}.")
    n_sites = scores.shape[0]
    i, j = check_real_array(i, "i"), check_real_array(j, "j")
    distance = check_real_array(distance, "distance").astype(np.float64, copy=False)
    if not (
        i.ndim == j.ndim == distance.ndim == 1 and i.size == j.size == distance.size
    ):
        raise ValueError(
            f"i, j and distance must be 1-D of the same length; got shapes {i.shape}, "
            f"{j.shape}, {distance.shape}."
        )
    for name, index in (("i", i), ("j", j)):
        if index.size and not np.issubdtype(index.dtype, np.integer):
            raise TypeError(
                f"{name} must hold integer column indices; got {index.dtype}."
            )
        if index.size and (index.min() < 0 or index.max() >= n_sites):
            raise ValueError(
                f"{name} must hold column indices in [0, {n_sites}) (counted from 0)."
            )
    if (
        not isinstance(min_separation, Integral)
        or isinstance(min_separation, bool)
        or min_separation < 0
    ):
        raise ValueError(
            f"min_separation must be a non-negative integer; got {min_separation!r}."
        )
    if not isinstance(cutoff, Real) or isinstance(cutoff, bool) or not cutoff > 0:
        raise ValueError(f"cutoff must be a positive number; got {cutoff!r}.")
    if isinstance(top, (str, Integral)) or not isinstance(top, Iterable):
        top = [top]
    sizes = {k: _resolve_top(k, n_sites) for k in top}

    low, high = np.minimum(i, j), np.maximum(i, j)
    candidate = (high - low >= min_separation) & np.isfinite(distance)
    low, high, distance = low[candidate], high[candidate], distance[candidate]
    if low.size == 0:
        raise ValueError(
            f"No pair of the contact map has |i - j| >= {min_separation} and a "
            "finite distance."
        )
    if np.unique(low * n_sites + high).size != low.size:
        raise ValueError("The contact map lists a pair more than once.")
    if np.isnan(scores[low, high]).any():
        raise ValueError("scores contains NaN at a candidate pair; it cannot rank.")
    order = np.lexsort((high, low, -scores[low, high]))
    hits = np.cumsum(distance[order] < cutoff)
    precision = {}
    for key, k in sizes.items():
        k = min(k, hits.size)
        precision[key] = float(hits[k - 1] / k)
    return precision


# -- distances from a PDB file ---------------------------------------------------------

# One-letter codes of the standard amino acids; any other residue reads as X.
_ONE_LETTER = {
    "ALA": "A",
    "ARG": "R",
    "ASN": "N",
    "ASP": "D",
    "CYS": "C",
    "GLN": "Q",
    "GLU": "E",
    "GLY": "G",
    "HIS": "H",
    "ILE": "I",
    "LEU": "L",
    "LYS": "K",
    "MET": "M",
    "PHE": "F",
    "PRO": "P",
    "SER": "S",
    "THR": "T",
    "TRP": "W",
    "TYR": "Y",
    "VAL": "V",
}
_ATOM_SETS = ("heavy", "CB", "CA")
# Atoms of one block of rows of the atom distance matrix: with the 3 coordinate
# differences, about 100 MB of float64 whatever the size of the chain.
_BLOCK_ELEMENTS = 1 << 22


def distances_from_pdb(source, chain=None, *, atoms="heavy", offset=0, output=None):
    """Distances between the residues of one chain of a PDB file.

    Reads the ``ATOM`` records of the first model of a file in the PDB format
    (the fixed columns of the wwPDB format: atom name, alternate location,
    residue name, chain, residue number, insertion code, coordinates,
    element) and computes, for every pair of residues with coordinates, the
    distance that defines a contact:

    - ``atoms="heavy"``: the smallest distance between an atom of one
      residue and an atom of the other, hydrogens (and deuteriums) left out:
      the usual definition in contact prediction from alignments, with the
      command's default ``--cutoff 8``;
    - ``atoms="CB"``: between the C-beta atoms, the C-alpha standing in for
      glycine and for a residue whose C-beta the file does not hold (CASP's
      definition, also with 8 Angstrom);
    - ``atoms="CA"``: between the C-alpha atoms.

    The residues are numbered by the file's residue numbers plus ``offset``,
    so that they can be made to match the residue numbers of a focus
    sequence (``ID/start-end`` names, see
    :class:`~sklearn_attn.contacts.Alignment`). ``output``
    writes the pairs as the table that :func:`read_distances` and the
    ``contacts`` command's ``--distances`` read.

    Of the atoms of a residue given at several alternate locations (column
    17), those at the first location listed are kept. ``HETATM`` records
    (ligands, waters, and modified residues such as selenomethionine) are not
    read, nor are the models after the first of an NMR ensemble.

    Parameters
    ----------
    source : str, path-like or file object
        The PDB file, gzipped or not (recognised by its content).
    chain : str or None, default=None
        The chain identifier (column 22 of the records, one character). None
        reads the file's only chain, and is an error when the file holds
        several.
    atoms : {"heavy", "CB", "CA"}, default="heavy"
        Which atoms measure the distance between two residues.
    offset : int, default=0
        Added to the file's residue numbers.
    output : str, path-like, file object or None, default=None
        Where to write the table too: a header line ``i j distance``, then
        one line per pair, ``i < j``, tab-separated, in the order of ``i``
        then ``j``.

    Returns
    -------
    structure : :class:`~sklearn.utils.Bunch`
        A dictionary whose keys are also attributes:

        ``positions`` : ndarray of int64, shape (n_residues,)
            The residue numbers (with ``offset``) of the residues with
            coordinates, increasing.
        ``sequence`` : str
            Their one-letter codes (``X`` for a residue other than the 20
            standard amino acids), to check the numbering against the focus
            sequence.
        ``residue_i``, ``residue_j`` : ndarray of int64, shape (n_pairs,)
            The residue numbers of every pair, ``residue_i < residue_j``, in
            the order of the table; ``read_distances`` turns them into site
            indices.
        ``distance`` : ndarray of float64, shape (n_pairs,)
            Their distances in Angstrom, rounded to 0.001 (the precision of
            the file's coordinates), as written to ``output``.
        ``chain`` : str
            The chain read.

    Raises
    ------
    ValueError
        For a file without ``ATOM`` records, an ``atoms`` other than the
        three above, a ``chain`` the file does not hold (or None for a file of
        several chains), a record whose residue number or coordinates are not
        numbers, a residue with an insertion code (``52A``; renumber the
        chain first), a residue number given to two residues, or fewer than
        two residues with coordinates.
    TypeError
        When ``source`` is neither a path nor an open file, ``chain`` is not a
        string, ``offset`` is not an integer, or ``output`` is neither a path
        nor a file opened for writing text.

    See Also
    --------
    read_distances : Pairs and distances from a table or a matrix.
    contact_precision : Precision of ranked contact predictions.

    Examples
    --------
    Three residues, a glycine and two alanines; the glycine's hydrogen is not
    counted:

    >>> import io
    >>> from sklearn_attn.contacts import distances_from_pdb, read_distances
    >>> pdb = '''\\
    ... ATOM      1  CA  GLY A  10       0.000   0.000   0.000  1.00  0.00           C
    ... ATOM      2  HA2 GLY A  10       1.000   0.500   0.000  1.00  0.00           H
    ... ATOM      3  CA  ALA A  11       3.000   0.000   0.000  1.00  0.00           C
    ... ATOM      4  CB  ALA A  11       3.000   1.500   0.000  1.00  0.00           C
    ... ATOM      5  CA  ALA A  12       3.000   6.000   0.000  1.00  0.00           C
    ... ATOM      6  CB  ALA A  12       3.000   4.000   0.000  1.00  0.00           C
    ... END
    ... '''
    >>> structure = distances_from_pdb(io.StringIO(pdb), offset=100)
    >>> structure.positions.tolist(), structure.sequence
    ([110, 111, 112], 'GAA')
    >>> structure.residue_i.tolist(), structure.residue_j.tolist()
    ([110, 110, 111], [111, 112, 112])
    >>> structure.distance.tolist()
    [3.0, 5.0, 2.5]
    >>> distances_from_pdb(io.StringIO(pdb), atoms="CA").distance.tolist()
    [3.0, 6.708, 6.0]

    The table for ``--distances``, which :func:`read_distances` reads back:

    >>> table = io.StringIO()
    >>> _ = distances_from_pdb(io.StringIO(pdb), output=table)
    >>> table.getvalue().splitlines()
    ['i\\tj\\tdistance', '10\\t11\\t3.000', '10\\t12\\t5.000', '11\\t12\\t2.500']
    >>> _ = table.seek(0)
    >>> read_distances(table)
    (array([ 9,  9, 10]), array([10, 11, 11]), array([3. , 5. , 2.5]))
    """
    if atoms not in _ATOM_SETS:
        raise ValueError(f"atoms must be one of {_ATOM_SETS}; got {atoms!r}.")
    if chain is not None and not isinstance(chain, str):
        raise TypeError(
            f"chain must be a one-character string or None; got {type(chain).__name__}."
        )
    if chain is not None and len(chain) != 1:
        raise ValueError(
            f"chain must be one character (column 22 of the records); got {chain!r}."
        )
    if not isinstance(offset, Integral) or isinstance(offset, bool):
        raise TypeError(f"offset must be an integer; got {offset!r}.")
    if not (
        output is None
        or isinstance(output, (str, os.PathLike))
        or hasattr(output, "write")
    ):
        raise TypeError(
            "output must be None, a path or a file opened for writing text; got an "
            f"object of type {type(output).__name__}."
        )
    where = _source_text(source)
    residues, split = _read_pdb_atoms(_read_text(source), where)
    chains = list(dict.fromkeys(key[0] for key in residues))
    if not chains:
        raise ValueError(f"The PDB file {where} holds no ATOM records.")
    if chain is None:
        if len(chains) > 1:
            raise ValueError(
                f"The PDB file {where} holds the chains {_chain_list(chains)}; "
                "choose one with chain=."
            )
        chain = chains[0]
    elif chain not in chains:
        raise ValueError(
            f"chain {chain!r} is not in the PDB file {where}, which holds the "
            f"chains {_chain_list(chains)}."
        )
    numbers, letters, coordinates = [], [], []
    for (key_chain, number, code), (name, found) in residues.items():
        if key_chain != chain:
            continue
        if (key_chain, number, code) in split:
            raise ValueError(
                f"The PDB file {where}: residue number {number} of chain {chain!r} "
                "is given to two residues (its records are not contiguous)."
            )
        if code != " ":
            raise ValueError(
                f"The PDB file {where}: residue {number}{code} of chain {chain!r} "
                "has an insertion code, which the integer residue numbers of a "
                "distance table cannot hold; renumber the chain first."
            )
        selected = _residue_atoms(name, found, atoms)
        if selected:
            numbers.append(number)
            letters.append(_ONE_LETTER.get(name, "X"))
            coordinates.append(np.array(selected, dtype=np.float64))
    if len(numbers) < 2:
        raise ValueError(
            f"The PDB file {where}: chain {chain!r} has {len(numbers)} residue(s) "
            f"with {'heavy atoms' if atoms == 'heavy' else 'a ' + atoms + ' atom'}; "
            "a distance needs two."
        )
    order = np.argsort(numbers, kind="stable")
    positions = np.asarray(numbers, dtype=np.int64)[order] + offset
    coordinates = [coordinates[k] for k in order]
    minimum = _minimum_distances(coordinates)
    i, j = np.triu_indices(len(positions), 1)
    distance = np.round(minimum[i, j], 3)
    structure = Bunch(
        positions=positions,
        sequence="".join(letters[k] for k in order),
        residue_i=positions[i],
        residue_j=positions[j],
        distance=distance,
        chain=chain,
    )
    if output is not None:
        rows = [
            [str(a), str(b), f"{d:.3f}"]
            for a, b, d in zip(
                structure.residue_i.tolist(),
                structure.residue_j.tolist(),
                distance.tolist(),
                strict=True,
            )
        ]
        try:
            _write_rows(output, rows, header=["i", "j", "distance"], separator="\t")
        except TypeError:  # a file opened in binary mode
            raise TypeError("output must be opened in text mode.") from None
    return structure


def _read_pdb_atoms(text, where):
    """The residues of the ATOM records of the first model, in the order of the file.

    Returns ``{(chain, number, insertion code): (residue name, {atom name:
    (xyz, element)})}``, and the keys whose records are not contiguous (one
    residue number given to two residues).
    """
    residues, split = {}, set()
    alternate = {}  # the alternate location kept for each residue
    previous = None
    for line_number, line in enumerate(text.split("\n"), 1):
        record = line[:6]
        if record == "ENDMDL":
            break  # the first model only
        if record != "ATOM  ":
            continue
        try:
            number = int(line[22:26])
            xyz = (float(line[30:38]), float(line[38:46]), float(line[46:54]))
        except ValueError:
            raise ValueError(
                f"The PDB file {where}: line {line_number} is an ATOM record "
                "without a residue number (columns 23-26) and coordinates "
                f"(columns 31-54): {line.rstrip()[:80]!r}."
            ) from None
        key = (line[21], number, line[26])
        if key in residues and key != previous:
            split.add(key)
        previous = key
        location = line[16]
        if location != " ":
            # Of atoms at several locations, those of the first location listed.
            if alternate.setdefault(key, location) != location:
                continue
        residue_name, found = residues.setdefault(key, (line[17:20].strip(), {}))
        atom_name = line[12:16].strip()
        if atom_name not in found:
            found[atom_name] = (xyz, _element(line[76:78], atom_name))
    return residues, split


def _element(field, atom_name):
    """The element of an atom: columns 77-78, else read off the atom's name."""
    element = field.strip().upper()
    if element:
        return element
    # Names such as "1HB", "HG12" or "DA": leading digits, then the element.
    return atom_name.lstrip("0123456789")[:1].upper()


def _residue_atoms(residue_name, found, atoms):
    """The coordinates that measure a residue's distances (possibly none)."""
    if atoms == "heavy":
        return [xyz for xyz, element in found.values() if element not in ("H", "D")]
    if atoms == "CB" and residue_name != "GLY" and "CB" in found:
        return [found["CB"][0]]
    return [found["CA"][0]] if "CA" in found else []


def _minimum_distances(coordinates):
    """``(n, n)`` smallest distances between the atoms of each pair of residues."""
    points = np.concatenate(coordinates)
    # ends[r]: the first atom of residue r; ends[n]: the number of atoms.
    ends = np.concatenate([[0], np.cumsum([len(c) for c in coordinates])])
    n_residues = len(coordinates)
    minimum = np.zeros((n_residues, n_residues))
    first = 0
    while first < n_residues:
        # The atoms of residues [first, last) against those of residues first on:
        # the upper triangle, in blocks of rows of bounded size.
        a = ends[first]
        rows = max(1, _BLOCK_ELEMENTS // (3 * (len(points) - a)))
        last = int(np.searchsorted(ends, a + rows, side="right")) - 1
        last = min(max(last, first + 1), n_residues)
        difference = points[a : ends[last], None, :] - points[None, a:, :]
        atom = np.sqrt(np.einsum("ijk,ijk->ij", difference, difference))
        per_column = np.minimum.reduceat(atom, ends[first:-1] - a, axis=1)
        block = np.minimum.reduceat(per_column, ends[first:last] - a, axis=0)
        minimum[first:last, first:] = block
        minimum[first:, first:last] = block.T
        first = last
    return minimum


def _chain_list(chains):
    return ", ".join(repr(c) for c in chains)

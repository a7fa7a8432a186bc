"""The Kunitz/BPTI family (Pfam PF00014): a real alignment with its contact map."""

from __future__ import annotations

from importlib import resources

from sklearn.utils import Bunch

__all__ = ["load_pf00014"]


def load_pf00014():
    """Load the PF00014 (Kunitz/BPTI domain) alignment and its residue distances.

    13,600 aligned sequences of length 53 over ``-ACDEFGHIKLMNPQRSTVWY`` (the gap
    is a state), as distributed with ArDCA.jl (MIT licence, shipped with this
    package), with the minimum inter-residue atom distance of every pair of
    columns. Contacts are usually taken as distance < 8 A with ``|i - j| >= 6``
    (439 of the 1,128 such pairs).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``names`` and ``sequences`` (lists of str); ``contact_i``, ``contact_j``
        (0-based column indices, ``i < j``) and ``distance`` (Angstrom) for all
        1,378 pairs; ``alphabet``; ``DESCR``.

    Examples
    --------
    >>> from sklearn_attn.datasets import load_pf00014
    >>> data = load_pf00014()
    >>> len(data.sequences), len(data.sequences[0]), data.distance.shape
    (13600, 53, (1378,))
    """
    from ..contacts import read_alignment, read_distances
    from ..potts import ALPHABETS

    folder = resources.files(__package__) / "data" / "PF00014"
    with resources.as_file(folder / "PF00014_mgap6.fasta.gz") as path:
        names, sequences = read_alignment(path)
    with resources.as_file(folder / "PF00014_distances.tsv") as path:
        i, j, distance = read_distances(path)
    return Bunch(
        names=names,
        sequences=sequences,
        contact_i=i,
        contact_j=j,
        distance=distance,
        alphabet=ALPHABETS["protein"],
        DESCR=load_pf00014.__doc__,
    )

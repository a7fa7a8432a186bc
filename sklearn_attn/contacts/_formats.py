"""Files for other tools: ranked contact tables, plmc's coupling scores, parameters,
sequence weights.

One topic, the files the command shares with other tools: each writer and its
reader (or the tool that reads it) change together, and they share the checks
of the site numbers, letters and parameters they hold.

:func:`write_contacts` writes the ranked pairs as CSV, :func:`write_ec`
plmc's coupling-scores format (as EVcouplings reads it),
:func:`write_couplings` / :func:`read_couplings` the model's parameters as
an ``.npz`` archive that reads back bit for bit, and :func:`write_weights` /
:func:`read_weights` sequence weights as plmc's weights files hold them.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import zipfile

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_real_array
from ._alignment import _read_text

__all__ = [
    "read_couplings",
    "read_weights",
    "write_contacts",
    "write_couplings",
    "write_ec",
    "write_weights",
]


def _sites(positions, residues, n_sites):
    """Validated site numbers (int64, default ``1..L``) and residue letters."""
    if positions is None:
        positions = np.arange(1, n_sites + 1, dtype=np.int64)
    else:
        positions = check_real_array(positions, "positions")
        if positions.ndim != 1 or positions.size != n_sites:
            raise ValueError(
                f"positions must be 1-D with one number per site ({n_sites}); got "
                f"shape {positions.shape}."
            )
        if positions.dtype.kind not in "iu":
            raise TypeError(
                f"positions must hold integers; got dtype {positions.dtype}."
            )
        if positions.dtype.kind == "u" and positions.max() > np.iinfo(np.int64).max:
            raise ValueError("positions must fit in int64.")
        positions = positions.astype(np.int64)
        if (np.diff(positions) <= 0).any():
            raise ValueError(
                f"positions must be strictly increasing; got {positions.tolist()}."
            )
    if residues is None:
        return positions, None
    if isinstance(residues, np.ndarray) and residues.ndim == 1:
        residues = residues.tolist()
    if not isinstance(residues, (str, list, tuple)):
        raise TypeError(
            "residues must be a str or a sequence of single characters; got "
            f"{type(residues).__name__}."
        )
    residues = list(residues)
    if len(residues) != n_sites:
        raise ValueError(
            f"residues must have one letter per site ({n_sites}); got {len(residues)}."
        )
    for k, letter in enumerate(residues):
        # A blank would break the space-separated coupling-scores format.
        if not isinstance(letter, str) or len(letter) != 1 or letter.isspace():
            raise ValueError(
                "residues must hold single characters other than whitespace; got "
                f"{letter!r} at residues[{k}]."
            )
    return positions, residues


def _pair_scores(scores, name, n_sites=None):
    """Validated ``(L, L)`` float64 scores, finite above the diagonal."""
    scores = check_real_array(scores, name).astype(np.float64, copy=False)
    if n_sites is None:
        if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or len(scores) < 2:
            raise ValueError(
                f"{name} must be a square (L, L) matrix with L >= 2; got shape "
                f"{scores.shape}."
            )
    elif scores.shape != (n_sites, n_sites):
        raise ValueError(
            f"{name} must have the shape of scores, {(n_sites, n_sites)}; got "
            f"{scores.shape}."
        )
    if not np.isfinite(scores[np.triu_indices(len(scores), 1)]).all():
        raise ValueError(f"{name} contains NaN or infinity above the diagonal.")
    return scores


@contextlib.contextmanager
def _text_output(file):
    """An open text file: ``file`` itself, or the path opened for writing."""
    if isinstance(file, (str, os.PathLike)):
        # newline="": the same bytes on every platform.
        with open(file, "w", encoding="utf-8", newline="") as handle:
            yield handle
    elif hasattr(file, "write"):
        yield file
    else:
        raise TypeError(
            "file must be a path or a file opened for writing text; got an object "
            f"of type {type(file).__name__}."
        )


def _write_rows(file, rows, *, header=None, separator=None):
    """Write ``rows`` (lists of str) as lines ending in ``\\n``.

    With ``separator=None``, as CSV (fields quoted where needed); otherwise
    the fields joined by ``separator``, verbatim.
    """
    chunk = 1 << 14  # rows formatted per write: bounded memory, few calls
    with _text_output(file) as handle:
        for start in range(0, max(len(rows), 1), chunk):
            block = rows[start : start + chunk]
            if start == 0 and header is not None:
                block = [header, *block]
            if separator is None:
                buffer = io.StringIO()
                csv.writer(buffer, lineterminator="\n").writerows(block)
                text = buffer.getvalue()
            else:
                text = "".join(separator.join(row) + "\n" for row in block)
            try:
                handle.write(text)
            except TypeError:  # a file opened in binary mode
                raise TypeError(
                    "file must be opened in text mode (its write() refuses str)."
                ) from None


def write_contacts(file, scores, raw_scores=None, *, positions=None, residues=None):
    """Write ranked contact scores as a CSV table, one row per pair of sites.

    The header is ``i,j,residue_i,residue_j,score,score_raw``, then one row
    for each of the ``L (L - 1) / 2`` pairs of sites ``k < l``, sorted by
    score, largest first (ties by ``(i, j)``, so the order is deterministic).
    Numbers are written with ``format(x, ".8g")``: eight significant digits,
    enough to rank and plot, short enough to read (``-0.0`` as ``0``).

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path (created or overwritten, UTF-8, ``\\n`` line
        endings) or a file opened in text mode.
    scores : array-like of shape (L, L)
        Contact scores, for instance ``apc(frobenius_scores(couplings))`` or
        :meth:`sklearn_attn.PottsPseudoLikelihood.contact_scores`; ``L >= 2``. Only the
        entries above the diagonal, ``scores[k, l]`` with ``k < l``, are read
        (they must be finite), so the matrix need not be symmetric.
    raw_scores : array-like of shape (L, L) or None, default=None
        Second score of each pair for the ``score_raw`` column, e.g. the
        Frobenius norms before the average-product correction; the column is
        left empty when None.
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site in the ``i`` and ``j`` columns, strictly
        increasing, e.g. the residue numbers of the focus sequence; default
        ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site in the ``residue_i`` and ``residue_j`` columns, a
        str of length ``L`` or ``L`` single characters (e.g. the focus
        sequence); ``-`` for every site when None, as plmc writes.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For scores that are not a square matrix with ``L >= 2`` or have NaN
        or infinity above the diagonal, ``raw_scores`` of another shape,
        ``positions`` that are not ``L`` strictly increasing numbers, or
        ``residues`` that are not ``L`` single characters.
    TypeError
        For scores that are not real numbers, ``positions`` that are not
        integers, or a ``file`` that is neither a path nor a text file.

    See Also
    --------
    write_ec : The same scores in plmc's coupling-scores format.
    sklearn_attn.potts.apc : Average-product correction of the scores.
    sklearn_attn.potts.frobenius_scores : Raw scores from a coupling tensor.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.contacts import write_contacts
    >>> scores = np.array([[0.0, 0.5, -0.25], [0.5, 0.0, 1.0], [-0.25, 1.0, 0.0]])
    >>> out = io.StringIO()
    >>> write_contacts(out, scores, positions=[10, 11, 12], residues="MKV")
    >>> print(out.getvalue(), end="")
    i,j,residue_i,residue_j,score,score_raw
    11,12,K,V,1,
    10,11,M,K,0.5,
    10,12,M,V,-0.25,
    """
    scores = _pair_scores(scores, "scores")
    n_sites = len(scores)
    if raw_scores is not None:
        raw_scores = _pair_scores(raw_scores, "raw_scores", n_sites)
    positions, residues = _sites(positions, residues, n_sites)
    k, l = np.triu_indices(n_sites, 1)
    # lexsort sorts by its last key first: score descending, then (i, j).
    order = np.lexsort((l, k, -scores[k, l]))
    k, l = k[order], l[order]
    values = scores[k, l] + 0.0  # + 0.0 writes -0.0 as 0
    numbers = positions.tolist()
    letters = ["-"] * n_sites if residues is None else residues
    if raw_scores is None:
        raw = [""] * k.size
    else:
        raw = [format(second, ".8g") for second in (raw_scores[k, l] + 0.0).tolist()]
    rows = [
        [
            str(numbers[a]),
            str(numbers[b]),
            letters[a],
            letters[b],
            format(score, ".8g"),
            second,
        ]
        for a, b, score, second in zip(
            k.tolist(), l.tolist(), values.tolist(), raw, strict=True
        )
    ]
    _write_rows(
        file, rows, header=["i", "j", "residue_i", "residue_j", "score", "score_raw"]
    )


def write_ec(file, scores, *, positions=None, residues=None):
    """Write contact scores in plmc's coupling-scores format.

    One line per pair of sites ``k < l``, in the order of ``(i, j)`` (not
    ranked), with six fields separated by single spaces and no header::

        i A_i j A_j 0 score

    the site numbers and residue letters of both sites, plmc's placeholder
    ``0``, and the score printed like C's ``%f`` (six decimals; ``-0.0`` as
    ``0.000000``). EVcouplings
    reads these files (plmc's ``-c`` output) as the columns
    ``i A_i j A_j fn cn``.

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path (created or overwritten, UTF-8, ``\\n`` line
        endings) or a file opened in text mode.
    scores : array-like of shape (L, L)
        Contact scores, e.g. APC-corrected Frobenius norms; ``L >= 2``. Only
        the entries above the diagonal are read (they must be finite).
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site, strictly increasing (e.g. the residue numbers
        of the focus sequence); default ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site (e.g. the focus sequence), ``L`` single
        characters; ``-`` for every site when None.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        As :func:`write_contacts`.
    TypeError
        As :func:`write_contacts`.

    See Also
    --------
    write_contacts : The scores as a ranked CSV table.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.contacts import write_ec
    >>> scores = np.array([[0.0, 0.5, -0.25], [0.5, 0.0, 1.0], [-0.25, 1.0, 0.0]])
    >>> out = io.StringIO()
    >>> write_ec(out, scores, positions=[10, 11, 12], residues="MKV")
    >>> print(out.getvalue(), end="")
    10 M 11 K 0 0.500000
    10 M 12 V 0 -0.250000
    11 K 12 V 0 1.000000
    """
    scores = _pair_scores(scores, "scores")
    n_sites = len(scores)
    positions, residues = _sites(positions, residues, n_sites)
    numbers = positions.tolist()
    letters = ["-"] * n_sites if residues is None else residues
    k, l = np.triu_indices(n_sites, 1)
    rows = [
        [str(numbers[a]), letters[a], str(numbers[b]), letters[b], "0", f"{score:.6f}"]
        for a, b, score in zip(
            k.tolist(), l.tolist(), (scores[k, l] + 0.0).tolist(), strict=True
        )
    ]
    _write_rows(file, rows, separator=" ")


def _states(states, n_states):
    """Validated state labels: a unicode array, or int64 codes."""
    if isinstance(states, str):  # a string of states, one per character
        states = list(states)
    try:
        states = np.asarray(states)
    except ValueError:  # ragged
        states = np.asarray(None)
    if states.dtype.kind == "O" and all(isinstance(s, str) for s in states.flat):
        states = states.astype(str)
    if states.dtype.kind not in "iuU" or states.ndim != 1:
        raise TypeError(
            "states must be a 1-D sequence of str labels or of integer codes; got "
            f"an array of dtype {states.dtype} and shape {states.shape}."
        )
    if states.size != n_states:
        raise ValueError(
            f"states must have one label per state (q = {n_states}); got {states.size}."
        )
    if np.unique(states).size != states.size:
        raise ValueError(f"states must be distinct; got {states.tolist()}.")
    if states.dtype.kind in "iu":
        if states.size and states.max() > np.iinfo(np.int64).max:
            raise ValueError("Integer states must fit in int64.")
        states = states.astype(np.int64)
    return states


def _parameters(couplings, fields, states, positions, residues):
    """Validated couplings, fields, states, positions and residues."""
    couplings = check_real_array(couplings, "couplings").astype(np.float64)
    if (
        couplings.ndim != 4
        or couplings.shape[0] != couplings.shape[2]
        or couplings.shape[1] != couplings.shape[3]
        or 0 in couplings.shape
    ):
        raise ValueError(
            "couplings must have shape (L, q, L, q) with L, q >= 1; got "
            f"{couplings.shape}."
        )
    n_sites, n_states = couplings.shape[:2]
    fields = check_real_array(fields, "fields").astype(np.float64)
    if fields.shape != (n_sites, n_states):
        raise ValueError(
            f"fields must have shape (L, q) = {(n_sites, n_states)} to match "
            f"couplings; got {fields.shape}."
        )
    for name, array in (("couplings", couplings), ("fields", fields)):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} contains NaN or infinity.")
    states = _states(states, n_states)
    positions, residues = _sites(positions, residues, n_sites)
    return couplings, fields, states, positions, residues


def write_couplings(
    file,
    couplings,
    fields,
    *,
    states,
    positions=None,
    residues=None,
    compress=False,
    **metadata,
):
    """Save the parameters of a Potts model to a ``.npz`` archive.

    The archive (:func:`numpy.savez`, or :func:`numpy.savez_compressed` with
    ``compress``; readable without pickle by :func:`numpy.load` with
    ``allow_pickle=False`` or :func:`read_couplings`) holds the arrays

    - ``couplings``, float64 of shape ``(L, q, L, q)``;
    - ``fields``, float64 of shape ``(L, q)``;
    - ``states``, the ``q`` state labels (unicode strings) or integer codes
      (int64), in the order of the state axes;
    - ``positions``, int64 of shape ``(L,)``, the site numbers;
    - ``residues``, a unicode string, the focus residues or ``''``;
    - ``metadata``, a unicode string: the JSON object of the keyword
      arguments in ``metadata``.

    The parameters are stored in whatever gauge they are given in;
    :class:`~sklearn_attn.PottsPseudoLikelihood`'s ``couplings_`` and ``fields_`` are in
    the zero-sum gauge.

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path, created or overwritten as given (no ``.npz``
        is appended, unlike :func:`numpy.savez`), or a file opened in binary
        mode.
    couplings : array-like of shape (L, q, L, q)
        ``couplings[i, a, j, b]`` couples state ``a`` at site ``i`` with
        state ``b`` at site ``j``; finite real numbers, ``L, q >= 1``.
    fields : array-like of shape (L, q)
        Finite real numbers.
    states : str or sequence of shape (q,)
        Distinct labels of the states, str or integer codes, e.g. a fitted
        model's ``states_``; a str is read as its characters.
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site, strictly increasing; default ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site, e.g. the focus sequence; ``L`` single
        characters.
    compress : bool, default=False
        Whether to deflate the archive. Fitted couplings are doubles whose
        low bits are noise: deflating shrinks them little (a quarter at most,
        from the zero diagonal blocks) and takes far longer than writing
        them, which for a long family is a large share of the whole run.
    **metadata : str, int, float, bool or None
        Scalars stored with the parameters, e.g. ``n_eff``,
        ``alpha_couplings``, ``alpha_fields``, ``n_iter``, ``objective``;
        NumPy scalars are stored as the Python scalars they hold, and floats
        must be finite (the JSON is standard).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For shapes that do not match ``(L, q, L, q)`` and ``(L, q)``, NaN or
        infinity, ``states`` that are not ``q`` distinct labels,
        ``positions`` or ``residues`` as in :func:`write_contacts`, or a
        non-finite float in ``metadata``.
    TypeError
        For parameters that are not real numbers, ``states`` that are neither
        str nor integers, ``metadata`` values that are not scalars, or a
        ``file`` that is neither a path nor a binary file.

    See Also
    --------
    read_couplings : Read the archive back.
    write_contacts : Contact scores as a ranked CSV table.

    Examples
    --------
    >>> import io
    >>> import warnings
    >>> from sklearn.exceptions import ConvergenceWarning
    >>> from sklearn_attn.datasets import make_potts_sequences
    >>> from sklearn_attn import PottsPseudoLikelihood
    >>> from sklearn_attn.contacts import read_couplings, write_couplings
    >>> X, _ = make_potts_sequences(
    ...     n_samples=200, n_sites=5, n_states=3, random_state=0
    ... )
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", ConvergenceWarning)
    ...     model = PottsPseudoLikelihood(max_iter=10, random_state=0).fit(X)
    >>> archive = io.BytesIO()  # or a path such as "model.npz"
    >>> write_couplings(
    ...     archive, model.couplings_, model.fields_, states=model.states_,
    ...     residues="MKVLA", n_iter=model.n_iter_, objective=model.objective_,
    ... )
    >>> _ = archive.seek(0)
    >>> saved = read_couplings(archive)
    >>> saved.couplings.shape, saved.states, saved.positions, saved.residues
    ((5, 3, 5, 3), array([0, 1, 2]), array([1, 2, 3, 4, 5]), 'MKVLA')
    >>> sorted(saved.metadata), saved.metadata["n_iter"] == model.n_iter_
    (['n_iter', 'objective'], True)
    """
    couplings, fields, states, positions, residues = _parameters(
        couplings, fields, states, positions, residues
    )
    scalars = {}
    for key, value in metadata.items():
        if isinstance(value, np.generic):
            value = value.item()
        if value is not None and not isinstance(value, (str, bool, int, float)):
            raise TypeError(
                f"metadata must be str, int, float, bool or None; got "
                f"{type(value).__name__} for {key!r}."
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"metadata {key!r} must be finite; got {value!r}.")
        scalars[key] = value
    arrays = {
        "couplings": couplings,
        "fields": fields,
        "states": states,
        "positions": positions,
        "residues": np.array("" if residues is None else "".join(residues)),
        "metadata": np.array(json.dumps(scalars, sort_keys=True)),
    }
    save = np.savez_compressed if compress else np.savez
    if isinstance(file, (str, os.PathLike)):
        # Opened here, so that the file has exactly the name given.
        with open(file, "wb") as handle:
            save(handle, **arrays)
    elif hasattr(file, "write"):
        try:
            save(file, **arrays)
        except TypeError:  # a file opened in text mode
            raise TypeError(
                "file must be opened in binary mode (its write() refuses bytes)."
            ) from None
    else:
        raise TypeError(
            "file must be a path or a file opened for writing bytes; got an object "
            f"of type {type(file).__name__}."
        )


_ARCHIVE_KEYS = ("couplings", "fields", "states", "positions", "residues", "metadata")


def read_couplings(file):
    """Read the parameters of a Potts model saved by :func:`write_couplings`.

    Nothing is unpickled: the archive is opened with ``allow_pickle=False``,
    and its arrays are checked as :func:`write_couplings` checks them.

    Parameters
    ----------
    file : str, path-like or file object
        The ``.npz`` archive, as a path or a file opened in binary mode.

    Returns
    -------
    model : :class:`~sklearn.utils.Bunch`
        With keys

        - ``couplings``: ndarray of float64, shape (L, q, L, q);
        - ``fields``: ndarray of float64, shape (L, q);
        - ``states``: ndarray of shape (q,), unicode labels or int64 codes;
        - ``positions``: ndarray of int64, shape (L,);
        - ``residues``: str, or None when none were saved;
        - ``metadata``: dict, the keyword arguments given to
          :func:`write_couplings`.

    Raises
    ------
    ValueError
        For a file that is not a ``.npz`` archive, lacks one of the arrays,
        holds pickled objects, or whose arrays are inconsistent.
    TypeError
        When ``file`` is neither a path nor an open file.

    See Also
    --------
    write_couplings : Save the parameters.
    sklearn_attn.potts.frobenius_scores : Contact scores from the couplings.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.contacts import read_couplings, write_couplings
    >>> archive = io.BytesIO()
    >>> write_couplings(
    ...     archive, np.zeros((3, 2, 3, 2)), np.zeros((3, 2)), states="AB",
    ...     positions=[4, 5, 7], n_eff=41.5,
    ... )
    >>> _ = archive.seek(0)
    >>> saved = read_couplings(archive)
    >>> saved.states, saved.positions, saved.residues, saved.metadata
    (array(['A', 'B'], dtype='<U1'), array([4, 5, 7]), None, {'n_eff': 41.5})
    """
    if not isinstance(file, (str, os.PathLike)) and not hasattr(file, "read"):
        raise TypeError(
            "file must be a path or a file opened for reading bytes; got an object "
            f"of type {type(file).__name__}."
        )
    try:
        archive = np.load(file, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(
            f"file is not a .npz archive of Potts parameters (numpy.load: {exc})"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(
            "file is a single .npy array, not a .npz archive of Potts parameters."
        )
    with archive:
        missing = [key for key in _ARCHIVE_KEYS if key not in archive.files]
        if missing:
            raise ValueError(
                f"file is not an archive written by write_couplings: it lacks the "
                f"arrays {missing}."
            )
        try:
            arrays = {key: archive[key] for key in _ARCHIVE_KEYS}
        except ValueError as exc:  # object arrays, which would need pickle
            raise ValueError(
                f"file holds an array that cannot be read: {exc}"
            ) from None
    for key in ("residues", "metadata"):
        if arrays[key].dtype.kind != "U" or arrays[key].ndim != 0:
            raise ValueError(f"The array {key!r} of file must be a unicode string.")
    residues = str(arrays["residues"][()]) or None
    try:
        metadata = json.loads(str(arrays["metadata"][()]))
    except ValueError as exc:
        raise ValueError(f"The metadata of file is not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise ValueError("The metadata of file must be a JSON object.")
    couplings, fields, states, positions, residues = _parameters(
        arrays["couplings"],
        arrays["fields"],
        arrays["states"],
        arrays["positions"],
        residues,
    )
    return Bunch(
        couplings=couplings,
        fields=fields,
        states=states,
        positions=positions,
        residues=None if residues is None else "".join(residues),
        metadata=metadata,
    )


def write_weights(file, weights):
    """Write sequence weights as plmc does: one number a line, one line a sequence.

    Each weight is written with 17 significant digits, so that
    :func:`read_weights` reads back the same float64 numbers.

    Parameters
    ----------
    file : str, path-like or file object
        A path, or a file opened for writing text.
    weights : array-like of shape (n_sequences,)
        Non-negative finite weights, in the order of the alignment's sequences.

    See Also
    --------
    read_weights : The inverse.
    sklearn_attn.potts.sequence_weights : The identity reweighting.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.contacts import read_weights, write_weights
    >>> out = io.StringIO()
    >>> write_weights(out, [1.0, 0.5, 1 / 3])
    >>> out.getvalue()
    '1\\n0.5\\n0.33333333333333331\\n'
    >>> read_weights(io.StringIO(out.getvalue())).tolist() == [1.0, 0.5, 1 / 3]
    True
    """
    weights = _check_weights(check_real_array(weights, "weights", dtype=np.float64))
    _write_rows(file, [[f"{w:.17g}"] for w in weights.tolist()], separator="")


def read_weights(file, n_sequences=None):
    """Read sequence weights written by :func:`write_weights` or plmc.

    Parameters
    ----------
    file : str, path-like or file object
        The weights: numbers separated by white space (plmc writes one a
        line); ``#`` starts a comment.
    n_sequences : int or None, default=None
        The number of sequences the weights must match.

    Returns
    -------
    weights : ndarray of shape (n_sequences,), dtype float64

    Raises
    ------
    ValueError
        For text that is not numbers, negative or non-finite weights, no
        positive weight, or a count other than ``n_sequences``.
    """
    text = _read_text(file, name="file")
    fields = [f for line in text.split("\n") for f in line.partition("#")[0].split()]
    try:
        weights = np.array([float(field) for field in fields], dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"The weights file must hold numbers only: {exc}.") from None
    if n_sequences is not None and weights.size != n_sequences:
        raise ValueError(
            f"The weights file has {weights.size} weight(s) but the alignment "
            f"{n_sequences} sequence(s) (after dropping those with letters "
            "outside the alphabet): one weight a sequence, in file order."
        )
    return _check_weights(weights, "the weights file")


def _check_weights(weights, name="weights"):
    if weights.ndim != 1 or weights.size == 0:
        raise ValueError(f"{name} must be 1-D with one weight a sequence.")
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError(f"{name} must hold finite non-negative numbers.")
    if not (weights > 0).any():
        raise ValueError(f"{name} holds no positive weight.")
    return weights

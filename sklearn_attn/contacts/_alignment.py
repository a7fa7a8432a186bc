"""Alignment files for Potts models: FASTA, A2M and A3M, read as plmc reads them.

:class:`Alignment` is an alignment encoded once: integer codes over its
states, with the names, residue numbers and focus it was read with and the
sequences it dropped; :meth:`Alignment.read` makes one from a file.
:func:`read_alignment` returns the aligned strings instead, for any other use.
Both read gzipped or plain text alike (:func:`_read_text`, shared with the
other file readers of the application).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import Bunch

from .._text import (
    check_unknown_letters,
    codes_and_known,
    resolve_alphabet,
    text_codepoints,
)
from ..potts import check_codes, decode_sequences

__all__ = ["Alignment", "read_alignment"]

_FORMATS = ("auto", "fasta", "a2m", "a3m")
# A2M/A3M insert states: lower-case letters and '.', deleted when reading.
_DROP_INSERTS = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyz.")
_DOT_TO_GAP = str.maketrans(".", "-")
_GZIP_MAGIC = b"\x1f\x8b"


def _read_text(source, name="source"):
    """Text of a path or an open file (text or binary), gunzipped if needed.

    Line endings are normalised: LF, CRLF and CR-only files read alike, whether
    given as a path (gzipped or not) or as an open file in any newline mode.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            data = handle.read()
    elif hasattr(source, "read"):
        data = source.read()
    else:
        raise TypeError(
            f"{name} must be a path or an open file; "
            f"got an object of type {type(source).__name__}."
        )
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if data[:2] == _GZIP_MAGIC:
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as exc:
                raise ValueError(
                    f"{name} starts like a gzip file but cannot be decompressed "
                    f"({exc}); is the file complete?"
                ) from exc
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{name} is not UTF-8 text: byte {exc.object[exc.start]:#04x} at "
                f"offset {exc.start} cannot be decoded."
            ) from exc
    elif isinstance(data, str):
        data = data.removeprefix("\ufeff")
    else:
        raise TypeError(
            f"{name}.read() must return str or bytes; got {type(data).__name__}."
        )
    return data.replace("\r\n", "\n").replace("\r", "\n")


def _resolve_format(source, format):
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {_FORMATS}; got {format!r}.")
    if format != "auto":
        return format
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ""
    name = str(getattr(source, "name", name)).lower()
    name = name.removesuffix(".gz")
    for suffix in ("a2m", "a3m"):
        if name.endswith("." + suffix):
            return suffix
    return "fasta"


@dataclass(frozen=True, eq=False)
class Alignment:
    """A multiple sequence alignment encoded once, over the states of a model.

    What :meth:`read` makes of an alignment file, and what the ``contacts``
    command fits: ``codes[s, i]`` is the index in ``states`` of the letter of
    sequence ``s`` at kept column ``i``, so ``codes`` go to
    :class:`~sklearn_attn.PottsPseudoLikelihood` as they are, with
    ``states=range(n_states)``.

    Parameters
    ----------
    names : list of str
        Names of the kept sequences, in file order.
    codes : ndarray of shape (n_sequences, n_sites)
        Integer codes in ``[0, len(states))``.
    states : str
        The alphabet, gap first.
    positions : ndarray of shape (n_sites,)
        Residue number of each kept column: the focus sequence's numbering,
        or ``columns + 1``.
    columns : ndarray of shape (n_sites,)
        The kept match columns of the file, counted from 0.
    focus : str or None, default=None
        Full name of the focus sequence.
    residues : str or None, default=None
        The focus sequence's letters at the kept columns.
    n_read : int or None, default=None
        Records in the file (``n_sequences`` when None).
    dropped : list of str, default=[]
        Names of the records left out for letters outside ``states``.

    Attributes
    ----------
    n_sequences, n_sites, n_states : int
        The shape of ``codes`` and the number of states.
    sequences : list of str
        The codes decoded over ``states``.

    See Also
    --------
    read_alignment : The aligned strings of a file.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.contacts import Alignment
    >>> text = ">q/10-13\\nAc-DE\\n>h1\\nAC-XE\\n>h2\\nAC-DF\\n"
    >>> alignment = Alignment.read(io.StringIO(text), focus="q")
    >>> alignment.codes
    array([[1, 3, 4],
           [1, 3, 5]])
    >>> alignment.positions.tolist(), alignment.residues, alignment.dropped
    ([10, 12, 13], 'ADE', ['h1'])
    >>> alignment.sequences
    ['ADE', 'ADF']
    """

    names: list
    codes: np.ndarray
    states: str
    positions: np.ndarray
    columns: np.ndarray
    focus: str | None = None
    residues: str | None = None
    n_read: int | None = None
    dropped: list = field(default_factory=list)

    def __post_init__(self):
        states = resolve_alphabet(self.states)
        codes = check_codes(self.codes, n_states=len(states))
        n_sequences, n_sites = codes.shape
        if len(self.names) != n_sequences:
            raise ValueError(
                f"names must have one name per sequence ({n_sequences}); got "
                f"{len(self.names)}."
            )
        for name in ("positions", "columns"):
            if np.shape(getattr(self, name)) != (n_sites,):
                raise ValueError(
                    f"{name} must have one entry per site ({n_sites}); got shape "
                    f"{np.shape(getattr(self, name))}."
                )
        object.__setattr__(self, "states", states)
        object.__setattr__(self, "codes", codes)
        if self.n_read is None:
            object.__setattr__(self, "n_read", n_sequences)

    @classmethod
    def read(
        cls,
        source,
        *,
        format="auto",
        alphabet="protein",
        unknown_letters="drop",
        focus=None,
    ):
        """Read and encode an aligned FASTA, A2M or A3M file.

        The conventions of :func:`read_alignment`, with the letters checked
        and encoded once over ``alphabet``.

        Parameters
        ----------
        source : str, path-like or file object
            A path (``.gz`` or not) or an open text or binary file.
        format : {"auto", "fasta", "a2m", "a3m"}, default="auto"
            ``"auto"`` chooses ``"a2m"`` or ``"a3m"`` from the file name's
            suffix (before any ``.gz``) and ``"fasta"`` otherwise.
        alphabet : str, default="protein"
            A name in :data:`~sklearn_attn.potts.ALPHABETS` or a string of
            distinct characters whose first character is the gap.
        unknown_letters : {"drop", "gap", "error"}, default="drop"
            A sequence with letters outside ``alphabet`` in a kept column is
            dropped (plmc's rule), has them read as gaps, or raises.
        focus : str or None, default=None
            Name (or unique prefix of the name) of the focus sequence, whose
            upper-case columns are kept and whose residues number them.

        Returns
        -------
        alignment : Alignment

        Raises
        ------
        ValueError, TypeError
            As :func:`read_alignment` does, and for ``alphabet=None``.
        """
        if alphabet is None:
            raise ValueError(
                "alphabet must name the states to encode (e.g. 'protein'); got None."
            )
        format = _resolve_format(source, format)
        check_unknown_letters(unknown_letters)
        names, sequences, info = _read_aligned(source, format, focus)
        return _encoded(names, sequences, info, alphabet, unknown_letters)

    @property
    def n_sequences(self):
        return self.codes.shape[0]

    @property
    def n_sites(self):
        return self.codes.shape[1]

    @property
    def n_states(self):
        return len(self.states)

    @property
    def sequences(self):
        return decode_sequences(self.codes, alphabet=self.states)

    def __repr__(self):
        focus = "" if self.focus is None else f", focus={self.focus!r}"
        return (
            f"Alignment(n_sequences={self.n_sequences}, n_sites={self.n_sites}, "
            f"states={self.states!r}{focus}, dropped={len(self.dropped)})"
        )


def read_alignment(
    source,
    *,
    format="auto",
    alphabet=None,
    unknown_letters="drop",
    focus=None,
    return_info=False,
):
    """Read an aligned FASTA, A2M or A3M file.

    Records start with a ``>`` line (the whole line after ``>`` is the name);
    the sequence may span several lines, and blank lines and white space are
    ignored. Gzipped input is recognised by its content, whatever its name,
    and LF, CRLF and CR-only line endings are read alike (from a path, a
    gzipped path or an open file in any newline mode).

    Conventions, as plmc and EVcouplings read alignments:

    * ``"fasta"``: every character is an alignment column; ``.`` is read as
      the gap ``-`` and lower-case letters are upper-cased.
    * ``"a2m"`` / ``"a3m"``: lower-case letters and ``.`` are insert states
      and are dropped; upper-case letters and ``-`` are the match columns
      (``-`` a deletion). For ``"a3m"``, lines starting with ``#`` (HH-suite
      headers) are skipped.
    * ``focus``: only the columns where the focus sequence has an upper-case
      letter are kept (plmc's ``-f``): not its gaps, nor its lower-case
      (insert) letters. Residues are numbered from the ``start`` of a name
      ``ID/start-end`` (else from 1), counting every letter of the focus
      sequence, inserts included.
    * ``alphabet``: sequences with a letter outside it (``X``, ``B``, ``Z``,
      ...) in a kept column are dropped (``unknown_letters="drop"``, plmc's
      behaviour; the focus sequence too, after it has chosen the columns),
      have such letters read as the gap (``"gap"``), or raise (``"error"``).

    Parameters
    ----------
    source : str, path-like or file object
        A path (``.gz`` or not) or an open text or binary file.
    format : {"auto", "fasta", "a2m", "a3m"}, default="auto"
        ``"auto"`` chooses ``"a2m"`` or ``"a3m"`` from the file name's suffix
        (before any ``.gz``) and ``"fasta"`` otherwise.
    alphabet : str or None, default=None
        A name in :data:`~sklearn_attn.potts.ALPHABETS` or a string of
        distinct characters whose first character is the gap; ``None`` checks
        no letters.
    unknown_letters : {"drop", "gap", "error"}, default="drop"
        What to do with a sequence holding letters outside ``alphabet``
        (ignored without one). Lower-case letters count as their upper-case
        forms.
    focus : str or None, default=None
        Name of the focus sequence: the full name, or a prefix of exactly one
        name (as plmc matches ``-f``, so ``"BPT1_BOVIN"`` finds
        ``"BPT1_BOVIN/36-88"``).
    return_info : bool, default=False
        Also return what was done, as a third value.

    Returns
    -------
    names : list of str
        Record names, in file order (dropped records left out).
    sequences : list of str
        Aligned sequences, all of the same length.
    info : :class:`~sklearn.utils.Bunch`
        Only when ``return_info=True``: ``n_read`` (records in the file),
        ``dropped`` (names of the dropped records), ``columns`` (0-based
        match columns kept), ``positions`` (1-based residue numbers of the
        kept columns: focus numbering, or ``columns + 1``), ``focus`` (the
        focus sequence's full name, or None) and ``residues`` (its letters at
        the kept columns, or None).

    Raises
    ------
    ValueError
        For a file without records, text before the first record, a record
        without sequence, sequences of different aligned lengths, bytes that
        are not UTF-8, a gzip stream that cannot be decompressed, a focus
        that names no record (or several), or unknown letters with
        ``unknown_letters="error"``.
    TypeError
        When ``source`` is neither a path nor an object with a ``read``
        method returning str or bytes.

    See Also
    --------
    Alignment.read : The same, encoded once into integer codes.
    sklearn_attn.potts.encode_sequences : Aligned strings to integer codes.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.contacts import read_alignment
    >>> text = ">query\\nAC-DE\\n>hit/1-7\\nAcCqD.E\\nF\\n"
    >>> read_alignment(io.StringIO(text), format="a2m")
    (['query', 'hit/1-7'], ['AC-DE', 'ACDEF'])
    >>> read_alignment(io.StringIO(">a\\nac.D\\n"))
    (['a'], ['AC-D'])

    Focus mode, and a sequence with an ``X`` dropped:

    >>> text = ">q/10-13\\nAc-DE\\n>h1\\nAC-XE\\n>h2\\nAC-DF\\n"
    >>> names, seqs, info = read_alignment(
    ...     io.StringIO(text), alphabet="protein", focus="q", return_info=True)
    >>> names, seqs
    (['q/10-13', 'h2'], ['ADE', 'ADF'])
    >>> info.dropped, info.positions.tolist(), info.residues
    (['h1'], [10, 12, 13], 'ADE')
    """
    format = _resolve_format(source, format)
    check_unknown_letters(unknown_letters)
    names, sequences, info = _read_aligned(source, format, focus)
    if alphabet is not None:
        alignment = _encoded(names, sequences, info, alphabet, unknown_letters)
        names, sequences = alignment.names, alignment.sequences
        info.dropped = alignment.dropped
    if not return_info:
        return names, sequences
    return names, sequences, info


def _read_aligned(source, format, focus):
    """Names, aligned upper-case sequences (focus columns only) and a Bunch of
    ``n_read``, ``dropped`` (empty), ``columns``, ``positions``, ``focus`` and
    ``residues``."""
    if focus is not None and not isinstance(focus, str):
        raise TypeError(f"focus must be a sequence name (str) or None; got {focus!r}.")
    names, raw = _read_records(source, format)
    n_read = len(names)
    if format == "fasta":
        aligned = [sequence.translate(_DOT_TO_GAP) for sequence in raw]
    else:
        aligned = [sequence.translate(_DROP_INSERTS) for sequence in raw]
    for number, sequence in enumerate(aligned, start=1):
        if not sequence:
            inserts = "" if format == "fasta" else " once insert states are dropped"
            raise ValueError(
                f"Record {number} ({names[number - 1]!r}) has no sequence{inserts}."
            )
        if len(sequence) != len(aligned[0]):
            raise ValueError(
                f"Record {number} ({names[number - 1]!r}) has aligned length "
                f"{len(sequence)}, but record 1 ({names[0]!r}) has "
                f"{len(aligned[0])}: the sequences are not aligned (read as "
                f"{format!r})."
            )
    columns = np.arange(len(aligned[0]))
    positions = columns + 1
    residues = focus_name = focus_index = None
    if focus is not None:
        focus_index = _find_focus(names, focus)
        focus_name = names[focus_index]
        columns, positions = _focus_columns(raw[focus_index], focus_name, format)
    sequences = [sequence.upper() for sequence in aligned]
    if focus is not None:
        take = columns.tolist()
        sequences = ["".join([seq[c] for c in take]) for seq in sequences]
        residues = sequences[focus_index]
    info = Bunch(
        n_read=n_read,
        dropped=[],
        columns=columns,
        positions=positions,
        focus=focus_name,
        residues=residues,
    )
    return names, sequences, info


def _encoded(names, sequences, info, alphabet, unknown_letters):
    """The :class:`Alignment` of the sequences over ``alphabet``, with
    ``unknown_letters`` applied to the sequences holding other letters."""
    alphabet = resolve_alphabet(alphabet)
    points = text_codepoints(sequences)
    codes, known = codes_and_known(points, alphabet)
    unknown = ~known.all(axis=1)
    dropped = []
    if unknown.any():
        if unknown_letters == "error":
            s = int(np.flatnonzero(unknown)[0])
            bad = sorted({c for c in sequences[s] if c not in alphabet})
            raise ValueError(
                f"Record {s + 1} ({names[s]!r}) has letters outside the "
                f"alphabet {alphabet!r}: {''.join(bad)!r}. Use "
                "unknown_letters='drop' to leave such sequences out, or "
                "'gap' to read those letters as gaps."
            )
        # "gap": an unknown letter already has code 0, the gap.
        if unknown_letters == "drop":
            if unknown.all():
                raise ValueError(
                    f"Every sequence has letters outside the alphabet "
                    f"{alphabet!r}; none is left."
                )
            dropped = [name for name, bad in zip(names, unknown, strict=True) if bad]
            names = [name for name, bad in zip(names, unknown, strict=True) if not bad]
            codes = codes[~unknown]
    return Alignment(
        names=names,
        codes=codes,
        states=alphabet,
        positions=info.positions,
        columns=info.columns,
        focus=info.focus,
        residues=info.residues,
        n_read=info.n_read,
        dropped=dropped,
    )


def _read_records(source, format):
    """Names and raw sequences (white space removed) of the records."""
    text = _read_text(source)
    if format == "a3m":
        text = "\n".join(line for line in text.split("\n") if not line.startswith("#"))
    head, *chunks = ("\n" + text).split("\n>")
    if head.strip():
        raise ValueError(
            "source does not start with a FASTA record: text before the first "
            f"'>' line: {head.strip()[:40]!r}."
        )
    if not chunks:
        raise ValueError("source contains no FASTA records (no line starts with '>').")
    names, raw = [], []
    for chunk in chunks:
        header, _, body = chunk.partition("\n")
        names.append(header.strip())
        raw.append("".join(body.split()))
    return names, raw


def _find_focus(names, focus):
    """Index of the focus record: its full name, or the one name it prefixes."""
    if focus in names:
        return names.index(focus)
    matches = [k for k, name in enumerate(names) if name.startswith(focus)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(
            f"focus={focus!r} names no sequence of the alignment (neither a full "
            f"name nor a prefix of one); the first names are {names[:3]}."
        )
    raise ValueError(
        f"focus={focus!r} is a prefix of {len(matches)} names "
        f"({[names[k] for k in matches[:3]]}...); give the full name."
    )


_RANGE = re.compile(r"/(\d+)-(\d+)$")


def _focus_columns(raw, name, format):
    """Kept columns (upper-case letters of the focus) and their residue numbers.

    A residue's number counts every letter of the focus sequence before it
    (match and insert states alike), from the start of its ``/start-end``.
    """
    match = _RANGE.search(name)
    start = int(match.group(1)) if match else 1
    columns, positions = [], []
    residue = start
    column = 0
    for char in raw:
        is_insert = format != "fasta" and (char.islower() or char == ".")
        if not is_insert:
            if char.isalpha() and char.isupper():
                columns.append(column)
                positions.append(residue)
            column += 1
        if char.isalpha():
            residue += 1
    if not columns:
        raise ValueError(
            f"The focus sequence {name!r} has no upper-case letter: no column "
            "would be kept."
        )
    return np.asarray(columns), np.asarray(positions)

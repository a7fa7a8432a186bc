"""Aligned sequences as text: every accepted form, read alike, to code points.

:func:`~sklearn_attn.potts.encode_sequences` and :class:`PottsPseudoLikelihood`
take aligned sequences as a list or tuple of str, of ASCII bytes or of sequences
of single characters; a NumPy unicode or bytes array, 1-D of strings or 2-D of
single characters; an object array of these; a pandas Series or DataFrame of
strings. This module turns any of them into ``(n_sequences, n_columns)`` uint32
code points, with errors that name the argument and the offending entry, and
maps code points to integer codes over an alphabet.
"""

from __future__ import annotations

import numpy as np

#: Named alphabets; the gap comes first, so code 0 is the gap.
ALPHABETS = {"protein": "-ACDEFGHIKLMNPQRSTVWY", "dna": "-ACGT", "rna": "-ACGU"}


def resolve_alphabet(alphabet):
    """The letters of ``alphabet``: a name in :data:`ALPHABETS`, or a string of
    distinct characters whose first one is the gap."""
    if isinstance(alphabet, str) and alphabet in ALPHABETS:
        return ALPHABETS[alphabet]
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(
            f"alphabet must be one of {sorted(ALPHABETS)} or a non-empty string "
            f"of distinct characters; got {alphabet!r}."
        )
    if len(set(alphabet)) != len(alphabet):
        repeated = sorted({c for c in alphabet if alphabet.count(c) > 1})
        raise ValueError(
            f"alphabet must have distinct characters; {alphabet!r} repeats "
            f"{''.join(repeated)!r}."
        )
    return alphabet


def _decode_ascii(data, where):
    """``bytes`` as ``str``, one character per byte (ASCII only)."""
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{where} holds the byte {data[exc.start : exc.start + 1]!r} at position "
            f"{exc.start}, which is not ASCII; bytes are read one character per "
            "byte, so decode non-ASCII text to str first."
        ) from None


def _row_string(row, name, s):
    """One sequence as a str: a str, ASCII bytes, or a sequence of characters."""
    if isinstance(row, str):
        return row
    if isinstance(row, bytes):
        return _decode_ascii(row, f"{name}[{s}]")
    if isinstance(row, np.ndarray) and row.ndim == 1:
        row = row.tolist()
    if isinstance(row, (list, tuple)):
        if all(isinstance(char, str) for char in row):
            joined = "".join(row)
        elif all(isinstance(char, bytes) for char in row):
            joined = _decode_ascii(b"".join(row), f"{name}[{s}]")
        else:
            kind = bytes if isinstance(row[0], bytes) else str
            wrong = next(char for char in row if not isinstance(char, kind))
            raise TypeError(
                f"{name}[{s}] must hold single characters, all str or all bytes; "
                f"found {type(wrong).__name__} ({wrong!r})."
            )
        # Each entry is one column: the total length is the number of entries
        # exactly when no entry is empty and none is longer than one character.
        if len(joined) != len(row) or not all(map(len, row)):
            wrong = next(char for char in row if len(char) != 1)
            raise ValueError(
                f"{name}[{s}] is a sequence of characters, so each entry must be "
                f"one character; found {wrong!r}."
            )
        return joined
    raise TypeError(
        f"{name} must hold strings (or sequences of single characters); found "
        f"{type(row).__name__} ({row!r}) at {name}[{s}]."
    )


def _array_codepoints(array, name):
    """Code points ``(n, L)`` of a NumPy unicode or bytes array of text."""
    if array.ndim == 0:
        raise TypeError(
            f"{name} must be a sequence of aligned strings, not a single string."
        )
    if array.ndim > 2:
        raise ValueError(
            f"{name} must be 1-D (one string per sequence) or 2-D (one character "
            f"per entry); got an array of strings of shape {array.shape}."
        )
    if array.shape[0] == 0:
        raise ValueError(
            f"{name} is empty (0 sequences); at least one sequence is needed."
        )
    if array.dtype.kind == "S":
        width = array.dtype.itemsize
        raw = np.ascontiguousarray(array).view(np.uint8)
        bad = raw.reshape(array.shape + (width,)) >= 128
        if bad.any():
            where = tuple(int(k) for k in np.argwhere(bad)[0][:-1])
            _decode_ascii(bytes(array[where]), f"{name}[{', '.join(map(str, where))}]")
        array = array.astype(f"<U{width}")  # ASCII: one character per byte
    lengths = np.char.str_len(array)
    if array.ndim == 2:
        if array.shape[1] and not np.all(lengths == 1):
            s, i = (int(k) for k in np.argwhere(lengths != 1)[0])
            raise ValueError(
                f"{name} is a 2-D array of strings, so each entry must be one "
                f"character (a column); {name}[{s}, {i}] is {str(array[s, i])!r}."
            )
        length = array.shape[1]
        array = array.astype("<U1")
    else:
        _check_aligned(lengths, name)
        length = int(lengths[0])
        array = array.astype(f"<U{max(length, 1)}")
    if length == 0:
        raise ValueError(f"{name} holds empty strings (0 columns); nothing to encode.")
    return np.ascontiguousarray(array).view(np.uint32).reshape(-1, length)


def _check_aligned(lengths, name):
    ragged = np.flatnonzero(lengths != lengths[0])
    if ragged.size:
        s = int(ragged[0])
        raise ValueError(
            f"The sequences are not aligned: {name}[{s}] has length {lengths[s]}, "
            f"but {name}[0] has length {lengths[0]}."
        )


def is_text(X):
    """Whether ``X`` holds aligned text (rather than integer codes).

    Text is a str or bytes, a NumPy unicode or bytes array, or a sequence (or
    object array) whose first entry is a string or a sequence of characters.
    An empty list or tuple counts as text, so that it gets a "0 sequences"
    message rather than NumPy's advice on 1-D arrays.
    """
    if isinstance(X, (str, bytes)):
        return True
    if isinstance(X, np.ndarray):
        if X.dtype.kind in "US":
            return True
        if X.dtype.kind != "O" or X.size == 0:
            return False
        first = X.flat[0]
    elif isinstance(X, (list, tuple)):
        if len(X) == 0:
            return True
        first = X[0]
    else:
        return False
    if isinstance(first, (str, bytes)):
        return True
    if isinstance(first, np.ndarray) and first.dtype.kind in "US":
        return True
    if isinstance(first, (list, tuple, np.ndarray)) and len(first):
        return isinstance(first[0], (str, bytes))
    return False


def text_view(X):
    """A pandas Series or DataFrame of strings as an object array; else ``X``.

    Other array-likes pass unchanged, so that integer DataFrames keep their
    feature names through ``validate_data``.
    """
    if isinstance(X, (np.ndarray, list, tuple, str, bytes)) or not hasattr(
        X, "__array__"
    ):
        return X
    dtype = getattr(X, "dtype", None)  # a Series
    dtypes = [dtype] if dtype is not None else list(getattr(X, "dtypes", []))
    if dtypes and all(getattr(d, "kind", None) in ("O", "U", "S") for d in dtypes):
        return np.asarray(X, dtype=object)
    return X


def text_codepoints(sequences, name="sequences"):
    """Code points ``(n_sequences, n_columns)``, uint32, of aligned text.

    The text forms :func:`encode_sequences` accepts: an iterable of str, of
    ASCII bytes, or of sequences of single characters; a NumPy unicode or
    bytes array, 1-D of strings or 2-D of single characters; an object array
    of any of these; a pandas Series or DataFrame of strings. ``sequences``
    itself is never modified.
    """
    sequences = text_view(sequences)
    if isinstance(sequences, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of aligned strings, not a single string."
        )
    if isinstance(sequences, np.ndarray) and sequences.dtype.kind in "US":
        return _array_codepoints(sequences, name)
    if isinstance(sequences, np.ndarray):
        if sequences.ndim == 0:
            raise TypeError(
                f"{name} must be a sequence of aligned strings; got a 0-d array "
                f"of dtype {sequences.dtype}."
            )
        rows = sequences.tolist()
    else:
        try:
            rows = list(sequences)
        except TypeError:
            raise TypeError(
                f"{name} must be a sequence of aligned strings; got an object of "
                f"type {type(sequences).__name__}."
            ) from None
    if not rows:
        raise ValueError(
            f"{name} is empty (0 sequences); at least one sequence is needed."
        )
    strings = [_row_string(row, name, s) for s, row in enumerate(rows)]
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    _check_aligned(lengths, name)
    length = int(lengths[0])
    if length == 0:
        raise ValueError(f"{name} holds empty strings (0 columns); nothing to encode.")
    # One conversion for all the strings.
    return np.asarray(strings, dtype=f"<U{length}").view(np.uint32).reshape(-1, length)


UNKNOWN_LETTERS = ("drop", "gap", "error")


def check_unknown_letters(unknown_letters, name="unknown_letters"):
    if unknown_letters not in UNKNOWN_LETTERS:
        raise ValueError(
            f"{name} must be one of {UNKNOWN_LETTERS}; got {unknown_letters!r}."
        )


def codes_and_known(points, alphabet):
    """Codes of the code points ``(n, L)`` over a resolved alphabet, and where
    they are known; an unknown character gets code 0 (the named alphabets' gap).

    When the alphabet has no lower-case letters, lower case reads as upper case.
    """
    keys = [ord(c) for c in alphabet]
    values = list(range(len(alphabet)))
    if alphabet == alphabet.upper():
        for code, char in enumerate(alphabet):
            lower = char.lower()
            if len(lower) == 1 and lower != char and lower not in alphabet:
                keys.append(ord(lower))
                values.append(code)
    keys, values = np.asarray(keys, dtype=np.uint32), np.asarray(values)
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    where = np.minimum(np.searchsorted(keys, points), keys.size - 1)
    known = keys[where] == points
    codes = values[where].astype(np.int64, copy=False)
    codes[~known] = 0
    return codes, known


def unknown_letter_message(points, known, alphabet, name):
    """Where the first unknown character is, for an error message."""
    s, i = (int(k) for k in np.argwhere(~known)[0])
    n_unknown = int(known.size - np.count_nonzero(known))
    return (
        f"{name}[{s}] has {chr(points[s, i])!r} at position {i} (0-based), "
        f"which is not in the alphabet {alphabet!r} ({n_unknown} unknown "
        "character(s) in all)."
    )


def encode_codepoints(points, alphabet, name="sequences"):
    """Codes of the code points ``(n, L)``; an unknown character is an error."""
    codes, known = codes_and_known(points, alphabet)
    if not known.all():
        raise ValueError(unknown_letter_message(points, known, alphabet, name))
    return codes


def rows_with_unknown_letters(points, alphabet):
    """Boolean mask of the rows of ``points`` with a character outside ``alphabet``
    (lower case counting as upper case when the alphabet has none)."""
    return ~codes_and_known(points, alphabet)[1].all(axis=1)

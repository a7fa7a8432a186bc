"""Property-based tests of PottsPseudoLikelihood and read_alignment.

Every call meets the error contract of ``_strategies.check_contract``. On top:
every text form of the same aligned sequences that is accepted is read as its
list-of-str equivalent, and ``read_alignment`` returns exactly the records it
is given, whatever the source (path, text or binary file, gzip), the line
endings (LF, CRLF, CR) and the format (FASTA, A2M, A3M).

What the docstrings promise about dtypes today: ``predict`` returns entries of
``states_``; the probabilities and scores are floats (float64 or float32).
"""

import functools
import gzip
import io
import os
import pathlib
import string
import tempfile
import warnings

import numpy as np
from _strategies import (
    EMPTY_NAMES,
    INVALID_RANDOM_STATES,
    Expect,
    Verdict,
    check_contract,
    examples,
    hyper_parameters,
    layouts,
    may_refuse,
    one_of_rare,
    rare,
    refuse,
    sample_weights,
)
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.contacts import read_alignment
from sklearn_attn.potts import ALPHABETS
from sklearn_attn.potts._gather import available as gather_available

SPEC = {
    "parametrization": (["factored", "full"], ["plm", None]),
    "n_heads": ([1, 2], [0, -1, 1.5]),
    "attention": (["softmax", "free"], ["hard", None]),
    "alpha_fields": ([0.01, 0.0, 1.0], [-1.0, np.nan, "0"]),
    "alpha_couplings": ([None, 0.0, 0.1], [-1.0, np.nan]),
    "sequence_identity": ([None, 0.8, 1.0], [0.0, 1.5, -0.2]),
    "max_iter": ([3, 0, 1], [-1, 2.5]),
    "tol": ([1e-7, 0.0, 1e-2], [-1.0, np.nan]),
    "init_scale": ([0.1, 0.0, 1.0], [-0.1, np.nan]),
    "init": (["auto", "random"], ["spectral", None]),
    "n_init": ([1, 2], [0, 1.5]),
    "random_state": ([0, 1], INVALID_RANDOM_STATES),
    # "auto" is the gathers where numba is installed; "dense" the one-hot products.
    "algorithm": (
        ["auto", "dense"] + (["gather"] if gather_available() else []),
        ["blas", None],
    ),
}
ALPHABET_NAMES = ["dna", "protein", "rna", "XYZ-"]
# Names a refusal of sequences may cite (the encoder says "sequences[3]").
X_NAMES = ("X", "sequences")
TEXT_FORMS = [
    "list of str",
    "tuple of str",
    "list of lists of chars",
    "unicode 1-D",
    "unicode 2-D",
    "object 1-D",
]
BYTES_FORMS = ["bytes 1-D", "bytes 2-D", "list of bytes"]


def _alphabet_string(alphabet):
    return ALPHABETS.get(alphabet, alphabet)


def text_form(sequences, form):
    """The same aligned sequences as ``form``."""
    if form == "list of str":
        return list(sequences)
    if form == "tuple of str":
        return tuple(sequences)
    if form == "list of lists of chars":
        return [list(s) for s in sequences]
    if form == "unicode 1-D":
        return np.array(sequences)
    if form == "unicode 2-D":
        return np.array([list(s) for s in sequences])
    if form == "object 1-D":
        return np.array(sequences, dtype=object)
    if form == "bytes 1-D":
        return np.array([s.encode() for s in sequences])
    if form == "bytes 2-D":
        return np.array([[c.encode() for c in s] for s in sequences], dtype="S1")
    if form == "list of bytes":
        return [s.encode() for s in sequences]
    raise AssertionError(form)


@st.composite
def sequence_inputs(draw, alphabet, *, n_samples=None, n_sites=None):
    """Aligned strings over ``alphabet`` in any text form: ``(X, n, L, verdict)``."""
    chars = _alphabet_string(alphabet)
    n = draw(st.sampled_from([3, 2, 5])) if n_samples is None else n_samples
    L = draw(st.sampled_from([3, 2, 4])) if n_sites is None else n_sites
    verdict = Verdict()
    if n_samples is None and rare(draw, 8):
        n = one_of_rare(draw, [1], [0], 2)
    if n_sites is None and rare(draw, 8):
        L = one_of_rare(draw, [1], [0], 2)
        verdict |= refuse(X_NAMES + ("site", "sites"), f"X has {L} site(s)")
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    sequences = ["".join(rng.choice(list(chars), size=L)) for _ in range(n)]
    if n and L and rare(draw, 8):
        kind = draw(st.sampled_from(["lower", "unknown", "ragged"]))
        if kind == "lower" and chars == chars.upper():
            sequences[0] = sequences[0].lower()  # read as upper case
        elif kind == "unknown":
            sequences[-1] = sequences[-1][:-1] + "!"
            verdict |= refuse(
                X_NAMES + ("alphabet",), "a character outside the alphabet"
            )
        elif kind == "ragged" and n > 1:
            sequences[-1] += chars[-1]
            verdict |= refuse(X_NAMES + ("aligned", "length"), "ragged sequences")
    if n == 0:
        form = one_of_rare(draw, ["list of str"], ["unicode 1-D", "tuple of str"], 2)
        verdict |= refuse(X_NAMES + EMPTY_NAMES + ("empty",), "no sequences")
    elif rare(draw, 8):
        form = draw(st.sampled_from(BYTES_FORMS))
        verdict |= may_refuse(("X", "bytes"), f"X given as {form}")
    else:
        form = draw(st.sampled_from(TEXT_FORMS))
    ragged = len({len(s) for s in sequences}) > 1
    if form in ("unicode 2-D", "bytes 2-D") and (L == 0 or ragged):
        form = "list of str"  # no 2-D array of characters to build
    X = text_form(sequences, form)
    if isinstance(X, np.ndarray) and rare(draw, 4):
        X.flags.writeable = False
    return X, sequences, n, L, verdict


@st.composite
def code_inputs(draw, *, n_samples=None, n_sites=None, states=None, seen=None):
    """Integer state codes in any dtype and layout: ``(X, n, L, verdict)``.

    With ``seen`` (the states of a fitted model), codes outside it are refused.
    """
    n = draw(st.sampled_from([3, 2, 5])) if n_samples is None else n_samples
    L = draw(st.sampled_from([3, 2, 4])) if n_sites is None else n_sites
    verdict = Verdict()
    if n_samples is None and rare(draw, 8):
        n = one_of_rare(draw, [1], [0], 2)
        if n == 0:
            verdict |= refuse(("X",) + EMPTY_NAMES, "X has 0 samples")
    if n_sites is None and rare(draw, 8):
        L = one_of_rare(draw, [1], [0], 2)
        verdict |= refuse(("X", "site", "sites", "0 feature(s)"), f"X has {L} site(s)")
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if states is None:
        q = draw(st.sampled_from([2, 3, 4]))
        step = draw(st.sampled_from([1, 1, 2, 7]))
        offset = draw(st.sampled_from([0, 0, -3, 10**12]))
        states = offset + step * np.arange(q)
    codes = rng.choice(states, size=(n, L))
    if n * L and len(np.unique(codes)) < 2:
        codes.ravel()[-1] = states[0] if codes.ravel()[0] != states[0] else states[1]
    if seen is None and n * L and rare(draw, 16):  # fit needs two states
        codes[:] = states[0]
        verdict |= refuse(("X", "state"), "X holds a single state")
    dtype = draw(
        st.sampled_from(["int64", "int64", "int32", "int8", "uint8", "float64"])
    )
    info = np.iinfo(dtype) if dtype.startswith(("int", "uint")) else None
    if info is not None and (
        codes.min(initial=0) < info.min or codes.max(initial=0) > info.max
    ):
        dtype = "int64"
    if rare(draw, 8):
        dtype = draw(
            st.sampled_from(["bool", "object", "non-integer", "nan", "complex"])
        )
    if dtype == "bool":
        array = codes == codes.flat[0] if codes.size else codes.astype(bool)
    elif dtype == "object":
        array = codes.astype(object)
    elif dtype == "non-integer":
        array = codes + 0.5
        verdict |= refuse(("X", "integer"), "X holds non-integer numbers")
    elif dtype == "nan":
        array = codes.astype(float)
        if array.size:
            array.flat[0] = np.nan
            verdict |= refuse("X", "X holds NaN")
    elif dtype == "complex":
        array = codes + 1j
        verdict |= refuse("X", "X is complex")
    else:
        array = codes.astype(dtype)
    if seen is None and dtype == "bool" and array.size and len(np.unique(array)) < 2:
        verdict |= refuse(("X", "state"), "X holds a single state")
    if seen is not None and array.size and dtype in ("bool", "int64", "int32"):
        if not np.all(np.isin(array, seen)) or dtype == "bool":
            verdict |= refuse(("X", "state", "fit"), "a state not seen in fit")
    elif seen is not None and array.size and dtype in ("int8", "uint8", "float64"):
        if not np.all(np.isin(array, seen)):
            verdict |= refuse(("X", "state", "fit"), "a state not seen in fit")
    elif seen is not None and array.size and dtype == "object":
        if not np.all(np.isin(array.astype(np.int64), seen)):
            verdict |= refuse(("X", "state", "fit"), "a state not seen in fit")
    X = draw(layouts(array))
    return X, n, L, verdict


def _probabilities(proba):
    assert np.all(proba >= 0) and np.all(proba <= 1 + 1e-12), (
        "[not-probabilities] predict_proba outside [0, 1]."
    )
    assert_allclose(proba.sum(axis=-1), 1.0, atol=1e-6, err_msg="[not-probabilities]")


def _log_probabilities(scores):
    assert np.all(scores <= 1e-12), "[not-probabilities] score_samples above 0."


def _contact_matrix(scores):
    scale = max(np.max(np.abs(scores), initial=0.0), 1.0)
    assert_allclose(scores, scores.T, atol=1e-10 * scale, err_msg="[not-symmetric]")
    assert np.all(np.abs(np.diag(scores)) <= 1e-10 * scale), "[nonzero-diagonal]"


def _all_outputs(model, X, n, L):
    """predict, predict_proba, score_samples, score and contact_scores of ``X``."""
    predicted = model.predict(X)  # first: an unfitted model must say so here
    q = len(model.states_)

    def in_states(pred):
        assert np.all(np.isin(pred, model.states_)), "[unknown-state] predict"

    return [
        Expect("predict", predicted, shape=(n, L), dtypes=None, check=in_states),
        Expect(
            "predict_proba",
            model.predict_proba(X),
            shape=(n, L, q),
            check=_probabilities,
        ),
        Expect(
            "score_samples",
            model.score_samples(X),
            shape=(n,),
            check=_log_probabilities,
        ),
        Expect("score", model.score(X), shape=(), dtypes=None),
        Expect(
            "contact_scores",
            model.contact_scores(),
            shape=(L, L),
            check=_contact_matrix,
        ),
    ]


@examples(2)
@given(data=st.data())
def test_fit_contract(data):
    """fit on codes or text in any form, then every prediction on the same data."""
    params, verdict = data.draw(hyper_parameters(SPEC), label="params")
    text = data.draw(st.booleans(), label="text")
    alphabet = data.draw(st.sampled_from(ALPHABET_NAMES), label="alphabet")
    if text:
        X, _, n, L, x_verdict = data.draw(sequence_inputs(alphabet), label="X")
    else:
        X, n, L, x_verdict = data.draw(code_inputs(), label="X")
    if rare(data.draw, 8):
        alphabet = data.draw(st.sampled_from(["", "AAB", 5, None]), label="alphabet")
        if not isinstance(alphabet, str):
            verdict |= refuse("alphabet", f"alphabet={alphabet!r}")
        elif text:
            verdict |= refuse("alphabet", f"alphabet={alphabet!r}")
        else:  # integer codes ignore the alphabet
            verdict |= may_refuse("alphabet", f"alphabet={alphabet!r}")
    verdict |= x_verdict
    sample_weight = data.draw(sample_weights(n), label="sample_weight")
    verdict |= sample_weight.verdict
    model = PottsPseudoLikelihood(**params, alphabet=alphabet)

    def call():
        model.fit(X, sample_weight=sample_weight.value)
        return _all_outputs(model, X, n, L)

    check_contract(
        call, verdict=verdict, inputs=[X, sample_weight.value], fitted=[model]
    )


@functools.cache
def _fitted(text, parametrization, seed=0):
    """A model fitted on valid data, shared by the prediction properties."""
    rng = np.random.default_rng(seed)
    if text:
        X = ["".join(rng.choice(list(ALPHABETS["dna"]), size=3)) for _ in range(8)]
    else:
        X = rng.choice([-1, 4, 9], size=(8, 3))
    model = PottsPseudoLikelihood(
        parametrization, alphabet="dna", max_iter=5, random_state=seed
    )
    with warnings.catch_warnings():
        # A cheap fit on purpose: only its predictions' contract matters here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


@examples(2)
@given(data=st.data())
def test_predict_contract(data):
    """Predictions of a fitted (or unfitted) model on codes or text in any form."""
    text_fit = data.draw(st.booleans(), label="fitted on text")
    model = _fitted(text_fit, data.draw(st.sampled_from(["factored", "full"])))
    verdict = Verdict()
    if rare(data.draw, 8):
        model = PottsPseudoLikelihood(alphabet="dna")
        verdict = refuse("fit", "the model is not fitted")
    L = 3 if not rare(data.draw, 8) else data.draw(st.sampled_from([2, 4]))
    text = text_fit if not rare(data.draw, 8) else not text_fit
    if text:
        X, sequences, n, _, x_verdict = data.draw(
            sequence_inputs("dna", n_sites=L), label="X"
        )
    else:
        states = [-1, 4, 9] if not rare(data.draw, 8) else [-1, 4, 5]
        X, n, _, x_verdict = data.draw(
            code_inputs(n_sites=L, states=np.array(states), seen=[-1, 4, 9]),
            label="X",
        )
        sequences = None
    verdict |= x_verdict
    if L != 3:
        verdict |= refuse(("X", "site", "sites", "features"), f"X has {L} sites")
    if text != text_fit:
        verdict |= refuse(("X", "string", "strings", "codes"), "another kind of X")

    def call():
        out = _all_outputs(model, X, n, L)
        if sequences is not None and n:
            # An accepted text form reads as its list-of-str equivalent.
            reference = model.predict_proba(list(sequences))
            out.append(
                Expect(
                    "predict_proba",
                    out[1].value,
                    check=lambda p: assert_allclose(
                        p, reference, err_msg="[text-form-differs]"
                    ),
                )
            )
        return out

    check_contract(call, verdict=verdict, inputs=[X])


@examples(2)
@given(data=st.data())
def test_contact_scores_contract(data):
    """contact_scores with any (valid or invalid) arguments."""
    text = data.draw(st.booleans(), label="fitted on text")
    model = _fitted(text, data.draw(st.sampled_from(["factored", "full"])))
    states = list(model.states_)
    kwargs, verdict = data.draw(
        hyper_parameters(
            {
                "apc_correction": ([True, False], ["no", None, 2]),
                "gauge": (["zero-sum", "fitted"], ["other", None]),
            }
        ),
        label="kwargs",
    )
    kind = one_of_rare(
        data.draw,
        ["none", "some", "some"],
        ["all", "unknown", "other-kind", "scalar", "duplicate"],
        4,
    )
    if kind == "some":
        exclude = data.draw(st.lists(st.sampled_from(states), max_size=2, unique=True))
    elif kind == "all":
        exclude = states
        verdict |= may_refuse("exclude_states", "every state excluded")
    elif kind == "unknown":
        exclude = [states[0], "Z" if text else 123]
        verdict |= refuse("exclude_states", "a state the model does not know")
    elif kind == "other-kind":
        exclude = [0] if text else ["A"]
        verdict |= refuse("exclude_states", "a state of another kind")
    elif kind == "scalar":
        exclude = states[0]
        verdict |= may_refuse("exclude_states", "a single state, not a sequence")
    elif kind == "duplicate":
        exclude = [states[0], states[0]]
        verdict |= may_refuse("exclude_states", "a repeated state")
    else:
        exclude = None
    if exclude is not None:
        kwargs["exclude_states"] = exclude
    L = model.n_sites_
    check_contract(
        lambda: [
            Expect(
                "contact_scores",
                model.contact_scores(**kwargs),
                shape=(L, L),
                check=_contact_matrix,
            )
        ],
        verdict=verdict,
        inputs=[exclude],
    )


# -- read_alignment ------------------------------------------------------------------
NAME_CHARS = string.ascii_letters + string.digits + " _-/|.:"
MATCH = ALPHABETS["protein"]  # upper case and the gap: alignment columns
INSERT = string.ascii_lowercase + "."  # A2M/A3M insert states
READ_NAMES = ("source", "record", "format")


@st.composite
def alignments(draw):
    """``(text, names, sequences, format)`` of a valid alignment file."""
    fmt = draw(st.sampled_from(["fasta", "a2m", "a3m"]))
    n_records = draw(st.sampled_from([2, 1, 3]))
    length = draw(st.sampled_from([4, 1, 7]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    names, expected, bodies = [], [], []
    for _ in range(n_records):
        names.append(draw(st.text(alphabet=NAME_CHARS, max_size=8)))
        columns = rng.choice(list(MATCH), size=length)
        if fmt == "fasta":
            # Lower case and '.' are read as upper case and the gap.
            raw = [c.lower() if c != "-" and rng.random() < 0.3 else c for c in columns]
            raw = ["." if c == "-" and rng.random() < 0.5 else c for c in raw]
            body = "".join(raw)
        else:
            pieces = []
            for c in columns:
                pieces.append(
                    "".join(rng.choice(list(INSERT), size=rng.integers(0, 2)))
                )
                pieces.append(c)
            body = "".join(pieces)
        expected.append("".join(columns))
        bodies.append(body)
    return fmt, names, expected, bodies


def _render(names, bodies, *, fmt, width, blank, spaces, eol, final_eol, comment):
    """The FASTA text of the records, wrapped at ``width``, with ``eol`` endings."""
    lines = ["#A3M header"] if comment and fmt == "a3m" else []
    for name, body in zip(names, bodies, strict=True):
        lines.append(">" + name)
        for start in range(0, len(body), width):
            chunk = body[start : start + width]
            lines.append(" " + chunk + "\t" if spaces else chunk)
        if blank:
            lines.append("")
    return eol.join(lines) + (eol if final_eol else "")


def _source(text, kind, *, directory, fmt, gzipped, bom):
    """``(source, format)``: the text as a path, a file object or a buffer."""
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    if gzipped:
        data = gzip.compress(data)
    suffix = {"fasta": ".fasta", "a2m": ".a2m", "a3m": ".a3m"}[fmt]
    path = os.path.join(directory, "alignment" + suffix + (".gz" if gzipped else ""))
    with open(path, "wb") as handle:
        handle.write(data)
    if kind == "path":
        return path, "auto"
    if kind == "pathlib":
        return pathlib.Path(path), "auto"
    if kind == "binary file":
        return open(path, "rb"), "auto"
    if kind == "text file":
        return open(path, encoding="utf-8-sig"), "auto"
    if kind == "bytes buffer":
        return io.BytesIO(data), fmt
    return io.StringIO(text), fmt  # "text buffer"


SOURCE_KINDS = ["path", "pathlib", "binary file", "text file", "bytes buffer"]
SOURCE_KINDS += ["text buffer"]


@examples(3)
@given(
    alignment=alignments(),
    kind=st.sampled_from(SOURCE_KINDS),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    width=st.sampled_from([60, 3, 1]),
    blank=st.booleans(),
    spaces=st.booleans(),
    final_eol=st.booleans(),
    comment=st.booleans(),
    gzipped=st.booleans(),
    bom=st.booleans(),
)
def test_read_alignment_reads_the_records(
    alignment, kind, eol, width, blank, spaces, final_eol, comment, gzipped, bom
):
    """Names and aligned sequences come back exactly, from any source and ending."""
    fmt, names, expected, bodies = alignment
    text = _render(
        names,
        bodies,
        fmt=fmt,
        width=width,
        blank=blank,
        spaces=spaces,
        eol=eol,
        final_eol=final_eol,
        comment=comment,
    )
    if kind in ("text file", "text buffer"):
        gzipped = bom = False  # text objects hold decoded text
    with tempfile.TemporaryDirectory() as directory:
        source, format = _source(
            text, kind, directory=directory, fmt=fmt, gzipped=gzipped, bom=bom
        )

        def same_records(result):
            assert result == (
                [name.strip() for name in names],
                expected,
            ), f"[wrong-records] read {result!r} from {text!r}"

        try:
            check_contract(
                lambda: [
                    Expect(
                        "read_alignment",
                        read_alignment(source, format=format),
                        dtypes=None,
                        check=same_records,
                    )
                ],
                verdict=Verdict(),
                inputs=[],
            )
        finally:
            if hasattr(source, "close"):
                source.close()


@examples(2)
@given(
    alignment=alignments(),
    defect=st.sampled_from(
        [
            "empty",
            "text first",
            "no sequence",
            "unaligned",
            "only inserts",
            "not utf-8",
            "format",
            "source type",
        ]
    ),
    kind=st.sampled_from(["path", "binary file", "bytes buffer"]),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_read_alignment_refuses_malformed_files(alignment, defect, kind, eol):
    """A malformed file or argument gets a ValueError or TypeError naming it."""
    fmt, names, expected, bodies = alignment
    verdict = refuse(READ_NAMES, f"the file has a defect: {defect}")
    if defect == "empty":
        names, bodies = [], []
    elif defect == "no sequence":
        bodies = bodies[:-1] + [""]
    elif defect == "unaligned":
        names, bodies = names + ["other"], bodies + [bodies[-1] + "A"]
    elif defect == "only inserts":
        if fmt == "fasta":
            fmt = "a2m"
        bodies = bodies[:-1] + ["acd."]
    text = _render(
        names,
        bodies,
        fmt=fmt,
        width=60,
        blank=False,
        spaces=False,
        eol=eol,
        final_eol=True,
        comment=False,
    )
    if defect == "text first":
        text = "stray text" + eol + text
    with tempfile.TemporaryDirectory() as directory:
        source, format_ = _source(
            text, kind, directory=directory, fmt=fmt, gzipped=False, bom=False
        )
        if defect in ("not utf-8", "source type") and hasattr(source, "close"):
            source.close()
        if defect == "not utf-8":
            source = io.BytesIO(b">a" + eol.encode() + b"AC\xff\xfeD" + eol.encode())
            format_ = "fasta"
        elif defect == "format":
            format_ = "genbank"
        elif defect == "source type":
            source = text.encode()  # bytes of the file, not a path or a file
        try:
            check_contract(
                lambda: [
                    Expect(
                        "read_alignment",
                        read_alignment(source, format=format_),
                        dtypes=None,
                    )
                ],
                verdict=verdict,
                inputs=[],
            )
        finally:
            if hasattr(source, "close"):
                source.close()

"""The Potts side's inputs: text forms, codes, files, states and warnings.

Each form a user may reasonably pass is either read exactly as its list-of-str
equivalent, or refused by a ValueError or TypeError that names the argument
and says what was expected; the caller's objects are never modified.
"""

import copy
import gzip
import io
import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.contacts import contact_precision, read_alignment
from sklearn_attn.contacts._structure import read_contact_map
from sklearn_attn.potts import (
    apc,
    conditional_log_probs,
    encode_sequences,
    exact_distribution,
    frobenius_scores,
    gibbs_sample,
)

DNA = "-ACGT"


def _sequences(seed, n=30, length=5):
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(DNA), size=length)) for _ in range(n)]


# Every text form of the same aligned sequences; each maps list-of-str to the form.
TEXT_FORMS = {
    "list of str": list,
    "tuple of str": tuple,
    "list of lists of chars": lambda seqs: [list(s) for s in seqs],
    "list of tuples of chars": lambda seqs: [tuple(s) for s in seqs],
    "list of char arrays": lambda seqs: [np.array(list(s)) for s in seqs],
    "list of bytes": lambda seqs: [s.encode() for s in seqs],
    "list of lists of bytes": lambda seqs: [[c.encode() for c in s] for s in seqs],
    "unicode 1-D": np.array,
    "unicode 1-D wider dtype": lambda seqs: np.array(seqs, dtype="U12"),
    "unicode 1-D big-endian": lambda seqs: np.array(seqs, dtype=">U5"),
    "unicode 2-D chars": lambda seqs: np.array([list(s) for s in seqs]),
    "unicode 2-D Fortran": lambda seqs: np.asfortranarray([list(s) for s in seqs]),
    "bytes 1-D": lambda seqs: np.array(seqs, dtype="S"),
    "bytes 2-D chars": lambda seqs: np.array([list(s) for s in seqs], dtype="S1"),
    "object 1-D": lambda seqs: np.array(seqs, dtype=object),
    "object 2-D chars": lambda seqs: np.array([list(s) for s in seqs], dtype=object),
    "read-only unicode": lambda seqs: _read_only(np.array(seqs)),
    "pandas Series": pd.Series,
    "pandas DataFrame of chars": lambda seqs: pd.DataFrame([list(s) for s in seqs]),
}


def _read_only(array):
    array.flags.writeable = False
    return array


def _fit(X, **params):
    params = {"alphabet": "dna", "random_state": 0, **params}
    return PottsPseudoLikelihood("full", **params).fit(X)


@pytest.fixture(scope="module")
def text_model():
    """A model fitted on the reference form, a list of str (converges: full, L=5)."""
    sequences = _sequences(0)
    return _fit(sequences), sequences


@pytest.mark.parametrize("form", TEXT_FORMS)
def test_encode_sequences_reads_every_text_form_alike(form, global_random_seed):
    sequences = _sequences(global_random_seed)
    X = TEXT_FORMS[form](sequences)
    before = copy.deepcopy(X)
    assert_array_equal(
        encode_sequences(X, DNA), encode_sequences(sequences, DNA), strict=True
    )
    _assert_unchanged(X, before)


@pytest.mark.parametrize("form", TEXT_FORMS)
def test_every_text_form_fits_and_predicts_alike(form, text_model):
    """Same codes, same deterministic fit: the fitted tensors agree bit for bit."""
    reference, sequences = text_model
    X = TEXT_FORMS[form](sequences)
    before = copy.deepcopy(X)
    model = _fit(X)
    assert_array_equal(model.couplings_, reference.couplings_)
    assert_array_equal(model.states_, reference.states_)
    assert_array_equal(model.predict(X), reference.predict(sequences))
    assert_array_equal(model.predict_proba(X), reference.predict_proba(sequences))
    assert_array_equal(reference.score_samples(X), reference.score_samples(sequences))
    assert reference.score(X) == reference.score(sequences)
    _assert_unchanged(X, before)


def _assert_unchanged(X, before):
    if isinstance(X, (pd.Series, pd.DataFrame)):
        pd.testing.assert_frame_equal(pd.DataFrame(X), pd.DataFrame(before))
    elif isinstance(X, np.ndarray):
        assert_array_equal(X, before, strict=True)
    else:
        assert type(X) is type(before)
        for row, old in zip(X, before, strict=True):
            assert_array_equal(np.asarray(row), np.asarray(old), strict=True)


@pytest.mark.parametrize(
    "X, match",
    [
        ([], r"X is empty \(0 sequences\)"),
        ((), r"X is empty \(0 sequences\)"),
        (np.array([], dtype="U5"), r"X is empty \(0 sequences\)"),
        (np.empty((0, 5), dtype="S1"), r"X is empty \(0 sequences\)"),
        (["ACGT", "ACG"], r"not aligned: X\[1\] has length 3, but X\[0\] has length 4"),
        ([list("ACGT"), list("AC")], r"not aligned: X\[1\] has length 2"),
        ([b"ACGT", b"ACGTA"], r"not aligned: X\[1\] has length 5"),
        (np.array(["ACGT", "AC"]), r"not aligned: X\[1\] has length 2"),
        ([b"AC", b"A\xc3\xa9"], r"X\[1\] holds the byte b'\\xc3' at position 1.*ASCII"),
        (np.array([b"AC", b"A\xff"]), r"X\[1\] holds the byte b'\\xff'.*ASCII"),
        (np.array([["A", "CG"], ["A", "C"]]), r"one character.*X\[0, 1\] is 'CG'"),
        (np.array([["A", ""], ["A", "C"]]), r"one character.*X\[0, 1\] is ''"),
        ([["A", "CG"], ["A", "C"]], r"X\[0\] is a sequence of characters.*'CG'"),
        (["", ""], r"X holds empty strings \(0 columns\)"),
        (np.array(["A", "C"]), r"X has 1 site\(s\); at least 2"),
        (
            np.zeros((2, 2, 2), dtype="U1"),
            r"X must be 1-D .* or 2-D .*shape \(2, 2, 2\)",
        ),
    ],
)
def test_bad_text_is_a_value_error_naming_x(X, match):
    with pytest.raises(ValueError, match=match):
        _fit(X)


@pytest.mark.parametrize(
    "X, match",
    [
        ("ACGT", "X must be a sequence of aligned strings, not a single string"),
        (b"ACGT", "X must be a sequence of aligned strings, not a single string"),
        (np.array("ACGT"), "not a single string"),
        (["ACGT", 7], r"X must hold strings .*found int \(7\) at X\[1\]"),
        (["ACGT", None], r"found NoneType \(None\) at X\[1\]"),
        ([["A", "C"], ["A", 3]], r"X\[1\] must hold single characters.*found int"),
        ([["A", "C"], ["A", b"C"]], r"X\[1\] must hold .*all str or all bytes"),
        (None, r"X must be integer state codes .*or a sequence of aligned strings"),
        (3, r"X must be integer state codes .*got int"),
    ],
)
def test_bad_text_types_are_a_type_error_naming_x(X, match):
    with pytest.raises(TypeError, match=match):
        _fit(X)


def test_encode_sequences_names_its_argument():
    with pytest.raises(ValueError, match=r"sequences is empty \(0 sequences\)"):
        encode_sequences([])
    with pytest.raises(ValueError, match=r"sequences\[1\] has length 2"):
        encode_sequences([list("ACG"), list("AC")])
    with pytest.raises(TypeError, match="sequences must be a sequence of aligned"):
        encode_sequences(None)
    with pytest.raises(TypeError, match=r"sequences\[0\] must hold single char"):
        encode_sequences([[1, 2]])


def test_predict_names_x_and_keeps_the_fitted_alphabet(text_model):
    model, sequences = text_model
    for method in (model.predict, model.predict_proba, model.score_samples):
        with pytest.raises(ValueError, match=r"X is empty \(0 sequences\)"):
            method([])
        with pytest.raises(ValueError, match=r"X\[1\] has 'Z' at position 2"):
            method(["ACGTA", "ACZTA"])
        with pytest.raises(ValueError, match="fitted on strings"):
            method(np.zeros((2, 5), dtype=int))
    # Predictions use the states seen in fit, not a parameter set afterwards.
    expected = model.predict_proba(sequences)
    changed = copy.deepcopy(model).set_params(alphabet="protein")
    assert_array_equal(changed.predict_proba(sequences), expected)


# ---------------------------------------------------------------------------
# Integer codes


def _codes(seed, n=40, length=4, q=3):
    return np.random.default_rng(seed).integers(0, q, size=(n, length))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, object])
def test_integral_floats_are_codes(dtype, global_random_seed):
    """Integer-valued floats are state codes, like float class labels in sklearn:
    the fit is the integer one, and states_ keep the caller's dtype."""
    codes = _codes(global_random_seed)
    X = codes.astype(dtype)
    reference = _fit(codes)
    model = _fit(X)
    assert_array_equal(model.couplings_, reference.couplings_)
    assert_array_equal(model.states_, reference.states_)
    assert_array_equal(model.predict(X), reference.predict(codes))


@pytest.mark.parametrize(
    "X, error, match",
    [
        (np.array([[0, 1.5], [1, 0]]), ValueError, r"not integers.*X\[0, 1\] = 1\.5"),
        ([[0, 1, 2], [0, 1]], ValueError, r"different lengths.*X\[1\] has 2 entries"),
        ([[0, 1], [0, [1]]], ValueError, "X must be integer state codes of shape"),
        ([[0, "A"], [1, "C"]], ValueError, "X mixes integer codes and strings"),
        (np.array([[0, 1], [1, 0]]) + 0j, ValueError, "Complex data not supported: X"),
        (np.zeros((2, 2, 2), dtype=int), ValueError, r"X must be .*shape \(2, 2, 2\)"),
        (np.array([[0, None], [1, 0]]), ValueError, "Input X contains NaN"),
        (np.array([[0, {}], [1, 0]]), ValueError, "its objects are not numbers"),
    ],
)
def test_bad_codes(X, error, match):
    with pytest.raises(error, match=match):
        _fit(X)


def test_codes_and_text_do_not_mix(global_random_seed):
    model = _fit(_codes(global_random_seed))
    with pytest.raises(ValueError, match="fitted on integer codes"):
        model.predict(["ACGT"])
    with pytest.raises(ValueError, match=r"X is empty \(0 sequences\)"):
        model.predict([])  # empty: says so, not that it is text


# ---------------------------------------------------------------------------
# contact_scores(exclude_states=...) and frobenius_scores


def test_exclude_states_forms(text_model):
    model, _ = text_model
    couplings = model.couplings_
    gap = frobenius_scores(couplings, exclude_states=[0])
    for states in ("-", ["-"], ("-",), np.array(["-"]), np.str_("-")):
        scores = model.contact_scores(apc_correction=False, exclude_states=states)
        assert_array_equal(scores, gap)
    two = frobenius_scores(couplings, exclude_states=[0, 1])
    for states in ("-A", ["A", "-"], ["-", "A", "-"]):
        scores = model.contact_scores(apc_correction=False, exclude_states=states)
        assert_array_equal(scores, two)
    nothing = model.contact_scores(apc_correction=False)
    assert_array_equal(
        model.contact_scores(apc_correction=False, exclude_states=[]), nothing
    )


@pytest.mark.parametrize("states", ["Z", ["-", "Z"], [None], 3, [0]])
def test_exclude_unknown_state_is_a_value_error(states, text_model):
    model, _ = text_model
    with pytest.raises(
        ValueError,
        match=r"exclude_states must hold states of the model, i\.e\. entries of "
        r"states_ = \['-', 'A', 'C', 'G', 'T'\]; .* is not one of them",
    ):
        model.contact_scores(exclude_states=states)


@pytest.mark.parametrize("states", [[["-"]], [("-", "A")], [{"-"}]])
def test_exclude_nested_states_is_a_type_error(states, text_model):
    model, _ = text_model
    with pytest.raises(TypeError, match="exclude_states must be a state or a flat"):
        model.contact_scores(exclude_states=states)


def test_exclude_states_of_integer_codes(global_random_seed):
    model = _fit(_codes(global_random_seed) * 10)  # states 0, 10, 20
    couplings = model.couplings_
    expected = frobenius_scores(couplings, exclude_states=[1])
    for states in (10, np.int64(10), [10], np.array([10]), 10.0):
        scores = model.contact_scores(apc_correction=False, exclude_states=states)
        assert_array_equal(scores, expected)
    for states in (1, [7], ["10"]):
        with pytest.raises(ValueError, match=r"states_ = \[0, 10, 20\]"):
            model.contact_scores(exclude_states=states)


@pytest.mark.parametrize(
    "couplings, exclude, error, match",
    [
        (np.zeros((3, 2, 3, 2)), [[0], [0, 1]], ValueError, "exclude_states must be"),
        (np.zeros((3, 2, 3, 2)), [0.5], ValueError, "exclude_states must be"),
        (np.zeros((3, 2, 3, 2)), [True], ValueError, "exclude_states must be"),
        (np.full((3, 2, 3, 2), np.nan), None, ValueError, "NaN or infinity"),
        (np.full((3, 2, 3, 2), -np.inf), None, ValueError, "NaN or infinity"),
        (np.zeros((0, 2, 0, 2)), None, ValueError, "at least one site and one state"),
        (np.zeros((3, 0, 3, 0)), None, ValueError, "at least one site and one state"),
        (np.full((2, 2, 2, 2), "a"), None, TypeError, "couplings must hold real"),
        (np.ones((2, 2, 2, 2)) * 1j, None, TypeError, "couplings must hold real"),
    ],
)
def test_frobenius_scores_bad_input(couplings, exclude, error, match):
    with pytest.raises(error, match=match):
        frobenius_scores(couplings, exclude_states=exclude)


def test_frobenius_scores_empty_exclusion_excludes_nothing(global_random_seed):
    J = np.random.default_rng(global_random_seed).standard_normal((4, 3, 4, 3))
    assert_array_equal(frobenius_scores(J, exclude_states=[]), frobenius_scores(J))


@pytest.mark.parametrize("exponent", [-1000, -600, 600, 1000])
def test_scores_at_any_finite_scale(exponent, global_random_seed):
    """frobenius_scores and apc are homogeneous; at scales whose squares over- or
    underflow, they still return the scaled unit-scale result. Scaling by a power
    of two is exact, so the results agree to the bit."""
    rng = np.random.default_rng(global_random_seed)
    J = rng.standard_normal((5, 3, 5, 3))
    factor = 2.0**exponent
    scores = frobenius_scores(J)
    assert_array_equal(frobenius_scores(J * factor), scores * factor)
    assert_array_equal(apc(scores * factor), apc(scores) * factor)


def test_score_overflow_is_an_error():
    J = np.zeros((3, 2, 3, 2))
    J[0, :, 1, :] = J[1, :, 0, :] = [[3e307, 0.0], [0.0, 4e307]]  # norm 5e307
    assert_allclose(frobenius_scores(J)[0, 1], 5e307, rtol=1e-15)
    with pytest.raises(ValueError, match="overflow float64.*rescale couplings"):
        frobenius_scores(J * 4)


@pytest.mark.parametrize(
    "scores, error, match",
    [
        ([["a", "b"], ["c", "d"]], TypeError, "scores must hold real numbers"),
        (np.ones((3, 3)) * 1j, TypeError, "scores must hold real numbers"),
        ([[0.0, 1.0], [1.0]], ValueError, "scores must be a numeric array"),
    ],
)
def test_apc_bad_input(scores, error, match):
    with pytest.raises(error, match=match):
        apc(scores)


def test_contact_precision_bad_input():
    scores, i, j, d = np.zeros((10, 10)), [0, 1], [9, 8], [3.0, 9.0]
    with pytest.raises(ValueError, match="top must hold .*got None"):
        contact_precision(scores, i, j, d, top=None)
    with pytest.raises(ValueError, match="top must hold .*got 2.0"):
        contact_precision(scores, i, j, d, top=2.0)
    with pytest.raises(TypeError, match="distance must hold real numbers"):
        contact_precision(scores, i, j, ["a", "b"])
    with pytest.raises(ValueError, match="scores contains NaN at a candidate pair"):
        contact_precision(np.full((10, 10), np.nan), i, j, d)
    with pytest.raises(ValueError, match="min_separation must be"):
        contact_precision(scores, i, j, d, min_separation=True)
    with pytest.raises(ValueError, match="No pair of the contact map"):
        contact_precision(scores, [], [], [])  # empty lists are integer enough


def test_sampling_functions_refuse_complex_and_ragged_input():
    J, h = np.zeros((3, 2, 3, 2)), np.zeros((3, 2))
    for function in (exact_distribution, lambda J, h: gibbs_sample(J, h, 2)):
        with pytest.raises(TypeError, match=r"couplings .*got complex values"):
            function(J + 1j, h)  # not silently the real part
        with pytest.raises(TypeError, match=r"fields .*got complex values"):
            function(J, h + 1j)
    with pytest.raises(ValueError, match="codes must .*rows have different lengths"):
        conditional_log_probs([[0, 1, 0], [0, 1]], J, h)
    with pytest.raises(ValueError, match="initial must .*rows have different lengths"):
        gibbs_sample(J, h, 2, initial=[[0, 1, 0], [0, 1]])


# ---------------------------------------------------------------------------
# Files: every line ending, from every kind of source

RECORDS = ["#A3M#", ">first query", "AC-DE", ">hit/2-8", "AcCqD.E", "F", ""]
ENDINGS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}


def _sources(tmp_path, text, suffix):
    """The same bytes as a path, a gzip path and open files of every kind."""
    data = text.encode()
    path = tmp_path / f"aln{suffix}"
    path.write_bytes(data)
    gz_path = tmp_path / f"aln{suffix}.gz"
    gz_path.write_bytes(gzip.compress(data))
    return {
        "path": lambda: path,
        "str path": lambda: str(path),
        "gzip path": lambda: gz_path,
        "gzip without .gz": lambda: _copy(gz_path, tmp_path / f"plain{suffix}"),
        "text file": lambda: open(path),  # noqa: SIM115 (closed by the test)
        "text file newline=''": lambda: open(path, newline=""),  # noqa: SIM115
        "binary file": lambda: open(path, "rb"),  # noqa: SIM115
        "StringIO": lambda: io.StringIO(text),
        "BytesIO": lambda: io.BytesIO(data),
        "BytesIO of gzip": lambda: io.BytesIO(gzip.compress(data)),
    }


def _copy(source, target):
    target.write_bytes(source.read_bytes())
    return target


@pytest.mark.parametrize("ending", ENDINGS)
def test_read_alignment_reads_every_line_ending_alike(ending, tmp_path):
    text = ENDINGS[ending].join(RECORDS)
    expected = (["first query", "hit/2-8"], ["AC-DE", "ACDEF"])
    for kind, make in _sources(tmp_path, text, ".a3m").items():
        source = make()
        try:
            assert read_alignment(source, format="a3m") == expected, kind
        finally:
            if hasattr(source, "close"):
                source.close()
    # Mixed endings in one file, and a FASTA read by suffix.
    mixed = ">a\r\nAC\rDE\n>b\rAC-E\r\n"
    (tmp_path / "mixed.fasta").write_bytes(mixed.encode())
    assert read_alignment(tmp_path / "mixed.fasta") == (["a", "b"], ["ACDE", "AC-E"])


def test_read_alignment_bad_files(tmp_path):
    with pytest.raises(ValueError, match="source is not UTF-8 text: byte 0xff"):
        read_alignment(io.BytesIO(b">a\nA\xffC\n"))
    truncated = gzip.compress(b">a\nACDE\n")[:-6]
    with pytest.raises(ValueError, match="gzip file but cannot be decompressed"):
        read_alignment(io.BytesIO(truncated))
    reader = type("Reader", (), {"read": lambda self: 3})()
    with pytest.raises(TypeError, match=r"source.read\(\) must return str or bytes"):
        read_alignment(reader)
    # A byte-order mark is not text before the first record.
    assert read_alignment(io.StringIO("\ufeff>a\nAC\n")) == (["a"], ["AC"])
    assert read_alignment(io.BytesIO(b"\xef\xbb\xbf>a\nAC\n")) == (["a"], ["AC"])


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.filterwarnings("ignore:read_contact_map is deprecated:FutureWarning")
def test_read_contact_map_reads_every_line_ending_alike(ending, tmp_path):
    lines = ["# i j score distance", "1 7 0.3 4.5", "2 9 0.1 12.0", ""]
    text = ENDINGS[ending].join(lines)
    for kind, make in _sources(tmp_path, text, ".tsv").items():
        source = make()
        try:
            i, j, distance = read_contact_map(source)
        finally:
            if hasattr(source, "close"):
                source.close()
        assert_array_equal(i, [0, 1], err_msg=kind)
        assert_array_equal(j, [6, 8], err_msg=kind)
        assert_array_equal(distance, [4.5, 12.0], err_msg=kind)


@pytest.mark.parametrize(
    "text, error, match",
    [
        ("", ValueError, "is empty"),
        ("# only a comment\n", ValueError, "is empty"),
        ("1 x 0.3 4.5\n", ValueError, "must hold four numbers per line"),
        ("1 2 0.3 4\n1 2\n", ValueError, "must hold four numbers per line"),
        ("1e300 2 0.3 4.5\n", ValueError, "integer column numbers counted from 1"),
        ("0 2 0.3 4.5\n", ValueError, "integer column numbers counted from 1"),
    ],
)
@pytest.mark.filterwarnings("ignore:read_contact_map is deprecated:FutureWarning")
def test_read_contact_map_bad_files(text, error, match):
    with pytest.raises(error, match=match):
        read_contact_map(io.StringIO(text))


@pytest.mark.filterwarnings("ignore:read_contact_map is deprecated:FutureWarning")
def test_read_contact_map_bad_source():
    with pytest.raises(TypeError, match="path must be a path or an open file"):
        read_contact_map(None)


# ---------------------------------------------------------------------------
# Convergence warning


def test_convergence_warning_points_at_the_caller(global_random_seed):
    X = _codes(global_random_seed, n=100)
    model = PottsPseudoLikelihood(max_iter=2, random_state=global_random_seed)
    with pytest.warns(ConvergenceWarning) as record:
        model.fit(X)
    assert len(record) == 1
    message = str(record[0].message)
    assert "PottsPseudoLikelihood.fit did not converge in max_iter=2" in message
    assert "Increase max_iter, or loosen tol" in message
    # The user's line, not _estimator.py nor scikit-learn's _fit_context wrapper.
    assert record[0].filename == __file__
    assert model.n_iter_ == 2
    # Through scikit-learn's own callers too.
    with pytest.warns(ConvergenceWarning) as record:
        make_pipeline(PottsPseudoLikelihood(max_iter=2)).fit(X)
    assert [r.filename for r in record] == [__file__]


def test_no_convergence_warning_when_converged(global_random_seed):
    """A tiny convex (full, penalised) fit converges well within max_iter: the
    worst of seeds 0-99 took 20 of the 500 iterations."""
    X = _codes(global_random_seed, n=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = PottsPseudoLikelihood("full", random_state=global_random_seed).fit(X)
    assert model.n_iter_ < model.max_iter


# -- found by the property tests -------------------------------------------------------
def test_empty_and_one_dimensional_code_arrays_name_x():
    with pytest.raises(ValueError, match="X is empty"):
        PottsPseudoLikelihood().fit(np.array([]))
    with pytest.raises(ValueError, match=r"X must be .* shape \(3,\). Reshape"):
        PottsPseudoLikelihood().fit(np.array([0, 1, 2]))


@pytest.mark.parametrize(
    "penalties",
    [
        dict(alpha_fields=0.0),
        dict(alpha_couplings=0.0),
        dict(alpha_fields=0.0, alpha_couplings=0.0),
    ],
)
def test_zero_penalties_with_unseen_states_stay_finite(penalties):
    """Without a penalty a state a site never shows has no curvature at the
    start (its optimum is at infinity): the preconditioner must not divide by it."""
    X = ["TGC", "AA-", "---"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = PottsPseudoLikelihood(
            "full", alphabet="dna", max_iter=50, random_state=0, **penalties
        ).fit(X)
    assert np.isfinite(model.objective_)
    assert np.isfinite(model.predict_proba(X)).all()
    assert np.isfinite(model.contact_scores()).all()


@pytest.mark.parametrize("value", ["no", None, 1, 0.0])
def test_boolean_flags_are_checked(value):
    model = PottsPseudoLikelihood(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit([[0, 1, 2], [1, 1, 0], [2, 0, 1]])
    with pytest.raises(TypeError, match="apc_correction must be True or False"):
        model.contact_scores(apc_correction=value)
    with pytest.raises(TypeError, match="zero_sum_gauge must be True or False"):
        frobenius_scores(model.couplings_, zero_sum_gauge=value)

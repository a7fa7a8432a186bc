"""The error contract and the Hypothesis strategies shared by the property tests.

Every public call honours one contract (issue 9), whatever it is given:

(a) it raises a ``ValueError`` or ``TypeError`` (scikit-learn's
    ``InvalidParameterError`` and ``NotFittedError`` are ``ValueError``
    subclasses) whose message names the offending argument and says what was
    expected; or
(b) it returns finite output of the documented shape and dtype.

Either way the caller's arrays are left as they were, and no NaN or inf comes
back (in a fitted attribute, say) without an error or a warning. Warnings point
at the caller's line, not into the package.

Each generated argument carries a :class:`Verdict`: ``VALID`` input must give
(b); ``INVALID`` input (NaN in ``X``, a negative ``n_heads``) must give (a);
``EITHER`` input (extreme scales, numeric strings) may give either. A refusal
must name one of the verdict's names, so that an error about ``X`` for a bad
``y`` is caught.
"""

from __future__ import annotations

import copy
import math
import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

VALID, EITHER, INVALID = 0, 1, 2
_LEVELS = {VALID: "valid", EITHER: "either", INVALID: "invalid"}

# Dtypes of numeric input; "str" and "bytes" hold the numbers' text.
DTYPES = (
    "float64",
    "float32",
    "float16",
    "int64",
    "int32",
    "int8",
    "uint8",
    "bool",
    "object",
    "str",
    "bytes",
    "complex128",
)
COMMON_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int8", "uint8")
COMMON_DTYPES += ("bool",)
FLOAT_DTYPES = ("float32", "float64")
# Scales beyond this many decades count as extreme: a clear error naming the
# input is then as good as a result (issue 9, item 4).
MODERATE_DECADES = 8


def rare(draw, k):
    """True about once in ``k`` draws (``k`` a power of two).

    Built from fair coins: Hypothesis draws integers and list indices with a
    bias towards the bounds, which would make "rare" branches common.
    Shrinking goes to False, the usual branch.
    """
    return all([draw(st.booleans()) for _ in range(max(1, round(math.log2(k))))])


def one_of_rare(draw, usual, unusual, k):
    """An element of ``unusual`` once in ``k`` draws, else one of ``usual``."""
    return draw(st.sampled_from(unusual if rare(draw, k) else usual))


def examples(factor):
    """``settings`` with ``factor`` times the profile's ``max_examples``.

    Relative, so that the "dev" profile (ten times "ci") scales every test.
    """
    return settings(max_examples=factor * settings.default.max_examples)


# -- verdicts ------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What a call may do with its arguments, and which names a refusal may cite."""

    level: int = VALID
    names: frozenset = frozenset()
    why: tuple = ()

    def __or__(self, other):
        return Verdict(
            max(self.level, other.level), self.names | other.names, self.why + other.why
        )

    def __str__(self):
        reasons = "; ".join(self.why) or "nothing unusual"
        return f"{_LEVELS[self.level]} ({reasons})"


def refuse(names, why):
    """Input that must be refused with an error naming one of ``names``."""
    return Verdict(INVALID, frozenset(_as_tuple(names)), (why,))


def may_refuse(names, why):
    """Input that may be refused (naming one of ``names``) or accepted."""
    return Verdict(EITHER, frozenset(_as_tuple(names)), (why,))


def _as_tuple(names):
    return (names,) if isinstance(names, str) else tuple(names)


# -- the contract --------------------------------------------------------------------
@dataclass
class Expect:
    """A returned value and what the documentation promises about it."""

    name: str
    value: object
    shape: tuple | None = None
    dtypes: tuple | None = FLOAT_DTYPES
    check: object = None  # extra assertions, called with the value


# NumPy's floating-point warnings ("overflow encountered in matmul") say where
# arithmetic went wrong, not that the result is unreliable: they do not count
# as the warning that may accompany a NaN, and may point anywhere.
_NUMPY_FP_WARNING = re.compile(r"encountered in|divide by zero|Mean of empty slice")
# "Says what was expected" is checked only loosely, as a message of a few words
# beyond the name: the name is the main check; this one rules out bare names.
_MIN_WORDS = 3
_PACKAGE_DIRS = tuple(
    os.sep + part + os.sep
    for part in ("sklearn_attn", "sklearn", "numpy", "scipy", "joblib", "threadpoolctl")
)


def mentions(message, name):
    """Whether ``message`` names ``name`` as a word (case-sensitive for one letter)."""
    flags = 0 if len(name) == 1 else re.IGNORECASE
    pattern = r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])"
    return re.search(pattern, message, flags) is not None


def snapshot(obj):
    """A deep copy of the caller's object, with the flags of arrays."""
    if isinstance(obj, np.ndarray):
        base = obj.base if isinstance(obj.base, np.ndarray) else None
        return ("array", obj.copy(), obj.flags.writeable, snapshot(base))
    return ("object", copy.deepcopy(obj))


def _same(before, obj):
    if before[0] == "array":
        _, copy_, writeable, base = before
        if not isinstance(obj, np.ndarray):
            return False
        if (obj.dtype, obj.shape, obj.flags.writeable) != (
            copy_.dtype,
            copy_.shape,
            writeable,
        ):
            return False
        if obj.dtype.kind == "O":
            same = _same_object(copy_.tolist(), obj.tolist())
        else:
            same = copy_.tobytes() == obj.tobytes()
        return same and (base[1] is None or _same(base, obj.base))
    return _same_object(before[1], obj)


def _same_object(a, b):
    if isinstance(a, (list, tuple)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same_object(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if isinstance(a, np.ndarray):
        return _same(snapshot(a), b)
    return type(a) is type(b) and a == b


def _non_finite(value):
    """Whether a returned value holds NaN or inf (in any float or complex part)."""
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return not np.isfinite(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return not np.all(np.isfinite(value))
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    return False


def check_contract(call, *, verdict, inputs=(), fitted=()):
    """Run ``call()`` and assert the contract.

    Parameters
    ----------
    call : callable
        Makes the public calls; returns a list of :class:`Expect` (or nothing).
    verdict : Verdict
        What the arguments allow.
    inputs : sequence
        The caller's objects (arrays, lists, values) that must not change.
    fitted : sequence of estimators
        Their public fitted attributes must be finite unless a warning came.
    """
    before = [snapshot(obj) for obj in inputs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
            error = None
        except Exception as exc:  # judged below
            result, error = None, exc
    told = [w for w in caught if not _NUMPY_FP_WARNING.search(str(w.message))]

    for obj, snap in zip(inputs, before, strict=True):
        if not _same(snap, obj):
            raise AssertionError(
                f"[input-modified] the call changed the caller's {type(obj).__name__}"
                f" (verdict: {verdict})."
            )
    if error is not None:
        _check_refusal(error, verdict)
    else:
        _check_result(result or [], verdict, told, fitted)
    for w in told:
        if issubclass(w.category, UserWarning) and any(
            part in w.filename for part in _PACKAGE_DIRS
        ):
            raise AssertionError(
                f"[warning-location] {w.category.__name__} {str(w.message)[:120]!r} "
                f"points at {w.filename}:{w.lineno}, not at the caller's line."
            )


def _check_refusal(error, verdict):
    message = f"{type(error).__name__}: {error}"
    if not isinstance(error, (ValueError, TypeError)):
        raise AssertionError(
            f"[internal-error] raised {message[:300]!r}; the contract allows only "
            f"ValueError or TypeError (verdict: {verdict})."
        ) from error
    if verdict.level == VALID:
        raise AssertionError(
            f"[valid-input-refused] {message[:300]!r} (verdict: {verdict})."
        ) from error
    if not any(mentions(str(error), name) for name in verdict.names):
        raise AssertionError(
            f"[message-misnames] {message[:300]!r} names none of "
            f"{sorted(verdict.names)} (verdict: {verdict})."
        ) from error
    if len(str(error).split()) < _MIN_WORDS:
        raise AssertionError(
            f"[message-unexplained] {message[:300]!r} does not say what was expected."
        ) from error


def _check_result(result, verdict, told, fitted):
    if verdict.level == INVALID:
        raise AssertionError(
            f"[invalid-input-accepted] the call returned although its input is "
            f"{verdict}."
        )
    for out in result:
        value = out.value
        if out.shape is not None:
            shape = np.shape(value)
            if shape != tuple(out.shape):
                raise AssertionError(
                    f"[wrong-shape] {out.name} has shape {shape}, documented "
                    f"{tuple(out.shape)} (verdict: {verdict})."
                )
        if out.dtypes is not None:
            dtype = np.asarray(value).dtype
            if dtype.name not in out.dtypes:
                raise AssertionError(
                    f"[wrong-dtype] {out.name} has dtype {dtype}, documented one of "
                    f"{out.dtypes} (verdict: {verdict})."
                )
        if _non_finite(value):
            raise AssertionError(
                f"[non-finite-output] {out.name} holds NaN or inf (warnings: "
                f"{[str(w.message)[:80] for w in told]}; verdict: {verdict})."
            )
        if out.check is not None:
            out.check(value)
    if told:
        return
    for estimator in fitted:
        for name, value in vars(estimator).items():
            if name.endswith("_") and not name.startswith("_") and _non_finite(value):
                raise AssertionError(
                    f"[silent-non-finite-attribute] {type(estimator).__name__}."
                    f"{name} holds NaN or inf and no warning was issued "
                    f"(verdict: {verdict})."
                )


# -- numeric arrays ------------------------------------------------------------------
@dataclass
class Generated:
    """A generated argument: the value handed over, and its verdict."""

    value: object
    verdict: Verdict = field(default_factory=Verdict)


def _fill(shape, kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "integers":
        return rng.integers(-3, 4, size=shape).astype(np.float64)
    if kind == "zeros":
        return np.zeros(shape)
    return np.full(shape, rng.choice([1.0, -2.0, 0.5]))


exponents = st.one_of(st.just(0), st.integers(-5, 5), st.integers(-300, 300))


@st.composite
def numeric_arrays(
    draw,
    shape,
    *,
    name,
    dtypes=DTYPES,
    containers=True,
):
    """An array of ``shape`` in any dtype, layout and scale, maybe with NaN or inf.

    Returns a :class:`Generated` whose verdict is worked out from the content:
    non-finite or complex values must be refused, numeric text and scales
    beyond ``MODERATE_DECADES`` decades may be, the rest must be accepted.
    """
    shape = tuple(shape)
    values = _fill(
        shape,
        draw(st.sampled_from(["normal", "integers", "zeros", "constant"])),
        draw(st.integers(0, 2**16)),
    )
    e = draw(exponents)
    common = [t for t in dtypes if t in COMMON_DTYPES]
    exotic = [t for t in dtypes if t not in COMMON_DTYPES]
    dtype = one_of_rare(draw, common or exotic, exotic or common, 4)
    size = int(np.prod(shape))
    where = draw(st.integers(0, size - 1)) if size else 0
    bad = one_of_rare(draw, [None], [np.nan, np.inf, -np.inf], 8)
    if size == 0 or dtype.startswith(("int", "uint", "bool", "complex")):
        bad = None

    with np.errstate(all="ignore"):
        if dtype.startswith(("int", "uint")):
            info = np.iinfo(dtype)
            scaled = np.clip(np.rint(values * 10.0 ** min(e, 2)), info.min, info.max)
            array = scaled.astype(dtype)
        elif dtype == "bool":
            array = values > 0
        elif dtype == "complex128":
            array = values * 10.0**e + 1j * _fill(shape, "normal", 1)
        else:
            scaled = values * 10.0**e
            if bad is not None:
                scaled.ravel()[where] = bad
            array = scaled.astype(object if dtype == "object" else dtype)

    verdict = Verdict()
    numeric = array
    if dtype in ("str", "bytes"):
        verdict |= may_refuse(name, f"{name} holds numbers as {dtype}")
        numeric = scaled
    elif dtype == "object":
        numeric = scaled
    if dtype == "complex128":
        verdict |= refuse(name, f"{name} is complex")
    elif np.asarray(numeric).dtype.kind == "f" and not np.all(np.isfinite(numeric)):
        verdict |= refuse(name, f"{name} holds NaN or inf")
    elif dtype in ("float64", "float32", "float16", "object", "str", "bytes"):
        if abs(e) > MODERATE_DECADES and np.any(numeric != 0):
            verdict |= may_refuse(name, f"{name} scaled by 1e{e}")

    array = draw(layouts(array, containers=containers))
    return Generated(array, verdict)


@st.composite
def layouts(draw, array, *, containers=True):
    """The same values C- or F-ordered, as a strided view, read-only, or a list."""
    layout = draw(st.sampled_from(["C", "F", "strided", "reversed", "list"]))
    if layout == "list" and not containers:
        layout = "C"
    if layout == "F":
        array = np.asfortranarray(array)
    elif layout == "strided" and array.ndim:
        base = np.zeros((2 * array.shape[0],) + array.shape[1:], dtype=array.dtype)
        base[::2] = array
        array = base[::2]
    elif layout == "reversed" and array.ndim:
        array = np.ascontiguousarray(array[::-1])[::-1]
    elif layout == "list":
        return array.tolist()
    else:
        array = np.ascontiguousarray(array)
    if draw(st.booleans()):
        array.flags.writeable = False
    return array


@st.composite
def hyper_parameters(draw, spec):
    """Keyword arguments from ``{name: (valid, invalid)}``, at most one invalid.

    One draw in four makes one parameter invalid, so that most draws
    reach the data. Returns ``(kwargs, verdict)``; the first valid value of
    each parameter is the one shrunk to.
    """
    names = [name for name, (_, invalid) in spec.items() if invalid]
    bad = one_of_rare(draw, [None], names, 4) if names else None
    kwargs, verdict = {}, Verdict()
    for name, (valid, invalid) in spec.items():
        if name == bad:
            value = draw(st.sampled_from(invalid))
            verdict |= refuse(name, f"{name}={value!r}")
        else:
            value = draw(st.sampled_from(valid))
        kwargs[name] = value
    return kwargs, verdict


INVALID_TOKEN_DIMS = [0, -2, 1.5, "2"]


@st.composite
def token_dims(draw, shape, flat):
    """``(token_dim, verdict)``: mostly what the layout needs, at times not.

    Flat input mostly gets the true token dimension, 3-D input mostly None;
    another value or an invalid one comes once in eight draws.
    """
    usual = [shape[2]] * 3 + [None] if flat else [None] * 3 + [shape[2]]
    choice = one_of_rare(draw, usual, ["other", "invalid"], 8)
    if choice == "other":
        return draw(st.integers(1, 4)), Verdict()
    if choice == "invalid":
        value = draw(st.sampled_from(INVALID_TOKEN_DIMS))
        return value, refuse("token_dim", f"token_dim={value!r}")
    return choice, Verdict()


INVALID_RANDOM_STATES = ["seed", -1, 1.5]


# scikit-learn's own checks say "sample weights"; that names the argument too.
SAMPLE_WEIGHT_NAMES = ("sample_weight", "sample weights")


@st.composite
def sample_weights(draw, n_samples):
    """``None``, valid weights, or weights that must be refused."""
    kind = "none" if draw(st.booleans()) else "given"
    if kind == "given":
        kind = one_of_rare(
            draw,
            ["ones", "positive", "some-zero"],
            ["all-zero", "negative", "nan", "wrong-length", "2-d", "huge"],
            4,
        )
    if kind == "none":
        return Generated(None)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    w = rng.uniform(0.5, 2.0, size=n_samples)
    verdict = Verdict()
    if kind == "ones":
        w = np.ones(n_samples)
    elif kind == "some-zero" and n_samples > 1:
        w[0] = 0.0
    elif kind == "all-zero" or (kind == "some-zero" and n_samples == 1):
        w[:] = 0.0
        verdict = refuse(SAMPLE_WEIGHT_NAMES, "sample_weight is all zero")
    elif kind == "negative" and n_samples:
        w[-1] = -1.0
        verdict = refuse(SAMPLE_WEIGHT_NAMES, "sample_weight has a negative entry")
    elif kind == "nan" and n_samples:
        w[0] = np.nan
        verdict = refuse(SAMPLE_WEIGHT_NAMES, "sample_weight holds NaN")
    elif kind == "wrong-length":
        w = np.ones(n_samples + 1)
        verdict = refuse(SAMPLE_WEIGHT_NAMES, "sample_weight has the wrong length")
    elif kind == "2-d":
        w = np.ones((n_samples, 2))
        verdict = refuse(SAMPLE_WEIGHT_NAMES, "sample_weight is 2-D")
    elif kind == "huge":
        w = w * 1e300
        verdict = may_refuse(SAMPLE_WEIGHT_NAMES, "sample_weight scaled by 1e300")
    if n_samples == 0 and kind not in ("wrong-length", "2-d"):
        # Zero weights for zero samples: the empty X is the problem.
        verdict = may_refuse(SAMPLE_WEIGHT_NAMES, "sample_weight is empty")
    w = draw(layouts(w))
    return Generated(w, verdict)


# -- token input ---------------------------------------------------------------------
EMPTY_NAMES = ("0 sample(s)", "samples")


@st.composite
def token_shapes(draw, *, max_samples=5, max_tokens=4, max_dim=3, min_samples=0):
    """``(n_samples, n_tokens, token_dim)``: empty, one sample, one token, ..."""
    # Typical sizes first (shrinking goes there); the edge cases, one sample,
    # no sample, one token, no token, come once in eight to sixteen draws.
    n_samples = draw(st.sampled_from([*range(max(min_samples, 2), max_samples + 1)]))
    n_tokens = draw(st.sampled_from([*range(2, max_tokens + 1)]))
    if rare(draw, 8):
        n_samples = 1 if min_samples > 0 or draw(st.booleans()) else 0
    if rare(draw, 8):
        n_tokens = one_of_rare(draw, [1], [0], 2)
    return n_samples, n_tokens, draw(st.sampled_from([*range(1, max_dim + 1)]))


def token_layout_verdict(
    shape, flat, token_dim, *, min_tokens, flat_ok=False, name="X", empty=INVALID
):
    """The verdict of the package's documented token layout rules for ``X``.

    ``empty`` is the verdict level for zero samples (``EITHER`` for a kernel,
    whose empty Gram matrix is well defined).
    """
    n, k, d = shape
    verdict = Verdict()
    if n == 0:
        verdict |= Verdict(
            empty, frozenset((name,) + EMPTY_NAMES), (f"{name} has 0 samples",)
        )
    if k * d == 0:
        verdict |= refuse((name, "0 feature(s)", "token"), f"{name} has no features")
    if flat:
        if token_dim is None and not flat_ok:
            verdict |= refuse((name, "token_dim"), "2-D X without token_dim")
        elif token_dim is not None and (k * d) % token_dim:
            verdict |= refuse((name, "token_dim"), "token_dim does not divide")
        elif token_dim is not None and token_dim != d:
            # A different split of the same columns: k * d / token_dim tokens.
            k = (k * d) // token_dim
        elif token_dim is None:
            k = 1 if k * d else 0
    elif token_dim is not None and token_dim != d:
        verdict |= refuse((name, "token_dim"), "token_dim differs from X's last axis")
    if k * d and k < min_tokens:
        verdict |= refuse((name, "token"), f"{name} has {k} token(s)")
    return verdict


def flatten(array, flat):
    """``array`` (an ndarray or nested list, 3-D) flattened to 2-D when ``flat``."""
    if not flat:
        return array
    if isinstance(array, list):
        return [np.asarray(row, dtype=object).ravel().tolist() for row in array]
    out = array.reshape(array.shape[0], array.shape[1] * array.shape[2])
    if not array.flags.writeable and out.flags.writeable:
        out.flags.writeable = False
    return out

"""Property-based tests of the random-feature models and their kernels.

Every call meets the error contract of ``_strategies.check_contract``: a clear
``ValueError``/``TypeError`` naming the argument, or finite output of the
documented shape and dtype, with the caller's arrays untouched. On top, the
ReLU models are positively homogeneous, so their answers at any finite scale
are known exactly from the answer at unit scale; a silent collapse (to
``mean(y)``, to NaN) at extreme scales fails those properties.

What the docstrings promise about dtypes today: the kernels return float64;
``predict`` and ``transform`` do not say (float32 or float64 is accepted here).
"""

import functools
import math

import numpy as np
import pytest
from _strategies import (
    EITHER,
    INVALID,
    INVALID_RANDOM_STATES,
    MODERATE_DECADES,
    Expect,
    Verdict,
    check_contract,
    examples,
    exponents,
    flatten,
    hyper_parameters,
    may_refuse,
    numeric_arrays,
    one_of_rare,
    rare,
    refuse,
    sample_weights,
    token_dims,
    token_layout_verdict,
    token_shapes,
)
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from sklearn_attn import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    MLPRandomFeatures,
    RandomFeatureAttentionRegressor,
    brfa_kernel,
    rfa_kernel,
    rfmlp_kernel,
)

REGRESSORS = [RandomFeatureAttentionRegressor, BiasedRFA, RFMLP]
TRANSFORMERS = [AttentionRandomFeatures, MLPRandomFeatures]
MLP_MODELS = (RFMLP, MLPRandomFeatures)


def _is_mlp(Estimator):
    return issubclass(Estimator, MLP_MODELS)


def _spec(Estimator):
    """Valid values (the shrink target first) and invalid ones, per parameter."""
    if _is_mlp(Estimator):
        spec = {
            "n_features": ([4, 1, 7], [0, -1, 2.5, "4", None]),
            "weight_std": ([None, 0.5, 3.0], [0.0, -1.0, np.nan, "1"]),
            "bias": ([False, True], ["no", 2]),
        }
    else:
        default_mean = Estimator().qk_mean
        other = {"zero": "identity", "identity": "zero"}[default_mean]
        spec = {
            "n_heads": ([3, 1, 4], [0, -1, 2.5, "3", None]),
            "activation": (["relu", "softmax"], ["tanh", "ReLU", None]),
            "qk_mean": ([default_mean, other], ["one", None]),
            "qk_mean_scale": ([1.0, 0.0, -2.5], [np.nan, np.inf, "1"]),
            "qk_std": ([None, 0.0, 0.5, 3.0], [-1.0, np.nan, "1"]),
            "qk_bias": ([True, False], ["yes", 2]),
            "value_bias": ([True, False], ["yes", 2]),
        }
    if Estimator in REGRESSORS:
        spec |= {
            "alpha": (
                [1e-3, 0.0, 1.0, [1e-3, 1.0]],
                [-1.0, np.nan, np.inf, [], [[1.0]], [0.0, 1.0], "big"],
            ),
            "fit_intercept": ([True, False], ["yes", None]),
            "solver": (["auto", "primal", "dual"], ["svd", None]),
        }
    spec["random_state"] = ([0, 1, 2], INVALID_RANDOM_STATES)
    return spec


def _n_outputs(Estimator, params, token_dim):
    if _is_mlp(Estimator):
        return params["n_features"]
    return params["n_heads"] * (token_dim + int(params["value_bias"]))


@st.composite
def token_inputs(draw, Estimator, *, name="X", token_dim="draw", shape=None):
    """``(X, shape, flat, token_dim, verdict)``: token input and its verdict.

    ``token_dim`` is drawn (None, the true one, another one, or an invalid
    value) unless given; ``verdict`` applies the documented layout rules.
    """
    shape = draw(token_shapes()) if shape is None else shape
    flat = draw(st.booleans())
    X = draw(numeric_arrays(shape, name=name))
    verdict = X.verdict
    if token_dim == "draw":
        token_dim, dim_verdict = draw(token_dims(shape, flat))
        verdict |= dim_verdict
    if _valid_token_dim(token_dim):
        verdict |= token_layout_verdict(
            shape,
            flat,
            token_dim,
            min_tokens=1 if _is_mlp(Estimator) else 2,
            flat_ok=_is_mlp(Estimator),
            name=name,
        )
    return flatten(X.value, flat), shape, flat, token_dim, verdict


def _valid_token_dim(token_dim):
    return token_dim is None or (
        isinstance(token_dim, int) and not isinstance(token_dim, bool) and token_dim > 0
    )


def _layout(shape, flat, token_dim):
    """``(n_tokens, token_dim)`` as the estimators read ``X`` of this shape.

    Flat input without ``token_dim`` is one long token (the MLP's reading).
    """
    n, k, d = shape
    if not flat:
        return k, d
    if token_dim is None:
        return 1, k * d
    return (k * d) // token_dim, token_dim


@st.composite
def targets(draw, n_samples, *, name="y"):
    """Targets of any shape, dtype and scale, with their verdict."""
    kind = one_of_rare(
        draw, ["1-d", "1-d", "column", "two"], ["3-d", "wrong-length", "none"], 8
    )
    if kind == "none":
        return None, None, refuse(name, f"{name} is None")
    shape = {
        "1-d": (n_samples,),
        "column": (n_samples, 1),
        "two": (n_samples, 2),
        "3-d": (n_samples, 1, 1),
        "wrong-length": (n_samples + 1,),
    }[kind]
    y = draw(numeric_arrays(shape, name=name))
    verdict = y.verdict
    if kind == "3-d":
        verdict |= refuse(name, f"{name} is 3-D")
    if kind == "wrong-length":
        verdict |= refuse(
            (name, "X", "inconsistent numbers of samples"),
            f"{name} has {n_samples + 1} rows for {n_samples} samples",
        )
    out_shape = (n_samples,) if len(shape) == 1 else (n_samples, shape[1])
    return y.value, out_shape, verdict


_TEN = np.float64(10.0)  # powers overflow to inf, not to OverflowError


def _times_power_of_ten(array, decades):
    """``array * 10**decades`` without overflowing the factor itself (0 stays 0)."""
    with np.errstate(all="ignore"):
        scaled = array * _TEN ** (decades / 2) * _TEN ** (decades / 2)
    return np.where(array == 0, 0.0, scaled)


# log10 of the largest float64, and a band below it where rounding may overflow.
_MAX_DECADES = math.log10(np.finfo(np.float64).max)


def _overflow_verdict(peak, bound, decades, names):
    """Refuse a result beyond float64's range; near its edge, either is fine.

    ``peak`` is the largest exact value at scale 1, ``bound`` the size of the
    terms it is computed from; a peak within rounding (1e-10) of the bound may
    be an exact zero, and then either outcome is fine.
    """
    if peak <= 1e-10 * bound:
        peak = bound
        if peak > 0 and math.log10(peak) + decades > _MAX_DECADES - 1:
            return may_refuse(names, "an exact zero or an overflow")
        return Verdict()
    top = (math.log10(peak) if peak > 0 else -np.inf) + decades
    if top > _MAX_DECADES:
        return refuse(names, f"the exact result, 1e{top:.0f}, overflows float64")
    if top > _MAX_DECADES - 1:
        return may_refuse(names, f"the exact result, 1e{top:.0f}, is near overflow")
    return Verdict()


def _tokens(seed, shape, scale=1.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        return (rng.standard_normal(shape) * scale).astype(dtype)


# -- regressors ----------------------------------------------------------------------
@pytest.mark.parametrize("Estimator", REGRESSORS)
@examples(2)
@given(data=st.data())
def test_regressor_fit_predict_score_contract(Estimator, data):
    """fit, then predict and score on the same data, for any input."""
    params, verdict = data.draw(hyper_parameters(_spec(Estimator)), label="params")
    X, shape, flat, token_dim, x_verdict = data.draw(token_inputs(Estimator), label="X")
    y, y_shape, y_verdict = data.draw(targets(shape[0]), label="y")
    sample_weight = data.draw(sample_weights(shape[0]), label="sample_weight")
    verdict = verdict | x_verdict | y_verdict | sample_weight.verdict
    alpha = params["alpha"]
    if np.ndim(alpha) == 1 and len(alpha) > 1 and shape[0] < 2:
        verdict |= may_refuse(
            ("alpha", "X", "sample"), "leave-one-out alphas with 1 sample"
        )
    model = Estimator(**params, token_dim=token_dim)

    def call():
        model.fit(X, y, sample_weight=sample_weight.value)
        out = [Expect("predict", model.predict(X), shape=y_shape)]
        if shape[0] >= 2:  # R^2 is undefined (NaN, with a warning) for one sample
            out.append(Expect("score", model.score(X, y), shape=(), dtypes=None))
        return out

    check_contract(
        call,
        verdict=verdict,
        inputs=[X, y, sample_weight.value],
        fitted=[model],
    )


@functools.cache
def _fitted_regressor(Estimator, flat, seed):
    """A model fitted on valid unit-scale data, shared by the predict properties."""
    X = _tokens(seed, (6, 3, 2))
    y = _tokens(seed + 1, 6)
    token_dim = 2 if flat else None
    model = Estimator(4 if _is_mlp(Estimator) else 2, token_dim=token_dim)
    return model.set_params(random_state=seed).fit(flatten(X, flat), y)


@pytest.mark.parametrize("Estimator", REGRESSORS)
@examples(2)
@given(data=st.data())
def test_regressor_predict_contract(Estimator, data):
    """predict on a fitted model (or an unfitted one) with any input."""
    fit_flat = data.draw(st.booleans(), label="fit_flat")
    if rare(data.draw, 8):  # unfitted
        model = Estimator(token_dim=2 if fit_flat else None)
        verdict = refuse("fit", "the model is not fitted")
    else:
        model = _fitted_regressor(Estimator, fit_flat, 0)
        verdict = Verdict()
    shape = data.draw(st.sampled_from([(4, 3, 2), (2, 3, 2), (1, 3, 2)]), label="shape")
    if rare(data.draw, 4):
        shape = data.draw(token_shapes(max_samples=4), label="shape")
    X, shape, flat, _, x_verdict = data.draw(
        token_inputs(Estimator, token_dim=model.token_dim, shape=shape), label="X"
    )
    verdict |= x_verdict
    fit_layout = _layout((6, 3, 2), fit_flat, model.token_dim)
    if shape[1] * shape[2] != 6:
        verdict |= refuse(
            ("X", "token", "feature", "features"), f"X has shape {shape}, fit (6, 3, 2)"
        )
    elif _layout(shape, flat, model.token_dim) != fit_layout:
        if _is_mlp(Estimator):
            # The MLP only sees vec(X): the same columns, split otherwise.
            verdict |= may_refuse(("X", "token"), "X split into tokens otherwise")
        else:
            verdict |= refuse(("X", "token"), "X split into tokens otherwise")

    check_contract(
        lambda: [Expect("predict", model.predict(X), shape=(shape[0],))],
        verdict=verdict,
        inputs=[X],
    )


def _gram_condition(features, fit_intercept):
    """Condition number of the (centred) Gram matrix the min-norm fit inverts."""
    if fit_intercept:
        features = features - features.mean(axis=0)
    s = np.linalg.svd(features.astype(np.float64), compute_uv=False)
    return np.inf if s[-1] == 0 else float((s[0] / s[-1]) ** 2)


def _homogeneous_params(Estimator, seed, width):
    """Parameters without the constant (bias) features: Phi(c X) = c^p Phi(X)."""
    if _is_mlp(Estimator):
        return dict(n_features=2 * width, bias=False, random_state=seed % 7), 1
    params = dict(n_heads=width, qk_bias=False, value_bias=False)
    return params | dict(random_state=seed % 7), 3


def _twin_transformer(Estimator):
    if _is_mlp(Estimator):
        return MLPRandomFeatures
    return AttentionRandomFeatures


@pytest.mark.parametrize("Estimator", REGRESSORS)
@examples(1)
@given(
    seed=st.integers(0, 2**16),
    n_samples=st.integers(2, 4),
    n_tokens=st.integers(2, 3),
    token_dim=st.integers(1, 3),
    exponent=exponents,
    float32=st.booleans(),
    fit_intercept=st.booleans(),
    solver=st.sampled_from(["auto", "primal", "dual"]),
)
def test_min_norm_fit_is_scale_invariant(
    Estimator,
    seed,
    n_samples,
    n_tokens,
    token_dim,
    exponent,
    float32,
    fit_intercept,
    solver,
):
    """alpha=0 fits of ``X`` and ``c * X`` predict alike: no collapse to mean(y).

    Without the constant features (no value bias and no constant in the
    scores, ``qk_bias=False``; the MLP without bias) the maps are positively
    homogeneous, ``Phi(c X) = c^p Phi(X)`` (p = 3 for attention, 1 for the
    MLP), and minimum-norm least-squares predictions do not depend on the
    features' scale. Each fit is accurate to about ``cond(K) eps`` of the
    targets' spread, ``K`` the (centred) Gram matrix; we compare only when
    ``cond(K) <= 1e6`` (``1e3`` for float32 input), so the error is at most
    about 2e-10 (1e-4) of the spread, against a bound of 1e-6 (1e-2): a
    margin of 100 at least. A collapse to ``mean(y)`` misses the bound by a
    factor of 1e6 (100). At extreme scales a clear error naming ``X`` is as
    good as a result.
    """
    if float32:  # keep c * X representable: an inf in X is another property
        exponent = max(-30, min(30, exponent))
    dtype = np.float32 if float32 else np.float64
    map_params, _ = _homogeneous_params(Estimator, seed, 6)
    params = map_params | dict(alpha=0.0, fit_intercept=fit_intercept, solver=solver)
    X = _tokens(seed, (n_samples, n_tokens, token_dim), 10.0**exponent, dtype)
    with np.errstate(all="ignore"):
        X_unit = X.astype(np.float64) / 10.0**exponent  # these values at scale 1
    y = _tokens(seed + 1, n_samples)

    reference = Estimator(**params).fit(X_unit, y).predict(X_unit)
    features = _twin_transformer(Estimator)(**map_params).fit_transform(X_unit)
    condition = _gram_condition(features, fit_intercept)
    spread = np.max(np.abs(y - y.mean() if fit_intercept else y))
    limit, rtol = (1e3, 1e-2) if float32 else (1e6, 1e-6)

    def same_as_reference(pred):
        if condition <= limit:
            error = np.max(np.abs(pred - reference))
            assert error <= rtol * spread, (
                f"[scale-collapse] predictions at scale 1e{exponent} differ from "
                f"those at scale 1 by {error:.3g} (spread of y {spread:.3g}, "
                f"cond(K) {condition:.3g})."
            )

    verdict = Verdict()
    if abs(exponent) > MODERATE_DECADES:
        verdict = may_refuse("X", f"X scaled by 1e{exponent}")
    model = Estimator(**params)
    check_contract(
        lambda: [
            Expect(
                "predict",
                model.fit(X, y).predict(X),
                shape=(n_samples,),
                check=same_as_reference,
            )
        ],
        verdict=verdict,
        inputs=[X, y],
        fitted=[model],
    )


# -- transformers --------------------------------------------------------------------
@pytest.mark.parametrize("Estimator", TRANSFORMERS)
@examples(3)
@given(data=st.data())
def test_transformer_contract(Estimator, data):
    """fit_transform, then transform of the same or of other input."""
    params, verdict = data.draw(hyper_parameters(_spec(Estimator)), label="params")
    X, shape, flat, token_dim, x_verdict = data.draw(token_inputs(Estimator), label="X")
    verdict |= x_verdict
    calls = [("fit_transform", X, shape[0])]
    if data.draw(st.booleans(), label="other X"):
        X_new, new_shape, new_flat, _, new_verdict = data.draw(
            token_inputs(Estimator, token_dim=token_dim), label="X_new"
        )
        if _valid_token_dim(token_dim) and _layout(
            new_shape, new_flat, token_dim
        ) != _layout(shape, flat, token_dim):
            new_verdict |= refuse(
                ("X", "token", "features"), "X has another token layout than in fit"
            )
        verdict |= new_verdict
        calls.append(("transform", X_new, new_shape[0]))
    n_out = None
    if verdict.level < INVALID:
        n_out = _n_outputs(Estimator, params, _layout(shape, flat, token_dim)[1])
    model = Estimator(**params, token_dim=token_dim)

    def call():
        return [
            Expect(method, getattr(model, method)(A), shape=(n, n_out))
            for method, A, n in calls
        ]

    check_contract(
        call, verdict=verdict, inputs=[A for _, A, _ in calls], fitted=[model]
    )


@pytest.mark.parametrize("Estimator", TRANSFORMERS)
@examples(2)
@given(
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 3), st.integers(2, 3), st.integers(1, 3)),
    exponent=exponents,
    float32=st.booleans(),
)
def test_transform_is_positively_homogeneous(Estimator, seed, shape, exponent, float32):
    """``transform(c X) = c^p transform(X)`` whenever the result is representable.

    p = 3 for attention (``relu(<c x_0, W c x_i>) c x_i``), 1 for the MLP. The
    scaled input is ``c X`` rounded to its dtype; the reference is the unit
    transform of exactly those values, so the two differ by rounding only,
    a few ulps of the bound ``|x_0| ||W|| |x_i|^2`` (``|w| |u|``) on each
    feature (a d-term inner product, a relu, a product). The tolerance,
    ``1e-12`` (float64) or ``1e-4`` (float32) of that bound, leaves a margin
    of 1000 at least. Results beyond the output's range must be refused, not
    returned as inf or NaN.
    """
    if float32:
        exponent = max(-38, min(38, exponent))
    dtype = np.float32 if float32 else np.float64
    params, power = _homogeneous_params(Estimator, seed, 3)
    model = Estimator(**params).fit(_tokens(seed, shape))
    X = _tokens(seed + 1, shape, 10.0**exponent, dtype)
    with np.errstate(all="ignore"):
        X_unit = X.astype(np.float64) / 10.0**exponent
    unit = model.transform(X_unit)
    # A bound on every feature at scale 1, the scale of its rounding errors:
    # |relu(<x_0, W x_i>)| |x_i| <= |x_0| ||W|| |x_i|^2, |relu(<w, u>)| <= |w| |u|.
    weights = model.weights_ if _is_mlp(Estimator) else model.qk_weights_
    norm_w = np.max(np.linalg.norm(weights.reshape(len(weights), -1), axis=1))
    norm_x = np.max(np.linalg.norm(X_unit.reshape(len(X_unit), -1), axis=1))
    bound = norm_w * norm_x**power / math.sqrt(len(weights))
    # log10 of that bound at scale c: beyond float64's range, refuse.
    decades = (math.log10(bound) if bound > 0 else -np.inf) + power * exponent

    verdict = Verdict()
    if abs(exponent) > MODERATE_DECADES:
        verdict = may_refuse("X", f"X scaled by 1e{exponent}")
    verdict |= _overflow_verdict(np.max(np.abs(unit)), bound, power * exponent, "X")

    def homogeneous(features):
        rtol = 1e-4 if features.dtype == np.float32 else 1e-12
        expected = _times_power_of_ten(unit, power * exponent)
        # Underflow: exact values below the smallest normal may come back as 0.
        atol = max(rtol * _TEN**decades, np.finfo(features.dtype).tiny)
        error = np.max(np.abs(features.astype(np.float64) - expected), initial=0.0)
        assert error <= atol, (
            f"[not-homogeneous] transform(1e{exponent} X) is off by {error:.3g} "
            f"from 1e{power * exponent} transform(X) (tolerance {atol:.3g})."
        )

    check_contract(
        lambda: [
            Expect(
                "transform",
                model.transform(X),
                shape=unit.shape,
                check=homogeneous,
            )
        ],
        verdict=verdict,
        inputs=[X],
    )


def _mp_attention_features(X, W, value_bias):
    """The ReLU attention features with the constant in the scores, in 30-digit
    arithmetic on the exact binary values of ``X`` (mpmath numbers, no range
    limit): ``(features, bound)``, the bound ``|[x_0; 1]| ||W_m|| |[x_i; 1]|
    |[x_i; 1]| / sqrt(M)`` on every feature, the scale of its rounding."""
    mpmath = pytest.importorskip("mpmath")
    mp = mpmath.mp
    with mpmath.workdps(30):
        M, N = len(W), X.shape[1] - 1
        W = [[[mp.mpf(float(v)) for v in row] for row in w] for w in W]
        norm_w = max(mp.sqrt(mp.fsum(v * v for row in w for v in row)) for w in W)
        features, bound = [], mp.mpf(0)
        for sample in X:
            tokens = [[mp.mpf(float(v)) for v in t] + [mp.mpf(1)] for t in sample]
            norms = [mp.sqrt(mp.fsum(v * v for v in t)) for t in tokens]
            bound = max(bound, norms[0] * norm_w * max(norms[1:]) ** 2)
            row = []
            for w in W:
                head = [mp.mpf(0)] * (len(tokens[0]) - (not value_bias))
                for key in tokens[1:]:
                    score = mp.fsum(
                        tokens[0][a] * w[a][b] * key[b]
                        for a in range(len(key))
                        for b in range(len(key))
                    )
                    for p in range(len(head)):
                        head[p] += max(score, 0) * key[p]
                row += [v / (N * mp.sqrt(M)) for v in head]
            features.append(row)
        return features, bound / mp.sqrt(M)


@examples(2)
@given(
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 2), st.integers(2, 3), st.integers(1, 3)),
    exponent=exponents,
    value_bias=st.booleans(),
    qk_mean=st.sampled_from(["zero", "identity"]),
)
def test_qk_bias_transform_is_exact_at_any_scale(
    seed, shape, exponent, value_bias, qk_mean
):
    """With the constant in the scores the features are not homogeneous in X,
    so the reference is the definition itself, evaluated in 30-digit
    arithmetic on the same binary inputs ``c X``. Rounding moves each feature
    by a few ulps of the bound ``|[x_0; 1]| ||W|| |[x_i; 1]|^2 / sqrt(M)`` (a
    (d + 1)-term score, a relu, a product): the tolerance, 1e-12 of it (or the
    smallest normal number, where the exact value underflows), leaves a margin
    of 1000 at least. Features beyond float64's range must be refused, not
    returned as inf; tiny tokens need no refusal, the constant keeping the
    scores of order one."""
    model = AttentionRandomFeatures(
        n_heads=2, qk_mean=qk_mean, value_bias=value_bias, random_state=seed % 7
    ).fit(_tokens(seed, shape))
    X = _tokens(seed + 1, shape, 10.0**exponent)
    exact, bound = _mp_attention_features(X, model.qk_weights_, value_bias)
    mpmath = pytest.importorskip("mpmath")
    peak = max((abs(v) for row in exact for v in row), default=0)
    top = float(mpmath.log10(peak)) if peak > 0 else -np.inf
    verdict = Verdict()
    if top > _MAX_DECADES:
        verdict = refuse("X", f"the exact features, 1e{top:.0f}, overflow float64")
    elif top > _MAX_DECADES - 1 or float(mpmath.log10(bound)) > _MAX_DECADES - 1:
        verdict = may_refuse("X", "features near overflow")

    def exact_features(features):
        atol = max(1e-12 * float(bound), np.finfo(np.float64).tiny)
        expected = np.array([[float(v) for v in row] for row in exact])
        error = np.max(np.abs(features - expected), initial=0.0)
        assert error <= atol, (
            f"[qk-bias-scale] transform(1e{exponent} X) is off by {error:.3g} "
            f"from the 30-digit reference (tolerance {atol:.3g})."
        )

    n_out = 2 * (shape[2] + int(value_bias))
    check_contract(
        lambda: [
            Expect(
                "transform",
                model.transform(X),
                shape=(shape[0], n_out),
                check=exact_features,
            )
        ],
        verdict=verdict,
        inputs=[X],
    )


# scikit-learn's finiteness check sums the input first; a float32 sum of entries
# near 1e38 overflows (inf - inf in the reduction) before its exact fallback runs.
@pytest.mark.filterwarnings("ignore:invalid value encountered in reduce")
@examples(3)
@given(
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 3), st.integers(2, 4), st.integers(1, 3)),
    exponent=exponents,
    float32=st.booleans(),
    qk_mean=st.sampled_from(["zero", "identity"]),
    qk_bias=st.booleans(),
)
def test_softmax_features_are_convex_combinations_of_the_keys(
    seed, shape, exponent, float32, qk_mean, qk_bias
):
    """Softmax features are not homogeneous, but at any finite scale each head's
    features are ``sum_i a_i [x_i; 1] / sqrt(M)`` with weights ``a_i >= 0``
    summing to one: every coordinate lies between the smallest and the largest
    of the keys' (to a few ulps of ``max |x_i|``: tolerance 1e-12, or 1e-5 for
    float32, of it), and the bias feature is ``1 / sqrt(M)`` (to 1e-12 or
    1e-6 relative). The answer is always representable, so nothing may be
    refused and nothing may come back inf or NaN, at any scale."""
    if float32:
        exponent = max(-38, min(38, exponent))
    dtype = np.float32 if float32 else np.float64
    n_heads = 3
    model = AttentionRandomFeatures(
        n_heads,
        activation="softmax",
        qk_mean=qk_mean,
        qk_bias=qk_bias,
        random_state=seed % 7,
    ).fit(_tokens(seed, shape))
    X = _tokens(seed + 1, shape, 10.0**exponent, dtype)
    features = model.transform(X)
    assert features.dtype == dtype and np.isfinite(features).all()
    n, _, d = shape
    heads = features.astype(np.float64).reshape(n, n_heads, d + 1) * np.sqrt(n_heads)
    keys = X[:, 1:].astype(np.float64)
    rtol = 1e-5 if float32 else 1e-12
    slack = rtol * np.abs(keys).max(axis=(1, 2))[:, None, None]
    low, high = keys.min(axis=1)[:, None, :], keys.max(axis=1)[:, None, :]
    assert (heads[:, :, :d] >= low - slack).all()
    assert (heads[:, :, :d] <= high + slack).all()
    assert_allclose(heads[:, :, d], 1.0, rtol=10 * rtol)


# -- kernels -------------------------------------------------------------------------
KERNELS = {
    "rfa_kernel": (
        rfa_kernel,
        {
            "qk_std": ([None, 0.0, 0.5], [-1.0, np.nan, "1"]),
            "qk_bias": ([True, False], ["no", 1]),
            "value_bias": ([True, False], ["yes", 1]),
        },
    ),
    "brfa_kernel": (
        brfa_kernel,
        {
            "qk_mean_scale": ([1.0, 0.0, -2.0], [np.nan, np.inf, "1"]),
            "qk_std": ([None, 0.0, 0.5], [-1.0, np.nan]),
            "qk_bias": ([True, False], ["no", 1]),
            "value_bias": ([True, False], ["yes", 1]),
        },
    ),
    "rfmlp_kernel": (
        rfmlp_kernel,
        {
            "weight_std": ([None, 0.5], [0.0, -1.0, np.nan]),
            "bias": ([False, True], [1, "no"]),
        },
    ),
}


@pytest.mark.parametrize("name", KERNELS)
@examples(3)
@given(data=st.data())
def test_kernel_contract(name, data):
    """``K(X, Y)`` of shape ``(n_X, n_Y)``, float64 and finite, or a clear error."""
    kernel, spec = KERNELS[name]
    mlp = name == "rfmlp_kernel"
    params, verdict = data.draw(hyper_parameters(spec), label="params")
    shape = data.draw(token_shapes(max_samples=3, max_tokens=3), label="shape")
    flat = data.draw(st.booleans(), label="flat")
    token_dim, dim_verdict = data.draw(token_dims(shape, flat), label="token_dim")
    verdict |= dim_verdict
    X = data.draw(numeric_arrays(shape, name="X"), label="X")
    verdict |= X.verdict | _kernel_layout_verdict(shape, flat, token_dim, mlp, "X")
    X = flatten(X.value, flat)
    inputs, Y, n_Y = [X], None, shape[0]
    if data.draw(st.booleans(), label="Y given"):
        y_shape = (data.draw(st.sampled_from([1, 2, 3])),) + shape[1:]
        if rare(data.draw, 8):
            y_shape = data.draw(token_shapes(max_samples=3, max_tokens=3))
        Y_gen = data.draw(numeric_arrays(y_shape, name="Y"), label="Y")
        Y, n_Y = flatten(Y_gen.value, flat), y_shape[0]
        inputs.append(Y)
        verdict |= Y_gen.verdict
        if _valid_token_dim(token_dim):
            verdict |= _kernel_layout_verdict(y_shape, flat, token_dim, mlp, "Y")
            if _layout(y_shape, flat, token_dim) != _layout(shape, flat, token_dim):
                if mlp and y_shape[1] * y_shape[2] == shape[1] * shape[2]:
                    # Only vec(X) matters to the MLP kernel.
                    verdict |= may_refuse(("X", "Y", "layout"), "another split")
                else:
                    verdict |= refuse(("X", "Y", "layout"), "X and Y differ in layout")

    check_contract(
        lambda: [
            Expect(
                name,
                kernel(X, Y, token_dim=token_dim, **params),
                shape=(shape[0], n_Y),
                dtypes=("float64",),
            )
        ],
        verdict=verdict,
        inputs=inputs,
    )


def _kernel_layout_verdict(shape, flat, token_dim, mlp, name):
    if not _valid_token_dim(token_dim):
        return Verdict()  # the invalid token_dim is refused first
    return token_layout_verdict(
        shape,
        flat,
        token_dim,
        min_tokens=1 if mlp else 2,
        flat_ok=mlp,
        name=name,
        empty=EITHER,
    )


@pytest.mark.parametrize("name", KERNELS)
@examples(2)
@given(
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 3), st.integers(2, 3), st.integers(1, 3)),
    n_Y=st.one_of(st.none(), st.integers(1, 3)),
    exponent=exponents,
    qk_std=st.sampled_from([None, 0.7]),
)
def test_kernel_is_positively_homogeneous(name, seed, shape, n_Y, exponent, qk_std):
    """``K(c X, c Y) = c^p K(X, Y)`` whenever the exact value is representable.

    Without the constant terms (``value_bias=False``, ``qk_bias=False``; the
    MLP without bias), p = 6 for the attention kernels
    (``s^2 <x_0, y_0> <x_i, y_j>`` times norms of four tokens, times a key
    Gram entry) and 2 for the MLP's. The inputs are ``c X`` rounded to
    float64 and the reference is the kernel of exactly those values at scale
    1, so the two differ by rounding only, relative to the size of the terms,
    ``sqrt(K(x, x) K(y, y))``. The tolerance, 1e-6 of that, leaves a margin
    of 100 over the 1e-8 relative error of ``sqrt(1 - rho^2)`` at ``rho``
    within an ulp of 1 (the worst step).
    """
    kernel, _ = KERNELS[name]
    mlp = name == "rfmlp_kernel"
    power = 2 if mlp else 6
    if mlp:
        params = dict(bias=False, weight_std=qk_std)
    else:
        params = dict(qk_bias=False, value_bias=False, qk_std=qk_std)
    c = 10.0**exponent
    X = _tokens(seed, shape, c)
    Y = None if n_Y is None else _tokens(seed + 1, (n_Y,) + shape[1:], c)
    with np.errstate(all="ignore"):
        X_unit = X / c
        Y_unit = X_unit if Y is None else Y / c
    unit = kernel(X_unit, None if Y is None else Y_unit, **params)
    # |K(x, y)| <= sqrt(K(x, x) K(y, y)) (a positive semi-definite kernel): the
    # scale of the terms, and so of their rounding errors, even where K ~ 0.
    bound = math.sqrt(
        np.max(np.diag(kernel(X_unit, **params)))
        * np.max(np.diag(kernel(Y_unit, **params)))
    )
    decades = (math.log10(bound) if bound > 0 else -np.inf) + power * exponent

    verdict = Verdict()
    if abs(exponent) > MODERATE_DECADES:
        verdict = may_refuse("X", f"X scaled by 1e{exponent}")
    verdict |= _overflow_verdict(
        np.max(np.abs(unit)), bound, power * exponent, ("X", "Y")
    )

    def homogeneous(K):
        expected = _times_power_of_ten(unit, power * exponent)
        atol = max(1e-6 * _TEN**decades, np.finfo(np.float64).tiny)
        error = np.max(np.abs(K - expected))
        assert error <= atol, (
            f"[not-homogeneous] {name}(1e{exponent} X) is off by {error:.3g} "
            f"from 1e{power * exponent} {name}(X) (tolerance {atol:.3g})."
        )

    check_contract(
        lambda: [
            Expect(
                name,
                kernel(X, Y, **params),
                shape=(shape[0], shape[0] if n_Y is None else n_Y),
                dtypes=("float64",),
                check=homogeneous,
            )
        ],
        verdict=verdict,
        inputs=[X] if Y is None else [X, Y],
    )

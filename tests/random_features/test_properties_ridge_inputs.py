"""Property-based tests of the random-feature regressors on degenerate inputs.

Tokens of any binary scale from ``2^-1074`` (the smallest subnormal) to
``2^300``, constant or near-constant rows, and penalties from 0 to ``1e300``:
every fit either raises a ``ValueError`` naming its argument (``X``, or
``alpha`` for penalties that cannot be compared) or predicts what a slow,
obvious reference predicts. The references are the weighted mean of ``y``
(rows all equal: constant features, the centred problem is zero) and
scikit-learn's ``Ridge`` (``numpy.linalg.lstsq`` for ``alpha = 0``) on the
explicit float64 features of the twin transformer, scaled by a power of two
(with the penalty scaled alike, which changes nothing in exact arithmetic) so
that the reference itself neither overflows nor underflows.
"""

import math
import warnings

import numpy as np
from _strategies import (
    MODERATE_DECADES,
    Expect,
    Verdict,
    check_contract,
    examples,
    may_refuse,
)
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from sklearn.linear_model import Ridge

from sklearn_attn import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    MLPRandomFeatures,
    RandomFeatureAttentionRegressor,
)

REGRESSORS = (RandomFeatureAttentionRegressor, BiasedRFA, RFMLP)
EPS = np.finfo(np.float64).eps

# Binary exponents of the tokens' scale: unit scale, moderate, and the whole
# float64 range that a cube of the features' degree can reach from.
binary_exponents = st.one_of(st.just(0), st.integers(-20, 20), st.integers(-1074, 300))
# Penalties from 0 to 1e300, the default "auto", and a pair compared by
# leave-one-out error.
penalties = st.one_of(
    st.just("auto"),
    st.just(0.0),
    st.just(1e300),
    st.floats(-12, 300).map(lambda k: float(10.0**k)),
    st.tuples(st.floats(-6, 2), st.floats(3, 300)).map(
        lambda ks: [float(10.0 ** ks[0]), float(10.0 ** ks[1])]
    ),
)


@st.composite
def models(draw, Estimator):
    """A regressor and its twin transformer, with the same random weights."""
    seed = draw(st.integers(0, 6))
    solver = draw(st.sampled_from(["auto", "primal", "dual"]))
    alpha = draw(penalties)
    if Estimator is RFMLP:
        params = dict(
            n_features=draw(st.sampled_from([3, 8])), bias=draw(st.booleans())
        )
        twin = MLPRandomFeatures(**params, random_state=seed)
    else:
        params = dict(
            n_heads=draw(st.sampled_from([1, 3])),
            qk_bias=draw(st.booleans()),
            value_bias=draw(st.booleans()),
            activation=draw(st.sampled_from(["relu", "relu", "softmax"])),
        )
        twin = AttentionRandomFeatures(
            **params, qk_mean=Estimator().qk_mean, random_state=seed
        )
    model = Estimator(**params, alpha=alpha, solver=solver, random_state=seed)
    return model, twin


@st.composite
def problems(draw, *, spread):
    """``(X, y, sample_weight, exponent)``: tokens at scale ``2^exponent``."""
    n = draw(st.integers(1, 6))
    shape = (n, draw(st.integers(2, 3)), draw(st.integers(1, 3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    exponent = draw(binary_exponents)
    if spread == "constant":
        X = np.repeat(rng.standard_normal((1,) + shape[1:]), n, axis=0)
    elif spread == "near":
        bits = draw(st.integers(10, 70))
        X = rng.standard_normal((1,) + shape[1:]) + np.ldexp(
            rng.standard_normal(shape), -bits
        )
    else:
        X = rng.standard_normal(shape)
    X = np.ldexp(X, exponent)
    y = rng.standard_normal(n)
    weights = None
    if draw(st.booleans()):
        weights = rng.uniform(0.5, 2.0, n)
    return X, y, weights, exponent


def _verdict(exponent, alpha, n):
    verdict = Verdict()
    if abs(exponent) * math.log10(2) > MODERATE_DECADES:
        verdict |= may_refuse("X", f"X scaled by 2^{exponent}")
    if isinstance(alpha, list):
        verdict |= may_refuse(
            ("alpha", "X"), "penalties compared by leave-one-out at extreme scales"
        )
        if n < 2:
            verdict |= may_refuse(("alpha", "sample"), "leave-one-out of one sample")
    return verdict


def _reference_predictions(features, y, weights, alpha):
    """Ridge (lstsq for alpha = 0) with an intercept on explicit float64
    features, computed at the power-of-two scale where their largest entry is
    about one: ``Phi / 2^k`` with ``alpha / 4^k`` has the same predictions."""
    k = int(np.frexp(np.abs(features).max())[1]) if features.any() else 0
    with np.errstate(over="ignore", under="ignore"):
        scaled_alpha = float(np.ldexp(alpha, -2 * k))
    F = np.ldexp(features, -k)
    if not np.isfinite(scaled_alpha):
        # A penalty beyond float64's range: the intercept-only limit.
        return np.full(len(y), np.average(y, weights=weights)), F, scaled_alpha
    if scaled_alpha > 0:
        with warnings.catch_warnings():
            # The reference on degenerate features: its own solver says so.
            warnings.simplefilter("ignore")
            ridge = Ridge(alpha=scaled_alpha).fit(F, y, sample_weight=weights)
        return ridge.predict(F), F, scaled_alpha
    w = np.ones(len(y)) if weights is None else weights
    mean_F, mean_y = np.average(F, axis=0, weights=w), np.average(y, weights=w)
    root = np.sqrt(w)[:, None]
    coef = np.linalg.lstsq(root * (F - mean_F), root[:, 0] * (y - mean_y))[0]
    return (F - mean_F) @ coef + mean_y, F, scaled_alpha


def _well_determined(F, weights, alpha):
    """Whether ridge on ``F`` is determined to 1e-8 of the targets' scale.

    Rounding moves the predictions by about ``kappa eps`` relative, with
    ``kappa = (s_max^2 + alpha) / (s_min^2 + alpha)`` over the singular values
    of the centred (weighted) features the fit uses; centring ``n`` samples
    perturbs them by ``n eps max |F|``, which ``kappa`` amplifies relative to
    ``sqrt(s_min^2 + alpha)``. Both must stay below 1e-8.
    """
    n = len(F)
    w = np.ones(n) if weights is None else weights
    centred = np.sqrt(w)[:, None] * (F - np.average(F, axis=0, weights=w))
    s = np.linalg.svd(centred, compute_uv=False)[: max(min(n - 1, F.shape[1]), 0)]
    if s.size == 0:
        return False
    floor = s[-1] ** 2 + alpha
    if not floor > 0:
        return False
    kappa = (s[0] ** 2 + alpha) / floor
    centring = n * EPS * np.abs(F).max() * math.sqrt(n * F.shape[1])
    return kappa * EPS <= 1e-8 and kappa * centring <= 1e-8 * math.sqrt(floor)


def _check_fit(fit, X, y, weights, verdict, model, check):
    """The contract for ``fit(X, y, sample_weight).predict(X)``, with ``check``
    on the predictions."""
    check_contract(
        lambda: [
            Expect(
                "predict",
                fit(X, y, sample_weight=weights).predict(X),
                shape=y.shape,
                check=check,
            )
        ],
        verdict=verdict,
        inputs=[X, y] + ([] if weights is None else [weights]),
        fitted=[model],
    )


def _assert_weighted_mean(pred, y, weights):
    """The prediction of constant rows, to 1e-12 of ``max |y|`` (the rounding
    of the mean itself)."""
    mean = np.average(y, weights=weights)
    assert_allclose(pred, mean, rtol=0, atol=1e-12 * np.abs(y).max())


def _assert_matches_ridge(pred, model, twin, X, y, weights):
    """The predictions of ``Ridge`` with the model's ``alpha_`` on the explicit
    features, to 1e-6 of the targets' spread wherever that answer is
    determined to 1e-8 by the features (a margin of 100); nothing to compare
    with where the features are not representable in float64, nor where
    ``alpha_`` is not (an inf with a warning: the kernel's scale overflows)."""
    if not np.isfinite(model.alpha_):
        return
    try:
        features = twin.fit(X).transform(X).astype(np.float64)
    except ValueError:
        return
    reference, F, alpha = _reference_predictions(features, y, weights, model.alpha_)
    if np.isfinite(alpha) and not _well_determined(F, weights, alpha):
        return
    spread_y = np.abs(y - np.average(y, weights=weights)).max()
    assert_allclose(pred, reference, rtol=0, atol=1e-6 * spread_y + 1e-300)


@given(data=st.data())
@examples(4)
def test_constant_rows_predict_the_weighted_mean(data):
    """All rows of ``X`` equal: the features are constant, the centred ridge
    problem is zero, and the prediction for that row is the weighted mean of
    ``y`` whatever the penalty, or a clear error."""
    Estimator = data.draw(st.sampled_from(REGRESSORS), label="Estimator")
    model, _ = data.draw(models(Estimator), label="model")
    X, y, weights, exponent = data.draw(problems(spread="constant"), label="problem")
    _check_fit(
        model.fit,
        X,
        y,
        weights,
        _verdict(exponent, model.alpha, len(y)),
        model,
        lambda pred: _assert_weighted_mean(pred, y, weights),
    )


@given(data=st.data())
@examples(4)
def test_fits_match_ridge_on_the_explicit_features(data):
    """Any scale, generic or near-constant rows, penalties 0 to 1e300: a fit
    predicts what ``Ridge`` with the reported ``alpha_`` predicts on the
    explicit features (see ``_assert_matches_ridge``), or it is a clear error
    naming ``X`` (or ``alpha``)."""
    Estimator = data.draw(st.sampled_from(REGRESSORS), label="Estimator")
    model, twin = data.draw(models(Estimator), label="model")
    spread = data.draw(st.sampled_from(["generic", "near"]), label="spread")
    X, y, weights, exponent = data.draw(problems(spread=spread), label="problem")
    _check_fit(
        model.fit,
        X,
        y,
        weights,
        _verdict(exponent, model.alpha, len(y)),
        model,
        lambda pred: _assert_matches_ridge(pred, model, twin, X, y, weights),
    )


@given(data=st.data())
@examples(2)
def test_partial_fit_at_any_scale_fits_or_names_X(data):
    """``partial_fit`` cannot rescale: beyond its documented range it refuses
    naming ``X``; within it, one batch predicts the weighted mean of ``y`` for
    constant rows and what ``Ridge`` predicts on the explicit features
    otherwise (as ``fit`` does)."""
    Estimator = data.draw(st.sampled_from(REGRESSORS), label="Estimator")
    model, twin = data.draw(models(Estimator), label="model")
    model.set_params(solver=data.draw(st.sampled_from(["auto", "primal"])))
    if isinstance(model.alpha, list):
        model.set_params(alpha=model.alpha[0])
    spread = data.draw(st.sampled_from(["generic", "near", "constant"]), label="spread")
    X, y, weights, exponent = data.draw(problems(spread=spread), label="problem")
    if spread == "constant":
        check = lambda pred: _assert_weighted_mean(pred, y, weights)  # noqa: E731
    else:
        check = lambda pred: _assert_matches_ridge(  # noqa: E731
            pred, model, twin, X, y, weights
        )
    _check_fit(
        model.partial_fit,
        X,
        y,
        weights,
        _verdict(exponent, model.alpha, len(y)),
        model,
        check,
    )

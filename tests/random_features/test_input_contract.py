"""Extreme but finite inputs, misnamed errors, warnings at the caller's line.

Without their constants the random-feature maps and kernels are positively
homogeneous, so rescaling by a power of two is exact: a fit on ``2^k X`` must equal
the fit on ``X`` with the penalty moved by the same power, bit for bit up to the
solver's own rounding. With the constant 1 in the attention scores (``qk_bias``, the
default) they are homogeneous in the tokens with their constants, ``[x; 1]``: at
``2^k X`` the reference is the unit-scale computation with every 1 replaced by
``2^-k``. Where the exact result is not representable the estimators raise a
``ValueError`` that says which input is out of range; they never return NaN or
collapse silently.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, UndefinedMetricWarning
from sklearn.linear_model import Ridge

from sklearn_attn import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    MLPRandomFeatures,
    MultiHeadAttentionLearner,
    RandomFeatureAttentionRegressor,
    brfa_kernel,
    rfa_kernel,
    rfmlp_kernel,
)
from sklearn_attn.attention import _layer
from sklearn_attn.attention._layer import attention_weights
from sklearn_attn.datasets import make_attention_layer_regression, make_token_regression

# Homogeneous models (no constant features) and the degree of their features in
# X: relu(<x_0, W x_i>) x_i is of degree 3, relu(<w, x>) of degree 1.
_HOMOGENEOUS = dict(qk_bias=False, value_bias=False, random_state=0)
REGRESSORS = [
    (RandomFeatureAttentionRegressor(n_heads=30, **_HOMOGENEOUS), 3),
    (BiasedRFA(n_heads=30, **_HOMOGENEOUS), 3),
    (RFMLP(n_features=60, random_state=0), 1),
]


@pytest.fixture
def data(global_random_seed):
    X, y = make_token_regression(
        n_samples=80, n_keys=3, token_dim=3, random_state=global_random_seed
    )
    return X[:60], y[:60], X[60:]


def _with_alpha(estimator, alpha):
    return estimator.__class__(**{**estimator.get_params(), "alpha": alpha})


# -- random-feature regressors ---------------------------------------------------------
@pytest.mark.parametrize("estimator, degree", REGRESSORS)
@pytest.mark.parametrize("k", [40, -40, 100])
@pytest.mark.parametrize("solver", ["dual", "primal"])
def test_power_of_two_scaling_is_exact(estimator, degree, k, solver, data):
    """A fit on 2^k X with alpha is the fit on X with alpha / 2^(2 degree k).

    At k = 100 the attention features are near 2^300 and their Gram matrix
    would overflow without the rescaling. The rescaled computation is the
    unit-scale one up to powers of two; 1e-9 allows for the solvers' rounding
    on the different but equivalent penalties.
    """
    X, y, X_test = data
    alpha = 1e-2
    scaled = _with_alpha(estimator, alpha).set_params(solver=solver)
    scaled.fit(np.ldexp(X, k), y)
    reference = _with_alpha(estimator, np.ldexp(alpha, -2 * degree * k))
    reference.set_params(solver=solver).fit(X, y)
    assert_allclose(
        scaled.predict(np.ldexp(X_test, k)), reference.predict(X_test), rtol=1e-9
    )
    assert_allclose(
        np.ldexp(scaled.coef_, degree * k), reference.coef_, rtol=1e-9, atol=1e-12
    )
    assert scaled.intercept_ == pytest.approx(reference.intercept_, rel=1e-9)


def _explicit_features(model, X, k):
    """Features of 2^k X divided by 2^(degree k), from the fitted weights."""
    if isinstance(model, RFMLP):
        W = model.weights_
        pre = X.reshape(len(X), -1) @ W[:, :-1].T + np.ldexp(W[:, -1], -k)
        return np.maximum(pre, 0) / np.sqrt(len(W))
    transformer = AttentionRandomFeatures(
        n_heads=model.n_heads, qk_bias=False, random_state=0
    )
    features = transformer.fit(X).transform(X)
    d = X.shape[2]
    features[:, d :: d + 1] = np.ldexp(features[:, d :: d + 1], -k)  # bias columns
    return features


@pytest.mark.parametrize(
    "estimator, degree",
    [
        (RandomFeatureAttentionRegressor(n_heads=30, qk_bias=False, random_state=0), 3),
        (RFMLP(n_features=60, bias=True, random_state=0), 1),
    ],
)
@pytest.mark.parametrize("k", [40, -30, 100])
def test_constant_features_at_extreme_scales_match_ridge(estimator, degree, k, data):
    """With a constant feature (value bias, first-layer bias) the model is not
    homogeneous: at 2^k X it is ridge on the unit-scale features with the
    constant scaled by 2^-k, and alpha by 2^(-2 degree k). scikit-learn's Ridge
    on those explicit features is the reference."""
    X, y, X_test = data
    alpha = 1e-2
    model = _with_alpha(estimator, alpha).fit(np.ldexp(X, k), y)
    alpha_scaled = np.ldexp(alpha, -2 * degree * k)
    ridge = Ridge(alpha=alpha_scaled, solver="svd").fit(
        _explicit_features(model, X, k), y
    )
    expected = ridge.predict(_explicit_features(model, X_test, k))
    assert_allclose(model.predict(np.ldexp(X_test, k)), expected, rtol=1e-7)


def _qk_bias_features(X, W, constant):
    """(1/(N sqrt(M))) sum_i relu(<[x_0; c], W_m [x_i; c]>) [x_i; c], in NumPy."""
    ones = np.full(X.shape[:2] + (1,), constant)
    tokens = np.concatenate([X, ones], axis=2)
    scores = np.einsum("nd,mde,nie->nmi", tokens[:, 0], W, tokens[:, 1:])
    features = np.einsum("nmi,nip->nmp", np.maximum(scores, 0), tokens[:, 1:])
    return features.reshape(len(X), -1) / (X.shape[1] - 1) / np.sqrt(len(W))


@pytest.mark.parametrize("Estimator", [RandomFeatureAttentionRegressor, BiasedRFA])
@pytest.mark.parametrize("k", [40, 100, 300, -30, -300])
def test_qk_bias_fits_at_extreme_scales_match_ridge(Estimator, k, data):
    """With the constant in the scores the map is homogeneous of degree 3 in
    ``[x; 1]``: a fit on 2^k X (k > 0) is ridge on the features of X with every
    constant 2^-k and alpha / 2^(6k), which keeps the Gram matrix in range at
    k = 300 (features near 2^900). Tiny tokens (k < 0) need no rescaling: the
    constant keeps the scores moderate, and the reference is ridge on the
    features of 2^k X themselves. Both references are explicit NumPy features
    under scikit-learn's Ridge; 1e-7 allows for the two solvers' rounding."""
    X, y, X_test = data
    alpha = 1e-2
    model = Estimator(n_heads=30, alpha=alpha, random_state=0)
    model.fit(np.ldexp(X, k), y)
    W = model.qk_weights_
    if k > 0:
        train, test = (_qk_bias_features(A, W, 2.0**-k) for A in (X, X_test))
        alpha = np.ldexp(alpha, -6 * k)
    else:
        train, test = (_qk_bias_features(np.ldexp(A, k), W, 1.0) for A in (X, X_test))
    expected = Ridge(alpha=alpha, solver="svd").fit(train, y).predict(test)
    assert_allclose(model.predict(np.ldexp(X_test, k)), expected, rtol=1e-7)


@pytest.mark.parametrize("estimator, degree", REGRESSORS)
def test_extreme_targets_are_exact(estimator, degree, data):
    """Ridge is linear in y: y * 2^400 gives coefficients * 2^400 (squared
    errors of such targets overflow float64 without the rescaling)."""
    X, y, X_test = data
    model = _with_alpha(estimator, [1e-3, 1e-1]).fit(X, np.ldexp(y, 400))
    reference = _with_alpha(estimator, [1e-3, 1e-1]).fit(X, y)
    assert model.alpha_ == reference.alpha_
    assert_allclose(
        model.predict(X_test), np.ldexp(reference.predict(X_test), 400), rtol=1e-9
    )


def test_unit_scale_fits_are_unchanged_by_the_rescaling_path(data):
    """Moderate data take no rescaling at all: exponents are None."""
    X, y, _ = data
    model = RandomFeatureAttentionRegressor(n_heads=20, random_state=0).fit(X, y)
    feature_map, exponents, _ = model._map_for(X)
    assert exponents is None


@pytest.mark.parametrize(
    "estimator, scale, match",
    [
        (RandomFeatureAttentionRegressor(n_heads=20, random_state=0), 1e100, "under"),
        (RandomFeatureAttentionRegressor(n_heads=20, random_state=0), 1e300, "under"),
        (RFMLP(n_features=40, random_state=0), 1e300, "underflow"),
    ],
)
def test_unrepresentable_fits_raise_and_say_why(estimator, scale, match, data):
    """Value vectors of 1e-300 and below (tokens of 1e100 for attention, 1e300
    for the MLP) are errors naming X."""
    X, y, _ = data
    with pytest.raises(ValueError, match=match) as info:
        estimator.fit(X * scale, y)
    assert "X" in str(info.value) and "rescal" in str(info.value)


@pytest.mark.parametrize(
    "estimator, transformer, scale",
    [
        # A fixed penalty 1e300 times the kernel of tiny tokens ("auto" follows
        # the features' scale), and a penalty of 1e300 at unit scale.
        (
            RandomFeatureAttentionRegressor(
                n_heads=20, alpha=1e-3, qk_bias=False, random_state=0
            ),
            AttentionRandomFeatures(n_heads=20, qk_bias=False, random_state=0),
            1e-100,
        ),
        (
            RFMLP(n_features=40, alpha=1e-3, random_state=0),
            MLPRandomFeatures(n_features=40, random_state=0),
            1e-300,
        ),
        (
            RandomFeatureAttentionRegressor(n_heads=20, alpha=1e300, random_state=0),
            AttentionRandomFeatures(n_heads=20, random_state=0),
            1.0,
        ),
        (
            BiasedRFA(n_heads=20, alpha=1e300, random_state=0),
            AttentionRandomFeatures(n_heads=20, qk_mean="identity", random_state=0),
            1.0,
        ),
        (
            RFMLP(n_features=40, alpha=1e300, random_state=0),
            MLPRandomFeatures(n_features=40, random_state=0),
            1.0,
        ),
    ],
)
def test_huge_penalties_give_the_intercept_only_limit_as_ridge(
    estimator, transformer, scale, data
):
    """A penalty far above the kernel leaves the intercept alone, with the
    exact tiny coefficients ``Ridge`` returns on the explicit features (the
    limit ``coef = Phi^T y / alpha`` is exact in float64 there): the same
    coefficients to 1e-12 of the largest (each is a centred sum, whose rounding
    is relative to its terms, not to its value) and the same predictions to
    1e-12 of the targets' scale."""
    X, y, _ = data
    model = estimator.fit(X * scale, y)
    features = transformer.fit_transform(X * scale)
    reference = Ridge(alpha=estimator.alpha).fit(features, y)
    assert np.abs(reference.coef_).max() > 0
    largest = np.abs(reference.coef_).max()
    assert_allclose(model.coef_, reference.coef_, rtol=1e-12, atol=1e-12 * largest)
    assert_allclose(
        model.predict(X * scale),
        reference.predict(features),
        atol=1e-12 * np.abs(y).max(),
    )


@pytest.mark.parametrize("exponent", [-300, -40, 40, 300])
def test_auto_alpha_follows_the_scale_of_the_tokens(exponent, data):
    """alpha="auto" compares penalties in units of the features' scale: the
    MLP features (bias=False) are homogeneous of degree 1, so tokens scaled
    by 2^k give features scaled by 2^k, the same relative grid, the same
    choice, alpha_ scaled by 4^k and the same predictions. Powers of two make
    the rescaling exact; 1e-10 covers the rounding of the two fits' sums,
    which differ only by the order of operations."""
    X, y, _ = data
    reference = RFMLP(n_features=40, random_state=0).fit(X, y)
    model = RFMLP(n_features=40, random_state=0).fit(np.ldexp(X, exponent), y)
    assert model.alpha_ == pytest.approx(np.ldexp(reference.alpha_, 2 * exponent))
    assert_allclose(
        model.predict(np.ldexp(X, exponent)), reference.predict(X), rtol=1e-10
    )


@pytest.mark.parametrize("estimator, degree", REGRESSORS)
def test_large_but_representable_scales_give_the_unit_scale_fit(
    estimator, degree, data
):
    """1e30 tokens (not a power of two): the penalty is then negligible, so the
    fit interpolates like alpha=1e-300 at unit scale; R^2 on the training data
    matches that of the equivalent unit-scale fit to 1e-6."""
    X, y, _ = data
    scale = 1e30
    big = _with_alpha(estimator, 1e-3).fit(X * scale, y)
    small = _with_alpha(estimator, 1e-3 / scale ** (2 * degree)).fit(X, y)
    assert big.score(X * scale, y) == pytest.approx(small.score(X, y), abs=1e-6)


def test_float32_extreme_inputs_fit_exactly_and_transform_raises(data):
    """float32 tokens at 1e20: their cubes overflow float32, the rescaled
    features do not. The fit is then the float64 one to float32 accuracy; the
    transformer cannot return such features in float32 and says so."""
    X, y, X_test = data
    X32 = (X * 1e20).astype(np.float32)
    model = RandomFeatureAttentionRegressor(n_heads=30, random_state=0)
    pred32 = model.fit(X32, y).predict((X_test * 1e20).astype(np.float32))
    pred64 = model.fit(X32.astype(np.float64), y).predict(X_test * 1e20)
    assert np.isfinite(pred32).all()
    assert_allclose(pred32, pred64, rtol=1e-3, atol=1e-3 * np.abs(pred64).max())
    with pytest.raises(ValueError, match="float32"):
        AttentionRandomFeatures(n_heads=5, random_state=0).fit_transform(X32)
    features = MLPRandomFeatures(n_features=5, random_state=0).fit_transform(X32)
    assert features.dtype == np.float32 and np.isfinite(features).all()


@pytest.mark.parametrize(
    "transformer, degree",
    [
        (AttentionRandomFeatures(n_heads=7, **_HOMOGENEOUS), 3),
        (MLPRandomFeatures(n_features=7, random_state=0), 1),
    ],
)
def test_transform_is_exact_row_by_row(transformer, degree, data):
    """Rows at 2^-600, 1 and 2^600 (features within float64) in one call: each
    row's features are the unit-scale row's times 2^(degree k), computed
    without overflow, whatever the other rows hold."""
    X, _, X_test = data
    transformer.fit(X)
    k = np.array([-600, 0, 600] * 7)[: len(X_test)] // degree
    features = transformer.transform(np.ldexp(X_test, k[:, None, None]))
    expected = np.ldexp(transformer.transform(X_test), degree * k[:, None])
    assert_array_equal(features, expected)


def test_qk_bias_transform_is_exact_row_by_row(data):
    """With the constant in the scores, rows at 2^-200, 1 and 2^200 in one
    call: a large row's features are 2^600 times those of the unit row with
    the constants 2^-200, a tiny row's those of the row itself (no rescaling),
    whatever the other rows hold; the explicit NumPy features are the
    reference, to rounding (1e-12 of the row's largest feature)."""
    X, _, X_test = data
    transformer = AttentionRandomFeatures(n_heads=7, random_state=0).fit(X)
    W = transformer.qk_weights_
    k = np.array([-200, 0, 200] * 7)[: len(X_test)]
    features = transformer.transform(np.ldexp(X_test, k[:, None, None]))
    for row, e in enumerate(k):
        x = X_test[row : row + 1]
        if e > 0:
            expected = np.ldexp(_qk_bias_features(x, W, 2.0**-e), 3 * e)
        else:
            expected = _qk_bias_features(np.ldexp(x, e), W, 1.0)
        scale = np.abs(expected).max()
        assert_allclose(features[row], expected[0], rtol=1e-12, atol=1e-12 * scale)


def test_predictions_that_overflow_raise(data):
    """Features of 1e300 times value vectors of 1e20: every row with a positive
    unit (all but a 2^-40 chance per row) overflows."""
    X, y, X_test = data
    model = RFMLP(n_features=40, random_state=0).fit(X, y)
    model.coef_ = model.coef_ * 1e20
    with pytest.raises(ValueError, match="predictions overflow"):
        model.predict(X_test * 1e300)


def test_three_dimensional_targets_are_named(data):
    X, y, _ = data
    with pytest.raises(ValueError, match=r"^y must be 1-D \(n_samples,\) or 2-D"):
        RandomFeatureAttentionRegressor(n_heads=5).fit(X, np.zeros((len(X), 2, 2)))


# -- kernels ---------------------------------------------------------------------------
def _bias_parts(kernel, X, Y, **kwargs):
    """(homogeneous part, bias part) of a kernel with a constant-1 feature."""
    flag = "bias" if kernel is rfmlp_kernel else "value_bias"
    without = kernel(X, Y, **{**kwargs, flag: False})
    return without, kernel(X, Y, **{**kwargs, flag: True}) - without


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel])
@pytest.mark.parametrize("a, b", [(100, 0), (-100, 40), (-150, -150), (90, 60)])
def test_attention_kernels_are_exact_at_extreme_scales(kernel, a, b, data):
    """Without the constant in the scores, K(2^a X, 2^b Y) = 2^(3(a+b)) K_0(X, Y)
    + 2^(2(a+b)) B(X, Y), with K_0 the kernel without value bias and B the
    bias part, computed at unit scale."""
    X, _, Y = data
    homogeneous, bias = _bias_parts(kernel, X[:5], Y[:4], qk_bias=False)
    K = kernel(np.ldexp(X[:5], a), np.ldexp(Y[:4], b), qk_bias=False)
    expected = np.ldexp(homogeneous, 3 * (a + b)) + np.ldexp(bias, 2 * (a + b))
    assert np.isfinite(K).all()
    assert_allclose(K, expected, rtol=1e-10, atol=1e-300)


def _mp_relu_moment(m1, m2, s1, s2, rho):
    """E[relu(U) relu(U')] for jointly Gaussian (U, U') by one quadrature:
    given Z, U = m1 + s1 Z and U' is normal with mean m2 + s2 rho Z and std
    s2 sqrt(1 - rho^2), whose E[relu] is s pdf(m / s) + m cdf(m / s)."""
    mp = pytest.importorskip("mpmath").mp
    r = mp.sqrt(1 - rho**2)
    points = [-m1 / s1, mp.inf]
    if r == 0:  # U' = m2 + s2 Z: a second kink, where it crosses 0
        points.insert(1, max(points[0], -m2 / s2))

    def integrand(z):
        mean, std = m2 + s2 * rho * z, s2 * r
        if std == 0:
            inner = max(mean, 0)
        else:
            inner = std * mp.npdf(mean / std) + mean * mp.ncdf(mean / std)
        return (m1 + s1 * z) * inner * mp.npdf(z)

    return mp.quad(integrand, points)


def _mp_attention_kernel(X, Y, mu):
    """The attention kernel with qk_bias and value_bias in 20-digit arithmetic
    (mpmath numbers, whose range has no limit), on the exact binary values of
    X and Y (no rescaling), by its definition: the covariance
    s^2 <x~_0, y~_0> <x~_i, y~_j>, s^2 = 1/d, the mean mu <x_0, x_i>.

    Returns the kernel (as floats) and ``B`` with ``|K(x, y)| <= B(x) B(y)``:
    ``B(x) = (1/N) sum_i ||[x_i; 1]|| sqrt(m_i^2 + s_i^2)`` (Cauchy-Schwarz,
    ``E[relu(U)^2] <= E[U^2]``), the scale of the terms even where K ~ 0.
    """
    mpmath = pytest.importorskip("mpmath")
    mp = mpmath.mp
    d = X.shape[2]

    def tokens(A):
        return [[[mp.mpf(float(v)) for v in t] + [mp.mpf(1)] for t in a] for a in A]

    def dot(u, v, n=None):
        return mp.fsum(a * b for a, b in zip(u[:n], v[:n], strict=True))

    def std(x, i):
        return mp.sqrt(s2 * dot(x[0], x[0]) * dot(x[i], x[i]))

    def entry(x, y):
        total = mp.mpf(0)
        for i in range(1, len(x)):
            for j in range(1, len(y)):
                sx, sy = std(x, i), std(y, j)
                rho = s2 * dot(x[0], y[0]) * dot(x[i], y[j]) / (sx * sy)
                rho = max(-1, min(1, rho))
                if mu == 0:
                    arccos = mp.sqrt(1 - rho**2) + (mp.pi - mp.acos(rho)) * rho
                    pair = sx * sy * arccos / (2 * mp.pi)
                else:
                    m1, m2 = mu * dot(x[0], x[i], d), mu * dot(y[0], y[j], d)
                    pair = _mp_relu_moment(m1, m2, sx, sy, rho)
                total += (dot(x[i], y[j], d) + 1) * pair
        return total / ((len(x) - 1) * (len(y) - 1))

    def bound(x):
        terms = (
            mp.sqrt(dot(x[i], x[i], d) + 1)
            * mp.sqrt((mu * dot(x[0], x[i], d)) ** 2 + std(x, i) ** 2)
            for i in range(1, len(x))
        )
        return mp.fsum(terms) / (len(x) - 1)

    with mpmath.workdps(20):
        s2 = mp.mpf(1) / d
        X, Y = tokens(X), tokens(Y)
        K = np.array([[float(entry(x, y)) for y in Y] for x in X])
        scale = float(max(bound(x) for x in X) * max(bound(y) for y in Y))
    return K, scale


@pytest.mark.parametrize("kernel, mu", [(rfa_kernel, 0.0), (brfa_kernel, 1.0)])
@pytest.mark.parametrize(
    "a, b", [(100, 0), (-100, 40), (-150, -150), (300, 0), (-600, -600)]
)
def test_qk_bias_kernels_match_extended_precision_at_extreme_scales(
    kernel, mu, a, b, data
):
    """With the constant in the scores the kernels are not homogeneous; at any
    scale they equal the definition evaluated in 20-digit arithmetic (mpmath)
    on the same binary values, to 1e-10 of the scale of the terms (a bound on
    |K| computed there too, beyond float64's range for K(x, x) at 2^300). At
    2^100 the constants are 2^-100 of the tokens and drop out of the
    pre-activations; at 2^-600 the tokens drop out of them and the kernel is
    the constant's."""
    X, _, Y = data
    X, Y = np.ldexp(X[:2], a), np.ldexp(Y[:2], b)
    K = kernel(X, Y)
    expected, scale = _mp_attention_kernel(X, Y, mu)
    assert np.isfinite(K).all()
    assert_allclose(K, expected, rtol=1e-10, atol=1e-10 * scale)


@pytest.mark.parametrize("a, b", [(900, 0), (-900, 100), (500, 500)])
def test_mlp_kernel_is_exact_at_extreme_scales(a, b, data):
    X, _, Y = data
    K = rfmlp_kernel(np.ldexp(X[:5], a), np.ldexp(Y[:4], b))
    assert_allclose(K, np.ldexp(rfmlp_kernel(X[:5], Y[:4]), a + b), rtol=1e-12)
    # With a bias the kernel is not homogeneous; it stays finite, and at large
    # scales it tends to the homogeneous one.
    K_bias = rfmlp_kernel(np.ldexp(X[:5], a), np.ldexp(Y[:4], b), bias=True)
    assert np.isfinite(K_bias).all()


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel, rfmlp_kernel])
def test_kernels_that_overflow_raise(kernel, data):
    X, _, _ = data
    with pytest.raises(ValueError, match="overflow float64"):
        kernel(X[:3] * 1e200)


# -- the attention learner -------------------------------------------------------------
@pytest.fixture
def layer_data(global_random_seed):
    return make_attention_layer_regression(
        n_samples=60,
        n_heads=1,
        n_tokens=3,
        token_dim=2,
        random_state=global_random_seed,
    )


def test_zero_samples_get_scikit_learns_message(layer_data):
    X, Y, _ = layer_data
    with pytest.raises(ValueError, match="0 sample"):
        MultiHeadAttentionLearner(n_heads=1).fit(X[:0], Y[:0])


def test_four_dimensional_targets_are_named(layer_data):
    X, Y, _ = layer_data
    with pytest.raises(ValueError, match=r"^Y must be 3-D"):
        MultiHeadAttentionLearner(n_heads=1).fit(X, Y[..., None])


@pytest.mark.parametrize("k", [0, 300, 510])
def test_softmax_of_huge_scores_is_exact(k, global_random_seed):
    """Scores 2^(2k) times those of X: beyond float64 for k = 510, yet the
    attention is the softmax of the scaled scores, a hard max once the gaps
    times 2^(2k) pass exp's range. The rescaled route equals the direct one
    where both apply (k = 0, forced)."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.standard_normal((20, 4, 3))
    theta = rng.standard_normal((2, 3, 3))
    S = attention_weights(np.ldexp(X, k), theta)
    assert np.isfinite(S).all()
    assert_allclose(S.sum(axis=-1), 1.0, rtol=1e-12)
    if k == 0:
        heads = _layer._Heads(theta, X, np)
        heads.rescale = True
        heads.theta_exponent = 0
        heads.side_scaled = heads.side
        forced = _layer._attention_keys_first(X, X, heads, np)
        direct = _layer._attention_keys_first(X, X, _layer._Heads(theta, X, np), np)
        assert_allclose(forced, direct, rtol=1e-13, atol=1e-300)
    else:
        scores = np.einsum("nad,ide,nbe->niab", X, theta, X)
        top = scores.argmax(axis=-1)
        gaps = np.sort(scores, axis=-1)
        with np.errstate(over="ignore"):  # gaps beyond the float range: inf
            hard = np.ldexp(gaps[..., -1] - gaps[..., -2], 2 * k) > 800
        one_hot = np.eye(4)[top]
        assert_array_equal(S[hard], one_hot[hard])


def test_huge_attention_matrices_and_tokens_give_finite_predictions(layer_data):
    X, Y, _ = layer_data
    model = MultiHeadAttentionLearner(n_heads=1, n_init=1, random_state=0).fit(X, Y)
    model.theta_ = model.theta_ * 1e300
    assert np.isfinite(model.attention_weights(X * 1e100)).all()
    assert np.isfinite(model.predict(X)).all()
    model.values_ = model.values_ * 1e100
    with pytest.raises(ValueError, match="predictions overflow"):
        model.predict(X * 1e250)


@pytest.mark.parametrize("which", ["X", "Y"])
def test_objective_that_overflows_at_the_start_is_an_error(which, layer_data):
    X, Y, _ = layer_data
    X, Y = (X * 1e200, Y) if which == "X" else (X, Y * 1e200)
    with pytest.raises(ValueError, match="not finite at the starting point"):
        MultiHeadAttentionLearner(n_heads=1, n_init=1).fit(X, Y)


def test_convergence_warning_points_at_the_callers_line(layer_data):
    X, Y, _ = layer_data
    model = MultiHeadAttentionLearner(n_heads=1, n_init=1, max_iter=2, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, Y)
    records = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(records) == 1
    assert records[0].filename == __file__


def test_divergence_of_first_order_solvers_is_a_value_error(layer_data):
    X, Y, _ = layer_data
    model = MultiHeadAttentionLearner(
        n_heads=1, n_init=1, solver="gd", learning_rate=1e6, max_iter=50
    )
    with pytest.raises(ValueError, match="learning_rate"):
        model.fit(X, Y)


def test_device_fake_keeps_extreme_scales_exact(cupy, data):
    """The rescaling runs through the array module: on the device a fit on
    2^100 X is the fit on X with the penalty moved by 2^-600, up to rounding
    (the arithmetic is the same up to powers of two)."""
    X, y, X_test = data
    model = RandomFeatureAttentionRegressor(
        n_heads=20, alpha=1e-2, device="cuda", **_HOMOGENEOUS
    )
    scaled = model.fit(np.ldexp(X, 100), y).predict(np.ldexp(X_test, 100))
    model.set_params(alpha=np.ldexp(1e-2, -600))
    assert_allclose(scaled, model.fit(X, y).predict(X_test), rtol=1e-10)


# -- found by the property tests -------------------------------------------------------
@pytest.mark.parametrize("where", ["X", "y"])
def test_complex_input_names_the_argument(where, data):
    X, y, _ = data
    X, y = (X + 1j, y) if where == "X" else (X, y + 1j)
    with pytest.raises(ValueError, match=f"Complex data not supported: {where} "):
        RandomFeatureAttentionRegressor(n_heads=5).fit(X, y)


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel, rfmlp_kernel])
def test_kernels_name_empty_one_dimensional_and_complex_input(kernel):
    with pytest.raises(ValueError, match="token input for X"):
        kernel([])
    with pytest.raises(ValueError, match="Complex data not supported: X"):
        kernel((np.ones((2, 3, 2)) + 1j).tolist())


def test_leave_one_out_needs_two_weighted_samples(data):
    X, y, _ = data
    model = RandomFeatureAttentionRegressor(n_heads=5, alpha=[1e-3, 1.0])
    with pytest.raises(ValueError, match="at least 2 samples of positive weight"):
        model.fit(X[:1], y[:1])
    weights = np.zeros(len(X))
    weights[0] = 1.0
    with pytest.raises(ValueError, match="got 1"):
        model.fit(X, y, sample_weight=weights)
    # Without an intercept one sample's leave-one-out error is defined.
    model.set_params(fit_intercept=False).fit(X[:1], y[:1])
    assert np.isfinite(model.loo_mse_).all()


@pytest.mark.parametrize("exponent", [600, -600])
def test_sample_weights_at_any_scale_give_the_unit_weight_fit(exponent, data):
    """Ridge with weights 2^k w and penalty 2^k alpha is the fit with (w, alpha)."""
    X, y, X_test = data
    weights = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    model = RandomFeatureAttentionRegressor(n_heads=20, alpha=1e-2, random_state=0)
    reference = model.fit(X, y, sample_weight=weights).predict(X_test)
    model.set_params(alpha=np.ldexp(1e-2, exponent))
    scaled = model.fit(X, y, sample_weight=np.ldexp(weights, exponent))
    # The same arithmetic up to powers of two: equal to rounding.
    assert_allclose(scaled.predict(X_test), reference, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "estimator",
    [
        RandomFeatureAttentionRegressor(n_heads=20, random_state=0),
        RFMLP(n_features=40, random_state=0),
    ],
)
# The smallest penalties of alpha="auto" can interpolate these few samples, where
# generalized cross-validation is undefined (and says so).
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_score_is_exact_for_huge_targets(estimator, data):
    """R^2 is scale-free; its sums of squares overflow beyond ~1e154 unless the
    targets are rescaled first (by a power of two, so exactly)."""
    X, y, _ = data
    unit = estimator.fit(X, y).score(X, y)
    huge = estimator.fit(X, np.ldexp(y, 600)).score(X, np.ldexp(y, 600))
    assert huge == pytest.approx(unit, rel=1e-12)


def test_learner_score_is_exact_for_huge_targets(layer_data):
    X, Y, _ = layer_data
    model = MultiHeadAttentionLearner(n_heads=1, n_init=1, random_state=0).fit(X, Y)
    unit = model.score(X, Y)
    model.values_ = np.ldexp(model.values_, 600)
    assert model.score(X, np.ldexp(Y, 600)) == pytest.approx(unit, rel=1e-12)


def test_float32_features_that_would_be_subnormal_raise(data):
    """Tokens of 1e-14 in float32: their cubes (1e-42) are float32 subnormals,
    of few significant bits; transform says so instead of returning them."""
    X, _, _ = data
    transformer = AttentionRandomFeatures(n_heads=5, **_HOMOGENEOUS)
    transformer.fit(X)
    with pytest.raises(ValueError, match="underflow"):
        transformer.transform((X * 1e-14).astype(np.float32))
    assert np.isfinite(transformer.transform((X * 1e-14).astype(np.float64))).all()


@pytest.mark.parametrize("estimator, degree", REGRESSORS)
@pytest.mark.parametrize("solver", ["auto", "primal", "dual"])
@pytest.mark.parametrize("weighted", [False, True])
def test_constant_rows_fit_the_weighted_mean(
    estimator, degree, solver, weighted, global_random_seed
):
    """Rows all equal: the centred features are rounding alone, so with the
    default alpha="auto" (whose grid would otherwise be picked relative to that
    rounding) every route predicts the weighted mean of y, with zero
    coefficients; to 1e-12 of max |y|, the rounding of the mean."""
    rng = np.random.default_rng(global_random_seed)
    X = np.repeat(rng.standard_normal((1, 4, 3)), 20, axis=0)
    y = rng.standard_normal(20)
    weights = rng.uniform(0.5, 2.0, 20) if weighted else None
    model = clone(estimator).set_params(solver=solver)
    model.fit(X, y, sample_weight=weights)
    assert not model.coef_.any()
    assert_allclose(
        model.predict(X[:3]),
        np.average(y, weights=weights),
        rtol=0,
        atol=1e-12 * np.abs(y).max(),
    )


def test_interpolated_samples_have_undetermined_leave_one_out_error():
    """Two samples, one feature and an intercept: every penalty far below the
    kernel interpolates both samples, whose leave-one-out errors are then 0 / 0
    in floating point. They are inf with a warning naming loo_mse_, and alpha_
    is the penalty whose error is determined."""
    X = np.array([[[353.87821267], [841.33697895]], [[338.36756601], [-1334.4330]]])
    y = np.array([0.90535587, 0.44637457])
    model = RandomFeatureAttentionRegressor(
        n_heads=1, alpha=[1.0, 1e30], qk_bias=False, value_bias=False, random_state=0
    )
    with pytest.warns(UndefinedMetricWarning, match="loo_mse_"):
        model.fit(X, y)
    assert np.isinf(model.loo_mse_[0]) and np.isfinite(model.loo_mse_[1])
    assert model.alpha_ == 1e30

"""Random-feature maps and regressors against slow, obvious references.

Every test here draws its data and random weights from ``global_random_seed``.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import roots_jacobi
from sklearn import config_context
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from sklearn_attn import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    MLPRandomFeatures,
    RandomFeatureAttentionRegressor,
)
from sklearn_attn.datasets import make_token_regression
from sklearn_attn.datasets._tokens import _orthogonal_polynomial, _reference_moments

REGRESSORS = [
    (RandomFeatureAttentionRegressor, AttentionRandomFeatures, "n_heads"),
    (BiasedRFA, AttentionRandomFeatures, "n_heads"),
    (RFMLP, MLPRandomFeatures, "n_features"),
]


@pytest.fixture
def tokens(global_random_seed):
    """conftest's ``tokens`` (60 samples, a query and 5 keys in R^4), but drawn
    from ``global_random_seed``."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.standard_normal((60, 6, 4))
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / 5 + 0.1 * rng.standard_normal(60)
    return X, y


def _attention_features_loop(X, W, value_bias, qk_bias=True):
    """phi_m(X) = (1/(N sqrt(M))) sum_i relu(<x~_0, W_m x~_i>) [x_i; 1], by loops,
    with x~ = [x; 1] (``qk_bias``) or x."""
    n, n_tokens, d = X.shape
    M, N = W.shape[0], n_tokens - 1
    width = d + 1 if value_bias else d
    out = np.zeros((n, M * width))
    for s in range(n):
        query = np.append(X[s, 0], 1.0) if qk_bias else X[s, 0]
        for m in range(M):
            acc = np.zeros(width)
            for i in range(1, n_tokens):
                key = np.append(X[s, i], 1.0) if qk_bias else X[s, i]
                value = np.append(X[s, i], 1.0) if value_bias else X[s, i]
                acc += max(query @ W[m] @ key, 0.0) * value
            out[s, m * width : (m + 1) * width] = acc / (N * np.sqrt(M))
    return out


def _mlp_features_loop(X, W):
    n = X.shape[0]
    M = W.shape[0]
    out = np.zeros((n, M))
    for s in range(n):
        u = X[s].ravel()
        if W.shape[1] == u.size + 1:
            u = np.append(u, 1.0)
        for m in range(M):
            out[s, m] = max(W[m] @ u, 0.0) / np.sqrt(M)
    return out


@pytest.mark.parametrize("qk_bias", [True, False])
@pytest.mark.parametrize("value_bias", [True, False])
@pytest.mark.parametrize("qk_mean", ["zero", "identity"])
def test_attention_features_match_loop(
    qk_bias, value_bias, qk_mean, global_random_seed
):
    X = np.random.default_rng(global_random_seed).standard_normal((7, 4, 3))
    transformer = AttentionRandomFeatures(
        n_heads=5,
        qk_mean=qk_mean,
        qk_bias=qk_bias,
        value_bias=value_bias,
        random_state=global_random_seed,
    ).fit(X)
    assert transformer.qk_weights_.shape == (5, 3 + qk_bias, 3 + qk_bias)
    expected = _attention_features_loop(X, transformer.qk_weights_, value_bias, qk_bias)
    assert_allclose(transformer.transform(X), expected, rtol=1e-12, atol=1e-14)
    assert transformer.get_feature_names_out().shape == (expected.shape[1],)


@pytest.mark.parametrize("bias", [True, False])
def test_mlp_features_match_loop(bias, global_random_seed):
    X = np.random.default_rng(global_random_seed).standard_normal((6, 3, 2))
    transformer = MLPRandomFeatures(
        n_features=9, bias=bias, random_state=global_random_seed
    ).fit(X)
    expected = _mlp_features_loop(X, transformer.weights_)
    assert_allclose(transformer.transform(X), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("qk_bias", [True, False])
def test_query_key_weight_laws(qk_bias, global_random_seed):
    """Zero mean with std 1/sqrt(d); BiasedRFA adds mu * I on the d x d block.

    4000 matrices of (d + qk_bias)^2 >= 64,000 N(0, 1/4) entries: the standard
    error of their mean is at most 0.002 and that of their standard deviation
    0.5 / sqrt(2 * 64000) = 0.0014, so the bound 0.01 is 5 and 7 standard
    errors (two-sided tails 6e-7 and 1e-12 per seed).
    """
    d = 4
    X = np.ones((2, 3, d))
    zero = AttentionRandomFeatures(
        n_heads=4000, qk_bias=qk_bias, random_state=global_random_seed
    )
    zero = zero.fit(X).qk_weights_
    assert zero.shape == (4000, d + qk_bias, d + qk_bias)
    assert abs(zero.mean()) < 0.01
    assert abs(zero.std() - 0.5) < 0.01
    biased = BiasedRFA(
        n_heads=4000,
        qk_mean_scale=2.0,
        qk_bias=qk_bias,
        random_state=global_random_seed,
    )
    weights = biased.fit(X, np.arange(2.0)).qk_weights_
    # The same random part, the mean on the d x d block only.
    mean = np.zeros((d + qk_bias, d + qk_bias))
    mean[:d, :d] = 2 * np.eye(d)
    assert_allclose(weights - zero, np.broadcast_to(mean, zero.shape), atol=1e-12)


def test_float32_features_stay_float32(global_random_seed):
    X = np.random.default_rng(global_random_seed).standard_normal((10, 4, 3))
    t64 = AttentionRandomFeatures(n_heads=6, random_state=global_random_seed).fit(X)
    out32 = t64.transform(X.astype(np.float32))
    assert out32.dtype == np.float32
    assert_allclose(out32, t64.transform(X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("Estimator, _, width", REGRESSORS)
def test_flat_and_3d_inputs_agree(Estimator, _, width, tokens, global_random_seed):
    X, y = tokens
    flat = X.reshape(len(X), -1)
    seed = global_random_seed
    model_3d = Estimator(**{width: 30}, random_state=seed).fit(X, y)
    model_2d = Estimator(**{width: 30}, token_dim=X.shape[2], random_state=seed)
    model_2d.fit(flat, y)
    assert_array_equal(model_3d.predict(X), model_2d.predict(flat))
    assert_array_equal(model_2d.predict(X), model_3d.predict(X))


@pytest.mark.parametrize("Estimator", [RandomFeatureAttentionRegressor, BiasedRFA])
def test_attention_is_invariant_to_permuting_keys(
    Estimator, tokens, global_random_seed
):
    X, y = tokens
    model = Estimator(n_heads=40, random_state=global_random_seed).fit(X, y)
    rng = np.random.default_rng(global_random_seed)
    permuted = X.copy()
    for row in permuted:
        row[1:] = row[1:][rng.permutation(X.shape[1] - 1)]
    assert_allclose(model.predict(permuted), model.predict(X), rtol=1e-10, atol=1e-12)
    # ...but not to exchanging the query with a key.
    swapped = X[:, [1, 0, 2, 3, 4, 5]]
    assert not np.allclose(model.predict(swapped), model.predict(X), atol=1e-3)


def test_mlp_is_not_invariant_to_permuting_keys(tokens, global_random_seed):
    X, y = tokens
    model = RFMLP(n_features=200, random_state=global_random_seed).fit(X, y)
    permuted = X[:, [0, 2, 1, 3, 4, 5]]
    assert not np.allclose(model.predict(permuted), model.predict(X), atol=1e-3)


@pytest.mark.parametrize("Estimator, Transformer, width", REGRESSORS)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["primal", "dual"])
def test_regressor_equals_ridge_on_explicit_features(
    Estimator, Transformer, width, fit_intercept, solver, tokens, global_random_seed
):
    """Streaming ridge == sklearn's Ridge on the transformer's features."""
    X, y = tokens
    seed = global_random_seed
    rng = np.random.default_rng([seed, 1])
    weights = rng.uniform(0, 2, size=len(y))
    Y = np.column_stack([y, rng.standard_normal(len(y))])
    params = {width: 8}
    if Estimator is BiasedRFA:
        params["qk_mean"] = "identity"
    model = Estimator(
        **params,
        alpha=0.3,
        fit_intercept=fit_intercept,
        solver=solver,
        random_state=seed,
    ).fit(X, Y, sample_weight=weights)
    features = Transformer(**params, random_state=seed).fit_transform(X)
    ridge = Ridge(alpha=0.3, fit_intercept=fit_intercept).fit(
        features, Y, sample_weight=weights
    )
    assert model.solver_ == solver
    assert_allclose(model.coef_, ridge.coef_, rtol=1e-8, atol=1e-10)
    assert_allclose(model.intercept_, ridge.intercept_, rtol=1e-8, atol=1e-10)
    assert_allclose(model.predict(X), ridge.predict(features), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("solver", ["primal", "dual"])
def test_alpha_zero_is_minimum_norm_least_squares(solver, tokens, global_random_seed):
    X, y = tokens
    seed = global_random_seed
    for n_heads in (3, 40):  # fewer and more features than samples
        model = RandomFeatureAttentionRegressor(
            n_heads=n_heads, alpha=0.0, solver=solver, random_state=seed
        ).fit(X, y)
        features = AttentionRandomFeatures(
            n_heads=n_heads, random_state=seed
        ).fit_transform(X)
        centred = features - features.mean(axis=0)
        coef = np.linalg.pinv(centred) @ (y - y.mean())
        assert_allclose(model.coef_, coef, rtol=1e-6, atol=1e-8)
        assert_allclose(
            model.intercept_, y.mean() - features.mean(axis=0) @ coef, atol=1e-7
        )


@pytest.mark.parametrize("solver", ["primal", "dual"])
@pytest.mark.parametrize("weighted", [False, True])
def test_leave_one_out_matches_brute_force(
    solver, weighted, tokens, global_random_seed
):
    # 40 of the 60 samples, as the brute force refits once per sample and alpha;
    # the primal's 30 features stay fewer than the 39 training samples.
    X, y = tokens
    X, y = X[:40], y[:40]
    seed = global_random_seed
    alphas = [1e-3, 1e-2, 1e-1, 1.0]
    rng = np.random.default_rng([seed, 1])
    weights = rng.uniform(0.5, 2, len(y)) if weighted else None
    model = RandomFeatureAttentionRegressor(
        n_heads=6 if solver == "primal" else 30,
        alpha=alphas,
        solver=solver,
        random_state=seed,
    ).fit(X, y, sample_weight=weights)
    w = np.ones(len(y)) if weights is None else weights
    brute = []
    for alpha in alphas:
        sq = 0.0
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            single = clone(model).set_params(alpha=alpha)
            single.fit(X[keep], y[keep], sample_weight=w[keep])
            sq += w[i] * (y[i] - single.predict(X[i : i + 1])[0]) ** 2
        brute.append(sq / w.sum())
    assert_allclose(model.loo_mse_, brute, rtol=1e-7)
    assert model.alpha_ == alphas[int(np.argmin(brute))]
    assert model.best_score_ == pytest.approx(-min(brute))
    refit = clone(model).set_params(alpha=model.alpha_).fit(X, y, sample_weight=weights)
    assert_allclose(model.predict(X), refit.predict(X), rtol=1e-9, atol=1e-11)


def test_working_memory_does_not_change_results(tokens, global_random_seed):
    X, y = tokens
    model = RandomFeatureAttentionRegressor(n_heads=50, random_state=global_random_seed)
    expected = model.fit(X, y).predict(X)
    # 1 KiB forces blocks of a single head and a single sample.
    with config_context(working_memory=2**-10):
        small = clone(model).fit(X, y)
        assert_allclose(small.predict(X), expected, rtol=1e-9, atol=1e-11)


def test_primal_and_dual_agree(tokens, global_random_seed):
    X, y = tokens
    kwargs = dict(n_heads=20, alpha=0.05, random_state=global_random_seed)
    primal = RandomFeatureAttentionRegressor(solver="primal", **kwargs).fit(X, y)
    dual = RandomFeatureAttentionRegressor(solver="dual", **kwargs).fit(X, y)
    assert_allclose(primal.predict(X), dual.predict(X), rtol=1e-8, atol=1e-10)


def test_pipeline_of_transformer_and_ridge_equals_regressor(tokens, global_random_seed):
    X, y = tokens
    flat = X.reshape(len(X), -1)
    seed = global_random_seed
    pipe = make_pipeline(
        AttentionRandomFeatures(n_heads=25, token_dim=4, random_state=seed),
        Ridge(alpha=0.1),
    ).fit(flat, y)
    model = RandomFeatureAttentionRegressor(n_heads=25, alpha=0.1, random_state=seed)
    model.fit(X, y)
    assert_allclose(pipe.predict(flat), model.predict(X), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("Estimator, _, width", REGRESSORS)
def test_same_random_state_same_result_and_pickle(
    Estimator, _, width, tokens, global_random_seed
):
    X, y = tokens
    seed = global_random_seed
    first = Estimator(**{width: 20}, random_state=seed).fit(X, y)
    second = Estimator(**{width: 20}, random_state=seed).fit(X, y)
    assert_array_equal(first.predict(X), second.predict(X))
    other = Estimator(**{width: 20}, random_state=seed + 1).fit(X, y)
    assert not np.allclose(other.predict(X), first.predict(X))
    loaded = pickle.loads(pickle.dumps(first))
    assert_array_equal(loaded.predict(X), first.predict(X))
    assert "_device_cache" not in pickle.loads(pickle.dumps(first)).__dict__


def test_user_arrays_are_not_modified(tokens, global_random_seed):
    X, y = tokens
    X_before, y_before = X.copy(), y.copy()
    weights = np.linspace(0.5, 1.5, len(y))
    weights_before = weights.copy()
    model = RandomFeatureAttentionRegressor(
        n_heads=10, alpha=[0.1, 1.0], random_state=global_random_seed
    )
    model.fit(X, y, sample_weight=weights).predict(X)
    assert_array_equal(X, X_before)
    assert_array_equal(y, y_before)
    assert_array_equal(weights, weights_before)


def test_learns_a_key_averaged_target(global_random_seed):
    """A sanity check of the model class: RFA learns mean_i <x_0, x_i> / sqrt(d)."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.standard_normal((800, 5, 4))
    X *= 2.0 / np.linalg.norm(X, axis=2, keepdims=True)  # the sphere of radius sqrt(4)
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / 4 / 2.0
    model = RandomFeatureAttentionRegressor(
        n_heads=300, random_state=global_random_seed
    )
    model.fit(X[:600], y[:600])
    error = np.mean((model.predict(X[600:]) - y[600:]) ** 2) / y[600:].var()
    # A well-specified smooth target at n = 600: the relative test error is at
    # most 0.015 over seeds 0-99 (median 0.009), so 0.1 leaves a 7x margin.
    assert error < 0.1


# -- key-averaged targets of a given degree (make_token_regression) ---------------
def _correlation_law(token_dim, n_nodes=40):
    """Nodes and weights of the law of ``t = <x_0, x_i> / sqrt(d)`` (density
    ``(1 - t^2/d)^((d-3)/2)`` on ``[-sqrt(d), sqrt(d)]``): Gauss-Jacobi
    quadrature, exact for polynomials of degree below ``2 n_nodes``."""
    a = (token_dim - 3) / 2
    u, w = roots_jacobi(n_nodes, a, a)
    return np.sqrt(token_dim) * u, w / w.sum()


def _recurrence_coefficient(d, k):
    return 1.0 if k == 1 else d * k * (k + d - 3) / ((2 * k + d - 2) * (2 * k + d - 4))


@pytest.mark.parametrize("token_dim", [2, 3, 4, 8, 16])
def test_gegenbauer_polynomials_are_orthogonal(token_dim):
    """Exact (quadrature) Gram matrix of Q_0..Q_6 under the law of one
    correlation: diagonal b_1 ... b_p, off-diagonal zero to rounding
    (the entries are O(10^3) at d = 16; 1e-12 relative is ~1e4 ulps)."""
    t, w = _correlation_law(token_dim)
    Q = np.array([_orthogonal_polynomial(t, p, token_dim) for p in range(7)])
    gram = (Q * w) @ Q.T
    norms = np.cumprod(
        [1.0] + [_recurrence_coefficient(token_dim, k) for k in range(1, 7)]
    )
    assert_allclose(np.diag(gram), norms, rtol=1e-12)
    scale = np.sqrt(np.outer(norms, norms))
    assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-12 * scale.max())
    # Leading coefficient one: Q_p(t) / t^p -> 1 for large t.
    big = np.array([1e6])
    assert_allclose(
        [_orthogonal_polynomial(big, p, token_dim)[0] / 1e6**p for p in range(1, 7)],
        1.0,
        rtol=1e-9,
    )


def test_gegenbauer_on_one_dimensional_tokens():
    """For d = 1 the correlation is +-1: Q_p vanishes on it for p >= 2, and
    the target is constant (then only centred)."""
    t = np.array([-1.0, 1.0])
    for p in (2, 3, 4):
        assert_allclose(_orthogonal_polynomial(t, p, 1), 0.0, atol=1e-15)
    _, y = make_token_regression(
        20, n_keys=3, token_dim=1, degree=3, polynomial="gegenbauer", random_state=0
    )
    assert_allclose(y, 0.0, atol=1e-12)


def test_gegenbauer_degree_three_closed_form(global_random_seed):
    """Q_3(t) = t^3 - (1 + b_2) t, b_2 = 2 (d - 1) / (d + 2), from the tokens."""
    d, N = 5, 3
    X, f = make_token_regression(
        40,
        n_keys=N,
        token_dim=d,
        degree=3,
        polynomial="gegenbauer",
        standardize=False,
        random_state=global_random_seed,
    )
    t = np.einsum("nd,nkd->nk", X[:, 0], X[:, 1:]) / np.sqrt(d)
    expected = (t**3 - (1 + 2 * (d - 1) / (d + 2)) * t).mean(axis=1)
    assert_allclose(f, expected, rtol=1e-12, atol=1e-13)


def test_degree_two_target_is_the_same_for_both_polynomials(global_random_seed):
    """Q_2(t) = t^2 - 1: after standardisation (on the same reference sample)
    the two targets agree to rounding."""
    kwargs = dict(n_keys=4, token_dim=6, degree=2, random_state=global_random_seed)
    X, power = make_token_regression(50, **kwargs)
    X_g, gegenbauer = make_token_regression(50, polynomial="gegenbauer", **kwargs)
    assert_array_equal(X, X_g)
    assert_allclose(gegenbauer, power, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("polynomial", ["power", "gegenbauer"])
@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("n_keys", [1, 4])
@pytest.mark.parametrize("token_dim", [2, 4, 8])
def test_correlation_targets_are_standardised(polynomial, degree, n_keys, token_dim):
    """The Monte Carlo standardisation constants against the exact moments.

    The N correlations of a sample are independent with the law above (that
    of t given x_0 does not depend on x_0), so the raw target, a mean of N
    copies of P(t), has mean E P(t) and variance Var P(t) / N, and the
    kurtosis 3 + (kappa_P - 3) / N: all exact by quadrature. The constants
    are estimated on a fixed reference sample of 20,000 draws (no seed
    enters): the bounds are 5 standard errors of the mean and of the standard
    deviation (sd * sqrt((kappa - 1) / (4 n))); the worst case over these 36
    settings is 2.1 standard errors of the mean.
    """
    t, w = _correlation_law(token_dim)
    if polynomial == "gegenbauer":
        P = _orthogonal_polynomial(t, degree, token_dim)
    else:
        P = t**degree
    mean = w @ P
    var = w @ (P - mean) ** 2
    kappa = (w @ (P - mean) ** 4) / var**2
    kurtosis = 3 + (kappa - 3) / n_keys
    sd = np.sqrt(var / n_keys)
    n_ref = 20_000
    got_mean, got_sd = _reference_moments(
        "correlation", degree, 1.0, n_keys, token_dim, polynomial
    )
    assert abs(got_mean - mean) <= 5 * sd / np.sqrt(n_ref)
    assert abs(got_sd - sd) <= 5 * sd * np.sqrt((kurtosis - 1) / (4 * n_ref))


def test_polynomial_is_validated():
    with pytest.raises(ValueError, match="polynomial"):
        make_token_regression(10, polynomial="hermite")
    with pytest.raises(ValueError, match="polynomial"):
        make_token_regression(10, polynomial=None)

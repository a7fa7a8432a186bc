"""The streaming ridge core against scikit-learn's Ridge and brute-force LOO."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import Ridge

from sklearn_attn._ridge import ExplicitFeatures, fit_ridge

SHAPES = [(40, 25), (25, 40)]  # more samples than features, and fewer


def _problem(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.5
    Y = rng.standard_normal((n, 2))
    weights = rng.uniform(0, 2, n)
    weights[3] = 0.0  # a zero weight is allowed
    return X, Y, weights


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("mode", ["primal", "dual"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_matches_sklearn_ridge(n, p, mode, fit_intercept, weighted):
    X, Y, weights = _problem(n, p)
    sw = weights if weighted else None
    solution = fit_ridge(
        ExplicitFeatures(X, block_size=7),
        Y,
        [0.7],
        sample_weight=sw,
        fit_intercept=fit_intercept,
        mode=mode,
    )
    ridge = Ridge(alpha=0.7, fit_intercept=fit_intercept).fit(X, Y, sample_weight=sw)
    assert solution.mode == mode
    assert_allclose(solution.coef, ridge.coef_.T, rtol=1e-9, atol=1e-11)
    expected = np.broadcast_to(ridge.intercept_, solution.intercept.shape)
    assert_allclose(solution.intercept, expected, atol=1e-10)


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("mode", ["primal", "dual"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_alpha_zero_is_weighted_minimum_norm_least_squares(n, p, mode, fit_intercept):
    X, Y, weights = _problem(n, p, seed=1)
    solution = fit_ridge(
        ExplicitFeatures(X, block_size=6),
        Y,
        [0.0],
        sample_weight=weights,
        fit_intercept=fit_intercept,
        mode=mode,
    )
    X_c, Y_c = X, Y
    if fit_intercept:
        X_c = X - weights @ X / weights.sum()
        Y_c = Y - weights @ Y / weights.sum()
    root = np.sqrt(weights)[:, None]
    coef = np.linalg.pinv(root * X_c) @ (root * Y_c)
    assert_allclose(solution.coef, coef, rtol=1e-7, atol=1e-8)


def test_single_feature_block_and_sample_block_agree():
    X, Y, weights = _problem(30, 12, seed=2)
    results = [
        fit_ridge(
            ExplicitFeatures(X, block_size=b), Y, [0.1], sample_weight=weights
        ).coef
        for b in (1, 5, 100)
    ]
    assert_allclose(results[0], results[1], rtol=1e-11)
    assert_allclose(results[0], results[2], rtol=1e-11)


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("mode", ["primal", "dual"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_leave_one_out_matches_brute_force(n, p, mode, fit_intercept, weighted):
    X, Y, weights = _problem(n, p, seed=3)
    w = weights if weighted else np.ones(n)
    alphas = [0.05, 0.5, 5.0]
    solution = fit_ridge(
        ExplicitFeatures(X, block_size=9),
        Y,
        alphas,
        sample_weight=w if weighted else None,
        fit_intercept=fit_intercept,
        mode=mode,
    )
    brute = np.zeros((len(alphas), 2))
    for a, alpha in enumerate(alphas):
        for i in range(n):
            keep = np.arange(n) != i
            ridge = Ridge(alpha=alpha, fit_intercept=fit_intercept)
            ridge.fit(X[keep], Y[keep], sample_weight=w[keep])
            brute[a] += w[i] * (Y[i] - ridge.predict(X[i : i + 1])[0]) ** 2
    brute /= w.sum()
    assert_allclose(solution.loo_mse, brute, rtol=1e-8)
    assert solution.alpha_index == int(np.argmin(brute.mean(axis=1)))
    best = Ridge(alpha=alphas[solution.alpha_index], fit_intercept=fit_intercept)
    best.fit(X, Y, sample_weight=w)
    assert_allclose(solution.coef, best.coef_.T, rtol=1e-8, atol=1e-10)


def test_duplicated_samples_in_the_dual():
    """A rank-deficient Gram matrix: Cholesky works for alpha > 0, LOO still exact."""
    X, Y, _ = _problem(10, 30, seed=4)
    X = np.vstack([X, X])
    Y = np.vstack([Y, Y])
    solution = fit_ridge(ExplicitFeatures(X), Y, [0.3], mode="dual")
    ridge = Ridge(alpha=0.3).fit(X, Y)
    assert_allclose(solution.coef, ridge.coef_.T, rtol=1e-9, atol=1e-11)

"""The streaming ridge core against scikit-learn's Ridge and brute-force LOO.

Every test here draws its data (and random weights) from ``global_random_seed``.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import Ridge

from sklearn_attn.random_features._feature_blocks import ExplicitFeatures
from sklearn_attn.random_features._ridge import fit_ridge
from sklearn_attn.random_features._ridge_statistics import RidgeStatistics

SHAPES = [(40, 25), (25, 40)]  # more samples than features, and fewer


def _problem(n, p, seed):
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
def test_matches_sklearn_ridge(n, p, mode, fit_intercept, weighted, global_random_seed):
    X, Y, weights = _problem(n, p, global_random_seed)
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
def test_alpha_zero_is_weighted_minimum_norm_least_squares(
    n, p, mode, fit_intercept, global_random_seed
):
    X, Y, weights = _problem(n, p, global_random_seed)
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


def test_single_feature_block_and_sample_block_agree(global_random_seed):
    X, Y, weights = _problem(30, 12, global_random_seed)
    results = [
        fit_ridge(
            ExplicitFeatures(X, block_size=b), Y, [0.1], sample_weight=weights
        ).coef
        for b in (1, 5, 100)
    ]
    # Blocks only reorder sums: rounding, relative to the largest coefficient for
    # coefficients near zero.
    atol = 1e-11 * np.abs(results[0]).max()
    assert_allclose(results[0], results[1], rtol=1e-11, atol=atol)
    assert_allclose(results[0], results[2], rtol=1e-11, atol=atol)


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("mode", ["primal", "dual"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_leave_one_out_matches_brute_force(
    n, p, mode, fit_intercept, weighted, global_random_seed
):
    X, Y, weights = _problem(n, p, global_random_seed)
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


def test_duplicated_samples_in_the_dual(global_random_seed):
    """A rank-deficient Gram matrix: Cholesky works for alpha > 0, LOO still exact."""
    X, Y, _ = _problem(10, 30, global_random_seed)
    X = np.vstack([X, X])
    Y = np.vstack([Y, Y])
    solution = fit_ridge(ExplicitFeatures(X), Y, [0.3], mode="dual")
    ridge = Ridge(alpha=0.3).fit(X, Y)
    assert_allclose(solution.coef, ridge.coef_.T, rtol=1e-9, atol=1e-11)


def _float32_case(offset, solver, weighted, transformer, make, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 6, 4))
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / 5 + 0.1 * rng.standard_normal(300)
    weights = rng.uniform(0.5, 2.0, 300) if weighted else None
    X32 = (X + offset).astype(np.float32)
    got = make(solver).fit(X32, y, sample_weight=weights).predict(X32)
    # Reference: the same float32 features, solved in float64 throughout.
    features = transformer.fit(X32).transform(X32).astype(np.float64)
    exact = fit_ridge(
        ExplicitFeatures(features),
        y[:, None],
        [1e-3],
        sample_weight=weights,
        mode=solver,
    )
    expected = features @ exact.coef[:, 0] + exact.intercept[0]
    return got, expected


@pytest.mark.parametrize("offset", [0.0, 5.0])
@pytest.mark.parametrize("solver", ["dual", "primal"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("family", ["attention", "mlp"])
@pytest.mark.parametrize("single_precision", [False, True])
def test_float32_fit_has_float64_accuracy(
    monkeypatch, offset, solver, weighted, family, single_precision, global_random_seed
):
    """float32 features give the answer of a float64 solve on those features,
    whether multiplied in float64 (the CPU's default) or in float32 and refined
    (a GPU's default, forced here). Inputs shifted by 5 give features with
    large means (the products see centred features) and, for attention,
    condition numbers near 1e9. The tolerance, 1e-7 of the largest prediction,
    is set from a sweep: over seeds 0-99 the largest error is 2.5e-8 (attention,
    dual, offset 5, alike for both routes: the rounding of a float64 solve at
    that condition number, in the model and in the reference), 4x below it;
    without the offset errors stay below 1.2e-13.
    """
    from sklearn_attn import RFMLP, RandomFeatureAttentionRegressor
    from sklearn_attn._backend import Device

    monkeypatch.setattr(
        Device, "single_precision_products", property(lambda self: single_precision)
    )
    from sklearn_attn.random_features import (
        AttentionRandomFeatures,
        MLPRandomFeatures,
    )

    seed = global_random_seed
    if family == "attention":
        m = 150 if solver == "dual" else 20
        transformer = AttentionRandomFeatures(m, random_state=seed)

        def make(s):
            return RandomFeatureAttentionRegressor(
                n_heads=m, alpha=1e-3, solver=s, random_state=seed
            )
    else:
        m = 600 if solver == "dual" else 100
        transformer = MLPRandomFeatures(m, random_state=seed)

        def make(s):
            return RFMLP(m, alpha=1e-3, solver=s, random_state=seed)

    got, expected = _float32_case(offset, solver, weighted, transformer, make, seed)
    assert_allclose(got, expected, rtol=0, atol=1e-7 * np.abs(expected).max())


@pytest.mark.parametrize("mode", ["dual", "primal"])
def test_float32_refinement_steps_and_float64_fallback(mode, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n, p = (50, 80) if mode == "dual" else (80, 50)
    features = rng.standard_normal((n, p))
    y = rng.standard_normal((n, 1))
    fit64 = fit_ridge(ExplicitFeatures(features), y, [1.0], mode=mode)
    assert fit64.refinement_steps is None  # float64 products: nothing to refine

    class Float32Blocks(ExplicitFeatures):
        def compute(self, rows, cols):
            return np.array(self.features[rows, cols], dtype=np.float32)

    single = features.astype(np.float32).astype(np.float64)
    on_cpu = fit_ridge(Float32Blocks(single), y, [1.0], mode=mode)
    assert on_cpu.refinement_steps is None  # the CPU multiplies float32 in float64
    fit32 = fit_ridge(Float32Blocks(single), y, [1.0], mode=mode, single_precision=True)
    assert 1 <= fit32.refinement_steps <= 3  # well conditioned: fast convergence
    reference = fit_ridge(ExplicitFeatures(single), y, [1.0], mode=mode)
    assert_allclose(fit32.coef, reference.coef, rtol=1e-10, atol=1e-12)
    # Rank-5 features and a tiny alpha (condition number ~1e13): refinement
    # cannot converge, and the matrix is accumulated again from float64
    # products, which is then exactly the float64 computation.
    low_rank = rng.standard_normal((n, 5)) @ rng.standard_normal((5, p))
    low_rank = low_rank.astype(np.float32).astype(np.float64)
    fit_bad = fit_ridge(
        Float32Blocks(low_rank), y, [1e-10], mode=mode, single_precision=True
    )
    assert fit_bad.refinement_steps is None
    reference = fit_ridge(ExplicitFeatures(low_rank), y, [1e-10], mode=mode)
    assert_allclose(fit_bad.coef, reference.coef, rtol=1e-12, atol=1e-14)


# -- one-pass statistics --------------------------------------------------------------


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_statistics_match_sklearn_ridge(
    n, p, fit_intercept, weighted, global_random_seed
):
    X, Y, weights = _problem(n, p, global_random_seed)
    sw = weights if weighted else None
    stats = RidgeStatistics(p, 2)
    for rows in (slice(0, 9), slice(9, 10), slice(10, n)):
        part = None if sw is None else sw[rows]
        stats.update(ExplicitFeatures(X[rows], block_size=4), Y[rows], part)
    solution = stats.solve(0.7, fit_intercept)
    ridge = Ridge(alpha=0.7, fit_intercept=fit_intercept).fit(X, Y, sample_weight=sw)
    assert solution.mode == "primal"
    # As test_matches_sklearn_ridge: the same normal equations, cond < 1e3.
    assert_allclose(solution.coef, ridge.coef_.T, rtol=1e-9, atol=1e-11)
    expected = np.broadcast_to(ridge.intercept_, solution.intercept.shape)
    assert_allclose(solution.intercept, expected, atol=1e-10)


def _brute_force_gcv(X, Y, w, alphas, fit_intercept):
    """``(RSS / W) / (1 - tr(H) / W)^2`` from the explicit hat matrix of the
    weighted problem (rows scaled by ``sqrt(w)``), ``W = sum(w)``; and the
    smallest ``1 - tr(H) / W`` met."""
    n = X.shape[0]
    root = np.sqrt(w)[:, None]
    design = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    design = root * design
    brute = np.zeros((len(alphas), Y.shape[1]))
    smallest = np.inf
    for a, alpha in enumerate(alphas):
        penalty = alpha * np.eye(design.shape[1])
        if fit_intercept:
            penalty[-1, -1] = 0.0
        hat = design @ np.linalg.solve(design.T @ design + penalty, design.T)
        residual = root * Y - hat @ (root * Y)
        remaining = 1 - np.trace(hat) / w.sum()
        smallest = min(smallest, remaining)
        brute[a] = (residual**2).sum(axis=0) / w.sum() / remaining**2
    return brute, smallest


@pytest.mark.parametrize("n, p", SHAPES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_gcv_matches_brute_force(n, p, fit_intercept, weighted, global_random_seed):
    """GCV from the statistics, and from fit_ridge's primal and dual solvers,
    against the explicit hat matrix of the weighted problem:
    ``(RSS / W) / (1 - tr(H) / W)^2``, the weights counting samples as
    repeated rows (``W = sum(w)``).

    Both are float64 computations of well-conditioned quantities: alphas >=
    0.5 against unit-variance features give cond < 1e3, and ``1 - df / W``,
    whose relative rounding is about ``n eps / (1 - df / W)``, stays above 0.01
    (asserted), so 1e-8 relative has a margin of 1e4 over the rounding.
    """
    X, Y, weights = _problem(n, p, global_random_seed)
    w = weights if weighted else np.ones(n)
    sw = w if weighted else None
    # Wide problems: a small alpha nearly interpolates, df approaches n, and
    # 1 - df / W can be negative when the weights sum below n (GCV is then
    # undefined: infinite, see test_gcv_is_infinite_for_an_interpolating_fit).
    alphas = [0.5, 5.0, 50.0] if n > p else [5.0, 50.0, 500.0]
    stats = RidgeStatistics(p, 2).update(ExplicitFeatures(X, block_size=7), Y, sw)
    gcv = stats.gcv_mse(alphas, fit_intercept)
    brute, smallest = _brute_force_gcv(X, Y, w, alphas, fit_intercept)
    assert smallest > 0.01
    assert_allclose(gcv, brute, rtol=1e-8)
    best = stats.solve(alphas, fit_intercept, criterion="gcv")
    assert best.alpha_index == int(np.argmin(brute.mean(axis=1)))
    assert_allclose(best.gcv_mse, gcv)
    for mode in ("primal", "dual"):
        solution = fit_ridge(
            ExplicitFeatures(X, block_size=7),
            Y,
            alphas,
            sample_weight=sw,
            fit_intercept=fit_intercept,
            mode=mode,
            gcv_weight_sum=float(w.sum()),
        )
        assert solution.loo_mse is None
        assert_allclose(solution.gcv_mse, brute, rtol=1e-8)
        assert solution.alpha_index == best.alpha_index
        assert_allclose(solution.coef, best.coef, rtol=1e-8, atol=1e-10)


def test_gcv_is_infinite_where_df_exceeds_the_weight_sum():
    """Weights count samples: ten samples of weight 0.5 are five, against the
    ten degrees of freedom of a near-interpolating fit (more features than
    samples, a vanishing penalty), so ``1 - df / W < 0`` and GCV is infinite
    (undefined); when every alpha is so, the largest (most regularised) is
    chosen, in the statistics and in both solvers."""
    X, Y, _ = _problem(10, 30, 0)
    half = np.full(10, 0.5)
    alphas = [1e-10, 1e-9]
    stats = RidgeStatistics(30, 2).update(ExplicitFeatures(X), Y, half)
    assert np.isinf(stats.gcv_mse(alphas)).all()
    assert stats.solve(alphas, criterion="gcv").alpha_index == 1
    for mode in ("primal", "dual"):
        solution = fit_ridge(
            ExplicitFeatures(X),
            Y,
            alphas,
            sample_weight=half,
            mode=mode,
            gcv_weight_sum=5.0,
        )
        assert np.isinf(solution.gcv_mse).all() and solution.alpha_index == 1


def test_relative_alphas_follow_the_feature_scale(global_random_seed):
    """``relative_alphas`` multiplies the penalties by ``trace(A) / W``, the
    weighted mean squared norm of the centred features, in both solvers and
    in the statistics; scaling the features by ``c`` then scales the chosen
    penalty by ``c^2`` and leaves the predictions as they were (exact in
    algebra; 1e-8 covers float64 rounding of these well-conditioned fits)."""
    n, p = 40, 25
    X, Y, weights = _problem(n, p, global_random_seed)
    centred = X - weights @ X / weights.sum()
    scale = float(weights @ (centred**2).sum(axis=1) / weights.sum())
    alphas = np.array([0.1, 1.0])
    reference = None
    for features in (X, 8.0 * X):
        factor = scale * (features[0, 0] / X[0, 0]) ** 2
        solutions = [
            fit_ridge(
                ExplicitFeatures(features),
                Y,
                alphas,
                sample_weight=weights,
                mode=mode,
                relative_alphas=True,
                gcv_weight_sum=float(weights.sum()),
            )
            for mode in ("primal", "dual")
        ]
        stats = RidgeStatistics(p, 2).update(ExplicitFeatures(features), Y, weights)
        solutions.append(stats.solve(alphas, criterion="gcv", relative=True))
        for solution in solutions:
            assert_allclose(solution.alphas, alphas * factor, rtol=1e-10)
            predictions = features @ solution.coef + solution.intercept
            if reference is None:
                reference = predictions  # primal, unscaled features
            assert_allclose(predictions, reference, rtol=1e-8, atol=1e-10)

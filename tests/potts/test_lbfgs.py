"""The unbounded L-BFGS of the Potts fit, against exact minimisers and SciPy."""

import weakref

import numpy as np
import pytest
import scipy.optimize
from numpy.testing import assert_allclose

from sklearn_attn._lbfgs import minimize_lbfgs


def _quadratic(rng, n=30):
    """A convex quadratic with condition number 100 and its exact minimiser."""
    basis, _ = np.linalg.qr(rng.standard_normal((n, n)))
    hessian = basis @ np.diag(np.geomspace(1.0, 100.0, n)) @ basis.T
    target = rng.standard_normal(n)

    def fun(x):
        d = x - target
        return 0.5 * float(d @ hessian @ d), hessian @ d

    return fun, target


@pytest.mark.parametrize("history_dtype", [np.float64, np.float32])
def test_minimises_a_quadratic(history_dtype, global_random_seed):
    """gtol=1e-9 on a Hessian with eigenvalues >= 1: |x - x*| <= 1e-9 sqrt(n)."""
    rng = np.random.default_rng(global_random_seed)
    fun, target = _quadratic(rng)
    x0 = np.zeros(target.size)
    result = minimize_lbfgs(
        fun, x0, max_iter=500, ftol=0.0, gtol=1e-9, history_dtype=history_dtype
    )
    assert result.status == 0, result.message
    assert_allclose(result.x, target, atol=1e-8)
    assert np.all(x0 == 0)  # the start is not modified


@pytest.mark.parametrize("history_dtype", [np.float64, np.float32])
def test_rosenbrock_like_scipy(history_dtype):
    """A non-convex valley: both reach the minimum at ones to 1e-6."""

    def fun(x):
        return scipy.optimize.rosen(x), scipy.optimize.rosen_der(x)

    x0 = np.full(10, -1.0)
    ours = minimize_lbfgs(
        fun, x0, max_iter=2000, ftol=1e-15, gtol=1e-10, history_dtype=history_dtype
    )
    theirs = scipy.optimize.minimize(
        fun,
        x0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-10},
    )
    assert ours.status == 0, ours.message
    assert_allclose(ours.x, 1.0, atol=1e-6)
    assert_allclose(theirs.x, 1.0, atol=1e-6)


def test_logistic_regression_matches_scipy(global_random_seed):
    """A strictly convex smooth problem: the same optimum value to 1e-10."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.standard_normal((200, 8))
    y = (X @ rng.standard_normal(8) + rng.standard_normal(200) > 0) * 2.0 - 1.0

    def fun(w):
        margins = y * (X @ w)
        loss = np.logaddexp(0.0, -margins).sum() + 0.5 * w @ w
        grad = -X.T @ (y * scipy.special.expit(-margins)) + w
        return loss, grad

    ours = minimize_lbfgs(fun, np.zeros(8), max_iter=500, ftol=0.0, gtol=1e-10)
    theirs = scipy.optimize.minimize(
        fun,
        np.zeros(8),
        jac=True,
        method="L-BFGS-B",
        options={"ftol": 0.0, "gtol": 1e-10},
    )
    assert ours.fun == pytest.approx(theirs.fun, rel=1e-10)
    assert_allclose(ours.x, theirs.x, atol=1e-6)


def test_stops_at_max_iter_and_calls_back(global_random_seed):
    fun, _ = _quadratic(np.random.default_rng(global_random_seed))
    seen = []
    result = minimize_lbfgs(
        fun,
        np.zeros(30),
        max_iter=3,
        ftol=0.0,
        gtol=0.0,
        callback=lambda k, x, value: seen.append((k, value)),
    )
    assert result.status == 1 and result.nit == 3
    assert [k for k, _ in seen] == [1, 2, 3]
    values = [value for _, value in seen]
    assert values == sorted(values, reverse=True)  # every step decreases f
    assert seen[-1][1] == result.fun


def test_one_small_decrease_is_not_convergence():
    """A short step amid steady progress does not stop the run (two in a row do)."""
    values = iter([10.0, 9.0, 8.9999999, 7.0, 6.0, 5.99999999, 5.99999998])

    def fun(x):  # a tiny gradient: Armijo asks for a decrease of only ~1e-10
        return next(values), np.full_like(x, 1e-6)

    result = minimize_lbfgs(fun, np.zeros(2), max_iter=10, ftol=1e-7, gtol=0.0)
    # Relative decreases 0.1, 1e-8 (small), 0.22, 0.14, 2e-9, 2e-9 (two small).
    assert result.status == 0 and result.nit == 6
    assert result.fun == 5.99999998


def test_start_at_the_minimum():
    result = minimize_lbfgs(lambda x: (float(x @ x), 2 * x), np.zeros(4))
    assert result.status == 0 and result.nit == 0 and result.nfev == 1


def test_reports_a_direction_without_decrease():
    """A gradient of the wrong sign: no step decreases f, status 2."""
    result = minimize_lbfgs(lambda x: (float(x @ x), -2 * x), np.ones(3))
    assert result.status == 2
    assert result.nit == 0
    assert_allclose(result.x, 1.0)


def test_non_finite_values_shrink_the_step():
    """Overflow far from the start (inf) is backtracked from, not accepted."""

    def fun(x):
        with np.errstate(over="ignore"):
            value = float(np.exp(x @ x)) - 1.0
        return value, 2 * x * (value + 1.0)

    result = minimize_lbfgs(fun, np.full(3, 0.5), initial_step=1e6, gtol=1e-10)
    # Converged, or at the floor where exp(x . x) - 1 rounds to 0.
    assert result.status in (0, 2), result.message
    assert np.isfinite(result.fun)
    assert_allclose(result.x, 0.0, atol=1e-5)


def test_a_start_made_by_a_function_is_released_at_the_first_step(
    global_random_seed,
):
    """With ``x0`` a function, the run holds the only reference to the start:
    it is gone once the first step is taken, and the run is the same."""
    rng = np.random.default_rng(global_random_seed)
    fun, target = _quadratic(rng)
    start = rng.standard_normal(target.size)
    made = []

    def make_start():
        made.append(weakref.ref(x := start.copy()))
        return x

    alive_at = []

    def watched(x):
        alive_at.append(made[0]() is not None)
        return fun(x)

    by_function = minimize_lbfgs(watched, make_start, max_iter=20, ftol=0, gtol=0)
    by_array = minimize_lbfgs(fun, start, max_iter=20, ftol=0, gtol=0)
    assert len(made) == 1
    # Alive through the first step's evaluations, gone after the step.
    assert alive_at[0] and not alive_at[-1]
    assert made[0]() is None
    assert_allclose(by_function.x, by_array.x, rtol=0, atol=0)

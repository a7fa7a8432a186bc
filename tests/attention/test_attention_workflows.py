"""MultiHeadAttentionLearner in scikit-learn's workflows: string scorers on flattened
targets, sample weights, parallel restarts, early stop at an exact fit, warm starts,
warnings at the caller's line, float32 in and out.

Data and starts are drawn from ``global_random_seed``; each tolerance says why it
holds for every seed in 0-99.
"""

import warnings

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.inspection import permutation_importance
from sklearn.metrics import get_scorer, r2_score
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    cross_val_score,
    cross_validate,
    learning_curve,
)

from sklearn_attn.attention import MultiHeadAttentionLearner
from sklearn_attn.attention._solvers import _exact_fit_threshold
from sklearn_attn.datasets import make_attention_layer_regression

SCORERS = [
    "neg_mean_squared_error",
    "r2",
    "neg_mean_absolute_error",
    "explained_variance",
]


def _data(seed, n_samples=40, n_heads=1, n_tokens=3, token_dim=2, noise=0.05):
    """Planted data; the learner's seed is drawn apart from the data's (the same
    int would make the first start a scaled copy of the planted layer)."""
    data_seed, start_seed = np.random.SeedSequence(seed).generate_state(2)
    X, Y, layer = make_attention_layer_regression(
        n_samples,
        n_heads=n_heads,
        n_tokens=n_tokens,
        token_dim=token_dim,
        noise=noise,
        random_state=int(data_seed),
    )
    return X, Y, int(start_seed)


def _quick(start_seed, **params):
    """A small, fast fit: the workflows are under test, not the optimum."""
    return MultiHeadAttentionLearner(
        **{
            "n_heads": 1,
            "n_init": 1,
            "max_iter": 15,
            "random_state": start_seed,
            **params,
        }
    )


@pytest.fixture
def no_convergence_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _by_hand(scoring, model, X, Y):
    """The scorer's value from predict and the metric, signs as scikit-learn's."""
    scorer = get_scorer(scoring)
    return scorer._sign * scorer._score_func(Y, model.predict(X))


# -- targets in the layout of scikit-learn's metrics -------------------------------


@pytest.mark.parametrize("x_flat", [False, True])
def test_flat_targets_any_x_layout(x_flat, global_random_seed):
    """2-D Y with 3-D or 2-D X: the same fit as 3-D Y (the same numbers in the same
    order: equal to the last bit), predictions in the layout of Y."""
    X, Y, start = _data(global_random_seed)
    n = len(X)
    X_in = X.reshape(n, -1) if x_flat else X
    params = {"token_dim": 2} if x_flat else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        flat = _quick(start, **params).fit(X_in, Y.reshape(n, -1))
        tokens = _quick(start, **params).fit(X_in, Y)
    assert flat.y_ndim_ == 2 and tokens.y_ndim_ == 3
    assert_array_equal(flat.theta_, tokens.theta_)
    assert flat.predict(X_in).shape == (n, 6)
    assert tokens.predict(X_in).shape == (n, 3, 2)
    assert_array_equal(flat.predict(X_in), tokens.predict(X_in).reshape(n, -1))
    # score takes y in either layout.
    assert flat.score(X_in, Y) == flat.score(X_in, Y.reshape(n, -1))


def test_flat_targets_of_the_wrong_width_are_refused(global_random_seed):
    X, Y, start = _data(global_random_seed)
    n = len(X)
    with pytest.raises(ValueError, match=r"or, flattened, \(40, 2\): the output"):
        _quick(start, n_queries=1).fit(X, Y.reshape(n, -1))
    with pytest.raises(ValueError, match=r"Y must have shape \(40, 3, 2\)"):
        _quick(start).fit(X, Y.reshape(n, -1)[:, :4])


@pytest.mark.parametrize("scoring", SCORERS)
def test_string_scorers_in_model_selection(
    scoring, global_random_seed, no_convergence_warnings
):
    """cross_validate, cross_val_score, GridSearchCV and learning_curve with a
    string scorer on 2-D X (token_dim) and 2-D Y give finite scores, each the
    metric of predict on the held-out fold of a fit on the training folds.

    The fits are deterministic (fixed random_state, one process): refitting a
    fold here gives the same model, so the scores agree to rounding (1e-12).
    """
    X, Y, start = _data(global_random_seed)
    n = len(X)
    X, Y = X.reshape(n, -1), Y.reshape(n, -1)
    model = _quick(start, token_dim=2)
    cv = KFold(3)
    folds = list(cv.split(X))

    def fold_scores(estimator, sizes=None):
        scores = []
        for train, test in folds:
            train = train if sizes is None else train[:sizes]
            fitted = clone(estimator).fit(X[train], Y[train])
            scores.append(_by_hand(scoring, fitted, X[test], Y[test]))
        return np.array(scores)

    expected = fold_scores(model)
    result = cross_validate(model, X, Y, cv=cv, scoring=scoring)
    assert np.isfinite(result["test_score"]).all()
    assert_allclose(result["test_score"], expected, rtol=1e-12)
    assert_allclose(
        cross_val_score(model, X, Y, cv=cv, scoring=scoring), expected, rtol=1e-12
    )

    grid = {"alpha": [0.0, 0.1]}
    search = GridSearchCV(model, grid, cv=cv, scoring=scoring).fit(X, Y)
    for i, params in enumerate(search.cv_results_["params"]):
        by_hand = fold_scores(clone(model).set_params(**params))
        got = [search.cv_results_[f"split{j}_test_score"][i] for j in range(3)]
        assert np.isfinite(got).all()
        assert_allclose(got, by_hand, rtol=1e-12)

    sizes, _, test_scores = learning_curve(
        model, X, Y, cv=cv, scoring=scoring, train_sizes=[10, 26], shuffle=False
    )
    assert np.isfinite(test_scores).all()
    for row, size in zip(test_scores, sizes, strict=True):
        assert_allclose(row, fold_scores(model, size), rtol=1e-12)


@pytest.mark.parametrize("scoring", SCORERS)
def test_permutation_importance_on_flat_tokens(
    scoring, global_random_seed, no_convergence_warnings
):
    """permutation_importance on 2-D X (token_dim) and 2-D Y: finite, the baseline
    the metric of predict, and exactly zero for the columns the layer ignores.

    Zeroing row and column 1 of every Theta_i and row 1 of every W_i makes the
    second coordinate of every token invisible: the products that involve it add
    exact zeros, so permuting its columns leaves the predictions, hence the score,
    unchanged to the last bit.
    """
    X, Y, start = _data(global_random_seed, n_heads=2, noise=0.0)
    n = len(X)
    X, Y = X.reshape(n, -1), Y.reshape(n, -1)
    model = _quick(start, n_heads=2, token_dim=2, max_iter=40).fit(X, Y)
    model.theta_[:, 1, :] = model.theta_[:, :, 1] = 0.0
    model.values_[:, 1, :] = 0.0
    result = permutation_importance(
        model, X, Y, scoring=scoring, n_repeats=3, random_state=0
    )
    assert np.isfinite(result.importances).all()
    ignored = np.arange(X.shape[1]) % 2 == 1
    assert_array_equal(result.importances[ignored], 0.0)
    # The predictions depend on the first coordinates: permuting them moves
    # the score.
    assert np.all(result.importances[~ignored] != 0.0)
    scorer = get_scorer(scoring)
    assert scorer(model, X, Y) == pytest.approx(_by_hand(scoring, model, X, Y))


def test_3d_targets_work_with_the_default_score_only(
    global_random_seed, no_convergence_warnings
):
    """scikit-learn's metrics refuse 3-D targets, which the learner cannot change:
    with error_score="raise" the error shows; the default score works."""
    X, Y, start = _data(global_random_seed)
    model = _quick(start)
    cv = KFold(3)
    with pytest.raises(ValueError, match="dim 3"):
        cross_val_score(model, X, Y, cv=cv, scoring="r2", error_score="raise")
    scores = cross_val_score(model, X, Y, cv=cv)
    expected = [
        r2_score(
            Y[test].reshape(len(test), -1),
            clone(model)
            .fit(X[train], Y[train])
            .predict(X[test])
            .reshape(len(test), -1),
        )
        for train, test in cv.split(X)
    ]
    assert_allclose(scores, expected, rtol=1e-12)


# -- sample weights ------------------------------------------------------------------


def _weighted_fit_gap(model, X, Y, sample_weight, X_ref, Y_ref):
    """Relative gap between the predictions of a weighted fit and of a fit on the
    reference data (repeated or dropped rows)."""
    weighted = clone(model).fit(X, Y, sample_weight=sample_weight)
    reference = clone(model).fit(X_ref, Y_ref)
    gap = weighted.predict(X) - reference.predict(X)
    return np.linalg.norm(gap) / np.linalg.norm(reference.predict(X)), weighted


# Integer weights and repeated rows give the same objective up to the order of
# summation (relative 1e-16), so L-BFGS, deterministic, follows the same path from
# the same start and both stop at the same local minimum. The predictions then
# differ by the stopping rule (gradient below tol = 1e-10) amplified by the
# Hessian's conditioning: over seeds 0-99 the median relative gap was 8e-16 and
# the worst 3.8e-8 (repeated rows; 2.0e-8 for dropped rows), against the bound
# 1e-6; one weight off by one or two (a sample counted once instead of twice)
# moved the fit by at least 7e-4 on the same data.
WEIGHT_TOL = 1e-6


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_integer_weights_equal_repeated_rows(n_jobs, global_random_seed):
    X, Y, start = _data(global_random_seed, n_samples=30, noise=0.1)
    rng = np.random.default_rng(global_random_seed)
    sample_weight = rng.integers(1, 4, size=len(X))
    repeat = np.repeat(np.arange(len(X)), sample_weight)
    model = _quick(start, n_init=2, max_iter=500, tol=1e-10, n_jobs=n_jobs)
    gap, weighted = _weighted_fit_gap(model, X, Y, sample_weight, X[repeat], Y[repeat])
    assert gap < WEIGHT_TOL
    # The weighted score is the R^2 of the repeated rows.
    assert weighted.score(X, Y, sample_weight=sample_weight) == pytest.approx(
        weighted.score(X[repeat], Y[repeat]), rel=1e-12
    )


def test_zero_weights_equal_dropped_rows(global_random_seed):
    """Rows of zero weight add exact zeros to the objective: the fit is that of the
    other rows (tolerance as for repeated rows)."""
    X, Y, start = _data(global_random_seed, n_samples=30, noise=0.1)
    rng = np.random.default_rng(global_random_seed)
    sample_weight = (rng.uniform(size=len(X)) < 0.7).astype(float)
    sample_weight[0] = 1.0
    keep = sample_weight > 0
    model = _quick(start, n_init=2, max_iter=500, tol=1e-10)
    gap, _ = _weighted_fit_gap(model, X, Y, sample_weight, X[keep], Y[keep])
    assert gap < WEIGHT_TOL


def test_bad_sample_weight_is_refused(global_random_seed):
    X, Y, start = _data(global_random_seed)
    with pytest.raises(ValueError, match="at least one"):
        _quick(start).fit(X, Y, sample_weight=np.zeros(len(X)))
    with pytest.raises(ValueError, match="Negative values .* `sample_weight`"):
        _quick(start).fit(X, Y, sample_weight=-np.ones(len(X)))
    with pytest.raises(ValueError, match="sample_weight"):
        _quick(start).fit(X, Y, sample_weight=np.ones(len(X) - 1))


# -- parallel restarts and the early stop ---------------------------------------------


# Threads (the default) for both solver families; one run in process workers
# (loky), whose pool takes seconds to start.
@pytest.mark.parametrize(
    "backend, solver",
    [("threading", "lbfgs"), ("threading", "adam"), ("loky", "lbfgs")],
)
def test_parallel_restarts_equal_the_serial_run(
    backend, solver, global_random_seed, no_convergence_warnings
):
    """Every start's seed is fixed before dispatch and its chunks are cut the same
    way in every worker: the same arithmetic, the same fit to the last bit."""
    X, Y, start = _data(global_random_seed, n_samples=50, n_heads=2, noise=0.1)
    params = dict(n_heads=2, n_init=3, max_iter=20, solver=solver, batch_size=16)
    serial = _quick(start, **params).fit(X, Y)
    with parallel_config(backend=backend):
        parallel = _quick(start, n_jobs=2, **params).fit(X, Y)
    assert serial.n_init_run_ == parallel.n_init_run_ == 3  # noisy: no exact fit
    for name in ("theta_", "values_", "init_losses_", "init_n_iter_"):
        assert_array_equal(getattr(parallel, name), getattr(serial, name))
    assert parallel.best_init_ == serial.best_init_


def test_parallel_workers_with_several_threads_equal_the_serial_run(
    global_random_seed, no_convergence_warnings
):
    """With 4 BLAS threads in force the serial fit cuts its chunks for 4 threads,
    and each of 2 parallel starts runs them on 2 threads: the same chunks, the
    same sums, the same fit to the last bit."""
    from threadpoolctl import threadpool_limits

    X, Y, start = _data(global_random_seed, n_samples=50, n_heads=2, noise=0.1)
    params = dict(n_heads=2, n_init=2, max_iter=20)
    with threadpool_limits(4, user_api="blas"):
        serial = _quick(start, **params).fit(X, Y)
        parallel = _quick(start, n_jobs=2, **params).fit(X, Y)
    for name in ("theta_", "values_", "init_losses_"):
        assert_array_equal(getattr(parallel, name), getattr(serial, name))


@pytest.mark.parametrize("n_jobs", [None, 2, 3])
def test_restarts_stop_at_an_exact_fit(n_jobs, global_random_seed):
    """Noiseless planted data at token_dim 8: every L-BFGS start reaches the global
    minimum (no failure in more than 5,000 starts, see test_attention_learner's
    RECOVERY_DIM), under the exact-fit threshold eps sqrt(N q d) = 1.3e-14 in
    relative error. Over seeds 0-99 (three starts each) the worst start reached
    8.1e-16, a factor 15 below. So only the first batch of starts runs, and the
    first start is kept whatever n_jobs."""
    X, Y, start = _data(
        global_random_seed, n_samples=100, n_tokens=4, token_dim=8, noise=0.0
    )
    model = MultiHeadAttentionLearner(1, n_init=4, n_jobs=n_jobs, random_state=start)
    model.fit(X, Y)
    batch = 1 if n_jobs is None else n_jobs
    assert model.n_init_run_ == batch
    assert model.init_losses_.shape == model.init_n_iter_.shape == (batch,)
    assert np.isfinite(model.init_losses_).all()
    assert (model.init_n_iter_ > 0).all()
    assert model.best_init_ == 0
    threshold = _exact_fit_threshold(Y, None, np.float64, 0.0)
    assert model.loss_ <= threshold
    serial = MultiHeadAttentionLearner(1, n_init=4, random_state=start).fit(X, Y)
    assert_array_equal(model.theta_, serial.theta_)


def test_weight_decay_or_noise_run_every_start(global_random_seed):
    """With alpha > 0 an exact fit is not the end (a smaller-norm exact fit has a
    lower objective): every start runs, on the data where alpha = 0 stops after
    one. (With noise no fit is exact: see the parallel test, where all run.)"""
    X, Y, start = _data(
        global_random_seed, n_samples=100, n_tokens=4, token_dim=8, noise=0.0
    )
    kwargs = dict(n_init=3, max_iter=30, random_state=start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        decayed = MultiHeadAttentionLearner(1, alpha=1e-3, **kwargs).fit(X, Y)
    assert decayed.n_init_run_ == 3 and np.isfinite(decayed.init_losses_).all()
    assert _exact_fit_threshold(Y, None, np.float64, 1e-3) == -np.inf


def test_exact_fit_threshold_is_eps_sqrt_size_times_the_energy():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(10, 3, 2))
    energy = 0.5 * np.mean(np.sum(Y**2, axis=(1, 2)))
    eps = np.finfo(np.float64).eps
    assert _exact_fit_threshold(Y, None, np.float64, 0.0) == pytest.approx(
        eps * np.sqrt(60) * energy, rel=1e-14
    )
    # Weights: the weighted energy, and only rows of positive weight count.
    f = np.r_[np.zeros(5), np.full(5, 0.2)]
    weighted = 0.5 * np.mean(np.sum(Y[5:] ** 2, axis=(1, 2)))
    assert _exact_fit_threshold(Y, f, np.float64, 0.0) == pytest.approx(
        eps * np.sqrt(30) * weighted, rel=1e-14
    )
    f32 = np.finfo(np.float32).eps
    assert _exact_fit_threshold(Y, None, np.float32, 0.0) == pytest.approx(
        f32 * np.sqrt(60) * energy, rel=1e-14
    )


# -- warm starts -----------------------------------------------------------------------


def test_warm_start_continues_from_the_fitted_parameters(global_random_seed):
    """A warm fit starts where the last one ended: one start, and its objective
    never rises (L-BFGS decreases it, the values refit minimises it exactly;
    rounding aside, 1e-12 relative). Continuing a cut-short fit goes on down."""
    X, Y, start = _data(global_random_seed, n_samples=60, noise=0.1)
    model = _quick(start, n_init=3, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, Y)
        short = model.loss_
        model.set_params(warm_start=True, max_iter=200)
        model.fit(X, Y)
    assert model.init_losses_.shape == (1,) and model.n_init_run_ == 1
    assert model.loss_ < short
    assert model.loss_curve_[0] <= short * (1 + 1e-12)
    # From a converged fit, a warm fit barely moves.
    longer = model.loss_
    theta = model.theta_.copy()
    model.fit(X, Y)
    assert model.loss_ <= longer * (1 + 1e-12)
    assert model.n_iter_ < 20
    assert_allclose(model.theta_, theta, rtol=1e-3, atol=1e-4)


def test_warm_start_on_an_unfitted_learner_is_a_fit(global_random_seed):
    X, Y, start = _data(global_random_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm = _quick(start, n_init=2, warm_start=True).fit(X, Y)
        cold = _quick(start, n_init=2).fit(X, Y)
    assert_array_equal(warm.theta_, cold.theta_)
    assert warm.init_losses_.shape == (2,)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"n_heads": 2}, r"theta has shape \(1, 2, 2\).*need \(2, 2, 2\)"),
        ({"parametrization": "separate"}, "fitted with parametrization='combined'"),
    ],
)
def test_warm_start_with_other_shapes_is_an_error(
    change, match, global_random_seed, no_convergence_warnings
):
    X, Y, start = _data(global_random_seed)
    model = _quick(start).fit(X, Y)
    model.set_params(warm_start=True, **change)
    with pytest.raises(ValueError, match=match):
        model.fit(X, Y)


def test_warm_start_with_other_token_dim_or_rank_is_an_error(
    global_random_seed, no_convergence_warnings
):
    X, Y, start = _data(global_random_seed)
    model = _quick(start, parametrization="separate", rank=1).fit(X, Y)
    model.set_params(warm_start=True, rank=2)
    with pytest.raises(ValueError, match=r"rank=2 need \(1, 2, 2\)"):
        model.fit(X, Y)
    X3, Y3, _ = _data(global_random_seed, token_dim=3)
    model.set_params(rank=1)
    with pytest.raises(ValueError, match="tokens of dimension 3"):
        model.fit(X3, Y3)
    # Factored fits continue as combined ones: Theta_i = Q_i K_i^T.
    model.set_params(parametrization="combined").fit(X, Y)
    assert model.n_init_run_ == 1


# -- warnings at the caller's line -----------------------------------------------------


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_convergence_warning_points_at_the_callers_line(n_jobs, global_random_seed):
    X, Y, start = _data(global_random_seed)
    model = _quick(start, n_init=2, max_iter=2, n_jobs=n_jobs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, Y)
    records = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(records) == 1
    assert records[0].filename == __file__


def test_convergence_warning_in_cross_validate_points_at_the_callers_line(
    global_random_seed,
):
    X, Y, start = _data(global_random_seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_validate(_quick(start, max_iter=2), X, Y, cv=2)
    records = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert records and all(w.filename == __file__ for w in records)


# -- dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize("y_flat", [False, True])
def test_float32_in_float32_out(y_flat, global_random_seed, no_convergence_warnings):
    """float32 X: float32 predictions and attention weights in either layout; the
    fitted parameters and losses float64, as documented."""
    X, Y, start = _data(global_random_seed)
    n = len(X)
    X32 = X.astype(np.float32)
    Y32 = Y.astype(np.float32).reshape(n, -1) if y_flat else Y.astype(np.float32)
    model = _quick(start).fit(X32, Y32, sample_weight=np.ones(n, dtype=np.float32))
    pred = model.predict(X32)
    assert pred.dtype == np.float32
    assert pred.shape == ((n, 6) if y_flat else (n, 3, 2))
    assert model.attention_weights(X32).dtype == np.float32
    assert model.predict(X).dtype == np.float64
    for name in ("theta_", "values_", "init_losses_"):
        assert getattr(model, name).dtype == np.float64
    assert model.init_n_iter_.dtype == np.int64
    assert isinstance(model.loss_, float)
    assert isinstance(model.score(X32, Y32), float)

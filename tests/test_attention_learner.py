"""MultiHeadAttentionLearner and match_heads: scikit-learn checks, recovery of planted
layers, gradients of the training objective, refit, solvers, bad input."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_attn._backend import Device
from sklearn_attn.attention._layer import forward
from sklearn_attn.attention._learner import (
    MultiHeadAttentionLearner,
    _Objective,
    _Parametrization,
    match_heads,
)
from sklearn_attn.datasets._attention import make_attention_layer_regression

# -- scikit-learn's checks -----------------------------------------------------

# The checks feed 2-D X of many widths with a single target column. token_dim=1
# reads every column as a one-dimensional token and n_queries=1 models the
# output of the first token only, which is one column: the checks' y.
CHECKED = MultiHeadAttentionLearner(
    n_heads=1, n_queries=1, token_dim=1, n_init=1, max_iter=50, random_state=0
)


def _expected_failures(estimator):
    return {
        "check_regressor_multioutput": (
            "the targets are the layer's output tokens; with n_queries=1 and "
            "token_dim=1 that is one column, and the check's 5 independent target "
            "columns are not the output of any token layout"
        ),
    }


@parametrize_with_checks([CHECKED], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        # max_iter=50 keeps the checks fast; not converging is fine there.
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


# -- fixtures ------------------------------------------------------------------


def _planted(
    n_samples=300, n_heads=2, n_tokens=4, token_dim=3, noise=0.0, seed=0, **kwargs
):
    X, Y, layer = make_attention_layer_regression(
        n_samples,
        n_heads=n_heads,
        n_tokens=n_tokens,
        token_dim=token_dim,
        noise=noise,
        random_state=seed,
        **kwargs,
    )
    X_test, Y_test, _ = make_attention_layer_regression(
        1000,
        n_heads=n_heads,
        n_tokens=n_tokens,
        token_dim=token_dim,
        layer=layer,
        random_state=seed + 1,
    )
    return X, Y, X_test, Y_test, layer


def _relative_mse(pred, target):
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))


# -- recovery ------------------------------------------------------------------


@pytest.mark.parametrize("n_heads", [1, 2])
def test_recovers_a_planted_layer(n_heads):
    X, Y, X_test, Y_test, layer = _planted(n_heads=n_heads)
    model = MultiHeadAttentionLearner(n_heads, n_init=2, random_state=0).fit(X, Y)
    # Noiseless and well-specified: the pilots reach 1e-15 to 1e-20 (round-off).
    assert _relative_mse(model.predict(X_test), Y_test) < 1e-10
    matched = match_heads(model.theta_, model.values_, layer.theta, layer.values)
    assert matched.theta_error < 1e-5 and matched.values_error < 1e-5
    assert model.loss_ == pytest.approx(model.init_losses_.min())
    assert model.n_iter_ == len(model.loss_curve_)


def test_separate_parametrization_recovers_and_factors_multiply():
    X, Y, X_test, Y_test, layer = _planted(n_heads=1)
    model = MultiHeadAttentionLearner(
        1, parametrization="separate", n_init=2, random_state=0
    ).fit(X, Y)
    assert model.query_factors_.shape == model.key_factors_.shape == (1, 3, 3)
    assert_allclose(
        model.theta_, model.query_factors_ @ model.key_factors_.transpose(0, 2, 1)
    )
    assert _relative_mse(model.predict(X_test), Y_test) < 1e-10
    low_rank = clone(model).set_params(rank=1, n_init=1).fit(X, Y)
    assert np.linalg.matrix_rank(low_rank.theta_[0]) == 1
    assert low_rank.query_factors_.shape == (1, 3, 1)
    # Switching back drops the factor attributes.
    combined = clone(model).set_params(parametrization="combined").fit(X, Y)
    assert not hasattr(combined, "query_factors_")


def test_too_few_heads_cannot_fit_two_head_data():
    X, Y, X_test, Y_test, _ = _planted(n_heads=2, n_tokens=5, token_dim=4)
    one = MultiHeadAttentionLearner(1, n_init=2, random_state=0).fit(X, Y)
    # A generic second head carries a sizeable share of the output (observed ~0.2).
    assert _relative_mse(one.predict(X_test), Y_test) > 1e-3


def test_grid_search_picks_the_number_of_heads():
    X, Y, *_ = _planted(n_samples=240, n_heads=2, n_tokens=4, token_dim=3)
    search = GridSearchCV(
        MultiHeadAttentionLearner(n_init=1, random_state=0), {"n_heads": [1, 2]}, cv=3
    ).fit(X, Y)
    assert search.best_params_ == {"n_heads": 2}
    assert search.best_score_ > 0.9999


def test_final_values_are_the_exact_refit():
    """With theta_ fixed, values_ minimise the ridge objective: lstsq on the design."""
    X, Y, *_ = _planted(n_samples=80, noise=0.1)
    alpha = 0.01
    model = MultiHeadAttentionLearner(
        2, alpha=alpha, n_init=1, max_iter=30, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, Y)
    n, k, d = X.shape
    m = 2
    design = np.zeros((n * k, m * d))
    for s in range(n):
        for i in range(m):
            scores = X[s] @ model.theta_[i] @ X[s].T
            S = np.exp(scores - scores.max(axis=1, keepdims=True))
            S /= S.sum(axis=1, keepdims=True)
            design[s * k : (s + 1) * k, i * d : (i + 1) * d] = S @ X[s]
    augmented = np.vstack([design, np.sqrt(n * alpha) * np.eye(m * d)])
    target = np.vstack([Y.reshape(n * k, d), np.zeros((m * d, d))])
    expected = np.linalg.lstsq(augmented, target, rcond=None)[0]
    assert_allclose(model.values_.reshape(m * d, d), expected, rtol=1e-8, atol=1e-10)


# -- the training objective ----------------------------------------------------


@pytest.mark.parametrize(
    "kind, rank", [("combined", None), ("separate", 3), ("separate", 2)]
)
def test_objective_gradient_matches_finite_differences(kind, rank):
    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 1.0], size=(6, 4, 3))
    Y = rng.normal(size=(6, 4, 3))
    param = _Parametrization(kind, 2, 3, rank or 3)
    alpha = 0.05
    objective = _Objective(X, Y, param, alpha, Device("cpu"), None)
    w = rng.normal(size=param.size)

    def reference(w):
        theta, values = param.layer(w)
        F = forward(X, theta, values)
        return 0.5 * np.sum((F - Y) ** 2) / len(X) + 0.5 * alpha * w @ w

    loss, grad = objective(w)
    assert loss == pytest.approx(reference(w), rel=1e-13)
    # Central differences at h = 1e-6: truncation and round-off both ~1e-10.
    h = 1e-6
    numeric = np.array(
        [
            (reference(w + h * e) - reference(w - h * e)) / (2 * h)
            for e in np.eye(w.size)
        ]
    )
    assert_allclose(grad, numeric, atol=1e-7 * np.abs(numeric).max())


def test_weight_decay_shrinks_the_parameters():
    X, Y, *_ = _planted(n_samples=100, n_heads=1)
    free = MultiHeadAttentionLearner(1, n_init=1, random_state=0).fit(X, Y)
    decayed = MultiHeadAttentionLearner(1, alpha=0.1, n_init=1, random_state=0).fit(
        X, Y
    )

    # If both are global minima, f(w_a) + a/2 |w_a|^2 <= f(w_0) + a/2 |w_0|^2 and
    # f(w_0) <= f(w_a) give |w_a| <= |w_0| (for the whole vector, not each block).
    def norm(model):
        return np.hypot(np.linalg.norm(model.theta_), np.linalg.norm(model.values_))

    assert norm(decayed) < norm(free)
    assert decayed.score(X, Y) < free.score(X, Y)


@pytest.mark.parametrize(
    "solver, batch_size", [("gd", None), ("adam", None), ("adam", 32)]
)
def test_first_order_solvers_decrease_the_loss(solver, batch_size):
    X, Y, *_ = _planted(n_samples=100, n_heads=1)
    model = MultiHeadAttentionLearner(
        1,
        solver=solver,
        batch_size=batch_size,
        learning_rate=0.05 if solver == "adam" else 0.5,
        max_iter=60,
        n_init=1,
        random_state=0,
    )
    with pytest.warns(ConvergenceWarning, match="max_iter=60"):
        model.fit(X, Y)
    assert model.n_iter_ == 60 == len(model.loss_curve_)
    assert model.loss_curve_[-1] < 0.5 * model.loss_curve_[0]
    # The final refit can only lower the objective.
    assert model.loss_ <= model.loss_curve_[-1] * (1 + 1e-12)


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_first_order_divergence_is_reported():
    X, Y, *_ = _planted(n_samples=50, n_heads=1)
    with pytest.raises(FloatingPointError, match="lower learning_rate"):
        MultiHeadAttentionLearner(
            1, solver="gd", learning_rate=1e6, max_iter=50, n_init=1, random_state=0
        ).fit(X, Y)


def test_lbfgs_reports_non_convergence():
    X, Y, *_ = _planted(n_samples=50, n_heads=1)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        MultiHeadAttentionLearner(1, max_iter=2, n_init=1).fit(X, Y)


# -- API -----------------------------------------------------------------------


def test_flat_and_3d_layouts_agree():
    X, Y, *_ = _planted(n_samples=60, n_heads=1)
    n = len(X)
    model_3d = MultiHeadAttentionLearner(1, n_init=1, random_state=0).fit(X, Y)
    model_2d = MultiHeadAttentionLearner(1, n_init=1, token_dim=3, random_state=0).fit(
        X.reshape(n, -1), Y.reshape(n, -1)
    )
    assert_allclose(model_2d.theta_, model_3d.theta_, rtol=1e-10, atol=1e-12)
    assert model_3d.predict(X).shape == X.shape
    assert model_2d.predict(X.reshape(n, -1)).shape == (n, 12)
    assert model_2d.n_features_in_ == 12
    score = model_2d.score(X.reshape(n, -1), Y.reshape(n, -1))
    assert score == pytest.approx(
        r2_score(Y.reshape(n, -1), model_3d.predict(X).reshape(n, -1)), rel=1e-9
    )
    assert model_3d.score(X, Y) == pytest.approx(score, rel=1e-9)


def test_n_queries_models_the_first_tokens():
    X, Y, X_test, Y_test, layer = _planted(n_heads=1)
    model = MultiHeadAttentionLearner(1, n_queries=2, n_init=1, random_state=0)
    model.fit(X, Y[:, :2])
    assert model.predict(X_test).shape == (1000, 2, 3)
    assert _relative_mse(model.predict(X_test), Y_test[:, :2]) < 1e-10
    assert model.attention_weights(X_test[:5]).shape == (5, 1, 2, 4)
    with pytest.raises(ValueError, match=r"Y must have shape \(300, 2, 3\)"):
        model.fit(X, Y)
    with pytest.raises(
        ValueError, match="n_queries=5 is larger than the number of tokens"
    ):
        model.set_params(n_queries=5).fit(X, Y[:, :2])


def test_attention_weights_are_the_learned_softmax():
    X, Y, *_ = _planted(n_samples=50, n_heads=2)
    model = MultiHeadAttentionLearner(2, n_init=1, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, Y)
    S = model.attention_weights(X[:3])
    scores = X[1] @ model.theta_[1] @ X[1].T
    expected = np.exp(scores - scores.max(axis=1, keepdims=True))
    assert_allclose(S[1, 1], expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)


def test_same_random_state_same_result_and_pickle():
    X, Y, *_ = _planted(n_samples=60, n_heads=2, noise=0.05)
    kwargs = dict(n_init=2, max_iter=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first = MultiHeadAttentionLearner(2, random_state=3, **kwargs).fit(X, Y)
        second = MultiHeadAttentionLearner(2, random_state=3, **kwargs).fit(X, Y)
        other = MultiHeadAttentionLearner(2, random_state=4, **kwargs).fit(X, Y)
    assert_array_equal(first.theta_, second.theta_)
    assert_array_equal(first.predict(X), second.predict(X))
    assert not np.array_equal(first.init_losses_, other.init_losses_)
    loaded = pickle.loads(pickle.dumps(first))
    assert_array_equal(loaded.predict(X), first.predict(X))
    assert "_device_cache" not in loaded.__dict__
    for name in ("theta_", "values_", "init_losses_"):
        assert type(getattr(first, name)) is np.ndarray


def test_float32_input_is_computed_in_float32():
    X, Y, *_ = _planted(n_samples=60, n_heads=1)
    model64 = MultiHeadAttentionLearner(1, n_init=1, random_state=0).fit(X, Y)
    model32 = MultiHeadAttentionLearner(1, n_init=1, random_state=0).fit(
        X.astype(np.float32), Y.astype(np.float32)
    )
    assert model32.predict(X.astype(np.float32)).dtype == np.float32
    assert model32.theta_.dtype == np.float64  # the optimiser's state
    # The planted problem is solved to float32 round-off: |Y| ~ 1 and float32's
    # eps is 1.2e-7; the measured gap is 4e-7, the tolerance 12x that.
    assert_allclose(
        model32.predict(X.astype(np.float32)), model64.predict(X), rtol=0, atol=5e-6
    )


def test_user_arrays_are_not_modified():
    X, Y, *_ = _planted(n_samples=40, n_heads=1)
    X_before, Y_before = X.copy(), Y.copy()
    model = MultiHeadAttentionLearner(1, n_init=1, random_state=0).fit(X, Y)
    model.predict(X)
    model.score(X, Y)
    assert_array_equal(X, X_before)
    assert_array_equal(Y, Y_before)


@pytest.mark.parametrize(
    "params, make_input, error, match",
    [
        ({}, lambda X, Y: (X, Y[:, :, :2]), ValueError, "Y must have the layout of X"),
        (
            {},
            lambda X, Y: (X, Y.reshape(len(Y), -1)),
            ValueError,
            "Y must have the layout of X",
        ),
        ({}, lambda X, Y: (np.where(X > 0, np.nan, X), Y), ValueError, "NaN"),
        (
            {},
            lambda X, Y: (X, np.where(Y > 0, np.nan, Y)),
            ValueError,
            "y contains NaN",
        ),
        (
            {},
            lambda X, Y: (X.reshape(len(X), -1), Y.reshape(len(Y), -1)),
            ValueError,
            "token_dim is None",
        ),
        ({}, lambda X, Y: (X, None), ValueError, "requires y to be passed"),
        ({"n_heads": 0}, lambda X, Y: (X, Y), ValueError, "'n_heads' parameter"),
        (
            {"parametrization": "separate", "rank": 4},
            lambda X, Y: (X, Y),
            ValueError,
            "rank=4 is larger than the token dimension 3",
        ),
        ({"solver": "sgd"}, lambda X, Y: (X, Y), ValueError, "'solver' parameter"),
        (
            {"init_scale": 0.0},
            lambda X, Y: (X, Y),
            ValueError,
            "'init_scale' parameter",
        ),
    ],
)
def test_bad_input(params, make_input, error, match):
    X, Y, *_ = _planted(n_samples=20, n_heads=1)
    X_bad, Y_bad = make_input(X, Y)
    with pytest.raises(error, match=match):
        MultiHeadAttentionLearner(
            **{"n_heads": 1, "n_init": 1, "max_iter": 5, **params}
        ).fit(X_bad, Y_bad)


def test_predict_checks_the_token_layout():
    X, Y, *_ = _planted(n_samples=20, n_heads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MultiHeadAttentionLearner(1, n_init=1, max_iter=5).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])
    with pytest.raises(ValueError, match=r"y must have the layout of X"):
        model.score(X, Y[:, :2])


# -- match_heads ---------------------------------------------------------------


def test_match_heads_undoes_a_permutation_and_measures_errors():
    rng = np.random.default_rng(0)
    theta, values = rng.normal(size=(2, 3, 4, 4))
    order = [2, 0, 1]
    noisy = theta[order] + 1e-3 * rng.normal(size=theta.shape)
    result = match_heads(noisy, values[order], theta, values)
    assert_array_equal(result.assignment, [1, 2, 0])
    expected = [
        np.linalg.norm(noisy[result.assignment[j]] - theta[j])
        / np.linalg.norm(theta[j])
        for j in range(3)
    ]
    assert_allclose(result.theta_errors, expected, rtol=1e-12)
    assert_allclose(result.values_errors, 0.0, atol=1e-15)
    stacked = np.linalg.norm(noisy[result.assignment] - theta) / np.linalg.norm(theta)
    assert result.theta_error == pytest.approx(stacked, rel=1e-12)


def test_match_heads_with_fewer_learned_heads():
    rng = np.random.default_rng(1)
    theta, values = rng.normal(size=(2, 2, 3, 3))
    result = match_heads(theta[1:], values[1:], theta, values)
    assert_array_equal(result.assignment, [-1, 0])
    assert np.isnan(result.theta_errors[0]) and result.theta_errors[1] == 0.0
    # The unmatched head counts in full.
    expected = np.linalg.norm(theta[0]) / np.linalg.norm(theta)
    assert result.theta_error == pytest.approx(expected, rel=1e-12)
    with pytest.raises(
        ValueError, match=r"theta_hat must have shape \(n_heads, d, d\)"
    ):
        match_heads(theta[0], values, theta, values)
    with pytest.raises(ValueError, match="dimension"):
        match_heads(theta[:, :2, :2], values[:, :2, :2], theta, values)


# -- GPU -----------------------------------------------------------------------


def test_uniform_linear_baseline_is_least_squares_over_all_tokens():
    from sklearn_attn.experiments._mha import _uniform_linear

    X, Y, X_test, _, _ = _planted(n_samples=40, n_heads=2)
    n, k, d = X.shape
    # Reference: every token a is a row [mean_b x_b] -> Y_a, all n k rows.
    rows = np.repeat(X.mean(axis=1), k, axis=0)
    B = np.linalg.lstsq(rows, Y.reshape(n * k, d), rcond=None)[0]
    expected = np.repeat((X_test.mean(axis=1) @ B)[:, None, :], k, axis=1)
    assert_allclose(_uniform_linear(X, Y, X_test), expected, rtol=1e-10, atol=1e-12)


def test_reproduction_runs_on_a_tiny_setting(tmp_path):
    pytest.importorskip("matplotlib")
    from sklearn_attn.experiments._mha import format_mha_summary, plot_mha, run_mha

    lines = []
    config = {"n_heads": (1, 2), "train_sizes": (16, 48), "n_test": 200}
    tables = run_mha(quick=True, n_seeds=1, progress=lines.append, config=config)
    rows = tables["learning_curves"]
    assert {(r["model"], r["m"]) for r in rows} == {
        ("learner", 1),
        ("uniform_linear", 1),
        ("learner", 2),
        ("too_few_heads", 2),
        ("uniform_linear", 2),
    }
    learner = [r for r in rows if r["model"] == "learner" and r["n_train"] == 48]
    assert all(r["success_rate"] == 1.0 for r in learner)
    assert lines[0].startswith("[mha]") and "done" in lines[-1]
    assert "too_few_heads" in format_mha_summary(tables)
    plot_mha(tables, tmp_path / "mha.png")
    assert (tmp_path / "mha.png").stat().st_size > 0

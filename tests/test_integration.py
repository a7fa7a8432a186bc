"""The estimators inside scikit-learn's model-selection tools and joblib backends."""

import numpy as np
import pytest
from joblib import parallel_backend
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    cross_val_score,
    learning_curve,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_attn import RFMLP, BiasedRFA, RandomFeatureAttentionRegressor
from sklearn_attn.datasets import make_token_regression

GRID = {"alpha": [1e-3, 1e-1], "n_heads": [10, 40]}


@pytest.fixture(scope="module")
def data():
    return make_token_regression(n_samples=120, n_keys=4, token_dim=3, random_state=0)


def _search(n_jobs=None):
    return GridSearchCV(
        RandomFeatureAttentionRegressor(random_state=0),
        GRID,
        cv=KFold(3),
        n_jobs=n_jobs,
    )


def test_grid_search_on_3d_input(data):
    X, y = data
    search = _search().fit(X, y)
    assert set(search.best_params_) == {"alpha", "n_heads"}
    assert search.cv_results_["mean_test_score"].shape == (4,)
    assert search.predict(X).shape == y.shape


def test_grid_search_under_loky_matches_sequential(data):
    X, y = data
    sequential = _search().fit(X, y)
    with parallel_backend("loky", n_jobs=2):
        parallel = _search(n_jobs=2).fit(X, y)
    assert_allclose(
        parallel.cv_results_["mean_test_score"],
        sequential.cv_results_["mean_test_score"],
    )


def test_grid_search_on_a_dask_cluster(data):
    distributed = pytest.importorskip("distributed")
    X, y = data
    sequential = _search().fit(X, y)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster),
        parallel_backend("dask"),
    ):
        on_dask = _search(n_jobs=-1).fit(X, y)
    assert_allclose(
        on_dask.cv_results_["mean_test_score"],
        sequential.cv_results_["mean_test_score"],
    )


@pytest.mark.parametrize(
    "estimator",
    [RandomFeatureAttentionRegressor(n_heads=30), BiasedRFA(n_heads=30), RFMLP(120)],
)
def test_cross_val_score_and_learning_curve(estimator, data):
    X, y = data
    estimator = clone(estimator).set_params(random_state=0)
    scores = cross_val_score(estimator, X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    sizes, train, test = learning_curve(estimator, X, y, train_sizes=[20, 40, 80], cv=3)
    assert_array_equal(sizes, [20, 40, 80])
    assert train.shape == test.shape == (3, 3)


def test_pipeline_on_flattened_input(data):
    X, y = data
    flat = X.reshape(len(X), -1)
    pipe = make_pipeline(
        StandardScaler(),
        RandomFeatureAttentionRegressor(n_heads=20, token_dim=3, random_state=0),
    )
    scores = cross_val_score(pipe, flat, y, cv=3)
    assert np.all(np.isfinite(scores))
    search = GridSearchCV(
        pipe, {"randomfeatureattentionregressor__alpha": [0.01, 1.0]}, cv=3
    )
    assert search.fit(flat, y).predict(flat).shape == y.shape


def test_clone_keeps_parameters_and_drops_fit():
    model = BiasedRFA(n_heads=7, alpha=[0.1, 1.0], qk_mean_scale=2.0, random_state=3)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "coef_")

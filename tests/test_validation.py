"""Bad input gets a clear error that names the parameter."""

import numpy as np
import pytest

from sklearn_attn import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    RandomFeatureAttentionRegressor,
)

ATTENTION = [RandomFeatureAttentionRegressor, BiasedRFA]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((20, 4, 3)), rng.standard_normal(20)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("Estimator", ATTENTION + [RFMLP])
def test_nan_or_inf_is_rejected(Estimator, bad, data):
    X, y = data
    X = X.copy()
    X[3, 1, 2] = bad
    model = Estimator(n_features=5) if Estimator is RFMLP else Estimator(n_heads=5)
    with pytest.raises(ValueError, match="NaN|infinity"):
        model.fit(X, y)


@pytest.mark.parametrize("Estimator", ATTENTION + [AttentionRandomFeatures])
def test_2d_input_needs_token_dim(Estimator, data):
    X, y = data
    with pytest.raises(ValueError, match="token_dim is None"):
        Estimator(n_heads=5).fit(X.reshape(20, -1), y)


def test_width_must_divide_by_token_dim(data):
    X, y = data
    with pytest.raises(ValueError, match="not divisible by token_dim=5"):
        RandomFeatureAttentionRegressor(n_heads=5, token_dim=5).fit(
            X.reshape(20, -1), y
        )


def test_3d_input_must_match_token_dim(data):
    X, y = data
    with pytest.raises(ValueError, match="dimension 3 .* token_dim=4"):
        RandomFeatureAttentionRegressor(n_heads=5, token_dim=4).fit(X, y)


@pytest.mark.parametrize("Estimator", ATTENTION)
def test_fewer_than_two_tokens(Estimator, data):
    X, y = data
    with pytest.raises(ValueError, match="at least 2 tokens are needed"):
        Estimator(n_heads=5).fit(X[:, :1], y)


@pytest.mark.parametrize("alpha", [-1.0, [0.1, -1.0], [0.0, 1.0]])
def test_bad_alpha(alpha, data):
    X, y = data
    with pytest.raises(ValueError, match="alpha"):
        RandomFeatureAttentionRegressor(n_heads=5, alpha=alpha).fit(X, y)


def test_bad_alpha_shape(data):
    X, y = data
    with pytest.raises(ValueError, match="alpha must be"):
        RandomFeatureAttentionRegressor(n_heads=5, alpha=[[0.1, 1.0]]).fit(X, y)


@pytest.mark.parametrize(
    "weights, match",
    [
        (-np.ones(20), "Negative values in data passed to .*sample_weight"),
        (np.zeros(20), "(S|s)ample.weight.* (at least one|non-zero)"),
        (np.ones(19), "sample_weight.shape == \\(19,\\), expected \\(20,\\)"),
    ],
)
def test_bad_sample_weight(weights, match, data):
    X, y = data
    with pytest.raises(ValueError, match=match):
        RandomFeatureAttentionRegressor(n_heads=5).fit(X, y, sample_weight=weights)


def test_predict_with_another_token_layout(data):
    X, y = data
    model = RandomFeatureAttentionRegressor(n_heads=5).fit(X, y)
    # Same number of flattened features (12), different tokens: 6 tokens of 2.
    with pytest.raises(ValueError, match="fitted on 4 token\\(s\\) of dimension 3"):
        model.predict(X.reshape(20, 6, 2))
    with pytest.raises(ValueError, match="X has 9 features"):
        model.predict(X[:, :3])


@pytest.mark.parametrize(
    "param, value", [("n_heads", 0), ("qk_mean", "one"), ("solver", "qr")]
)
def test_bad_parameters(param, value, data):
    X, y = data
    with pytest.raises(ValueError, match=f"'{param}' parameter"):
        RandomFeatureAttentionRegressor(**{param: value}).fit(X, y)


def test_4d_input_is_rejected(data):
    X, y = data
    with pytest.raises(ValueError, match="2-D or 3-D token input"):
        RandomFeatureAttentionRegressor(n_heads=5).fit(X[..., None], y)

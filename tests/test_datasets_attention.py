"""Tests for make_attention_layer_regression (planted multi-head attention layers).

Statistical checks are seeded, so they are deterministic; each tolerance is stated
as a multiple of the Monte Carlo standard error.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn.attention._layer import AttentionLayer
from sklearn_attn.datasets._attention import make_attention_layer_regression


def _forward_loop(X, theta, values):
    n, k, d = X.shape
    F = np.zeros_like(X)
    for s in range(n):
        for i in range(len(theta)):
            scores = X[s] @ theta[i] @ X[s].T
            S = np.exp(scores - scores.max(axis=1, keepdims=True))
            S /= S.sum(axis=1, keepdims=True)
            F[s] += S @ X[s] @ values[i]
    return F


@pytest.mark.parametrize("inputs", ["boolean", "gaussian"])
def test_shapes_and_labels_are_the_planted_layer(inputs):
    X, Y, layer = make_attention_layer_regression(
        n_samples=9, n_heads=3, n_tokens=5, token_dim=4, inputs=inputs, random_state=0
    )
    assert X.shape == Y.shape == (9, 5, 4)
    assert X.dtype == Y.dtype == np.float64
    assert isinstance(layer, AttentionLayer)
    assert layer.theta.shape == layer.values.shape == (3, 4, 4)
    assert_allclose(
        Y, _forward_loop(X, layer.theta, layer.values), rtol=1e-12, atol=1e-13
    )
    if inputs == "boolean":
        assert set(np.unique(X)) == {-1.0, 1.0}


def test_parameter_laws():
    d = 6
    _, _, layer = make_attention_layer_regression(
        n_samples=1, n_heads=400, token_dim=d, theta_norm=3.0, random_state=0
    )
    assert_allclose(
        np.linalg.norm(layer.theta.reshape(400, -1), axis=1), 3.0, rtol=1e-12
    )
    # 14,400 N(0, 1/6) entries: the std's standard error is ~0.0024 (5 sigma: 0.012).
    assert abs(layer.values.std() - 1 / np.sqrt(d)) < 0.012
    assert abs(layer.values.mean()) < 0.02  # mean's standard error 0.0034
    _, _, layer = make_attention_layer_regression(
        n_samples=1, n_heads=400, token_dim=d, values_std=2.0, random_state=0
    )
    assert abs(layer.values.std() - 2.0) < 0.06


def test_input_laws_and_noise():
    X, _, _ = make_attention_layer_regression(
        n_samples=2000, n_tokens=4, token_dim=5, random_state=0
    )
    # 40,000 Rademacher entries: mean standard error 0.005 (5 sigma: 0.025).
    assert abs(X.mean()) < 0.025
    Xg, _, _ = make_attention_layer_regression(
        n_samples=2000, n_tokens=4, token_dim=5, inputs="gaussian", random_state=0
    )
    assert abs(Xg.mean()) < 0.025 and abs(Xg.std() - 1) < 0.02
    _, clean, layer = make_attention_layer_regression(
        n_samples=2000, n_tokens=4, token_dim=5, random_state=1
    )
    X1, noisy, _ = make_attention_layer_regression(
        n_samples=2000, n_tokens=4, token_dim=5, noise=0.5, layer=layer, random_state=1
    )
    residual = noisy - _forward_loop(X1, layer.theta, layer.values)
    # 40,000 N(0, 0.25) draws: the std's standard error is 0.0018.
    assert abs(residual.std() - 0.5) < 0.01


def test_layer_reuse_and_seeds():
    kwargs = dict(n_samples=20, n_heads=2, n_tokens=3, token_dim=4)
    X, Y, layer = make_attention_layer_regression(**kwargs, random_state=0)
    X2, Y2, layer2 = make_attention_layer_regression(**kwargs, random_state=0)
    assert_array_equal(X, X2)
    assert_array_equal(Y, Y2)
    assert_array_equal(layer.theta, layer2.theta)
    X3, Y3, layer3 = make_attention_layer_regression(
        **kwargs, layer=layer, random_state=5
    )
    assert_array_equal(layer3.theta, layer.theta)
    assert not np.array_equal(X3, X)
    assert_allclose(
        Y3, _forward_loop(X3, layer.theta, layer.values), rtol=1e-12, atol=1e-13
    )
    # A mapping works too, and the user's arrays are copied, not aliased.
    as_dict = {"theta": layer.theta.copy(), "values": layer.values.copy()}
    _, _, layer4 = make_attention_layer_regression(
        **kwargs, layer=as_dict, random_state=5
    )
    layer4.theta[...] = 0
    assert np.all(as_dict["theta"] == layer.theta)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_samples": 0}, ValueError, "n_samples must be an int >= 1"),
        ({"n_heads": 0}, ValueError, "n_heads must be an int >= 1"),
        ({"n_tokens": 2.5}, TypeError, "n_tokens must be an int"),
        ({"token_dim": 0}, ValueError, "token_dim must be an int >= 1"),
        ({"inputs": "uniform"}, ValueError, "inputs must be one of"),
        ({"theta_norm": -1.0}, ValueError, "theta_norm must be a non-negative"),
        ({"values_std": np.nan}, ValueError, "values_std must be a non-negative"),
        ({"noise": "high"}, TypeError, "noise must be a non-negative real"),
        ({"layer": [1, 2]}, TypeError, "layer must be an AttentionLayer"),
        (
            {"layer": {"theta": np.zeros((2, 3, 3)), "values": np.zeros((2, 3, 3))}},
            ValueError,
            r"layer.theta must have shape \(n_heads, token_dim, token_dim\)",
        ),
        (
            {
                "layer": {
                    "theta": np.full((2, 8, 8), np.nan),
                    "values": np.zeros((2, 8, 8)),
                }
            },
            ValueError,
            "layer.theta contains NaN",
        ),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_attention_layer_regression(**kwargs)

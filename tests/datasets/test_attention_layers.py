"""Tests for make_attention_layer_regression (planted multi-head attention layers).

Every test draws from ``global_random_seed``. The statistical checks compare a
sample mean or standard deviation with its expectation at 6 Monte Carlo standard
errors: a two-sided normal tail of 2e-9, so the 7 such checks fail for some seed
in 0-99 with probability below 2e-6.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn.attention import AttentionLayer
from sklearn_attn.datasets import make_attention_layer_regression


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
def test_shapes_and_labels_are_the_planted_layer(inputs, global_random_seed):
    X, Y, layer = make_attention_layer_regression(
        n_samples=9,
        n_heads=3,
        n_tokens=5,
        token_dim=4,
        inputs=inputs,
        random_state=global_random_seed,
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


def _standard_errors(sigma, size):
    """Standard errors of the mean and of the standard deviation of ``size``
    i.i.d. N(mu, sigma^2) draws: sigma / sqrt(n) and sigma / sqrt(2 n)."""
    return sigma / np.sqrt(size), sigma / np.sqrt(2 * size)


def test_parameter_laws(global_random_seed):
    d, m = 6, 400
    _, _, layer = make_attention_layer_regression(
        n_samples=1,
        n_heads=m,
        token_dim=d,
        theta_norm=3.0,
        random_state=global_random_seed,
    )
    assert_allclose(np.linalg.norm(layer.theta.reshape(m, -1), axis=1), 3.0, rtol=1e-12)
    # 14,400 N(0, 1/6) entries: standard errors 0.0034 (mean) and 0.0024 (std).
    # Worst of seeds 0-99: 2.6 and 2.9 standard errors.
    sigma = 1 / np.sqrt(d)
    se_mean, se_std = _standard_errors(sigma, layer.values.size)
    assert abs(layer.values.mean()) < 6 * se_mean
    assert abs(layer.values.std() - sigma) < 6 * se_std
    _, _, layer = make_attention_layer_regression(
        n_samples=1,
        n_heads=m,
        token_dim=d,
        values_std=2.0,
        random_state=global_random_seed,
    )
    # Standard error 0.012; worst of seeds 0-99: 2.9 standard errors (the same
    # normal draws as above, scaled).
    _, se_std = _standard_errors(2.0, layer.values.size)
    assert abs(layer.values.std() - 2.0) < 6 * se_std


def test_input_laws_and_noise(global_random_seed):
    shape = dict(n_samples=2000, n_tokens=4, token_dim=5)
    X, _, layer = make_attention_layer_regression(
        **shape, random_state=global_random_seed
    )
    # 40,000 Rademacher entries (variance 1): the mean's standard error is 0.005.
    se_mean, se_std = _standard_errors(1.0, X.size)
    assert abs(X.mean()) < 6 * se_mean
    Xg, _, _ = make_attention_layer_regression(
        **shape, inputs="gaussian", random_state=global_random_seed
    )
    # Standard errors 0.005 (mean) and 0.0035 (std).
    assert abs(Xg.mean()) < 6 * se_mean and abs(Xg.std() - 1) < 6 * se_std
    X1, noisy, _ = make_attention_layer_regression(
        **shape, noise=0.5, layer=layer, random_state=global_random_seed + 1
    )
    residual = noisy - _forward_loop(X1, layer.theta, layer.values)
    # 40,000 N(0, 0.25) draws: the std's standard error is 0.0018. Worst of seeds
    # 0-99 over these four checks: 2.8 standard errors.
    _, se_std = _standard_errors(0.5, residual.size)
    assert abs(residual.std() - 0.5) < 6 * se_std


def test_layer_reuse_and_seeds(global_random_seed):
    kwargs = dict(n_samples=20, n_heads=2, n_tokens=3, token_dim=4)
    seed, other = global_random_seed, global_random_seed + 1
    X, Y, layer = make_attention_layer_regression(**kwargs, random_state=seed)
    X2, Y2, layer2 = make_attention_layer_regression(**kwargs, random_state=seed)
    assert_array_equal(X, X2)
    assert_array_equal(Y, Y2)
    assert_array_equal(layer.theta, layer2.theta)
    X3, Y3, layer3 = make_attention_layer_regression(
        **kwargs, layer=layer, random_state=other
    )
    assert_array_equal(layer3.theta, layer.theta)
    assert not np.array_equal(X3, X)
    assert_allclose(
        Y3, _forward_loop(X3, layer.theta, layer.values), rtol=1e-12, atol=1e-13
    )
    # A mapping works too, and the user's arrays are copied, not aliased.
    as_dict = {"theta": layer.theta.copy(), "values": layer.values.copy()}
    _, _, layer4 = make_attention_layer_regression(
        **kwargs, layer=as_dict, random_state=other
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


@pytest.mark.parametrize("distance", [0.0, 0.01, 0.3, 1.0, 3.9, 4.0])
def test_head_distance_places_the_second_head_exactly(distance, global_random_seed):
    """Theta_2 at Frobenius distance delta from Theta_1, both of norm theta_norm.

    Exact up to rounding: the construction is cos/sin of one angle in an
    orthonormal pair, so norms and distance hold to a few ulps (bound 1e-12).
    """
    kwargs = dict(n_samples=7, n_heads=3, n_tokens=4, token_dim=5, theta_norm=2.0)
    seed = global_random_seed
    X, Y, layer = make_attention_layer_regression(
        **kwargs, head_distance=distance, random_state=seed
    )
    X0, _, layer0 = make_attention_layer_regression(**kwargs, random_state=seed)
    theta, theta0 = layer.theta, layer0.theta
    assert_allclose(np.linalg.norm(theta.reshape(3, -1), axis=1), 2.0, rtol=1e-12)
    assert_allclose(np.linalg.norm(theta[1] - theta[0]), distance, atol=1e-12)
    # Nothing else changes, and no random numbers are drawn for it.
    assert_array_equal(X, X0)
    assert_array_equal(layer.values, layer0.values)
    assert_array_equal(theta[[0, 2]], theta0[[0, 2]])
    assert_allclose(
        Y, _forward_loop(X, layer.theta, layer.values), rtol=1e-12, atol=1e-13
    )
    # On the great circle from Theta_1 towards the drawn Theta_2: in their
    # plane, on the drawn head's side of Theta_1.
    basis = np.stack([theta0[0].ravel(), theta0[1].ravel()], axis=1)
    coef, *_ = np.linalg.lstsq(basis, theta[1].ravel(), rcond=None)
    assert_allclose(basis @ coef, theta[1].ravel(), atol=1e-12)
    if 0 < distance < 4.0:
        assert coef[1] > 0


def test_head_distance_sweeps_one_head_continuously(global_random_seed):
    kwargs = dict(n_samples=3, n_heads=2, n_tokens=3, token_dim=4)
    thetas = [
        make_attention_layer_regression(
            **kwargs, head_distance=d, random_state=global_random_seed
        )[2].theta[1]
        for d in (0.1, 0.1 + 1e-6)
    ]
    # d(Theta_2)/d(delta) has unit norm (arc length ~ chord for small delta).
    assert_allclose(np.linalg.norm(thetas[1] - thetas[0]), 1e-6, rtol=1e-3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"head_distance": -0.1}, "head_distance must be a non-negative"),
        ({"head_distance": np.inf}, "head_distance must be a non-negative"),
        ({"head_distance": 4.5}, "head_distance must be at most 2 \\* theta_norm"),
        ({"head_distance": 0.1, "n_heads": 1}, "head_distance needs n_heads >= 2"),
        ({"head_distance": 0.1, "token_dim": 1}, "head_distance needs n_heads >= 2"),
        (
            {
                "head_distance": 0.1,
                "layer": {"theta": np.zeros((2, 8, 8)), "values": np.zeros((2, 8, 8))},
            },
            "head_distance plants the layer",
        ),
    ],
)
def test_bad_head_distance(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_attention_layer_regression(**kwargs)

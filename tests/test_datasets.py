"""Tests for sklearn_attn.datasets.make_token_regression.

Statistical checks are seeded, so they are deterministic; each tolerance is stated
next to the check as a multiple of the Monte Carlo standard error.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn.datasets import make_token_regression
from sklearn_attn.datasets._tokens import (
    _N_REFERENCE,
    _reference_moments,
    _token_targets,
)

NAMED_TARGETS = [
    ("correlation", {"degree": 1}),
    ("correlation", {"degree": 2}),
    ("correlation", {"degree": 3}),
    ("value", {"degree": 1}),
    ("value", {"degree": 2}),
    ("gamma", {"gamma": 0.5}),
    ("gamma", {"gamma": 2.0}),
]


def _cos_target(query, keys):
    """A callable target: cos of the correlation, per key."""
    d = query.shape[1]
    return np.cos(np.einsum("nd,nkd->nk", query, keys) / np.sqrt(d))


def _loop_target(X, target, degree=1, gamma=1.0):
    """Slow reference: explicit python loops over samples and keys."""
    n_samples, n_tokens, d = X.shape
    out = np.empty(n_samples)
    for s in range(n_samples):
        x0 = X[s, 0]
        total = 0.0
        for i in range(1, n_tokens):
            xi = X[s, i]
            t = sum(float(x0[k]) * float(xi[k]) for k in range(d)) / np.sqrt(d)
            if target == "correlation":
                total += t**degree
            elif target == "value":
                total += t**degree * float(xi[0])
            elif target == "gamma":
                total += np.exp(gamma * t)
            else:
                total += float(np.cos(t))
        out[s] = total / (n_tokens - 1)
    return out


@pytest.mark.parametrize("target, kwargs", NAMED_TARGETS + [(_cos_target, {})])
def test_shapes_and_dtype(target, kwargs):
    X, y = make_token_regression(
        n_samples=7, n_keys=3, token_dim=5, target=target, random_state=0, **kwargs
    )
    assert X.shape == (7, 4, 5)
    assert y.shape == (7,)
    assert X.dtype == np.float64
    assert y.dtype == np.float64
    assert np.all(np.isfinite(y))


def test_single_sample_single_key():
    X, y = make_token_regression(n_samples=1, n_keys=1, token_dim=1, random_state=0)
    assert X.shape == (1, 2, 1)
    assert y.shape == (1,)


@pytest.mark.parametrize("token_dim", [1, 3, 16])
def test_tokens_on_sphere(token_dim):
    X, _ = make_token_regression(
        n_samples=50, n_keys=4, token_dim=token_dim, random_state=0
    )
    assert_allclose(np.linalg.norm(X, axis=-1), np.sqrt(token_dim), rtol=1e-12)


def test_tokens_isotropic():
    # Uniform on S^{d-1}(sqrt(d)): E[x] = 0 and E[x x^T] = I. With 2000 * 3 tokens
    # the standard error of each entry is about 1/sqrt(6000) = 0.013; atol 0.08
    # is > 5 standard errors.
    X, _ = make_token_regression(n_samples=2000, n_keys=2, token_dim=4, random_state=0)
    tokens = X.reshape(-1, 4)
    assert_allclose(tokens.mean(axis=0), 0, atol=0.08)
    assert_allclose(tokens.T @ tokens / len(tokens), np.eye(4), atol=0.08)


def test_reproducible_with_random_state():
    kwargs = dict(n_samples=20, n_keys=3, token_dim=4, noise=0.3)
    X1, y1 = make_token_regression(random_state=42, **kwargs)
    X2, y2 = make_token_regression(random_state=42, **kwargs)
    X3, y3 = make_token_regression(random_state=43, **kwargs)
    assert_array_equal(X1, X2)
    assert_array_equal(y1, y2)
    assert not np.allclose(X1, X3)
    assert not np.allclose(y1, y3)
    # A RandomState instance is accepted and advanced.
    rng = np.random.RandomState(42)
    X4, y4 = make_token_regression(random_state=rng, **kwargs)
    assert_array_equal(X1, X4)
    assert_array_equal(y1, y4)
    X5, _ = make_token_regression(random_state=rng, **kwargs)
    assert not np.allclose(X4, X5)


@pytest.mark.parametrize("target, kwargs", NAMED_TARGETS + [(_cos_target, {})])
def test_targets_invariant_to_key_permutation(target, kwargs):
    X, y = make_token_regression(
        n_samples=30, n_keys=5, token_dim=4, target=target, random_state=0, **kwargs
    )
    raw = _token_targets(X, target, **kwargs)
    rng = np.random.RandomState(1)
    X_perm = X.copy()
    for s in range(len(X)):  # a different permutation of the keys for each sample
        X_perm[s, 1:] = X[s, 1 + rng.permutation(5)]
    assert not np.allclose(X_perm, X)
    assert_allclose(_token_targets(X_perm, target, **kwargs), raw, rtol=1e-12)
    # The query, however, is not interchangeable with a key.
    X_swap = X.copy()
    X_swap[:, [0, 1]] = X[:, [1, 0]]
    assert not np.allclose(_token_targets(X_swap, target, **kwargs), raw)


@pytest.mark.parametrize("target, kwargs", NAMED_TARGETS + [(_cos_target, {})])
def test_target_formulas_against_loop(target, kwargs):
    X, y = make_token_regression(
        n_samples=4,
        n_keys=3,
        token_dim=3,
        target=target,
        standardize=False,
        random_state=0,
        **kwargs,
    )
    expected = _loop_target(X, target, **kwargs)
    assert_allclose(_token_targets(X, target, **kwargs), expected, rtol=1e-12)
    assert_allclose(y, expected, rtol=1e-12)


def test_value_target_degree_one_formula():
    # "value" with degree=1 is mean_i <x_0, x_i> x_i[0] / sqrt(d).
    X, y = make_token_regression(
        n_samples=5,
        n_keys=3,
        token_dim=4,
        target="value",
        standardize=False,
        random_state=0,
    )
    q, K = X[:, 0], X[:, 1:]
    expected = np.mean((K @ q[:, :, None])[..., 0] * K[:, :, 0], axis=1) / 2.0
    assert_allclose(y, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "target, kwargs",
    [
        ("correlation", {"degree": 1}),
        ("correlation", {"degree": 2}),
        ("value", {"degree": 2}),
        ("gamma", {"gamma": 2.0}),
        (_cos_target, {}),
    ],
)
def test_standardized_mean_and_variance(target, kwargs):
    # Seeded. Both the 20,000 reference draws behind the constants and the 20,000
    # draws here have Monte Carlo errors ~ 1/sqrt(20000) = 0.007 on the mean and
    # ~ sqrt((kurtosis - 1) / 20000) ~ 0.01-0.02 on the variance, so 0.05 is
    # several standard errors even for the heavier-tailed targets.
    _, y = make_token_regression(
        n_samples=20000,
        n_keys=8,
        token_dim=8,
        target=target,
        random_state=0,
        **kwargs,
    )
    assert abs(y.mean()) < 0.05
    assert abs(y.var() - 1) < 0.05


def test_standardize_after_averaging_over_keys():
    # Without standardisation the degree-1 target has variance 1 / n_keys; with it,
    # the variance is about 1 for any n_keys (same tolerances as above).
    for n_keys in (1, 16):
        _, raw = make_token_regression(
            n_samples=20000, n_keys=n_keys, standardize=False, random_state=1
        )
        _, y = make_token_regression(n_samples=20000, n_keys=n_keys, random_state=1)
        assert abs(raw.var() * n_keys - 1) < 0.05
        assert abs(y.var() - 1) < 0.05


def test_same_scaling_for_different_seeds():
    kwargs = dict(n_keys=4, token_dim=6, target="correlation", degree=2)
    mean, std = _reference_moments("correlation", 2, 1.0, 4, 6)
    for seed in (0, 1, 2):
        X, y = make_token_regression(n_samples=200, random_state=seed, **kwargs)
        raw = _token_targets(X, "correlation", degree=2)
        assert_allclose(y, (raw - mean) / std, rtol=1e-12, atol=1e-12)
    # Constants do not depend on the size of the data set either.
    X, y = make_token_regression(n_samples=3, random_state=5, **kwargs)
    assert_allclose(y, (_token_targets(X, "correlation", degree=2) - mean) / std)


def test_reference_moments_match_closed_forms():
    # t_i = <x_0, x_i>/sqrt(d) have mean 0, variance 1, and E[t^4] = 3d/(d+2); the
    # t_i (and t_i^2) are uncorrelated across keys. Hence mean(t) has mean 0 and
    # std 1/sqrt(N); mean(t^2) has mean 1 and variance (2d-2)/((d+2)N). With 20,000
    # reference draws the relative Monte Carlo error of a std is < 1%; 4% is safe.
    d, N = 8, 4
    mean, std = _reference_moments("correlation", 1, 1.0, N, d)
    assert abs(mean) < 0.04 * std
    assert_allclose(std, 1 / np.sqrt(N), rtol=0.04)
    mean, std = _reference_moments("correlation", 2, 1.0, N, d)
    assert_allclose(mean, 1.0, rtol=0.04)
    assert_allclose(std, np.sqrt((2 * d - 2) / ((d + 2) * N)), rtol=0.04)


def test_reference_moments_fixed_and_cached():
    first = _reference_moments("gamma", 1, 1.5, 3, 5)
    # The gamma target ignores degree: same cache entry, same numbers.
    assert _reference_moments("gamma", 4, 1.5, 3, 5) == first
    assert _reference_moments("gamma", 1, 1.5, 3, 5) == first

    # A callable uses the same fixed reference sample (not cached): a callable
    # equal to a named target gives the same constants.
    def square(query, keys):
        return (keys @ query[:, :, None])[..., 0] ** 2 / query.shape[1]

    named = _reference_moments("correlation", 2, 1.0, 3, 5)
    assert_allclose(_reference_moments(square, 1, 1.0, 3, 5), named, rtol=1e-10)
    assert _N_REFERENCE >= 10_000


def test_callable_not_cached_across_callables():
    def scaled(c):
        return lambda query, keys: c * keys[:, :, 0]

    m1, s1 = _reference_moments(scaled(1.0), 1, 1.0, 2, 3)
    m2, s2 = _reference_moments(scaled(2.0), 1, 1.0, 2, 3)
    assert_allclose(s2, 2 * s1)


def test_callable_target_bad_shape():
    with pytest.raises(ValueError, match="callable target must return"):
        make_token_regression(
            n_samples=5, target=lambda q, k: k.sum(axis=(1, 2)), random_state=0
        )


def test_noise_adds_variance():
    # Same seed: the tokens are drawn before the noise, so X is identical and
    # y_noisy - y_clean = noise * eps. With n = 20000 the relative standard error
    # of a sample variance of Gaussian noise is sqrt(2/n) = 1%; rtol 5% is 5 s.e.
    noise = 0.5
    kwargs = dict(n_samples=20000, n_keys=4, token_dim=4, random_state=0)
    X0, y0 = make_token_regression(noise=0.0, **kwargs)
    X1, y1 = make_token_regression(noise=noise, **kwargs)
    assert_array_equal(X0, X1)
    assert_allclose(np.var(y1 - y0), noise**2, rtol=0.05)
    assert_allclose(np.var(y1), 1 + noise**2, rtol=0.05)


def test_standardize_false_returns_raw_target():
    X, y = make_token_regression(
        n_samples=10, target="gamma", gamma=1.0, standardize=False, random_state=0
    )
    assert_allclose(y, _token_targets(X, "gamma", gamma=1.0))
    assert np.all(y > 0)


def test_constant_target_is_only_centred():
    # token_dim=1: tokens are +-1, so t_i^2 = 1 and the target is constant.
    _, y = make_token_regression(
        n_samples=10, n_keys=3, token_dim=1, degree=2, random_state=0
    )
    assert_allclose(y, 0.0, atol=1e-12)


def test_overflowing_gamma_target_raises():
    with pytest.raises(ValueError, match="overflows"):
        make_token_regression(n_samples=5, target="gamma", gamma=1000.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": -3}, "n_samples"),
        ({"n_keys": 0}, "n_keys"),
        ({"token_dim": 0}, "token_dim"),
        ({"target": "softmax"}, r"target must be one of \['correlation'"),
        ({"degree": 0}, "degree"),
        ({"degree": -1}, "degree"),
        ({"target": "gamma", "gamma": 0.0}, "gamma"),
        ({"target": "gamma", "gamma": -1.0}, "gamma"),
        ({"gamma": float("nan")}, "gamma"),
        ({"noise": -0.1}, "noise"),
        ({"noise": float("inf")}, "noise"),
    ],
)
def test_bad_values_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_token_regression(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 10.0}, "n_samples"),
        ({"n_samples": "10"}, "n_samples"),
        ({"n_samples": True}, "n_samples"),
        ({"n_keys": 2.5}, "n_keys"),
        ({"token_dim": None}, "token_dim"),
        ({"target": 3}, "target"),
        ({"degree": 1.5}, "degree"),
        ({"degree": 2.0}, "degree"),
        ({"gamma": "1"}, "gamma"),
        ({"noise": None}, "noise"),
        ({"standardize": "yes"}, "standardize"),
    ],
)
def test_bad_types_raise_type_error(kwargs, match):
    with pytest.raises(TypeError, match=match):
        make_token_regression(**kwargs)


def test_numpy_integer_parameters_accepted():
    X, y = make_token_regression(
        n_samples=np.int64(4),
        n_keys=np.int32(2),
        token_dim=np.int64(3),
        degree=np.int64(2),
        gamma=np.float32(1.0),
        noise=np.float64(0.1),
        random_state=0,
    )
    assert X.shape == (4, 3, 3)
    assert y.shape == (4,)


def test_bad_random_state():
    with pytest.raises(ValueError, match="RandomState"):
        make_token_regression(random_state="seed")

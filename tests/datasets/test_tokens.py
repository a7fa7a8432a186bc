"""Tests for sklearn_attn.datasets.make_token_regression.

Tests on random data draw it from ``global_random_seed``. A statistical check
bounds a sample mean or variance by ``_N_SE = 6`` of its standard errors (a
two-sided normal tail of 2e-9, so that the ~2,000 comparisons of a sweep over
seeds 0-99 fail with probability < 1e-5).
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

_N_SE = 6


def _standard_errors(y):
    """CLT standard errors of the sample mean and the sample variance of ``y``.

    That of the variance is estimated from the spread of the squared deviations,
    so it accounts for the kurtosis of heavy-tailed targets.
    """
    n = len(y)
    return y.std() / np.sqrt(n), np.sqrt(np.var((y - y.mean()) ** 2) / n)


# The standardisation constants are themselves estimated on _N_REFERENCE draws
# independent of the sample: a standardised sample of n draws differs from mean
# 0 and variance 1 by two independent errors, sqrt(1 + n / _N_REFERENCE) times
# the sample's own standard error.
def _with_reference_error(se, n):
    return se * np.sqrt(1 + n / _N_REFERENCE)


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
def test_tokens_on_sphere(token_dim, global_random_seed):
    X, _ = make_token_regression(
        n_samples=50, n_keys=4, token_dim=token_dim, random_state=global_random_seed
    )
    assert_allclose(np.linalg.norm(X, axis=-1), np.sqrt(token_dim), rtol=1e-12)


def test_tokens_isotropic(global_random_seed):
    # Uniform on S^{d-1}(sqrt(d)), d = 4: E[x] = 0 and E[x x^T] = I, with
    # Var(x_j) = 1, Var(x_j^2) = E[x_j^4] - 1 = 3d / (d + 2) - 1 = 1 and
    # Var(x_j x_k) = d / (d + 2) = 2/3. With 2000 * 3 independent tokens the
    # standard errors are 1 / sqrt(6000) = 0.013 and 0.011, so atol 0.08 is 6.2
    # standard errors or more (two-sided tail 6e-10; 14 entries x 100 seeds).
    X, _ = make_token_regression(
        n_samples=2000, n_keys=2, token_dim=4, random_state=global_random_seed
    )
    tokens = X.reshape(-1, 4)
    assert_allclose(tokens.mean(axis=0), 0, atol=0.08)
    assert_allclose(tokens.T @ tokens / len(tokens), np.eye(4), atol=0.08)


def test_reproducible_with_random_state(global_random_seed):
    kwargs = dict(n_samples=20, n_keys=3, token_dim=4, noise=0.3)
    seed = global_random_seed
    X1, y1 = make_token_regression(random_state=seed, **kwargs)
    X2, y2 = make_token_regression(random_state=seed, **kwargs)
    X3, y3 = make_token_regression(random_state=seed + 1, **kwargs)
    assert_array_equal(X1, X2)
    assert_array_equal(y1, y2)
    assert not np.allclose(X1, X3)
    assert not np.allclose(y1, y3)
    # A RandomState instance is accepted and advanced.
    rng = np.random.RandomState(seed)
    X4, y4 = make_token_regression(random_state=rng, **kwargs)
    assert_array_equal(X1, X4)
    assert_array_equal(y1, y4)
    X5, _ = make_token_regression(random_state=rng, **kwargs)
    assert not np.allclose(X4, X5)


@pytest.mark.parametrize("target, kwargs", NAMED_TARGETS + [(_cos_target, {})])
def test_targets_invariant_to_key_permutation(target, kwargs, global_random_seed):
    X, y = make_token_regression(
        n_samples=30,
        n_keys=5,
        token_dim=4,
        target=target,
        random_state=global_random_seed,
        **kwargs,
    )
    raw = _token_targets(X, target, **kwargs)
    rng = np.random.default_rng(global_random_seed)
    X_perm = X.copy()
    for s in range(len(X)):  # a different permutation of the keys for each sample
        X_perm[s, 1:] = X[s, 1 + rng.permutation(5)]
    assert not np.allclose(X_perm, X)
    # Only the order of the key sum changes: rounding, relative to the largest
    # target for targets that nearly cancel (e.g. a mean of signed correlations).
    assert_allclose(
        _token_targets(X_perm, target, **kwargs),
        raw,
        rtol=1e-12,
        atol=1e-12 * np.abs(raw).max(),
    )
    # The query, however, is not interchangeable with a key.
    X_swap = X.copy()
    X_swap[:, [0, 1]] = X[:, [1, 0]]
    assert not np.allclose(_token_targets(X_swap, target, **kwargs), raw)


@pytest.mark.parametrize("target, kwargs", NAMED_TARGETS + [(_cos_target, {})])
def test_target_formulas_against_loop(target, kwargs, global_random_seed):
    X, y = make_token_regression(
        n_samples=4,
        n_keys=3,
        token_dim=3,
        target=target,
        standardize=False,
        random_state=global_random_seed,
        **kwargs,
    )
    expected = _loop_target(X, target, **kwargs)
    assert_allclose(_token_targets(X, target, **kwargs), expected, rtol=1e-12)
    assert_allclose(y, expected, rtol=1e-12)


def test_value_target_degree_one_formula(global_random_seed):
    # "value" with degree=1 is mean_i <x_0, x_i> x_i[0] / sqrt(d).
    X, y = make_token_regression(
        n_samples=5,
        n_keys=3,
        token_dim=4,
        target="value",
        standardize=False,
        random_state=global_random_seed,
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
def test_standardized_mean_and_variance(target, kwargs, global_random_seed):
    # The standard errors, reference included, are ~0.01 on the mean and
    # 0.014-0.027 on the variance (kurtosis 2.9-8.4), so the bounds are about 0.06
    # and 0.08-0.19 (estimated from each sample; over seeds 0-99 every statistic
    # stays below 0.44 of its bound). Measured against 2,000,000 draws, the
    # reference constants themselves are off by at most 1.1 of their standard
    # errors here.
    _, y = make_token_regression(
        n_samples=20000,
        n_keys=8,
        token_dim=8,
        target=target,
        random_state=global_random_seed,
        **kwargs,
    )
    se_mean, se_var = _standard_errors(y)
    assert abs(y.mean()) < _N_SE * _with_reference_error(se_mean, len(y))
    assert abs(y.var() - 1) < _N_SE * _with_reference_error(se_var, len(y))


def test_standardize_after_averaging_over_keys(global_random_seed):
    # Without standardisation the degree-1 target has variance exactly 1 / n_keys;
    # with it, the variance is about 1 for any n_keys (the reference constants
    # add their own error, as above).
    for n_keys in (1, 16):
        _, raw = make_token_regression(
            n_samples=20000,
            n_keys=n_keys,
            standardize=False,
            random_state=global_random_seed,
        )
        _, y = make_token_regression(
            n_samples=20000, n_keys=n_keys, random_state=global_random_seed
        )
        assert abs(raw.var() - 1 / n_keys) < _N_SE * _standard_errors(raw)[1]
        se_var = _with_reference_error(_standard_errors(y)[1], len(y))
        assert abs(y.var() - 1) < _N_SE * se_var


def test_same_scaling_for_different_seeds(global_random_seed):
    kwargs = dict(n_keys=4, token_dim=6, target="correlation", degree=2)
    mean, std = _reference_moments("correlation", 2, 1.0, 4, 6)
    for seed in global_random_seed + np.arange(3):
        X, y = make_token_regression(n_samples=200, random_state=seed, **kwargs)
        raw = _token_targets(X, "correlation", degree=2)
        assert_allclose(y, (raw - mean) / std, rtol=1e-12, atol=1e-12)
    # Constants do not depend on the size of the data set either.
    X, y = make_token_regression(
        n_samples=3, random_state=global_random_seed + 3, **kwargs
    )
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


def test_noise_adds_variance(global_random_seed):
    # Same seed: the tokens are drawn before the noise, so X is identical and
    # y_noisy - y_clean = noise * eps, whose sample variance has the relative
    # standard error sqrt(2 / n) = 1% (n = 20000): the bound is 6%. The noise is
    # independent of the target, so the variances add: var(y1) - var(y0) is
    # noise^2 within 6 standard errors of that difference of sample variances.
    noise = 0.5
    kwargs = dict(n_samples=20000, n_keys=4, token_dim=4)
    X0, y0 = make_token_regression(noise=0.0, random_state=global_random_seed, **kwargs)
    X1, y1 = make_token_regression(
        noise=noise, random_state=global_random_seed, **kwargs
    )
    assert_array_equal(X0, X1)
    assert_allclose(np.var(y1 - y0), noise**2, rtol=_N_SE * np.sqrt(2 / len(y0)))
    gap = (y1 - y1.mean()) ** 2 - (y0 - y0.mean()) ** 2
    se_gap = gap.std() / np.sqrt(len(gap))
    assert abs(np.var(y1) - np.var(y0) - noise**2) < _N_SE * se_gap


def test_standardize_false_returns_raw_target(global_random_seed):
    X, y = make_token_regression(
        n_samples=10,
        target="gamma",
        gamma=1.0,
        standardize=False,
        random_state=global_random_seed,
    )
    assert_allclose(y, _token_targets(X, "gamma", gamma=1.0))
    assert np.all(y > 0)


def test_constant_target_is_only_centred(global_random_seed):
    # token_dim=1: tokens are +-1, so t_i^2 = 1 and the target is constant.
    _, y = make_token_regression(
        n_samples=10, n_keys=3, token_dim=1, degree=2, random_state=global_random_seed
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

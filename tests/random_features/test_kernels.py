"""Tests of the infinite-width kernels rfa_kernel, brfa_kernel and rfmlp_kernel.

Tests on random data draw it from ``global_random_seed``. The Monte Carlo and
convergence checks bound a CLT statistic by ``_N_SE = 6`` standard errors: a
two-sided normal tail of 2e-9, so that the ~5 x 10^4 comparisons of a sweep
over seeds 0-99 (seeds x parametrisations x Gram entries) fail with probability
~1e-4, with room to spare for the skew of the ReLU products.
"""

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import multivariate_normal
from sklearn import config_context
from sklearn.kernel_ridge import KernelRidge
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_attn.random_features import (
    AttentionRandomFeatures,
    MLPRandomFeatures,
    _kernels,
)
from sklearn_attn.random_features._kernels import (
    _bvn_cdf,
    _relu_moment,
    brfa_kernel,
    rfa_kernel,
    rfmlp_kernel,
)

_N_SE = 6


def _tokens(n, n_tokens=4, d=3, seed=0):
    """Gaussian tokens; ``seed`` is anything ``default_rng`` takes, a Generator too."""
    return np.random.default_rng(seed).normal(size=(n, n_tokens, d))


# -- Monte Carlo references: explicit draws of the random weights ----------------------
def _mc_gram(features, draw, n_draws, rng, batch=20_000):
    """Mean and standard error of phi_W(X) . phi_W(X)^T over draws of W.

    ``features(W)`` returns an array of shape (n_draws_in_batch, n, p).
    """
    total = total_sq = 0.0
    for _ in range(n_draws // batch):
        phi = features(draw(rng, batch))
        prods = np.einsum("bnp,bmp->bnm", phi, phi)
        total = total + prods.sum(axis=0)
        total_sq = total_sq + (prods**2).sum(axis=0)
    mean = total / n_draws
    var = total_sq / n_draws - mean**2
    return mean, np.sqrt(var / n_draws)


def _attention_features(X, value_bias, qk_bias):
    """phi_W(X) = (1/N) sum_i relu(<x~_0, W x~_i>) [x_i; 1], one row per draw,
    with x~ = [x; 1] (``qk_bias``) or x."""
    keys = X[:, 1:]
    ones = np.ones(keys.shape[:2] + (1,))
    values = np.concatenate([keys, ones], axis=2) if value_bias else keys
    query, score_keys = X[:, 0], keys
    if qk_bias:
        query = np.hstack([query, np.ones((len(X), 1))])
        score_keys = np.concatenate([keys, ones], axis=2)

    def features(W):
        scores = np.maximum(np.einsum("nd,bde,nie->bni", query, W, score_keys), 0)
        return np.einsum("bni,nip->bnp", scores, values) / keys.shape[1]

    return features


def _qk_draws(d, qk_bias, mu, s):
    """Draws of W = mu I (on the d x d block) + s G, G of (d + qk_bias)^2 entries."""
    size = d + int(qk_bias)
    mean = np.zeros((size, size))
    mean[:d, :d] = mu * np.eye(d)
    return lambda rng, b: mean + s * rng.standard_normal((b, size, size))


# 200,000 draws of the weights for new random tokens; the closed form must lie
# within _N_SE standard errors of the estimate, entry by entry (worst of seeds
# 0-99 over the 28 parametrisations below: 3.6). The absolute 1e-12 only guards
# entries whose standard error is zero.
_N_DRAWS = 200_000


@pytest.mark.parametrize("qk_bias", [True, False])
@pytest.mark.parametrize("value_bias", [True, False])
@pytest.mark.parametrize("qk_std", [None, 0.7])
def test_rfa_kernel_matches_monte_carlo(
    qk_bias, value_bias, qk_std, global_random_seed
):
    rng = np.random.default_rng(global_random_seed)
    X = _tokens(3, n_tokens=3, d=2, seed=rng)
    s = 1 / np.sqrt(2) if qk_std is None else qk_std
    mean, se = _mc_gram(
        _attention_features(X, value_bias, qk_bias),
        _qk_draws(2, qk_bias, 0.0, s),
        _N_DRAWS,
        rng,
    )
    K = rfa_kernel(X, qk_std=qk_std, qk_bias=qk_bias, value_bias=value_bias)
    assert np.all(np.abs(K - mean) <= _N_SE * se + 1e-12)


@pytest.mark.parametrize("qk_bias", [True, False])
@pytest.mark.parametrize("value_bias", [True, False])
@pytest.mark.parametrize("mu, qk_std", [(1.0, None), (-0.6, 0.4), (2.5, 1.0)])
def test_brfa_kernel_matches_monte_carlo(
    qk_bias, value_bias, mu, qk_std, global_random_seed
):
    rng = np.random.default_rng(global_random_seed)
    X = _tokens(3, n_tokens=3, d=2, seed=rng)
    s = 1 / np.sqrt(2) if qk_std is None else qk_std
    mean, se = _mc_gram(
        _attention_features(X, value_bias, qk_bias),
        _qk_draws(2, qk_bias, mu, s),
        _N_DRAWS,
        rng,
    )
    K = brfa_kernel(
        X, qk_mean_scale=mu, qk_std=qk_std, qk_bias=qk_bias, value_bias=value_bias
    )
    assert np.all(np.abs(K - mean) <= _N_SE * se + 1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weight_std", [None, 0.3])
def test_rfmlp_kernel_matches_monte_carlo(bias, weight_std, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = _tokens(3, n_tokens=3, d=2, seed=rng)
    U = X.reshape(3, -1)
    if bias:
        U = np.hstack([U, np.ones((3, 1))])
    s = 1 / np.sqrt(U.shape[1]) if weight_std is None else weight_std
    mean, se = _mc_gram(
        lambda w: np.maximum(np.einsum("np,bp->bn", U, w), 0)[:, :, None],
        lambda rng, b: s * rng.standard_normal((b, U.shape[1])),
        _N_DRAWS,
        rng,
    )
    K = rfmlp_kernel(X, weight_std=weight_std, bias=bias)
    assert np.all(np.abs(K - mean) <= _N_SE * se + 1e-12)


# -- the bivariate normal pieces -------------------------------------------------------
def test_bvn_cdf_matches_scipy(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    a = np.r_[rng.normal(scale=2, size=40), 0.0, 0.0, 0.0, 1.3, -0.7]
    b = np.r_[rng.normal(scale=2, size=40), 0.0, 1.1, -2.0, 0.0, 0.0]
    rho = np.r_[rng.uniform(-0.99, 0.99, size=40), 0.3, -0.5, 0.8, 0.0, -0.9]
    got = _bvn_cdf(a, b, rho)
    ref = [
        multivariate_normal(cov=[[1, r], [r, 1]]).cdf([x, y])
        for x, y, r in zip(a, b, rho, strict=True)
    ]
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_relu_moment_matches_monte_carlo(global_random_seed):
    """Within _N_SE standard errors of a mean of 2,000,000 draws.

    The fourth case is random, with |mean| <= std and rho >= -0.5: both ReLUs
    are positive together with probability >= 0.004 (Phi_2(-1, -1; -0.5)), so
    the mean has thousands of non-zero terms and is in its CLT regime.
    """
    rng = np.random.default_rng(global_random_seed)
    n = 2_000_000
    s1, s2 = rng.uniform(0.5, 2.0, size=2)
    m1, m2 = rng.uniform(-1.0, 1.0, size=2) * (s1, s2)
    random_case = (m1, m2, s1, s2, rng.uniform(-0.5, 0.9))
    for m1, m2, s1, s2, rho in [
        (0.5, -0.3, 1.0, 2.0, 0.3),
        (1.2, 0.7, 0.5, 1.5, -0.6),
        (-1.0, -1.0, 1.0, 1.0, 0.9),
        random_case,
    ]:
        z = rng.standard_normal((n, 2))
        u = m1 + s1 * z[:, 0]
        v = m2 + s2 * (rho * z[:, 0] + np.sqrt(1 - rho**2) * z[:, 1])
        prod = np.maximum(u, 0) * np.maximum(v, 0)
        se = prod.std() / np.sqrt(n)
        assert abs(_relu_moment(m1, m2, s1, s2, rho) - prod.mean()) < _N_SE * se


def test_relu_moment_limits():
    # Zero means: the arc-cosine kernel s s' kappa1(rho).
    rho = np.linspace(-1, 1, 11)
    kappa1 = (np.sqrt(1 - rho**2) + (np.pi - np.arccos(rho)) * rho) / (2 * np.pi)
    np.testing.assert_allclose(
        _relu_moment(0.0, 0.0, 2.0, 3.0, rho), 6 * kappa1, rtol=1e-9, atol=1e-12
    )
    # rho = 1: E[(a + Z)_+ (b + Z)_+] = (ab + 1) Phi(-c) + (a + b + c) phi(c),
    # c = max(-a, -b).
    for a, b in [(0.3, -0.2), (1.0, 1.0), (-2.0, 0.5), (0.0, 0.0)]:
        c = max(-a, -b)
        pdf = np.exp(-c * c / 2) / np.sqrt(2 * np.pi)
        exact = (a * b + 1) * ndtr(-c) + (a + b + c) * pdf
        assert _relu_moment(a, b, 1.0, 1.0, 1.0) == pytest.approx(exact, rel=1e-9)
    # A zero standard deviation makes the pre-activation a constant, and the
    # result is continuous in the standard deviation.
    expected = 3 * np.exp(-2 / 9) / np.sqrt(2 * np.pi) + 2 * ndtr(2 / 3)
    assert _relu_moment(1.0, 2.0, 0.0, 3.0, 0.3) == pytest.approx(expected)
    assert _relu_moment(1.0, 2.0, 1e-9, 3.0, 0.3) == pytest.approx(expected)
    assert _relu_moment(-1.0, 2.0, 0.0, 3.0, 0.3) == 0.0
    assert _relu_moment(1.5, 2.0, 0.0, 0.0, 0.3) == 3.0


# -- convergence of the finite-width features ------------------------------------------
_WIDTHS = (1000, 10000)


def _check_convergence(make, K, X, unit_width):
    """Compare the Gram of ``make(M).fit_transform(X)`` with ``K`` as M grows.

    The Gram G is the mean over the M heads (units) of ``M <phi_m(x), phi_m(y)>``,
    so its standard error se_M per entry is estimated from the heads themselves
    and falls as 1 / sqrt(M). At every width the whole error is bounded:
    ``||G - K||_F^2 / sum(se_M^2)`` is, by the CLT, a Gaussian quadratic form
    with weights summing to 1, whose tail beyond _N_SE^2 = 36 is at most that of
    a chi-square with one degree of freedom (Szekely and Bakirov, 2003), 2e-9.
    Every entry is also checked at the largest width. Worst of seeds 0-99 over
    the 16 parametrisations below: 2.6 and 3.0 for the whole error at M = 1000
    and 10000, 4.3 for an entry at M = 10000. Smaller widths and single entries
    at M = 1000 are not checked: there the heavy tails of the ReLU products make
    the estimated se unreliable (ratios up to 4 at M = 100, 8 for an entry at
    M = 1000).
    """
    for width in _WIDTHS:
        F = make(width).fit_transform(X)
        gram = F @ F.T
        per_head = F.reshape(len(X), width, unit_width)
        products = width * np.einsum("amp,bmp->mab", per_head, per_head)
        se = products.std(axis=0) / np.sqrt(width)
        assert np.linalg.norm(gram - K) <= _N_SE * np.sqrt(np.sum(se**2))
    assert np.all(np.abs(gram - K) <= _N_SE * se)


@pytest.mark.parametrize("qk_bias", [True, False])
@pytest.mark.parametrize("value_bias", [True, False])
@pytest.mark.parametrize(
    "qk_mean, mu, qk_std",
    [("zero", 1.0, None), ("identity", 1.0, None), ("identity", 0.5, 0.3)],
)
def test_attention_features_converge_to_kernel(
    qk_mean, mu, qk_std, value_bias, qk_bias, global_random_seed
):
    X = _tokens(6, n_tokens=4, d=3, seed=global_random_seed)
    common = dict(qk_std=qk_std, qk_bias=qk_bias, value_bias=value_bias)
    if qk_mean == "zero":
        K = rfa_kernel(X, **common)
    else:
        K = brfa_kernel(X, qk_mean_scale=mu, **common)
    _check_convergence(
        lambda M: AttentionRandomFeatures(
            n_heads=M,
            qk_mean=qk_mean,
            qk_mean_scale=mu,
            random_state=global_random_seed,
            **common,
        ),
        K,
        X,
        unit_width=3 + value_bias,
    )


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weight_std", [None, 0.2])
def test_mlp_features_converge_to_kernel(bias, weight_std, global_random_seed):
    X = _tokens(6, n_tokens=4, d=3, seed=global_random_seed)
    K = rfmlp_kernel(X, weight_std=weight_std, bias=bias)
    _check_convergence(
        lambda M: MLPRandomFeatures(
            n_features=M,
            weight_std=weight_std,
            bias=bias,
            random_state=global_random_seed,
        ),
        K,
        X,
        unit_width=1,
    )


# -- structural properties -------------------------------------------------------------
# An entry of K(X, Y) sums key terms <x_i, y_j> kappa(...) of both signs, so on
# random data some entries nearly cancel (down to 3e-7 of the largest over seeds
# 0-99) and carry the rounding of the largest terms: comparisons of two
# computations allow, besides ``rtol``, an ``atol`` of ``rtol * max|K|``.
def _atol(K, rtol):
    return rtol * np.abs(K).max()


_KERNELS = {
    "rfa": rfa_kernel,
    "brfa": brfa_kernel,
    "brfa_neg": lambda X, Y=None, **kw: brfa_kernel(X, Y, qk_mean_scale=-1.5, **kw),
    "rfa_no_qk_bias": lambda X, Y=None, **kw: rfa_kernel(X, Y, qk_bias=False, **kw),
    "brfa_no_qk_bias": lambda X, Y=None, **kw: brfa_kernel(X, Y, qk_bias=False, **kw),
    "rfmlp": rfmlp_kernel,
    "rfmlp_bias": lambda X, Y=None, **kw: rfmlp_kernel(X, Y, bias=True, **kw),
}


@pytest.mark.parametrize("name", sorted(_KERNELS))
def test_symmetric_psd_and_default_y(name, global_random_seed):
    kernel = _KERNELS[name]
    X = _tokens(40, seed=global_random_seed)
    K = kernel(X)
    assert K.shape == (40, 40)
    assert K.dtype == np.float64
    np.testing.assert_allclose(K, K.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(K, kernel(X, X))
    eigenvalues = np.linalg.eigvalsh(K)
    assert eigenvalues.min() >= -1e-10 * eigenvalues.max()


@pytest.mark.parametrize("name", sorted(_KERNELS))
def test_flat_input_with_token_dim_equals_3d(name, global_random_seed):
    kernel = _KERNELS[name]
    rng = np.random.default_rng(global_random_seed)
    X, Y = _tokens(7, seed=rng), _tokens(5, seed=rng)
    np.testing.assert_allclose(
        kernel(X.reshape(7, -1), Y.reshape(5, -1), token_dim=3),
        kernel(X, Y),
        rtol=1e-13,
        atol=1e-14,
    )


def test_rfmlp_flat_input_without_token_dim(global_random_seed):
    X = _tokens(7, seed=global_random_seed)
    np.testing.assert_array_equal(rfmlp_kernel(X.reshape(7, -1)), rfmlp_kernel(X))


@pytest.mark.parametrize(
    "name", ["rfa", "brfa", "brfa_neg", "rfa_no_qk_bias", "brfa_no_qk_bias"]
)
def test_attention_kernels_invariant_to_key_permutations(name, global_random_seed):
    kernel = _KERNELS[name]
    rng = np.random.default_rng(global_random_seed)
    X, Y = _tokens(6, n_tokens=5, seed=rng), _tokens(4, n_tokens=5, seed=rng)
    K = kernel(X, Y)
    # A different permutation of the keys for every sample.
    X_perm = np.stack([np.r_[x[:1], x[1:][rng.permutation(4)]] for x in X])
    Y_perm = np.stack([np.r_[y[:1], y[1:][rng.permutation(4)]] for y in Y])
    atol = _atol(K, 1e-12)
    np.testing.assert_allclose(kernel(X_perm, Y), K, rtol=1e-12, atol=atol)
    np.testing.assert_allclose(kernel(X, Y_perm), K, rtol=1e-12, atol=atol)
    # Swapping the query with a key does change it.
    X_swap = X[:, [1, 0, 2, 3, 4]]
    assert not np.allclose(kernel(X_swap, Y), K, rtol=1e-3)


def test_rfmlp_kernel_not_invariant_to_key_permutations(global_random_seed):
    X = _tokens(6, n_tokens=5, seed=global_random_seed)
    K = rfmlp_kernel(X)
    X_perm = X[:, [0, 2, 1, 4, 3]]
    assert not np.allclose(rfmlp_kernel(X_perm, X), K, rtol=1e-3)


def test_brfa_with_zero_mean_is_rfa_and_scales(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X, Y = _tokens(8, seed=rng), _tokens(5, seed=rng)
    K = rfa_kernel(X, Y)
    np.testing.assert_allclose(brfa_kernel(X, Y, qk_mean_scale=0.0), K, rtol=1e-13)
    # The Gaussian-moment path at a tiny mean agrees with the arc-cosine path.
    np.testing.assert_allclose(
        brfa_kernel(X, Y, qk_mean_scale=1e-12), K, rtol=1e-8, atol=_atol(K, 1e-8)
    )
    # qk_std only rescales the zero-mean kernel, by qk_std^2 (default 1/sqrt(d)).
    np.testing.assert_allclose(
        rfa_kernel(X, Y, qk_std=2.0), 4 * 3 * K, rtol=1e-12, atol=_atol(12 * K, 1e-12)
    )
    # Only mu / qk_std matters for the biased kernel (up to the factor s^2).
    np.testing.assert_allclose(
        brfa_kernel(X, Y, qk_mean_scale=2.0, qk_std=1.0),
        4 * brfa_kernel(X, Y, qk_mean_scale=1.0, qk_std=0.5),
        rtol=1e-10,
    )


def test_brfa_deterministic_limit(global_random_seed):
    # qk_std = 0: a single feature map with W = mu I; qk_std -> 0 is continuous.
    rng = np.random.default_rng(global_random_seed)
    X, Y = _tokens(5, seed=rng), _tokens(4, seed=rng)
    mu = 0.8

    def phi(Z):
        scores = np.maximum(mu * np.einsum("nd,nid->ni", Z[:, 0], Z[:, 1:]), 0)
        values = np.concatenate([Z[:, 1:], np.ones((len(Z), 3, 1))], axis=2)
        return np.einsum("ni,nip->np", scores, values) / 3

    expected = phi(X) @ phi(Y).T
    np.testing.assert_allclose(
        brfa_kernel(X, Y, qk_mean_scale=mu, qk_std=0.0),
        expected,
        rtol=1e-12,
        atol=_atol(expected, 1e-12),
    )
    np.testing.assert_allclose(
        brfa_kernel(X, Y, qk_mean_scale=mu, qk_std=1e-9),
        expected,
        rtol=1e-6,
        atol=_atol(expected, 1e-6),
    )
    np.testing.assert_array_equal(rfa_kernel(X, Y, qk_std=0.0), 0.0)


def test_zero_tokens_give_finite_values(global_random_seed):
    X = _tokens(4, seed=global_random_seed)
    X[0, 0] = 0.0  # zero query
    X[1, 2] = 0.0  # zero key
    for name, kernel in _KERNELS.items():
        K = kernel(X)
        assert np.all(np.isfinite(K)), name
    # Without the constant a zero query scores 0 for every head.
    np.testing.assert_array_equal(rfa_kernel(X, qk_bias=False)[0], 0.0)
    # With it, all-zero tokens score the constant entry w ~ N(0, s^2) of W,
    # and phi = relu(w) [0; 1]: K = E[relu(w)^2] = s^2 / 2, s^2 = 1 / d.
    zeros = np.zeros((2, 4, 3))
    np.testing.assert_allclose(rfa_kernel(zeros), 1 / 6, rtol=1e-14)
    # (brfa_kernel clips the correlation 1 to 1 - 1e-12: an error of ~1e-12.)
    np.testing.assert_allclose(brfa_kernel(zeros), 1 / 6, rtol=1e-10)
    np.testing.assert_array_equal(rfa_kernel(zeros, value_bias=False), 0.0)


@pytest.mark.parametrize("name", sorted(_KERNELS))
def test_batching_does_not_change_the_result(name, monkeypatch, global_random_seed):
    kernel = _KERNELS[name]
    rng = np.random.default_rng(global_random_seed)
    X, Y = _tokens(9, seed=rng), _tokens(7, seed=rng)
    K = kernel(X, Y)
    monkeypatch.setattr(_kernels, "_BLOCK", 5)
    with config_context(working_memory=1e-4):  # one row of X per batch
        np.testing.assert_allclose(kernel(X, Y), K, rtol=1e-13, atol=_atol(K, 1e-13))


# -- use with scikit-learn -------------------------------------------------------------
def test_kernel_ridge_with_rfa_kernel(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X, X_test = _tokens(200, seed=rng), _tokens(100, seed=rng)

    def target(Z):
        return np.mean(np.einsum("nd,nid->ni", Z[:, 0], Z[:, 1:]), axis=1)

    # Worst of seeds 0-99: a relative training error of 8e-9 (bound 1e-3) and a
    # relative test error of 8e-4 (bound 0.5).
    y = target(X)
    model = KernelRidge(alpha=1e-4, kernel="precomputed").fit(rfa_kernel(X), y)
    train_mse = np.mean((model.predict(rfa_kernel(X)) - y) ** 2)
    assert train_mse < 1e-3 * np.var(y)
    # The target is a degree-(1, 1) key average, in the RFA kernel's span.
    test_pred = model.predict(rfa_kernel(X_test, X))
    assert np.mean((test_pred - target(X_test)) ** 2) < 0.5 * np.var(target(X_test))


# -- input validation ------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel, rfmlp_kernel])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_raises(kernel, bad):
    X = _tokens(3)
    X_bad = X.copy()
    X_bad[1, 2, 0] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        kernel(X_bad)
    with pytest.raises(ValueError, match="NaN|infinity"):
        kernel(X, X_bad)


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel])
def test_attention_kernels_need_token_dim_for_2d(kernel):
    with pytest.raises(ValueError, match="2-D with 12 feature.* but token_dim is None"):
        kernel(_tokens(3).reshape(3, -1))


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel, rfmlp_kernel])
def test_layout_mismatch_raises(kernel):
    X = _tokens(3, n_tokens=4, d=3)
    with pytest.raises(ValueError, match="same token layout.*X has 4 token.*Y has 3"):
        kernel(X, _tokens(2, n_tokens=3, d=4))
    with pytest.raises(ValueError, match="same token layout"):
        kernel(X, _tokens(2, n_tokens=4, d=2))
    with pytest.raises(ValueError, match="token_dim=3"):
        kernel(X, _tokens(2, n_tokens=4, d=2), token_dim=3)
    with pytest.raises(ValueError, match="not divisible by token_dim=5"):
        kernel(X.reshape(3, -1), token_dim=5)


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel])
def test_attention_kernels_need_two_tokens(kernel):
    with pytest.raises(ValueError, match="1 token.*at least 2 tokens"):
        kernel(_tokens(3, n_tokens=1))
    # The MLP kernel accepts a single token.
    assert rfmlp_kernel(_tokens(3, n_tokens=1)).shape == (3, 3)


@pytest.mark.parametrize("kernel", [rfa_kernel, brfa_kernel, rfmlp_kernel])
def test_wrong_dimensions_raise(kernel):
    with pytest.raises(ValueError, match="token input for X; .* 1 dimension"):
        kernel(np.ones(6))
    with pytest.raises(ValueError, match="Expected 2-D or 3-D token input"):
        kernel(np.ones((2, 3, 2, 2)))


@pytest.mark.parametrize(
    "kernel, params, match",
    [
        (rfa_kernel, {"qk_std": -1.0}, "qk_std"),
        (brfa_kernel, {"qk_mean_scale": np.inf}, "qk_mean_scale"),
        (brfa_kernel, {"value_bias": "yes"}, "value_bias"),
        (rfmlp_kernel, {"weight_std": 0.0}, "weight_std"),
        (rfmlp_kernel, {"token_dim": 0}, "token_dim"),
    ],
)
def test_invalid_parameters_raise(kernel, params, match):
    with pytest.raises(InvalidParameterError, match=match):
        kernel(_tokens(3), **params)

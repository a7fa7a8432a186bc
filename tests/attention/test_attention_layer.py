"""The attention layer's numerics against slow, obvious references.

References are loops over samples and heads, central finite differences and
``numpy.linalg.lstsq`` on an explicitly built design matrix. The data are drawn
from ``global_random_seed``; every tolerance is a round-off or truncation bound,
not a statistic, so it holds for any seed. Where a comment quotes a "worst of
seeds 0-99", it is the largest error over that sweep as a share of the tolerance.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_attn._backend import cpu_workers
from sklearn_attn.attention._layer import (
    attention_weights,
    forward,
    loss_and_gradient,
    multihead_attention,
    solve_values,
    useful_flops,
    value_normal_equations,
)


def _softmax(row):
    row = np.exp(row - row.max())
    return row / row.sum()


def _attention_loop(X, theta, n_queries=None):
    n, k, _ = X.shape
    q = k if n_queries is None else n_queries
    S = np.zeros((n, len(theta), q, k))
    for s in range(n):
        for i in range(len(theta)):
            for a in range(q):
                S[s, i, a] = _softmax(
                    np.array([X[s, a] @ theta[i] @ X[s, b] for b in range(k)])
                )
    return S


def _forward_loop(X, theta, values, n_queries=None):
    """F(X)_a = sum_i sum_b S_i[a, b] x_b^T W_i, by loops over samples and heads."""
    S = _attention_loop(X, theta, n_queries)
    n, m, q, k = S.shape
    F = np.zeros((n, q, X.shape[2]))
    for s in range(n):
        for i in range(m):
            F[s] += S[s, i] @ X[s] @ values[i]
    return F


def _loss_loop(X, Y, theta, values):
    F = _forward_loop(X, theta, values, Y.shape[1])
    return 0.5 * np.sum((F - Y) ** 2) / len(X)


def _problem(n=7, k=4, d=3, m=2, seed=0, boolean=True):
    rng = np.random.default_rng(seed)
    X = (
        rng.choice([-1.0, 1.0], size=(n, k, d))
        if boolean
        else rng.normal(size=(n, k, d))
    )
    theta = rng.normal(size=(m, d, d))
    values = rng.normal(size=(m, d, d)) / np.sqrt(d)
    Y = rng.normal(size=(n, k, d))
    return X, Y, theta, values


@pytest.mark.parametrize("n_queries", [None, 1, 3])
@pytest.mark.parametrize("boolean", [True, False])
def test_forward_and_attention_match_loops(n_queries, boolean, global_random_seed):
    X, _, theta, values = _problem(boolean=boolean, seed=global_random_seed)
    expected_S = _attention_loop(X, theta, n_queries)
    expected_F = _forward_loop(X, theta, values, n_queries)
    # chunk_size=3 leaves a ragged last chunk of one sample. Both sides differ
    # by the order of a few O(1) products (~1e-16): worst of seeds 0-99 is 0.006
    # of the tolerance.
    assert_allclose(
        attention_weights(X, theta, n_queries=n_queries, chunk_size=3),
        expected_S,
        rtol=1e-12,
        atol=1e-14,
    )
    assert_allclose(
        forward(X, theta, values, n_queries=n_queries, chunk_size=3),
        expected_F,
        rtol=1e-12,
        atol=1e-13,
    )
    assert_allclose(expected_S.sum(axis=-1), 1.0, rtol=1e-13)


def test_public_multihead_attention(global_random_seed):
    X, _, theta, values = _problem(seed=global_random_seed)
    F, S = multihead_attention(X, theta, values, return_attention=True)
    assert_allclose(F, _forward_loop(X, theta, values), rtol=1e-12, atol=1e-13)
    assert_allclose(S, _attention_loop(X, theta), rtol=1e-12, atol=1e-14)
    assert_allclose(multihead_attention(X.tolist(), theta, values), F)
    with pytest.raises(ValueError, match="X must have shape"):
        multihead_attention(X[0], theta, values)
    with pytest.raises(ValueError, match=r"theta must have shape \(n_heads, 3, 3\)"):
        multihead_attention(X, theta[:, :2], values)
    with pytest.raises(ValueError, match="same number of heads"):
        multihead_attention(X, theta, values[:1])


def test_unshifted_softmax_is_used_only_when_safe_and_agrees(
    monkeypatch, global_random_seed
):
    """Scores bounded by 600 skip the row-max shift; forcing it changes nothing."""
    from sklearn_attn.attention import _layer

    X, Y, theta, values = _problem(seed=global_random_seed)
    # The bound max ||x_a||^2 max_i ||Theta_i||_F is 3 times the larger of two
    # chi(9) variables here, far below 600 (13.2 at most over seeds 0-99). Scaled
    # to 1.01 times the threshold, the shift must switch on.
    bound = _layer.token_norm_bound(X) * np.sqrt((theta * theta).sum(axis=(1, 2))).max()
    assert bound < 600
    assert _layer._Heads(theta, X, np).shift is False
    assert _layer._Heads(theta * (1.01 * 600 / bound), X, np).shift is True
    expected = loss_and_gradient(X, Y, theta, values)
    never = {np.dtype(np.float64): -1.0, np.dtype(np.float32): -1.0}
    monkeypatch.setattr(_layer, "_UNSHIFTED_SCORE_BOUND", never)
    assert _layer._Heads(theta, X, np).shift is True
    shifted = loss_and_gradient(X, Y, theta, values)
    # The shift only changes the rounding of exp (scores below 14 here): worst
    # of seeds 0-99 is 0.004 (loss) and 0.09 (gradients) of the tolerances.
    assert shifted[0] == pytest.approx(expected[0], rel=1e-13)
    for got, want in zip(shifted[1:], expected[1:], strict=True):
        assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_float32_softmax_is_shifted_below_float64_bound(global_random_seed):
    """Scores of ~100 are safe unshifted in float64 but overflow float32's exp."""
    from sklearn_attn.attention import _layer

    X, _, theta, values = _problem(seed=global_random_seed)
    bound = _layer.token_norm_bound(X) * np.sqrt((theta * theta).sum(axis=(1, 2))).max()
    theta = theta * (150.0 / bound)  # scores up to 150: e^150 overflows float32
    X32, theta32 = X.astype(np.float32), theta.astype(np.float32)
    assert _layer._Heads(theta, X, np).shift is False
    assert _layer._Heads(theta32, X32, np).shift is True
    F32 = forward(X32, theta32, values.astype(np.float32))
    assert F32.dtype == np.float32
    # float32 products of scores ~150 lose ~150 * 1e-7 in the exponent, a relative
    # error ~2e-5 of the weights: worst of seeds 0-99 is 0.0025 of the tolerance.
    assert_allclose(F32, forward(X, theta, values), rtol=1e-3, atol=1e-3)


def test_softmax_is_stable_for_huge_scores(global_random_seed):
    """Scores of order 1e4 overflow a naive exp; the row-max shift keeps them exact."""
    X, _, theta, values = _problem(seed=global_random_seed)
    theta = 1e4 * theta
    F = forward(X, theta, values)
    assert np.all(np.isfinite(F))
    # Scores ~3e4 carry round-off ~1e-11, and a softmax moves by at most 1/4 of a
    # score change: errors ~1e-12; worst of seeds 0-99 is 1e-4 of the tolerance.
    assert_allclose(F, _forward_loop(X, theta, values), rtol=1e-10, atol=1e-12)
    loss, grad_theta, grad_values = loss_and_gradient(
        X, np.zeros_like(X), theta, values
    )
    assert np.isfinite(loss)
    assert np.all(np.isfinite(grad_theta)) and np.all(np.isfinite(grad_values))


@pytest.mark.parametrize("n_queries", [None, 2])
def test_loss_and_gradient_match_finite_differences(n_queries, global_random_seed):
    X, Y, theta, values = _problem(n=5, k=4, d=3, m=2, seed=global_random_seed)
    Y = Y[:, :n_queries] if n_queries else Y
    Y = np.ascontiguousarray(Y)
    loss, grad_theta, grad_values = loss_and_gradient(X, Y, theta, values, chunk_size=2)
    assert loss == pytest.approx(_loss_loop(X, Y, theta, values), rel=1e-13)
    # Central differences: truncation error ~ h^2 f''' ~ 1e-10 and round-off
    # ~ eps f / h ~ 1e-10 at h = 1e-6, so 1e-7 relative to the largest entry holds
    # (worst of seeds 0-99: 0.05 of it).
    h = 1e-6
    for array, grad in ((theta, grad_theta), (values, grad_values)):
        numeric = np.zeros_like(array)
        for idx in np.ndindex(array.shape):
            saved = array[idx]
            array[idx] = saved + h
            up = _loss_loop(X, Y, theta, values)
            array[idx] = saved - h
            down = _loss_loop(X, Y, theta, values)
            array[idx] = saved
            numeric[idx] = (up - down) / (2 * h)
        assert_allclose(grad, numeric, atol=1e-7 * np.abs(numeric).max())


def test_chunks_and_threads_do_not_change_results(global_random_seed):
    X, Y, theta, values = _problem(n=50, k=5, d=4, m=3, seed=global_random_seed)
    expected = loss_and_gradient(X, Y, theta, values, chunk_size=50)
    with cpu_workers(2) as executor:
        for chunk_size in (1, 7):
            got = loss_and_gradient(
                X, Y, theta, values, chunk_size=chunk_size, executor=executor
            )
            # Only the order of the partial sums differs (~1e-16 relative): worst
            # of seeds 0-99 is 0.0075 of the tolerances.
            assert got[0] == pytest.approx(expected[0], rel=1e-12)
            assert_allclose(got[1], expected[1], rtol=1e-10, atol=1e-14)
            assert_allclose(got[2], expected[2], rtol=1e-10, atol=1e-14)
            assert_allclose(
                forward(X, theta, values, chunk_size=chunk_size, executor=executor),
                forward(X, theta, values),
                rtol=1e-13,
                atol=1e-14,
            )


def _design(X, theta):
    """The (N k, m d) design [S_1 X | ... | S_m X], built by loops."""
    S = _attention_loop(X, theta)
    n, m, k, _ = S.shape
    d = X.shape[2]
    P = np.zeros((n * k, m * d))
    for s in range(n):
        for i in range(m):
            P[s * k : (s + 1) * k, i * d : (i + 1) * d] = S[s, i] @ X[s]
    return P


@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_value_refit_matches_lstsq(alpha, global_random_seed):
    X, Y, theta, _ = _problem(n=30, k=4, d=3, m=2, seed=global_random_seed)
    n, k, d = X.shape
    gram, rhs = value_normal_equations(X, Y, theta, chunk_size=4)
    values = solve_values(gram, rhs, n, alpha)
    P, target = _design(X, theta), Y.reshape(n * k, d)
    # Ridge (1/2N)||P W - Y||^2 + (alpha/2)||W||^2 is least squares on P
    # stacked over sqrt(N alpha) I.
    P_aug = np.vstack([P, np.sqrt(n * alpha) * np.eye(P.shape[1])])
    target_aug = np.vstack([target, np.zeros((P.shape[1], d))])
    expected = np.linalg.lstsq(P_aug, target_aug, rcond=None)[0]
    # Normal equations square the condition number of P (at most 9.4 for seeds
    # 0-99), so 1e-9 is loose: worst of seeds 0-99 is 1e-4 of it.
    assert_allclose(values.reshape(-1, d), expected, rtol=1e-9, atol=1e-11)


def test_value_refit_is_minimum_norm_when_rank_deficient(global_random_seed):
    """Two identical heads: only W_1 + W_2 is determined; lstsq's min-norm splits it."""
    X, Y, theta, _ = _problem(n=20, k=4, d=3, m=1, seed=global_random_seed)
    theta = np.concatenate([theta, theta])
    n, k, d = X.shape
    gram, rhs = value_normal_equations(X, Y, theta)
    values = solve_values(gram, rhs, n, 0.0)
    expected = np.linalg.lstsq(_design(X, theta), Y.reshape(n * k, d), rcond=None)[0]
    # Worst of seeds 0-99: 5e-7 of the tolerance.
    assert_allclose(values.reshape(-1, d), expected, rtol=1e-7, atol=1e-9)
    assert_allclose(values[0], values[1], rtol=1e-7, atol=1e-9)


def test_useful_flops_counts_the_nine_products():
    n, k, d, m = 10, 5, 3, 2
    gemm = 2 * (n * k) * d * (m * d)  # X Theta, P W, P^T R, R W^T, X^T D
    batched = 2 * n * (k * m) * d * k  # scores, S X, dL/dS, dA X
    assert useful_flops(n, k, d, m) == 5 * gemm + 4 * batched

"""The pseudo-likelihood core against finite differences and brute force.

Each check is exact up to rounding, on codes, weights and parameters drawn from
``global_random_seed``; every tolerance holds for any seed (the reason is given
next to it).
"""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_attn.potts import _model
from sklearn_attn.potts._mean_field import mean_field_couplings
from sklearn_attn.potts._model import (
    FactoredAttention,
    FullCouplings,
    OneHotRows,
    log_conditionals,
    objective,
    one_hot,
    zero_sum_gauge,
)

L, Q = 4, 3


def _tiny_data(rng, n=25, missing=0.0, **options):
    """Codes, their rows and weights; ``missing`` of the sites at -1 (missing)."""
    codes = rng.integers(0, Q, size=(n, L))
    if missing:
        codes[rng.random((n, L)) < missing] = -1
    weights = rng.uniform(0.2, 2.0, n)
    return codes, OneHotRows(codes, weights, Q, **options), weights


PARAMETRIZATIONS = [
    FullCouplings(L, Q),
    FactoredAttention(L, Q, 1, "softmax"),
    FactoredAttention(L, Q, 3, "softmax"),
    FactoredAttention(L, Q, 2, "free"),
]


def _pseudo_likelihood_loop(codes, weights, couplings, fields, alpha_h, alpha_j):
    """plmc's objective written out with loops over sequences, sites and states."""
    total = 0.0
    for s, w in zip(codes, weights, strict=True):
        for i in range(L):
            z = [
                fields[i, a] + sum(couplings[i, a, j, s[j]] for j in range(L) if j != i)
                for a in range(Q)
            ]
            total -= w * (z[s[i]] - np.log(np.sum(np.exp(z))))
    penalty_j = sum(
        (couplings[i, :, j, :] ** 2).sum() for i in range(L) for j in range(L) if i != j
    )
    return total + alpha_h * (fields**2).sum() + alpha_j / 2 * penalty_j


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_objective_matches_loops(parametrization, gather, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes, X, weights = _tiny_data(rng, gather=gather)
    theta = rng.standard_normal(parametrization.n_params)
    value, _ = objective(theta, parametrization, X, 0.3, 0.7)
    couplings_mat, fields = parametrization.couplings(theta)
    expected = _pseudo_likelihood_loop(
        codes, weights, couplings_mat.reshape(L, Q, L, Q), fields, 0.3, 0.7
    )
    # ~100 terms of order one summed in another order: ~1e-15 relative apart.
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("missing", [0.0, 0.3], ids=["complete", "missing-sites"])
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_gradient_matches_finite_differences(
    parametrization, missing, gather, global_random_seed
):
    rng = np.random.default_rng(global_random_seed)
    _, X, weights = _tiny_data(rng, missing=missing, gather=gather)
    theta = 0.5 * rng.standard_normal(parametrization.n_params)
    _, grad = objective(theta, parametrization, X, 0.1, 0.3)
    eps = 1e-6
    numeric = np.empty_like(theta)
    for k in range(theta.size):
        step = np.zeros_like(theta)
        step[k] = eps
        plus, _ = objective(theta + step, parametrization, X, 0.1, 0.3)
        minus, _ = objective(theta - step, parametrization, X, 0.1, 0.3)
        numeric[k] = (plus - minus) / (2 * eps)
    # Central differences: truncation ~eps^2 * (third derivative) ~ 1e-11 and
    # rounding ~1e-16 |f| / eps ~ 1e-8 (|f| ~ 100 for any seed), well below 1e-6.
    assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


def test_full_couplings_are_symmetric_with_zero_diagonal(global_random_seed):
    parametrization = FullCouplings(L, Q)
    theta = np.random.default_rng(global_random_seed).standard_normal(
        parametrization.n_params
    )
    tensor = parametrization.couplings(theta)[0].reshape(L, Q, L, Q)
    assert_allclose(tensor, tensor.transpose(2, 3, 0, 1))
    assert np.all(tensor[np.arange(L), :, np.arange(L), :] == 0)


def test_softmax_attention_rows_sum_to_one_off_diagonal(global_random_seed):
    parametrization = FactoredAttention(L, Q, 2, "softmax")
    theta = np.random.default_rng(global_random_seed).standard_normal(
        parametrization.n_params
    )
    _, raw, _ = parametrization.split(theta)
    attention = parametrization.attention_matrices(raw)
    assert_allclose(attention.sum(axis=2), 1.0)
    assert np.all(attention[:, np.arange(L), np.arange(L)] == 0)


def test_conditionals_equal_ratios_of_the_exact_joint(global_random_seed):
    """For symmetric couplings the conditionals are those of P(s) ~ exp(-H(s)).

    Standard normal parameters give energies of a few tens at most, so both sides
    agree to ~1e-14 relative for any seed.
    """
    parametrization = FullCouplings(L, Q)
    theta = np.random.default_rng(global_random_seed).standard_normal(
        parametrization.n_params
    )
    couplings_mat, fields = parametrization.couplings(theta)
    J = couplings_mat.reshape(L, Q, L, Q)
    states = np.array(list(itertools.product(range(Q), repeat=L)))
    energy = np.array(
        [
            sum(fields[i, s[i]] for i in range(L))
            + sum(J[i, s[i], j, s[j]] for i in range(L) for j in range(i + 1, L))
            for s in states
        ]
    )
    joint = dict(zip(map(tuple, states), np.exp(energy), strict=True))
    log_p = log_conditionals(one_hot(states, Q), couplings_mat, fields)
    for row, s in enumerate(states[::7]):
        for i in range(L):
            options = [tuple(np.r_[s[:i], a, s[i + 1 :]]) for a in range(Q)]
            exact = np.array([joint[o] for o in options])
            assert_allclose(np.exp(log_p[row * 7, i]), exact / exact.sum(), rtol=1e-10)


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS[:3], ids=repr)
def test_zero_sum_gauge_keeps_conditionals(parametrization, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes, _, _ = _tiny_data(rng)
    X = one_hot(codes, Q)
    theta = rng.standard_normal(parametrization.n_params)
    couplings_mat, fields = parametrization.couplings(theta)
    gauged, gauged_fields = zero_sum_gauge(couplings_mat.reshape(L, Q, L, Q), fields)
    assert_allclose(gauged.sum(axis=1), 0, atol=1e-12)
    assert_allclose(gauged.sum(axis=3), 0, atol=1e-12)
    assert_allclose(
        log_conditionals(X, gauged.reshape(L * Q, L * Q), gauged_fields),
        log_conditionals(X, couplings_mat, fields),
        atol=1e-12,
    )


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_objective_does_not_depend_on_the_blocks(
    parametrization, gather, monkeypatch, global_random_seed
):
    """Blocks of 1, 7 or all rows: the same sums in another order (~1e-15)."""
    rng = np.random.default_rng(global_random_seed)
    codes, whole, weights = _tiny_data(rng)
    theta = rng.standard_normal(parametrization.n_params)
    value, grad = objective(theta, parametrization, whole, 0.1, 0.3)
    monkeypatch.setattr(_model, "_PRODUCT_ROWS", 1)
    for block_rows in (1, 7):
        rows = OneHotRows(codes, weights, Q, block_rows=block_rows, gather=gather)
        value_b, grad_b = objective(theta, parametrization, rows, 0.1, 0.3)
        assert value_b == pytest.approx(value, rel=1e-12)
        assert_allclose(grad_b, grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_single_precision_products_stay_close(
    parametrization, gather, global_random_seed
):
    """float32 products with float64 sums: the float64 result to float32 accuracy.

    Logits of order ten carry float32 rounding ~1e-6 each; the value (about 100)
    sums 100 such terms and the gradient entries (order one) at most 25, so
    1e-5 relative and 1e-4 absolute leave a margin of ten or more.
    """
    rng = np.random.default_rng(global_random_seed)
    codes, rows64, weights = _tiny_data(rng)
    rows32 = OneHotRows(
        codes, weights, Q, dtype=np.float32, block_rows=7, gather=gather
    )
    theta = rng.standard_normal(parametrization.n_params)
    value64, grad64 = objective(theta, parametrization, rows64, 0.1, 0.3)
    value32, grad32 = objective(theta, parametrization, rows32, 0.1, 0.3)
    assert grad32.dtype == np.float64
    assert value32 == pytest.approx(value64, rel=1e-5)
    assert_allclose(grad32, grad64, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logits_far_apart_across_a_block(dtype, gather, global_random_seed):
    """Logits of hundreds: the block-wide shift would underflow, and the block
    is redone with a per-sequence shift. float64: the loops' value to 1e-10
    (terms of ~100 summed in another order); float32: to 1e-5 (rounding ~1e-7
    of logits ~100, summed over 100 terms, with a margin of ten)."""
    rng = np.random.default_rng(global_random_seed)
    codes, _, weights = _tiny_data(rng)
    parametrization = FullCouplings(L, Q)
    theta = 60.0 * rng.standard_normal(parametrization.n_params)
    couplings_mat, fields = parametrization.couplings(theta)
    logits = one_hot(codes, Q) @ couplings_mat.T + fields.reshape(1, -1)
    spread = logits.reshape(-1, L, Q).max(axis=2)
    assert (spread.max(axis=0) - spread.min(axis=0)).max() > 100  # the fallback
    rows = OneHotRows(codes, weights, Q, dtype=dtype, gather=gather)
    value, grad = objective(theta, parametrization, rows, 0.3, 0.7)
    expected = _pseudo_likelihood_loop(
        codes, weights, couplings_mat.reshape(L, Q, L, Q), fields, 0.3, 0.7
    )
    rel = 1e-10 if dtype == np.float64 else 1e-5
    assert value == pytest.approx(expected, rel=rel)
    assert np.isfinite(grad).all()


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_scaled_coordinates(parametrization, global_random_seed):
    """objective(u, scale=s) is objective(u / s): the same sums (~1e-15)."""
    rng = np.random.default_rng(global_random_seed)
    _, rows, _ = _tiny_data(rng)
    theta = rng.standard_normal(parametrization.n_params)
    scale = rng.uniform(0.1, 10.0, parametrization.n_params).astype(np.float32)
    value, grad = objective(theta * scale, parametrization, rows, 0.1, 0.3, scale=scale)
    expected_value, expected_grad = objective(theta, parametrization, rows, 0.1, 0.3)
    assert value == pytest.approx(expected_value, rel=1e-12)
    assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)


def test_one_hot():
    codes = np.array([[0, 2], [1, 1]])
    assert_allclose(one_hot(codes, 3), [[1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0]])


def test_mean_field_couplings_invert_the_connected_correlations(global_random_seed):
    """``J = -C^{-1}`` written out: frequencies with a pseudocount, the
    correlation matrix of the one-hot sites without each site's last state, and
    its inverse. Entries of order one to ten from a well-conditioned matrix
    (the pseudocount of 0.5 keeps every frequency above 0.08): ~1e-13 apart."""
    rng = np.random.default_rng(global_random_seed)
    codes, rows, weights = _tiny_data(rng, n=40)
    J = mean_field_couplings(rows, Q, pseudocount=0.5)
    x = one_hot(codes, Q)
    w = weights / weights.sum()
    f = 0.5 * (w @ x) + 0.5 / Q
    fij = 0.5 * (x.T * w) @ x + 0.5 / Q**2
    for i in range(L):
        block = slice(i * Q, (i + 1) * Q)
        fij[block, block] = np.diag(f[block])
    keep = [k for k in range(L * Q) if k % Q != Q - 1]
    C = (fij - np.outer(f, f))[np.ix_(keep, keep)]
    expected = np.zeros((L * Q, L * Q))
    expected[np.ix_(keep, keep)] = -np.linalg.inv(C)
    expected = expected.reshape(L, Q, L, Q)
    expected[np.arange(L), :, np.arange(L), :] = 0.0
    assert_allclose(J, expected, rtol=1e-10, atol=1e-12)
    assert_allclose(J, J.transpose(2, 3, 0, 1), atol=1e-12)


@pytest.mark.parametrize("n_heads", [1, 2])
def test_factor_recovers_factored_couplings(n_heads, global_random_seed):
    """Couplings that are exactly ``sum_h A^h (x) V^h`` are factored back
    exactly, up to the gauge: the zero-sum gauge of the couplings agrees to
    rounding (~1e-15 on entries of order one)."""
    rng = np.random.default_rng(global_random_seed)
    parametrization = FactoredAttention(L, Q, n_heads, "free")
    theta = rng.standard_normal(parametrization.n_params)
    couplings_mat, _ = parametrization.couplings(theta)
    couplings = couplings_mat.reshape(L, Q, L, Q)
    attention, values = parametrization.factor(couplings)
    assert np.all(attention[:, np.arange(L), np.arange(L)] == 0)
    refit = np.einsum("hij,hab->iajb", attention, values)
    zeros = np.zeros((L, Q))
    assert_allclose(
        zero_sum_gauge(refit, zeros)[0],
        zero_sum_gauge(couplings, zeros)[0],
        atol=1e-10,
    )


def test_factor_is_the_best_factorization(global_random_seed):
    """One head of general couplings: the truncated SVD is the closest rank-one
    tensor (Eckart-Young), closer than any perturbation of it."""
    rng = np.random.default_rng(global_random_seed)
    parametrization = FactoredAttention(L, Q, 1, "free")
    couplings = rng.standard_normal((L, Q, L, Q))
    couplings[np.arange(L), :, np.arange(L), :] = 0.0
    target = zero_sum_gauge(couplings, np.zeros((L, Q)))[0]
    attention, values = parametrization.factor(couplings)

    def distance(A, V):
        fit = np.einsum("hij,hab->iajb", A, V)
        return np.linalg.norm(zero_sum_gauge(fit, np.zeros((L, Q)))[0] - target)

    best = distance(attention, values)
    for _ in range(5):
        A = attention + 0.01 * rng.standard_normal(attention.shape)
        A[:, np.arange(L), np.arange(L)] = 0.0
        V = values + 0.01 * rng.standard_normal(values.shape)
        assert distance(A, V) > best

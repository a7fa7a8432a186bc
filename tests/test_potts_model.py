"""The pseudo-likelihood core against finite differences and brute force.

Each check is exact up to rounding, on codes, weights and parameters drawn from
``global_random_seed``; every tolerance holds for any seed (the reason is given
next to it).
"""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_attn.potts._model import (
    FactoredAttention,
    FullCouplings,
    log_conditionals,
    objective,
    one_hot,
    zero_sum_gauge,
)

L, Q = 4, 3


def _tiny_data(rng, n=25):
    codes = rng.integers(0, Q, size=(n, L))
    return codes, one_hot(codes, Q), rng.uniform(0.2, 2.0, n)


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
def test_objective_matches_loops(parametrization, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes, X, weights = _tiny_data(rng)
    theta = rng.standard_normal(parametrization.n_params)
    value, _ = objective(theta, parametrization, X, weights, 0.3, 0.7)
    couplings_mat, fields = parametrization.couplings(theta)
    expected = _pseudo_likelihood_loop(
        codes, weights, couplings_mat.reshape(L, Q, L, Q), fields, 0.3, 0.7
    )
    # ~100 terms of order one summed in another order: ~1e-15 relative apart.
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_gradient_matches_finite_differences(parametrization, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    _, X, weights = _tiny_data(rng)
    theta = 0.5 * rng.standard_normal(parametrization.n_params)
    _, grad = objective(theta, parametrization, X, weights, 0.1, 0.3)
    eps = 1e-6
    numeric = np.empty_like(theta)
    for k in range(theta.size):
        step = np.zeros_like(theta)
        step[k] = eps
        plus, _ = objective(theta + step, parametrization, X, weights, 0.1, 0.3)
        minus, _ = objective(theta - step, parametrization, X, weights, 0.1, 0.3)
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
    _, X, _ = _tiny_data(rng)
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


def test_one_hot():
    codes = np.array([[0, 2], [1, 1]])
    assert_allclose(one_hot(codes, 3), [[1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0]])

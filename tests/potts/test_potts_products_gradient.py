"""The full model's fast data term and penalty against dense products and loops.

Codes, weights and parameters are drawn from ``global_random_seed``; the
blocks are made as small as one row (``_PRODUCT_ROWS`` lowered) so that the
sums across blocks are exercised, not only a single block's product.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_attn.potts import _model
from sklearn_attn.potts._model import (
    FullCouplings,
    OneHotRows,
    data_term_and_products_gradient,
    log_conditionals,
    objective,
    one_hot,
)

L, Q = 5, 3


def _data(rng, n=30):
    codes = rng.integers(0, Q, size=(n, L))
    weights = rng.uniform(0.2, 2.0, n)
    theta = rng.standard_normal(FullCouplings(L, Q).n_params)
    return codes, weights, theta


def _dense_data_term(codes, weights, couplings_mat, fields):
    """The value and the gradient ``(P - X)^T diag(w) X`` from dense float64
    products over all rows at once."""
    X = one_hot(codes, Q)
    log_p = log_conditionals(X, couplings_mat, fields)
    value = -float(weights @ (log_p.reshape(len(codes), -1) * X).sum(axis=1))
    residual = weights[:, None] * (np.exp(log_p).reshape(len(codes), -1) - X)
    return value, residual.T @ X, residual.sum(axis=0).reshape(L, Q)


@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_products_gradient_matches_dense_products(
    block_rows, gather, monkeypatch, global_random_seed
):
    """float64 products: the dense result up to the order of the sums (~1e-15
    relative for a value of about 100 and gradient entries of order one)."""
    monkeypatch.setattr(_model, "_PRODUCT_ROWS", 1)
    rng = np.random.default_rng(global_random_seed)
    codes, weights, theta = _data(rng)
    couplings_mat, fields = FullCouplings(L, Q).couplings(theta)
    rows = OneHotRows(codes, weights, Q, block_rows=block_rows, gather=gather)
    value, grad_couplings, grad_fields = data_term_and_products_gradient(
        rows, couplings_mat, fields
    )
    expected = _dense_data_term(codes, weights, couplings_mat, fields)
    assert value == pytest.approx(expected[0], rel=1e-12)
    assert grad_couplings.dtype == np.float64
    assert_allclose(grad_couplings, expected[1], rtol=1e-10, atol=1e-12)
    assert_allclose(grad_fields, expected[2], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_products_gradient_in_single_precision(
    block_rows, gather, monkeypatch, global_random_seed
):
    """float32 products, float64 sums of the coupling gradient across blocks:
    logits of order ten carry rounding ~1e-6, the value (about 100) sums 150
    such terms and a gradient entry (order one) at most 30 rounded block terms
    of order one, so 1e-5 relative and 1e-4 absolute leave a margin of ten or
    more. One block's dense gradient stays in float32, a sum of several (and the
    gathers' gradient) is float64."""
    monkeypatch.setattr(_model, "_PRODUCT_ROWS", 1)
    rng = np.random.default_rng(global_random_seed)
    codes, weights, theta = _data(rng)
    model = FullCouplings(L, Q)
    couplings_mat, fields = model.couplings(theta)
    rows = OneHotRows(
        codes, weights, Q, dtype=np.float32, block_rows=block_rows, gather=gather
    )
    value, grad_couplings, grad_fields = data_term_and_products_gradient(
        rows, couplings_mat.astype(np.float32), fields
    )
    expected = _dense_data_term(codes, weights, couplings_mat, fields)
    n_blocks = len(list(rows.blocks(max(rows.block_rows, 1))))
    single = n_blocks == 1 and not gather
    assert grad_couplings.dtype == (np.float32 if single else np.float64)
    assert grad_fields.dtype == np.float64
    assert value == pytest.approx(expected[0], rel=1e-5)
    assert_allclose(grad_couplings, expected[1], rtol=1e-4, atol=1e-4)
    assert_allclose(grad_fields, expected[2], rtol=1e-4, atol=1e-4)


def test_blocks_of_a_given_size(global_random_seed):
    """``blocks(k)`` cuts the rows into blocks of ``k`` whatever ``block_rows``."""
    rng = np.random.default_rng(global_random_seed)
    codes, weights, _ = _data(rng, n=23)
    rows = OneHotRows(codes, weights, Q, block_rows=4)
    blocks = list(rows.blocks(10))
    assert [len(w) for _, w, _, _ in blocks] == [10, 10, 3]
    assert_allclose(np.vstack([b for b, _, _, _ in blocks]), one_hot(codes, Q))
    assert_allclose(np.concatenate([w for _, w, _, _ in blocks]), weights)
    assert all(present is None for _, _, _, present in blocks)
    assert [len(w) for _, w, _, _ in rows.blocks()] == [4] * 5 + [3]
    # One reused buffer: each block as it is made, the last one shorter.
    reused = [block.copy() for block, _, _, _ in rows.blocks(10, reuse=True)]
    assert [len(b) for b in reused] == [10, 10, 3]
    assert_allclose(np.vstack(reused), one_hot(codes, Q))


@pytest.mark.parametrize("scaled", [False, True])
def test_penalty_matches_sums_of_squares(scaled, monkeypatch, global_random_seed):
    """plmc's penalty, in chunks smaller than the fields: ``alpha_h sum h^2 +
    alpha_J sum_{i<j} |J_ij|^2`` and its gradient, ``theta`` left unchanged
    (sums of 100 terms of order one in another order: ~1e-15 relative)."""
    monkeypatch.setattr(_model, "_PENALTY_CHUNK", 4)
    rng = np.random.default_rng(global_random_seed)
    model = FullCouplings(L, Q)
    theta = rng.standard_normal(model.n_params)
    scale = rng.uniform(0.5, 2.0, model.n_params).astype(np.float32)
    start = rng.standard_normal(model.n_params)
    grad = start.copy()
    kept = theta.copy()
    value = model.add_penalty(theta, grad, 0.3, 0.7, scale=scale if scaled else None)
    params = theta / scale if scaled else theta
    fields, blocks = model.split(params)
    expected = 0.3 * (fields**2).sum() + 0.7 * (blocks**2).sum()
    n_fields = L * Q
    alpha = np.r_[np.full(n_fields, 0.3), np.full(model.n_params - n_fields, 0.7)]
    assert value == pytest.approx(expected, rel=1e-12)
    assert_allclose(grad, start + 2.0 * alpha * params, rtol=1e-12, atol=1e-14)
    assert_allclose(theta, kept, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_full_objective_across_small_blocks(
    dtype, gather, monkeypatch, global_random_seed
):
    """The full model's objective in blocks of one and seven rows against one
    block in float64 (float64: the same sums in another order, ~1e-15;
    float32: the tolerances of the single-precision test above)."""
    rng = np.random.default_rng(global_random_seed)
    codes, weights, theta = _data(rng)
    model = FullCouplings(L, Q)
    expected = objective(theta, model, OneHotRows(codes, weights, Q), 0.1, 0.3)
    monkeypatch.setattr(_model, "_PRODUCT_ROWS", 1)
    rel, atol = (1e-12, 1e-12) if dtype == np.float64 else (1e-5, 1e-4)
    for block_rows in (1, 7):
        rows = OneHotRows(
            codes, weights, Q, dtype=dtype, block_rows=block_rows, gather=gather
        )
        value, grad = objective(theta, model, rows, 0.1, 0.3)
        assert grad.dtype == np.float64
        assert value == pytest.approx(expected[0], rel=rel)
        assert_allclose(grad, expected[1], rtol=100 * rel, atol=atol)

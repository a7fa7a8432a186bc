"""Forward pass, squared loss, gradients and value refit of multi-head attention.

The layer maps ``k`` tokens of dimension ``d`` to ``k`` tokens of dimension ``d``:

    F(X) = sum_i softmax(X Theta_i X^T) X W_i,

with the softmax taken row-wise over the key positions (self included) and no
temperature. Optionally only the outputs of the first ``q`` tokens (queries)
are computed; all ``k`` tokens are keys. Everything is batched over samples and
heads as large matrix products, on NumPy or CuPy arrays through the array
module ``xp``; nothing here knows about scikit-learn.

Layout. For a chunk of ``c`` samples ``Xc`` of shape ``(c, k, d)`` (queries
``Xq = Xc[:, :q]``):

* ``Xq.reshape(c q, d) @ [Theta_1 | ... | Theta_m]`` is one GEMM; viewed as
  ``(c, q m, d)`` its rows are the pairs (query ``a``, head ``i``), so the
  scores of all heads of a sample are one product ``Xc[n] @ (.)^T``, a batched
  matmul giving ``S`` of shape ``(c, k, q m)`` with the keys on axis 1, where
  the softmax reductions are fast element-wise operations.
* ``P = S^T Xc`` (batched), of shape ``(c, q m, d)``, viewed as ``(c q, m d)`` is
  ``[S_1 X | ... | S_m X]``, so ``F = P @ [W_1; ...; W_m]`` is one GEMM, and so
  are ``P^T R`` (the value gradient) and ``P^T P`` (the refit's normal
  equations).

The backward pass mirrors this: ``dL/dS_i = R W_i^T X^T`` (one GEMM and a
batched matmul), the softmax backward ``S * (G - rowsum(G * S))``, whose row
sums are the short dot products ``(R W_i^T) . (S_i X)``, and
``dL/dTheta_i = sum_n Xq^T dA_i X`` (a batched matmul and one GEMM). The useful
work of one loss-and-gradient evaluation is ``2 N k m d (5 d + 4 k)``
floating-point operations for ``q = k`` (:func:`useful_flops`).

On the CPU the samples are cut into chunks whose intermediates stay near the
core's cache; chunks are spread over threads, each running single-threaded BLAS
(:func:`sklearn_attn._backend.cpu_workers`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._backend import chunk_bytes
from .._scaling import array_exponent, row_exponents, scale_by_power_of_two

__all__ = [
    "AttentionLayer",
    "multihead_attention",
    "attention_weights",
    "loss_and_gradient",
    "value_normal_equations",
    "solve_values",
    "useful_flops",
    "default_chunk_size",
    "token_norm_bound",
]

# Bytes of per-chunk intermediates aimed at on the CPU. Smaller chunks keep
# the element-wise softmax passes in cache, larger ones pay less Python
# overhead (and hold the GIL less often) per sample; a few MiB, the order of
# the L2 caches of the cores, balances the two, and larger chunks gain
# nothing once the overhead is amortised.
_CPU_CHUNK_BYTES = 2**23


def default_chunk_size(n_tokens, token_dim, n_heads, xp=np):
    """Samples per chunk so that a chunk's intermediates fit the cache (or 1 GiB).

    The budget depends on the array module ``xp``: a core's cache on the CPU,
    1 GiB on a GPU (see :func:`sklearn_attn._backend.chunk_bytes`).
    """
    k, d, m = n_tokens, token_dim, n_heads
    # S, G (k m k each), the stacked XT / P / RW / D (k m d each), X, Y, F (k d).
    per_sample = 8 * (2 * k * m * k + 4 * k * m * d + 3 * k * d)
    return max(1, chunk_bytes(xp, _CPU_CHUNK_BYTES) // per_sample)


def useful_flops(n_samples, n_tokens, token_dim, n_heads):
    """Matrix-product flops of one loss-and-gradient evaluation.

    Five products of ``2 N k m d^2`` flops (``X Theta``, ``P W``, ``P^T R``,
    ``R W^T``, ``X^T D``) and four batched ones of ``2 N m k^2 d`` (scores,
    ``S X``, ``dL/dS``, ``dA X``): ``2 N k m d (5 d + 4 k)``. Element-wise work
    (softmax, its backward, the residual) is not counted.
    """
    n, k, d, m = n_samples, n_tokens, token_dim, n_heads
    return 2 * n * k * m * d * (5 * d + 4 * k)


class AttentionLayer(NamedTuple):
    """Parameters of a multi-head attention layer (a named tuple).

    Attributes
    ----------
    theta : ndarray of shape (n_heads, token_dim, token_dim)
        Attention matrices ``Theta_i``.
    values : ndarray of shape (n_heads, token_dim, token_dim)
        Value-output matrices ``W_i``.
    """

    theta: np.ndarray
    values: np.ndarray


def _chunks(n_samples, chunk_size, executor=None):
    """Slices of at most ``chunk_size`` samples; with threads, >= 2 per thread."""
    chunk_size = max(1, int(chunk_size))
    if executor is not None:
        n_parts = 2 * executor.n_threads
        chunk_size = max(1, min(chunk_size, -(-n_samples // n_parts)))
    return [
        slice(s, min(s + chunk_size, n_samples))
        for s in range(0, n_samples, chunk_size)
    ]


def _map_sum(func, n_samples, chunk_size, executor):
    """Sum the tuples ``func(rows)`` over chunks of rows (threads if given)."""
    chunks = _chunks(n_samples, chunk_size, executor)
    if executor is None or len(chunks) == 1:
        parts = map(func, chunks)
    else:
        parts = executor.map(func, chunks)
    total = None
    for part in parts:
        total = (
            list(part)
            if total is None
            else [t + p for t, p in zip(total, part, strict=True)]
        )
    return total


# -- the layer -----------------------------------------------------------------------


def _side_by_side(mats, xp):
    """``(m, d, e)`` -> ``(d, m e)``: ``[M_1 | M_2 | ... | M_m]``."""
    m, d, e = mats.shape
    return xp.ascontiguousarray(mats.transpose(1, 0, 2).reshape(d, m * e))


# Scores bounded by this in absolute value need no max-shift before the exp:
# e^600 and e^-600 are far from float64 overflow (709.8) and underflow
# (-745), and e^40, e^-40 from float32's (88.7, -87.3, normal numbers); the
# softmax is shift-invariant, so the result is the same.
_UNSHIFTED_SCORE_BOUND = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 40.0}
# Scores bounded by this fraction of the dtype's largest number cannot
# overflow; beyond it they are computed from power-of-two rescaled tokens and
# attention matrices (see _rescaled_scores).
_OVERFLOW_MARGIN = 2.0**-8


class _Heads:
    """What every chunk needs about the attention matrices.

    ``side`` is ``[Theta_1 | ... | Theta_m]``. ``shift`` says whether the
    softmax must subtract each row's maximum: not when
    ``|x_a^T Theta_i x_b| <= max_a ||x_a||^2 ||Theta_i||_F`` is below
    ``_UNSHIFTED_SCORE_BOUND`` of the dtype (skipping it saves two passes over
    the scores).
    """

    def __init__(self, theta, X, xp, max_sq_norm=None):
        self.n_heads = theta.shape[0]
        self.side = _side_by_side(theta, xp)
        if max_sq_norm is None:
            max_sq_norm = token_norm_bound(X, xp)
        with np.errstate(over="ignore"):
            largest = float(xp.sqrt((theta * theta).sum(axis=(1, 2))).max())
            score_bound = max_sq_norm * largest
        # Other dtypes (float16, ...) get float32's bound: safe for float32 and up.
        bound = _UNSHIFTED_SCORE_BOUND.get(np.dtype(theta.dtype), 40.0)
        self.shift = not score_bound <= bound  # NaN: shift
        # Scores that may overflow (inf - inf = NaN in the shift) are formed
        # from rescaled factors instead: exact, and only for extreme inputs.
        self.rescale = not score_bound <= (
            _OVERFLOW_MARGIN * float(np.finfo(theta.dtype).max)
        )
        if self.rescale:
            self.theta_exponent = array_exponent(self.side, xp)
            self.side_scaled = scale_by_power_of_two(
                self.side, -self.theta_exponent, xp
            )


def token_norm_bound(X, xp=np):
    """Largest squared token norm ``max ||x_a||^2`` of ``X`` (for the score bound).

    ``inf`` when it overflows: the scores are then formed from rescaled tokens.
    """
    if not X.size:
        return 0.0
    with np.errstate(over="ignore"):
        return float(xp.einsum("nkd,nkd->nk", X, X).max())


def _rescaled_scores(Xq, Xc, heads, xp):
    """Shifted scores ``s - max_b s`` of a chunk, for scores beyond float range.

    With ``x_n = 2^e_n u_n`` (per sample) and ``Theta = 2^t T`` (powers of two,
    exact), ``s = 2^(2 e_n + t) u_a^T T u_b``: the factors are near one, and
    the shifted score is scaled back by ``ldexp``, where any difference beyond
    the float range becomes ``-inf`` (an attention weight of exactly 0).
    """
    c, q, d = Xq.shape
    exponents = row_exponents(Xc, xp)
    shape = (-1, 1, 1)
    Uc = scale_by_power_of_two(Xc, -exponents.reshape(shape), xp)
    Uq = Uc[:, :q]
    queries = (Uq.reshape(c * q, d) @ heads.side_scaled).reshape(
        c, q * heads.n_heads, d
    )
    S = xp.matmul(Uc, xp.ascontiguousarray(queries.transpose(0, 2, 1)))
    S -= S.max(axis=1, keepdims=True)
    with np.errstate(over="ignore"):
        return scale_by_power_of_two(
            S, (2 * exponents + heads.theta_exponent).reshape(shape), xp
        )


def _attention_keys_first(Xq, Xc, heads, xp):
    """Attention of a chunk as ``(c, k, q m)``: ``S[n, b, (a, i)]`` for query ``a``.

    Keys run along axis 1 so that the softmax reductions are over an outer
    axis, which NumPy vectorises (it reduces a short last axis element by
    element).
    """
    c, q, d = Xq.shape
    if heads.rescale:
        S = _rescaled_scores(Xq, Xc, heads, xp)
    else:
        queries = (Xq.reshape(c * q, d) @ heads.side).reshape(c, q * heads.n_heads, d)
        # A contiguous copy of the transposed queries: BLAS runs faster on it.
        S = xp.matmul(Xc, xp.ascontiguousarray(queries.transpose(0, 2, 1)))
        if heads.shift:
            S -= S.max(axis=1, keepdims=True)
    xp.exp(S, out=S)
    S *= 1.0 / S.sum(axis=1, keepdims=True)  # a multiply is cheaper than a divide
    return S


def _head_outputs(Xq, Xc, heads, xp):
    """``(S, P)``: attention (keys first) and the heads' outputs ``S_i X``.

    ``P`` has shape ``(c, q m, d)``; as ``(c q, m d)`` it is ``[S_1 X | ... | S_m X]``.
    """
    S = _attention_keys_first(Xq, Xc, heads, xp)
    return S, xp.matmul(S.transpose(0, 2, 1), Xc)


def compute_dtype(X):
    """float32 for float32 input (computed in single precision), else float64."""
    return np.dtype(np.float32 if X.dtype == np.float32 else np.float64)


def _as_dtype(array, xp, dtype):
    return xp.ascontiguousarray(array, dtype=dtype)


def _n_queries(n_queries, n_tokens):
    return n_tokens if n_queries is None else int(n_queries)


def attention_weights(X, theta, *, n_queries=None, xp=np, chunk_size=None):
    """Attention probabilities ``softmax(X_n Theta_i X_n^T)`` of every sample and head.

    Parameters
    ----------
    X : array of shape (n_samples, n_tokens, token_dim)
    theta : array of shape (n_heads, token_dim, token_dim)
    n_queries : int, default=None
        Only the rows of the first ``n_queries`` tokens; ``None``: all.
    xp : module, default=numpy
        Array module of ``X`` and ``theta``.
    chunk_size : int, default=None
        Samples per chunk; ``None`` picks one from the sizes.

    Returns
    -------
    S : array of shape (n_samples, n_heads, n_queries, n_tokens)
        ``S[n, i, a, b]``: weight of key ``b`` in the output at token ``a`` of
        head ``i``; each row sums to one.
    """
    dtype = compute_dtype(X)
    X, theta = _as_dtype(X, xp, dtype), _as_dtype(theta, xp, dtype)
    n, k, d = X.shape
    m, q = theta.shape[0], _n_queries(n_queries, k)
    chunk_size = chunk_size or default_chunk_size(k, d, m, xp)
    heads = _Heads(theta, X, xp)
    out = xp.empty((n, m, q, k), dtype=dtype)
    for rows in _chunks(n, chunk_size):
        Xc = X[rows]
        S = _attention_keys_first(Xc[:, :q], Xc, heads, xp)  # [n, b, (a, i)]
        out[rows] = S.reshape(-1, k, q, m).transpose(0, 3, 2, 1)
    return out


def forward(X, theta, values, *, n_queries=None, xp=np, chunk_size=None, executor=None):
    """Layer output ``F(X) = sum_i softmax(X Theta_i X^T) X W_i``.

    Computed in float32 for float32 ``X``, else in float64.

    Parameters
    ----------
    X : array of shape (n_samples, n_tokens, token_dim)
    theta, values : arrays of shape (n_heads, token_dim, token_dim)
    n_queries : int, default=None
        Only the outputs of the first ``n_queries`` tokens (all tokens are
        keys); ``None``: all.
    xp : module, default=numpy
    chunk_size : int, default=None
    executor : Workers, default=None
        Threads over chunks (see :func:`sklearn_attn._backend.cpu_workers`).

    Returns
    -------
    F : array of shape (n_samples, n_queries, token_dim)
    """
    dtype = compute_dtype(X)
    X = _as_dtype(X, xp, dtype)
    n, k, d = X.shape
    m, q = theta.shape[0], _n_queries(n_queries, k)
    chunk_size = chunk_size or default_chunk_size(k, d, m, xp)
    heads = _Heads(_as_dtype(theta, xp, dtype), X, xp)
    values_stacked = _as_dtype(values, xp, dtype).reshape(m * d, d)
    out = xp.empty((n, q, d), dtype=dtype)

    def fill(rows):
        Xc = X[rows]
        _, P = _head_outputs(Xc[:, :q], Xc, heads, xp)
        out[rows] = (P.reshape(-1, m * d) @ values_stacked).reshape(-1, q, d)
        return ()

    chunks = _chunks(n, chunk_size, executor)
    if executor is None or len(chunks) == 1:
        for rows in chunks:
            fill(rows)
    else:
        list(executor.map(fill, chunks))
    return out


def loss_and_gradient(
    X,
    Y,
    theta,
    values,
    *,
    xp=np,
    chunk_size=None,
    executor=None,
    max_sq_norm=None,
    sample_weight=None,
):
    """Squared loss ``(1 / 2N) sum_n ||F(X_n) - Y_n||_F^2`` and its gradients.

    With ``sample_weight`` (``f_n >= 0`` summing to one) the loss is
    ``(1 / 2) sum_n f_n ||F(X_n) - Y_n||_F^2``.

    Parameters
    ----------
    X : array of shape (n_samples, n_tokens, token_dim)
        float64, or float32 to compute in single precision (the loss is still
        summed in float64).
    Y : array of shape (n_samples, n_queries, token_dim)
        Targets of the first ``n_queries`` tokens (usually all of them), in
        the dtype of ``X``.
    theta, values : arrays of shape (n_heads, token_dim, token_dim)
        In the dtype of ``X``.
    xp : module, default=numpy
    chunk_size : int, default=None
    executor : Workers, default=None
    max_sq_norm : float, default=None
        ``token_norm_bound(X)`` (or any upper bound), to save recomputing it.
    sample_weight : array of shape (n_samples,), default=None
        Weights of the samples, normalised to sum to one, in the dtype of
        ``X``; ``None``: ``1 / N`` each.

    Returns
    -------
    loss : float
    grad_theta, grad_values : arrays of shape (n_heads, token_dim, token_dim)
        On the device of the inputs.
    """
    n, k, d = X.shape
    m, q = theta.shape[0], Y.shape[1]
    chunk_size = chunk_size or default_chunk_size(k, d, m, xp)
    heads = _Heads(theta, X, xp, max_sq_norm)
    values_stacked = xp.ascontiguousarray(values.reshape(m * d, d))
    values_t_side = _side_by_side(values.transpose(0, 2, 1), xp)  # [W_1^T | ...]
    scale = 1.0 / n

    def chunk(rows):
        Xc = X[rows]
        c = Xc.shape[0]
        Xq = Xc[:, :q]
        S, P = _head_outputs(Xq, Xc, heads, xp)
        P_side = P.reshape(c * q, m * d)
        R = P_side @ values_stacked
        R -= Y[rows].reshape(c * q, d)
        if sample_weight is None:
            # float64 sum of squares whatever the dtype (BLAS sdot sums in float32).
            sq = (
                xp.vdot(R, R)
                if R.dtype == np.float64
                else (R * R).sum(dtype=np.float64)
            )
            loss = 0.5 * scale * sq
            R *= scale
        else:
            weights = sample_weight[rows]
            R_rows = R.reshape(c, q * d)
            sq = (R_rows * R_rows).sum(axis=1, dtype=np.float64)
            loss = 0.5 * float(sq @ weights.astype(np.float64))
            R_rows *= weights[:, None]
        grad_values = P_side.T @ R
        # dL/dS[a, i, b] = (W_i r_a) . x_b; its row sums against S are
        # (W_i r_a) . (S_i X)_a, a short dot product per row (einsum is fast).
        RW = (R @ values_t_side).reshape(c, q * m, d)
        row_dot = xp.einsum("nre,nre->nr", RW, P)
        G = xp.matmul(Xc, xp.ascontiguousarray(RW.transpose(0, 2, 1)))  # keys first
        # Softmax backward: dA = S * (G - sum_b G S).
        G -= row_dot[:, None, :]
        G *= S
        D = xp.matmul(G.transpose(0, 2, 1), Xc).reshape(c * q, m * d)
        grad_theta = Xq.reshape(c * q, d).T @ D
        return loss, grad_theta, grad_values

    loss, grad_theta_side, grad_values = _map_sum(chunk, n, chunk_size, executor)
    grad_theta = grad_theta_side.reshape(d, m, d).transpose(1, 0, 2)
    return float(loss), grad_theta, grad_values.reshape(m, d, d)


def value_normal_equations(
    X,
    Y,
    theta,
    *,
    xp=np,
    chunk_size=None,
    executor=None,
    max_sq_norm=None,
    sample_weight=None,
):
    """``(P^T P, P^T Y)`` of the least-squares problem for the values given ``theta``.

    With ``theta`` fixed the layer is linear in ``W = [W_1; ...; W_m]``:
    ``F = P W`` with ``P = [S_1 X | ... | S_m X]`` of shape ``(N q, m d)``.
    With ``sample_weight`` ``f``: ``(P^T diag(f) P, P^T diag(f) Y)``, each
    sample's weight on its ``q`` rows.

    Parameters
    ----------
    X : float64 or float32 array of shape (n_samples, n_tokens, token_dim)
    Y : array of shape (n_samples, n_queries, token_dim), in the dtype of ``X``
    theta : array of shape (n_heads, token_dim, token_dim), in the dtype of ``X``
    xp, chunk_size, executor, max_sq_norm, sample_weight
        As in :func:`loss_and_gradient`.

    Returns
    -------
    gram : array of shape (m d, m d)
    rhs : array of shape (m d, d)
    """
    n, k, d = X.shape
    m, q = theta.shape[0], Y.shape[1]
    chunk_size = chunk_size or default_chunk_size(k, d, m, xp)
    heads = _Heads(theta, X, xp, max_sq_norm)

    def chunk(rows):
        Xc = X[rows]
        _, P = _head_outputs(Xc[:, :q], Xc, heads, xp)
        P = P.reshape(-1, m * d)
        if sample_weight is None:
            return P.T @ P, P.T @ Y[rows].reshape(-1, d)
        weighted = P * xp.repeat(sample_weight[rows], q)[:, None]
        return weighted.T @ P, weighted.T @ Y[rows].reshape(-1, d)

    gram, rhs = _map_sum(chunk, n, chunk_size, executor)
    return gram, rhs


def solve_values(gram, rhs, n_samples, alpha):
    """Ridge solution ``(P^T P + N alpha I)^+ P^T Y`` for the stacked values (host).

    Minimises ``(1 / 2N) ||P W - Y||^2 + (alpha / 2) ||W||^2``, the loss of the
    layer restricted to the values. With ``alpha = 0`` it is the minimum-norm
    least-squares solution: eigenvalues below ``size * eps * largest`` are
    treated as zero, as :func:`numpy.linalg.lstsq` treats singular values,
    with the ``eps`` of the Gram matrix's dtype (float32 data, float32 eps).

    Parameters
    ----------
    gram : ndarray of shape (m d, m d)
    rhs : ndarray of shape (m d, d)
    n_samples : int
    alpha : float

    Returns
    -------
    values : ndarray of shape (m, d, d)
    """
    # A float32 Gram matrix (float32 data) is accurate to float32's eps only.
    eps = np.finfo(np.result_type(gram.dtype, np.float32)).eps
    gram = np.asarray(gram, dtype=np.float64)
    size, d = rhs.shape
    evals, evecs = np.linalg.eigh(gram)
    shifted = evals + n_samples * alpha
    # P^T P is resolved only above eps * largest eigenvalue.
    keep = shifted > size * eps * max(evals[-1], 0.0)
    inverse = np.zeros_like(shifted)
    inverse[keep] = 1.0 / shifted[keep]
    coef = evecs @ (inverse[:, None] * (evecs.T @ np.asarray(rhs, dtype=np.float64)))
    return coef.reshape(size // d, d, d)


def multihead_attention(X, theta, values, *, return_attention=False):
    """Evaluate a multi-head softmax attention layer on NumPy arrays.

    Computes ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` for every sample,
    the softmax taken row-wise over the key positions (self included) and
    with no temperature.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, token_dim)
        Token input.
    theta : array-like of shape (n_heads, token_dim, token_dim)
        Attention matrices ``Theta_i``.
    values : array-like of shape (n_heads, token_dim, token_dim)
        Value-output matrices ``W_i``.
    return_attention : bool, default=False
        Also return the attention probabilities.

    Returns
    -------
    F : ndarray of shape (n_samples, n_tokens, token_dim)
        Layer output, float64.
    attention : ndarray of shape (n_samples, n_heads, n_tokens, n_tokens)
        ``attention[n, i, a, b]`` is the weight of token ``b`` in output token
        ``a`` of head ``i``; only when ``return_attention=True``.

    See Also
    --------
    sklearn_attn.MultiHeadAttentionLearner : Learns ``theta`` and ``values`` from data.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import multihead_attention
    >>> X = np.ones((1, 3, 2))
    >>> theta, values = np.zeros((1, 2, 2)), np.eye(2)[None]
    >>> F, S = multihead_attention(X, theta, values, return_attention=True)
    >>> F.shape, S[0, 0, 0]
    ((1, 3, 2), array([0.333..., 0.333..., 0.333...]))
    """
    X = np.asarray(X, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(
            f"X must have shape (n_samples, n_tokens, token_dim); got shape {X.shape}."
        )
    d = X.shape[2]
    for name, array in (("theta", theta), ("values", values)):
        if array.ndim != 3 or array.shape[1:] != (d, d):
            raise ValueError(
                f"{name} must have shape (n_heads, {d}, {d}) for tokens of dimension "
                f"{d}; got shape {array.shape}."
            )
    if theta.shape[0] != values.shape[0]:
        raise ValueError(
            f"theta and values must have the same number of heads; got "
            f"{theta.shape[0]} and {values.shape[0]}."
        )
    F = forward(X, theta, values)
    if return_attention:
        return F, attention_weights(X, theta)
    return F

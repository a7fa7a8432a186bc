"""Pseudo-likelihood of generalized Potts models: conditionals, objective, gradients.

One topic, the objective and its gradient: the data term (by one-hot products
or by gathers), the two parametrizations whose chain rule maps to it, and the
function that joins them; they change together and are tested together
against the same loops and finite differences. The compiled loops of the
gathers are apart, in ``_gather.py``.

A model on ``L`` sites with ``q`` states has couplings ``J[i, a, j, b]`` (zero
diagonal blocks) and fields ``h[i, a]``; the conditional of site ``i`` is

    p(s_i = a | s_-i) = softmax_a( h[i, a] + sum_{j != i} J[i, a, j, s_j] ).

A site may also be missing (code ``-1``, such as a gap read as missing data,
plmc's ``-g``): it has no conditional of its own and adds nothing to the
others', so its row of the one-hot encoding is zero and its terms leave the
sum; the model is then the Potts model of the sites a sequence has.

With the one-hot encoding ``X`` of shape ``(n, L q)`` and ``J`` stored as the
``(L q, L q)`` matrix ``J_mat``, all ``n L`` conditionals are one matrix product,
``X @ J_mat.T + h``, and the gradient of the weighted negative
pseudo-log-likelihood with respect to ``J_mat`` is another,
``(P - X).T @ diag(w) @ X``. Every parametrization (the full plmDCA tensor, or
factored self-attention ``J = sum_h A^h (x) V^h``) maps its parameters to
``(J_mat, h)`` and pulls the gradient back by the chain rule, so there is one
numerical core. On the CPU the two products can also be gathers from the codes
(``OneHotRows(gather=True)``, the kernels of ``_gather.py``), which skip the
zeros of ``X``. Nothing here knows about scikit-learn; arrays go through ``xp``
(NumPy or CuPy).

The objective is plmc's, in its units: ``-sum_s w_s sum_i log p(s_i | s_-i)``
plus ``alpha_fields * sum h^2 + alpha_couplings / 2 * sum_{i != j} J^2`` (which is
plmc's ``sum_{i<j}`` when ``J`` is symmetric).
"""

from __future__ import annotations

import numpy as np

from .._backend import blas_threads, chunk_bytes
from . import _gather

__all__ = [
    "one_hot",
    "log_conditionals",
    "OneHotRows",
    "data_term_and_gradient",
    "data_term_and_products_gradient",
    "FullCouplings",
    "FactoredAttention",
    "zero_sum_gauge",
]


def one_hot(codes, n_states, xp=np, dtype=np.float64):
    """``(n, L)`` integer codes to the ``(n, L * n_states)`` one-hot matrix.

    A missing site (code ``-1``) has a zero row.
    """
    n, n_sites = codes.shape
    out = xp.zeros((n, n_sites * n_states), dtype=dtype)
    present = codes >= 0
    flat = xp.where(present, codes, 0) + n_states * xp.arange(n_sites)[None, :]
    out[xp.arange(n)[:, None], flat] = present
    return out


def _log_softmax_sites(logits, n_sites, n_states, xp):
    """Log-softmax over the states of each site, in place; the (n, L, q) view."""
    z = logits.reshape(-1, n_sites, n_states)
    z -= z.max(axis=2, keepdims=True)
    z -= xp.log(xp.exp(z).sum(axis=2, keepdims=True))
    return z


def log_conditionals(X_onehot, couplings_mat, fields, xp=np):
    """Log-conditionals ``log p(s_i = a | s_-i)`` of every site, shape (n, L, q).

    Parameters
    ----------
    X_onehot : array of shape (n, L * q)
    couplings_mat : array of shape (L * q, L * q), zero diagonal blocks
    fields : array of shape (L, q)
    """
    n_sites, n_states = fields.shape
    logits = X_onehot @ couplings_mat.T
    logits += fields.reshape(1, -1)
    return _log_softmax_sites(logits, n_sites, n_states, xp)


class OneHotRows:
    """The weighted alignment as blocks of one-hot rows in a compute dtype.

    The whole ``(n, L q)`` one-hot matrix would hold ``n L q`` numbers (40 MB in
    float32 for a protein family of 9,000 distinct sequences of length 53);
    each block is built from the codes when needed instead, for a small
    fraction of the cost of the two products that use it. In ``float32`` the
    products run at about twice the double-precision rate, while every sum
    across blocks (the objective, the gradient) accumulates in ``float64``.

    Parameters
    ----------
    codes : array of shape (n, L), integer codes in ``[0, n_states)``
        Or ``-1`` for a missing site, whose one-hot row is zero.
    weights : array of shape (n,)
    n_states : int
    dtype : {np.float64, np.float32}, default=np.float64
        Precision of the products.
    block_rows : int or None, default=None
        Rows per block; ``None`` chooses blocks of about 4 MB on the CPU (the
        backend's chunk size on a GPU).
    xp : array module, default=numpy
    gather : bool, default=False
        Whether the products are gathers from the codes by compiled kernels
        (:mod:`._gather`, NumPy and numba only) instead of one-hot products;
        the kernels then run on as many threads as BLAS would.
    """

    def __init__(
        self,
        codes,
        weights,
        n_states,
        *,
        dtype=np.float64,
        block_rows=None,
        xp=np,
        gather=False,
    ):
        if gather and xp is not np:
            raise ValueError("gather=True computes on the CPU: xp must be numpy.")
        if gather and not _gather.available():
            raise ImportError(
                "gather=True needs numba: pip install 'sklearn-attn[fast]'."
            )
        self.codes = codes
        self.weights = weights
        self.n_states = n_states
        self.dtype = np.dtype(dtype)
        n, n_sites = codes.shape
        if block_rows is None:
            # A GPU wants few large blocks; a CPU, blocks that stay in cache.
            width = n_sites * n_states * self.dtype.itemsize
            block_rows = max(64, chunk_bytes(xp, 4 * 2**20) // width)
        self.block_rows = int(min(max(block_rows, 1), max(n, 1)))
        self.xp = xp
        #: Whether some site of some sequence is missing (code ``-1``).
        self.has_missing = bool((codes < 0).any())
        self.gather = bool(gather)
        self.n_threads = blas_threads() if self.gather else 1
        #: The state of most sequences at each site, which the logits by gathers
        #: are relative to (None without gathers).
        self.reference_states = (
            _gather.reference_states(codes, n_states) if self.gather else None
        )
        self._buffers = {}
        self._gather_blocks = {}

    def buffer(self, name, shape, dtype):
        """A scratch array named ``name``, kept for the next call with the same
        shape and dtype: evaluations of the objective then reuse its memory
        instead of paging in a fresh array each time. Its content is
        whatever the last user left."""
        key = (name, tuple(shape), np.dtype(dtype))
        if key not in self._buffers:
            self._buffers[key] = self.xp.empty(shape, dtype)
        return self._buffers[key]

    def gather_blocks(self, block_rows):
        """``(weights, positions, present, sites, groups)`` of each block of
        ``block_rows`` rows, for the gather kernels; made once and kept.

        ``positions`` and ``present`` are those of :meth:`blocks`; ``sites``
        are the block's :func:`~._gather.relative_sites` (the rows of the
        coupling panels, relative to :attr:`reference_states`, that each
        sequence sums), and ``groups`` the block's
        :func:`~._gather.site_groups`.
        """
        step = max(int(block_rows), 1)
        if step not in self._gather_blocks:
            n_sites = self.codes.shape[1]
            offsets = self.n_states * np.arange(n_sites)
            blocks = []
            for start in range(0, self.n_rows, step):
                block = self.codes[start : start + step]
                positions = block + offsets
                present = None
                if self.has_missing:
                    present = block >= 0
                    positions = np.where(present, positions, offsets)
                blocks.append(
                    (
                        self.weights[start : start + step],
                        positions,
                        present,
                        _gather.relative_sites(
                            block, self.reference_states, self.n_states
                        ),
                        _gather.site_groups(block, self.n_states),
                    )
                )
            self._gather_blocks[step] = blocks
        return self._gather_blocks[step]

    @property
    def n_rows(self):
        return self.codes.shape[0]

    def blocks(self, block_rows=None, *, reuse=False):
        """``(onehot, weights, positions, present)`` of each block of rows.

        ``positions[s, i]`` is the column of ``onehot`` that is one for site ``i``
        of sequence ``s``; ``present`` is None when no site of the alignment is
        missing, else the block's ``(rows, L)`` mask of the sites present (a
        missing site's position is its first state's column, which stays
        zero). ``block_rows`` overrides :attr:`block_rows`. With
        ``reuse``, every block is written into the same buffer (only the ones
        of the block before are cleared), so a block is valid until the next
        one is made: a loop that uses each block once then neither allocates
        nor zeroes a block's memory again.
        """
        xp = self.xp
        n_sites = self.codes.shape[1]
        offsets = self.n_states * xp.arange(n_sites)
        step = self.block_rows if block_rows is None else max(int(block_rows), 1)
        buffer = previous = None
        for start in range(0, self.n_rows, step):
            rows = slice(start, start + step)
            block = self.codes[rows]
            positions = block + offsets
            present, ones = None, 1.0
            if self.has_missing:
                present = block >= 0
                positions = xp.where(present, positions, offsets)
                ones = present.astype(self.dtype)
            if not reuse:
                onehot = xp.zeros(
                    (positions.shape[0], n_sites * self.n_states), self.dtype
                )
            elif buffer is None:
                buffer = xp.zeros(
                    (positions.shape[0], n_sites * self.n_states), self.dtype
                )
                onehot = buffer
            else:
                xp.put_along_axis(buffer[: previous.shape[0]], previous, 0.0, axis=1)
                onehot = buffer[: positions.shape[0]]
            xp.put_along_axis(onehot, positions, ones, axis=1)
            previous = positions
            yield onehot, self.weights[rows], positions, present


# A site's exponentials are shifted by the largest logit of that site in the
# block; a sequence whose own largest logit lies this far below (so that its
# normaliser falls towards float32's underflow) sends the block to an exact
# per-sequence shift instead.
_SMALLEST_NORMALISER = 1e-30


def _block_residual(product, weights, positions, present, logits, fields_row, xp):
    """One block's data term; leaves ``w_s (p - x)`` in ``logits``.

    ``logits`` is a buffer of the block's shape; ``product(logits)`` writes
    the block's ``X @ J_mat.T`` into it (a one-hot product or a gather), to
    which the fields are added; then it holds the exponentials, and last the
    derivative of the block's value with respect to the logits,
    ``w_s (p - x)``, zero at the missing sites (``present`` False). Returns
    the block's ``-sum_s w_s sum_{i present} log p(s_i | s_-i)``.
    """
    n_sites = positions.shape[1]
    product(logits)
    logits += fields_row
    z = logits.reshape(logits.shape[0], n_sites, -1)
    # log p(s_i | s_-i) is the observed state's logit less the site's log
    # normaliser: no log-probability of the other states is needed.
    observed = xp.take_along_axis(logits, positions, axis=1)
    if present is not None:
        observed *= present
    observed = observed.sum(axis=1, dtype=np.float64)
    # Reductions over the rows are fast; over the q states of a site, slow.
    top = logits.max(axis=0).reshape(n_sites, -1).max(axis=1)
    top = xp.broadcast_to(top[None, :, None], (z.shape[0], n_sites, 1))
    z -= top
    xp.exp(z, out=z)  # the logits' buffer now holds the exponentials
    total = z.sum(axis=2, keepdims=True)
    if float(total.min()) < _SMALLEST_NORMALISER:
        # Rare: recompute the block's logits, shifted sequence by sequence.
        product(logits)
        logits += fields_row
        top = z.max(axis=2, keepdims=True)
        z -= top
        xp.exp(z, out=z)
        total = z.sum(axis=2, keepdims=True)
    site_norms = xp.log(total) + top
    if present is not None:
        site_norms = site_norms[:, :, 0] * present
    log_norm = site_norms.sum(axis=tuple(range(1, site_norms.ndim)), dtype=np.float64)
    value = -float(weights @ (observed - log_norm))
    # d value / d logits = w_s (p - x), in the same buffer.
    z /= total
    if present is not None:
        z *= present[:, :, None]  # a missing site has no conditional
    # Less the one-hot rows: a one at each present site's observed state.
    index = positions + logits.shape[1] * xp.arange(positions.shape[0])[:, None]
    if present is not None:
        index = index[present]
    logits.reshape(-1)[index] -= 1.0
    logits *= weights.astype(logits.dtype)[:, None]
    return value


def _dense_product(onehot, couplings_t, xp):
    return lambda out: xp.matmul(onehot, couplings_t, out=out)


def _coupling_panels(rows, couplings_t):
    """``couplings_t`` (``J_mat.T``, in ``rows.dtype``) in the column panels the
    logits kernel reads (:func:`~._gather.relative_panels`, relative to the
    rows' reference states), in a buffer of ``rows``."""
    width = couplings_t.shape[0]
    n_sites = rows.reference_states.shape[0]
    shape = _gather.panels_shape(width + n_sites, width, rows.dtype.itemsize)
    return _gather.relative_panels(
        couplings_t,
        rows.reference_states,
        rows.n_states,
        shape[2],
        out=rows.buffer("panels", shape, rows.dtype),
    )


def _gather_data_term(rows, panels, fields_row, add_gradient, gradient):
    """``(value, grad_fields)`` by the gather kernels; each block's residual
    is added to ``gradient`` by ``add_gradient`` (:func:`~._gather.gather_gradient`
    or :func:`~._gather.gather_pair_gradient`).

    ``panels`` are :func:`_coupling_panels`; ``grad_fields`` is float64 of
    shape ``(L q,)``.
    """
    width = fields_row.shape[1]
    grad_fields = np.zeros(width)
    step = max(rows.block_rows, _PRODUCT_ROWS)
    logits = rows.buffer("logits", (min(step, rows.n_rows), width), rows.dtype)
    value = 0.0
    for weights, positions, present, sites, groups in rows.gather_blocks(step):
        residual = logits[: weights.shape[0]]
        _gather.gather_logits(panels, sites, residual, n_threads=rows.n_threads)
        value += _gather.softmax_residual(
            residual,
            fields_row,
            positions,
            present,
            weights,
            n_threads=rows.n_threads,
        )
        column_sums = residual.sum(axis=0, dtype=np.float64)
        grad_fields += column_sums
        residual_shape = _gather.panels_shape(*residual.shape, rows.dtype.itemsize)
        add_gradient(
            groups,
            residual,
            gradient,
            n_threads=rows.n_threads,
            panels=rows.buffer("residual panels", residual_shape, rows.dtype),
            column_sums=column_sums,
        )
    return value, grad_fields


def _gather_products_data_term(rows, couplings_t, fields_row, n_states):
    """``(value, grad_couplings, grad_fields)`` by the gather kernels.

    ``couplings_t`` is ``J_mat.T`` in ``rows.dtype``. The float64 coupling
    gradient is a buffer of ``rows``, which the next call overwrites.
    """
    width = couplings_t.shape[0]
    panels = _coupling_panels(rows, couplings_t)
    grad_couplings = rows.buffer("gradient", (width, width), np.float64)
    grad_couplings[...] = 0.0
    value, grad_fields = _gather_data_term(
        rows, panels, fields_row, _gather.gather_gradient, grad_couplings
    )
    return value, grad_couplings, grad_fields.reshape(-1, n_states)


def _gather_pairs_data_term(rows, parametrization, theta, scale=None):
    """The full model's data term by gathers, its gradient in the parameter vector.

    No ``(L q)^2`` gradient is formed: each block's gradient goes straight
    into the pairs of the vector (:func:`~._gather.gather_pair_gradient`),
    and ``J_mat`` lives only until its panels are made, so that the
    evaluation holds at most two arrays of the couplings' size at once
    (``J_mat`` and its panels, then the panels and the gradient).
    """
    couplings_mat, fields = parametrization.couplings(
        theta, np, dtype=rows.dtype, scale=scale
    )
    panels = _coupling_panels(rows, couplings_mat)  # symmetric: J_mat.T is J_mat
    del couplings_mat
    fields_row = fields.reshape(1, -1).astype(rows.dtype)
    grad = np.empty(parametrization.n_params)
    grad_fields, pairs = parametrization.split(grad)
    pairs[...] = 0.0
    value, data_grad_fields = _gather_data_term(
        rows, panels, fields_row, _gather.gather_pair_gradient, pairs
    )
    grad_fields.reshape(-1)[...] = data_grad_fields
    return value, grad


def data_term_and_gradient(rows, couplings_mat, fields, xp=np, *, symmetric=False):
    """Weighted negative pseudo-log-likelihood and its gradient in ``(J_mat, h)``.

    Parameters
    ----------
    rows : OneHotRows
    couplings_mat : array of shape (L * q, L * q), zero diagonal blocks
    fields : array of shape (L, q)
    symmetric : bool, default=False
        Whether ``couplings_mat`` is symmetric (then it is used as it is, with
        no transposed copy).

    Returns
    -------
    value : float
        ``-sum_s w_s sum_i log p(s_i | s_-i)``.
    grad_couplings : array of shape (L * q, L * q), float64
        Gradient with respect to every entry of ``J_mat`` (diagonal blocks
        included; parametrizations ignore them). With ``rows.gather``, a
        buffer of ``rows`` that the next call overwrites.
    grad_fields : array of shape (L, q), float64
    """
    n_sites, n_states = fields.shape
    width = n_sites * n_states
    couplings_t = couplings_mat if symmetric else couplings_mat.T
    couplings_t = xp.ascontiguousarray(couplings_t, dtype=rows.dtype)
    fields_row = fields.reshape(1, width).astype(rows.dtype)
    if rows.gather:
        return _gather_products_data_term(rows, couplings_t, fields_row, n_states)
    grad_fields = xp.zeros(width) if rows.has_missing else None
    value = 0.0
    grad_couplings = xp.zeros((width, width))
    half = width // 2
    for onehot, weights, positions, present in rows.blocks():
        logits = xp.empty(onehot.shape, dtype=rows.dtype)
        value += _block_residual(
            _dense_product(onehot, couplings_t, xp),
            weights,
            positions,
            present,
            logits,
            fields_row,
            xp,
        )
        # In two column panels: the float32 product before its float64 sum is
        # then half the size of J.
        grad_couplings[:, :half] += logits.T @ onehot[:, :half]
        grad_couplings[:, half:] += logits.T @ onehot[:, half:]
        if grad_fields is not None:
            grad_fields += logits.sum(axis=0, dtype=np.float64)
    if grad_fields is None:
        grad_fields = _fields_gradient(grad_couplings, n_states)
    return value, grad_couplings, grad_fields.reshape(n_sites, n_states)


def _fields_gradient(grad_couplings, n_states):
    """The fields' gradient ``sum_s w_s (p - x)`` of an alignment with no
    missing site, read off the coupling gradient in float64: every site of a
    sequence then has exactly one state, so the gradient's columns of any one
    site sum to it."""
    return grad_couplings[:, :n_states].sum(axis=1, dtype=np.float64)


# The gradient's product ``D^T X`` of a block writes all (L q)^2 entries
# whatever the block's rows, and the logits' product reads all of ``J_mat``:
# blocks of at least this many rows keep that memory traffic small beside the
# products' 2 rows (L q)^2 flops.
_PRODUCT_ROWS = 2048


def data_term_and_products_gradient(rows, couplings_mat, fields, xp=np):
    """The data term of a symmetric ``J_mat`` and its gradient, in large blocks.

    The same value and gradient as :func:`data_term_and_gradient` with
    ``symmetric=True``, up to rounding, computed for speed: blocks of at
    least 2,048 rows and buffers reused across blocks, so that the float64
    sum of the blocks' coupling gradients makes few passes over an
    ``(L q)^2`` array. Each block's product is in ``rows.dtype``; the value
    and the sum over blocks accumulate in float64, so
    the rounding does not grow with the number of blocks.

    Parameters
    ----------
    rows : OneHotRows
    couplings_mat : array of shape (L * q, L * q) in ``rows.dtype``
        Symmetric, zero diagonal blocks; used as it is.
    fields : array of shape (L, q)

    Returns
    -------
    value : float
        ``-sum_s w_s sum_i log p(s_i | s_-i)``.
    grad_couplings : array of shape (L * q, L * q)
        In ``rows.dtype`` for a single block, else float64 (always with
        ``rows.gather``, then a buffer of ``rows`` that the next call
        overwrites):
        ``sum_s w_s (p_s - x_s) x_s^T``, whose blocks ``(i, j)`` and
        transposed ``(j, i)`` together make the gradient of a coupling
        ``J_ij`` (diagonal blocks included; they are ignored).
    grad_fields : array of shape (L, q), float64
    """
    n_sites, n_states = fields.shape
    width = n_sites * n_states
    couplings = xp.ascontiguousarray(couplings_mat, dtype=rows.dtype)
    fields_row = fields.reshape(1, width).astype(rows.dtype)
    if rows.gather:
        return _gather_products_data_term(rows, couplings, fields_row, n_states)
    grad_fields = xp.zeros(width) if rows.has_missing else None
    step = max(rows.block_rows, _PRODUCT_ROWS)
    value = 0.0
    grad_couplings = scratch = logits = None
    for onehot, weights, positions, present in rows.blocks(step, reuse=True):
        if logits is None:
            logits = xp.empty((onehot.shape[0], width), dtype=rows.dtype)
        residual = logits[: onehot.shape[0]]
        value += _block_residual(
            _dense_product(onehot, couplings, xp),
            weights,
            positions,
            present,
            residual,
            fields_row,
            xp,
        )
        if grad_fields is not None:
            grad_fields += residual.sum(axis=0, dtype=np.float64)
        if grad_couplings is None:
            grad_couplings = xp.matmul(residual.T, onehot)
            continue
        if scratch is None:
            scratch = grad_couplings
            grad_couplings = scratch.astype(np.float64)
        grad_couplings += xp.matmul(residual.T, onehot, out=scratch)
    if grad_fields is None:
        grad_fields = _fields_gradient(grad_couplings, n_states)
    return value, grad_couplings, grad_fields.reshape(n_sites, n_states)


def zero_sum_gauge(couplings, fields):
    """Move couplings and fields to the zero-sum gauge; conditionals are unchanged.

    Each block ``J[i, :, j, :]`` loses its row and column means (and gains its
    grand mean); the removed ``J_ij(a, .)`` parts move into the fields of site
    ``i``. Parts that do not depend on ``a`` cancel in the conditional of ``i``.
    """
    row_mean = couplings.mean(axis=3, keepdims=True)  # J_ij(a, .)
    col_mean = couplings.mean(axis=1, keepdims=True)  # J_ij(., b)
    grand = couplings.mean(axis=(1, 3), keepdims=True)
    gauged = couplings - row_mean - col_mean + grand
    shift = (row_mean - grand)[..., 0].sum(
        axis=2
    )  # sum over j of J_ij(a, .) - J_ij(., .)
    return gauged, fields + shift


def _zero_diagonal_blocks(matrix, n_sites, n_states, xp=np):
    view = matrix.reshape(n_sites, n_states, n_sites, n_states)
    idx = xp.arange(n_sites)
    view[idx, :, idx, :] = 0.0
    return matrix


_PENALTY_CHUNK = 2**16


class FullCouplings:
    """plmDCA's parametrization: a symmetric coupling tensor and fields.

    The parameter vector holds the fields, then ``J[i, :, j, :]`` for ``i < j``
    (as plmc stores them), so ``J`` is symmetric by construction.
    """

    #: ``J`` is symmetric, and the penalty is computed on the parameters.
    symmetric = True

    def __init__(self, n_sites, n_states):
        self.n_sites, self.n_states = n_sites, n_states
        self._pairs = np.triu_indices(n_sites, 1)
        self.n_params = n_sites * n_states + len(self._pairs[0]) * n_states**2

    def split(self, theta):
        L, q = self.n_sites, self.n_states
        fields = theta[: L * q].reshape(L, q)
        blocks = theta[L * q :].reshape(-1, q, q)
        return fields, blocks

    def _rows_of_pairs(self):
        """``(i, pairs)``: the blocks ``(i, j > i)`` are ``blocks[pairs]``."""
        start = 0
        for i in range(self.n_sites - 1):
            stop = start + self.n_sites - 1 - i
            yield i, slice(start, stop)
            start = stop

    def couplings(self, theta, xp=np, dtype=None, scale=None):
        """``(J_mat, fields)`` from the parameter vector; ``J_mat`` in ``dtype``.

        With ``scale``, the parameters are ``theta / scale`` (the optimiser's
        preconditioned coordinates), divided block by block. Built one site at
        a time with slices, so no temporary of the size of the parameters is
        made.
        """
        L, q = self.n_sites, self.n_states
        fields, blocks = self.split(theta)
        if scale is not None:
            scale_fields, scale_blocks = self.split(scale)
            fields = fields / scale_fields
        tensor = xp.zeros((L, q, L, q), dtype=theta.dtype if dtype is None else dtype)
        for i, pairs in self._rows_of_pairs():
            row = (
                blocks[pairs] if scale is None else blocks[pairs] / scale_blocks[pairs]
            )
            tensor[i, :, i + 1 :, :] = row.transpose(1, 0, 2)
            tensor[i + 1 :, :, i, :] = row.transpose(0, 2, 1)
        return tensor.reshape(L * q, L * q), fields

    def parameters(self, couplings, fields):
        """The parameter vector of symmetric ``couplings`` (L, q, L, q) and
        ``fields`` (L, q): the inverse of :meth:`couplings`, read from the
        blocks ``i < j``."""
        L, q = self.n_sites, self.n_states
        theta = np.empty(self.n_params)
        theta[: L * q] = fields.ravel()
        blocks = theta[L * q :].reshape(-1, q, q)
        for i, pairs in self._rows_of_pairs():
            blocks[pairs] = couplings[i, :, i + 1 :, :].transpose(1, 0, 2)
        return theta

    def pull_back(self, theta, grad_couplings, grad_fields, xp=np):
        """Gradient in the parameter vector from the gradient in ``(J_mat, h)``."""
        L, q = self.n_sites, self.n_states
        g = grad_couplings.reshape(L, q, L, q)
        out = xp.empty(self.n_params)
        out[: L * q] = grad_fields.ravel()
        blocks = out[L * q :].reshape(-1, q, q)
        # Each stored block appears twice in J_mat: as J_ij and as J_ji^T
        # (added in float64 when the products' gradient is float32).
        for i, pairs in self._rows_of_pairs():
            xp.add(
                g[i, :, i + 1 :, :].transpose(1, 0, 2),
                g[i + 1 :, :, i, :].transpose(0, 2, 1),
                out=blocks[pairs],
                dtype=np.float64,
            )
        return out

    def add_penalty(
        self, theta, grad, alpha_fields, alpha_couplings, xp=np, scale=None
    ):
        """plmc's penalty, added to ``grad`` in place; returns its value.

        ``alpha_J / 2 sum_{i != j} |J_ij|^2`` counts each stored block twice.
        With ``scale``, the parameters are ``theta / scale``; the vector is
        then divided chunk by chunk.
        """
        n_fields = self.n_sites * self.n_states
        value = 0.0
        for first, stop, alpha in (
            (0, n_fields, alpha_fields),
            (n_fields, theta.size, alpha_couplings),
        ):
            for start in range(first, stop, _PENALTY_CHUNK):
                part = slice(start, min(start + _PENALTY_CHUNK, stop))
                params = theta[part] if scale is None else theta[part] / scale[part]
                # einsum, not a BLAS dot: a level-1 BLAS call wakes every
                # thread of the pool, which costs more than the arithmetic.
                value += alpha * float(xp.einsum("i,i", params, params))
                grad[part] += (2.0 * alpha) * params
        return value

    def initial(self, random_state, frequencies, weight_sum):
        """Zero couplings; fields of the independent-site model, as plmc starts."""
        theta = np.zeros(self.n_params)
        theta[: self.n_sites * self.n_states] = _independent_fields(
            frequencies, weight_sum, self.n_states
        )
        return theta

    def curvature(
        self, frequencies, weight_sum, alpha_fields, alpha_couplings, coverage=None
    ):
        """Diagonal of the objective's Hessian at the independent-site model.

        Used to precondition L-BFGS: the curvature of a field scales with how
        often its state occurs, that of a coupling with two such frequencies, so
        the raw parameters differ in scale by orders of magnitude. With
        missing sites, ``coverage`` (:func:`~._alignment._site_coverage`) is
        the weight of the sequences that have site ``i`` and state ``b`` at
        site ``j``: a conditional counts only the sequences that have its site,
        and a coupling only those that have both; the diagonal is then exact
        at the model whose conditionals are the frequencies of the sequences
        that have the site.
        """
        L, q = self.n_sites, self.n_states
        f = frequencies.reshape(L, q)
        variance = f * (1.0 - f)
        i, j = self._pairs
        # Site i's conditional sees e_ij(a, b) when s_j = b, and site j's when s_i = a.
        if coverage is None:
            seen_by_i, seen_by_j = weight_sum * f[j], weight_sum * f[i]
            field_weight = weight_sum
        else:
            coverage = coverage.reshape(L, L, q)
            seen_by_i, seen_by_j = coverage[i, j], coverage[j, i]
            field_weight = coverage[np.arange(L), np.arange(L)].sum(axis=1)[:, None]
        pair = (
            variance[i, :, None] * seen_by_i[:, None, :]
            + seen_by_j[:, :, None] * variance[j, None, :]
        )
        return np.concatenate(
            [
                (field_weight * variance).ravel() + 2.0 * alpha_fields,
                pair.ravel() + 2.0 * alpha_couplings,
            ]
        )


def _independent_fields(frequencies, weight_sum, n_states):
    """plmc's start: log(frequency * N_eff + 1), shifted to zero sum per site."""
    fields = np.log(frequencies * weight_sum + 1.0).reshape(-1, n_states)
    return (fields - fields.mean(axis=1, keepdims=True)).ravel()


class FactoredAttention:
    """Factored self-attention: ``J[i, a, j, b] = sum_h A^h[i, j] V^h[a, b]``.

    ``A^h`` depends on positions only: ``"softmax"`` attention is a row-wise
    softmax over ``j != i`` of free logits, ``"free"`` attention is an
    unconstrained matrix with zero diagonal. ``V^h`` (q x q) acts on tokens
    only. Parameters: fields, then the attention logits/matrices (H, L, L),
    then the values (H, q, q).
    """

    symmetric = False

    def __init__(self, n_sites, n_states, n_heads, attention="softmax", init_scale=0.1):
        self.n_sites, self.n_states, self.n_heads = n_sites, n_states, n_heads
        self.attention = attention
        self.init_scale = init_scale
        self.n_params = n_sites * n_states + n_heads * (n_sites**2 + n_states**2)

    def split(self, theta):
        L, q, H = self.n_sites, self.n_states, self.n_heads
        fields = theta[: L * q].reshape(L, q)
        attention = theta[L * q : L * q + H * L * L].reshape(H, L, L)
        values = theta[L * q + H * L * L :].reshape(H, q, q)
        return fields, attention, values

    def attention_matrices(self, raw, xp=np):
        """``A^h`` with a zero diagonal, from logits (softmax) or directly (free)."""
        L = self.n_sites
        eye = xp.eye(L, dtype=bool)
        if self.attention == "free":
            return xp.where(eye, 0.0, raw)
        logits = xp.where(eye, -xp.inf, raw)
        logits = logits - logits.max(axis=2, keepdims=True)
        weights = xp.exp(logits)
        return weights / weights.sum(axis=2, keepdims=True)

    def couplings(self, theta, xp=np, dtype=None):
        L, q = self.n_sites, self.n_states
        fields, raw, values = self.split(theta)
        attention = self.attention_matrices(raw, xp)
        # J[i, a, j, b] = sum_h A[h, i, j] V[h, a, b]: one (L L, H) @ (H, q q) product.
        tensor = attention.reshape(self.n_heads, -1).T @ values.reshape(
            self.n_heads, -1
        )
        tensor = tensor.reshape(L, L, q, q).transpose(0, 2, 1, 3)
        tensor = xp.ascontiguousarray(tensor, dtype=dtype)
        return tensor.reshape(L * q, L * q), fields

    def pull_back(self, theta, grad_couplings, grad_fields, xp=np):
        L, q, H = self.n_sites, self.n_states, self.n_heads
        _, raw, values = self.split(theta)
        attention = self.attention_matrices(raw, xp)
        g = (
            grad_couplings.reshape(L, q, L, q)
            .transpose(0, 2, 1, 3)
            .reshape(L * L, q * q)
        )
        grad_attention = (g @ values.reshape(H, -1).T).T.reshape(H, L, L)
        grad_values = (attention.reshape(H, -1) @ g).reshape(H, q, q)
        if self.attention == "free":
            grad_raw = grad_attention * (1.0 - xp.eye(L))
        else:
            # Row-wise softmax backward; the masked diagonal has zero weight.
            inner = (grad_attention * attention).sum(axis=2, keepdims=True)
            grad_raw = attention * (grad_attention - inner)
        return xp.concatenate(
            [grad_fields.ravel(), grad_raw.ravel(), grad_values.ravel()]
        )

    def initial(self, random_state, frequencies, weight_sum):
        """Independent-site fields, small random attention logits and values."""
        L, q, H = self.n_sites, self.n_states, self.n_heads
        raw = self.init_scale * random_state.standard_normal((H, L, L))
        values = self.init_scale * random_state.standard_normal((H, q, q))
        fields = _independent_fields(frequencies, weight_sum, q)
        return np.concatenate([fields, raw.ravel(), values.ravel()])

    def factor(self, couplings):
        """Attention matrices and values whose couplings best match ``couplings``.

        ``couplings`` (L, q, L, q) is moved to the zero-sum gauge, where the
        couplings of ``sum_h A^h (x) V^h`` are those of ``sum_h A^h (x) V0^h``
        (``V0`` the doubly centred values), so the best ``H``-head fit in the
        Frobenius norm is the truncated SVD of the ``(L L, q q)`` matrix of the
        blocks, the singular values split evenly between the two factors.
        Free attention only: a softmax row is a distribution, which a factor
        of signed couplings is not.

        Returns
        -------
        attention : ndarray of shape (H, L, L), zero diagonal
        values : ndarray of shape (H, q, q)
        """
        L, q, H = self.n_sites, self.n_states, self.n_heads
        gauged, _ = zero_sum_gauge(couplings, np.zeros((L, q)))
        blocks = gauged.transpose(0, 2, 1, 3).reshape(L * L, q * q)
        u, sigma, vt = np.linalg.svd(blocks, full_matrices=False)
        # More heads than singular values (H > q^2 or L^2): the rest stay zero.
        k = min(H, sigma.size)
        root = np.sqrt(sigma[:k])
        attention = np.zeros((H, L * L))
        values = np.zeros((H, q * q))
        attention[:k] = (u[:, :k] * root).T
        values[:k] = vt[:k] * root[:, None]
        attention = attention.reshape(H, L, L)
        attention[:, np.arange(L), np.arange(L)] = 0.0
        return attention, values.reshape(H, q, q)

    def curvature(
        self, frequencies, weight_sum, alpha_fields, alpha_couplings, coverage=None
    ):
        """No preconditioning: attention and values mix all sites and states."""
        return None


def objective(
    theta, parametrization, rows, alpha_fields, alpha_couplings, xp=np, *, scale=None
):
    """plmc's objective and its gradient in the parameter vector.

    ``rows`` is the weighted alignment as :class:`OneHotRows`. With ``scale``
    the parameters are ``theta / scale`` (the gradient is still with respect to
    the parameters). A symmetric parametrization (the full model) builds
    ``J_mat`` directly in the products' precision, takes its data term in
    large blocks (:func:`data_term_and_products_gradient`, or by gathers
    straight into the parameters' gradient) and adds its penalty on the
    parameters, dividing by ``scale`` piece by piece; the others go through
    ``J_mat`` in double precision.
    """
    if parametrization.symmetric:
        if rows.gather:
            value, grad = _gather_pairs_data_term(rows, parametrization, theta, scale)
        else:
            couplings_mat, fields = parametrization.couplings(
                theta, xp, dtype=rows.dtype, scale=scale
            )
            value, grad_couplings, grad_fields = data_term_and_products_gradient(
                rows, couplings_mat, fields, xp
            )
            del couplings_mat
            grad = parametrization.pull_back(theta, grad_couplings, grad_fields, xp)
            del grad_couplings
        value += parametrization.add_penalty(
            theta, grad, alpha_fields, alpha_couplings, xp, scale=scale
        )
        return value, grad
    if scale is not None:
        theta = theta / scale
    couplings_mat, fields = parametrization.couplings(theta, xp)
    value, grad_couplings, grad_fields = data_term_and_gradient(
        rows, couplings_mat, fields, xp
    )
    value += alpha_fields * float((fields**2).sum())
    value += 0.5 * alpha_couplings * float((couplings_mat**2).sum())
    grad_fields = grad_fields + 2.0 * alpha_fields * fields
    grad_couplings += alpha_couplings * couplings_mat
    _zero_diagonal_blocks(
        grad_couplings, parametrization.n_sites, parametrization.n_states, xp
    )
    return value, parametrization.pull_back(theta, grad_couplings, grad_fields, xp)

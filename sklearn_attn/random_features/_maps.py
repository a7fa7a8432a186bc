"""Random feature maps as matrix products, computed block by block.

The two maps (attention and MLP) are exposed to the ridge core as
:class:`~._feature_blocks.FeatureBlocks`: any block of rows (samples) and
columns (features, aligned to heads or units) is computed on demand, so that no
caller needs the full ``(n_samples, n_features)`` matrix.

The ReLU maps are positively homogeneous in the input with its constants: the
attention map of degree 3 in ``[x; 1]`` (the scores of degree 2, the values of
degree 1), the MLP map of degree 1 in ``[vec X; 1]``. The softmax attention map
is not (scaling ``X`` sharpens its attention weights), but it is computed with
the same degree-1 bookkeeping: its weights sum to one over the keys and are
found exactly from the rescaled scores (below), so only the values ``[x_i; 1]``
carry a power of two. Given ``exponents`` (one per sample, see
:mod:`sklearn_attn._scaling`), a map computes ``Phi(X_n) / 2^(degree * e_n)``,
from ``X_n / 2^e_n`` with every constant 1 replaced by ``2^-e_n``: extreme but
finite inputs then never overflow or underflow in the intermediates. A constant
inside the attention scores (``qk_bias``) multiplies another one there, so such
a map is only ever scaled down (``scales_up`` is False): scaling a tiny input up
would overflow its constants, and it needs no scaling, as the constant keeps
the scores moderate.

On the CPU, rows are cut into small chunks that keep the per-chunk
intermediates in cache and are spread over threads, each running
single-threaded BLAS (:meth:`Device.workers <sklearn_attn._backend.Device.workers>`):
the per-sample products are too small for BLAS to parallelise by itself. The
thread count is the BLAS thread count in force, so inside a joblib worker
limited to one thread this stays serial. On a GPU a block is one launch.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn import get_config

from .._scaling import scale_by_power_of_two
from ._feature_blocks import FeatureBlocks

# Samples per chunk on the CPU: small enough for the (chunk, heads, keys)
# intermediates of a block of heads to stay in cache (measured: 32-64 best).
_CPU_CHUNK = 32


def working_memory_bytes():
    """scikit-learn's ``working_memory`` setting, in bytes."""
    return get_config()["working_memory"] * 2**20


class _ChunkedMap(FeatureBlocks):
    """Shared blocking logic; subclasses define ``_fill(rows, units, out)``.

    ``unit_width`` features belong to each unit (head or hidden unit).
    """

    unit_width: int
    n_units: int
    degree: int
    # Whether rows may be scaled up as well as down (see the module notes).
    scales_up = True

    def __init__(self, n_samples, device, bytes_per_sample_unit, exponents):
        self.n_samples = n_samples
        self.n_features = self.n_units * self.unit_width
        self.device = device
        self._bytes_per_sample_unit = bytes_per_sample_unit
        # None: no rescaling; else int32 on the device, one per sample.
        self.exponents = exponents

    def _scaled_rows(self, X, rows):
        """``X[rows] / 2^e`` and the bias constants ``2^-e`` (None without scaling)."""
        x = X[rows]
        if self.exponents is None:
            return x, None
        shift = -self.exponents[rows]
        shape = (-1,) + (1,) * (x.ndim - 1)
        xp = self.device.xp
        x = scale_by_power_of_two(x, shift.reshape(shape), xp)
        return x, scale_by_power_of_two(xp.ones(shift.shape, x.dtype), shift, xp)

    # -- block layout ------------------------------------------------------------
    def row_blocks(self):
        per_sample = self._bytes_per_sample_unit * self.n_units
        size = max(1, int(working_memory_bytes() // max(per_sample, 1)))
        return [
            slice(s, min(s + size, self.n_samples))
            for s in range(0, self.n_samples, size)
        ]

    def column_blocks(self):
        per_unit = self._bytes_per_sample_unit * self.n_samples
        units = max(1, int(working_memory_bytes() // max(per_unit, 1)))
        w = self.unit_width
        return [
            slice(u * w, min(u + units, self.n_units) * w)
            for u in range(0, self.n_units, units)
        ]

    # -- computation ----------------------------------------------------------------
    def compute(self, rows, cols):
        w = self.unit_width
        if cols.start % w or (cols.stop % w and cols.stop != self.n_features):
            raise ValueError("column blocks must be aligned to whole units")
        units = slice(cols.start // w, math.ceil(cols.stop / w))
        n_rows = len(range(*rows.indices(self.n_samples)))
        xp = self.device.xp
        out = xp.empty((n_rows, (units.stop - units.start) * w), dtype=self.dtype)
        start = rows.start or 0
        size = self.device.chunk_length(_CPU_CHUNK, n_rows)
        chunks = [
            (
                slice(start + s, start + min(s + size, n_rows)),
                slice(s, min(s + size, n_rows)),
            )
            for s in range(0, n_rows, size)
        ]

        def fill(pair):
            # Each chunk fills its own rows of `out`: no shared writes.
            self._fill(pair[0], units, out[pair[1]])

        with self.device.workers() as workers:
            if workers is None or len(chunks) == 1:
                for pair in chunks:
                    fill(pair)
            else:
                list(workers.map(fill, chunks))
        return out


class AttentionMap(_ChunkedMap):
    """The attention features of every head, ``phi_m(X) / sqrt(M)``.

    With ``activation="relu"``,
    ``phi_m(X) = (1/N) sum_i relu(s_mi) [x_i; 1]``; with
    ``activation="softmax"``, ``phi_m(X) = sum_i a_mi [x_i; 1]`` with the
    attention weights ``a_m = softmax_i(s_mi)`` over the keys. The scores are
    ``s_mi = <[x_0; 1], W_m [x_i; 1]>`` with ``qk_bias`` (``W_m`` of shape
    ``(d + 1, d + 1)``), else ``s_mi = <x_0, W_m x_i>``.

    Parameters
    ----------
    X : array of shape (n_samples, n_tokens, d), query first
    qk_weights : array of shape (n_heads, d + qk_bias, d + qk_bias)
    value_bias : bool
    device : Device
    exponents : int32 array of shape (n_samples,) or None
        Compute ``phi(X_n) / 2^(degree e_n)`` (see the module notes); with
        ``qk_bias``, no exponent may be negative.
    activation : {"relu", "softmax"}, default="relu"
    qk_bias : bool, default=False
        Whether the scores append the constant 1 to the query and the keys.
    """

    def __init__(
        self,
        X,
        qk_weights,
        value_bias,
        device,
        exponents=None,
        activation="relu",
        qk_bias=False,
    ):
        xp = device.xp
        self.X = X
        self.dtype = X.dtype
        n_heads, d_qk, _ = qk_weights.shape
        d = X.shape[2]
        if d_qk != d + int(qk_bias):
            raise ValueError(
                f"qk_weights of shape {qk_weights.shape[1:]} do not fit tokens of "
                f"dimension {d} with qk_bias={qk_bias}."
            )
        self.n_units = n_heads
        self.d = d
        self.d_qk = d_qk
        self.n_keys = X.shape[1] - 1
        self.unit_width = d + 1 if value_bias else d
        self.value_bias = value_bias
        self.activation = activation
        self.qk_bias = qk_bias
        self.scales_up = not qk_bias
        # relu: the scores (degree 2) times the values (degree 1); softmax: the
        # weights are scale-free, only the values scale.
        self.degree = 3 if activation == "relu" else 1
        # W stacked as (d_qk, heads * d_qk): x_0^T W_m for all heads is one product.
        self.qk_stacked = xp.ascontiguousarray(
            qk_weights.transpose(1, 0, 2).reshape(d_qk, n_heads * d_qk),
            dtype=self.dtype,
        )
        # The softmax weights sum to one: no 1/N average.
        n_average = self.n_keys if activation == "relu" else 1
        self.scale = 1.0 / (n_average * math.sqrt(n_heads))
        bytes_per = X.dtype.itemsize * (2 * d_qk + self.n_keys + 1)
        super().__init__(X.shape[0], device, bytes_per, exponents)

    def _fill(self, rows, units, out):
        xp = self.device.xp
        x, bias = self._scaled_rows(self.X, rows)
        n, d_qk, n_keys = x.shape[0], self.d_qk, self.n_keys
        n_heads = units.stop - units.start
        keys = x[:, 1:, :]
        if self.qk_bias or self.value_bias:
            # [x_i; 1] (the 1 as 2^-e on rescaled rows): the scores' keys with
            # qk_bias, the values with value_bias.
            constant = xp.ones((n, n_keys, 1), dtype=x.dtype)
            if bias is not None:
                constant *= bias[:, None, None]
            keys_1 = xp.concatenate([keys, constant], axis=2)
        query = x[:, 0, :]
        score_keys = keys
        if self.qk_bias:
            query = xp.concatenate([query, keys_1[:, 0, -1:]], axis=1)
            score_keys = keys_1
        queries = query @ self.qk_stacked[:, units.start * d_qk : units.stop * d_qk]
        # scores[s, m, i] = <x~_0, W_m x~_i>: one small product per sample.
        scores = xp.matmul(
            queries.reshape(n, n_heads, d_qk), score_keys.transpose(0, 2, 1)
        )
        if self.activation == "relu":
            xp.maximum(scores, 0, out=scores)
            scores *= self.scale
        else:
            self._softmax(scores, rows)
        values = keys_1 if self.value_bias else keys
        xp.matmul(scores, values, out=out.reshape(n, n_heads, self.unit_width))

    def _softmax(self, scores, rows):
        """``scale * softmax`` over the keys (last axis) of ``scores``, in place.

        Subtracting the largest score first keeps every exponential in
        ``(0, 1]`` and their sum in ``[1, N]``: nothing overflows and nothing
        divides by zero. Rows computed from ``X_n / 2^e_n`` have scores
        ``2^(2 e_n)`` times too small: their differences are scaled back
        exactly (a power of two), where a difference too large for the dtype
        becomes ``-inf``, whose weight is the exact limit 0.
        """
        xp = self.device.xp
        scores -= scores.max(axis=2, keepdims=True)
        if self.exponents is not None:
            shift = 2 * self.exponents[rows]
            with np.errstate(over="ignore"):  # -inf: a weight of exactly 0
                xp.ldexp(scores, shift[:, None, None], out=scores)
        xp.exp(scores, out=scores)
        scores *= self.scale / scores.sum(axis=2, keepdims=True)


class MLPMap(_ChunkedMap):
    """phi_m(X) = relu(<w_m, [vec X; 1]>) / sqrt(M) (the 1 only with ``bias``).

    Parameters
    ----------
    X : array of shape (n_samples, n_tokens, d)
    weights : array of shape (n_units, D) with D = n_tokens * d (+ 1 with bias)
    device : Device
    exponents : int32 array of shape (n_samples,) or None
        Compute ``phi(X_n) / 2^e_n`` (see the module notes).
    """

    unit_width = 1
    degree = 1

    def __init__(self, X, weights, device, exponents=None):
        self.X = X.reshape(X.shape[0], -1)
        self.dtype = X.dtype
        self.n_units = weights.shape[0]
        self.bias = weights.shape[1] == self.X.shape[1] + 1
        w = device.xp.asarray(weights, dtype=self.dtype)
        self.weights_t = device.xp.ascontiguousarray(w[:, : self.X.shape[1]].T)
        self.offset = w[:, -1] if self.bias else None
        self.scale = 1.0 / math.sqrt(self.n_units)
        super().__init__(X.shape[0], device, X.dtype.itemsize, exponents)

    def compute(self, rows, cols):
        # One large product: BLAS parallelises it well, no chunking needed.
        xp = self.device.xp
        x, bias = self._scaled_rows(self.X, rows)
        out = x @ self.weights_t[:, cols]
        if self.bias:
            out += (
                self.offset[cols]
                if bias is None
                else bias[:, None] * self.offset[None, cols]
            )
        xp.maximum(out, 0, out=out)
        out *= self.scale
        return out


__all__ = ["AttentionMap", "MLPMap", "working_memory_bytes"]

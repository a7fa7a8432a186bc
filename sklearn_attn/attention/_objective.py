"""The training objective of :class:`MultiHeadAttentionLearner`.

The flat parameter vector and its layer (combined ``Theta_i`` or factored
``Q_i K_i^T``), the sample weights of the data term, how samples are cut into
chunks, and the loss, its gradient and the exact refit of the values on a
device.
"""

from __future__ import annotations

import numpy as np

from .._backend import to_device, to_host
from ._layer import (
    default_chunk_size,
    loss_and_gradient,
    solve_values,
    token_norm_bound,
    value_normal_equations,
)


class _Parametrization:
    """Flat parameter vector <-> (Theta, W); chain rule for the factored form.

    ``"combined"``: ``[Theta (m, d, d), W (m, d, d)]``. ``"separate"``:
    ``[Q (m, d, r), K (m, d, r), W (m, d, d)]`` with ``Theta_i = Q_i K_i^T``.
    """

    def __init__(self, kind, n_heads, token_dim, rank):
        m, d = n_heads, token_dim
        self.kind = kind
        if kind == "combined":
            self.shapes = {"theta": (m, d, d), "values": (m, d, d)}
        else:
            self.shapes = {
                "query": (m, d, rank),
                "key": (m, d, rank),
                "values": (m, d, d),
            }
        self.offsets, start = {}, 0
        for name, shape in self.shapes.items():
            self.offsets[name] = (start, start + int(np.prod(shape)))
            start += int(np.prod(shape))
        self.size = start

    def unpack(self, w):
        return {
            name: w[a:b].reshape(self.shapes[name])
            for name, (a, b) in self.offsets.items()
        }

    def layer(self, w):
        parts = self.unpack(w)
        if self.kind == "combined":
            return parts["theta"], parts["values"]
        return parts["query"] @ parts["key"].transpose(0, 2, 1), parts["values"]

    def pull_back(self, w, grad_theta, grad_values):
        """Gradient in the flat parameters from the gradients in (Theta, W)."""
        if self.kind == "combined":
            return np.concatenate([grad_theta.ravel(), grad_values.ravel()])
        parts = self.unpack(w)
        grad_query = grad_theta @ parts["key"]  # d/dQ of <G, Q K^T> = G K
        grad_key = grad_theta.transpose(0, 2, 1) @ parts["query"]
        return np.concatenate(
            [grad_query.ravel(), grad_key.ravel(), grad_values.ravel()]
        )

    def initial(self, rng, init_scale):
        """Small Gaussian start: scores of std ~ init_scale on unit-variance tokens."""
        d = self.shapes["values"][1]
        parts = []
        for name, shape in self.shapes.items():
            if name == "theta" or name == "values":
                std = init_scale / np.sqrt(d)
            else:  # Q K^T has entries of variance r std^4: match init_scale^2 / d.
                std = np.sqrt(init_scale / np.sqrt(d * shape[2]))
            parts.append(std * rng.standard_normal(size=shape).ravel())
        return np.concatenate(parts)

    def with_values(self, w, values):
        w = w.copy()
        a, b = self.offsets["values"]
        w[a:b] = values.ravel()
        return w


def _normalised(sample_weight):
    """Weights summing to one (``None`` stays ``None``: ``1 / N`` each)."""
    if sample_weight is None:
        return None
    # Divided by the largest first: sums of huge weights do not overflow.
    scaled = sample_weight / sample_weight.max()
    return scaled / scaled.sum()


def _chunk_size(n_samples, n_tokens, token_dim, n_heads, xp, n_threads):
    """Samples per chunk, as ``_layer._chunks`` cuts them for ``n_threads`` threads.

    ``n_threads`` is fixed once in ``fit`` and passed to every start: workers
    with fewer threads cut the same chunks, and the sums, hence the fits, are
    the same.
    """
    size = default_chunk_size(n_tokens, token_dim, n_heads, xp)
    if n_threads > 1:
        size = min(size, -(-n_samples // (2 * n_threads)))
    return max(1, size)


class _Objective:
    """Training objective on host parameter vectors; the data term runs on the device.

    ``(1 / 2N) sum_n ||F(X_n) - Y_n||_F^2 + (alpha / 2) ||w||^2`` and its gradient;
    with ``rows`` only those samples enter the data term (a mini-batch).
    """

    def __init__(
        self, X, Y, param, alpha, device, executor, chunk_threads, sample_weight=None
    ):
        self.X, self.Y, self.param, self.alpha = X, Y, param, alpha
        self.device, self.executor = device, executor
        # Chunks are cut for chunk_threads threads whatever the executor's
        # size, so that a start sums the same chunks in every worker.
        self.chunk_threads = chunk_threads
        self.sample_weight = sample_weight
        self.max_sq_norm = token_norm_bound(X, device.xp)

    def _chunk_size(self, n_samples):
        _, k, d = self.X.shape
        m = self.param.shapes["values"][0]
        return _chunk_size(n_samples, k, d, m, self.device.xp, self.chunk_threads)

    def _on_device(self, array):
        # Parameters in the data's dtype: float32 data is computed in float32.
        return to_device(np.ascontiguousarray(array), self.device, dtype=self.X.dtype)

    def __call__(self, w, rows=None):
        theta, values = self.param.layer(w)
        X, Y, weights = self.X, self.Y, self.sample_weight
        if rows is not None:
            index = to_device(rows, self.device)
            X, Y = X[index], Y[index]
            if weights is not None:
                # Scaled by N / batch size: the batch's loss is an unbiased
                # estimate of the full one, as for unit weights.
                weights = weights[index] * (self.X.shape[0] / len(rows))
        # Overflow shows as a non-finite loss, which the callers handle (the
        # line search steps back; fit reports a start that never recovers).
        with np.errstate(over="ignore", invalid="ignore"):
            return self._evaluate(w, theta, values, X, Y, weights)

    def _evaluate(self, w, theta, values, X, Y, weights):
        loss, grad_theta, grad_values = loss_and_gradient(
            X,
            Y,
            self._on_device(theta),
            self._on_device(values),
            xp=self.device.xp,
            chunk_size=self._chunk_size(X.shape[0]),
            executor=self.executor,
            max_sq_norm=self.max_sq_norm,
            sample_weight=weights,
        )
        grad = self.param.pull_back(w, to_host(grad_theta), to_host(grad_values))
        grad += self.alpha * w
        return loss + 0.5 * self.alpha * float(w @ w), grad

    def refit_values(self, w):
        """Exact ridge solution for the values given the attention matrices."""
        theta, _ = self.param.layer(w)
        gram, rhs = value_normal_equations(
            self.X,
            self.Y,
            self._on_device(theta),
            xp=self.device.xp,
            chunk_size=self._chunk_size(self.X.shape[0]),
            executor=self.executor,
            max_sq_norm=self.max_sq_norm,
            sample_weight=self.sample_weight,
        )
        # Weights sum to one: the data term is a weighted mean over one "sample".
        n_samples = self.X.shape[0] if self.sample_weight is None else 1
        values = solve_values(to_host(gram), to_host(rhs), n_samples, self.alpha)
        return self.param.with_values(w, values)

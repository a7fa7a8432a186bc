"""``fit`` of the random-feature regressors on a ``dask.array``.

The data stay where their chunks are: each chunk of samples becomes the
:class:`~._ridge_statistics.RidgeStatistics` of its random features (the
``(n_features, n_features)`` covariance and the other sums of the primal ridge
problem), computed by a task on the worker that holds the chunk, so neither
the samples nor their features travel. The statistics are merged pairwise up a
tree, and the client solves the ridge system of the total.

Dask is imported only here, when a dask array reaches ``fit``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

from .._validation import check_target_shape
from ._ridge_statistics import RidgeStatistics

__all__ = ["fit_dask"]

# Statistics merged per task of the reduction tree. Each is about
# 8 n_features^2 bytes (150 MB at 4,352 features), and a merge holds its
# inputs and its output at once: a few, not dask's default of 8 or more.
SPLIT_EVERY = 4


def fit_dask(estimator, X, y, sample_weight=None):
    """Fit a random-feature ridge regressor on dask arrays.

    The random weights are drawn here, on the client, by the estimator's own
    method (from ``random_state``, as ``fit`` draws them); the features of each
    chunk of ``X`` are computed where the chunk lives, reduced to their
    sufficient statistics there, merged in a tree and solved here. The fitted
    attributes are those of a NumPy ``fit`` with ``solver="primal"`` up to
    rounding.

    The computation runs on dask's current scheduler: the cluster of the
    active ``dask.distributed.Client``, else dask's local threads.

    Parameters
    ----------
    estimator : _RandomFeatureRidge
        The regressor (its parameters already validated by ``fit``).
    X : dask.array.Array of shape (n_samples, n_tokens, token_dim) or \
            (n_samples, n_tokens * token_dim)
        Token input; 2-D input needs ``token_dim``. Chunked along the samples
        in any way (the other axes are joined into one chunk per block of
        samples). Its entries must lie within ``2^96`` of one (``2^16`` for
        float32), as for ``partial_fit``: chunks cannot be rescaled together.
    y : array-like or dask.array.Array of shape (n_samples,) or \
            (n_samples, n_targets)
        Targets: a NumPy array, or a dask array (rechunked like ``X``).
    sample_weight : array-like or dask.array.Array of shape (n_samples,), \
            default=None
        Non-negative weights, not all zero.

    Returns
    -------
    estimator : _RandomFeatureRidge
        The fitted regressor.
    """
    import dask
    import dask.array as da

    alphas = estimator._check_alphas()
    name = type(estimator).__name__
    if alphas.size > 1 and not isinstance(estimator.alpha, str):
        raise ValueError(
            f"{name}.fit on a dask array takes one alpha or alpha='auto'; got "
            f"alpha={alphas.tolist()}. Several alphas are compared by exact "
            "leave-one-out error, which needs every sample's leverage under the "
            "covariance of all chunks: a second pass over the data. Choose alpha "
            "first (fit with an array of alphas on a subsample that fits in "
            "memory, or compare alphas on held-out data) and fit with that value."
        )
    if estimator.solver == "dual":
        raise ValueError(
            f"{name}.fit on a dask array solves the primal system; "
            'solver="dual" needs the kernel matrix of all samples at once. Use '
            'solver="auto" or "primal".'
        )
    if not isinstance(X, da.Array):
        raise TypeError(
            f"{name}.fit takes a dask.array.Array among dask collections; got "
            f"{type(X).__module__}.{type(X).__name__}. Convert it first (e.g. "
            "ddf.to_dask_array(lengths=True)), or pass a NumPy array."
        )
    X = _known_sizes(X, "X")
    # The layout (dimensions, token_dim, dtype) is checked here on a stand-in
    # sample of zeros, as fit checks it: it sets n_features_in_, n_tokens_ and
    # token_dim_. The values are checked by each chunk's task (finite, real).
    estimator._reset_stream()
    estimator._validate_tokens(np.zeros((1, *X.shape[1:]), dtype=X.dtype), reset=True)
    n_samples = X.shape[0]
    if n_samples < 1:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 "
            "is required."
        )
    # Whole samples per chunk: every token and feature of a sample together.
    X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})
    rows = X.chunks[0]

    check_target_shape(y, "y", max_ndim=2)
    y = _along_rows(y, rows, n_samples, "y", da)
    if sample_weight is not None:
        if np.ndim(sample_weight) == 0:  # one weight for all, as in fit
            sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
        if np.ndim(sample_weight) != 1:
            raise ValueError(
                "Sample weights must be 1D array or scalar; got an array of shape "
                f"{sample_weight.shape}."
            )
        sample_weight = _along_rows(sample_weight, rows, n_samples, "sample_weight", da)

    estimator._clear_device_cache()
    estimator._draw_weights(
        check_random_state(estimator.random_state),
        estimator.n_tokens_,
        estimator.token_dim_,
    )
    # One copy of the fitted weights in the graph, shared by every chunk's task.
    shared = dask.delayed(estimator, pure=True)
    x_blocks = X.to_delayed().ravel()
    y_blocks = y.to_delayed().ravel()
    w_blocks = (
        [None] * len(rows)
        if sample_weight is None
        else sample_weight.to_delayed().ravel()
    )
    parts = [
        dask.delayed(_chunk_statistics, pure=True)(shared, x, y_part, w)
        for x, y_part, w, size in zip(x_blocks, y_blocks, w_blocks, rows, strict=True)
        if size
    ]
    while len(parts) > 1:
        parts = [
            dask.delayed(_merge, pure=True)(*parts[start : start + SPLIT_EVERY])
            for start in range(0, len(parts), SPLIT_EVERY)
        ]
    (statistics,) = dask.compute(parts[0])

    if statistics.n_positive == 0:
        raise ValueError(
            "sample_weight must have at least one positive entry; all are zero."
        )
    estimator._solve_statistics(statistics, alphas, y.ndim)
    estimator._clear_device_cache()
    return estimator


def _known_sizes(A, what):
    if any(np.isnan(size) for size in A.shape):
        raise ValueError(
            f"{what} is a dask array of unknown chunk sizes (shape {A.shape}); call "
            f"{what}.compute_chunk_sizes() first."
        )
    return A


def _along_rows(A, rows, n_samples, what, da):
    """``A`` as a dask array chunked along the samples as ``X`` is."""
    if not isinstance(A, da.Array):
        A = np.asarray(A)
        if A.ndim == 0:
            raise ValueError(f"{what} must be an array of length {n_samples}.")
    else:
        A = _known_sizes(A, what)
    if A.shape[0] != n_samples:
        raise ValueError(
            f"Found input variables with inconsistent numbers of samples: "
            f"[{n_samples}, {A.shape[0]}] (X and {what})."
        )
    if not isinstance(A, da.Array):
        return da.from_array(A, chunks=(rows, *A.shape[1:]))
    return A.rechunk({0: rows, **{axis: -1 for axis in range(1, A.ndim)}})


def _chunk_statistics(estimator, X, y, sample_weight):
    """One task: validate a chunk as ``fit`` would, return its statistics."""
    X, y = estimator._validate_tokens(X, y, reset=False)
    if sample_weight is not None:
        # Finite and non-negative; "not all zero" holds for all chunks together
        # (checked on the client), not for each.
        sample_weight = check_array(
            sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight"
        )
        if (sample_weight < 0).any():
            raise ValueError("Negative values in data passed to `sample_weight`")
    y_2d = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
    return estimator._batch_statistics(X, y_2d, sample_weight)


def _merge(*parts):
    """One node of the reduction tree: the statistics of all ``parts``.

    The inputs are left as they are (a lost result may be recomputed from
    them), so the sum starts from empty statistics.
    """
    total = RidgeStatistics(parts[0].n_features, parts[0].n_targets)
    for part in parts:
        total.merge(part)
    return total

"""Decompose once, solve per alpha: what the batch and one-pass ridge routes share.

As in scikit-learn's ``linear_model/_ridge.py``, a ridge system
``(A + alpha I) coef = b`` is decomposed once (a Cholesky factor for one
``alpha``, an eigendecomposition for several or for ``alpha = 0``) and solved
per alpha from the decomposition. Several alphas are compared by generalised
cross-validation (GCV) from the spectrum, or, in memory, by exact
leave-one-out error (:mod:`._ridge`). Here also: the result type
:class:`RidgeSolution`, the feature scale that relative penalties are
measured in, and the test for centred features that are rounding alone.

Nothing here knows about scikit-learn; device specifics go through
:mod:`sklearn_attn._backend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._backend import CholeskyFactor, eigh, to_host
from ._feature_blocks import slices

__all__ = ["Decomposition", "RidgeSolution"]


@dataclass
class RidgeSolution:
    """Result of :func:`~._ridge.fit_ridge` and of the solves of
    :class:`~._ridge_statistics.RidgeStatistics`.

    Attributes
    ----------
    coef : ndarray of shape (n_features, n_targets)
    intercept : ndarray of shape (n_targets,)
    alpha_index : int
        Index of the selected alpha (0 when a single alpha was given).
    loo_mse : ndarray of shape (n_alphas, n_targets) or None
        Weighted leave-one-out mean squared error for each alpha and target,
        computed when more than one alpha is given.
    mode : {"primal", "dual"}
    refinement_steps : int or None
        ``None`` when the decomposed matrix came from float64 products (float64
        features, ``alpha = 0``, or a float32 problem too ill-conditioned to
        refine, which is redone in float64); otherwise the steps of iterative
        refinement that took the float32-accumulated solution to float64
        accuracy.
    gcv_mse : ndarray of shape (n_alphas, n_targets) or None
        Generalised cross-validation error of each alpha and target, from
        :meth:`RidgeStatistics.solve` with ``criterion="gcv"`` or
        :meth:`RidgeStatistics.solve_path`, or :func:`fit_ridge` with
        ``criterion="gcv"``; ``None`` otherwise (``loo_mse`` is then None).
    alphas : ndarray of shape (n_alphas,) or None
        The penalties compared, in the units of the solved problem: the given
        ones, times the feature scale with ``relative_alphas=True``.
    """

    coef: np.ndarray
    intercept: np.ndarray
    alpha_index: int
    loo_mse: np.ndarray | None
    mode: str
    refinement_steps: int | None = None
    gcv_mse: np.ndarray | None = None
    alphas: np.ndarray | None = None


class Decomposition(NamedTuple):
    """A ridge matrix decomposed once, to solve for one or several alphas.

    Either ``solve`` (from a Cholesky factor of ``A + alpha I``, one positive
    alpha) or the eigendecomposition ``evecs`` with ``inverse[:, k] =
    1 / (evals + alphas[k])`` (a pseudo-inverse for ``alpha = 0``); the
    other fields are None.
    """

    solve: Callable[[Any], Any] | None
    evecs: Any | None
    inverse: Any | None


class Spectrum(NamedTuple):
    """The eigendecomposition of a ridge matrix, with the inverse spectrum of
    every alpha (``inverse[:, k] = 1 / (evals + alphas[k])``)."""

    evals: Any
    evecs: Any
    inverse: Any


def decompose(matrix, alphas, device):
    """Decompose ``matrix`` once for ``alphas`` (see :class:`Decomposition`).

    Cholesky falls back to the eigen route when the matrix is not numerically
    positive definite. ``matrix`` is overwritten.
    """
    xp = device.xp
    if alphas.size == 1 and alphas[0] > 0:
        diagonal = xp.arange(matrix.shape[0])
        saved = matrix[diagonal, diagonal]  # a copy (advanced indexing)
        matrix[diagonal, diagonal] += alphas[0]
        try:
            return Decomposition(CholeskyFactor(matrix, device).solve, None, None)
        except np.linalg.LinAlgError:
            # The failed factorisation left the matrix as it was.
            matrix[diagonal, diagonal] = saved
    spectrum = eigen_spectrum(matrix, alphas, device)
    return Decomposition(None, spectrum.evecs, spectrum.inverse)


def eigen_spectrum(matrix, alphas, device):
    """The :class:`Spectrum` of ``matrix`` for every alpha."""
    evals, evecs = eigh(matrix, device)
    inverse = device.xp.stack([inverse_spectrum(evals, a) for a in alphas], axis=1)
    return Spectrum(evals, evecs, inverse)


def spectral_solver(evecs, inverse):
    """``r -> V diag(inverse) V^T r`` from an eigendecomposition."""

    def solve(r):
        return evecs @ (inverse[:, None] * (evecs.T @ r))

    return solve


def solutions_for_all_alphas(evecs, inverse, rotated):
    """``V diag(inverse[:, k]) rotated`` for every alpha ``k`` in one product.

    ``rotated`` is ``V^T r`` of shape ``(m, n_targets)``; the result has shape
    ``(m, n_alphas, n_targets)``.
    """
    m, n_targets = rotated.shape
    coefs = evecs @ (inverse[:, :, None] * rotated[:, None, :]).reshape(m, -1)
    return coefs.reshape(m, inverse.shape[1], n_targets)


def inverse_spectrum(evals, alpha):
    """``1 / (evals + alpha)``; for ``alpha = 0`` a pseudo-inverse with cutoff."""
    if alpha > 0:
        inv = 1.0 / (evals + alpha)
    else:
        cutoff = np.finfo(np.float64).eps * evals.shape[0] * float(abs(evals).max())
        keep = evals > cutoff
        inv = evals * 0.0
        inv[keep] = 1.0 / evals[keep]
    return inv


# -- comparing alphas by generalised cross-validation ----------------------------------


def gcv_select(rss, df, weight_sum, frequency_sum, alphas, xp):
    """Generalised cross-validation error ``(RSS / W) / (1 - df / W)^2`` of
    every alpha and target, and the index of the best alpha.

    ``rss`` (n_alphas, n_targets) and ``weight_sum`` are those of the solved
    problem; ``frequency_sum`` is ``W``, the users' weight sum (before any
    rescaling by a power of two), which counts samples as repeated rows:
    integer weights give the GCV of the repeated data. Infinite where
    ``df >= W`` (an interpolating fit, for which GCV is undefined). The best
    alpha has the smallest mean GCV over targets, or is the largest alpha when
    every fit interpolates (GCV undefined everywhere).

    Returns
    -------
    gcv_mse : array of shape (n_alphas, n_targets), on the device of ``rss``
    alpha_index : int
    """
    rss = xp.maximum(rss, 0.0) / weight_sum
    remaining = 1.0 - df / frequency_sum
    safe = xp.where(remaining > 0, remaining, 1.0)[:, None]
    gcv = xp.where(remaining[:, None] > 0, rss / safe**2, xp.inf)
    mean = to_host(gcv).mean(axis=1)
    if not np.isfinite(mean).any():
        return gcv, int(np.argmax(alphas))
    return gcv, int(np.argmin(mean))


# -- the feature scale, and features that vanish when centred --------------------------


def trace(matrix, xp):
    """``trace(matrix)`` as a Python float."""
    diagonal = xp.arange(matrix.shape[0])
    return float(matrix[diagonal, diagonal].sum())


def trace_scaled(alphas, matrix, weight_sum, xp):
    """``alphas * trace(matrix) / weight_sum``; unchanged for a zero trace
    (constant features: every penalty then gives the same fit)."""
    scale = trace(matrix, xp)
    return alphas * (scale / weight_sum) if scale > 0 else alphas


def centred_features_vanish(centred_trace, mean_square, n_samples, dtype=np.float64):
    """Whether the centred features are only the rounding error of centring.

    ``centred_trace`` is ``sum_i w_i ||phi_i - mean||^2`` and ``mean_square``
    ``W ||mean||^2``, their sum the raw ``sum_i w_i ||phi_i||^2``. Centring
    ``n`` samples in ``dtype`` leaves each feature wrong by up to about
    ``n eps`` of its magnitude, so a centred sum of squares below
    ``(n eps)^2`` times the raw one is made of rounding alone: the features
    are constant to working precision, the centred problem is zero and the fit
    is the intercept. Fitting that noise instead would choose penalties
    relative to it and amplify it without bound. Without an intercept
    (``mean_square = 0``) only all-zero features vanish.

    A sum that overflowed is an error: the features' products are not
    representable in float64 (``FloatingPointError``).
    """
    raw = centred_trace + mean_square
    if not np.isfinite(raw):
        raise FloatingPointError("the products of the features overflow float64")
    threshold = (max(n_samples, 1) * np.finfo(dtype).eps) ** 2
    return centred_trace <= threshold * raw


def subtract_weighted_outer(matrix, offset, weight):
    """``matrix -= weight offset offset^T`` in place, in row blocks.

    The centring of a second moment about a shifted mean: no ``(p, p)``
    temporary, and the product of two equal factors
    ``(sqrt(weight) offset_i)(sqrt(weight) offset_j)`` keeps a symmetric
    matrix exactly symmetric.
    """
    scaled = np.sqrt(weight) * offset
    for rows in slices(matrix.shape[0], 1024):
        matrix[rows] -= scaled[rows, None] * scaled

"""Ridge regression on features that are computed block by block.

The random-feature estimators never hold their full ``(n_samples, n_features)``
feature matrix. They hand this module a :class:`FeatureBlocks` object that
computes any block ``Phi[rows, cols]`` on demand, and the solver streams over
it:

* **dual** (``n_samples <= n_features``): the Gram matrix
  ``K = Phi Phi^T`` is accumulated over column blocks, decomposed once, and the
  coefficients ``Phi^T a`` come from a second pass;
* **primal** (``n_samples > n_features``): ``C = Phi^T Phi`` and ``Phi^T y`` are
  accumulated over row blocks in one pass.

As in scikit-learn's ``_ridge.py``, the work is split into *decompose once*
(Cholesky for one ``alpha``, eigendecomposition for several or for
``alpha = 0``) and *solve per alpha*. Several alphas are compared by exact
leave-one-out error computed from the one eigendecomposition, as ``RidgeCV``
does. The intercept is never penalised; sample weights enter as ``sqrt(w)``
row scalings. ``alpha = 0`` gives the minimum-norm least-squares solution.

Nothing here knows about scikit-learn; device specifics go through
:mod:`sklearn_attn._backend`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._backend import Device, LowerGram, cholesky_solve, eigh, to_host

__all__ = ["FeatureBlocks", "ExplicitFeatures", "RidgeSolution", "fit_ridge"]


class FeatureBlocks:
    """Interface of a feature matrix that is computed block by block.

    Subclasses set ``n_samples``, ``n_features`` and ``device`` and implement
    :meth:`compute`, :meth:`row_blocks` and :meth:`column_blocks`.
    """

    n_samples: int
    n_features: int
    device: Device

    def compute(self, rows: slice, cols: slice):  # pragma: no cover - interface
        """Return ``Phi[rows, cols]`` as a new floating array on ``self.device``.

        The caller owns the result and may modify it in place.
        """
        raise NotImplementedError

    def row_blocks(self):  # pragma: no cover - interface
        """Slices over samples; each block holds all features."""
        raise NotImplementedError

    def column_blocks(self):  # pragma: no cover - interface
        """Slices over features; each block holds all samples."""
        raise NotImplementedError


class ExplicitFeatures(FeatureBlocks):
    """A feature matrix held in memory, cut into fixed-size blocks."""

    def __init__(self, features, device=None, block_size=256):
        self.features = features
        self.n_samples, self.n_features = features.shape
        self.device = Device() if device is None else device
        self.block_size = block_size

    def compute(self, rows, cols):
        # A fresh array: callers scale blocks in place.
        return self.device.xp.array(self.features[rows, cols], dtype=np.float64)

    def row_blocks(self):
        return _slices(self.n_samples, self.block_size)

    def column_blocks(self):
        return _slices(self.n_features, self.block_size)


def _slices(n, size):
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


@dataclass
class RidgeSolution:
    """Result of :func:`fit_ridge`.

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
    """

    coef: np.ndarray
    intercept: np.ndarray
    alpha_index: int
    loo_mse: np.ndarray | None
    mode: str


def fit_ridge(
    features, y, alphas, *, sample_weight=None, fit_intercept=True, mode="auto"
):
    """Weighted ridge regression with an unpenalised intercept.

    Minimises ``sum_i w_i ||y_i - Phi_i coef - intercept||^2 + alpha ||coef||^2``.

    Parameters
    ----------
    features : FeatureBlocks
    y : ndarray of shape (n_samples, n_targets), host memory
    alphas : sequence of float
        One value (``>= 0``), or several (``> 0``) to choose from by exact
        leave-one-out error; the best one for the mean over targets is kept.
    sample_weight : ndarray of shape (n_samples,) or None
    fit_intercept : bool
    mode : {"auto", "primal", "dual"}
        ``"auto"`` picks the dual when ``n_samples <= n_features``.

    Returns
    -------
    RidgeSolution
        Coefficients on the host (NumPy).
    """
    device = features.device
    xp = device.xp
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    n, p = features.n_samples, features.n_features
    if mode == "auto":
        mode = "dual" if n <= p else "primal"
    weights = (
        np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    )
    weight_sum = weights.sum()
    y_mean = weights @ y / weight_sum if fit_intercept else np.zeros(y.shape[1])
    sqrt_w = xp.asarray(np.sqrt(weights))
    # Unit weights need no row scaling of the feature blocks.
    scale_rows = sample_weight is not None
    # Targets in the weighted, centred problem: sqrt(w) * (y - y_mean).
    y_scaled = sqrt_w[:, None] * xp.asarray(y - y_mean)
    solver = _solve_dual if mode == "dual" else _solve_primal
    coef, feature_mean, alpha_index, loo_mse = solver(
        features, y_scaled, sqrt_w, weight_sum, alphas, fit_intercept, scale_rows
    )
    coef = to_host(coef)
    intercept = y_mean - (to_host(feature_mean) @ coef if fit_intercept else 0.0)
    return RidgeSolution(
        coef,
        np.asarray(intercept),
        alpha_index,
        None if loo_mse is None else to_host(loo_mse),
        mode,
    )


# -- dual: Gram matrix over samples ------------------------------------------------


def _dual_gram(features, sqrt_w, weight_sum, fit_intercept, scale_rows):
    """``P D Phi Phi^T D P``: the weighted Gram matrix, centred if needed."""
    n = features.n_samples
    gram = LowerGram(n, features.device)
    all_rows = slice(0, n)
    for cols in features.column_blocks():
        block = features.compute(all_rows, cols)
        if scale_rows:
            block *= sqrt_w[:, None].astype(block.dtype)
        gram.add(block)
    if fit_intercept:
        # Centring the features is the projection P = I - s s^T / sum(w) on both
        # sides (s = sqrt(w)): a symmetric rank-2 update, O(n^2), no pass over Phi.
        # P K P = K - (v s^T + s v^T) / sum(w) with v = K s - (s^T K s) s / (2 sum(w)).
        gram_s = gram.matvec(sqrt_w)
        v = gram_s - (sqrt_w @ gram_s) / (2.0 * weight_sum) * sqrt_w
        gram.rank2_update(-1.0 / weight_sum, v, sqrt_w)
    return gram.symmetric()


def _solve_dual(
    features, y_scaled, sqrt_w, weight_sum, alphas, fit_intercept, scale_rows
):
    device = features.device
    xp = device.xp
    n = features.n_samples
    gram = _dual_gram(features, sqrt_w, weight_sum, fit_intercept, scale_rows)
    loo_mse = None
    alpha_index = 0
    dual_coef = None
    if alphas.size == 1 and alphas[0] > 0:
        diagonal = xp.arange(n)
        gram[diagonal, diagonal] += alphas[0]
        try:
            dual_coef = cholesky_solve(gram, y_scaled, device)
        except np.linalg.LinAlgError:
            # Ill-conditioned for this alpha: rebuild and use the eigen route.
            gram = _dual_gram(features, sqrt_w, weight_sum, fit_intercept, scale_rows)
    if dual_coef is None:
        evals, evecs = eigh(gram, device)
        del gram
        evals_y = evecs.T @ y_scaled
        if alphas.size == 1:
            dual_coef = evecs @ (_inverse_spectrum(evals, alphas[0])[:, None] * evals_y)
        else:
            inv = xp.stack([_inverse_spectrum(evals, a) for a in alphas], axis=1)
            n_targets = y_scaled.shape[1]
            # All alphas at once: (n, n_alphas * n_targets) in one product.
            coefs = evecs @ (inv[:, :, None] * evals_y[:, None, :]).reshape(n, -1)
            coefs = coefs.reshape(n, alphas.size, n_targets)
            evecs **= 2
            # Diagonal of P (K + alpha I)^-1 P: centring maps sqrt(w) to an
            # eigenvector of eigenvalue alpha, whose share w_i / (alpha sum(w))
            # is removed. Then 1 - leverage_i = alpha * inv_diag_i.
            inv_diag = evecs @ inv
            if fit_intercept:
                inv_diag -= (sqrt_w**2)[:, None] / (
                    weight_sum * xp.asarray(alphas)[None, :]
                )
            loo_mse = ((coefs / inv_diag[:, :, None]) ** 2).sum(axis=0) / weight_sum
            alpha_index = int(xp.argmin(loo_mse.mean(axis=1)))
            dual_coef = coefs[:, alpha_index, :]
        del evecs
    # Back to feature space: coef = Phi^T D P a, and the weighted feature mean.
    if fit_intercept:
        dual_coef = (
            dual_coef - sqrt_w[:, None] * (sqrt_w @ dual_coef)[None, :] / weight_sum
        )
    rhs = sqrt_w[:, None] * dual_coef
    if fit_intercept:
        rhs = xp.concatenate([rhs, (sqrt_w**2 / weight_sum)[:, None]], axis=1)
    out = xp.empty((features.n_features, rhs.shape[1]))
    for cols in features.column_blocks():
        out[cols] = features.compute(slice(0, n), cols).T @ rhs
    if fit_intercept:
        return out[:, :-1], out[:, -1], alpha_index, loo_mse
    return out, None, alpha_index, loo_mse


def _inverse_spectrum(evals, alpha):
    """``1 / (evals + alpha)``; for ``alpha = 0`` a pseudo-inverse with cutoff."""
    if alpha > 0:
        inv = 1.0 / (evals + alpha)
    else:
        cutoff = np.finfo(np.float64).eps * evals.shape[0] * float(abs(evals).max())
        keep = evals > cutoff
        inv = evals * 0.0
        inv[keep] = 1.0 / evals[keep]
    return inv


# -- primal: covariance over features ---------------------------------------------


def _solve_primal(
    features, y_scaled, sqrt_w, weight_sum, alphas, fit_intercept, scale_rows
):
    device = features.device
    xp = device.xp
    p = features.n_features
    all_cols = slice(0, p)
    cov = LowerGram(p, device)
    # Phi^T [w, D y_scaled]: feature sums and the right-hand side in one product.
    cross = xp.zeros((p, 1 + y_scaled.shape[1]))
    rhs_cols = xp.concatenate(
        [(sqrt_w**2)[:, None], sqrt_w[:, None] * y_scaled], axis=1
    )
    for rows in features.row_blocks():
        block = features.compute(rows, all_cols)
        cross += block.T @ rhs_cols[rows].astype(block.dtype)
        if scale_rows:
            block *= sqrt_w[rows, None].astype(block.dtype)
        cov.add(block.T)
    cov = cov.symmetric()
    feature_mean = cross[:, 0] / weight_sum
    rhs = cross[:, 1:]
    if fit_intercept:
        # Centre in place, in row blocks: no (p, p) temporary.
        for block_rows in _slices(p, 1024):
            cov[block_rows] -= (
                weight_sum * feature_mean[block_rows, None] * feature_mean
            )

    loo_mse = None
    alpha_index = 0
    if alphas.size == 1 and alphas[0] > 0:
        diagonal = xp.arange(p)
        cov_diag = cov[diagonal, diagonal]  # a copy (advanced indexing)
        cov[diagonal, diagonal] += alphas[0]
        try:
            return (cholesky_solve(cov, rhs, device), feature_mean, 0, None)
        except np.linalg.LinAlgError:
            cov[diagonal, diagonal] = cov_diag
    evals, evecs = eigh(cov, device)
    evals_rhs = evecs.T @ rhs
    if alphas.size == 1:
        coef = evecs @ (_inverse_spectrum(evals, alphas[0])[:, None] * evals_rhs)
        return coef, feature_mean, 0, None
    inv = xp.stack([_inverse_spectrum(evals, a) for a in alphas], axis=1)
    n_targets = y_scaled.shape[1]
    coefs_rotated = (inv[:, :, None] * evals_rhs[:, None, :]).reshape(p, -1)
    sq_err = xp.zeros((alphas.size, n_targets))
    hat_offset = sqrt_w**2 / weight_sum if fit_intercept else xp.zeros_like(sqrt_w)
    for rows in features.row_blocks():
        block = features.compute(rows, all_cols)
        if fit_intercept:
            block -= feature_mean[None, :]
        if scale_rows:
            block *= sqrt_w[rows, None]
        rotated = block @ evecs
        fitted = (rotated @ coefs_rotated).reshape(-1, alphas.size, n_targets)
        rotated **= 2
        leverage = rotated @ inv + hat_offset[rows, None]
        residual = (y_scaled[rows, None, :] - fitted) / (1.0 - leverage)[:, :, None]
        sq_err += (residual**2).sum(axis=0)
    loo_mse = sq_err / weight_sum
    alpha_index = int(xp.argmin(loo_mse.mean(axis=1)))
    coef = evecs @ coefs_rotated.reshape(p, alphas.size, n_targets)[:, alpha_index, :]
    return coef, feature_mean, alpha_index, loo_mse

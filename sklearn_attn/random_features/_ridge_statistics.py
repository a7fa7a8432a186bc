"""Sufficient statistics of ridge regression, accumulated in one pass and merged.

The one-pass counterpart of :func:`~._ridge.fit_ridge`, for data seen once
(``partial_fit``, one task per chunk of a dask array): each set of samples
becomes the float64 sums of its primal ridge problem, sets of samples merge
exactly in algebra, and the total is solved from one decomposition
(:mod:`._spectral`), comparing several alphas by generalised cross-validation,
which the sums determine.

Nothing here knows about scikit-learn; device specifics go through
:mod:`sklearn_attn._backend`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._backend import Device, LowerGram, to_device, to_host
from ._feature_blocks import slices
from ._spectral import (
    RidgeSolution,
    centred_features_vanish,
    decompose,
    eigen_spectrum,
    gcv_select,
    solutions_for_all_alphas,
    spectral_solver,
    subtract_weighted_outer,
    trace,
    trace_scaled,
)

__all__ = ["NormalEquations", "RidgeStatistics"]


class NormalEquations(NamedTuple):
    """The ridge system ``(matrix + alpha I) coef = rhs`` of accumulated
    statistics, with what the intercept needs (see
    :meth:`RidgeStatistics.normal_equations`)."""

    matrix: np.ndarray
    rhs: np.ndarray
    feature_mean: np.ndarray | None
    target_mean: np.ndarray
    target_ss: np.ndarray


class _GCVPath(NamedTuple):
    """One eigendecomposition of the statistics' matrix, and what every alpha
    needs from it: ``coef_k = evecs diag(inverse[:, k]) rotated_rhs``."""

    evecs: Any
    rotated_rhs: Any
    inverse: Any
    gcv_mse: np.ndarray
    best_index: int
    equations: NormalEquations
    alphas: np.ndarray


_LOO_NEEDS_A_SECOND_PASS = (
    "several alphas are compared by exact leave-one-out error, which needs every "
    "sample's leverage under the covariance of all the samples, i.e. a second pass "
    "over the data; accumulated statistics see each sample once and keep only sums. "
    "Give one alpha; to choose it, fit on all the data at once with an array of "
    "alphas (exact leave-one-out), compare alphas on held-out data, or use "
    "generalised cross-validation, which the statistics do determine "
    '(RidgeStatistics.solve(alphas, criterion="gcv"))'
)


class RidgeStatistics:
    """Sufficient statistics of weighted ridge regression, accumulated in one pass.

    For features ``phi_i`` (from a :class:`FeatureBlocks`), targets ``y_i`` and
    weights ``w_i``, this holds the sums that every solve of
    ``min sum_i w_i ||y_i - phi_i coef - intercept||^2 + alpha ||coef||^2`` (with
    or without the unpenalised intercept) needs, around pilot shifts ``c`` and
    ``y0`` taken from the first samples seen (their weighted means)::

        weight_sum      W = sum_i w_i
        feature_sum     s = sum_i w_i (phi_i - c)                (p,)
        target_sum      t = sum_i w_i (y_i - y0)                 (k,)
        covariance      C = sum_i w_i (phi_i - c)(phi_i - c)^T   (p, p)
        cross           R = sum_i w_i (phi_i - c)(y_i - y0)^T    (p, k)
        target_squares  q = sum_i w_i (y_i - y0)**2              (k,)

    for ``p`` features and ``k`` targets.

    As in the primal solver, the shifts keep float rounding relative to the
    spread of the features rather than to their mean (a feature of mean 1e4
    and spread 1 loses nothing to the centring). Statistics of disjoint sets of
    samples :meth:`merge` exactly in algebra (the second set's sums are moved
    to the first set's shifts by rank-one corrections), so any reduction tree
    over chunks gives the same result up to rounding.

    Everything is float64 NumPy in host memory, so the object pickles (to send
    between processes, or to continue a stream later); :meth:`update` computes
    on the device of its feature blocks and brings only the sums back. Products
    are always in float64: a float32-accumulated covariance would need the
    refinement of :func:`fit_ridge`, a second pass over the data.

    Parameters
    ----------
    n_features : int
    n_targets : int

    Attributes
    ----------
    n_samples : int
        Samples seen (zero weights included).
    n_positive : int
        Samples of positive weight.
    weight_sum, feature_sum, target_sum, covariance, cross, target_squares
        The sums above; ``covariance`` is symmetric and Fortran-ordered.
    feature_shift : ndarray of shape (n_features,) or None
    target_shift : ndarray of shape (n_targets,) or None
        The pilot shifts ``c`` and ``y0`` (``None`` before the first sample).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.random_features._feature_blocks import ExplicitFeatures
    >>> from sklearn_attn.random_features._ridge_statistics import RidgeStatistics
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(100, 3)), rng.normal(size=(100, 1))
    >>> first = RidgeStatistics(3, 1).update(ExplicitFeatures(X[:60]), y[:60])
    >>> second = RidgeStatistics(3, 1).update(ExplicitFeatures(X[60:]), y[60:])
    >>> solution = first.merge(second).solve(0.5)
    >>> solution.coef.shape, solution.intercept.shape
    ((3, 1), (1,))
    """

    def __init__(self, n_features, n_targets):
        self.n_features = int(n_features)
        self.n_targets = int(n_targets)
        self.n_samples = 0
        self.n_positive = 0
        self.weight_sum = 0.0
        self.feature_shift = None
        self.target_shift = None
        self.feature_sum = np.zeros(self.n_features)
        self.target_sum = np.zeros(self.n_targets)
        self.covariance = np.zeros((self.n_features, self.n_features), order="F")
        self.cross = np.zeros((self.n_features, self.n_targets))
        self.target_squares = np.zeros(self.n_targets)

    # -- accumulation ------------------------------------------------------------
    def update(self, features, y, sample_weight=None):
        """Add the samples of ``features`` (streamed over its row blocks), in place.

        Parameters
        ----------
        features : FeatureBlocks
            ``n_features`` columns; blocks are computed on ``features.device``.
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : ndarray of shape (n_samples,) or None
            Non-negative weights; ``None`` means unit weights.

        Returns
        -------
        self : RidgeStatistics
        """
        n, p = features.n_samples, features.n_features
        if p != self.n_features:
            raise ValueError(
                f"the features have {p} columns; these statistics hold "
                f"{self.n_features}."
            )
        y = np.asarray(to_host(y), dtype=np.float64).reshape(n, -1)
        if y.shape[1] != self.n_targets:
            raise ValueError(
                f"y has {y.shape[1]} target(s); these statistics hold {self.n_targets}."
            )
        if n == 0:
            return self
        device = features.device
        xp = device.xp
        if sample_weight is None:
            weights = np.ones(n)
        else:
            weights = np.asarray(to_host(sample_weight), dtype=np.float64).ravel()
        batch_weight = float(weights.sum())
        if self.target_shift is None:
            self.target_shift = (
                weights @ y / batch_weight if batch_weight > 0 else y.mean(axis=0)
            )
        targets = y - self.target_shift
        sqrt_w = np.sqrt(weights)
        # (D B)^T D [1, y - y0] = B^T W [1, y - y0] for B = Phi - c: the
        # feature sums and the cross products in one product per block.
        rhs_cols = xp.asarray(
            sqrt_w[:, None] * np.concatenate([np.ones((n, 1)), targets], axis=1)
        )
        scale_rows = sample_weight is not None
        sqrt_w_dev = xp.asarray(sqrt_w) if scale_rows else None
        shift = None if self.feature_shift is None else xp.asarray(self.feature_shift)
        gram = LowerGram(p, device)
        cross = xp.zeros((p, 1 + self.n_targets))
        for rows in features.row_blocks():
            block = features.compute(rows, slice(0, p)).astype(np.float64, copy=False)
            if shift is None:
                # The pilot shift: the weighted mean of the first block.
                w_rows = weights[rows]
                total = float(w_rows.sum())
                shift = (
                    xp.asarray(w_rows) @ block / total
                    if total > 0
                    else block.mean(axis=0)
                )
                self.feature_shift = np.array(to_host(shift))
            block -= shift[None, :]
            if scale_rows:
                block *= sqrt_w_dev[rows, None]
            cross += block.T @ rhs_cols[rows]
            gram.add(block.T)
        covariance = to_host(gram.symmetric())
        del gram
        if self.n_samples == 0:
            # Take the accumulated matrix itself: no second (p, p) array.
            self.covariance = np.asfortranarray(covariance)
        else:
            self.covariance += covariance
        del covariance
        cross = to_host(cross)
        self.feature_sum += cross[:, 0]
        self.cross += cross[:, 1:]
        self.target_sum += weights @ targets
        self.target_squares += weights @ targets**2
        self.weight_sum += batch_weight
        self.n_samples += n
        self.n_positive += int(np.count_nonzero(weights > 0))
        return self

    def merge(self, other):
        """Add the statistics of another, disjoint set of samples, in place.

        The result is that of one :meth:`update` over both sets, exactly in
        algebra: ``other``'s sums are moved to this object's pilot shifts.
        ``other`` is left unchanged.

        Parameters
        ----------
        other : RidgeStatistics

        Returns
        -------
        self : RidgeStatistics
        """
        if (other.n_features, other.n_targets) != (self.n_features, self.n_targets):
            raise ValueError(
                f"cannot merge statistics of {other.n_features} features and "
                f"{other.n_targets} target(s) into statistics of {self.n_features} "
                f"features and {self.n_targets} target(s)."
            )
        if other.n_samples == 0:
            return self
        if self.n_samples == 0:
            for name, value in vars(other).items():
                setattr(self, name, value.copy() if hasattr(value, "copy") else value)
            self.covariance = np.asfortranarray(self.covariance)
            return self
        # phi - c = (phi - c') + delta and y - y0 = (y - y0') + eps.
        delta = other.feature_shift - self.feature_shift
        eps = other.target_shift - self.target_shift
        w, s, t = other.weight_sum, other.feature_sum, other.target_sum
        self.covariance += other.covariance
        _add_rank_two(self.covariance, s, delta, w)
        self.cross += (
            other.cross
            + np.outer(s, eps)
            + np.outer(delta, t)
            + w * np.outer(delta, eps)
        )
        self.feature_sum += s + w * delta
        self.target_sum += t + w * eps
        self.target_squares += other.target_squares + 2 * eps * t + w * eps**2
        self.weight_sum += w
        self.n_samples += other.n_samples
        self.n_positive += other.n_positive
        return self

    # -- solving -------------------------------------------------------------------
    def normal_equations(self, fit_intercept=True):
        """The ridge system ``(A + alpha I) coef = b`` of these statistics.

        Returns
        -------
        NormalEquations
            A named tuple of

        matrix : ndarray of shape (n_features, n_features)
            ``A``: the weighted covariance of the features about their
            weighted mean (``fit_intercept``), or their weighted second moment.
            A new Fortran-ordered array.
        rhs : ndarray of shape (n_features, n_targets)
            ``b``, the same for the features against the targets.
        feature_mean : ndarray of shape (n_features,) or None
        target_mean : ndarray of shape (n_targets,)
            Weighted means (``None`` and zeros without intercept): the intercept
            is ``target_mean - feature_mean @ coef``.
        target_ss : ndarray of shape (n_targets,)
            Weighted sum of squares of the (centred) targets.
        """
        if not self.weight_sum > 0:
            raise ValueError(
                "the statistics hold no sample of positive weight: nothing to fit."
            )
        total = self.weight_sum
        c, y0 = self.feature_shift, self.target_shift
        s, t, q = self.feature_sum, self.target_sum, self.target_squares
        matrix = self.covariance.copy(order="F")
        if fit_intercept:
            offset = s / total  # mean - c
            # sum w (phi - mean)(phi - mean)^T = C - W offset offset^T.
            subtract_weighted_outer(matrix, offset, total)
            rhs = self.cross - np.outer(offset, t)
            feature_mean = c + offset
            target_mean = y0 + t / total
            target_ss = np.maximum(q - t * t / total, 0.0)
        else:
            # sum w phi phi^T with phi = (phi - c) + c.
            _add_rank_two(matrix, s, c, total)
            rhs = (
                self.cross + np.outer(s, y0) + np.outer(c, t) + total * np.outer(c, y0)
            )
            feature_mean = None
            target_mean = np.zeros(self.n_targets)
            target_ss = q + 2 * y0 * t + total * y0**2
        mean_square = (
            total * float(feature_mean @ feature_mean) if fit_intercept else 0.0
        )
        # The sums are formed from features shifted in float64 (see fit_ridge).
        if centred_features_vanish(trace(matrix, np), mean_square, self.n_positive):
            matrix[...] = 0.0
            rhs = np.zeros_like(rhs)
        return NormalEquations(matrix, rhs, feature_mean, target_mean, target_ss)

    def solve(
        self, alphas, fit_intercept=True, *, criterion=None, relative=False, device=None
    ):
        """Ridge coefficients for one alpha, or for the best of several by GCV.

        Parameters
        ----------
        alphas : float or sequence of float
            One penalty (``>= 0``; ``0`` gives the minimum-norm least-squares
            fit), or several (``> 0``) with ``criterion="gcv"``.
        fit_intercept : bool, default=True
        criterion : {None, "gcv"}, default=None
            How several alphas are compared. Exact leave-one-out error, what
            :func:`fit_ridge` uses, cannot be had from statistics (it needs a
            second pass over the data): several alphas without
            ``criterion="gcv"`` raise ``ValueError``.
        relative : bool, default=False
            ``alphas`` in units of the feature scale ``trace(A) / W`` (the
            weighted mean squared norm of the centred features), as
            :func:`fit_ridge` with ``relative_alphas=True``.
        device : Device, default=None
            Where to decompose (the CPU by default); the result is on the host.

        Returns
        -------
        RidgeSolution
            ``mode="primal"``; with several alphas ``alpha_index`` is the
            smallest mean generalised cross-validation error over targets and
            ``gcv_mse`` holds them all.
        """
        alphas = _check_statistics_alphas(alphas, criterion)
        device = Device() if device is None else device
        if alphas.size == 1 and criterion is None:
            equations = self.normal_equations(fit_intercept)
            if relative:
                alphas = trace_scaled(alphas, equations.matrix, self.weight_sum, np)
            solve, evecs, inverse = decompose(
                to_device(equations.matrix, device), alphas, device
            )
            if solve is None:
                solve = spectral_solver(evecs, inverse[:, 0])
            coef = to_host(solve(device.xp.asarray(equations.rhs)))
            return self._solution(coef, equations, 0, None, alphas)
        return self.solve_path(
            alphas, fit_intercept, relative=relative, device=device, best_only=True
        )

    def solve_path(
        self,
        alphas,
        fit_intercept=True,
        *,
        relative=False,
        device=None,
        best_only=False,
    ):
        """Solutions for every alpha from one eigendecomposition.

        Parameters
        ----------
        alphas : float or sequence of float
            Penalties ``>= 0`` (``0``: minimum-norm least squares).
        fit_intercept : bool, default=True
        relative : bool, default=False
            ``alphas`` in units of the feature scale (see :meth:`solve`).
        device : Device, default=None
            Where to decompose (the CPU by default).
        best_only : bool, default=False
            Return only the solution of smallest mean GCV error.

        Returns
        -------
        solutions : list of RidgeSolution
            One per alpha, in order (``alpha_index`` is its position), each
            with the ``gcv_mse`` of all alphas (see :meth:`gcv_mse`).
        """
        alphas = _check_statistics_alphas(alphas, "gcv", positive=False)
        device = Device() if device is None else device
        xp = device.xp
        path = self._gcv_path(alphas, fit_intercept, device, relative)
        gcv, alphas = path.gcv_mse, path.alphas
        if best_only:
            best = path.best_index
            coef = path.evecs @ (path.inverse[:, best, None] * path.rotated_rhs)
            return self._solution(to_host(coef), path.equations, best, gcv, alphas)
        coefs = to_host(
            xp.ascontiguousarray(
                solutions_for_all_alphas(path.evecs, path.inverse, path.rotated_rhs)
            )
        )
        return [
            self._solution(coefs[:, index], path.equations, index, gcv, alphas)
            for index in range(alphas.size)
        ]

    def gcv_mse(self, alphas, fit_intercept=True, *, relative=False, device=None):
        """Generalised cross-validation error of each alpha and target.

        ``(RSS(alpha) / W) / (1 - df(alpha) / W)^2`` with ``RSS`` the weighted
        residual sum of squares, ``W`` the weight sum (weights count samples
        as repeated rows, as in :func:`fit_ridge`) and
        ``df = sum_k s_k / (s_k + alpha)`` (plus
        one for the intercept) over the eigenvalues ``s_k`` of the covariance:
        the GCV of the weighted problem (rows scaled by ``sqrt(w)``), in the
        units of the weighted leave-one-out error of :func:`fit_ridge`, with
        which it agrees for unit weights when all leverages are equal. ``RSS``
        is formed from sums, so its absolute error is about ``1e-16`` times the
        targets' sum of squares: a fit that is exact to that level reports
        about zero.

        Returns
        -------
        gcv_mse : ndarray of shape (n_alphas, n_targets)
        """
        alphas = _check_statistics_alphas(alphas, "gcv", positive=False)
        device = Device() if device is None else device
        return self._gcv_path(alphas, fit_intercept, device, relative).gcv_mse

    def _gcv_path(self, alphas, fit_intercept, device, relative=False):
        xp = device.xp
        equations = self.normal_equations(fit_intercept)
        if relative:
            alphas = trace_scaled(alphas, equations.matrix, self.weight_sum, np)
        evals, evecs, inverse = eigen_spectrum(
            to_device(equations.matrix, device), alphas, device
        )
        equations = equations._replace(matrix=None)  # decomposed: not needed
        rotated_rhs = evecs.T @ xp.asarray(equations.rhs)
        # Rounding can leave null eigenvalues slightly negative.
        evals = xp.maximum(evals, 0.0)
        # RSS = y^T y - 2 coef^T b + coef^T A coef, per eigenvector
        # z_k^2 (2 inv_k - s_k inv_k^2) with inv_k = 1 / (s_k + alpha).
        explained = (inverse * (2.0 - evals[:, None] * inverse)).T @ rotated_rhs**2
        rss = xp.asarray(equations.target_ss)[None, :] - explained
        dof = (evals[:, None] * inverse).sum(axis=0) + float(fit_intercept)
        # The statistics hold the users' weights: W counts the samples.
        gcv, best = gcv_select(rss, dof, self.weight_sum, self.weight_sum, alphas, xp)
        return _GCVPath(
            evecs, rotated_rhs, inverse, to_host(gcv), best, equations, alphas
        )

    def _solution(self, coef, equations, alpha_index, gcv, alphas):
        coef = np.asarray(coef)
        feature_mean = equations.feature_mean
        intercept = equations.target_mean - (
            feature_mean @ coef if feature_mean is not None else 0.0
        )
        return RidgeSolution(
            coef,
            np.asarray(intercept),
            alpha_index,
            None,
            "primal",
            None,
            gcv,
            np.asarray(alphas, dtype=np.float64),
        )


def _check_statistics_alphas(alphas, criterion, positive=True):
    if criterion not in (None, "gcv"):
        raise ValueError(f'criterion must be None or "gcv"; got {criterion!r}.')
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    if alphas.size == 0 or not np.isfinite(alphas).all() or (alphas < 0).any():
        raise ValueError(f"alphas must be finite and >= 0; got {alphas.tolist()}.")
    if alphas.size > 1:
        if criterion is None:
            raise ValueError(f"alpha={alphas.tolist()}: {_LOO_NEEDS_A_SECOND_PASS}.")
        if positive and (alphas == 0).any():
            raise ValueError(
                "several alphas are compared by generalised cross-validation and "
                f"must be strictly positive; got {alphas.tolist()}."
            )
    return alphas


def _add_rank_two(matrix, a, b, weight):
    """``matrix += a b^T + b a^T + weight b b^T`` in place, in row blocks.

    Each term is exactly symmetric in floating point (``a_i b_j + b_i a_j`` and
    ``(sqrt(weight) b_i)(sqrt(weight) b_j)``), so a symmetric matrix stays so.
    """
    scaled = np.sqrt(weight) * b
    for rows in slices(matrix.shape[0], 1024):
        matrix[rows] += (
            a[rows, None] * b[None, :] + b[rows, None] * a[None, :]
        ) + scaled[rows, None] * scaled[None, :]

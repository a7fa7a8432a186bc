"""Ridge regression on features that are computed block by block, in memory.

:func:`fit_ridge` streams over a :class:`~._feature_blocks.FeatureBlocks`
object and never holds the full ``(n_samples, n_features)`` feature matrix:

* **dual** (``n_samples <= n_features``): the Gram matrix
  ``K = Phi Phi^T`` is accumulated over column blocks, decomposed once, and the
  coefficients ``Phi^T a`` come from a second pass;
* **primal** (``n_samples > n_features``): ``C = Phi^T Phi`` and ``Phi^T y`` are
  accumulated over row blocks in one pass.

The work is split into *decompose once* and *solve per alpha*
(:mod:`._spectral`). Several alphas are compared by exact leave-one-out error
computed from the one eigendecomposition, as ``RidgeCV`` does, or by
generalised cross-validation. The intercept is never penalised; sample weights
enter as ``sqrt(w)`` row scalings. ``alpha = 0`` gives the minimum-norm
least-squares solution. Centring for the intercept happens on each block
before its product, so the products see centred features; centred features
that are rounding alone (constant rows) leave the intercept as the fit.

Float32 features are multiplied in float64 on the CPU. Where single-precision
products pay (a GPU), they are multiplied in float32 into the float64 matrix,
and the solution is then refined against the exact float64 operator (iterative
refinement, streaming over the features); a problem too ill-conditioned for
that to converge is redone with float64 products.

The one-pass counterpart, for data seen once, is
:class:`~._ridge_statistics.RidgeStatistics`. Nothing here knows about
scikit-learn; device specifics go through :mod:`sklearn_attn._backend`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._backend import LowerGram, to_host
from ._feature_blocks import FeatureBlocks
from ._spectral import (
    RidgeSolution,
    centred_features_vanish,
    decompose,
    gcv_select,
    solutions_for_all_alphas,
    spectral_solver,
    subtract_weighted_outer,
    trace,
    trace_scaled,
)

__all__ = ["fit_ridge"]


class RidgeProblem(NamedTuple):
    """The weighted, centred ridge problem that the dual and primal solvers
    solve: ``min ||y_scaled - D P Phi coef||^2 + alpha ||coef||^2`` with
    ``D = diag(sqrt_w)`` and ``P`` the weighted centring (with an intercept)."""

    features: FeatureBlocks
    y_scaled: Any  # sqrt(w) * (y - y_mean), (n_samples, n_targets), on the device
    sqrt_w: Any  # (n_samples,), on the device
    weight_sum: float
    fit_intercept: bool
    scale_rows: bool  # False for unit weights: no row scaling of the blocks


class CentredFit(NamedTuple):
    """What a solver returns: the coefficients on the device, the weighted
    feature mean (None without an intercept) and the alpha it chose."""

    coef: Any
    feature_mean: Any
    alpha_index: int
    alphas: np.ndarray  # in the solved problem's units (see relative_alphas)
    loo_mse: Any = None
    gcv_mse: Any = None
    refinement_steps: int | None = None


def fit_ridge(
    features,
    y,
    alphas,
    *,
    sample_weight=None,
    fit_intercept=True,
    mode="auto",
    single_precision=None,
    relative_alphas=False,
    gcv_weight_sum=None,
):
    """Weighted ridge regression with an unpenalised intercept.

    Minimises ``sum_i w_i ||y_i - Phi_i coef - intercept||^2 + alpha ||coef||^2``.

    Parameters
    ----------
    features : FeatureBlocks
    y : ndarray of shape (n_samples, n_targets), host memory
    alphas : sequence of float
        One value (``>= 0``), or several (``> 0``) to choose from by exact
        leave-one-out error (or by GCV, see ``gcv_weight_sum``); the best one
        for the mean over targets is kept.
    sample_weight : ndarray of shape (n_samples,) or None
    fit_intercept : bool
    mode : {"auto", "primal", "dual"}
        ``"auto"`` picks the dual when ``n_samples <= n_features``.
    single_precision : bool, default=None
        Multiply float32 feature blocks in float32 and refine the solution in
        float64 (True), or multiply them in float64 (False). ``None`` follows
        the device (:attr:`Device.single_precision_products`). Float64 features
        are always multiplied in float64.
    relative_alphas : bool, default=False
        Multiply ``alphas`` by the feature scale ``trace(A) / sum(w)`` (the
        weighted mean squared norm of the centred features, ``A`` the weighted
        covariance or Gram matrix) once it is known.
    gcv_weight_sum : float, default=None
        Compare several alphas by generalised cross-validation instead of
        leave-one-out, ``W`` counting the samples (the weight sum before any
        rescaling of ``sample_weight``, so that integer weights act as
        repeated rows). The errors go to ``RidgeSolution.gcv_mse``.

    Returns
    -------
    RidgeSolution
        Coefficients on the host (NumPy).

    Raises
    ------
    FloatingPointError
        When the products of the features overflow float64.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.random_features._feature_blocks import ExplicitFeatures
    >>> from sklearn_attn.random_features._ridge import fit_ridge
    >>> rng = np.random.default_rng(0)
    >>> Phi, y = rng.normal(size=(50, 8)), rng.normal(size=(50, 1))
    >>> solution = fit_ridge(ExplicitFeatures(Phi), y, [0.1, 1.0, 10.0])
    >>> solution.coef.shape, solution.loo_mse.shape
    ((8, 1), (3, 1))
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
    # Targets in the weighted, centred problem: sqrt(w) * (y - y_mean).
    problem = RidgeProblem(
        features,
        y_scaled=sqrt_w[:, None] * xp.asarray(y - y_mean),
        sqrt_w=sqrt_w,
        weight_sum=weight_sum,
        fit_intercept=fit_intercept,
        scale_rows=sample_weight is not None,
    )
    if single_precision is None:
        single_precision = device.single_precision_products
    solver = _solve_dual if mode == "dual" else _solve_primal
    options = {"relative": relative_alphas, "gcv_weight_sum": gcv_weight_sum}
    fit = solver(problem, alphas, exact=not single_precision, **options)
    if fit is None:
        # Refinement of the float32-accumulated solution did not converge (an
        # ill-conditioned problem): accumulate again from float64 products.
        fit = solver(problem, alphas, exact=True, **options)
    coef = to_host(fit.coef)
    intercept = y_mean - (to_host(fit.feature_mean) @ coef if fit_intercept else 0.0)
    return RidgeSolution(
        coef,
        np.asarray(intercept),
        fit.alpha_index,
        None if fit.loo_mse is None else to_host(fit.loo_mse),
        mode,
        fit.refinement_steps,
        None if fit.gcv_mse is None else to_host(fit.gcv_mse),
        np.asarray(fit.alphas, dtype=np.float64),
    )


# -- iterative refinement of float32-accumulated solutions ---------------------------

# With float32 features the decomposed matrix is accumulated from float32
# products (fast, and the bulk of the flops) and is accurate to about 1e-7
# relative; the solution is then refined against the exact float64 operator,
# applied by streaming over the features (a cheap pass: two matrix-vector
# products per block). Each step shrinks the error by about cond * 1e-7; when
# that is not below one (an ill-conditioned problem, e.g. features with a huge
# mean and a tiny alpha), refinement cannot converge and the matrix is
# accumulated again from float64 products.
_REFINEMENT_STEPS = 6
_REFINEMENT_TOL = 1e-10


def _refine(x, rhs, solve, apply_operator):
    """Iterative refinement of ``A x = rhs``: ``x += solve(rhs - A x)``.

    ``solve`` applies the inverse of an approximation of ``A``; ``apply_operator``
    applies ``A`` itself in float64. Returns ``(x, steps, converged)``: it has
    converged when a correction falls below ``_REFINEMENT_TOL`` relative to
    ``x``, and gives up when corrections stop shrinking.
    """
    previous = np.inf
    for step in range(1, _REFINEMENT_STEPS + 1):
        correction = solve(rhs - apply_operator(x))
        size = float(abs(correction).max())
        if not size < previous:
            return x, step - 1, False
        x = x + correction
        previous = size
        if size <= _REFINEMENT_TOL * float(abs(x).max()):
            return x, step, True
    return x, _REFINEMENT_STEPS, False


# -- dual: Gram matrix over samples ------------------------------------------------


class _CentredGram(NamedTuple):
    matrix: Any  # P D Phi Phi^T D P, both triangles
    single_precision: bool  # whether float32 products made it
    vanishes: bool  # whether the centred features are rounding alone


def _dual_gram(problem, exact):
    """The centred Gram matrix of the problem (see :class:`_CentredGram`).

    Each block of columns is centred by its own weighted means before its
    product (``P D Phi = D (Phi - 1 mean^T)``), so float32 products see centred
    features: their rounding is relative to the centred values, however large
    the features' means. Float32 blocks are centred and multiplied in float32
    unless ``exact``; the refinement then applies the exact float64 operator.
    """
    features, sqrt_w, weight_sum = problem.features, problem.sqrt_w, problem.weight_sum
    gram = LowerGram(features.n_samples, features.device)
    single = False
    weights = sqrt_w * sqrt_w
    mean_square = 0.0  # W ||mean||^2, the part of the raw trace centring removes
    for cols in features.column_blocks():
        block = features.compute(slice(0, features.n_samples), cols)
        if exact:
            block = block.astype(np.float64, copy=False)
        single |= block.dtype == np.float32
        if problem.fit_intercept:
            mean = weights.astype(block.dtype) @ block / block.dtype.type(weight_sum)
            block -= mean[None, :]
            mean = mean.astype(np.float64, copy=False)
            mean_square += weight_sum * float(mean @ mean)
        if problem.scale_rows:
            block *= sqrt_w[:, None].astype(block.dtype)
        gram.add(block)
    gram = gram.symmetric()
    vanishes = centred_features_vanish(
        trace(gram, features.device.xp),
        mean_square,
        features.n_samples,
        np.float32 if single else np.float64,
    )
    if vanishes:
        gram[...] = 0.0
    return _CentredGram(gram, single, vanishes)


def _dual_operator(problem, alpha):
    """``a -> (P D Phi Phi^T D P + alpha I) a`` in float64, streamed over blocks.

    With ``B = D (Phi - 1 mean^T)``: ``B^T a = Phi^T (s a) - mean (s^T a)`` and
    ``B c = s (Phi c - mean^T c)``, so a block needs one conversion to float64
    and matrix-vector products, not centred and scaled copies.
    """
    features, sqrt_w, weight_sum = problem.features, problem.sqrt_w, problem.weight_sum
    weights = sqrt_w * sqrt_w

    def apply(a):
        out = alpha * a
        sa = sqrt_w[:, None] * a
        s_dot_a = sqrt_w @ a
        for cols in features.column_blocks():
            block = features.compute(slice(0, features.n_samples), cols)
            block = block.astype(np.float64, copy=False)
            projected = block.T @ sa  # Phi^T D a
            if problem.fit_intercept:
                mean = weights @ block / weight_sum
                projected -= mean[:, None] * s_dot_a[None, :]
                out += sqrt_w[:, None] * (block @ projected - mean @ projected)
            else:
                out += sqrt_w[:, None] * (block @ projected)
        return out

    return apply


def _solve_dual(problem, alphas, exact=False, relative=False, gcv_weight_sum=None):
    features, y_scaled, sqrt_w, weight_sum, fit_intercept, _ = problem
    device = features.device
    xp = device.xp
    n = features.n_samples
    # A minimum-norm fit (alpha = 0) cannot be refined: exact products.
    exact = exact or (alphas.size == 1 and alphas[0] == 0)
    gram, single, vanishes = _dual_gram(problem, exact)
    if relative:
        alphas = trace_scaled(alphas, gram, weight_sum, xp)
    # The centring direction u = sqrt(w) / sqrt(W) is the intercept's: P K P
    # maps it to zero and y_scaled is orthogonal to it, but only up to
    # rounding, which a solve with K + alpha I would amplify by 1 / alpha.
    # Giving u the eigenvalue trace(K) instead changes no solution of exact
    # arithmetic (u is an eigenvector, y_scaled has no part along it) and
    # damps that rounding like the data's own directions.
    deflation = trace(gram, xp) if fit_intercept else 0.0
    if deflation > 0:
        direction = np.sqrt(deflation / weight_sum) * sqrt_w
        gram += direction[:, None] * direction[None, :]
    loo_mse = gcv = None
    alpha_index = 0
    dual_coef = None
    solve, evecs, inverse_all = decompose(gram, alphas, device)
    del gram  # a Cholesky factor holds what its solves need
    if solve is None:
        inverse = inverse_all[:, 0]
        if alphas.size > 1 and gcv_weight_sum is not None:
            # Residuals U diag(alpha / (s + alpha)) U^T y; the centring direction
            # u (eigenvalue 0 of P K P) is orthogonal to y and counts in df as
            # the intercept: df = n - sum alpha / (s + alpha) + fit_intercept,
            # its term alpha / (0 + alpha) = 1 where the deflation made it
            # alpha / (trace + alpha).
            a = xp.asarray(alphas)
            shrink = a[None, :] * inverse_all
            rss = (shrink**2).T @ (evecs.T @ y_scaled) ** 2
            df = n - shrink.sum(axis=0) + float(fit_intercept)
            if deflation > 0:
                df -= 1.0 - a / (deflation + a)
            gcv, alpha_index = gcv_select(
                rss, df, weight_sum, gcv_weight_sum, alphas, xp
            )
            inverse = inverse_all[:, alpha_index]
        elif alphas.size > 1:
            coefs = solutions_for_all_alphas(evecs, inverse_all, evecs.T @ y_scaled)
            # Squared eigenvectors, in place unless refinement needs evecs.
            squared = xp.multiply(evecs, evecs, out=None if single else evecs)
            # Diagonal of P (K + alpha I)^-1 P: the centring direction u is an
            # eigenvector of eigenvalue trace + alpha after the deflation,
            # whose share u_i^2 / (trace + alpha) = w_i / (W (trace + alpha))
            # is removed (small beside the rest: no cancellation). Then
            # 1 - leverage_i = alpha * inv_diag_i.
            inv_diag = squared @ inverse_all
            del squared
            if fit_intercept:
                inv_diag -= (sqrt_w**2)[:, None] / (
                    weight_sum * (deflation + xp.asarray(alphas)[None, :])
                )
            # r_i / (1 - h_i) = alpha a_i / (alpha inv_diag_i) = a_i / inv_diag_i.
            residuals = _loo_residuals(
                coefs, inv_diag, n, xp, scale=xp.asarray(alphas)[None, :]
            )
            loo_mse = (residuals**2).sum(axis=0) / weight_sum
            alpha_index = _loo_choice(loo_mse, alphas, xp)
            dual_coef = coefs[:, alpha_index, :]
            inverse = inverse_all[:, alpha_index]

        solve = spectral_solver(evecs, inverse)
    if dual_coef is None:
        dual_coef = solve(y_scaled)
    steps = None
    if single:
        operator = _dual_operator(problem, alphas[alpha_index])
        dual_coef, steps, converged = _refine(dual_coef, y_scaled, solve, operator)
        if not converged:
            return None
    if vanishes:
        # No direction of the centred features is fitted: coef = 0 exactly.
        dual_coef = xp.zeros_like(dual_coef)
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
        block = features.compute(slice(0, n), cols).astype(np.float64, copy=False)
        out[cols] = block.T @ rhs
    coef, feature_mean = (out[:, :-1], out[:, -1]) if fit_intercept else (out, None)
    return CentredFit(coef, feature_mean, alpha_index, alphas, loo_mse, gcv, steps)


# -- primal: covariance over features ---------------------------------------------


def _primal_block(problem, rows, center):
    """``D (Phi[rows] - center)`` in float64 (``center`` may be None), and the
    dtype the features came in."""
    features = problem.features
    block = features.compute(rows, slice(0, features.n_features))
    dtype = block.dtype
    block = block.astype(np.float64, copy=False)
    if center is not None:
        block -= center[None, :]
    if problem.scale_rows:
        block *= problem.sqrt_w[rows, None]
    return block, dtype


def _primal_operator(problem, alpha, center):
    """``c -> (Phi_c^T D^2 Phi_c + alpha I) c`` in float64, streamed over blocks."""

    def apply(c):
        out = alpha * c
        for rows in problem.features.row_blocks():
            block, _ = _primal_block(problem, rows, center)
            out += block.T @ (block @ c)
        return out

    return apply


def _solve_primal(problem, alphas, exact=False, relative=False, gcv_weight_sum=None):
    features, y_scaled, sqrt_w, weight_sum, fit_intercept, _ = problem
    device = features.device
    xp = device.xp
    p = features.n_features
    cov = LowerGram(p, device)
    # (D B)^T [sqrt(w), y_scaled] = B^T [w, D y_scaled] for B = Phi - shift: the
    # weighted feature sums and the right-hand side in one product.
    cross = xp.zeros((p, 1 + y_scaled.shape[1]))
    rhs_cols = xp.concatenate([sqrt_w[:, None], y_scaled], axis=1)
    shift = None
    single = False
    # A minimum-norm fit (alpha = 0) cannot be refined: exact products.
    exact = exact or (alphas.size == 1 and alphas[0] == 0)
    for rows in features.row_blocks():
        block, dtype = _primal_block(problem, rows, shift)
        single |= dtype == np.float32 and not exact
        if fit_intercept and shift is None:
            # A pilot mean from the first block, subtracted from every block:
            # the products then see features of about zero mean, so float32
            # rounding is relative to their spread, not to their mean.
            s_rows = sqrt_w[rows]
            total = float(s_rows @ s_rows)
            shift = s_rows @ block / total if total > 0 else block.mean(axis=0)
            block -= s_rows[:, None] * shift[None, :]
        cross += block.T @ rhs_cols[rows]
        cov.add(block.T if exact else block.T.astype(dtype, copy=False))
    cov = cov.symmetric()
    offset = cross[:, 0] / weight_sum  # weighted mean minus shift
    feature_mean = offset if shift is None else shift + offset
    rhs = cross[:, 1:]
    if fit_intercept:
        # sum w (Phi - mean)(Phi - mean)^T = sum w B B^T - W offset offset^T.
        subtract_weighted_outer(cov, offset, weight_sum)
    center = feature_mean if fit_intercept else None
    # The blocks are centred in float64.
    vanishes = centred_features_vanish(
        trace(cov, xp),
        weight_sum * float(feature_mean @ feature_mean) if fit_intercept else 0.0,
        features.n_samples,
    )
    if vanishes:
        # The centred features are rounding noise: the fit is the intercept.
        cov[...] = 0.0
        rhs = xp.zeros_like(rhs)
    if relative:
        alphas = trace_scaled(alphas, cov, weight_sum, xp)

    loo_mse = gcv = None
    alpha_index = 0
    solve, evecs, inverse_all = decompose(cov, alphas, device)
    del cov  # a Cholesky factor holds what its solves need
    if solve is None:
        inverse = inverse_all[:, 0]
        if alphas.size > 1 and gcv_weight_sum is not None:
            # From the sufficient statistics: with g = V^T Phi^T y,
            # RSS = |y|^2 - sum_k g_k^2 (s_k + 2 alpha) / (s_k + alpha)^2.
            a = xp.asarray(alphas)[None, :]
            projected = (evecs.T @ rhs) ** 2
            rss = (y_scaled**2).sum(axis=0)[None, :] - (
                inverse_all * (1.0 + a * inverse_all)
            ).T @ projected
            # s_k / (s_k + alpha) = 1 - alpha / (s_k + alpha).
            df = (1.0 - a * inverse_all).sum(axis=0) + float(fit_intercept)
            gcv, alpha_index = gcv_select(
                rss, df, weight_sum, gcv_weight_sum, alphas, xp
            )
            inverse = inverse_all[:, alpha_index]
        elif alphas.size > 1:
            if vanishes:
                # No direction is fitted: every leverage is the intercept's.
                evecs = xp.zeros_like(evecs)
            loo_mse = _primal_loo(
                problem, alphas, center, evecs, inverse_all, evecs.T @ rhs
            )
            alpha_index = _loo_choice(loo_mse, alphas, xp)
            inverse = inverse_all[:, alpha_index]

        solve = spectral_solver(evecs, inverse)
    coef = solve(rhs)
    steps = None
    if single:
        operator = _primal_operator(problem, alphas[alpha_index], center)
        coef, steps, converged = _refine(coef, rhs, solve, operator)
        if not converged:
            return None
    return CentredFit(coef, feature_mean, alpha_index, alphas, loo_mse, gcv, steps)


def _primal_loo(problem, alphas, center, evecs, inverse_all, rotated_rhs):
    """Weighted leave-one-out mean squared error of every alpha and target.

    ``evecs`` and ``inverse_all`` are the spectrum of the centred covariance,
    ``rotated_rhs`` is ``V^T Phi_c^T D y_scaled``.
    """
    features, y_scaled, sqrt_w = problem.features, problem.y_scaled, problem.sqrt_w
    xp = features.device.xp
    p = features.n_features
    n_targets = y_scaled.shape[1]
    coefs_rotated = (inverse_all[:, :, None] * rotated_rhs[:, None, :]).reshape(p, -1)
    sq_err = xp.zeros((alphas.size, n_targets))
    hat_offset = (
        sqrt_w**2 / problem.weight_sum if center is not None else xp.zeros_like(sqrt_w)
    )
    for rows in features.row_blocks():
        block, _ = _primal_block(problem, rows, center)
        rotated = block @ evecs
        fitted = (rotated @ coefs_rotated).reshape(-1, alphas.size, n_targets)
        rotated **= 2
        leverage = rotated @ inverse_all + hat_offset[rows, None]
        residual = _loo_residuals(
            y_scaled[rows, None, :] - fitted, 1.0 - leverage, features.n_samples, xp
        )
        sq_err += (residual**2).sum(axis=0)
    return sq_err / problem.weight_sum


# -- leave-one-out error ------------------------------------------------------------


def _loo_residuals(residuals, remaining, n_samples, xp, scale=1.0):
    """Leave-one-out residuals ``r_i / (1 - h_i)`` of shape (n, n_alphas,
    n_targets), from the fit's residuals and ``remaining = 1 - h`` of shape
    (n, n_alphas), both possibly divided by ``scale`` (the dual's alpha).

    Where ``1 - h_i`` is not above ``n eps`` the fit interpolates sample ``i``
    to working precision: ``r_i`` and ``1 - h_i`` are both rounding, their
    ratio is undetermined, and the error of that alpha is infinite (never
    NaN, never a silent number).
    """
    determined = scale * remaining > n_samples * np.finfo(np.float64).eps
    safe = xp.where(determined, remaining, 1.0)[:, :, None]
    return xp.where(determined[:, :, None], residuals / safe, xp.inf)


def _loo_choice(loo_mse, alphas, xp):
    """The alpha of smallest mean leave-one-out error over targets; the
    largest alpha when no error is determined."""
    mean = loo_mse.mean(axis=1)
    if not bool(xp.isfinite(mean).any()):
        return int(np.argmax(alphas))
    return int(xp.argmin(mean))

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
Centring for the intercept happens on each block before its product, so the
products see centred features.

Float32 features are multiplied in float64 on the CPU. Where single-precision
products pay (a GPU), they are multiplied in float32 into the float64 matrix,
and the solution is then refined against the exact float64 operator (iterative
refinement, streaming over the features); a problem too ill-conditioned for
that to converge is redone with float64 products.

Nothing here knows about scikit-learn; device specifics go through
:mod:`sklearn_attn._backend`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._backend import CholeskyFactor, Device, LowerGram, eigh, to_host

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
    refinement_steps : int or None
        ``None`` when the decomposed matrix came from float64 products (float64
        features, ``alpha = 0``, or a float32 problem too ill-conditioned to
        refine, which is redone in float64); otherwise the steps of iterative
        refinement that took the float32-accumulated solution to float64
        accuracy.
    """

    coef: np.ndarray
    intercept: np.ndarray
    alpha_index: int
    loo_mse: np.ndarray | None
    mode: str
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
    single_precision : bool, default=None
        Multiply float32 feature blocks in float32 and refine the solution in
        float64 (True), or multiply them in float64 (False). ``None`` follows
        the device (:attr:`Device.single_precision_products`). Float64 features
        are always multiplied in float64.

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
    if single_precision is None:
        single_precision = device.single_precision_products
    solver = _solve_dual if mode == "dual" else _solve_primal
    problem = (
        features,
        y_scaled,
        sqrt_w,
        weight_sum,
        alphas,
        fit_intercept,
        scale_rows,
    )
    result = solver(*problem, exact=not single_precision)
    if result is None:
        # Refinement of the float32-accumulated solution did not converge (an
        # ill-conditioned problem): accumulate again from float64 products.
        result = solver(*problem, exact=True)
    coef, feature_mean, alpha_index, loo_mse, steps = result
    coef = to_host(coef)
    intercept = y_mean - (to_host(feature_mean) @ coef if fit_intercept else 0.0)
    return RidgeSolution(
        coef,
        np.asarray(intercept),
        alpha_index,
        None if loo_mse is None else to_host(loo_mse),
        mode,
        steps,
    )


# -- shared: iterative refinement -----------------------------------------------------

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


def _dual_gram(features, exact, sqrt_w, weight_sum, fit_intercept, scale_rows):
    """``P D Phi Phi^T D P`` (both triangles), and whether float32 products made it.

    Each block of columns is centred by its own weighted means before its
    product (``P D Phi = D (Phi - 1 mean^T)``), so float32 products see centred
    features: their rounding is relative to the centred values, however large
    the features' means. Float32 blocks are centred and multiplied in float32
    unless ``exact``; the refinement then applies the exact float64 operator.
    """
    gram = LowerGram(features.n_samples, features.device)
    single = False
    weights = sqrt_w * sqrt_w
    for cols in features.column_blocks():
        block = features.compute(slice(0, features.n_samples), cols)
        if exact:
            block = block.astype(np.float64, copy=False)
        single |= block.dtype == np.float32
        if fit_intercept:
            mean = weights.astype(block.dtype) @ block / block.dtype.type(weight_sum)
            block -= mean[None, :]
        if scale_rows:
            block *= sqrt_w[:, None].astype(block.dtype)
        gram.add(block)
    return gram.symmetric(), single


def _dual_operator(features, alpha, sqrt_w, weight_sum, fit_intercept, scale_rows):
    """``a -> (P D Phi Phi^T D P + alpha I) a`` in float64, streamed over blocks.

    With ``B = D (Phi - 1 mean^T)``: ``B^T a = Phi^T (s a) - mean (s^T a)`` and
    ``B c = s (Phi c - mean^T c)``, so a block needs one conversion to float64
    and matrix-vector products, not centred and scaled copies.
    """
    weights = sqrt_w * sqrt_w

    def apply(a):
        out = alpha * a
        sa = sqrt_w[:, None] * a
        s_dot_a = sqrt_w @ a
        for cols in features.column_blocks():
            block = features.compute(slice(0, features.n_samples), cols)
            block = block.astype(np.float64, copy=False)
            projected = block.T @ sa  # Phi^T D a
            if fit_intercept:
                mean = weights @ block / weight_sum
                projected -= mean[:, None] * s_dot_a[None, :]
                out += sqrt_w[:, None] * (block @ projected - mean @ projected)
            else:
                out += sqrt_w[:, None] * (block @ projected)
        return out

    return apply


def _solve_dual(
    features,
    y_scaled,
    sqrt_w,
    weight_sum,
    alphas,
    fit_intercept,
    scale_rows,
    exact=False,
):
    device = features.device
    xp = device.xp
    n = features.n_samples
    problem = (sqrt_w, weight_sum, fit_intercept, scale_rows)
    # A minimum-norm fit (alpha = 0) cannot be refined: exact products.
    exact = exact or (alphas.size == 1 and alphas[0] == 0)
    gram, single = _dual_gram(features, exact, *problem)
    loo_mse = None
    alpha_index = 0
    dual_coef = None
    solve, evecs, inverse_all = _decompose(gram, alphas, device)
    del gram  # a Cholesky factor holds what its solves need
    if solve is None:
        inverse = inverse_all[:, 0]
        if alphas.size > 1:
            n_targets = y_scaled.shape[1]
            evals_y = evecs.T @ y_scaled
            # All alphas at once: (n, n_alphas * n_targets) in one product.
            coefs = evecs @ (inverse_all[:, :, None] * evals_y[:, None, :]).reshape(
                n, -1
            )
            coefs = coefs.reshape(n, alphas.size, n_targets)
            # Squared eigenvectors, in place unless refinement needs evecs.
            squared = xp.multiply(evecs, evecs, out=None if single else evecs)
            # Diagonal of P (K + alpha I)^-1 P: centring maps sqrt(w) to an
            # eigenvector of eigenvalue alpha, whose share w_i / (alpha sum(w))
            # is removed. Then 1 - leverage_i = alpha * inv_diag_i.
            inv_diag = squared @ inverse_all
            del squared
            if fit_intercept:
                inv_diag -= (sqrt_w**2)[:, None] / (
                    weight_sum * xp.asarray(alphas)[None, :]
                )
            loo_mse = ((coefs / inv_diag[:, :, None]) ** 2).sum(axis=0) / weight_sum
            alpha_index = int(xp.argmin(loo_mse.mean(axis=1)))
            dual_coef = coefs[:, alpha_index, :]
            inverse = inverse_all[:, alpha_index]

        solve = _spectral_solver(evecs, inverse)
    if dual_coef is None:
        dual_coef = solve(y_scaled)
    alpha = alphas[alpha_index]
    steps = None
    if single:
        operator = _dual_operator(features, alpha, *problem)
        dual_coef, steps, converged = _refine(dual_coef, y_scaled, solve, operator)
        if not converged:
            return None
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
    if fit_intercept:
        return out[:, :-1], out[:, -1], alpha_index, loo_mse, steps
    return out, None, alpha_index, loo_mse, steps


def _decompose(matrix, alphas, device):
    """Decompose once: ``(solve, None, None)`` from a Cholesky factor of
    ``matrix + alpha I`` for one positive alpha, else ``(None, evecs, inverse)``
    from an eigendecomposition, with ``inverse[:, k] = 1 / (evals + alphas[k])``
    (a pseudo-inverse for alpha = 0). Cholesky falls back to the eigen route
    when the matrix is not numerically positive definite. ``matrix`` is
    overwritten."""
    xp = device.xp
    if alphas.size == 1 and alphas[0] > 0:
        diagonal = xp.arange(matrix.shape[0])
        saved = matrix[diagonal, diagonal]  # a copy (advanced indexing)
        matrix[diagonal, diagonal] += alphas[0]
        try:
            return CholeskyFactor(matrix, device).solve, None, None
        except np.linalg.LinAlgError:
            # The failed factorisation left the matrix as it was.
            matrix[diagonal, diagonal] = saved
    evals, evecs = eigh(matrix, device)
    inverse = xp.stack([_inverse_spectrum(evals, a) for a in alphas], axis=1)
    return None, evecs, inverse


def _spectral_solver(evecs, inverse):
    """``r -> V diag(inverse) V^T r`` from an eigendecomposition."""

    def solve(r):
        return evecs @ (inverse[:, None] * (evecs.T @ r))

    return solve


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


def _primal_block(features, rows, sqrt_w, scale_rows, center):
    """``D (Phi[rows] - center)`` in float64 (``center`` may be None), and the
    dtype the features came in."""
    block = features.compute(rows, slice(0, features.n_features))
    dtype = block.dtype
    block = block.astype(np.float64, copy=False)
    if center is not None:
        block -= center[None, :]
    if scale_rows:
        block *= sqrt_w[rows, None]
    return block, dtype


def _primal_operator(features, alpha, sqrt_w, scale_rows, center):
    """``c -> (Phi_c^T D^2 Phi_c + alpha I) c`` in float64, streamed over blocks."""

    def apply(c):
        out = alpha * c
        for rows in features.row_blocks():
            block, _ = _primal_block(features, rows, sqrt_w, scale_rows, center)
            out += block.T @ (block @ c)
        return out

    return apply


def _solve_primal(
    features,
    y_scaled,
    sqrt_w,
    weight_sum,
    alphas,
    fit_intercept,
    scale_rows,
    exact=False,
):
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
        block, dtype = _primal_block(features, rows, sqrt_w, scale_rows, shift)
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
        # sum w (Phi - mean)(Phi - mean)^T = sum w B B^T - W offset offset^T,
        # in row blocks of the matrix: no (p, p) temporary. (A product of two
        # factors, s_i s_j, keeps the matrix exactly symmetric.)
        scaled = np.sqrt(weight_sum) * offset
        for block_rows in _slices(p, 1024):
            cov[block_rows] -= scaled[block_rows, None] * scaled
    center = feature_mean if fit_intercept else None

    loo_mse = None
    alpha_index = 0
    solve, evecs, inverse_all = _decompose(cov, alphas, device)
    del cov  # a Cholesky factor holds what its solves need
    if solve is None:
        inverse = inverse_all[:, 0]
        if alphas.size > 1:
            loo_mse = _primal_loo(
                features,
                y_scaled,
                sqrt_w,
                weight_sum,
                alphas,
                scale_rows,
                center,
                evecs,
                inverse_all,
                evecs.T @ rhs,
            )
            alpha_index = int(xp.argmin(loo_mse.mean(axis=1)))
            inverse = inverse_all[:, alpha_index]

        solve = _spectral_solver(evecs, inverse)
    coef = solve(rhs)
    alpha = alphas[alpha_index]
    steps = None
    if single:
        operator = _primal_operator(features, alpha, sqrt_w, scale_rows, center)
        coef, steps, converged = _refine(coef, rhs, solve, operator)
        if not converged:
            return None
    return coef, feature_mean, alpha_index, loo_mse, steps


def _primal_loo(
    features,
    y_scaled,
    sqrt_w,
    weight_sum,
    alphas,
    scale_rows,
    center,
    evecs,
    inverse_all,
    evals_rhs,
):
    """Weighted leave-one-out mean squared error of every alpha and target."""
    xp = features.device.xp
    p = features.n_features
    n_targets = y_scaled.shape[1]
    coefs_rotated = (inverse_all[:, :, None] * evals_rhs[:, None, :]).reshape(p, -1)
    sq_err = xp.zeros((alphas.size, n_targets))
    hat_offset = sqrt_w**2 / weight_sum if center is not None else xp.zeros_like(sqrt_w)
    for rows in features.row_blocks():
        block, _ = _primal_block(features, rows, sqrt_w, scale_rows, center)
        rotated = block @ evecs
        fitted = (rotated @ coefs_rotated).reshape(-1, alphas.size, n_targets)
        rotated **= 2
        leverage = rotated @ inverse_all + hat_offset[rows, None]
        residual = (y_scaled[rows, None, :] - fitted) / (1.0 - leverage)[:, :, None]
        sq_err += (residual**2).sum(axis=0)
    return sq_err / weight_sum

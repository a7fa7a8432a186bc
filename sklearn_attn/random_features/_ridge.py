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

from .._backend import CholeskyFactor, Device, LowerGram, eigh, to_device, to_host

__all__ = [
    "FeatureBlocks",
    "ExplicitFeatures",
    "RidgeSolution",
    "RidgeStatistics",
    "fit_ridge",
]


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
    options = {"relative": relative_alphas, "gcv_weight_sum": gcv_weight_sum}
    result = solver(*problem, exact=not single_precision, **options)
    if result is None:
        # Refinement of the float32-accumulated solution did not converge (an
        # ill-conditioned problem): accumulate again from float64 products.
        result = solver(*problem, exact=True, **options)
    coef, feature_mean, alpha_index, loo_mse, steps, alphas, gcv = result
    coef = to_host(coef)
    intercept = y_mean - (to_host(feature_mean) @ coef if fit_intercept else 0.0)
    return RidgeSolution(
        coef,
        np.asarray(intercept),
        alpha_index,
        None if loo_mse is None else to_host(loo_mse),
        mode,
        steps,
        None if gcv is None else to_host(gcv),
        np.asarray(alphas, dtype=np.float64),
    )


def _gcv(rss, df, weight_sum, frequency_sum, xp):
    """Generalised cross-validation error ``(RSS / W) / (1 - df / W)^2``.

    ``rss`` (n_alphas, n_targets) and ``weight_sum`` are those of the solved
    problem; ``frequency_sum`` is ``W``, the users' weight sum (before any
    rescaling by a power of two), which counts samples as repeated rows:
    integer weights give the GCV of the repeated data. Infinite where
    ``df >= W`` (an interpolating fit, for which GCV is undefined).
    """
    rss = xp.maximum(rss, 0.0) / weight_sum
    remaining = 1.0 - df / frequency_sum
    safe = xp.where(remaining > 0, remaining, 1.0)[:, None]
    return xp.where(remaining[:, None] > 0, rss / safe**2, xp.inf)


def _gcv_choice(gcv_mse, alphas):
    """The alpha of smallest mean GCV over targets; the largest alpha when
    every fit interpolates (GCV undefined everywhere)."""
    mean = to_host(gcv_mse).mean(axis=1)
    if not np.isfinite(mean).any():
        return int(np.argmax(alphas))
    return int(np.argmin(mean))


def _trace_scaled(alphas, matrix, weight_sum, xp):
    """``alphas * trace(matrix) / weight_sum``; unchanged for a zero trace
    (constant features: every penalty then gives the same fit)."""
    trace = _trace(matrix, xp)
    return alphas * (trace / weight_sum) if trace > 0 else alphas


def _trace(matrix, xp):
    diagonal = xp.arange(matrix.shape[0])
    return float(matrix[diagonal, diagonal].sum())


def _centred_features_vanish(centred_trace, mean_square, n_samples, dtype=np.float64):
    """Whether the centred features are only the rounding error of centring.

    ``centred_trace`` is ``sum_i w_i ||phi_i - mean||^2`` and ``mean_square``
    ``W ||mean||^2``, their sum the raw ``sum_i w_i ||phi_i||^2``. Centring
    ``n`` samples in ``dtype`` leaves each feature wrong by up to about
    ``n eps`` of its magnitude, so a centred sum of squares below
    ``(n eps)^2`` times the raw one is made of rounding alone: the features
    are constant to working precision, the centred problem is zero and the fit
    is the intercept. Fitting that noise instead would choose penalties
    relative to it and amplify it without bound.

    A sum that overflowed is an error: the features' products are not
    representable in float64 (``FloatingPointError``).
    """
    raw = centred_trace + mean_square
    if not np.isfinite(raw):
        raise FloatingPointError("the products of the features overflow float64")
    threshold = (max(n_samples, 1) * np.finfo(dtype).eps) ** 2
    return centred_trace <= threshold * raw


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
    mean_square = 0.0  # W ||mean||^2, the part of the raw trace centring removes
    for cols in features.column_blocks():
        block = features.compute(slice(0, features.n_samples), cols)
        if exact:
            block = block.astype(np.float64, copy=False)
        single |= block.dtype == np.float32
        if fit_intercept:
            mean = weights.astype(block.dtype) @ block / block.dtype.type(weight_sum)
            block -= mean[None, :]
            mean = mean.astype(np.float64, copy=False)
            mean_square += weight_sum * float(mean @ mean)
        if scale_rows:
            block *= sqrt_w[:, None].astype(block.dtype)
        gram.add(block)
    gram = gram.symmetric()
    # Without an intercept only all-zero features vanish (a zero trace).
    vanish = _centred_features_vanish(
        _trace(gram, features.device.xp),
        mean_square,
        features.n_samples,
        np.float32 if single else np.float64,
    )
    if vanish:
        gram[...] = 0.0
    return gram, single, vanish


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
    relative=False,
    gcv_weight_sum=None,
):
    device = features.device
    xp = device.xp
    n = features.n_samples
    problem = (sqrt_w, weight_sum, fit_intercept, scale_rows)
    # A minimum-norm fit (alpha = 0) cannot be refined: exact products.
    exact = exact or (alphas.size == 1 and alphas[0] == 0)
    gram, single, vanish = _dual_gram(features, exact, *problem)
    if relative:
        alphas = _trace_scaled(alphas, gram, weight_sum, xp)
    loo_mse = gcv = None
    alpha_index = 0
    dual_coef = None
    solve, evecs, inverse_all = _decompose(gram, alphas, device)
    del gram  # a Cholesky factor holds what its solves need
    if solve is None:
        inverse = inverse_all[:, 0]
        if alphas.size > 1 and gcv_weight_sum is not None:
            # Residuals U diag(alpha / (s + alpha)) U^T y; the centring direction
            # sqrt(w) (eigenvalue 0) is orthogonal to y and counts in df as the
            # intercept: df = n - sum alpha / (s + alpha) + fit_intercept.
            shrink = xp.asarray(alphas)[None, :] * inverse_all
            rss = (shrink**2).T @ (evecs.T @ y_scaled) ** 2
            df = n - shrink.sum(axis=0) + float(fit_intercept)
            gcv = _gcv(rss, df, weight_sum, gcv_weight_sum, xp)
            alpha_index = _gcv_choice(gcv, alphas)
            inverse = inverse_all[:, alpha_index]
        elif alphas.size > 1:
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
    if vanish:
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
    if fit_intercept:
        return out[:, :-1], out[:, -1], alpha_index, loo_mse, steps, alphas, gcv
    return out, None, alpha_index, loo_mse, steps, alphas, gcv


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
    relative=False,
    gcv_weight_sum=None,
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
    # Blocks are centred in float64 (without an intercept only all-zero
    # features vanish: a zero trace).
    vanish = _centred_features_vanish(
        _trace(cov, xp),
        weight_sum * float(feature_mean @ feature_mean) if fit_intercept else 0.0,
        features.n_samples,
    )
    if vanish:
        # The centred features are rounding noise: the fit is the intercept.
        cov[...] = 0.0
        rhs = xp.zeros_like(rhs)
    if relative:
        alphas = _trace_scaled(alphas, cov, weight_sum, xp)

    loo_mse = gcv = None
    alpha_index = 0
    solve, evecs, inverse_all = _decompose(cov, alphas, device)
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
            gcv = _gcv(rss, df, weight_sum, gcv_weight_sum, xp)
            alpha_index = _gcv_choice(gcv, alphas)
            inverse = inverse_all[:, alpha_index]
        elif alphas.size > 1:
            if vanish:
                # No direction is fitted: every leverage is the intercept's.
                evecs = xp.zeros_like(evecs)
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
    return coef, feature_mean, alpha_index, loo_mse, steps, alphas, gcv


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


# -- one pass: mergeable sufficient statistics ----------------------------------------

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
    >>> from sklearn_attn.random_features._ridge import (
    ...     ExplicitFeatures, RidgeStatistics)
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
            # sum w (phi - mean)(phi - mean)^T = C - W offset offset^T; the product
            # of two equal factors keeps the matrix exactly symmetric.
            scaled = np.sqrt(total) * offset
            for rows in _slices(self.n_features, 1024):
                matrix[rows] -= scaled[rows, None] * scaled
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
        if _centred_features_vanish(_trace(matrix, np), mean_square, self.n_positive):
            matrix[...] = 0.0
            rhs = np.zeros_like(rhs)
        return matrix, rhs, feature_mean, target_mean, target_ss

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
            matrix, rhs, feature_mean, target_mean, _ = self.normal_equations(
                fit_intercept
            )
            if relative:
                alphas = _trace_scaled(alphas, matrix, self.weight_sum, np)
            xp = device.xp
            solve, evecs, inverse = _decompose(
                to_device(matrix, device), alphas, device
            )
            if solve is None:
                solve = _spectral_solver(evecs, inverse[:, 0])
            coef = to_host(solve(xp.asarray(rhs)))
            return self._solution(coef, feature_mean, target_mean, 0, None, alphas)
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
        spectrum = self._spectrum(alphas, fit_intercept, device, relative)
        evecs, rotated_rhs, inverse, gcv, feature_mean, target_mean, alphas = spectrum
        gcv = to_host(gcv)
        p, k = rotated_rhs.shape
        if best_only:
            best = _gcv_choice(gcv, alphas)
            coef = to_host(evecs @ (inverse[:, best, None] * rotated_rhs))
            return self._solution(coef, feature_mean, target_mean, best, gcv, alphas)
        # All alphas at once: (p, n_alphas * n_targets) in one product.
        coefs = evecs @ (inverse[:, :, None] * rotated_rhs[:, None, :]).reshape(p, -1)
        coefs = to_host(xp.ascontiguousarray(coefs)).reshape(p, alphas.size, k)
        return [
            self._solution(
                coefs[:, index], feature_mean, target_mean, index, gcv, alphas
            )
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
        return to_host(self._spectrum(alphas, fit_intercept, device, relative)[3])

    def _spectrum(self, alphas, fit_intercept, device, relative=False):
        xp = device.xp
        matrix, rhs, feature_mean, target_mean, target_ss = self.normal_equations(
            fit_intercept
        )
        if relative:
            alphas = _trace_scaled(alphas, matrix, self.weight_sum, np)
        evals, evecs = eigh(to_device(matrix, device), device)
        del matrix
        rotated_rhs = evecs.T @ xp.asarray(rhs)
        inverse = xp.stack([_inverse_spectrum(evals, a) for a in alphas], axis=1)
        # Rounding can leave null eigenvalues slightly negative.
        evals = xp.maximum(evals, 0.0)
        # RSS = y^T y - 2 coef^T b + coef^T A coef, per eigenvector
        # z_k^2 (2 inv_k - s_k inv_k^2) with inv_k = 1 / (s_k + alpha).
        explained = (inverse * (2.0 - evals[:, None] * inverse)).T @ rotated_rhs**2
        rss = xp.asarray(target_ss)[None, :] - explained
        dof = (evals[:, None] * inverse).sum(axis=0) + float(fit_intercept)
        # The statistics hold the users' weights: W counts the samples.
        gcv = _gcv(rss, dof, self.weight_sum, self.weight_sum, xp)
        return evecs, rotated_rhs, inverse, gcv, feature_mean, target_mean, alphas

    def _solution(self, coef, feature_mean, target_mean, alpha_index, gcv, alphas):
        coef = np.asarray(coef)
        intercept = target_mean - (
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
    for rows in _slices(matrix.shape[0], 1024):
        matrix[rows] += (
            a[rows, None] * b[None, :] + b[rows, None] * a[None, :]
        ) + scaled[rows, None] * scaled[None, :]

"""Learning all parameters of a multi-head softmax attention layer."""

from __future__ import annotations

import time
from numbers import Integral, Real

import numpy as np
import scipy.optimize
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._backend import (
    DeviceCacheMixin,
    free_device_memory,
    resolve_device,
    to_device,
    to_host,
    to_output,
)
from .._scaling import r2_score_at_any_scale
from .._validation import (
    check_sample_weight,
    check_target_shape,
    check_token_array,
)
from .._warnings import warn_at_caller
from ._layer import attention_weights as _attention_weights
from ._layer import (
    compute_dtype,
    default_chunk_size,
    forward,
    loss_and_gradient,
    solve_values,
    token_norm_bound,
    value_normal_equations,
)

__all__ = ["MultiHeadAttentionLearner", "match_heads"]

# L-BFGS-B's relative-decrease test, (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1):
# only stop on it once progress is at round-off level; `tol` (on the gradient)
# is the stopping rule users control.
_LBFGS_FTOL = 1e-15
_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8


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


def _lbfgs(objective, w0, max_iter, tol, curve):
    def record(intermediate_result):
        curve.append(float(intermediate_result.fun))

    result = scipy.optimize.minimize(
        objective,
        w0,
        jac=True,
        method="L-BFGS-B",
        callback=record,
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter + 20,
            "gtol": tol,
            "ftol": _LBFGS_FTOL,
        },
    )
    # status 1: iteration or evaluation limit; 2: the line search could not
    # make progress (round-off level), which is not a failure to converge.
    return result.x, int(result.nit), result.status != 1


def _first_order(
    objective,
    w0,
    *,
    solver,
    learning_rate,
    batch_size,
    n_samples,
    max_iter,
    tol,
    rng,
    curve,
):
    """Gradient descent or Adam, full batch or mini-batches; one epoch per iteration.

    Stops when the epoch's mean gradient has max-norm at most ``tol``.
    """
    w = w0.copy()
    first, second = np.zeros_like(w), np.zeros_like(w)
    beta1, beta2 = _ADAM_BETAS
    step = 0
    for epoch in range(1, max_iter + 1):
        if batch_size is None or batch_size >= n_samples:
            batches = [None]
        else:
            order = rng.permutation(n_samples)
            batches = [
                np.sort(order[s : s + batch_size])
                for s in range(0, n_samples, batch_size)
            ]
        epoch_loss, epoch_grad = 0.0, np.zeros_like(w)
        for rows in batches:
            share = 1.0 if rows is None else len(rows) / n_samples
            loss, grad = objective(w, rows)
            epoch_loss += share * loss
            epoch_grad += share * grad
            if solver == "gd":
                w -= learning_rate * grad
                continue
            step += 1
            first = beta1 * first + (1 - beta1) * grad
            second = beta2 * second + (1 - beta2) * grad**2
            corrected = first / (1 - beta1**step)
            w -= (
                learning_rate
                * corrected
                / (np.sqrt(second / (1 - beta2**step)) + _ADAM_EPS)
            )
        curve.append(epoch_loss)
        if not (np.isfinite(epoch_loss) and np.all(np.isfinite(w))):
            # A ValueError, as scikit-learn's SGD estimators raise.
            raise ValueError(
                f"solver={solver!r} diverged (non-finite parameters at iteration "
                f"{epoch}); lower learning_rate, or standardise X and Y."
            )
        if np.max(np.abs(epoch_grad)) <= tol:
            return w, epoch, True
    return w, max_iter, False


# -- one start, and the starts ---------------------------------------------------


def _normalised(sample_weight):
    """Weights summing to one (``None`` stays ``None``: ``1 / N`` each)."""
    if sample_weight is None:
        return None
    # Divided by the largest first: sums of huge weights do not overflow.
    scaled = sample_weight / sample_weight.max()
    return scaled / scaled.sum()


def _exact_fit_threshold(Y, weights, dtype, alpha):
    """Data term at which a fit counts as exact; ``-inf`` when none does.

    ``eps sqrt(N q d) E`` with ``E = (1 / 2) sum_n f_n ||Y_n||^2`` the targets'
    energy on the scale of the data term, ``N q d`` the number of target entries
    (of positive weight) and ``eps`` that of the working precision: the
    rounding error of ``E`` itself, a sum of ``N q d`` rounded squares whose
    errors add up like a random walk. A data term below it is zero at the
    targets' scale (``1 - D / E``, the uncentred training ``R^2``, is one to
    within the rounding of ``E``), which no other start can improve on. Only
    without weight decay: with ``alpha > 0`` an exact fit of smaller norm has
    a lower objective.
    """
    if alpha > 0:
        return -np.inf
    if weights is None:
        n_rows = Y.shape[0]
        energy = 0.5 * np.mean(np.einsum("nqd,nqd->n", Y, Y))
    else:
        n_rows = int(np.count_nonzero(weights))
        energy = 0.5 * float(weights @ np.einsum("nqd,nqd->n", Y, Y))
    size = n_rows * Y.shape[1] * Y.shape[2]
    threshold = np.finfo(dtype).eps * np.sqrt(size) * energy
    # Energies beyond the float range: no early stop rather than a wrong one.
    return float(threshold) if np.isfinite(threshold) else -np.inf


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


class _Problem:
    """The data of a fit on the host, and how to build its objective on a device.

    Picklable, so that joblib's process workers can run starts of their own.
    """

    def __init__(self, X, Y, sample_weight, param, alpha, device, chunk_threads):
        self.X, self.Y, self.sample_weight = X, Y, sample_weight
        self.param, self.alpha, self.device = param, alpha, device
        self.chunk_threads = chunk_threads

    def objective(self, executor):
        """The objective on ``self.device``, computed in the data's dtype."""
        device, dtype = self.device, compute_dtype(self.X)
        weights = self.sample_weight
        if weights is not None:
            weights = to_device(weights, device, dtype=dtype)
        return _Objective(
            to_device(self.X, device, dtype=dtype),
            to_device(self.Y, device, dtype=dtype),
            self.param,
            self.alpha,
            device,
            executor,
            self.chunk_threads,
            weights,
        )


def _optimise(objective, w0, index, seed, settings):
    """Run one start from ``w0``; refit the values; return its result as a dict."""
    start, curve = time.perf_counter(), []
    if settings["verbose"] >= 2:
        curve = _VerboseCurve(index)
    solver = settings["solver"]
    if solver == "lbfgs":
        w, n_iter, converged = _lbfgs(
            objective, w0, settings["max_iter"], settings["tol"], curve
        )
    else:
        w, n_iter, converged = _first_order(
            objective,
            w0,
            solver=solver,
            learning_rate=settings["learning_rate"],
            batch_size=settings["batch_size"],
            n_samples=settings["n_samples"],
            max_iter=settings["max_iter"],
            tol=settings["tol"],
            rng=np.random.RandomState(seed),
            curve=curve,
        )
    w = objective.refit_values(w)
    loss = objective(w)[0]
    if settings["verbose"]:
        print(
            f"[{settings['name']}] start {index + 1}/{settings['n_starts']}: "
            f"objective {loss:.6g} after {n_iter} iterations "
            f"({'converged' if converged else 'max_iter reached'}, "
            f"{time.perf_counter() - start:.2f} s)"
        )
    return {
        "w": w,
        "loss": loss,
        "curve": list(curve),
        "n_iter": n_iter,
        "converged": converged,
    }


def _run_start(problem, w0, index, seed, settings, n_threads):
    """One start as a joblib task, its chunks on ``n_threads`` threads: the data
    moved to the device here."""
    device = problem.device
    with device.activate(), device.workers(n_threads) as executor:
        objective = problem.objective(executor)
        run = _optimise(objective, w0, index, seed, settings)
        del objective
    free_device_memory(device)
    return run


def _run_in_batches(problem, starts, seeds, settings, n_jobs, threshold):
    """The starts ``n_jobs`` at a time, until a batch holds an exact fit."""
    runs = []
    # Each start spreads its chunks over its share of this process's threads
    # (fewer threads than the chunks were cut for: the same chunks). BLAS runs
    # single-threaded here while thread workers share its pools, so that no
    # worker changes the limits under another's feet.
    n_threads = max(1, problem.chunk_threads // n_jobs)
    with threadpool_limits(1, user_api="blas"):
        parallel = Parallel(n_jobs=n_jobs, prefer="threads")
        for first in range(0, len(starts), n_jobs):
            batch = range(first, min(first + n_jobs, len(starts)))
            runs.extend(
                parallel(
                    delayed(_run_start)(
                        problem, starts[i], i, seeds[i], settings, n_threads
                    )
                    for i in batch
                )
            )
            if any(run["loss"] <= threshold for run in runs):
                break
    return runs


class MultiHeadAttentionLearner(DeviceCacheMixin, RegressorMixin, BaseEstimator):
    """Learn a multi-head softmax attention layer from input and output tokens.

    Fits all parameters of

    .. math::

        F(X) = \\sum_{i=1}^{m} \\mathrm{softmax}(X \\Theta_i X^\\top) X W_i,

    the softmax taken over each row (key positions, self included) with no
    temperature, by minimising

    .. math::

        \\frac{1}{2 \\sum_n s_n} \\sum_{n=1}^{N} s_n \\lVert F(X_n) - Y_n
        \\rVert_F^2 + \\frac{\\alpha}{2} \\lVert w \\rVert^2

    (``s_n`` the sample weights, one by default) over the parameters ``w``
    (``Theta_i, W_i``, or ``Q_i, K_i, W_i`` with ``Theta_i = Q_i K_i^T``),
    from several random starts, keeping the best (see Notes for when later
    starts are skipped).
    Losses and gradients are analytic and batched over samples and heads as
    large matrix products; on the CPU, chunks of samples run on threads with
    single-threaded BLAS (which also keeps NumPy's and SciPy's OpenBLAS thread
    pools from colliding inside L-BFGS). After the optimisation the
    ``W_i`` are refitted exactly: with the ``Theta_i`` fixed the layer is linear
    in them, so this is a ridge regression with the same ``alpha``.

    float64 input is computed in float64. float32 input is computed in float32
    (the layer's products and the gradients; losses are summed in float64 and
    the optimiser's state stays float64): about twice as fast, but the
    gradient is accurate to about ``1e-6`` relative, so L-BFGS stops earlier
    and ``tol`` below about ``1e-6`` is not reached (see :ref:`devices`).
    The fitted parameters are float64 either way; ``predict`` and
    ``attention_weights`` return float32 for float32 ``X``, as scikit-learn's
    linear models do.

    Parameters
    ----------
    n_heads : int, default=2
        Number of heads ``m``.
    n_queries : int, default=None
        Model (and predict) only the outputs of the first ``n_queries`` tokens,
        which attend to all tokens (e.g. ``1`` for a single query token in
        front of its keys); ``Y`` then has ``n_queries`` tokens. ``None``:
        every token (self-attention, ``Y`` in the layout of ``X``).
    parametrization : {"combined", "separate"}, default="combined"
        ``"combined"`` learns each ``Theta_i`` directly; ``"separate"`` learns
        query and key factors with ``Theta_i = Q_i K_i^T`` of rank ``rank``
        (weight decay on the factors then acts like a nuclear-norm penalty).
    rank : int, default=None
        Rank of the factors for ``parametrization="separate"``, at most the
        token dimension; ``None`` means the token dimension. Ignored for
        ``"combined"``.
    alpha : float, default=0.0
        Weight decay on all parameters (see the objective above; the data term
        is a mean over samples, so ``alpha`` does not scale with ``N``).
    solver : {"lbfgs", "gd", "adam"}, default="lbfgs"
        ``"lbfgs"``: SciPy's L-BFGS-B on the full batch (the state stays on the
        host). ``"gd"``: gradient descent. ``"adam"``: Adam. The last two use
        ``learning_rate`` and ``batch_size``.
    learning_rate : float, default=0.01
        Step size of ``"gd"`` and ``"adam"``.
    batch_size : int, default=None
        Mini-batch size of ``"gd"`` and ``"adam"``; ``None`` means full batch.
        Ignored by ``"lbfgs"``.
    max_iter : int, default=1000
        Iterations (L-BFGS) or epochs (``"gd"``, ``"adam"``) per start.
    tol : float, default=1e-8
        Stop when the largest absolute entry of the (projected) gradient is at
        most ``tol``. L-BFGS also stops when the objective's relative decrease
        reaches round-off level (1e-15). First-order solvers rarely reach the
        default; give them a larger ``tol``.
    n_init : int, default=4
        Number of random starts; the one with the lowest final objective is
        kept, or the first to reach an exact fit, after which no further
        starts run (see Notes). Ignored when ``warm_start`` continues a fit.
    init_scale : float, default=0.1
        Entries of the initial ``Theta_i`` and ``W_i`` are drawn from
        ``N(0, init_scale^2 / d)``: small, so that attention starts close to
        uniform. Factors are scaled so that ``Q_i K_i^T`` has the same entry
        variance.
    token_dim : int, default=None
        Token dimension ``d`` when ``X`` is given flattened to 2-D.
    random_state : int, RandomState instance or None, default=None
        Seed of the starting points (and of the mini-batch order).
    n_jobs : int, default=None
        Number of starts run at a time, through joblib
        (:class:`sklearn.utils.parallel.Parallel`, threads unless a
        ``joblib.parallel_config`` context says otherwise; each then runs its
        chunks on one core). ``None`` means 1 unless in such a context, ``-1``
        all processors. Every start's seed is drawn before any runs and the
        samples are cut into the same chunks, so the fit is the same for any
        ``n_jobs`` (on one machine).
    warm_start : bool, default=False
        When set and the learner is fitted, ``fit`` continues from the fitted
        parameters: one start (``n_init`` is ignored), for instance along a
        path of ``alpha`` or of growing training sets. The parameters' shapes
        (``n_heads``, the token dimension, ``rank``) must not change, nor
        ``parametrization`` from ``"combined"`` to ``"separate"`` (the other
        way, ``Theta_i = Q_i K_i^T`` starts the combined fit): a
        ``ValueError`` says which did. The optimiser's memory
        (the L-BFGS curvature pairs, Adam's moments) starts afresh.
    verbose : int, default=0
        ``1`` prints a line per start, ``2`` also the objective every 10
        iterations.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute; ``None`` follows the input (see :ref:`devices`).

    Attributes
    ----------
    theta_ : ndarray of shape (n_heads, token_dim, token_dim), dtype float64
        Learned attention matrices ``Theta_i`` (float64 for any input dtype).
    values_ : ndarray of shape (n_heads, token_dim, token_dim), dtype float64
        Learned value-output matrices ``W_i`` (after the exact refit).
    query_factors_ : ndarray of shape (n_heads, token_dim, rank), dtype float64
        Query factors ``Q_i``; only for ``parametrization="separate"``.
    key_factors_ : ndarray of shape (n_heads, token_dim, rank), dtype float64
        Key factors ``K_i``; only for ``parametrization="separate"``.
    loss_ : float
        Final objective of the kept start (after the refit).
    loss_curve_ : list of float
        Objective after each iteration (epoch) of the kept start.
    n_iter_ : int
        Iterations (epochs) run by the kept start.
    init_losses_ : ndarray of shape (`n_init_run_`,), dtype float64
        Final objective of every start that ran, in the order of the starts;
        compare with ``loss_`` to see how many found the same solution.
    init_n_iter_ : ndarray of shape (`n_init_run_`,), dtype int64
        Iterations (epochs) of every start that ran.
    n_init_run_ : int
        Number of starts that ran, the first ``n_init_run_`` of ``n_init``:
        fewer when one reached an exact fit (see Notes; a multiple of
        ``n_jobs`` then), 1 for a warm start.
    best_init_ : int
        Index of the kept start.
    n_queries_ : int
        Number of output tokens (``n_queries``, or ``n_tokens_`` when it is
        None).
    y_ndim_ : int
        Number of dimensions of ``Y`` in ``fit``: 3 for ``(n_samples,
        n_queries_, token_dim_)``, 2 for flattened ``(n_samples, n_queries_ *
        token_dim_)``; ``predict`` returns this layout.
    n_tokens_ : int
        Number of tokens ``k`` seen in ``fit``.
    token_dim_ : int
        Token dimension ``d`` seen in ``fit``.
    n_features_in_ : int
        Number of flattened input features, ``k d``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the flattened features, when ``X`` is a data frame.

    See Also
    --------
    sklearn_attn.attention.match_heads : Compare learned heads with true ones, up
        to permutation.
    sklearn_attn.datasets.make_attention_layer_regression : Data from a planted layer.

    Notes
    -----
    **Exact fits end the restarts.** Without weight decay (``alpha=0``) a start
    whose data term ``D`` is at most ``eps sqrt(N q d) E`` counts as an exact
    fit, with ``E = (1 / 2 sum_n s_n) sum_n s_n ||Y_n||^2`` the targets'
    energy on the scale of ``D``, ``N q d`` the number of target entries (of
    positive weight) and ``eps`` the machine epsilon of the working precision
    (float64, or float32 for float32 ``X``). ``eps sqrt(N q d) E`` is the
    rounding error of ``E`` itself, a sum of ``N q d`` rounded squares whose
    errors add up like a random walk: below it the residual is zero at the
    targets' scale (``1 - D / E``, the uncentred training ``R^2``, is one to
    within the rounding of ``E``), and no other start can improve on it. The
    first start to get there is kept and no further ones run; with
    ``n_jobs > 1`` the starts run in batches of ``n_jobs`` and the batches
    after it are skipped. The first exact start in the order of the starts is
    kept, so the result does not depend on ``n_jobs``. With ``alpha > 0``
    every start runs: an exact fit of smaller norm has a lower objective.

    **Targets for scikit-learn's tools.** scikit-learn's metrics, hence its
    string scorers (``scoring="neg_mean_squared_error"``, ``"r2"``, ...) in
    :func:`~sklearn.model_selection.cross_validate`,
    :class:`~sklearn.model_selection.GridSearchCV` or
    :func:`~sklearn.inspection.permutation_importance`, take 1-D or 2-D
    targets: pass ``Y`` flattened to ``(n_samples, n_queries * token_dim)``
    (tokens one after another, ``Y.reshape(n_samples, -1)``) and ``predict``
    answers in that layout. 3-D ``Y`` works with the default ``score``
    (``scoring=None``) only.

    References
    ----------
    S. Chen and Y. Li, "Provably learning a multi-head attention layer",
    STOC 2025, arXiv:2402.04084.

    Examples
    --------
    >>> from sklearn_attn.attention import MultiHeadAttentionLearner
    >>> from sklearn_attn.datasets import make_attention_layer_regression
    >>> X, Y, layer = make_attention_layer_regression(
    ...     n_samples=300, n_heads=1, n_tokens=4, token_dim=3, random_state=0)
    >>> model = MultiHeadAttentionLearner(n_heads=1, n_init=2, random_state=1)
    >>> model.fit(X, Y).predict(X).shape
    (300, 4, 3)
    >>> model.score(X, Y) > 0.999999
    True
    """

    _parameter_constraints = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "n_queries": [Interval(Integral, 1, None, closed="left"), None],
        "parametrization": [StrOptions({"combined", "separate"})],
        "rank": [Interval(Integral, 1, None, closed="left"), None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"lbfgs", "gd", "adam"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_scale": [Interval(Real, 0, None, closed="neither")],
        "token_dim": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "device": [str, None],
    }

    def __init__(
        self,
        n_heads=2,
        *,
        n_queries=None,
        parametrization="combined",
        rank=None,
        alpha=0.0,
        solver="lbfgs",
        learning_rate=0.01,
        batch_size=None,
        max_iter=1000,
        tol=1e-8,
        n_init=4,
        init_scale=0.1,
        token_dim=None,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        device=None,
    ):
        self.n_heads = n_heads
        self.n_queries = n_queries
        self.parametrization = parametrization
        self.rank = rank
        self.alpha = alpha
        self.solver = solver
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.init_scale = init_scale
        self.token_dim = token_dim
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device

    # -- validation ------------------------------------------------------------------

    def _validate_xy(self, X, Y):
        """Validate ``X`` and ``Y``; return them 3-D with the number of dimensions
        of ``Y`` as given (the layout predict returns).

        ``Y`` holds the outputs of the first ``n_queries`` tokens (all of them
        by default), 3-D ``(n, n_queries, token_dim)`` or flattened 2-D
        ``(n, n_queries * token_dim)`` whatever the layout of ``X``: the
        output dimension is the token dimension, known from ``X``, so the
        width of a 2-D ``Y`` determines its tokens without ambiguity.
        """
        if Y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is "
                "None; "
                "pass the output tokens Y."
            )
        layout = (
            "3-D (n_samples, n_queries, token_dim), or flattened 2-D "
            "(n_samples, n_queries * token_dim)"
        )
        # Fewer dimensions are refused below, once X is known to be valid.
        check_target_shape(Y, "Y", min_ndim=0, max_ndim=3, layout=layout)
        Y = np.asarray(to_host(Y))
        y_shape = Y.shape
        # (n, q, d) -> (n, q d) from the shape: reshape(n, -1) fails for n = 0.
        Y_2d = Y.reshape(Y.shape[0], Y.shape[1] * Y.shape[2]) if Y.ndim == 3 else Y
        X, Y = check_token_array(
            self,
            X,
            Y_2d,
            reset=True,
            token_dim=self.token_dim,
            min_tokens=1,
        )
        n, k, d = X.shape
        q = k if self.n_queries is None else self.n_queries
        if q > k:
            raise ValueError(
                f"n_queries={q} is larger than the number of tokens of X ({k})."
            )
        if y_shape not in ((n, q, d), (n, q * d)):
            what = "of X" if q == k else f"of the first n_queries={q} tokens of X"
            raise ValueError(
                f"Y must have shape {(n, q, d)} or, flattened, {(n, q * d)}: the "
                f"output tokens {what}, {k} token(s) of dimension {d} (the layer "
                f"maps each token to a token of the same dimension); got {y_shape}."
            )
        return X, np.asarray(Y, dtype=np.float64).reshape(n, q, d), len(y_shape)

    def _validate_x(self, X):
        return check_token_array(
            self, X, reset=False, token_dim=self.token_dim, min_tokens=1
        )

    # -- fitting ---------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the layer by minimising the squared error from ``n_init`` starts.

        Starts run one after another (``n_jobs=None``) or ``n_jobs`` at a time;
        once a start reaches an exact fit (see Notes) no further ones are run.
        With ``warm_start=True`` and a fitted model, one start from the fitted
        parameters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Input tokens; 2-D input needs ``token_dim``.
        y : array-like of shape (n_samples, n_queries, token_dim) or \
                (n_samples, n_queries * token_dim)
            Output tokens ``Y`` (of the first ``n_queries`` tokens when it is set,
            else of every token), 3-D or flattened to 2-D whatever the layout
            of ``X``; ``predict`` returns the layout given here. 2-D ``Y``
            suits scikit-learn's metrics and scorers.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples in the data term; ``None``
            weighs them equally. Integer weights fit as repeated samples do.

        Returns
        -------
        self : object
            The fitted learner.
        """
        device = resolve_device(self.device, X)
        X, Y, y_ndim = self._validate_xy(X, y)
        n, k, d = X.shape
        weights = _normalised(check_sample_weight(sample_weight, n))
        rank = d if self.rank is None else self.rank
        if self.parametrization == "separate" and rank > d:
            raise ValueError(
                f"rank={self.rank} is larger than the token dimension {d}; the "
                "factors Q_i, K_i of Theta_i = Q_i K_i^T have at most token_dim "
                "columns."
            )
        param = _Parametrization(self.parametrization, self.n_heads, d, rank)
        rng = check_random_state(self.random_state)
        if self.warm_start and hasattr(self, "theta_"):
            starts = [self._warm_start_point(param)]
        else:
            starts = [param.initial(rng, self.init_scale) for _ in range(self.n_init)]
        # Each start's seed (for the mini-batch order) is fixed before any
        # runs, so that serial and parallel fits are the same.
        seeds = rng.randint(np.iinfo(np.int32).max, size=len(starts))
        n_jobs = max(1, min(effective_n_jobs(self.n_jobs), len(starts)))
        dtype = compute_dtype(X)
        threshold = _exact_fit_threshold(Y, weights, dtype, self.alpha)
        settings = self._start_settings(n)

        self._clear_device_cache()
        runs = []
        with device.activate(), device.workers() as executor:
            # Chunks as the threads of this process would cut them, also in
            # joblib's workers: the same sums, so the same fit, in both.
            n_threads = 1 if executor is None else executor.n_threads
            problem = _Problem(X, Y, weights, param, self.alpha, device, n_threads)
            objective = problem.objective(executor)
            self._check_finite_start(objective, starts[0], X, Y)
            if n_jobs == 1:
                for index, w0 in enumerate(starts):
                    runs.append(_optimise(objective, w0, index, seeds[index], settings))
                    if runs[-1]["loss"] <= threshold:
                        break
            del objective  # the pool can only release unreferenced blocks
        free_device_memory(device)
        if n_jobs > 1:
            problem.X = to_host(problem.X)  # for process workers, which pickle it
            runs = _run_in_batches(problem, starts, seeds, settings, n_jobs, threshold)

        losses = np.array([run["loss"] for run in runs], dtype=np.float64)
        if not np.isfinite(losses).any():
            raise ValueError(
                f"{type(self).__name__}: the objective became non-finite in every "
                f"start (solver={self.solver!r}); the attention scores or the "
                "squared errors overflow. Standardise X and Y, or lower "
                "learning_rate for 'gd' and 'adam'."
            )
        # The first exact start (the last one run, when run one at a time),
        # else the lowest objective: the same choice however the starts ran.
        exact = np.flatnonzero(losses <= threshold)
        if exact.size:
            best = int(exact[0])
        else:
            best = int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))
        run = runs[best]
        if not run["converged"]:
            warn_at_caller(
                f"{type(self).__name__}: solver={self.solver!r} reached max_iter="
                f"{self.max_iter} before the gradient fell below tol={self.tol} in the "
                "kept start. Increase max_iter, or tol.",
                ConvergenceWarning,
            )
        parts = param.unpack(run["w"])
        theta, values = param.layer(run["w"])
        self.theta_ = np.array(theta)
        self.values_ = np.array(values)
        if self.parametrization == "separate":
            self.query_factors_ = parts["query"].copy()
            self.key_factors_ = parts["key"].copy()
        else:
            self.__dict__.pop("query_factors_", None)
            self.__dict__.pop("key_factors_", None)
        self.n_queries_ = Y.shape[1]
        self.y_ndim_ = y_ndim
        self.loss_ = float(run["loss"])
        self.loss_curve_ = run["curve"]
        self.n_iter_ = run["n_iter"]
        self.init_losses_ = losses
        self.init_n_iter_ = np.array([r["n_iter"] for r in runs], dtype=np.int64)
        self.n_init_run_ = len(runs)
        self.best_init_ = best
        return self

    def _start_settings(self, n_samples):
        """What every start needs of the parameters (plain values, picklable)."""
        return {
            "solver": self.solver,
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "n_samples": n_samples,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "verbose": self.verbose,
            "n_starts": 1
            if self.warm_start and hasattr(self, "theta_")
            else self.n_init,
            "name": type(self).__name__,
        }

    def _warm_start_point(self, param):
        """The fitted parameters as a start; a change of their shapes is an error."""
        if param.kind == "separate":
            if not hasattr(self, "query_factors_"):
                raise ValueError(
                    "warm_start=True continues from the fitted parameters, but the "
                    "learner was fitted with parametrization='combined', which has "
                    "no query and key factors; set warm_start=False to fit "
                    "parametrization='separate' from random starts."
                )
            fitted = {
                "query": self.query_factors_,
                "key": self.key_factors_,
                "values": self.values_,
            }
        else:  # Theta_i = Q_i K_i^T of a factored fit is a valid combined start.
            fitted = {"theta": self.theta_, "values": self.values_}
        for name, shape in param.shapes.items():
            if fitted[name].shape != shape:
                raise ValueError(
                    "warm_start=True continues from the fitted parameters, but "
                    f"their shapes do not match this fit's: {name} has shape "
                    f"{fitted[name].shape}, and n_heads={self.n_heads}, tokens of "
                    f"dimension {param.shapes['values'][1]}"
                    + (f", rank={shape[2]}" if name in ("query", "key") else "")
                    + f" need {shape}. Set warm_start=False to start afresh."
                )
        return np.concatenate(
            [np.asarray(a, dtype=np.float64).ravel() for a in fitted.values()]
        )

    def _check_finite_start(self, objective, w0, X, Y):
        """The objective must be finite where the optimisation starts."""
        loss, grad = objective(w0)
        if np.isfinite(loss) and np.isfinite(grad).all():
            return
        raise ValueError(
            f"{type(self).__name__}: the objective is not finite at the starting "
            f"point, for X with entries up to {float(np.abs(X).max()):.3g} and Y up "
            f"to {float(np.abs(Y).max()):.3g} in absolute value: the attention "
            "scores x_a^T Theta x_b grow as |x|^2 and the squared error as |Y|^2, "
            f"beyond the range of {np.dtype(objective.X.dtype).name} here. "
            "Standardise X and Y (the layer is "
            "linear in the W_i: fitting Y / c gives W_i / c)"
            + (", or pass float64 data." if objective.X.dtype == np.float32 else ".")
        )

    # -- prediction ------------------------------------------------------------------

    def _compute(self, X, func):
        check_is_fitted(self)
        device = resolve_device(self.device, X)
        X = self._validate_x(X)
        with device.activate():
            out = func(to_device(X, device, dtype=compute_dtype(X)), device)
        return to_output(out, device)

    def predict(self, X):
        """Apply the learned layer.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Input tokens in the layout seen in ``fit``.

        Returns
        -------
        Y_pred : ndarray of shape (n_samples, `n_queries_`, `token_dim_`) or \
                (n_samples, `n_queries_` * `token_dim_`)
            Output tokens in the layout of ``Y`` in ``fit`` (``y_ndim_``),
            whatever the layout of ``X`` here (a CuPy array when
            ``device=None`` and ``X`` is one); float32 for float32 ``X``,
            else float64.
        """

        def run(X_dev, device):
            with np.errstate(over="ignore", invalid="ignore"):
                out = forward(
                    X_dev,
                    self._cached_on("theta_", device),
                    self._cached_on("values_", device),
                    n_queries=self.n_queries_,
                    xp=device.xp,
                )
            if not bool(device.xp.isfinite(out).all()):
                raise ValueError(
                    f"{type(self).__name__}: the predictions overflow "
                    f"{np.dtype(out.dtype).name}: the output tokens are sums of the "
                    "tokens of X times the W_i, and X is far beyond the range the "
                    "fitted layer maps to finite values."
                )
            return out

        out = self._compute(X, run)
        return out.reshape(out.shape[0], -1) if self.y_ndim_ == 2 else out

    def attention_weights(self, X):
        """Attention probabilities of the learned heads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Input tokens in the layout seen in ``fit``.

        Returns
        -------
        attention : ndarray of shape (n_samples, n_heads, `n_queries_`, n_tokens)
            ``attention[n, i, a, b]`` is the weight of token ``b`` in output
            token ``a`` of head ``i``; rows sum to one. float32 for float32
            ``X``, else float64.
        """

        def run(X_dev, device):
            return _attention_weights(
                X_dev,
                self._cached_on("theta_", device),
                n_queries=self.n_queries_,
                xp=device.xp,
            )

        return self._compute(X, run)

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 on the flattened output tokens.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Input tokens.
        y : array-like of shape (n_samples, `n_queries_`, `token_dim_`) or \
                (n_samples, `n_queries_` * `token_dim_`)
            True output tokens, 3-D or flattened.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``predict(X)`` against ``y``, both flattened to
            ``(n_samples, n_queries_ * token_dim_)`` and averaged uniformly
            over the columns.
        """
        pred = to_host(self.predict(X))
        y = np.asarray(to_host(y), dtype=np.float64)
        n = len(pred)
        q, d = self.n_queries_, self.token_dim_
        shapes = ((n, q, d), (n, q * d))
        if y.shape not in shapes:
            raise ValueError(
                f"y must hold the output tokens: expected shape {shapes[0]} or, "
                f"flattened, {shapes[1]}; got {y.shape}."
            )
        sample_weight = check_sample_weight(sample_weight, n)
        return r2_score_at_any_scale(
            y.reshape(n, -1),
            pred.reshape(n, -1),
            sample_weight=sample_weight,
            multioutput="uniform_average",
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        # Predictions are invariant to permuting the keys: generic tabular
        # targets (a linear function of one column) are out of reach.
        tags.regressor_tags.poor_score = True
        return tags


class _VerboseCurve(list):
    """A loss curve that prints every 10th entry."""

    def __init__(self, index):
        super().__init__()
        self.index = index

    def append(self, value):
        super().append(value)
        if len(self) % 10 == 0:
            print(
                f"  start {self.index + 1}, iteration {len(self)}: "
                f"objective {value:.6g}"
            )


def match_heads(theta_hat, values_hat, theta_true, values_true):
    """Match learned heads to true ones and report relative parameter errors.

    A multi-head layer is unchanged by permuting its heads, so learned and
    true heads are paired by the assignment (Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment`) that minimises the summed
    costs ``||Theta_hat_i - Theta_j|| / ||Theta_j|| + ||W_hat_i - W_j|| / ||W_j||``
    (Frobenius norms). The numbers of heads may differ; surplus heads stay
    unmatched.

    Parameters
    ----------
    theta_hat, values_hat : array-like of shape (n_heads_hat, d, d)
        Learned ``Theta_i`` and ``W_i`` (e.g. ``theta_`` and ``values_``).
    theta_true, values_true : array-like of shape (n_heads, d, d)
        True ``Theta_j`` and ``W_j``.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``assignment`` : ndarray of shape (n_heads,), the learned head matched
        to each true head (-1 if none); ``theta_errors`` and
        ``values_errors`` : ndarrays of shape (n_heads,), the relative errors
        of each matched pair (NaN if unmatched); ``theta_error`` and
        ``values_error`` : floats, the relative errors of all heads stacked,
        ``||Theta_hat_perm - Theta|| / ||Theta||`` (an unmatched true head
        counts in full).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import match_heads
    >>> rng = np.random.default_rng(0)
    >>> theta, values = rng.normal(size=(2, 2, 3, 3))
    >>> result = match_heads(theta[::-1], values[::-1], theta, values)
    >>> result.assignment.tolist(), float(result.theta_error)
    ([1, 0], 0.0)
    """
    arrays = []
    for name, array in (
        ("theta_hat", theta_hat),
        ("values_hat", values_hat),
        ("theta_true", theta_true),
        ("values_true", values_true),
    ):
        array = np.asarray(array, dtype=np.float64)
        if array.ndim != 3 or array.shape[1] != array.shape[2]:
            raise ValueError(
                f"{name} must have shape (n_heads, d, d); got shape {array.shape}."
            )
        arrays.append(array)
    theta_hat, values_hat, theta_true, values_true = arrays
    if theta_hat.shape != values_hat.shape or theta_true.shape != values_true.shape:
        raise ValueError(
            "theta_hat and values_hat (and theta_true and values_true) must have the "
            f"same shape; got {theta_hat.shape}, {values_hat.shape}, "
            f"{theta_true.shape}, {values_true.shape}."
        )
    if theta_hat.shape[1] != theta_true.shape[1]:
        raise ValueError(
            f"Learned heads have dimension {theta_hat.shape[1]} but true heads "
            f"{theta_true.shape[1]}."
        )

    def pairwise(hat, true):
        diff = hat[:, None] - true[None, :]
        norms = np.linalg.norm(true.reshape(len(true), -1), axis=1)
        tiny = np.finfo(np.float64).tiny
        distances = np.linalg.norm(diff.reshape(len(hat), len(true), -1), axis=2)
        return distances / np.maximum(norms, tiny)[None, :]

    theta_cost = pairwise(theta_hat, theta_true)
    values_cost = pairwise(values_hat, values_true)
    rows, cols = scipy.optimize.linear_sum_assignment(theta_cost + values_cost)
    m = len(theta_true)
    assignment = np.full(m, -1)
    assignment[cols] = rows
    theta_errors = np.full(m, np.nan)
    values_errors = np.full(m, np.nan)
    theta_errors[cols] = theta_cost[rows, cols]
    values_errors[cols] = values_cost[rows, cols]

    def stacked_error(hat, true):
        matched = np.zeros_like(true)
        matched[cols] = hat[rows]
        return float(np.linalg.norm(matched - true) / max(np.linalg.norm(true), 1e-300))

    return Bunch(
        assignment=assignment,
        theta_errors=theta_errors,
        values_errors=values_errors,
        theta_error=stacked_error(theta_hat, theta_true),
        values_error=stacked_error(values_hat, values_true),
    )

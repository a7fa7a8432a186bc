"""The estimator that learns all parameters of a multi-head softmax attention layer.

Its objective is in ``_objective``, its solvers and restarts in ``_solvers``.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

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
from ._layer import compute_dtype, forward
from ._objective import _normalised, _Parametrization
from ._solvers import _exact_fit_threshold, _optimise, _Problem, _run_in_batches

__all__ = ["MultiHeadAttentionLearner"]


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

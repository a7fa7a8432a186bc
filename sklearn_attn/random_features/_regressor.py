"""The estimator layer of the random-feature ridge regressors.

One topic, the fitted ridge model over the ridge core (:mod:`._ridge`,
:mod:`._ridge_statistics`): ``fit`` (exactly rescaled by powers of two at
extreme scales of ``X``, ``y``, the weights and the penalty), ``partial_fit``
and ``solve`` (one pass, from sufficient statistics), the fitted attributes
scaled back, ``predict`` and ``score``. The size is that of exact
extreme-scale handling, which every route shares.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import NotFittedError, UndefinedMetricWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._backend import (
    free_device_memory,
    resolve_device,
    to_device,
    to_host,
    to_output,
)
from .._scaling import array_exponent, r2_score_at_any_scale, scale_by_power_of_two
from .._validation import check_sample_weight, check_target_shape
from .._warnings import warn_at_caller
from ._base import _alpha_text, _out_of_range, _RandomFeaturesMixin
from ._ridge import fit_ridge
from ._ridge_statistics import RidgeStatistics

# alpha="auto": these penalties, in units of the feature scale tau (the mean
# squared norm of the centred training features), compared by generalized
# cross-validation. The best alpha / tau moves over many decades with the data
# and the width, so no single multiple of tau works, and half-decade steps
# come closer to it than whole decades. GCV, unlike leave-one-out, needs only
# the spectrum: it is cheap in the primal, exact for weights as repeated rows,
# and computable from the sufficient statistics of a one-pass fit.
AUTO_ALPHAS = 10.0 ** np.arange(-6.0, 1.5, 0.5)

# A fitted coefficient below this keeps fewer than 53 significant bits once its
# smaller companions reach float64's subnormal range (2^-1022 / 2^-52 = 2^-970).
_SMALLEST_COEF = 2.0**-968

# partial_fit cannot rescale X as fit does (one power of two for all the data,
# unknown batch by batch): it takes X whose largest entry is within 2^+-E of
# one, with E such that features of degree 3 and their squares (2^+-6E) keep
# a wide margin inside the normal range of the features' dtype (float32 for
# float32 input: 2^+-126; the float64 sums: 2^+-1022) for weights and counts.
_STREAM_EXPONENT = {np.dtype(np.float32): 16, np.dtype(np.float64): 96}

# Set from the ridge solution; partial_fit(..., solve=False) leaves them unset.
_SOLUTION_ATTRIBUTES = frozenset(
    {"coef_", "intercept_", "alpha_", "solver_", "loo_mse_", "best_score_", "gcv_mse_"}
)


_RIDGE_CONSTRAINTS = {
    "alpha": [
        StrOptions({"auto"}),
        Interval(Real, 0, None, closed="left"),
        "array-like",
    ],
    "fit_intercept": ["boolean"],
    "solver": [StrOptions({"auto", "primal", "dual"})],
    "token_dim": [Interval(Integral, 1, None, closed="left"), None],
    "random_state": ["random_state"],
    "device": [str, None],
}


class _RandomFeatureRidge(RegressorMixin, _RandomFeaturesMixin, BaseEstimator):
    """Ridge regression on frozen random features, never holding them all."""

    def _check_alphas(self):
        if isinstance(self.alpha, str):  # "auto", in units of the feature scale
            return AUTO_ALPHAS.copy()
        alphas = np.asarray(self.alpha, dtype=np.float64)
        if alphas.ndim > 1 or alphas.size == 0:
            raise ValueError(
                "alpha must be a non-negative float or a 1-D array of positive "
                f"floats; got an array of shape {alphas.shape}."
            )
        if not np.all(np.isfinite(alphas)):
            raise ValueError("alpha must be finite.")
        if alphas.ndim == 0 or alphas.size == 1:
            if alphas.ravel()[0] < 0:
                raise ValueError(f"alpha must be >= 0; got {float(alphas.ravel()[0])}.")
            return alphas.reshape(1)
        if np.any(alphas <= 0):
            raise ValueError(
                "alpha given as an array is chosen by leave-one-out error and must be "
                f"strictly positive; got {alphas.tolist()}."
            )
        return alphas

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Draw the random features and fit their ridge regression.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input, query first; 2-D input needs ``token_dim``.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero.

        Returns
        -------
        self : object
            The fitted regressor.
        """
        if type(X).__module__.startswith("dask"):
            # A dask array: the covariance is reduced on the cluster's workers.
            from ._dask import fit_dask

            return fit_dask(self, X, y, sample_weight)
        self._reset_stream()
        alphas = self._check_alphas()
        relative = isinstance(self.alpha, str)
        device = resolve_device(self.device, X)
        check_target_shape(y, "y", max_ndim=2)
        X, y = self._validate_tokens(X, y, reset=True)
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        # (GCV, for "auto", needs no held-out sample.)
        if alphas.size > 1 and self.fit_intercept and not relative:
            n_weighted = (
                X.shape[0] if sample_weight is None else int((sample_weight > 0).sum())
            )
            if n_weighted < 2:
                raise ValueError(
                    f"alpha={_alpha_text(alphas)} is chosen by leave-one-out error, "
                    "which needs at least 2 samples of positive weight with "
                    f"fit_intercept=True; got {n_weighted}."
                )
        # Ridge with weights w and penalty alpha is ridge with w / c and alpha / c:
        # an even power of two keeps the weights' sums in range and scales their
        # square roots (the solver's row scalings) exactly.
        weight_exponent = 0
        if sample_weight is not None:
            weight_exponent = 2 * -(-array_exponent(sample_weight) // 2)
            sample_weight = np.ldexp(sample_weight, -weight_exponent)
        self._draw_weights(
            check_random_state(self.random_state), X.shape[1], X.shape[2]
        )
        self._clear_device_cache()
        y_2d = np.asarray(y.reshape(-1, 1) if y.ndim == 1 else y, dtype=np.float64)
        xp = device.xp
        with device.activate():
            X_dev = to_device(X, device, dtype=X.dtype)
            # Extreme but finite scales are solved exactly on rescaled data: the
            # features Phi(X) / 2^(degree e), the targets y / 2^e_y and alpha /
            # 2^(2 degree e) give the same solution up to powers of two.
            x_exponent = array_exponent(X_dev, xp)
            if not self._scales_up:
                x_exponent = max(x_exponent, 0)
            exponents = None
            if x_exponent:
                exponents = xp.full(X.shape[0], x_exponent, dtype=np.int32)
            feature_map = self._feature_map(X_dev, device, exponents)
            feature_exponent = feature_map.degree * x_exponent
            y_exponent = array_exponent(y_2d)
            alpha_exponent = 2 * feature_exponent + weight_exponent
            # Relative penalties scale with the (rescaled) features by
            # themselves; only the weights' power of two is left to apply.
            alphas_solved, coef_exponent = (
                (np.ldexp(alphas, -weight_exponent), 0)
                if relative
                else self._scaled_alphas(alphas, alpha_exponent, xp, X_dev)
            )
            try:
                solution = fit_ridge(
                    feature_map,
                    np.ldexp(y_2d, -y_exponent),
                    alphas_solved,
                    sample_weight=sample_weight,
                    fit_intercept=self.fit_intercept,
                    mode=self.solver,
                    relative_alphas=relative,
                    gcv_weight_sum=(
                        float(np.ldexp(sample_weight.sum(), weight_exponent))
                        if sample_weight is not None
                        else float(X.shape[0])
                    )
                    if relative
                    else None,
                )
            except FloatingPointError as error:
                raise _out_of_range(
                    self,
                    "the features are not representable together in float64",
                    float(xp.abs(X_dev).max()),
                    f"({error}: the features of different degree in X, such as "
                    "the value-bias features beside the others, lie too far "
                    "apart)",
                ) from None
            X_max = float(xp.abs(X_dev).max()) if x_exponent else 1.0
            del X_dev, feature_map
        # Nothing on the device is referenced any more: give the pool back.
        free_device_memory(device)
        self._set_solution(
            solution,
            alphas,
            y.ndim,
            y_exponent=y_exponent,
            feature_exponent=feature_exponent + coef_exponent,
            solved_tiny=coef_exponent > 0,
            alpha_exponent=alpha_exponent,
            X_max=X_max,
            y_max=float(np.abs(y_2d).max()),
        )
        return self

    def _set_solution(
        self,
        solution,
        alphas,
        y_ndim,
        *,
        y_exponent=0,
        feature_exponent=0,
        alpha_exponent=0,
        X_max=1.0,
        y_max=None,
        solved_tiny=False,
    ):
        """Set ``coef_``, ``intercept_``, ``alpha_`` and ``solver_`` (and
        ``loo_mse_``, ``best_score_``, ``gcv_mse_``) from a RidgeSolution.

        The solution may be of a rescaled problem (features divided by
        ``2^feature_exponent``, targets by ``2^y_exponent``, penalties by
        ``2^alpha_exponent``): the attributes
        are scaled back exactly, or an error raised where they leave float64's
        range. ``X_max`` and ``y_max`` only enter that error's message.
        ``solved_tiny`` says that the coefficients are tiny by the problem (a
        penalty far above the kernel), not by the scaling back.
        """
        with np.errstate(over="ignore", under="ignore"):
            coef = np.ldexp(solution.coef, y_exponent - feature_exponent)
            intercept = np.ldexp(solution.intercept, y_exponent)
        y_text = "" if y_max is None else f"and y up to {y_max:.3g}"
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise _out_of_range(
                self, "the fitted value vectors overflow float64", X_max, y_text
            )
        largest = float(np.abs(coef).max())
        # Scaling down to below 2^-968 leaves the coefficients fewer significant
        # bits than the solver gave them; coefficients solved that small (a
        # huge alpha: the intercept-only limit) are returned as they are.
        scaled_down = y_exponent - feature_exponent < 0 and not solved_tiny
        if scaled_down and solution.coef.any() and largest < _SMALLEST_COEF:
            raise _out_of_range(
                self,
                "the fitted value vectors underflow float64",
                X_max,
                f"{y_text} (they would be about {largest:.1g})",
            )
        self.coef_ = coef.T if y_ndim == 2 else coef[:, 0]
        self.intercept_ = intercept if y_ndim == 2 else float(intercept[0])
        if isinstance(self.alpha, str):
            # "auto": the penalty chosen, back in the units of the data.
            chosen = solution.alphas[solution.alpha_index]
            with np.errstate(over="ignore"):
                self.alpha_ = float(np.ldexp(chosen, alpha_exponent))
            if not np.isfinite(self.alpha_):
                warn_at_caller(
                    f"{type(self).__name__}: alpha_ is inf: the penalty chosen by "
                    "alpha='auto', a multiple of the features' mean squared norm, "
                    "is beyond float64's range for X of this scale. The fit was "
                    "solved exactly on rescaled features; coef_, intercept_ and "
                    "the predictions are unaffected.",
                    RuntimeWarning,
                )
        else:
            self.alpha_ = float(alphas[solution.alpha_index])
        self.solver_ = solution.mode
        for name, errors, undetermined in (
            (
                "gcv_mse_",
                solution.gcv_mse,
                "generalized cross-validation is undefined for a fit with as "
                "many degrees of freedom as samples (e.g. one sample with "
                "fit_intercept=True)",
            ),
            (
                "loo_mse_",
                solution.loo_mse,
                "the fit interpolates a sample to working precision (its "
                "leave-one-out error is not determined) or the squared errors "
                "overflow float64",
            ),
        ):
            if errors is None:
                self.__dict__.pop(name, None)
                continue
            # Mean over targets, on the scale of the targets. Squared errors of
            # targets beyond ~1e154 overflow to inf here, although alpha_ was
            # chosen on the rescaled (finite) ones.
            with np.errstate(over="ignore"):
                mean = np.ldexp(errors.mean(axis=1), 2 * y_exponent)
            setattr(self, name, mean)
            if not np.isfinite(mean).all():
                warn_at_caller(
                    f"{type(self).__name__}: {name} is inf for some penalties: "
                    f"{undetermined}; alpha_ is the best of the others, or the "
                    "largest penalty.",
                    UndefinedMetricWarning,
                )
        if solution.loo_mse is not None:
            self.best_score_ = -float(self.loo_mse_[solution.alpha_index])
        else:
            self.__dict__.pop("best_score_", None)

    # -- partial_fit: one pass over batches ---------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None, *, solve=True):
        """Add a batch of samples to the fit (one pass over data beyond memory).

        The first call draws the random weights (from ``random_state``, as
        ``fit`` draws them); every call adds the batch's primal sufficient
        statistics (weighted sums of the features, the targets, their
        ``(n_features, n_features)`` covariance and cross products, in float64
        whatever the input dtype) and, by default, solves the ridge system of
        all batches so far, so that the model is fitted after every call (as
        scikit-learn's ``IncrementalPCA`` is): its predictions equal those of
        one ``fit`` on the batches concatenated, up to rounding. Each solve
        decomposes the ``(n_features, n_features)`` covariance; over a long
        stream, pass ``solve=False`` and call :meth:`solve` once at the end.

        ``alpha`` must be one value or ``"auto"`` (whose penalties are compared
        by generalised cross-validation, which the statistics determine, as
        ``fit`` does): leave-one-out comparison of an array of alphas needs a
        second pass over the data. ``solver_`` is ``"primal"``; a model being
        fitted by ``partial_fit`` carries (and pickles) its statistics, about
        ``8 n_features^2`` bytes, so that it can continue. ``fit`` starts over,
        and so does ``partial_fit`` after ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input, query first, in the same layout in every call. Its
            largest absolute entry must lie between ``2^-16`` and ``2^16``
            (float32) or ``2^-96`` and ``2^96`` (float64): unlike ``fit``,
            ``partial_fit`` cannot rescale the batches consistently.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets, of the same shape in every call.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero.
        solve : bool, default=True
            Solve the ridge system of all batches so far before returning.
            ``False`` only adds the batch: the fitted attributes (``coef_``,
            ``intercept_``, ``alpha_``, ...) are removed, and ``predict``
            raises ``NotFittedError`` until :meth:`solve` is called.

        Returns
        -------
        self : object
            The regressor, fitted on all batches so far (unless ``solve=False``).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_attn import RandomFeatureAttentionRegressor
        >>> from sklearn_attn.datasets import make_token_regression
        >>> X, y = make_token_regression(
        ...     n_samples=300, n_keys=4, token_dim=4, random_state=0)
        >>> stream = RandomFeatureAttentionRegressor(n_heads=20, random_state=0)
        >>> for batch in np.array_split(np.arange(300), 3):
        ...     stream = stream.partial_fit(X[batch], y[batch])
        >>> full = RandomFeatureAttentionRegressor(
        ...     n_heads=20, solver="primal", random_state=0).fit(X, y)
        >>> bool(np.allclose(stream.predict(X), full.predict(X), rtol=1e-8))
        True
        """
        first = "_ridge_statistics" not in self.__dict__
        alphas = self._check_alphas()
        if alphas.size > 1 and not isinstance(self.alpha, str):
            raise ValueError(
                f"{type(self).__name__}.partial_fit takes one alpha or alpha='auto'; "
                "got "
                f"alpha={_alpha_text(alphas)}. Several alphas are compared by exact "
                "leave-one-out error, which needs every sample's leverage under the "
                "covariance of all batches, i.e. a second pass over the data that "
                "partial_fit does not make. Choose alpha first (fit with an array "
                "of alphas on a subsample, or compare alphas on held-out data) and "
                "stream with that value."
            )
        if self.solver == "dual":
            raise ValueError(
                'partial_fit accumulates the primal statistics; solver="dual" needs '
                'all samples at once. Use solver="auto" or "primal".'
            )
        check_target_shape(y, "y", max_ndim=2)
        X, y = self._validate_tokens(X, y, reset=first)
        y_2d = np.asarray(y.reshape(-1, 1) if y.ndim == 1 else y, dtype=np.float64)
        if not first and self._stream_target_shape != (y.ndim, y_2d.shape[1]):
            raise ValueError(
                f"y has shape {y.shape[1:] or '(n_samples,)'} per batch "
                f"({y.ndim}-D), but the earlier batches of partial_fit had "
                f"{self._stream_target_shape[1]} target(s) in "
                f"{self._stream_target_shape[0]}-D."
            )
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        if first:
            self._reset_stream()
            self._draw_weights(
                check_random_state(self.random_state), X.shape[1], X.shape[2]
            )
        statistics = self._batch_statistics(X, y_2d, sample_weight)
        if first:
            self._ridge_statistics = statistics
            self._stream_target_shape = (y.ndim, y_2d.shape[1])
        else:
            self._ridge_statistics.merge(statistics)
        # The fitted attributes are out of date until the next solve.
        for name in _SOLUTION_ATTRIBUTES:
            self.__dict__.pop(name, None)
        self._clear_device_cache()
        self._stream_alphas = alphas
        self._solution_pending = True
        if solve:
            self.solve()
        return self

    def solve(self):
        """Solve the ridge system of the batches given to :meth:`partial_fit`.

        ``partial_fit`` does this at the end of every call unless it is given
        ``solve=False``; then call this once after the last batch. It sets
        ``coef_``, ``intercept_``, ``alpha_``, ``solver_`` (and ``gcv_mse_``
        with ``alpha="auto"``) from the statistics of all batches so far,
        which it keeps: more batches may follow, and the statistics pickle
        with the model. Calling it again without new batches changes nothing.

        Returns
        -------
        self : object
            The regressor, fitted on all batches so far.

        Raises
        ------
        NotFittedError
            When ``partial_fit`` has not been called since the last ``fit``
            (``fit`` solves by itself).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_attn import RFMLP
        >>> from sklearn_attn.datasets import make_token_regression
        >>> X, y = make_token_regression(
        ...     n_samples=300, n_keys=4, token_dim=4, random_state=0)
        >>> model = RFMLP(n_features=100, alpha=1e-3, random_state=0)
        >>> for batch in np.array_split(np.arange(300), 10):
        ...     model = model.partial_fit(X[batch], y[batch], solve=False)
        >>> hasattr(model, "coef_")
        False
        >>> model.solve().predict(X[:2]).shape
        (2,)
        """
        if "_ridge_statistics" not in self.__dict__:
            raise NotFittedError(
                f"This {type(self).__name__} instance has no batches to solve: "
                "solve() follows partial_fit (fit solves by itself)."
            )
        if self._solution_pending:
            self._solve_statistics(
                self._ridge_statistics,
                self._stream_alphas,
                self._stream_target_shape[0],
            )
            self._solution_pending = False
        return self

    def _batch_statistics(self, X, y, sample_weight=None):
        """The RidgeStatistics of one batch: the random features of ``X``.

        ``X`` is validated token input of the fitted layout (NumPy or CuPy;
        the random weights are drawn), ``y`` of shape ``(n_samples,)`` or
        ``(n_samples, n_targets)``, ``sample_weight`` validated or None.
        Shared by ``partial_fit`` and the dask fit, which merge the batches'
        statistics.
        """
        device = resolve_device(self.device, X)
        y = np.asarray(to_host(y), dtype=np.float64)
        y_2d = y.reshape(y.shape[0], -1)
        xp = device.xp
        with device.activate():
            X_dev = to_device(X, device, dtype=X.dtype)
            X_max = float(xp.abs(X_dev).max()) if X_dev.size else 0.0
            limit = _STREAM_EXPONENT[np.dtype(X_dev.dtype)]
            if X_max and not 2.0**-limit <= X_max <= 2.0**limit:
                raise _out_of_range(
                    self,
                    "partial_fit cannot rescale the batches",
                    X_max,
                    f"(its largest entry must lie between 2^-{limit} and "
                    f"2^{limit}: unlike fit, which rescales all the data by one "
                    "power of two, partial_fit sees one batch at a time)",
                )
            feature_map = self._feature_map(X_dev, device)
            statistics = RidgeStatistics(feature_map.n_features, y_2d.shape[1])
            with np.errstate(over="ignore", invalid="ignore"):  # checked below
                statistics.update(feature_map, y_2d, sample_weight)
            del X_dev, feature_map
        free_device_memory(device)
        sums = (
            statistics.weight_sum,
            statistics.covariance,
            statistics.cross,
            statistics.target_squares,
        )
        if not all(np.isfinite(value).all() for value in sums):
            raise _out_of_range(
                self,
                "the sums of partial_fit overflow float64",
                X_max,
                f"and y up to {float(np.abs(y_2d).max()):.3g}"
                + ("" if sample_weight is None else " (or the weights are huge)"),
            )
        return statistics

    def _reset_stream(self):
        """Forget the state of ``partial_fit`` (``fit`` starts over)."""
        for name in (
            "_ridge_statistics",
            "_stream_target_shape",
            "_stream_alphas",
            "_solution_pending",
        ):
            self.__dict__.pop(name, None)

    def _solve_statistics(self, statistics, alphas, y_ndim):
        """Solve accumulated RidgeStatistics and set the fitted attributes (the
        one-pass routes: ``partial_fit`` and the dask fit). ``alpha="auto"``
        compares its penalties by GCV, which the statistics determine."""
        relative = isinstance(self.alpha, str)
        solution = statistics.solve(
            alphas,
            self.fit_intercept,
            criterion="gcv" if relative else None,
            relative=relative,
            device=resolve_device(self.device),
        )
        self._set_solution(solution, alphas, y_ndim)

    def _scaled_alphas(self, alphas, exponent, xp, X_dev):
        """``(alphas / 2^exponent, coef_exponent)``: the penalties of the
        rescaled problem, and the power of two by which its coefficients are
        too large.

        A penalty below float64's normal range is negligible against the kernel
        (by ~300 orders of magnitude): one becomes 0, the minimum-norm limit;
        several can no longer be compared. One penalty beyond float64's range
        is as far above the kernel: the fit is then the intercept-only limit,
        ``coef = b / alpha`` to first order in ``kernel / alpha`` (exact in
        float64), which is solved with the penalty lowered to ``2^1000`` and
        the coefficients scaled back by the same power of two
        (``coef_exponent``), as ``Ridge`` returns the tiny coefficients.
        """
        with np.errstate(over="ignore", under="ignore"):
            scaled = np.ldexp(alphas, -exponent)
        coef_exponent = 0
        if not np.isfinite(scaled).all():
            if alphas.size > 1:
                raise _out_of_range(
                    self,
                    f"alpha={_alpha_text(alphas)} cannot be compared by leave-one-out",
                    float(xp.abs(X_dev).max()),
                    "(the penalties are beyond 1e300 times the kernel)",
                )
            coef_exponent = int(np.frexp(alphas[0])[1]) - exponent - 1000
            scaled = np.ldexp(alphas, -exponent - coef_exponent)
        negligible = (alphas > 0) & (scaled < np.finfo(np.float64).tiny)
        if negligible.any():
            if alphas.size > 1:
                raise _out_of_range(
                    self,
                    f"alpha={_alpha_text(alphas)} cannot be compared by leave-one-out",
                    float(xp.abs(X_dev).max()),
                    "(the penalties are below 1e-300 times the kernel)",
                )
            scaled = np.zeros_like(scaled)
        return scaled, coef_exponent

    def predict(self, X):
        """Predict with the fitted value vectors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input in the layout seen in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictions, of the float dtype of ``X`` (float32 for float32
            input, as scikit-learn's ``Ridge``; a CuPy array when
            ``device=None`` and ``X`` is one).
        """
        if self.__dict__.get("_solution_pending"):
            raise NotFittedError(
                f"This {type(self).__name__} instance holds batches of "
                "partial_fit(..., solve=False) that are not solved yet: call "
                "solve() before predict."
            )
        feature_map, exponents, device = self._map_for(X)
        xp = device.xp
        with device.activate():
            coef = self._cached_on("coef_", device)
            coef_2d = (
                coef.reshape(coef.shape[0], -1) if coef.ndim == 2 else coef[None, :]
            )
            intercept = xp.asarray(np.atleast_1d(self.intercept_))
            out = xp.empty((feature_map.n_samples, coef_2d.shape[0]))
            all_cols = slice(0, feature_map.n_features)
            for rows in feature_map.row_blocks():
                part = feature_map.compute(rows, all_cols) @ coef_2d.T
                if exponents is not None:
                    with np.errstate(over="ignore", invalid="ignore"):  # see below
                        part = scale_by_power_of_two(
                            part, feature_map.degree * exponents[rows, None], xp
                        )
                        part += intercept
                else:
                    part += intercept
                out[rows] = part
            if exponents is not None and not bool(xp.isfinite(out).all()):
                raise _out_of_range(
                    self,
                    "the predictions overflow float64",
                    float(xp.abs(feature_map.X).max()),
                    "(far beyond the scale of the training data)",
                )
            if feature_map.dtype != out.dtype:
                # As scikit-learn's Ridge: predictions in the input's float dtype
                # (computed in float64 against the float64 coefficients).
                with np.errstate(over="ignore"):
                    narrow = out.astype(feature_map.dtype)
                if not bool(xp.isfinite(narrow).all()):
                    raise _out_of_range(
                        self,
                        f"the predictions overflow {feature_map.dtype}",
                        float(xp.abs(feature_map.X).max()),
                        "(float64 input has a larger range)",
                    )
                out = narrow
        if coef.ndim == 1:
            out = out[:, 0]
        return to_output(out, device)

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the predictions.

        As :meth:`sklearn.base.RegressorMixin.score`, and exact for targets of
        any finite magnitude (its sums of squares are formed on rescaled
        values).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input in the layout seen in ``fit``.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            True targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``predict(X)`` against ``y``.
        """
        return r2_score_at_any_scale(
            to_host(y), to_host(self.predict(X)), sample_weight=sample_weight
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

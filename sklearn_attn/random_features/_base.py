"""What the random-feature transformers and ridge regressors have in common."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._backend import (
    DeviceCacheMixin,
    free_device_memory,
    resolve_device,
    to_device,
    to_output,
)
from .._ridge import fit_ridge
from .._validation import check_sample_weight, check_token_array


class _RandomFeaturesMixin(DeviceCacheMixin):
    """Draw frozen random weights in ``fit`` and build the feature map.

    Subclasses define ``_min_tokens``, ``_draw_weights(random_state, n_tokens,
    token_dim)`` (which sets the public weight attributes, NumPy on the host)
    and ``_feature_map(X_device, device)`` (returning a FeatureBlocks).
    """

    _min_tokens = 2

    def _validate_tokens(self, X, y="no_validation", *, reset):
        return check_token_array(
            self,
            X,
            y,
            reset=reset,
            token_dim=self._token_dim_for(X),
            min_tokens=self._min_tokens,
        )

    def _token_dim_for(self, X):
        return self.token_dim

    def _map_for(self, X):
        """Validate ``X`` for a fitted model and return (feature map, device)."""
        check_is_fitted(self)
        device = resolve_device(self.device, X)
        X = self._validate_tokens(X, reset=False)
        X = to_device(X, device, dtype=X.dtype)
        return self._feature_map(X, device), device


class _RandomFeatureTransformer(
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _RandomFeaturesMixin,
    BaseEstimator,
):
    """Base of the feature transformers (as ``RBFSampler`` is)."""

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the random weights for the token layout of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input; 2-D input needs ``token_dim``.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        X = self._validate_tokens(X, reset=True)
        self._clear_device_cache()
        self._draw_weights(
            check_random_state(self.random_state), X.shape[1], X.shape[2]
        )
        return self

    def transform(self, X):
        """Compute the random features of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, token_dim) or \
                (n_samples, n_tokens * token_dim)
            Token input in the layout seen in ``fit``.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_output_features)
            The features, scaled so that their inner products approach the
            infinite-width kernel as the width grows.
        """
        feature_map, device = self._map_for(X)
        with device.activate():
            out = feature_map.compute(
                slice(0, feature_map.n_samples), slice(0, feature_map.n_features)
            )
        return to_output(out, device)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


_RIDGE_CONSTRAINTS = {
    "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
    "fit_intercept": ["boolean"],
    "solver": [StrOptions({"auto", "primal", "dual"})],
    "token_dim": [Interval(Integral, 1, None, closed="left"), None],
    "random_state": ["random_state"],
    "device": [str, None],
}


class _RandomFeatureRidge(RegressorMixin, _RandomFeaturesMixin, BaseEstimator):
    """Ridge regression on frozen random features, never holding them all."""

    def _check_alphas(self):
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
        alphas = self._check_alphas()
        device = resolve_device(self.device, X)
        X, y = self._validate_tokens(X, y, reset=True)
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        self._draw_weights(
            check_random_state(self.random_state), X.shape[1], X.shape[2]
        )
        self._clear_device_cache()
        y_2d = y.reshape(-1, 1) if y.ndim == 1 else y
        with device.activate():
            solution = fit_ridge(
                self._feature_map(to_device(X, device, dtype=X.dtype), device),
                np.asarray(y_2d, dtype=np.float64),
                alphas,
                sample_weight=sample_weight,
                fit_intercept=self.fit_intercept,
                mode=self.solver,
            )
        # Nothing on the device is referenced any more: give the pool back.
        free_device_memory(device)
        self.coef_ = solution.coef.T if y.ndim == 2 else solution.coef[:, 0]
        self.intercept_ = (
            solution.intercept if y.ndim == 2 else float(solution.intercept[0])
        )
        self.alpha_ = float(alphas[solution.alpha_index])
        self.solver_ = solution.mode
        if solution.loo_mse is not None:
            self.loo_mse_ = solution.loo_mse.mean(axis=1)
            self.best_score_ = -float(self.loo_mse_[solution.alpha_index])
        return self

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
            Predictions (a CuPy array when ``device=None`` and ``X`` is one).
        """
        feature_map, device = self._map_for(X)
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
                out[rows] = feature_map.compute(rows, all_cols) @ coef_2d.T + intercept
        if coef.ndim == 1:
            out = out[:, 0]
        return to_output(out, device)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

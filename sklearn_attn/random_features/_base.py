"""What the random-feature transformers and ridge regressors have in common.

Drawing the frozen weights, validating tokens and building the feature map of
a fitted model (rows of extreme scale computed from ``X / 2^e``), the error
that says why an extreme input is out of range, and the transformers' ``fit``
and ``transform``. The ridge regressors' estimator layer is
:mod:`._regressor`; the two families (attention, MLP) only add their weight
laws and feature maps.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._backend import DeviceCacheMixin, resolve_device, to_device, to_output
from .._scaling import row_exponents, scale_by_power_of_two
from .._validation import check_token_array


class _RandomFeaturesMixin(DeviceCacheMixin):
    """Draw frozen random weights in ``fit`` and build the feature map.

    Subclasses define ``_min_tokens``, ``_draw_weights(random_state, n_tokens,
    token_dim)`` (which sets the public weight attributes, NumPy on the host)
    and ``_feature_map(X_device, device)`` (returning a FeatureBlocks).
    """

    _min_tokens = 2
    # Whether inputs of tiny scale are computed from X / 2^e with e < 0 (see
    # sklearn_attn.random_features._maps); the maps are rescaled down always.
    _scales_up = True

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
        """Validate ``X`` for a fitted model; return (feature map, row exponents,
        device).

        Rows of extreme scale are computed from ``X_n / 2^e_n``: the map then
        holds ``Phi(X_n) / 2^(degree e_n)``, which the caller scales back
        (``exponents`` is None when no row needs it).
        """
        check_is_fitted(self)
        device = resolve_device(self.device, X)
        X = self._validate_tokens(X, reset=False)
        X = to_device(X, device, dtype=X.dtype)
        exponents = row_exponents(X, device.xp)
        if not self._scales_up:
            exponents = device.xp.maximum(exponents, 0)
        if not bool((exponents != 0).any()):
            exponents = None
        return self._feature_map(X, device, exponents), exponents, device


def _alpha_text(alphas):
    return f"{float(alphas[0])!r}" if alphas.size == 1 else f"{alphas.tolist()}"


def _out_of_range(estimator, what, X_max, detail):
    if getattr(estimator, "activation", "relu") == "softmax":
        # Not homogeneous: rescaling X changes the attention weights.
        advice = (
            "Softmax attention weights depend on the scale of X (it acts as an "
            "inverse temperature): standardise the tokens (e.g. divide X by its "
            "largest absolute entry) and set the temperature with qk_std (and "
            "qk_mean_scale)."
        )
    elif getattr(estimator, "qk_bias", False):
        # Homogeneous in [x; 1] only: rescaling X changes the model.
        advice = (
            "With qk_bias=True the scores hold a constant 1 beside the tokens, so "
            "the scale of X changes the model, not only the kernel's scale: "
            "rescale the tokens to a moderate size (e.g. divide X by its largest "
            "absolute entry), or set qk_bias=False for a model whose features "
            "are positively homogeneous in X."
        )
    else:
        advice = (
            "The features are positively homogeneous, so rescaling X changes "
            "nothing but the scale of the kernel: standardise the tokens (e.g. "
            "divide X by its largest absolute entry) and, to fit the same model, "
            "divide alpha by the same factor to the power 2 * degree (6 for "
            "attention features, 2 for MLP features)."
        )
    return ValueError(
        f"{type(estimator).__name__}: {what} for X with entries up to {X_max:.3g} "
        f"in absolute value {detail}. {advice}"
    )


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
        feature_map, exponents, device = self._map_for(X)
        xp = device.xp
        with device.activate():
            out = feature_map.compute(
                slice(0, feature_map.n_samples), slice(0, feature_map.n_features)
            )
            if exponents is not None:
                out = self._scale_back_features(out, exponents, feature_map, xp)
        return to_output(out, device)

    def _scale_back_features(self, scaled, exponents, feature_map, xp):
        """``Phi = scaled * 2^(degree e)`` row by row, or an error where ``Phi``
        leaves the normal range of its dtype (overflow, or a row whose largest
        feature would be a subnormal number, of reduced precision)."""
        shift = feature_map.degree * exponents[:, None]
        with np.errstate(over="ignore", under="ignore"):  # checked just below
            out = scale_by_power_of_two(scaled, shift, xp)
        info = np.finfo(out.dtype)
        row_max = xp.abs(out).max(axis=1)
        lost = (xp.abs(scaled).max(axis=1) > 0) & (row_max < info.tiny)
        overflow = not bool(xp.isfinite(out).all())
        if overflow or bool(lost.any()):
            raise _out_of_range(
                self,
                f"the features are not representable in {out.dtype}",
                float(xp.abs(feature_map.X).max()),
                f"(they {'overflow' if overflow else 'underflow'})"
                + ("; float64 input has a larger range" if info.bits == 32 else ""),
            )
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

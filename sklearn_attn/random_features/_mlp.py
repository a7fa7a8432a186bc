"""The two-layer random-feature MLP baseline on all tokens concatenated."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._base import _RandomFeatureTransformer
from ._maps import MLPMap
from ._regressor import _RIDGE_CONSTRAINTS, _RandomFeatureRidge

_MLP_CONSTRAINTS = {
    "n_features": [Interval(Integral, 1, None, closed="left")],
    "weight_std": [Interval(Real, 0, None, closed="neither"), None],
    "bias": ["boolean"],
}


class _MLPFeaturesMixin:
    """First-layer weights w_m ~ N(0, weight_std^2 I) on u = [vec X; 1]."""

    # The MLP sees vec(X): a single token is fine, and 2-D input without
    # token_dim is read as one token holding all features.
    _min_tokens = 1

    def _token_dim_for(self, X):
        if self.token_dim is None:
            shape = X.shape if hasattr(X, "shape") else np.asarray(X).shape
            if len(shape) == 2:
                # Zero columns: leave the error to the usual validation.
                return max(shape[1], 1)
        return self.token_dim

    def _draw_weights(self, random_state, n_tokens, token_dim):
        n_inputs = n_tokens * token_dim + int(self.bias)
        std = 1.0 / np.sqrt(n_inputs) if self.weight_std is None else self.weight_std
        self.weights_ = std * random_state.standard_normal(
            size=(self.n_features, n_inputs)
        )

    def _feature_map(self, X, device, exponents=None):
        return MLPMap(X, self._cached_on("weights_", device), device, exponents)


class MLPRandomFeatures(_MLPFeaturesMixin, _RandomFeatureTransformer):
    """Random ReLU features of all tokens concatenated (two-layer random features).

    Unit ``m`` computes ``relu(<w_m, u>) / sqrt(M)`` with ``u = vec(X)`` (all
    tokens concatenated, with a trailing 1 when ``bias=True``) and
    ``w_m ~ N(0, weight_std^2 I)`` frozen. Inner products of the features
    converge to :func:`~sklearn_attn.rfmlp_kernel` as ``n_features`` grows.
    Unlike the attention features these depend on the token positions, not only
    on the set of keys.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_features : int, default=100
        Number of hidden units ``M``.
    weight_std : float, default=None
        Standard deviation of the first-layer weights; ``None`` means
        ``1 / sqrt(len(u))``. Without bias it only rescales the features.
    bias : bool, default=False
        Append a constant 1 to ``u`` (a first-layer bias).
    token_dim : int, default=None
        Token dimension when ``X`` is given flattened to 2-D. The MLP only sees
        ``vec(X)``, so 2-D input without it is accepted as one long token.
    random_state : int, RandomState instance or None, default=None
        Seed of the first-layer weights.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute; ``None`` follows the input (see :ref:`devices`).

    Attributes
    ----------
    weights_ : ndarray of shape (n_features, n_inputs)
        The frozen first-layer weights (``n_inputs = n_features_in_ + bias``).
    n_tokens_ : int
        Number of tokens seen in ``fit``.
    token_dim_ : int
        Token dimension seen in ``fit``.
    n_features_in_ : int
        Number of flattened input features.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the flattened features, when ``X`` is a data frame.

    See Also
    --------
    RFMLP : Ridge regression on these features.
    AttentionRandomFeatures : The attention counterpart.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn import MLPRandomFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3, 2))
    >>> MLPRandomFeatures(n_features=8, random_state=0).fit_transform(X).shape
    (5, 8)
    """

    _parameter_constraints = {
        **_MLP_CONSTRAINTS,
        "token_dim": _RIDGE_CONSTRAINTS["token_dim"],
        "random_state": ["random_state"],
        "device": [str, None],
    }

    def __init__(
        self,
        n_features=100,
        *,
        weight_std=None,
        bias=False,
        token_dim=None,
        random_state=None,
        device=None,
    ):
        self.n_features = n_features
        self.weight_std = weight_std
        self.bias = bias
        self.token_dim = token_dim
        self.random_state = random_state
        self.device = device

    @property
    def _n_features_out(self):
        return self.n_features


class RFMLP(_MLPFeaturesMixin, _RandomFeatureRidge):
    """Two-layer random-feature network on all tokens concatenated (the baseline).

    ``f(X) = sum_m a_m relu(<w_m, u>) / sqrt(M)`` with ``u = vec(X)`` and frozen
    ``w_m``; the output weights ``a`` are fitted by ridge regression as in
    :class:`RandomFeatureAttentionRegressor` (also one batch at a time, with
    :meth:`partial_fit`). It sees the tokens by position, so it is not
    invariant to permuting the keys.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_features : int, default=1000
        Number of hidden units. To match the trained parameter count of an RFA
        with ``M`` heads use ``M * (token_dim + 1)``.
    alpha : "auto", float or array-like of shape (n_alphas,), default="auto"
        Ridge penalty, on the kernel scale of the features; ``0`` gives the
        minimum-norm least-squares fit; several positive values are compared by
        exact leave-one-out error. ``"auto"`` compares ``tau * 10^k`` for
        ``k = -6, -5.5, ..., 1`` by generalized cross-validation, ``tau`` the
        mean squared norm of the centred training features (see
        :class:`RandomFeatureAttentionRegressor`).
    weight_std : float, default=None
        Standard deviation of the first-layer weights; ``None`` means
        ``1 / sqrt(len(u))``.
    bias : bool, default=False
        Append a constant 1 to ``u``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    solver : {"auto", "primal", "dual"}, default="auto"
        Primal or dual ridge solver.
    token_dim : int, default=None
        Token dimension when ``X`` is given flattened to 2-D.
    random_state : int, RandomState instance or None, default=None
        Seed of the first-layer weights.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features), dtype float64
        Output weights (including the ``1 / sqrt(M)`` scaling).
    intercept_ : float or ndarray of shape (n_targets,), dtype float64
        Intercept. The fitted attributes are float64 whatever the input dtype
        (the solver works in float64); predictions take the float dtype of
        ``X``.
    alpha_ : float
        The penalty used.
    loo_mse_ : ndarray of shape (n_alphas,)
        Leave-one-out error of each alpha (several alphas only).
    best_score_ : float
        Negative leave-one-out error of ``alpha_`` (several alphas only).
    gcv_mse_ : ndarray of shape (n_alphas,)
        GCV error of each penalty compared (``alpha="auto"`` only).
    solver_ : {"primal", "dual"}
        The solver used.
    weights_ : ndarray of shape (n_features, n_inputs)
        The frozen first-layer weights.
    n_tokens_ : int
        Number of tokens seen in ``fit``.
    token_dim_ : int
        Token dimension seen in ``fit``.
    n_features_in_ : int
        Number of flattened input features.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the flattened features, when ``X`` is a data frame.

    See Also
    --------
    RandomFeatureAttentionRegressor : The attention model it is compared with.
    rfmlp_kernel : The infinite-width limit.

    Examples
    --------
    >>> from sklearn_attn import RFMLP
    >>> from sklearn_attn.datasets import make_token_regression
    >>> X, y = make_token_regression(
    ...     n_samples=200, n_keys=4, token_dim=4, random_state=0)
    >>> RFMLP(n_features=500, random_state=0).fit(X, y).predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints = {**_MLP_CONSTRAINTS, **_RIDGE_CONSTRAINTS}

    def __init__(
        self,
        n_features=1000,
        *,
        alpha="auto",
        weight_std=None,
        bias=False,
        fit_intercept=True,
        solver="auto",
        token_dim=None,
        random_state=None,
        device=None,
    ):
        self.n_features = n_features
        self.alpha = alpha
        self.weight_std = weight_std
        self.bias = bias
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.token_dim = token_dim
        self.random_state = random_state
        self.device = device

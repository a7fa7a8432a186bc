"""Random-feature attention (Fu, Guo, Bai and Mei, 2023): RFA and BiasedRFA."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import _RandomFeatureTransformer
from ._maps import AttentionMap
from ._regressor import _RIDGE_CONSTRAINTS, _RandomFeatureRidge

_QK_CONSTRAINTS = {
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    "activation": [StrOptions({"relu", "softmax"})],
    "qk_mean": [StrOptions({"zero", "identity"})],
    "qk_mean_scale": [Interval(Real, None, None, closed="neither")],
    "qk_std": [Interval(Real, 0, None, closed="left"), None],
    "qk_bias": ["boolean"],
    "value_bias": ["boolean"],
}


class _AttentionFeaturesMixin:
    """Query-key weights W_m = mu I + qk_std G_m and the attention feature map."""

    def _draw_weights(self, random_state, n_tokens, token_dim):
        d = token_dim
        d_qk = d + int(self.qk_bias)
        qk_std = 1.0 / np.sqrt(d) if self.qk_std is None else self.qk_std
        weights = qk_std * random_state.standard_normal(size=(self.n_heads, d_qk, d_qk))
        if self.qk_mean == "identity":
            # The mean on the d x d block: mu <x_0, x_i> in every score.
            weights[:, np.arange(d), np.arange(d)] += self.qk_mean_scale
        self.qk_weights_ = weights

    def _feature_map(self, X, device, exponents=None):
        qk_weights = self._cached_on("qk_weights_", device)
        return AttentionMap(
            X,
            qk_weights,
            self.value_bias,
            device,
            exponents,
            self.activation,
            qk_bias=self.qk_bias,
        )

    @property
    def _scales_up(self):
        # A constant in the scores would overflow as 2^-e on tiny inputs.
        return not self.qk_bias

    @property
    def n_output_features_(self):
        """Number of features: ``n_heads * (token_dim + value_bias)``."""
        return self.n_heads * (self.token_dim_ + int(self.value_bias))


class AttentionRandomFeatures(_AttentionFeaturesMixin, _RandomFeatureTransformer):
    """Random features of a single attention layer with frozen query-key matrices.

    For tokens ``X = [x_0, x_1, ..., x_N]`` (a query ``x_0`` and ``N`` keys in
    ``R^d``) head ``m`` computes

    .. math::

        \\phi_m(X) = \\frac{1}{N\\sqrt{M}} \\sum_{i=1}^{N}
        \\mathrm{relu}(\\langle \\tilde x_0, W_m \\tilde x_i \\rangle)\\, [x_i; 1],
        \\qquad \\tilde x = [x; 1],

    with ``W_m = mu I + qk_std G_m`` of shape ``(d + 1, d + 1)``, ``G_m``
    standard Gaussian and frozen and the mean ``mu I`` on the ``d x d`` block
    (the model of Fu et al.; ``qk_bias=False`` scores ``<x_0, W_m x_i>`` with
    ``d x d`` matrices instead), or, with ``activation="softmax"``, the
    attention weights of a transformer,

    .. math::

        \\phi_m(X) = \\frac{1}{\\sqrt{M}} \\sum_{i=1}^{N}
        \\mathrm{softmax}_i(\\langle \\tilde x_0, W_m \\tilde x_i \\rangle)
        \\, [x_i; 1],

    the softmax taken over the keys. With ReLU the ``1 / sqrt(M)`` scaling makes
    ``transform(X) @ transform(Y).T`` converge to
    :func:`~sklearn_attn.rfa_kernel` (or :func:`~sklearn_attn.brfa_kernel`) as
    ``n_heads`` grows, so ridge penalties mean the same as in kernel ridge; the
    softmax features have no closed-form kernel here.

    The map is computed as large matrix products over chunks of samples and
    blocks of heads, within scikit-learn's ``working_memory``.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_heads : int, default=100
        Number of heads ``M``.
    activation : {"relu", "softmax"}, default="relu"
        How the scores ``<x_0, W_m x_i>`` weight the values ``[x_i; 1]``:
        ``"relu"`` averages ``relu(score) / N`` over the keys (the model of Fu
        et al.); ``"softmax"`` takes the attention weights ``softmax_i(score)``
        over the keys, as a transformer's attention layer does. The softmax
        weights sum to one, so with ``value_bias`` the last feature of every
        head is the constant ``1 / sqrt(M)``, and the scale of ``W_m`` is an
        inverse temperature (see ``qk_std``).
    qk_mean : {"zero", "identity"}, default="zero"
        Mean of the query-key matrices: zero (RFA) or ``qk_mean_scale * I``
        (biased RFA).
    qk_mean_scale : float, default=1.0
        The ``mu`` of the identity mean; ignored for ``qk_mean="zero"``.
    qk_std : float, default=None
        Standard deviation of the entries of ``G_m``; ``None`` means
        ``1 / sqrt(token_dim)``. With ReLU and ``qk_mean="zero"`` it only
        rescales the features; with ReLU and the identity mean only
        ``mu / qk_std`` matters. With softmax the scale of ``W_m`` is
        the inverse temperature of the attention weights: multiplying
        ``qk_std`` (and ``qk_mean_scale``) by ``c`` is the temperature ``1 / c``.
    qk_bias : bool, default=True
        Append a constant 1 to the query and to each key in the scores,
        ``<[x_0; 1], W_m [x_i; 1]>`` with ``(d + 1) x (d + 1)`` matrices ``W_m``
        (the model of Fu et al.). ``False`` scores ``<x_0, W_m x_i>``, linear
        in ``x_0``: by ``relu(u) = (u + |u|) / 2`` every ReLU feature is then a
        linear function of ``x_0`` plus an even one, and the features hold no
        odd function of degree 3 or more of the query-key correlations (see
        the :ref:`user guide <rf_qk_bias>`).
    value_bias : bool, default=True
        Append a constant 1 to each key in the value part, ``[x_i; 1]``.
    token_dim : int, default=None
        Token dimension ``d`` when ``X`` is given flattened to 2-D.
    random_state : int, RandomState instance or None, default=None
        Seed of the query-key matrices.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute; ``None`` follows the input (see :ref:`devices`).

    Attributes
    ----------
    qk_weights_ : ndarray of shape (n_heads, token_dim + qk_bias, token_dim + qk_bias)
        The frozen query-key matrices ``W_m``.
    n_tokens_ : int
        Number of tokens (query and keys) seen in ``fit``.
    token_dim_ : int
        Token dimension seen in ``fit``.
    n_features_in_ : int
        Number of flattened input features, ``n_tokens_ * token_dim_``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the flattened features, when ``X`` is a data frame.

    See Also
    --------
    RandomFeatureAttentionRegressor : Ridge regression on these features.
    MLPRandomFeatures : The two-layer random-feature baseline.

    Examples
    --------
    >>> from sklearn_attn import AttentionRandomFeatures
    >>> from sklearn_attn.datasets import make_token_regression
    >>> X, y = make_token_regression(
    ...     n_samples=20, n_keys=4, token_dim=3, random_state=0)
    >>> X.shape
    (20, 5, 3)
    >>> AttentionRandomFeatures(n_heads=10, random_state=0).fit_transform(X).shape
    (20, 40)
    """

    _parameter_constraints = {
        **_QK_CONSTRAINTS,
        "token_dim": _RIDGE_CONSTRAINTS["token_dim"],
        "random_state": ["random_state"],
        "device": [str, None],
    }

    def __init__(
        self,
        n_heads=100,
        *,
        activation="relu",
        qk_mean="zero",
        qk_mean_scale=1.0,
        qk_std=None,
        qk_bias=True,
        value_bias=True,
        token_dim=None,
        random_state=None,
        device=None,
    ):
        self.n_heads = n_heads
        self.activation = activation
        self.qk_mean = qk_mean
        self.qk_mean_scale = qk_mean_scale
        self.qk_std = qk_std
        self.qk_bias = qk_bias
        self.value_bias = value_bias
        self.token_dim = token_dim
        self.random_state = random_state
        self.device = device

    @property
    def _n_features_out(self):
        return self.n_output_features_


class RandomFeatureAttentionRegressor(_AttentionFeaturesMixin, _RandomFeatureRidge):
    """Random-feature attention (RFA): a single attention layer with frozen
    random query-key matrices and trained value vectors.

    The predictor is

    .. math::

        f(X) = \\sum_{m=1}^{M} \\frac{1}{N} \\sum_{i=1}^{N}
        \\mathrm{relu}(\\langle \\tilde x_0, W_m \\tilde x_i \\rangle)\\,
        \\langle v_m, [x_i; 1] \\rangle / \\sqrt{M},
        \\qquad \\tilde x = [x; 1],

    for a query ``x_0`` and keys ``x_1 .. x_N`` (with ``activation="softmax"``,
    the softmax over the keys of the scores replaces ``relu(.) / N``). The
    ``(d + 1) x (d + 1)`` matrices ``W_m`` are drawn once and frozen
    (``qk_bias=False`` scores ``<x_0, W_m x_i>`` with ``d x d`` ones); the
    value vectors ``v_m`` are fitted by ridge regression (or, with
    ``alpha=0``, minimum-norm least squares). The features
    (:class:`AttentionRandomFeatures`) are never all held in memory: the
    solver streams over blocks of heads (dual, when ``n_samples`` is at most the
    number of features) or of samples (primal). :meth:`partial_fit` fits data
    that do not fit in memory, one batch at a time, from the primal statistics.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_heads : int, default=1000
        Number of heads ``M``; there are ``M (token_dim + 1)`` trained weights.
    alpha : "auto", float or array-like of shape (n_alphas,), default="auto"
        Ridge penalty on the value vectors, on the kernel scale of the
        features (as in ``KernelRidge`` with the infinite-width kernel);
        ``0`` gives the minimum-norm least-squares fit. Several values (all
        positive) are compared by exact leave-one-out error from one
        eigendecomposition, as ``RidgeCV`` does; the best is ``alpha_``.
        ``"auto"`` compares ``tau * 10^k`` for ``k = -6, -5.5, ..., 1`` by
        generalized cross-validation (GCV), with ``tau`` the mean squared norm
        of the centred training features: the best penalty scales with the
        features (as the tokens' norm to the power 6 with ReLU, about the
        power 2 with softmax) and varies with the data
        and width, so no single value works (see
        :ref:`the user guide <rf_default_alpha>`). GCV counts sample weights
        as repeated rows, and the accumulated statistics of :meth:`partial_fit`
        and of a dask fit determine it, so ``"auto"`` chooses the same penalty on
        every route.
    activation : {"relu", "softmax"}, default="relu"
        ReLU of the scores averaged over the keys, or their softmax over the
        keys (see :class:`AttentionRandomFeatures`).
    qk_mean : {"zero", "identity"}, default="zero"
        Mean of the query-key matrices; ``"identity"`` gives :class:`BiasedRFA`.
    qk_mean_scale : float, default=1.0
        The ``mu`` of the identity mean.
    qk_std : float, default=None
        Standard deviation of the random part; ``None`` means
        ``1 / sqrt(token_dim)``. With softmax, the inverse temperature (see
        :class:`AttentionRandomFeatures`).
    qk_bias : bool, default=True
        Append a constant 1 to the query and the keys in the scores (the
        model of Fu et al.); ``False`` scores ``<x_0, W_m x_i>``, whose ReLU
        features miss every odd function of degree 3 or more of the
        correlations (see :class:`AttentionRandomFeatures`).
    value_bias : bool, default=True
        Append a constant 1 to each key in the value part.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    solver : {"auto", "primal", "dual"}, default="auto"
        ``"dual"`` decomposes the ``(n_samples, n_samples)`` Gram matrix,
        ``"primal"`` the ``(n_features, n_features)`` covariance; ``"auto"``
        picks the smaller.
    token_dim : int, default=None
        Token dimension when ``X`` is given flattened to 2-D.
    random_state : int, RandomState instance or None, default=None
        Seed of the query-key matrices.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute; ``None`` follows the input (see :ref:`devices`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features), dtype float64
        Stacked value vectors ``v_m`` (including the ``1 / sqrt(M)`` scaling).
    intercept_ : float or ndarray of shape (n_targets,), dtype float64
        Intercept. The fitted attributes are float64 whatever the input dtype
        (the solver works in float64); predictions take the float dtype of
        ``X``.
    alpha_ : float
        The penalty used (the leave-one-out choice when several are given,
        the GCV choice with ``"auto"``).
    loo_mse_ : ndarray of shape (n_alphas,)
        Weighted leave-one-out mean squared error of each alpha, averaged over
        targets; only when several alphas are compared.
    best_score_ : float
        Negative leave-one-out mean squared error of ``alpha_``; only when
        several alphas are given.
    gcv_mse_ : ndarray of shape (n_alphas,)
        Generalized cross-validation error of each penalty compared, averaged
        over targets; only with ``alpha="auto"``.
    solver_ : {"primal", "dual"}
        The solver used.
    qk_weights_ : ndarray of shape (n_heads, token_dim + qk_bias, token_dim + qk_bias)
        The frozen query-key matrices.
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
    BiasedRFA : The same with identity-mean query-key matrices.
    RFMLP : The two-layer random-feature baseline.
    rfa_kernel : The infinite-head limit of the features' inner products.

    Examples
    --------
    >>> from sklearn_attn import RandomFeatureAttentionRegressor
    >>> from sklearn_attn.datasets import make_token_regression
    >>> X, y = make_token_regression(
    ...     n_samples=200, n_keys=4, token_dim=4, random_state=0)
    >>> model = RandomFeatureAttentionRegressor(n_heads=100, random_state=0).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2,)
    """

    _parameter_constraints = {**_QK_CONSTRAINTS, **_RIDGE_CONSTRAINTS}

    def __init__(
        self,
        n_heads=1000,
        *,
        alpha="auto",
        activation="relu",
        qk_mean="zero",
        qk_mean_scale=1.0,
        qk_std=None,
        qk_bias=True,
        value_bias=True,
        fit_intercept=True,
        solver="auto",
        token_dim=None,
        random_state=None,
        device=None,
    ):
        self.n_heads = n_heads
        self.alpha = alpha
        self.activation = activation
        self.qk_mean = qk_mean
        self.qk_mean_scale = qk_mean_scale
        self.qk_std = qk_std
        self.qk_bias = qk_bias
        self.value_bias = value_bias
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.token_dim = token_dim
        self.random_state = random_state
        self.device = device


class BiasedRFA(RandomFeatureAttentionRegressor):
    """Biased random-feature attention: RFA with identity-mean query-key matrices.

    The same model as :class:`RandomFeatureAttentionRegressor` with
    ``W_m = mu I + qk_std G_m`` by default (``mu = 1``, ``qk_std = 1/sqrt(d)``,
    the identity on the ``d x d`` block of the ``(d + 1) x (d + 1)`` matrix):
    on tokens of norm ``sqrt(d)`` the deterministic part ``mu <x_0, x_i>`` of
    the score is about as large as the random part, so the features are close
    to random-bias ReLUs of the query-key correlation and learn targets built
    from ``<x_0, x_i>`` from fewer samples (Fu et al., 2023). With
    ``activation="softmax"`` the mean makes each head attend more to the keys
    most correlated with the query.

    Read more in the :ref:`User Guide <random_features>`.

    Parameters
    ----------
    n_heads : int, default=1000
        Number of heads.
    alpha : "auto", float or array-like of shape (n_alphas,), default="auto"
        Ridge penalty (see :class:`RandomFeatureAttentionRegressor`).
    activation : {"relu", "softmax"}, default="relu"
        ReLU of the scores averaged over the keys, or their softmax over the
        keys (see :class:`AttentionRandomFeatures`).
    qk_mean : {"zero", "identity"}, default="identity"
        Mean of the query-key matrices.
    qk_mean_scale : float, default=1.0
        The ``mu`` of the identity mean.
    qk_std : float, default=None
        Standard deviation of the random part; ``None`` means
        ``1 / sqrt(token_dim)``. With softmax, the inverse temperature (see
        :class:`AttentionRandomFeatures`).
    qk_bias : bool, default=True
        Append a constant 1 to the query and the keys in the scores (the
        model of Fu et al.); ``False`` scores ``<x_0, W_m x_i>``, whose ReLU
        features miss every odd function of degree 3 or more of the
        correlations (see :class:`AttentionRandomFeatures`).
    value_bias : bool, default=True
        Append a constant 1 to each key in the value part.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    solver : {"auto", "primal", "dual"}, default="auto"
        Primal or dual ridge solver.
    token_dim : int, default=None
        Token dimension when ``X`` is given flattened to 2-D.
    random_state : int, RandomState instance or None, default=None
        Seed of the query-key matrices.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features), dtype float64
        Stacked value vectors.
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
    qk_weights_ : ndarray of shape (n_heads, token_dim + qk_bias, token_dim + qk_bias)
        The frozen query-key matrices.
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
    RandomFeatureAttentionRegressor : Zero-mean query-key matrices.
    brfa_kernel : The infinite-head limit.

    Examples
    --------
    >>> from sklearn_attn import BiasedRFA
    >>> from sklearn_attn.datasets import make_token_regression
    >>> X, y = make_token_regression(
    ...     n_samples=200, n_keys=4, token_dim=4, target="correlation", random_state=0)
    >>> BiasedRFA(n_heads=100, random_state=0).fit(X, y).qk_weights_.shape
    (100, 5, 5)
    """

    def __init__(
        self,
        n_heads=1000,
        *,
        alpha="auto",
        activation="relu",
        qk_mean="identity",
        qk_mean_scale=1.0,
        qk_std=None,
        qk_bias=True,
        value_bias=True,
        fit_intercept=True,
        solver="auto",
        token_dim=None,
        random_state=None,
        device=None,
    ):
        super().__init__(
            n_heads,
            alpha=alpha,
            activation=activation,
            qk_mean=qk_mean,
            qk_mean_scale=qk_mean_scale,
            qk_std=qk_std,
            qk_bias=qk_bias,
            value_bias=value_bias,
            fit_intercept=fit_intercept,
            solver=solver,
            token_dim=token_dim,
            random_state=random_state,
            device=device,
        )

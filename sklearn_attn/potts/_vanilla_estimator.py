"""VanillaAttentionPseudoLikelihood: vanilla self-attention on masked tokens."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._backend import (
    DeviceCacheMixin,
    chunk_bytes,
    free_device_memory,
    resolve_device,
    to_device,
    to_host,
)
from ._sequence_model import _SequenceModelMixin
from ._vanilla import VanillaAttention

_LBFGS_HISTORY = 10
# Intermediates of one block of sequences on the CPU (the backend's size on a GPU).
_BLOCK_BYTES = 2 * 2**20

# Fitted attribute of each part of the parameter vector.
_ATTRIBUTES = {
    "token": "token_embedding_",
    "mask": "mask_embedding_",
    "position": "position_embedding_",
    "query": "query_weights_",
    "key": "key_weights_",
    "value": "value_weights_",
    "output": "output_weights_",
    "bias": "output_bias_",
}


class VanillaAttentionPseudoLikelihood(
    _SequenceModelMixin, DeviceCacheMixin, DensityMixin, BaseEstimator
):
    """One layer of vanilla self-attention trained by masked-token prediction.

    The baseline of factored attention
    (:class:`~sklearn_attn.PottsPseudoLikelihood`): tokens and positions share
    one representation, ``x_j = E[s_j] + P[j]`` in
    ``R^d``; to predict site ``i`` its token is replaced by a learned mask
    embedding, ``x_i = m + P[i]``, and one softmax attention layer with a
    residual connection gives the logits of the ``q`` states,

    .. math::

        a_{ij} &= \\mathrm{softmax}_j\\Big(\\frac{\\langle x_i W_Q,
            x_j W_K \\rangle}{\\sqrt{d}}\\Big), \\\\
        p(s_i = a \\mid s_{-i}) &= \\mathrm{softmax}_a\\Big(\\big(x_i +
            \\sum_j a_{ij} x_j W_V\\big) W_O + b\\Big)_a .

    The attention weights depend on the tokens, and what a site sends mixes
    its token with its position, so one such layer does not represent a
    generalized Potts model in general; factored attention (attention from
    positions only, values from tokens only) does, exactly (Rende, Gerace,
    Laio and Goldt, 2024). All ``L`` sites of every sequence are predicted
    (the pseudo-likelihood), with the objective of
    :class:`~sklearn_attn.PottsPseudoLikelihood` in its units,

    .. math::

        f = -\\sum_s w_s \\sum_i \\log p(s_i \\mid s_{-i})
            + \\frac{\\alpha}{2} \\lVert \\theta \\rVert^2

    (``theta`` every parameter but the output bias ``b``), minimised by
    L-BFGS on analytic gradients from ``n_init`` random starts. Computed in
    float64.

    Read more in the :ref:`User Guide <potts>`.

    Parameters
    ----------
    embedding_dim : int, default=None
        Width ``d`` of the representation (and of the queries, keys and
        values). ``None`` uses ``n_sites + n_states``: room for positions and
        tokens in orthogonal subspaces, where the layer can do everything
        one head of factored softmax attention does.
    alphabet : str, default="protein"
        As in :class:`~sklearn_attn.PottsPseudoLikelihood`.
    unknown_letters : {"drop", "gap", "error"}, default="drop"
        As in :class:`~sklearn_attn.PottsPseudoLikelihood`.
    states : "auto" or array-like of shape (n_states,), default="auto"
        As in :class:`~sklearn_attn.PottsPseudoLikelihood`.
    alpha : float, default=0.01
        Penalty ``alpha`` on the parameters, in the objective's units (a sum
        over sequences).
    sequence_identity : float in (0, 1], default=None
        As in :class:`~sklearn_attn.PottsPseudoLikelihood`.
    max_iter : int, default=500
        Maximum number of L-BFGS iterations per start.
    tol : float, default=1e-7
        Stop when the relative decrease of the objective falls below ``tol``
        on two iterations in a row, or the largest gradient entry of the
        per-site mean objective falls below ``tol``.
    n_init : int, default=1
        Number of random starts; the one with the lowest objective is kept.
    random_state : int, RandomState instance or None, default=None
        Seed of the starts.
    verbose : int, default=0
        Print the objective every ``verbose`` iterations.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute the objective, its gradient and the predictions (see
        :ref:`devices`); ``None`` follows the input. The optimiser's state
        stays on the host.

    Attributes
    ----------
    states_ : ndarray of shape (n_states,)
        The states, as in :class:`~sklearn_attn.PottsPseudoLikelihood`.
    n_sites_ : int
        Alignment length ``L``.
    embedding_dim_ : int
        The width ``d`` used (``embedding_dim`` below).
    token_embedding_ : ndarray of shape (n_states, embedding_dim)
        ``E``.
    mask_embedding_ : ndarray of shape (embedding_dim,)
        ``m``.
    position_embedding_ : ndarray of shape (n_sites, embedding_dim)
        ``P``.
    query_weights_, key_weights_, value_weights_ : ndarray of shape \
            (embedding_dim, embedding_dim)
        ``W_Q``, ``W_K``, ``W_V``.
    output_weights_ : ndarray of shape (embedding_dim, n_states)
        ``W_O``.
    output_bias_ : ndarray of shape (n_states,)
        ``b``.
    n_eff_ : float
        Sum of the weights the fit used.
    n_sequences_dropped_ : int
        Sequences left out for letters outside the alphabet.
    objective_ : float
        The objective at the kept start's solution.
    init_objectives_ : ndarray of shape (n_init,)
        The objective at the end of each start.
    best_init_ : int
        Index of the kept start.
    n_iter_ : int
        L-BFGS iterations of the kept start. A kept start that stops at
        ``max_iter`` emits a :class:`~sklearn.exceptions.ConvergenceWarning`.
    loss_curve_ : list of float
        The objective after each iteration of the kept start.
    n_features_in_ : int
        Equal to ``n_sites_``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of ``X``; defined only when they are all strings.

    See Also
    --------
    sklearn_attn.PottsPseudoLikelihood : Factored self-attention, or the full
        plmDCA model.
    sklearn_attn.datasets.make_potts_sequences : Samples from a planted model.

    Notes
    -----
    The ``L`` masked copies of a sequence share their unmasked sites, so one
    forward pass computes their keys and values once; only the masked site's
    query, key and value (which depend on its position alone) differ. The
    cost per sequence is about ``L^2 d`` for the scores and the weighted
    values and ``L d^2`` for the projections.

    References
    ----------
    R. Rende, F. Gerace, A. Laio and S. Goldt, "Mapping of attention mechanisms
    to a generalized Potts model", Phys. Rev. Research 6, 023057 (2024),
    arXiv:2304.07235.

    Examples
    --------
    >>> from sklearn_attn.potts import VanillaAttentionPseudoLikelihood
    >>> from sklearn_attn.datasets import make_potts_sequences
    >>> X, _ = make_potts_sequences(
    ...     n_samples=300, n_sites=6, n_states=4, random_state=0)
    >>> model = VanillaAttentionPseudoLikelihood(
    ...     embedding_dim=8, tol=1e-4, random_state=0).fit(X)
    >>> model.predict_proba(X[:2]).shape
    (2, 6, 4)
    >>> bool(model.score(X) < 0)
    True
    """

    _parameter_constraints = {
        "embedding_dim": [Interval(Integral, 1, None, closed="left"), None],
        "alphabet": [str],
        "unknown_letters": [StrOptions({"drop", "gap", "error"})],
        "states": [StrOptions({"auto"}), "array-like"],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "sequence_identity": [Interval(Real, 0, 1, closed="right"), None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "device": [str, None],
    }

    def __init__(
        self,
        embedding_dim=None,
        *,
        alphabet="protein",
        unknown_letters="drop",
        states="auto",
        alpha=0.01,
        sequence_identity=None,
        max_iter=500,
        tol=1e-7,
        n_init=1,
        random_state=None,
        verbose=0,
        device=None,
    ):
        self.embedding_dim = embedding_dim
        self.alphabet = alphabet
        self.unknown_letters = unknown_letters
        self.states = states
        self.alpha = alpha
        self.sequence_identity = sequence_identity
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    def _layer(self):
        return VanillaAttention(self.n_sites_, self.states_.size, self.embedding_dim_)

    @staticmethod
    def _block_rows(layer, xp):
        """Sequences per block: about ``5 L^2 + 8 L q`` float64 numbers of
        intermediates each, in blocks that stay in a CPU's cache (the passes
        over them are memory-bound) and fill a GPU."""
        L, q = layer.n_sites, layer.n_states
        per_row = 8 * (5 * L * L + 8 * L * q)
        return max(1, chunk_bytes(xp, _BLOCK_BYTES) // per_row)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the layer by minimising the penalised pseudo-likelihood objective.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Integer state codes or aligned sequences, in any form
            :meth:`PottsPseudoLikelihood.fit
            <sklearn_attn.PottsPseudoLikelihood.fit>` accepts. ``X`` is not
            modified.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sequence weights; when ``None`` and
            ``sequence_identity`` is set, identity-based weights are computed.

        Returns
        -------
        self : object
            The fitted model.

        Warns
        -----
        ConvergenceWarning
            When the kept start stops at ``max_iter`` before reaching ``tol``.
        """
        device = resolve_device(self.device, X)
        codes, dropped = self._encode(to_host(X), reset=True)
        self._clear_device_cache()
        self.n_sites_ = codes.shape[1]
        codes, weights = self._fit_weights(codes, dropped, sample_weight)
        self.embedding_dim_ = int(
            self.n_sites_ + self.states_.size
            if self.embedding_dim is None
            else self.embedding_dim
        )
        layer = self._layer()
        rng = check_random_state(self.random_state)
        # All starts drawn first: start k is the same whatever the others do.
        starts = [layer.initial(rng) for _ in range(self.n_init)]
        xp = device.xp
        with device.activate():
            rows = self._block_rows(layer, xp)
            codes_dev = to_device(codes, device)
            weights_dev = to_device(weights, device)
            blocks = [
                (codes_dev[k : k + rows], weights_dev[k : k + rows])
                for k in range(0, codes.shape[0], rows)
            ]
            runs = [
                self._minimize(layer, blocks, start, float(weights.sum()), device)
                for start in starts
            ]
            del blocks, codes_dev, weights_dev
        free_device_memory(device)
        run = self._keep_best_run(runs)
        for name, part in layer.split(run["theta"]).items():
            setattr(self, _ATTRIBUTES[name], part.copy())
        return self

    def _minimize(self, layer, blocks, start, weight_sum, device):
        """One L-BFGS run on the per-site mean objective, from ``start``."""
        xp = device.xp
        # Tolerances then mean the same at any size, as PottsPseudoLikelihood's.
        scale = weight_sum * layer.n_sites

        def fun(theta):
            value, grad = layer.objective(
                to_device(theta, device), blocks, self.alpha, xp
            )
            return value / scale, to_host(grad) / scale

        run = self._lbfgs_run(fun, start, scale, history=_LBFGS_HISTORY)
        run["theta"] = np.asarray(run["theta"], dtype=np.float64)
        return run

    def _log_conditionals(self, X):
        """``(log_p, codes, device)``, the first two on the compute device."""
        check_is_fitted(self)
        device = resolve_device(self.device, X)
        codes, _ = self._encode(to_host(X), reset=False)
        layer = self._layer()
        xp = device.xp
        theta = layer.join(
            {name: getattr(self, attribute) for name, attribute in _ATTRIBUTES.items()}
        )
        with device.activate():
            codes = to_device(codes, device)
            theta = to_device(theta, device)
            rows = self._block_rows(layer, xp)
            parts = [
                layer.log_conditionals(theta, codes[k : k + rows], xp)
                for k in range(0, codes.shape[0], rows)
            ]
            log_p = xp.concatenate(parts)
        return log_p, codes, device

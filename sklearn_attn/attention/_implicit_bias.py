"""Implicit bias of gradient descent on a one-layer softmax attention classifier.

The classifier (Tarzanagh et al., 2023; Sheen, Chen, Wang and Zhou, 2024) reads
a sequence of tokens ``X_i`` (``T x d``) with a query ``z_i`` and a fixed value
head ``v``:

.. math::

    \\Phi(X_i, z_i) = v^T X_i^T \\operatorname{softmax}(X_i W z_i),

with ``W = K Q^T`` trained as separate key and query matrices, or ``W``
trained directly (combined), on the exponential loss ``exp(-y Phi)`` or the
logistic loss ``log(1 + exp(-y Phi))``, averaged over the sequences. With
``v`` fixed the loss is smallest when all attention sits on the optimal token
``opt_i = argmax_t y_i v^T x_{i,t}``; the infimum ``L*`` is reached only as
``||W|| -> infinity``, and the direction ``W / ||W||`` then tends to a
max-margin solution (:func:`~._max_margin.max_margin_svm`): Frobenius norm for
the combined ``W``, nuclear norm for ``(K, Q)``, l2 / l1 for diagonal weights.

Seeing that limit needs score gaps far beyond the range of ``exp`` in float64,
so everything is computed in the log domain:

* with ``gamma_it = y_i v^T x_it`` and ``g_it = gamma_i,opt - gamma_it >= 0``,
  ``y_i Phi_i = gamma_i,opt - e_i`` where ``e_i = sum_t S_it g_it`` is formed
  from ``log S`` by a log-sum-exp, never as a difference of nearly equal
  numbers; the excess loss is ``mean_i e^{-gamma_opt} expm1(e_i)``
  (exponential) or ``mean_i log1p(sigmoid(-gamma_opt) expm1(e_i))``
  (logistic), reported as ``log10`` (down to ``-1e5`` and beyond);
* the gradient with respect to ``W`` is ``-exp(lambda) G`` with ``G`` of order
  one: the largest ``log l'_i + log S_it`` is pulled out as ``lambda``, so the
  direction stays exact after every ``S_it`` (``t != opt``) has underflowed.
  Normalised gradient descent only needs ``G``; plain gradient descent
  multiplies by ``exp(lambda)`` and stalls, as it really does, once that
  underflows. One case escapes this: a sequence whose attention has
  saturated on a non-optimal token ``a`` while another non-optimal token
  ``t`` has the same score (``scores="equal"`` data) has ``e_i - g_it = 0``
  to rounding, so the largest weight may multiply a zero; ``G`` then holds
  only what the rounding of the scores leaves, and may vanish (the weights
  stop moving). The selection of such a run is settled by then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from .._backend import resolve_device, to_device, to_host
from ._max_margin import _check_problem, max_margin_svm

__all__ = [
    "AttentionTrainingResult",
    "train_attention_classifier",
]

_LN10 = np.log(10.0)
# Below log(x) = -15 the Taylor forms log(expm1(x)) = log x + x / 2 and
# log(log1p(x)) = log x - x / 2 are exact to 1e-13 and avoid log(0).
_TAYLOR_LOG = -15.0
# "relative_gd" grows ||params|| geometrically; past _RESCALE_AT every parameter
# array is divided by _RESCALE_BY (W by its square for K Q^T). W's scores are
# then >= 1e25 times its margins: the attention is a hard max far below float64
# resolution (exp underflows at a gap of 745), where the normalised direction
# depends on W's direction only, so the path is unchanged while W and its
# squared entries stay far from overflow. The factor removed is kept as
# log10_scale.
_RESCALE_AT = 1e50
_RESCALE_BY = 1e25


# -- log-domain loss and gradient ------------------------------------------------------
class _Problem:
    """Device copies of a batch of problems and the quantities fixed by the data."""

    def __init__(self, X, z, y, v, device):
        xp = device.xp
        B, n, T, d = X.shape
        gamma = y[:, :, None] * np.einsum("bntd,bd->bnt", X, v)
        opt = np.argmax(gamma, axis=2)
        gamma_opt = np.take_along_axis(gamma, opt[:, :, None], axis=2)
        gap = gamma_opt - gamma  # >= 0, zero at opt
        not_opt = np.ones((B, n, T), dtype=bool)
        np.put_along_axis(not_opt, opt[:, :, None], False, axis=2)
        with np.errstate(divide="ignore"):
            log_gap = np.where(not_opt & (gap > 0), np.log(gap), -np.inf)
        self.xp, self.n = xp, n
        self.X, self.z = to_device(X, device), to_device(z, device)
        self.gamma_opt = to_device(gamma_opt[:, :, 0], device)
        self.gap = to_device(gap, device)
        self.log_gap = to_device(log_gap, device)
        self.opt_mask = to_device(~not_opt, device)


def _logsumexp(xp, a, axis, all_finite=False):
    """``log(sum(exp(a)))`` along ``axis``; ``a`` may hold ``-inf``."""
    top = a.max(axis=axis, keepdims=True)
    if not all_finite:
        top = xp.where(xp.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # all -inf: the sum is 0, the result -inf
        total = xp.log(xp.exp(a - top).sum(axis=axis, keepdims=True))
    return (top + total).squeeze(axis)


def _attention_terms(W, prob, structure, gain=None):
    """``log S`` (B, n, T) and ``e_i = sum_t S_it g_it`` as ``(log e, e)``.

    ``gain`` (B,): the weights are ``gain * W`` with the attention already a
    hard max at ``W``, where ``log S_it`` of every token but the dominant one
    is linear in the scale (and that of the dominant one is 0 in float64).
    """
    xp = prob.xp
    if structure == "full":
        Wz = xp.matmul(prob.z, xp.swapaxes(W, 1, 2))  # row i is W z_i
    else:
        Wz = W[:, None, :] * prob.z
    scores = xp.matmul(prob.X, Wz[..., None])[..., 0]
    log_attn = scores - _logsumexp(xp, scores, 2, all_finite=True)[..., None]
    if gain is not None:
        dominant = log_attn == log_attn.max(axis=2, keepdims=True)
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = gain[:, None, None] * log_attn
        log_attn = xp.where(dominant | (gain[:, None, None] == 1), log_attn, scaled)
    log_e = _logsumexp(xp, log_attn + prob.log_gap, 2)
    return log_attn, log_e, xp.exp(log_e)


def _log_loss_derivative(prob, e, loss):
    """``log |l'(m_i)|`` at the margin ``m_i = y_i Phi_i = gamma_opt - e_i``."""
    if loss == "exponential":
        return e - prob.gamma_opt
    return -prob.xp.logaddexp(0.0, prob.gamma_opt - e)


def _descent_direction(W, prob, structure, loss):
    """``(G, log_scale)`` with ``-grad_W L = exp(log_scale) * G``, ``G`` of order 1.

    ``-grad_W L = (1/n) sum_{i,t} l'_i S_it (e_i - g_it) x_it z_i^T`` with
    ``l'_i = |l'(y_i Phi_i)|`` (as ``y_i (u_it - Phi_i) = e_i - g_it``). The
    coefficients of each sequence sum to zero, so the one of its currently
    dominant token ``a_i = argmax_t S_it`` is formed as minus the sum of the
    others, each of which is ``exp(log l'_i + log S_it - log_scale)`` times an
    order-one difference: nothing cancels, and nothing underflows that
    matters, however saturated the attention (on the optimal token or not).
    """
    xp = prob.xp
    log_attn, _, e = _attention_terms(W, prob, structure)
    tokens = xp.arange(log_attn.shape[2])
    dominant = tokens == xp.argmax(log_attn, axis=2)[..., None]
    log_weight = _log_loss_derivative(prob, e, loss)[..., None] + log_attn
    log_weight = xp.where(dominant, -xp.inf, log_weight)
    log_scale = log_weight.max(axis=(1, 2))
    coef = xp.exp(log_weight - log_scale[:, None, None]) * (e[..., None] - prob.gap)
    coef = coef - dominant * coef.sum(axis=2, keepdims=True)
    per_sample = xp.matmul(coef[:, :, None, :], prob.X)[:, :, 0, :]  # (B, n, d)
    if structure == "full":
        G = xp.matmul(xp.swapaxes(per_sample, 1, 2), prob.z)
    else:
        G = (per_sample * prob.z).sum(axis=1)
    return G, log_scale - np.log(prob.n)


def _log10_excess_loss(W, prob, structure, loss, gain=None):
    """``log10(L(gain W) - L*)`` per problem, and ``min_i S_{i,opt_i}``."""
    xp = prob.xp
    log_attn, log_e, e = _attention_terms(W, prob, structure, gain)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_expm1 = xp.where(log_e < _TAYLOR_LOG, log_e + e / 2, xp.log(xp.expm1(e)))
        if loss == "exponential":
            log_excess = log_expm1 - prob.gamma_opt
        else:
            log_c = log_expm1 - xp.logaddexp(0.0, prob.gamma_opt)
            c = xp.exp(log_c)
            log_excess = xp.where(
                log_c < _TAYLOR_LOG, log_c - c / 2, xp.log(xp.log1p(c))
            )
    log10_excess = (_logsumexp(xp, log_excess, 1) - np.log(prob.n)) / _LN10
    opt_attention = xp.exp(xp.where(prob.opt_mask, log_attn, -xp.inf).max(axis=2))
    return log10_excess, opt_attention.min(axis=1)


# -- parametrizations ------------------------------------------------------------------
def _initial_params(rng, B, d, parametrization, structure, init_scale):
    """Independent Gaussian entries, drawn problem by problem (so problem ``b``
    starts from the same point whatever the batch size)."""
    shape = (d, d) if structure == "full" else (d,)
    count = 2 if parametrization == "separate" else 1
    draws = [
        [init_scale * rng.standard_normal(shape) for _ in range(count)]
        for _ in range(B)
    ]
    return [np.stack([draw[k] for draw in draws]) for k in range(count)]


def _aligned_params(rng, bases, parametrization, init_scale):
    """``K = U diag(kappa)``, ``Q = V diag(rho)`` (or ``W = U diag(omega) V^T``).

    ``bases = (U, V)``, each of shape (B, d, d) with orthonormal columns. The
    diagonals are the absolute values of independent ``N(0, d init_scale^2)``
    draws, so that ``||K||_F`` has the same mean square as in the random start,
    drawn problem by problem like :func:`_initial_params`. They are positive:
    ``W = U diag(kappa * rho) V^T`` is then a singular value decomposition,
    with the reference's singular vector pairs ``(u_j, v_j)`` themselves (a
    negative product would pair ``u_j`` with ``-v_j``). The right
    factor shared by ``K`` and ``Q`` is the identity: ``(K R, Q R)`` with ``R``
    orthogonal give the same ``W = K Q^T`` and, gradient and step norms being
    invariant under it, the same path of ``W``.
    """
    U, V = bases
    B, d, _ = U.shape
    count = 2 if parametrization == "separate" else 1
    scale = init_scale * np.sqrt(d)
    diagonals = np.stack(
        [
            [scale * np.abs(rng.standard_normal(d)) for _ in range(count)]
            for _ in range(B)
        ]
    )  # (B, count, d)
    if parametrization == "separate":
        return [U * diagonals[:, 0, None, :], V * diagonals[:, 1, None, :]]
    return [np.matmul(U * diagonals[:, 0, None, :], np.swapaxes(V, 1, 2))]


def _reference_weights(init_basis, X, z, y, v, loss, batched):
    """The matrices whose singular vectors an aligned start takes, (B, d, d)."""
    B, _, _, d = X.shape
    if isinstance(init_basis, str):
        if init_basis == "nuclear_svm":
            return np.stack(
                [
                    max_margin_svm(
                        X[b], z[b], y[b], v[b], norm="nuclear", random_state=0
                    )[0]
                    for b in range(B)
                ]
            )
        # The descent direction at W = 0 (uniform attention): the data's
        # feature matrix sum_{i,t} c_it (x_it - x_i,opt) z_i^T that drives the
        # early, nearly linear phase of training.
        prob = _Problem(X, z, y, v, resolve_device("cpu"))
        G, _ = _descent_direction(np.zeros((B, d, d)), prob, "full", loss)
        return G
    W_ref = np.asarray(init_basis, dtype=np.float64)
    expected = (B, d, d) if batched else (d, d)
    if W_ref.shape != expected:
        raise ValueError(
            f"init_basis must be 'nuclear_svm', 'gradient' or an array of shape "
            f"{expected}; got an array of shape {W_ref.shape}."
        )
    if not np.all(np.isfinite(W_ref)):
        raise ValueError("init_basis contains NaN or infinity.")
    return W_ref.reshape(B, d, d)


def _singular_bases(W_ref):
    """``(U, V)`` of ``W_ref = U diag(s) V^T``, complete orthonormal bases."""
    U, _, Vt = np.linalg.svd(W_ref)
    return U, np.swapaxes(Vt, 1, 2)


def _weights(params, structure, xp):
    if len(params) == 1:
        return params[0]
    K, Q = params
    return xp.matmul(K, xp.swapaxes(Q, 1, 2)) if structure == "full" else K * Q


def _param_directions(G, params, structure, xp):
    """Descent directions of the parameters from that of ``W`` (chain rule)."""
    if len(params) == 1:
        return [G]
    K, Q = params
    if structure == "full":  # W = K Q^T: dL/dK = dL/dW Q, dL/dQ = dL/dW^T K
        return [xp.matmul(G, Q), xp.matmul(xp.swapaxes(G, 1, 2), K)]
    return [G * Q, G * K]


# -- results ---------------------------------------------------------------------------
@dataclass
class AttentionTrainingResult:
    """Checkpoints of a run of :func:`train_attention_classifier`.

    With batched input (``n_problems`` independent problems) every array has a
    leading ``n_problems`` axis.

    Attributes
    ----------
    iterations : ndarray of shape (n_checkpoints,)
        Iteration counts of the checkpoints (0 is the initialisation).
    W : ndarray of shape (n_checkpoints, dim, dim)
        The attention weights ``K Q^T`` (or ``W``; ``diag(w)`` when diagonal),
        divided by ``10 ** log10_scale``.
    log10_scale : ndarray of shape (n_checkpoints,)
        ``log10`` of the factor removed from ``W`` by the rescaling of
        ``"relative_gd"`` (0 otherwise): directions, correlations and
        ``norm / margin`` ratios are unaffected, norms and margins are those
        of the rescaled ``W``.
    log10_excess_loss : ndarray of shape (n_checkpoints,)
        ``log10(L - L*)`` at the actual (not rescaled) weights, computed in
        the log domain; ``-inf`` once even its logarithm is beyond float64.
    opt_attention : ndarray of shape (n_checkpoints,)
        Smallest attention on the optimal token over the sequences (tends to 1).
    margin : ndarray of shape (n_checkpoints,)
        ``min_{i, t != opt_i} (x_opt - x_t)^T W z_i``.
    frobenius_norm, nuclear_norm : ndarray of shape (n_checkpoints,)
        Norms of ``W``; divided by ``margin`` they are comparable with the
        values of :func:`max_margin_svm` (l2 and l1 for diagonal ``W``).
    singular_values : ndarray of shape (n_checkpoints, dim)
        Singular values of ``W``, largest first.
    selected_tokens : ndarray of shape (n_samples,)
        Token of largest attention in each sequence at the last checkpoint.
        Equal to ``opt`` when the loss tends to its infimum; otherwise the
        run converges to a locally optimal selection, and
        ``max_margin_svm(..., opt=selected_tokens)`` is its reference
        (the protocol of Tarzanagh et al.).
    params : dict
        Final parameters: ``{"K", "Q"}`` (separate) or ``{"W"}`` (combined),
        vectors ``k, q`` or ``w`` for diagonal weights (rescaled like ``W``).
    parametrization, structure, loss, optimizer, init : str
    learning_rate : float
    """

    iterations: np.ndarray
    W: np.ndarray
    log10_scale: np.ndarray
    log10_excess_loss: np.ndarray
    opt_attention: np.ndarray
    margin: np.ndarray
    frobenius_norm: np.ndarray
    nuclear_norm: np.ndarray
    singular_values: np.ndarray
    selected_tokens: np.ndarray
    params: dict = field(default_factory=dict)
    parametrization: str = "separate"
    structure: str = "full"
    loss: str = "exponential"
    optimizer: str = "normalized_gd"
    learning_rate: float = 0.0
    init: str = "random"

    def correlation(self, W_ref):
        """``<W(t), W_ref> / (||W(t)||_F ||W_ref||_F)`` at every checkpoint.

        Parameters
        ----------
        W_ref : array-like of shape (dim, dim), or (n_problems, dim, dim)
            A reference, e.g. a :func:`max_margin_svm` solution (one per
            problem for a batched run).

        Returns
        -------
        corr : ndarray of shape (n_checkpoints,) or (n_problems, n_checkpoints)
        """
        W_ref = np.asarray(W_ref, dtype=np.float64)
        if W_ref.shape[-2:] != self.W.shape[-2:] or W_ref.ndim != self.W.ndim - 1:
            raise ValueError(
                f"W_ref must have shape {self.W.shape[:-3] + self.W.shape[-2:]}; "
                f"got {W_ref.shape}."
            )
        inner = np.einsum("...cij,...ij->...c", self.W, W_ref)
        norms = self.frobenius_norm * np.linalg.norm(W_ref, axis=(-2, -1))[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            return inner / norms


def _checkpoint_iterations(checkpoints, n_iter):
    if isinstance(checkpoints, Integral):
        if checkpoints < 2:
            raise ValueError(f"checkpoints must be at least 2; got {checkpoints}.")
        grid = np.geomspace(1, max(n_iter, 1), checkpoints - 1)
        its = np.concatenate([[0], np.round(grid)]).astype(int)
    else:
        its = np.asarray(checkpoints)
        if its.ndim != 1 or not np.issubdtype(its.dtype, np.integer):
            raise ValueError(
                "checkpoints must be an int or a 1-D array of iteration numbers; "
                f"got {checkpoints!r}."
            )
        if its.size and (its.min() < 0 or its.max() > n_iter):
            raise ValueError(f"checkpoints must lie in [0, n_iter={n_iter}].")
    return np.unique(its[its <= n_iter])


def _summaries(W, X, z, opt):
    """Margins (B, C), Frobenius and nuclear norms (B, C), singular values."""
    B, n, T, _ = X.shape
    diff = np.take_along_axis(X, opt[:, :, None, None], axis=2) - X
    Wz = np.einsum("bcde,bne->bcnd", W, z)
    values = np.einsum("bntd,bcnd->bcnt", diff, Wz)
    not_opt = np.ones((B, 1, n, T), dtype=bool)
    np.put_along_axis(not_opt, opt[:, None, :, None], False, axis=3)
    margin = np.where(not_opt, values, np.inf).min(axis=(2, 3))
    sv = np.linalg.svd(W, compute_uv=False)
    return margin, np.linalg.norm(W, axis=(-2, -1)), sv.sum(axis=-1), sv


# -- training --------------------------------------------------------------------------
@validate_params(
    {
        "X": ["array-like"],
        "z": ["array-like"],
        "y": ["array-like"],
        "v": ["array-like"],
        "parametrization": [StrOptions({"separate", "combined"})],
        "structure": [StrOptions({"full", "diagonal"})],
        "loss": [StrOptions({"exponential", "logistic"})],
        "optimizer": [StrOptions({"normalized_gd", "relative_gd", "gd"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "init_scale": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"random", "aligned"})],
        "init_basis": [StrOptions({"nuclear_svm", "gradient"}), "array-like"],
        "checkpoints": [Interval(Integral, 2, None, closed="left"), "array-like"],
        "device": [str, None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def train_attention_classifier(
    X,
    z,
    y,
    v,
    *,
    parametrization="separate",
    structure="full",
    loss="exponential",
    optimizer="normalized_gd",
    learning_rate=0.05,
    n_iter=10_000,
    init_scale=1e-2,
    init="random",
    init_basis="nuclear_svm",
    checkpoints=50,
    device=None,
    random_state=None,
):
    """Train the attention classifier by (normalised) gradient descent.

    Minimises ``L = (1/n) sum_i l(y_i v^T X_i^T softmax(X_i W z_i))`` over
    ``W = K Q^T`` (``parametrization="separate"``) or ``W`` itself
    (``"combined"``), full or diagonal, from a small random initialisation
    (optionally with singular vectors aligned with a reference, ``init``),
    recording log-spaced checkpoints. The loss and its gradient are computed
    in the log domain (see the module notes), so the run stays accurate long
    after the attention has saturated; no regulariser is added.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, dim)
        Tokens; or ``(n_problems, n_samples, n_tokens, dim)`` to train
        independent problems (e.g. seeds) together in one vectorised loop.
    z : array-like of shape (n_samples, dim) or (n_problems, n_samples, dim)
        Queries.
    y : array-like of shape (n_samples,) or (n_problems, n_samples)
        Labels in ``{-1, +1}``.
    v : array-like of shape (dim,) or (n_problems, dim)
        Fixed value head.
    parametrization : {"separate", "combined"}, default="separate"
        Train key and query matrices ``K``, ``Q`` (``W = K Q^T``) or ``W``.
    structure : {"full", "diagonal"}, default="full"
        Full ``dim x dim`` matrices or diagonal ones (``W = diag(k * q)``).
    loss : {"exponential", "logistic"}, default="exponential"
        ``exp(-m)`` or ``log(1 + exp(-m))`` of the margin ``m = y Phi``.
    optimizer : {"normalized_gd", "relative_gd", "gd"}, default="normalized_gd"
        ``"normalized_gd"`` steps ``learning_rate`` along the gradient's
        direction (the norm taken over all parameters jointly), as in
        Tarzanagh et al.; ``"relative_gd"`` steps ``learning_rate *
        ||params||`` (from ``||params|| = 1`` on) along it, so the norm grows
        geometrically instead of linearly (past ``1e50`` the parameters are
        rescaled, see ``log10_scale`` of the result); ``"gd"`` is plain
        gradient descent. Both normalised variants follow the path of
        gradient flow, at different speeds, up to discretisation errors of
        order ``learning_rate`` (relative to ``||params||`` for
        ``"relative_gd"``, absolute for ``"normalized_gd"``). The direction
        converges only logarithmically in ``||W||`` for ``(K, Q)``, which
        ``"relative_gd"`` reaches in thousands of steps rather than
        astronomically many. Once the scores exceed ~1e16 times the margin
        differences, float64 cannot weigh the tightest constraints against
        each other and every step follows the tightest one alone: the
        direction then jitters around the limit by about ``learning_rate``
        (correlation with the SVM about ``1 - learning_rate**2 / 2``).
    learning_rate : float, default=0.05
        Step size.
    n_iter : int, default=10000
        Number of steps.
    init_scale : float, default=1e-2
        Standard deviation of the independent Gaussian initial entries of
        ``K``, ``Q`` (or ``W``). With ``init="aligned"`` the singular values
        of ``K`` and ``Q`` (or ``W``) are ``|N(0, dim * init_scale**2)|``
        draws instead: the same mean square ``||K||_F``.
    init : {"random", "aligned"}, default="random"
        ``"random"``: independent Gaussian entries. ``"aligned"`` (full
        matrices only): ``K = U diag(kappa)`` and ``Q = V diag(rho)`` with
        ``(U, V)`` the singular vectors of a reference ``W_ref = U diag(s)
        V^T`` (``init_basis``) and positive random ``kappa``, ``rho``, so that
        ``W(0) = K Q^T = U diag(kappa * rho) V^T`` has the reference's
        singular vector pairs (orientation included) and random singular
        values; combined: ``W(0) = U diag(omega) V^T``. Sheen et al. (2024)
        prove the nuclear-norm limit for general weights when the singular
        spaces of the initial weights are aligned with the data features,
        an alignment the dynamics then preserve (a recollection of the paper,
        see the user guide): ``W(t)`` then keeps its singular vectors, and
        so does its limit, the nuclear-norm SVM. For generic data no basis
        is preserved exactly, and ``init_basis`` says which one is used.
    init_basis : {"nuclear_svm", "gradient"} or array-like, default="nuclear_svm"
        Reference of ``init="aligned"`` (ignored otherwise) **[our choice]**.
        ``"nuclear_svm"``: the nuclear-norm max-margin solution of the optimal
        tokens (``max_margin_svm(..., norm="nuclear", random_state=0)``), the
        limit the theorem predicts for ``(K, Q)``, whose singular vectors an
        aligned start keeps under the assumption. ``"gradient"``: the descent
        direction of the loss at ``W = 0`` (uniform attention), the data-only
        feature matrix ``sum_{i,t} c_it (x_it - x_i,opt) z_i^T``, which the
        early, nearly linear phase of training preserves (an aligned ``(K,
        Q)`` stays aligned while ``||W||`` is small). An array of shape
        ``(dim, dim)`` (or ``(n_problems, dim, dim)``): its own singular
        vectors. Singular vectors of repeated (e.g. zero) singular values are
        LAPACK's choice of basis.
    checkpoints : int or array-like of int, default=50
        Number of log-spaced checkpoints in ``[0, n_iter]`` (0 and ``n_iter``
        included, duplicates merged), or the iterations to record.
    device : {None, "cpu", "cuda"}, default=None
        Where to compute (see :ref:`devices`);
        results are NumPy arrays.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation (drawn with NumPy on the host).

    Returns
    -------
    result : AttentionTrainingResult
        Checkpointed weights, ``log10`` excess loss, margins, norms and
        singular values, and the final parameters.

    Raises
    ------
    ValueError
        If ``init="aligned"`` with ``structure="diagonal"``, or ``init_basis``
        is an array of the wrong shape or not finite; if ``init_basis=
        "nuclear_svm"`` and the max-margin problem is infeasible.

    See Also
    --------
    max_margin_svm : The limits of ``W / ||W||`` predicted by the theory.
    make_max_margin_attention_data : Separable random instances.

    Examples
    --------
    >>> from sklearn_attn.attention import (
    ...     make_max_margin_attention_data, train_attention_classifier)
    >>> from sklearn_attn.attention import max_margin_svm
    >>> X, z, y, v, opt = make_max_margin_attention_data(6, 4, 8, random_state=0)
    >>> result = train_attention_classifier(
    ...     X, z, y, v, parametrization="combined", optimizer="relative_gd",
    ...     learning_rate=0.01, n_iter=1000, random_state=0)
    >>> W_fro, _ = max_margin_svm(X, z, y, v, norm="frobenius")
    >>> bool(result.correlation(W_fro)[-1] > 0.9999)
    True
    >>> bool(result.log10_excess_loss[-1] < -300)  # far below float64's reach
    True
    """
    dev = resolve_device(device, X, z, y, v)
    X, z, y, v, opt, batched = _check_problem(
        to_host(X), to_host(z), to_host(y), to_host(v), allow_batch=True
    )
    B, n, T, d = X.shape
    iterations = _checkpoint_iterations(checkpoints, n_iter)
    rng = check_random_state(random_state)
    if init == "aligned":
        if structure != "full":
            raise ValueError(
                "init='aligned' needs structure='full': diagonal weights are "
                "aligned with the coordinate axes already; use init='random'."
            )
        bases = _singular_bases(
            _reference_weights(init_basis, X, z, y, v, loss, batched)
        )
        host_params = _aligned_params(rng, bases, parametrization, init_scale)
    else:
        host_params = _initial_params(rng, B, d, parametrization, structure, init_scale)
    params = [to_device(p, dev) for p in host_params]
    prob = _Problem(X, z, y, v, dev)
    xp = prob.xp
    W_hist, loss_hist, attn_hist, scale_hist = [], [], [], []
    log10_scale = xp.zeros(B)
    # Tiny products: BLAS threads would only add overhead.
    with dev.limit_blas(1), dev.activate():
        for it in range(iterations[-1] + 1):
            W = _weights(params, structure, xp)
            if it == iterations[len(W_hist)]:
                with np.errstate(over="ignore"):
                    gain = 10.0**log10_scale  # inf beyond 1e308: S = 0 then
                excess, attention = _log10_excess_loss(W, prob, structure, loss, gain)
                scale_hist.append(to_host(log10_scale).copy())
                W_hist.append(to_host(W).copy())
                loss_hist.append(to_host(excess))
                attn_hist.append(to_host(attention))
            if it == iterations[-1]:
                break
            G, log_scale = _descent_direction(W, prob, structure, loss)
            directions = _param_directions(G, params, structure, xp)
            if optimizer == "gd":
                step = learning_rate * xp.exp(log_scale)
            else:
                norm = xp.sqrt(_squared_norm(directions, B))
                step = learning_rate / xp.where(norm > 0, norm, xp.inf)
                if optimizer == "relative_gd":
                    size = xp.sqrt(_squared_norm(params, B))
                    step = step * xp.maximum(size, 1.0)
            step = step.reshape((B,) + (1,) * (directions[0].ndim - 1))
            params = [p + step * D for p, D in zip(params, directions, strict=True)]
            if optimizer == "relative_gd":
                big = xp.sqrt(_squared_norm(params, B)) > _RESCALE_AT
                factor = xp.where(big, 1.0 / _RESCALE_BY, 1.0)
                factor = factor.reshape(step.shape)
                params = [p * factor for p in params]
                log10_scale = log10_scale + big * (len(params) * np.log10(_RESCALE_BY))

    W = np.stack(W_hist, axis=1)
    if structure == "diagonal":
        W = W[..., None] * np.eye(d)
    margin, fro, nuc, sv = _summaries(W, X, z, opt)
    selected = np.argmax(np.einsum("bntd,bde,bne->bnt", X, W[:, -1], z), axis=2)
    names = {
        ("separate", "full"): ("K", "Q"),
        ("combined", "full"): ("W",),
        ("separate", "diagonal"): ("k", "q"),
        ("combined", "diagonal"): ("w",),
    }
    final = {
        name: to_host(p) if batched else to_host(p)[0]
        for name, p in zip(names[parametrization, structure], params, strict=True)
    }
    arrays = [
        W,
        np.stack(scale_hist, axis=1),
        np.stack(loss_hist, axis=1),
        np.stack(attn_hist, axis=1),
        margin,
        fro,
        nuc,
        sv,
        selected,
    ]
    if not batched:
        arrays = [a[0] for a in arrays]
    return AttentionTrainingResult(
        iterations,
        *arrays,
        params=final,
        parametrization=parametrization,
        structure=structure,
        loss=loss,
        optimizer=optimizer,
        learning_rate=float(learning_rate),
        init=init,
    )


def _squared_norm(arrays, B):
    return sum((a.reshape(B, -1) ** 2).sum(axis=1) for a in arrays)

"""Separable instances of the one-layer softmax attention classifier.

Sequences of unit tokens ``X_i``, queries ``z_i``, labels ``y_i`` and a value
head ``v``, with the optimal token ``opt_i`` of largest score
``y_i v^T x_{i,t}``, drawn so that the max-margin problem of the attention
weights is feasible: the data of the implicit-bias study
(:func:`~sklearn_attn.attention.train_attention_classifier`).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._max_margin import _feasible

__all__ = ["make_max_margin_attention_data"]


# -- data ------------------------------------------------------------------------------
@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_tokens": [Interval(Integral, 2, None, closed="left")],
        "dim": [Interval(Integral, 1, None, closed="left")],
        "structure": [StrOptions({"full", "diagonal"})],
        "scores": [StrOptions({"generic", "equal"})],
        "score_gap": [Interval(Real, 0, 1, closed="right")],
        "max_tries": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_max_margin_attention_data(
    n_samples=6,
    n_tokens=4,
    dim=8,
    *,
    structure="full",
    scores="generic",
    score_gap=0.5,
    max_tries=1000,
    random_state=None,
):
    """Random separable sequences for the attention classifier.

    Queries ``z_i`` are Gaussian vectors normalised to unit length, the value
    head ``v`` a unit Gaussian vector, labels ``y_i`` uniform on ``{-1, +1}``,
    and every token has unit length. The token scores ``gamma_{i,t} = y_i
    v^T x_{i,t}`` follow ``scores``:

    * ``"generic"``: the protocol of Tarzanagh et al. (2023), tokens are
      Gaussian vectors normalised to unit length, and ``opt_i`` is the token
      of largest score (all scores distinct);
    * ``"equal"``: the setting of the theorem of Sheen et al. (2024), where
      every non-optimal token has the same score and the optimal one exceeds
      it by ``score_gap``. ``opt_i`` is uniform on the ``n_tokens``
      positions, and ``x_{i,t} = y_i gamma_t v + sqrt(1 - gamma_t^2) u_{i,t}``
      with ``gamma_t = score_gap`` for ``t = opt_i`` and ``0`` otherwise, and
      ``u_{i,t}`` uniform on the unit sphere of the complement of ``v``: the
      non-optimal tokens are orthogonal to ``v``, and the scores are
      ``score_gap`` and ``0`` to rounding.

    Instances whose max-margin problem is infeasible for the given
    ``structure`` (checked by a linear program) are redrawn.

    Parameters
    ----------
    n_samples : int, default=6
        Number of sequences ``n``.
    n_tokens : int, default=4
        Tokens per sequence ``T``.
    dim : int, default=8
        Token dimension ``d``; at least 2 with ``scores="equal"`` (the
        non-optimal tokens are unit vectors orthogonal to ``v``).
    structure : {"full", "diagonal"}, default="full"
        Require separability by full matrices ``W`` or by diagonal ones.
    scores : {"generic", "equal"}, default="generic"
        Distinct scores of Gaussian tokens, or equal non-optimal scores with
        a margin ``score_gap`` for the optimal token (see above).
    score_gap : float in (0, 1], default=0.5
        With ``scores="equal"``: ``gamma_{i,opt_i} - gamma_{i,t}`` for every
        ``t != opt_i`` (the optimal token's component along ``y_i v``; at 1
        it is ``y_i v`` itself). Ignored with ``scores="generic"``.
    max_tries : int, default=1000
        Draws before giving up.
    random_state : int, RandomState instance or None, default=None
        Seeds the draws.

    Returns
    -------
    X : ndarray of shape (n_samples, n_tokens, dim)
        Tokens.
    z : ndarray of shape (n_samples, dim)
        Queries.
    y : ndarray of shape (n_samples,)
        Labels, ``-1.0`` or ``1.0``.
    v : ndarray of shape (dim,)
        Fixed value head.
    opt : ndarray of shape (n_samples,)
        Index of the optimal token of each sequence.

    Raises
    ------
    ValueError
        If ``scores="equal"`` with ``dim=1``, or ``score_gap`` is too small
        for the optimal tokens to have the largest scores in float64.
    RuntimeError
        If no separable instance came up in ``max_tries`` draws (too many
        constraints ``n (T - 1)`` for ``d`` or ``d^2`` unknowns).

    See Also
    --------
    train_attention_classifier : Train on these data.
    max_margin_svm : The max-margin solutions of these data.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import (
    ...     make_max_margin_attention_data)
    >>> X, z, y, v, opt = make_max_margin_attention_data(6, 4, 8, random_state=0)
    >>> X.shape, z.shape, y.shape, v.shape, opt.shape
    ((6, 4, 8), (6, 8), (6,), (8,), (6,))

    In the theorem's setting the non-optimal scores are all 0 and the optimal
    ones ``score_gap``:

    >>> X, z, y, v, opt = make_max_margin_attention_data(
    ...     6, 4, 8, scores="equal", score_gap=0.5, random_state=0)
    >>> gamma = y[:, None] * (X @ v)
    >>> np.round(gamma[0], 12) + 0.0
    array([0.5, 0. , 0. , 0. ])
    >>> bool(np.all(np.argmax(gamma, axis=1) == opt))
    True
    """
    rng = check_random_state(random_state)
    n, T, d = n_samples, n_tokens, dim
    if scores == "equal" and d < 2:
        raise ValueError(
            "dim must be at least 2 with scores='equal': the non-optimal tokens "
            f"are unit vectors orthogonal to v; got dim={d}."
        )
    for _ in range(max_tries):
        X = rng.standard_normal((n, T, d))
        if scores == "generic":
            X /= np.linalg.norm(X, axis=2, keepdims=True)
        z = rng.standard_normal((n, d))
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        y = rng.choice(np.array([-1.0, 1.0]), size=n)
        v = rng.standard_normal(d)
        v /= np.linalg.norm(v)
        if scores == "generic":
            opt = np.argmax(y[:, None] * (X @ v), axis=1)
        else:
            opt = rng.randint(T, size=n)
            X = _equal_score_tokens(X, y, v, opt, score_gap)
        if _feasible(X, z, opt, structure):
            return X, z, y, v, opt
    raise RuntimeError(
        f"No instance separable by {structure} attention weights in {max_tries} "
        f"draws with n_samples={n}, n_tokens={T}, dim={d}; use fewer samples or "
        "tokens, or a larger dim."
    )


def _equal_score_tokens(G, y, v, opt, score_gap):
    """Unit tokens with scores ``y_i v^T x_it`` of ``score_gap`` at ``opt_i``, 0 else.

    ``G`` (n, T, d) are Gaussian draws; their components along the unit ``v``
    are removed and the rest normalised, giving ``u_it`` uniform on the unit
    sphere of ``v``'s complement. The projection is applied twice: after one,
    ``v^T u`` keeps a rounding error proportional to ``|v^T g|``, after two it
    is at the rounding level of a unit vector.
    """
    n, T, _ = G.shape
    U = G - (G @ v)[..., None] * v
    U -= (U @ v)[..., None] * v
    U /= np.linalg.norm(U, axis=2, keepdims=True)
    level = np.zeros((n, T))
    level[np.arange(n), opt] = score_gap
    X = (y[:, None] * level)[..., None] * v + np.sqrt(1.0 - level**2)[..., None] * U
    if not np.array_equal(np.argmax(y[:, None] * (X @ v), axis=1), opt):
        raise ValueError(
            f"score_gap={score_gap!r} is below the float64 resolution of the "
            "scores: the optimal tokens would not have the largest ones."
        )
    return X

"""Planted multi-head attention layers: the setting of Chen and Li (2024).

:func:`make_attention_layer_regression` draws an ``m``-head layer
``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` and labels random token inputs
(uniform on ``{-1, +1}^{k x d}`` or Gaussian) with it.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_int as _check_int
from .._validation import check_real as _check_real
from ..attention import AttentionLayer, multihead_attention

__all__ = ["make_attention_layer_regression"]

_INPUTS = ("boolean", "gaussian")


def _check_layer(layer, n_heads, token_dim):
    """Validate a given planted layer: an AttentionLayer or a mapping."""
    if isinstance(layer, AttentionLayer):
        theta, values = layer.theta, layer.values
    else:
        try:
            theta, values = layer["theta"], layer["values"]
        except (TypeError, KeyError, IndexError) as exc:
            raise TypeError(
                "layer must be an AttentionLayer (as returned by "
                "make_attention_layer_regression) or a mapping with keys 'theta' "
                f"and 'values'; got {type(layer).__name__}."
            ) from exc
    expected = (n_heads, token_dim, token_dim)
    out = {}
    for name, array in (("theta", theta), ("values", values)):
        array = np.array(array, dtype=np.float64)  # a copy: never alias the user's
        if array.shape != expected:
            raise ValueError(
                f"layer.{name} must have shape (n_heads, token_dim, token_dim) = "
                f"{expected}; got {array.shape}."
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"layer.{name} contains NaN or infinity.")
        out[name] = array
    return AttentionLayer(**out)


def _at_distance(first, drawn, distance, radius):
    """The point of the sphere of ``radius`` at ``distance`` from ``first``, on
    the great circle from ``first`` towards ``drawn`` (both of norm ``radius``)."""
    if radius == 0:
        return np.zeros_like(first)
    unit = first / radius
    other = drawn - np.sum(drawn * unit) * unit
    # Gaussian draws are linearly independent with probability one; guard anyway.
    other /= max(np.linalg.norm(other), np.finfo(np.float64).tiny)
    angle = 2.0 * np.arcsin(min(distance / (2.0 * radius), 1.0))
    return radius * (np.cos(angle) * unit + np.sin(angle) * other)


def make_attention_layer_regression(
    n_samples: int = 1000,
    *,
    n_heads: int = 2,
    n_tokens: int = 8,
    token_dim: int = 8,
    inputs: str = "boolean",
    theta_norm: float = 2.0,
    values_std: float | None = None,
    noise: float = 0.0,
    head_distance: float | None = None,
    layer=None,
    random_state=None,
):
    r"""Generate token sequences labelled by a planted multi-head attention layer.

    The layer is

    .. math::

        F(X) = \sum_{i=1}^{m} \mathrm{softmax}(X \Theta_i X^\top) X W_i,

    with the softmax taken over each row (key positions, self included) and
    no temperature, as in Chen and Li (2024). Each :math:`\Theta_i` is a
    standard Gaussian ``d x d`` matrix rescaled to Frobenius norm
    ``theta_norm`` (on Boolean inputs the scores
    :math:`x_a^\top \Theta_i x_b` then have standard deviation ``theta_norm``)
    and the entries of each :math:`W_i` are i.i.d. :math:`N(0,
    \text{values\_std}^2)`.

    With ``head_distance`` the first two heads are made nearly degenerate:
    :math:`\Theta_2` is moved along the great circle of the sphere
    :math:`\lVert\Theta\rVert_F = \text{theta\_norm}` that joins
    :math:`\Theta_1` to the drawn :math:`\Theta_2`, to Frobenius distance
    :math:`\delta` = ``head_distance`` from :math:`\Theta_1`:

    .. math::

        \Theta_2 = r (\cos\varphi\, U + \sin\varphi\, E), \qquad
        \varphi = 2 \arcsin\frac{\delta}{2 r},

    with :math:`r` = ``theta_norm``, :math:`U = \Theta_1 / r` and :math:`E`
    the unit-norm component of the drawn :math:`\Theta_2` orthogonal to
    :math:`U`, so that :math:`\lVert\Theta_2 - \Theta_1\rVert_F = \delta`
    exactly and both keep the norm ``theta_norm`` (the attention is as sharp
    as in the other heads; only the distance changes). No further random
    numbers are drawn: with one ``random_state``, the inputs, the ``W_i``
    and the other heads do not depend on ``head_distance``, and a sweep over
    it moves :math:`\Theta_2` alone, continuously. Chen and Li's guarantees
    assume non-degenerate heads; with :math:`\Theta_1 = \Theta_2` only
    :math:`W_1 + W_2` is identifiable.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of sequences, at least 1.
    n_heads : int, default=2
        Number of heads ``m``, at least 1.
    n_tokens : int, default=8
        Tokens per sequence ``k``, at least 1.
    token_dim : int, default=8
        Token dimension ``d``, at least 1.
    inputs : {"boolean", "gaussian"}, default="boolean"
        Input law: all ``k d`` entries i.i.d. uniform on ``{-1, +1}`` (the
        paper's setting) or standard Gaussian.
    theta_norm : float, default=2.0
        Frobenius norm of every attention matrix ``Theta_i``; larger norms
        give sharper (closer to hard-max) attention. Non-negative.
    values_std : float, default=None
        Standard deviation of the entries of ``W_i``; ``None`` means
        ``1 / sqrt(token_dim)``.
    noise : float, default=0.0
        Standard deviation of Gaussian noise added to every entry of ``Y``.
    head_distance : float, default=None
        Frobenius distance :math:`\lVert\Theta_2 - \Theta_1\rVert_F`
        between the first two heads, in ``[0, 2 * theta_norm]`` (see above);
        ``None`` leaves the heads independent (at distance about
        ``sqrt(2) * theta_norm``). Needs ``n_heads >= 2``, ``token_dim >= 2``
        and no ``layer``.
    layer : AttentionLayer or mapping, default=None
        A planted layer to reuse, with ``theta`` and ``values`` of
        shape ``(n_heads, token_dim, token_dim)`` (e.g. the ``layer`` returned
        by an earlier call), so that training and test sets drawn with
        different seeds share one layer. ``theta_norm`` and ``values_std`` are
        then ignored.
    random_state : int, RandomState instance or None, default=None
        Seed of the layer (drawn first, unless ``layer`` is given), the inputs
        and the noise. Pass an int for reproducible output across calls.

    Returns
    -------
    X : ndarray of shape (n_samples, n_tokens, token_dim)
        Token sequences, float64.
    Y : ndarray of shape (n_samples, n_tokens, token_dim)
        Labels ``F(X)`` plus noise, float64.
    layer : AttentionLayer
        The planted layer, a named tuple ``(theta, values)`` of the attention
        matrices ``Theta_i`` and the value matrices ``W_i``, each of shape
        ``(n_heads, token_dim, token_dim)``.

    See Also
    --------
    sklearn_attn.MultiHeadAttentionLearner : Learns such a layer from ``(X, Y)``.

    References
    ----------
    S. Chen and Y. Li, "Provably learning a multi-head attention layer",
    STOC 2025, arXiv:2402.04084.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.datasets import make_attention_layer_regression
    >>> X, Y, layer = make_attention_layer_regression(
    ...     n_samples=100, n_heads=2, n_tokens=4, token_dim=3, random_state=0)
    >>> X.shape, Y.shape, layer.theta.shape, layer.values.shape
    ((100, 4, 3), (100, 4, 3), (2, 3, 3), (2, 3, 3))
    >>> np.unique(X).tolist()
    [-1.0, 1.0]
    >>> round(float(np.linalg.norm(layer.theta[0])), 6)
    2.0
    >>> X_test, Y_test, _ = make_attention_layer_regression(
    ...     n_samples=50, n_heads=2, n_tokens=4, token_dim=3, layer=layer,
    ...     random_state=1)
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_heads = _check_int(n_heads, "n_heads", 1)
    n_tokens = _check_int(n_tokens, "n_tokens", 1)
    token_dim = _check_int(token_dim, "token_dim", 1)
    if not isinstance(inputs, str) or inputs not in _INPUTS:
        raise ValueError(f"inputs must be one of {list(_INPUTS)}; got {inputs!r}.")
    theta_norm = _check_real(theta_norm, "theta_norm", strictly_positive=False)
    if values_std is None:
        values_std = 1.0 / np.sqrt(token_dim)
    values_std = _check_real(values_std, "values_std", strictly_positive=False)
    noise = _check_real(noise, "noise", strictly_positive=False)
    if head_distance is not None:
        head_distance = _check_real(
            head_distance, "head_distance", strictly_positive=False
        )
        if layer is not None:
            raise ValueError(
                "head_distance plants the layer: it cannot be combined with a "
                "given layer; pass head_distance=None."
            )
        if n_heads < 2 or token_dim < 2:
            raise ValueError(
                "head_distance needs n_heads >= 2 and token_dim >= 2 (two heads, "
                f"and a direction to move along); got n_heads={n_heads}, "
                f"token_dim={token_dim}."
            )
        if head_distance > 2 * theta_norm:
            raise ValueError(
                "head_distance must be at most 2 * theta_norm (two points of the "
                f"sphere of radius theta_norm={theta_norm!r}); got {head_distance!r}."
            )

    rng = check_random_state(random_state)
    shape = (n_heads, token_dim, token_dim)
    if layer is None:
        theta = rng.standard_normal(size=shape)
        norms = np.linalg.norm(theta.reshape(n_heads, -1), axis=1)
        # A Gaussian matrix is nonzero with probability one; guard d = 1 anyway.
        theta *= (theta_norm / np.maximum(norms, np.finfo(np.float64).tiny))[
            :, None, None
        ]
        values = values_std * rng.standard_normal(size=shape)
        if head_distance is not None:
            theta[1] = _at_distance(theta[0], theta[1], head_distance, theta_norm)
        layer = AttentionLayer(theta, values)
    else:
        layer = _check_layer(layer, n_heads, token_dim)

    size = (n_samples, n_tokens, token_dim)
    if inputs == "boolean":
        X = 2.0 * rng.randint(0, 2, size=size).astype(np.float64) - 1.0
    else:
        X = rng.standard_normal(size=size)
    Y = multihead_attention(X, layer.theta, layer.values)
    if noise > 0:
        Y += noise * rng.standard_normal(size=size)
    return X, Y, layer

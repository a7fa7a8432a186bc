"""Key-averaged regression targets on spherical tokens (random-feature attention).

The generator :func:`make_token_regression` draws a query ``x_0`` and ``N`` keys
``x_1, ..., x_N`` i.i.d. uniform on the sphere of radius ``sqrt(d)`` and labels
them with an average over the keys of a function of the query-key correlation,
the target classes studied for random-feature attention (Fu, Guo, Bai and Mei,
2023).

Private helpers used by the tests and the experiments:

- :func:`_sample_tokens` draws the tokens;
- :func:`_token_targets` computes the raw (noiseless, unstandardised) target;
- :func:`_orthogonal_polynomial` evaluates the monic polynomials orthogonal
  under the law of one correlation ``t_i`` (Gegenbauer polynomials);
- :func:`_reference_moments` returns the ``(mean, std)`` used to standardise it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_int as _check_int
from .._validation import check_real as _check_real

__all__ = ["make_token_regression"]

_TARGETS = ("correlation", "gamma", "value")
_POLYNOMIALS = ("power", "gegenbauer")

# Standardisation constants are Monte Carlo estimates on this fixed reference
# sample, independent of the user's ``random_state``: train and test sets drawn
# with different seeds are then scaled by exactly the same affine map.
_REFERENCE_SEED = 20230721
_N_REFERENCE = 20_000
# Reference tokens are drawn in chunks of at most this many floats (8 MiB).
_REFERENCE_CHUNK_FLOATS = 2**20


def _sample_tokens(rng, n_samples, n_tokens, token_dim):
    """Draw ``(n_samples, n_tokens, token_dim)`` tokens uniform on S^{d-1}(sqrt(d))."""
    X = rng.standard_normal(size=(n_samples, n_tokens, token_dim))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    X *= np.sqrt(token_dim)
    return X


def _orthogonal_polynomial(t, degree, token_dim):
    """``Q_p(t)``: the monic polynomial of degree ``p`` orthogonal to all lower
    degrees under the law of ``t = <x_0, x_i> / sqrt(d)``, ``x_0`` uniform on
    the sphere of radius ``sqrt(d)``.

    That law has the density ``(1 - t^2 / d)^((d - 3) / 2)`` on
    ``[-sqrt(d), sqrt(d)]``: ``Q_p(t)`` is the Gegenbauer polynomial
    ``C_p^((d - 2) / 2)(t / sqrt(d))`` rescaled to leading coefficient one, and
    ``x_0 -> Q_p(<x_0, x_i> / sqrt(d))`` is a spherical harmonic of degree ``p``
    (so is ``x_i -> ...``). As ``d`` grows, ``Q_p`` tends to the Hermite
    polynomial ``He_p``. Computed by the three-term recurrence
    ``Q_{k+1} = t Q_k - b_k Q_{k-1}`` with
    ``b_k = d k (k + d - 3) / ((2k + d - 2) (2k + d - 4))`` (``b_1 = E t^2 = 1``,
    also for ``d = 2``, where the formula reads 0/0), and
    ``E Q_p(t)^2 = b_1 b_2 ... b_p``.
    """
    d = token_dim
    previous, current = np.ones_like(t), t.copy()
    if degree == 0:
        return previous
    for k in range(1, degree):
        b = 1.0 if k == 1 else d * k * (k + d - 3) / ((2 * k + d - 2) * (2 * k + d - 4))
        previous, current = current, t * current - b * previous
    return current


def _token_targets(X, target="correlation", degree=1, gamma=1.0, polynomial="power"):
    """Raw key-averaged target of token arrays, before standardisation and noise.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_keys + 1, token_dim)
        Query first, then the keys.
    target, degree, gamma, polynomial
        As in :func:`make_token_regression` (not validated here).

    Returns
    -------
    f : ndarray of shape (n_samples,)
        ``mean_i g(x_0, x_i)`` over the keys ``i = 1..N``, in float64.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 3 or X.shape[1] < 2:
        raise ValueError(
            "X must have shape (n_samples, n_keys + 1, token_dim) with at least "
            f"one key; got shape {X.shape}."
        )
    query, keys = X[:, 0, :], X[:, 1:, :]
    n_samples, n_keys, token_dim = keys.shape
    if callable(target):
        values = np.asarray(target(query, keys), dtype=np.float64)
        if values.shape != (n_samples, n_keys):
            raise ValueError(
                "A callable target must return per-key values of shape "
                f"(n_samples, n_keys) = {(n_samples, n_keys)}; got shape "
                f"{values.shape}."
            )
        return values.mean(axis=1)
    # t_i = <x_0, x_i> / sqrt(d) as one batched matrix-vector product, (n, N).
    t = np.matmul(keys, query[:, :, None])[:, :, 0] / np.sqrt(token_dim)
    if target in ("correlation", "value"):
        if polynomial == "gegenbauer":
            values = _orthogonal_polynomial(t, degree, token_dim)
        else:
            values = t**degree
        if target == "value":
            values = values * keys[:, :, 0]
    elif target == "gamma":
        values = np.exp(gamma * t)
    else:
        raise ValueError(
            f"target must be one of {list(_TARGETS)} or a callable; got {target!r}."
        )
    return values.mean(axis=1)


def _compute_reference_moments(target, degree, gamma, n_keys, token_dim, polynomial):
    """Mean and std of the raw target on the fixed reference sample."""
    rng = check_random_state(_REFERENCE_SEED)
    chunk = max(1, _REFERENCE_CHUNK_FLOATS // ((n_keys + 1) * token_dim))
    values = np.empty(_N_REFERENCE)
    # Overflow (e.g. a large gamma) is reported below as one clear error.
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, _N_REFERENCE, chunk):
            stop = min(start + chunk, _N_REFERENCE)
            X = _sample_tokens(rng, stop - start, n_keys + 1, token_dim)
            values[start:stop] = _token_targets(X, target, degree, gamma, polynomial)
        mean, std = float(values.mean()), float(values.std())
    if not (np.isfinite(mean) and np.isfinite(std)):
        raise ValueError(
            "The target overflows or is not finite on the input distribution "
            f"(estimated mean={mean}, std={std}); for target='gamma' use a "
            "smaller gamma or token_dim."
        )
    if std <= 10 * np.finfo(np.float64).eps * max(1.0, abs(mean)):
        # Constant target (e.g. token_dim=1 with an even degree): only centre it.
        std = 1.0
    return mean, std


@functools.lru_cache(maxsize=128)
def _cached_reference_moments(target, degree, gamma, n_keys, token_dim, polynomial):
    return _compute_reference_moments(
        target, degree, gamma, n_keys, token_dim, polynomial
    )


def _reference_moments(target, degree, gamma, n_keys, token_dim, polynomial="power"):
    """``(mean, std)`` of the noiseless target under the input law.

    Estimated by Monte Carlo on ``_N_REFERENCE`` draws from the fixed seed
    ``_REFERENCE_SEED``. Results for named targets are cached (the parameters a
    target does not use are dropped from the cache key); callables are never
    cached, as two different callables may share an identity or a name.
    """
    if callable(target):
        return _compute_reference_moments(
            target, degree, gamma, n_keys, token_dim, polynomial
        )
    polynomial_target = target in ("correlation", "value")
    degree = int(degree) if polynomial_target else None
    gamma = float(gamma) if target == "gamma" else None
    polynomial = polynomial if polynomial_target else None
    return _cached_reference_moments(
        target, degree, gamma, int(n_keys), int(token_dim), polynomial
    )


def make_token_regression(
    n_samples: int = 1000,
    *,
    n_keys: int = 8,
    token_dim: int = 8,
    target: str | Callable = "correlation",
    degree: int = 1,
    gamma: float = 1.0,
    polynomial: str = "power",
    noise: float = 0.0,
    standardize: bool = True,
    random_state=None,
):
    r"""Generate a key-averaged regression problem on spherical tokens.

    Each sample is a query ``x_0`` followed by ``n_keys`` keys ``x_1..x_N``, all
    i.i.d. uniform on the sphere of radius ``sqrt(token_dim)``. The target is an
    average over the keys of a function of the query-key correlation, so it is
    invariant to permuting the keys: the setting of random-feature attention
    (Fu, Guo, Bai and Mei, 2023).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples, at least 1.

    n_keys : int, default=8
        Number of keys ``N`` per sample, at least 1. Each sample has
        ``n_keys + 1`` tokens.

    token_dim : int, default=8
        Dimension ``d`` of every token, at least 1.

    target : {"correlation", "value", "gamma"} or callable, default="correlation"
        The per-key function averaged over the keys (see Notes). A callable is
        called as ``target(query, keys)`` with ``query`` of shape
        ``(n, token_dim)`` and ``keys`` of shape ``(n, n_keys, token_dim)`` and
        must return per-key values of shape ``(n, n_keys)``.

    degree : int, default=1
        Positive integer degree of the polynomial of the correlation for
        ``"correlation"`` and ``"value"``; ignored otherwise.

    gamma : float, default=1.0
        Positive rate of the ``"gamma"`` target; validated but ignored for the
        other targets. Larger
        ``gamma`` moves the target's mass to higher polynomial degrees.

    polynomial : {"power", "gegenbauer"}, default="power"
        The polynomial ``P`` of degree ``degree`` applied to each correlation
        for ``"correlation"`` and ``"value"`` (ignored otherwise):
        ``"power"`` is ``t^p``, which for ``p >= 3`` also holds lower degrees
        (``t^3`` is mostly linear: 80% of its variance at ``token_dim=4``);
        ``"gegenbauer"`` is the orthogonal polynomial of degree ``p`` under the
        law of ``t`` (see Notes), for targets of exactly degree ``p``.

    noise : float, default=0.0
        Standard deviation of the Gaussian noise added to the (standardised)
        target.

    standardize : bool, default=True
        If True, centre and scale the noiseless target to mean 0 and variance 1
        under the input distribution, with constants that do not depend on
        ``random_state`` (see Notes).

    random_state : int, RandomState instance or None, default=None
        Seed or generator for the tokens and the noise. Pass an int for
        reproducible output across calls.

    Returns
    -------
    X : ndarray of shape (n_samples, n_keys + 1, token_dim)
        Tokens in float64, the query ``X[:, 0]`` first, then the keys.

    y : ndarray of shape (n_samples,)
        Targets in float64.

    Notes
    -----
    With ``d = token_dim``, ``N = n_keys`` and the correlations
    ``t_i = <x_0, x_i> / sqrt(d)`` (each of mean 0 and variance 1), the raw
    target is

    - ``"correlation"``: :math:`f(X) = \frac{1}{N} \sum_{i=1}^{N} P(t_i)`,
      with :math:`P(t) = t^p`, :math:`p` = ``degree`` (``polynomial="power"``),
      or :math:`P = Q_p`;
    - ``"value"``: :math:`f(X) = \frac{1}{N} \sum_{i=1}^{N} P(t_i) \, x_{i,1}`,
      the correlation weighting the first coordinate ``x_i[0]`` of the key (for
      :math:`p = 1`, :math:`\frac{1}{N} \sum_i \langle x_0, x_i \rangle
      x_{i,1} / \sqrt{d}`);
    - ``"gamma"``: :math:`f(X) = \frac{1}{N} \sum_{i=1}^{N} e^{\gamma t_i}`;
    - a callable ``g``: :math:`f(X) = \frac{1}{N} \sum_{i=1}^{N}
      g(x_0, (x_1, \dots, x_N))_i`, batched over the samples.

    Each correlation has the law of :math:`\sqrt{d}\,u`, :math:`u` the first
    coordinate of a uniform point of the unit sphere, of density proportional
    to :math:`(1 - t^2/d)^{(d-3)/2}` on :math:`[-\sqrt{d}, \sqrt{d}]`; the
    correlations of different keys are independent. :math:`Q_p` is the monic
    polynomial of degree :math:`p` orthogonal under this law: a Gegenbauer
    polynomial :math:`C_p^{((d-2)/2)}(t/\sqrt{d})` up to a constant factor,
    so that :math:`x_0 \mapsto Q_p(t_i)` is a spherical harmonic of degree
    :math:`p` (for fixed :math:`x_i`, and the other way round), the degree
    that counts in the complexity of random-feature learning. As :math:`d`
    grows, :math:`Q_p` tends to the Hermite polynomial :math:`He_p`; for
    :math:`p \le 2`, :math:`Q_p` and :math:`t^p` give the same standardised
    target (:math:`Q_2(t) = t^2 - 1`).

    The returned label is :math:`y = (f(X) - \mu) / \sigma + \text{noise}
    \cdot \varepsilon` with :math:`\varepsilon \sim N(0, 1)`, where
    :math:`\mu` and :math:`\sigma` are the mean and standard deviation of
    :math:`f(X)` under the input law (:math:`\mu = 0, \sigma = 1` when
    ``standardize=False``). They are estimated once by Monte Carlo on 20,000
    reference samples drawn from a fixed seed, independent of
    ``random_state``, so separately generated training and test sets share the
    same scaling; the estimation error is of order :math:`1/\sqrt{20000}`.
    Standardisation happens after averaging over the keys, so ``Var(y)`` is
    close to ``1 + noise**2`` whatever ``n_keys``. A target that is constant
    under the input law is only centred.

    References
    ----------
    H. Fu, T. Guo, Y. Bai and S. Mei, "What can a Single Attention Layer Learn?
    A Study Through the Random Features Lens", NeurIPS 2023, arXiv:2307.11353.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.datasets import make_token_regression
    >>> X, y = make_token_regression(n_samples=5, n_keys=4, token_dim=3,
    ...                              target="value", degree=2, random_state=0)
    >>> X.shape, y.shape
    ((5, 5, 3), (5,))
    >>> bool(np.allclose(np.linalg.norm(X, axis=-1), np.sqrt(3)))
    True
    >>> _, y = make_token_regression(n_samples=20000, random_state=0)
    >>> bool(abs(y.mean()) < 0.05), round(float(y.var()), 1)
    (True, 1.0)
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_keys = _check_int(n_keys, "n_keys", 1)
    token_dim = _check_int(token_dim, "token_dim", 1)
    if isinstance(target, str):
        if target not in _TARGETS:
            raise ValueError(
                f"target must be one of {list(_TARGETS)} or a callable; got {target!r}."
            )
    elif not callable(target):
        raise TypeError(
            f"target must be one of {list(_TARGETS)} or a callable; got "
            f"{target!r} of type {type(target).__name__}."
        )
    degree = _check_int(degree, "degree", 1)
    if not isinstance(polynomial, str) or polynomial not in _POLYNOMIALS:
        raise ValueError(
            f"polynomial must be one of {list(_POLYNOMIALS)}; got {polynomial!r}."
        )
    gamma = _check_real(gamma, "gamma", strictly_positive=True)
    noise = _check_real(noise, "noise", strictly_positive=False)
    if not isinstance(standardize, (bool, np.bool_)):
        raise TypeError(f"standardize must be a bool; got {standardize!r}.")

    if standardize:  # first, so that an overflowing target fails before any work
        mean, std = _reference_moments(
            target, degree, gamma, n_keys, token_dim, polynomial
        )
    rng = check_random_state(random_state)
    X = _sample_tokens(rng, n_samples, n_keys + 1, token_dim)
    y = _token_targets(X, target, degree, gamma, polynomial)
    if standardize:
        y = (y - mean) / std
    if noise > 0:
        y = y + noise * rng.standard_normal(size=n_samples)
    return X, y

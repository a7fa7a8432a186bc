"""Infinite-width kernels of the random-feature attention layer and the RFMLP.

The attention kernels are those of the ReLU features (``activation="relu"``,
the model of Fu et al.): the expectation over ``W`` of products of softmax
attention weights has no closed form, and no kernel of the softmax features
is implemented.

As the number of heads (or hidden units) grows, the inner products of the
random features of :class:`AttentionRandomFeatures` and
:class:`MLPRandomFeatures` converge to the deterministic kernels computed here
(the "``M = infinity``" models). They are plain functions returning Gram
matrices, for use with ``KernelRidge(kernel="precomputed")``, ``SVR`` and the
like.

All three rest on the order-1 arc-cosine kernel

.. math::

    \\kappa_1(\\rho) = \\frac{\\sqrt{1 - \\rho^2}
    + (\\pi - \\arccos\\rho)\\,\\rho}{2\\pi},

``E[relu(g) relu(g')] = s s' kappa1(rho)`` for zero-mean jointly Gaussian
``(g, g')`` with standard deviations ``s, s'`` and correlation ``rho``, and, for
the biased attention, on its extension to Gaussians with non-zero means.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy.special import ndtr, owens_t
from sklearn import get_config
from sklearn.utils import check_array, gen_batches
from sklearn.utils._param_validation import Interval, validate_params

from .._scaling import row_exponents
from .._validation import as_array, reject_complex, token_layout

__all__ = ["brfa_kernel", "rfa_kernel", "rfmlp_kernel"]

# Correlations are clipped to [-1 + _RHO_EPS, 1 - _RHO_EPS] in the bivariate
# normal moments, whose closed form divides by sqrt(1 - rho^2).
_RHO_EPS = 1e-12
# A pre-activation with |mean| > _DETERMINISTIC * std is treated as constant:
# the neglected covariance terms are 1e-100 times smaller than the kept ones.
_DETERMINISTIC = 1e100
_SQRT_2PI = math.sqrt(2.0 * math.pi)
# Elements per block of the elementwise special-function evaluations: the
# temporaries stay in cache (measured 2-3 times faster than whole arrays).
_BLOCK = 16384

_TOKEN_DIM = [Interval(Integral, 1, None, closed="left"), None]


# -- input validation ----------------------------------------------------------------
def _check_tokens(X, Y, token_dim, *, min_tokens, flat_ok=False):
    """Validate ``X`` and ``Y`` and return both as float64 3-D token arrays.

    ``flat_ok`` reads 2-D input without ``token_dim`` as a single token (the
    MLP only sees ``vec(X)``).
    """
    arrays = []
    layouts = []
    for name, A in (("X", X), ("Y", Y)):
        if A is None:
            arrays.append(arrays[0])
            layouts.append(layouts[0])
            continue
        A = as_array(A, name)
        reject_complex(A, name)
        dim = token_dim
        if flat_ok and dim is None and A.ndim == 2:
            # Zero columns: leave the error to the usual validation.
            dim = max(A.shape[1], 1)
        # The layout first: its message names the argument and the shape.
        token_layout(A, dim, what=name)
        A = check_array(A, allow_nd=True, dtype=np.float64, input_name=name)
        A_2d, n_tokens, dim = token_layout(A, dim, what=name)
        if n_tokens < min_tokens:
            raise ValueError(
                f"{name} has {n_tokens} token(s) of dimension {dim}; at least "
                f"{min_tokens} tokens are needed (a query and at least one key)."
            )
        arrays.append(A_2d.reshape(A_2d.shape[0], n_tokens, dim))
        layouts.append((n_tokens, dim))
    if layouts[0] != layouts[1]:
        raise ValueError(
            f"X and Y must have the same token layout; X has {layouts[0][0]} "
            f"token(s) of dimension {layouts[0][1]} and Y has {layouts[1][0]} "
            f"token(s) of dimension {layouts[1][1]}."
        )
    return arrays[0], arrays[1]


def _rescaled(A, only_down=False):
    """``(A / 2^e, e)`` with one exponent per row (see :mod:`sklearn_attn._scaling`).

    The kernels are positively homogeneous in each argument, so they are
    computed on rows of moderate size and scaled back at the end: extreme but
    finite inputs give the exact kernel wherever it is representable. With
    ``only_down``, rows are only scaled down, never up (a constant 1 appended
    to the input keeps small rows moderate).
    """
    exponents = row_exponents(A)
    if only_down:
        exponents = np.maximum(exponents, 0)
    shape = (-1,) + (1,) * (A.ndim - 1)
    return np.ldexp(A, -exponents.reshape(shape)), exponents


def _scale_back(K, exponents_X, exponents_Y, degree, name):
    """``K * 2^(degree (e_X + e_Y))``, or an error where that overflows."""
    if not (exponents_X.any() or exponents_Y.any()):
        return K
    with np.errstate(over="ignore", under="ignore"):
        K = np.ldexp(K, degree * (exponents_X[:, None] + exponents_Y[None, :]))
    if not np.isfinite(K).all():
        largest = max(exponents_X.max(), exponents_Y.max())
        raise ValueError(
            f"{name}: the kernel values overflow float64 for inputs with entries "
            f"up to about 1e{round(largest * np.log10(2.0))}; the kernel grows as "
            f"the product of the input scales to the power {degree}. "
            "Rescale X and Y (e.g. divide by their largest absolute entry)."
        )
    return K


def _row_batches(n_rows, bytes_per_row):
    """Batches of rows whose temporaries fit in scikit-learn's working_memory."""
    budget = get_config()["working_memory"] * 2**20
    size = max(1, int(budget // max(bytes_per_row, 1)))
    return gen_batches(n_rows, size)


# -- Gaussian ReLU moments -------------------------------------------------------------
def _blockwise(func, *args):
    """``func(*args)`` elementwise, broadcast, in cache-sized flat blocks."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    args = [np.ascontiguousarray(a).ravel() for a in np.broadcast_arrays(*args)]
    out = np.empty(args[0].shape[0])
    for block in gen_batches(out.shape[0], _BLOCK):
        out[block] = func(*(a[block] for a in args))
    return out.reshape(shape)


def _arccos_rho(inner, norms):
    """``inner / norms`` clipped to [-1, 1], zero where ``norms`` is zero."""
    rho = np.divide(inner, norms, out=np.zeros_like(inner), where=norms > 0)
    return np.clip(rho, -1.0, 1.0, out=rho)


def _arccos_kernel(inner, norms):
    """``norms * kappa1(inner / norms)``, zero where ``norms`` is zero.

    ``sqrt(1 - rho^2)`` and ``arccos(rho)`` are computed from the same ``rho``
    so that their rounding errors cancel at ``rho = 1``.
    """
    rho = _arccos_rho(inner, norms)
    value = np.sqrt((1.0 - rho) * (1.0 + rho)) + (np.pi - np.arccos(rho)) * rho
    value *= norms / (2.0 * np.pi)
    return value


def _owen_term(h, k, rho, r):
    """``T(h, (k - rho h) / (h r))`` with its limits at ``h = 0``."""
    at_zero = h == 0
    h_safe = np.where(at_zero, 1.0, h)
    t = owens_t(h, (k - rho * h) / (h_safe * r))
    # h -> 0: sign(k) / 4, or arctan(sqrt((1 - rho) / (1 + rho))) / (2 pi) for k = 0.
    limit = np.where(
        k == 0,
        np.arctan(np.sqrt((1.0 - rho) / (1.0 + rho))) / (2.0 * np.pi),
        np.sign(k) / 4.0,
    )
    return np.where(at_zero, limit, t)


def _bvn_cdf(a, b, rho):
    """Standard bivariate normal CDF ``P(Z <= a, Z' <= b)``, correlation ``rho``.

    Owen's (1956) formula, vectorised; ``|rho| < 1`` is required.
    """
    r = np.sqrt((1.0 - rho) * (1.0 + rho))
    ab = a * b
    beta = np.where((ab > 0) | ((ab == 0) & (a + b >= 0)), 0.0, 0.5)
    return (
        0.5 * (ndtr(a) + ndtr(b))
        - _owen_term(a, b, rho, r)
        - _owen_term(b, a, rho, r)
        - beta
    )


def _std_pdf(x):
    return np.exp(-0.5 * x * x) / _SQRT_2PI


def _relu_moment(m1, m2, s1, s2, rho):
    """``E[relu(U) relu(U')]`` for jointly Gaussian ``U, U'``.

    Means ``m1, m2``, standard deviations ``s1, s2 >= 0`` and correlation
    ``rho``; all arguments broadcast. A pre-activation with zero (or negligible)
    standard deviation is treated as the constant ``m``.
    """
    m1, m2, s1, s2, rho = np.broadcast_arrays(m1, m2, s1, s2, rho)
    const1 = ~(np.abs(m1) < _DETERMINISTIC * s1)
    const2 = ~(np.abs(m2) < _DETERMINISTIC * s2)
    s1_safe = np.where(const1, 1.0, s1)
    s2_safe = np.where(const2, 1.0, s2)
    a = np.where(const1, 0.0, m1 / s1_safe)
    b = np.where(const2, 0.0, m2 / s2_safe)
    rho = np.clip(rho, -1.0 + _RHO_EPS, 1.0 - _RHO_EPS)
    h, k = -a, -b
    r = np.sqrt((1.0 - rho) * (1.0 + rho))
    pdf_h, pdf_k = _std_pdf(h), _std_pdf(k)
    # Truncated moments over {Z > h, Z' > k} (Rosenbaum, 1961).
    mass = _bvn_cdf(a, b, rho)
    t1 = ndtr((rho * h - k) / r)
    t2 = ndtr((rho * k - h) / r)
    e1 = pdf_h * t1 + rho * pdf_k * t2
    e2 = pdf_k * t2 + rho * pdf_h * t1
    quad = ((h - k) ** 2 + 2.0 * (1.0 - rho) * h * k) / (r * r)
    e12 = (
        rho * mass
        + rho * h * pdf_h * t1
        + rho * k * pdf_k * t2
        + r / _SQRT_2PI * _std_pdf(np.sqrt(np.maximum(quad, 0.0)))
    )
    both = s1_safe * s2_safe * e12 + s1_safe * m2 * e1 + s2_safe * m1 * e2
    both += m1 * m2 * mass
    # One side constant: relu(m1) * E[relu(U')], E[relu(m + s Z)] = s pdf(b) + m Phi(b).
    half1 = np.maximum(m1, 0.0) * (s2 * _std_pdf(b) + m2 * ndtr(b))
    half2 = np.maximum(m2, 0.0) * (s1 * _std_pdf(a) + m1 * ndtr(a))
    none = np.maximum(m1, 0.0) * np.maximum(m2, 0.0)
    return np.where(
        const1, np.where(const2, none, half1), np.where(const2, half2, both)
    )


# -- attention kernels -----------------------------------------------------------------
def _attention_kernel(
    X, Y, token_dim, qk_mean_scale, qk_std, qk_bias, value_bias, name
):
    X, Y = _check_tokens(X, Y, token_dim, min_tokens=2)
    # K(2^a X, 2^b Y) = 2^(3 (a + b)) K(X, Y) with every constant 1 replaced
    # by 2^-a (2^-b): the pre-activations scale by 2^(2a), the values by 2^a.
    # With qk_bias rows are only scaled down: the constant of the scores keeps
    # small rows moderate, and 2^-a of a row scaled up could overflow.
    X, exponents_X = _rescaled(X, only_down=qk_bias)
    Y, exponents_Y = _rescaled(Y, only_down=qk_bias)
    rescaled = exponents_X.any() or exponents_Y.any()
    n_keys, d = X.shape[1] - 1, X.shape[2]
    s = 1.0 / math.sqrt(d) if qk_std is None else float(qk_std)
    mu = float(qk_mean_scale)
    # The constant appended to every token in the scores (0 without qk_bias).
    const_X = np.ldexp(float(qk_bias), -exponents_X)
    const_Y = np.ldexp(float(qk_bias), -exponents_Y)

    y0, yk = Y[:, 0], Y[:, 1:]
    # Norms of the tokens [y; c] of the scores.
    y0_norm = np.sqrt(np.einsum("nd,nd->n", y0, y0) + const_Y**2)
    yk_norm = np.sqrt(np.einsum("nid,nid->ni", yk, yk) + const_Y[:, None] ** 2)
    yk_flat = yk.reshape(-1, d)
    # The mean mu I sits on the d x d block: no constant in it.
    y_mean = mu * np.einsum("nd,nid->ni", y0, yk)  # (n_Y, N)
    y_std = s * y0_norm[:, None] * yk_norm

    K = np.empty((X.shape[0], Y.shape[0]))
    K_bias = np.empty_like(K) if rescaled and value_bias else None
    # About 12 float64 arrays of shape (n_Y, N, N) per row of X; the Gaussian
    # moments themselves are evaluated in cache-sized flat blocks.
    for rows in _row_batches(X.shape[0], 12 * 8 * Y.shape[0] * n_keys**2):
        x0, xk = X[rows, 0], X[rows, 1:]
        c = x0.shape[0]
        x0_norm = np.sqrt(np.einsum("nd,nd->n", x0, x0) + const_X[rows] ** 2)
        xk_norm = np.sqrt(np.einsum("nid,nid->ni", xk, xk) + const_X[rows, None] ** 2)
        # Shapes (c, n_Y, N, N): row of X, row of Y, key i of X, key j of Y.
        key_gram = (xk.reshape(-1, d) @ yk_flat.T).reshape(c, n_keys, -1, n_keys)
        key_gram = key_gram.transpose(0, 2, 1, 3)
        # Cov(<x~_0, W x~_i>, <y~_0, W y~_j>) = s^2 <x~_0, y~_0> <x~_i, y~_j>,
        # x~ = [x; c] with the constant c of the scores.
        constants = const_X[rows, None] * const_Y[None, :]
        inner = (x0 @ y0.T + constants)[:, :, None, None] * (
            key_gram + constants[:, :, None, None]
        )
        norms = (
            (x0_norm[:, None] * y0_norm[None, :])[:, :, None, None]
            * xk_norm[:, None, :, None]
            * yk_norm[None, :, None, :]
        )
        if mu == 0.0:
            pair = _blockwise(_arccos_kernel, inner, norms)
            pair *= s * s
        else:
            x_mean = mu * np.einsum("nd,nid->ni", x0, xk)
            x_std = s * x0_norm[:, None] * xk_norm
            pair = _blockwise(
                _relu_moment,
                x_mean[:, None, :, None],
                y_mean[None, :, None, :],
                x_std[:, None, :, None],
                y_std[None, :, None, :],
                _arccos_rho(inner, norms),
            )
        if not rescaled:
            if value_bias:
                key_gram += 1.0
            K[rows] = np.einsum("abij,abij->ab", key_gram, pair) / n_keys**2
            continue
        # Rescaled: the value-bias part has degree 2, not 3; summed apart, each
        # part is scaled back on its own (no 2^-(a + b) that could overflow).
        K[rows] = np.einsum("abij,abij->ab", key_gram, pair) / n_keys**2
        if value_bias:
            K_bias[rows] = pair.sum(axis=(2, 3)) / n_keys**2
    if not rescaled:
        return K
    K = _scale_back(K, exponents_X, exponents_Y, 3, name)
    if value_bias:
        K += _scale_back(K_bias, exponents_X, exponents_Y, 2, name)
    return K


_ATTENTION_PARAMS = {
    "X": ["array-like"],
    "Y": ["array-like", None],
    "token_dim": _TOKEN_DIM,
    "qk_std": [Interval(Real, 0, None, closed="left"), None],
    "qk_bias": ["boolean"],
    "value_bias": ["boolean"],
}


@validate_params(_ATTENTION_PARAMS, prefer_skip_nested_validation=True)
def rfa_kernel(
    X, Y=None, *, token_dim=None, qk_std=None, qk_bias=True, value_bias=True
):
    """Infinite-head kernel of random-feature attention (zero-mean query-key weights).

    The limit of ``Phi(X) @ Phi(Y).T`` for the features of
    :class:`AttentionRandomFeatures` with ``qk_mean="zero"`` (and the default
    ``activation="relu"``; the softmax features have no closed-form kernel, and
    none is implemented) as ``n_heads`` grows:
    ``K(X, Y) = E_W[phi_W(X) . phi_W(Y)]`` with

    ``phi_W(X) = (1/N) sum_i relu(<x~_0, W x~_i>) [x_i; 1]``,

    ``x~ = [x; 1]`` and ``W`` a ``(d + 1) x (d + 1)`` matrix of i.i.d.
    ``N(0, qk_std^2)`` entries (with ``qk_bias=False``, ``x~ = x`` and ``W``
    is ``d x d``). The kernel is invariant to permuting the keys of ``X`` (or
    of ``Y``).

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_tokens, token_dim) or \
            (n_samples_X, n_tokens * token_dim)
        Token sequences, query first then ``N = n_tokens - 1 >= 1`` keys. 2-D
        input needs ``token_dim``.
    Y : array-like of the same layout as ``X``, default=None
        Second set of sequences; ``None`` means ``Y = X``.
    token_dim : int, default=None
        Token dimension ``d`` when the input is 2-D.
    qk_std : float, default=None
        Standard deviation ``s`` of the query-key entries; ``None`` means
        ``1 / sqrt(d)``. It only scales the kernel, by ``s^2``.
    qk_bias : bool, default=True
        Whether the scores append a constant 1 to the query and the keys
        (the model of Fu et al.), as in :class:`AttentionRandomFeatures`.
    value_bias : bool, default=True
        Whether the value part uses ``[x_i; 1]`` (``True``) or ``x_i``.

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)
        The kernel matrix, float64.

    See Also
    --------
    brfa_kernel : The same with identity-mean query-key weights.
    rfmlp_kernel : Kernel of the two-layer random-feature baseline.
    AttentionRandomFeatures : The finite-width features.

    Notes
    -----
    ``<x~_0, W x~_i> = <W, x~_0 x~_i^T>_F``, so the pre-activations for ``X``
    and ``Y`` are jointly Gaussian, centred, with covariance
    ``s^2 <x~_0, y~_0> <x~_i, y~_j>``. With the arc-cosine kernel
    ``kappa1(r) = (sqrt(1 - r^2) + (pi - arccos r) r) / (2 pi)``,

    .. math::

        K(X, Y) &= \\frac{s^2}{N^2} \\sum_{i,j=1}^{N}
        (\\langle x_i, y_j \\rangle + b)\\,
        \\|\\tilde x_0\\| \\|\\tilde y_0\\| \\|\\tilde x_i\\| \\|\\tilde y_j\\|
        \\,\\kappa_1(\\rho_{ij}), \\\\
        \\rho_{ij} &= \\frac{\\langle \\tilde x_0, \\tilde y_0 \\rangle
        \\langle \\tilde x_i, \\tilde y_j \\rangle}
        {\\|\\tilde x_0\\| \\|\\tilde y_0\\| \\|\\tilde x_i\\| \\|\\tilde y_j\\|},

    where ``b = 1`` with ``value_bias`` and 0 without, and
    ``<x~, y~> = <x, y> + 1`` with ``qk_bias``. The cost is
    ``O(n_X n_Y N^2 d)``; rows of ``X`` are processed in batches that fit
    scikit-learn's ``working_memory``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from sklearn_attn import rfa_kernel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4, 3))          # query + 3 keys in R^3
    >>> y = np.mean(np.einsum("nd,nid->ni", X[:, 0], X[:, 1:]), axis=1)
    >>> K = rfa_kernel(X)
    >>> K.shape
    (50, 50)
    >>> model = KernelRidge(alpha=1e-3, kernel="precomputed").fit(K, y)
    >>> X_new = rng.normal(size=(5, 4, 3))
    >>> model.predict(rfa_kernel(X_new, X)).shape
    (5,)
    """
    return _attention_kernel(
        X, Y, token_dim, 0.0, qk_std, qk_bias, value_bias, "rfa_kernel"
    )


@validate_params(
    {
        **_ATTENTION_PARAMS,
        "qk_mean_scale": [Interval(Real, None, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def brfa_kernel(
    X,
    Y=None,
    *,
    token_dim=None,
    qk_mean_scale=1.0,
    qk_std=None,
    qk_bias=True,
    value_bias=True,
):
    """Infinite-head kernel of biased random-feature attention (identity mean).

    The limit of ``Phi(X) @ Phi(Y).T`` for the features of
    :class:`AttentionRandomFeatures` with ``qk_mean="identity"`` (and the
    default ``activation="relu"``; no kernel of the softmax features is
    implemented) as ``n_heads`` grows: ``K(X, Y) = E_W[phi_W(X) . phi_W(Y)]`` with

    ``phi_W(X) = (1/N) sum_i relu(<x~_0, W x~_i>) [x_i; 1]``,
    ``x~ = [x; 1]``, ``W = mu I + s G`` with the identity on the ``d x d``
    block and ``G`` a ``(d + 1) x (d + 1)`` matrix of i.i.d. standard Gaussian
    entries (with ``qk_bias=False``, ``x~ = x`` and ``W`` is ``d x d``).

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_tokens, token_dim) or \
            (n_samples_X, n_tokens * token_dim)
        Token sequences, query first then ``N = n_tokens - 1 >= 1`` keys. 2-D
        input needs ``token_dim``.
    Y : array-like of the same layout as ``X``, default=None
        Second set of sequences; ``None`` means ``Y = X``.
    token_dim : int, default=None
        Token dimension ``d`` when the input is 2-D.
    qk_mean_scale : float, default=1.0
        The mean scale ``mu``; ``0`` gives :func:`rfa_kernel`.
    qk_std : float, default=None
        Standard deviation ``s`` of the random part; ``None`` means
        ``1 / sqrt(d)``. ``0`` gives the kernel of the single deterministic
        feature map with ``W = mu I``.
    qk_bias : bool, default=True
        Whether the scores append a constant 1 to the query and the keys
        (the model of Fu et al.), as in :class:`AttentionRandomFeatures`.
    value_bias : bool, default=True
        Whether the value part uses ``[x_i; 1]`` (``True``) or ``x_i``.

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)
        The kernel matrix, float64.

    See Also
    --------
    rfa_kernel : The zero-mean case, in closed form without the normal CDF.
    rfmlp_kernel : Kernel of the two-layer random-feature baseline.
    AttentionRandomFeatures : The finite-width features.

    Notes
    -----
    The pre-activations ``U_i = <x~_0, W x~_i>`` and ``U'_j = <y~_0, W y~_j>``
    are jointly Gaussian with means ``m_i = mu <x_0, x_i>``,
    ``m'_j = mu <y_0, y_j>`` (the mean has no constant part), standard
    deviations ``s_i = s ||x~_0|| ||x~_i||``, ``s'_j = s ||y~_0|| ||y~_j||`` and
    correlation ``rho_ij`` as in :func:`rfa_kernel`. Then

    .. math::

        K(X, Y) &= \\frac{1}{N^2} \\sum_{i,j=1}^{N}
        (\\langle x_i, y_j \\rangle + b)\\,
        R(m_i, m'_j, s_i, s'_j, \\rho_{ij}), \\\\
        R &= E[\\mathrm{relu}(U_i)\\, \\mathrm{relu}(U'_j)],

    with ``b = 1`` with ``value_bias`` and 0 without. With ``a = m/s``,
    ``b' = m'/s'``, ``h = -a``, ``k = -b'``,
    ``r = sqrt(1 - rho^2)``, ``phi``/``Phi`` the standard normal pdf/cdf and
    ``Phi2(a, b'; rho)`` the standard bivariate normal cdf (Rosenbaum's
    truncated moments):

    .. math::

        L &= \\Phi_2(a, b'; \\rho), \\quad
        t_1 = \\Phi\\big((\\rho h - k)/r\\big), \\quad
        t_2 = \\Phi\\big((\\rho k - h)/r\\big), \\\\
        E_1 &= \\phi(h) t_1 + \\rho \\phi(k) t_2, \\quad
        E_2 = \\phi(k) t_2 + \\rho \\phi(h) t_1, \\\\
        E_{12} &= \\rho L + \\rho h \\phi(h) t_1 + \\rho k \\phi(k) t_2
        + \\frac{r}{\\sqrt{2\\pi}}
        \\phi\\Big(\\sqrt{(h^2 - 2\\rho h k + k^2)/r^2}\\Big), \\\\
        R &= s s' E_{12} + s m' E_1 + s' m E_2 + m m' L.

    At ``mu = 0`` this reduces to ``s s' kappa1(rho)``, the :func:`rfa_kernel`
    summand. ``Phi2`` is evaluated in vectorised form through Owen's T
    function (:func:`scipy.special.owens_t`); ``rho`` is clipped to
    ``[-1 + 1e-12, 1 - 1e-12]``, and a pre-activation with zero standard
    deviation is treated as the constant ``m``. The cost is
    ``O(n_X n_Y N^2 d)`` plus ``O(n_X n_Y N^2)`` special-function calls.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from sklearn_attn import brfa_kernel, rfa_kernel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4, 3))
    >>> y = np.mean(np.einsum("nd,nid->ni", X[:, 0], X[:, 1:]) ** 2, axis=1)
    >>> K = brfa_kernel(X, qk_mean_scale=1.0)
    >>> model = KernelRidge(alpha=1e-3, kernel="precomputed").fit(K, y)
    >>> model.predict(brfa_kernel(X[:5], X)).shape
    (5,)
    >>> bool(np.allclose(brfa_kernel(X, qk_mean_scale=0.0), rfa_kernel(X)))
    True
    """
    return _attention_kernel(
        X, Y, token_dim, qk_mean_scale, qk_std, qk_bias, value_bias, "brfa_kernel"
    )


# -- MLP kernel ------------------------------------------------------------------------
@validate_params(
    {
        "X": ["array-like"],
        "Y": ["array-like", None],
        "token_dim": _TOKEN_DIM,
        "weight_std": [Interval(Real, 0, None, closed="neither"), None],
        "bias": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def rfmlp_kernel(X, Y=None, *, token_dim=None, weight_std=None, bias=False):
    """Infinite-width kernel of the two-layer random-feature MLP (RFMLP).

    The limit of ``Phi(X) @ Phi(Y).T`` for the features of
    :class:`MLPRandomFeatures` as ``n_features`` grows:
    ``K(X, Y) = E_w[relu(<w, u>) relu(<w, v>)]`` with ``u = vec(X)`` and
    ``v = vec(Y)`` (all tokens concatenated, plus a trailing 1 when ``bias``)
    and ``w ~ N(0, weight_std^2 I)``. It sees tokens by position, so unlike
    :func:`rfa_kernel` it is not invariant to permuting the keys.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_tokens, token_dim) or \
            (n_samples_X, n_features)
        Input sequences. Only ``vec(X)`` matters, so 2-D input without
        ``token_dim`` is read as a single token holding all features.
    Y : array-like of the same layout as ``X``, default=None
        Second set of sequences; ``None`` means ``Y = X``.
    token_dim : int, default=None
        Token dimension when the input is 2-D (it must divide the number of
        columns; otherwise it changes nothing).
    weight_std : float, default=None
        Standard deviation ``s`` of the first-layer weights; ``None`` means
        ``1 / sqrt(len(u))``.
    bias : bool, default=False
        Append a constant 1 to ``u`` (a first-layer bias).

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)
        The kernel matrix, float64.

    See Also
    --------
    rfa_kernel : The attention kernel it is compared with.
    MLPRandomFeatures : The finite-width features.

    Notes
    -----
    ``<w, u>`` and ``<w, v>`` are centred jointly Gaussian with covariance
    ``s^2 <u, v>``, so with the arc-cosine kernel
    ``kappa1(r) = (sqrt(1 - r^2) + (pi - arccos r) r) / (2 pi)``

    .. math::

        K(X, Y) = s^2 \\|u\\| \\|v\\|\\,
        \\kappa_1\\Big(\\frac{\\langle u, v \\rangle}{\\|u\\| \\|v\\|}\\Big),
        \\qquad \\langle u, v \\rangle = [\\text{bias}] +
        \\sum_{i=0}^{N} \\langle x_i, y_i \\rangle .

    With the default ``s^2 = 1 / len(u)`` and ``len(u) = D (+ 1)``,
    ``D = n_tokens * token_dim``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from sklearn_attn import rfmlp_kernel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4, 3))
    >>> y = np.mean(np.einsum("nd,nid->ni", X[:, 0], X[:, 1:]), axis=1)
    >>> K = rfmlp_kernel(X, bias=True)
    >>> model = KernelRidge(alpha=1e-3, kernel="precomputed").fit(K, y)
    >>> model.predict(rfmlp_kernel(X[:5], X, bias=True)).shape
    (5,)
    """
    X, Y = _check_tokens(X, Y, token_dim, min_tokens=1, flat_ok=True)
    # K(2^a X, 2^b Y) = 2^(a + b) K(X, Y) with the bias 1 replaced by 2^-a, 2^-b.
    # With the bias u = [vec X; 1] has an entry 1: small rows need no scaling.
    U, exponents_U = _rescaled(X.reshape(X.shape[0], -1), only_down=bias)
    V, exponents_V = _rescaled(Y.reshape(Y.shape[0], -1), only_down=bias)
    n_inputs = U.shape[1] + int(bias)
    s = 1.0 / math.sqrt(n_inputs) if weight_std is None else float(weight_std)
    bias_U = np.ldexp(float(bias), -exponents_U)
    bias_V = np.ldexp(float(bias), -exponents_V)
    u_norm = np.sqrt(np.einsum("nd,nd->n", U, U) + bias_U * bias_U)
    v_norm = np.sqrt(np.einsum("nd,nd->n", V, V) + bias_V * bias_V)
    inner = U @ V.T
    if bias:
        inner += bias_U[:, None] * bias_V[None, :]
    K = (s * s) * _arccos_kernel(inner, u_norm[:, None] * v_norm[None, :])
    return _scale_back(K, exponents_U, exponents_V, 1, "rfmlp_kernel")

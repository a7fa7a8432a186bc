"""Max-margin (hard-margin SVM) problems on attention weights, solved with SciPy.

A one-layer softmax attention classifier with a fixed value head ``v`` and a
query ``z_i`` per sequence puts attention ``softmax_t(x_{i,t}^T W z_i)`` on the
tokens of sequence ``i``. The loss is smallest when all attention sits on the
optimal token ``opt_i = argmax_t y_i v^T x_{i,t}``, and the attention weights
that achieve this with a unit margin form the polyhedron

.. math::

    C = \\{W : (x_{i,\\mathrm{opt}_i} - x_{i,t})^T W z_i \\ge 1
    \\text{ for every } i \\text{ and } t \\ne \\mathrm{opt}_i\\}.

Gradient descent converges in direction to the point of ``C`` of smallest norm,
which norm depending on the parametrization (Tarzanagh et al., 2023; Sheen et
al., 2024): the Frobenius norm for a combined ``W``, the nuclear norm for
``W = K Q^T`` with ``K``, ``Q`` trained separately, and for diagonal weights
``W = diag(w)`` the l2 and l1 norms of ``w``.

The four problems are solved without a modelling language:

* ``"l1"``: a linear program (HiGHS through :func:`scipy.optimize.linprog`);
* ``"l2"`` and ``"frobenius"``: least-distance programming, reduced to a
  non-negative least-squares problem and solved exactly by the Lawson-Hanson
  active-set method (:func:`scipy.optimize.nnls`);
* ``"nuclear"``: the Burer-Monteiro factorisation ``W = U V^T``,
  ``min (||U||^2 + ||V||^2) / 2`` under the same constraints, by SLSQP from
  several starts, keeping the lowest ``||W||_* / margin(W)``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.optimize import linprog, minimize, nnls
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from threadpoolctl import threadpool_limits

__all__ = ["attention_margin", "max_margin_feasible", "max_margin_svm"]

_STRUCTURE_OF_NORM = {
    "frobenius": "full",
    "nuclear": "full",
    "l2": "diagonal",
    "l1": "diagonal",
}
# Relative size of the NNLS residual below which the least-distance problem is
# declared infeasible (the residual is 1 when the origin cannot be separated).
_LDP_INFEASIBLE = 1e-10
# Constraints within this relative distance of the margin count as active when
# the dual certificate of the nuclear-norm problem is assembled.
_ACTIVE_TOL = 1e-6


# -- problem validation and constraints ------------------------------------------------
def _check_problem(X, z, y, v, opt=None, *, allow_batch=False):
    """Validate a classification problem and return it with a batch axis.

    Returns ``(X, z, y, v, opt, batched)`` with shapes ``(B, n, T, d)``,
    ``(B, n, d)``, ``(B, n)``, ``(B, d)``, ``(B, n)`` (``B = 1`` for a single
    problem). Arrays are float64 (int for ``opt``); the inputs are not modified.
    """
    X = check_array(X, allow_nd=True, dtype=np.float64, ensure_2d=False, input_name="X")
    batched = X.ndim == 4
    if X.ndim != 3 and not (allow_batch and batched):
        expected = "3-D (n_samples, n_tokens, dim)"
        if allow_batch:
            expected += " or 4-D (n_problems, n_samples, n_tokens, dim)"
        raise ValueError(f"X must be {expected}; got an array of shape {X.shape}.")
    if not batched:
        X = X[None]
    B, n, T, d = X.shape
    if T < 2:
        raise ValueError(f"X must have at least 2 tokens per sequence; got {T}.")

    def _as(name, value, shape):
        arr = check_array(
            value, allow_nd=True, dtype=np.float64, ensure_2d=False, input_name=name
        )
        full = (B, *shape)
        if arr.shape != (full if batched else full[1:]):
            raise ValueError(
                f"{name} must have shape {full if batched else full[1:]} to match X "
                f"of shape {X.shape if batched else X.shape[1:]}; got {arr.shape}."
            )
        return arr if batched else arr[None]

    z = _as("z", z, (n, d))
    y = _as("y", y, (n,))
    v = _as("v", v, (d,))
    if not np.all(np.abs(y) == 1):
        raise ValueError(f"y must contain only -1 and +1; got values {np.unique(y)}.")
    gamma = y[:, :, None] * np.einsum("bntd,bd->bnt", X, v)
    if opt is None:
        opt = np.argmax(gamma, axis=2)
    else:
        opt = np.asarray(opt)
        if opt.shape != (B, n)[0 if batched else 1 :] or not np.issubdtype(
            opt.dtype, np.integer
        ):
            raise ValueError(
                f"opt must be an integer array of shape {(B, n)[0 if batched else 1 :]}"
                f"; got {opt!r}."
            )
        if opt.size and (opt.min() < 0 or opt.max() >= T):
            raise ValueError(f"opt must be token indices in [0, {T}); got {opt!r}.")
        opt = opt.reshape(B, n).astype(np.intp)
    return X, z, y, v, opt, batched


def _constraint_vectors(X, z, opt):
    """``a_j = x_{i,opt_i} - x_{i,t}`` and ``b_j = z_i`` for every ``t != opt_i``.

    Single problem (no batch axis); returns two arrays of shape ``(m, d)``, with
    ``m = n (T - 1)``, such that constraint ``j`` reads ``a_j^T W b_j >= 1``.
    """
    n, T, _ = X.shape
    rows = np.arange(n)
    diff = X[rows, opt][:, None, :] - X
    keep = np.ones((n, T), dtype=bool)
    keep[rows, opt] = False
    return diff[keep], np.repeat(z, T - 1, axis=0)


def _constraint_matrix(a, b, structure):
    """Rows ``vec(a_j b_j^T)`` (row-major ``vec``), or ``a_j * b_j`` if diagonal."""
    if structure == "diagonal":
        return a * b
    return (a[:, :, None] * b[:, None, :]).reshape(a.shape[0], -1)


def _as_matrix(W, d):
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 1:
        W = np.diag(W)
    if W.shape != (d, d):
        raise ValueError(
            f"W must have shape ({d}, {d}), ({d},) or, for a stack, "
            f"(n_weights, {d}, {d}); got {W.shape}."
        )
    return W


# -- public helpers --------------------------------------------------------------------
@validate_params(
    {
        "W": ["array-like"],
        "X": ["array-like"],
        "z": ["array-like"],
        "y": ["array-like"],
        "v": ["array-like"],
        "opt": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def attention_margin(W, X, z, y, v, *, opt=None):
    """Margin of attention weights: ``min_{i, t != opt_i} (x_opt - x_t)^T W z_i``.

    Positive exactly when ``W`` ranks the optimal token first in every sequence;
    ``W / attention_margin(W, ...)`` then satisfies every SVM constraint with
    equality at the tightest one. A stack of weights (e.g. the checkpoints of
    one training run) gets one margin each.

    Parameters
    ----------
    W : array-like of shape (dim, dim), (dim,) or (n_weights, dim, dim)
        Attention weights; a vector is read as ``diag(W)``, a 3-D array as a
        stack of matrices.
    X : array-like of shape (n_samples, n_tokens, dim)
        Tokens.
    z : array-like of shape (n_samples, dim)
        Queries.
    y : array-like of shape (n_samples,)
        Labels in ``{-1, +1}``.
    v : array-like of shape (dim,)
        Fixed value head.
    opt : array-like of shape (n_samples,), default=None
        Index of the token to select in each sequence; ``None`` uses
        ``argmax_t y_i v^T x_{i,t}``.

    Returns
    -------
    margin : float or ndarray of shape (n_weights,)
        The margin of ``W``, or of each matrix of a stack.

    See Also
    --------
    max_margin_svm : The weights of largest margin for a given norm.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import attention_margin
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> z, y, v = np.array([[1.0, 0.0]]), np.array([1.0]), np.array([1.0, 0.0])
    >>> float(attention_margin(np.eye(2), X, z, y, v))
    1.0
    >>> attention_margin(np.stack([np.eye(2), -np.eye(2)]), X, z, y, v).tolist()
    [1.0, -1.0]
    """
    X, z, _, _, opt, _ = _check_problem(X, z, y, v, opt)
    a, b = _constraint_vectors(X[0], z[0], opt[0])
    d = X.shape[-1]
    if np.ndim(W) == 3:
        W = np.asarray(W, dtype=np.float64)
        if W.shape[1:] != (d, d):
            raise ValueError(
                f"W must have shape (n_weights, {d}, {d}) for a stack; got {W.shape}."
            )
        return np.einsum("jk,ckl,jl->cj", a, W, b).min(axis=1)
    W = _as_matrix(W, d)
    return float(np.min(np.einsum("jk,kl,jl->j", a, W, b)))


@validate_params(
    {
        "X": ["array-like"],
        "z": ["array-like"],
        "y": ["array-like"],
        "v": ["array-like"],
        "structure": [StrOptions({"full", "diagonal"})],
        "opt": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def max_margin_feasible(X, z, y, v, *, structure="full", opt=None):
    """Whether some attention weights select the optimal token in every sequence.

    Solves the linear feasibility problem ``(x_opt - x_t)^T W z_i >= 1`` for
    all ``i`` and ``t != opt_i`` with HiGHS (:func:`scipy.optimize.linprog`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, dim)
        Tokens.
    z : array-like of shape (n_samples, dim)
        Queries.
    y : array-like of shape (n_samples,)
        Labels in ``{-1, +1}``.
    v : array-like of shape (dim,)
        Fixed value head.
    structure : {"full", "diagonal"}, default="full"
        Search over full matrices ``W`` or diagonal ones ``diag(w)``.
    opt : array-like of shape (n_samples,), default=None
        Token to select in each sequence; ``None`` uses
        ``argmax_t y_i v^T x_{i,t}``.

    Returns
    -------
    feasible : bool

    See Also
    --------
    max_margin_svm : The max-margin weights of a feasible problem.

    Examples
    --------
    >>> from sklearn_attn.attention import (
    ...     make_max_margin_attention_data)
    >>> from sklearn_attn.attention import max_margin_feasible
    >>> X, z, y, v, opt = make_max_margin_attention_data(6, 4, 8, random_state=0)
    >>> max_margin_feasible(X, z, y, v)
    True
    """
    X, z, _, _, opt, _ = _check_problem(X, z, y, v, opt)
    return _feasible(X[0], z[0], opt[0], structure)


def _feasible(X, z, opt, structure):
    a, b = _constraint_vectors(X, z, opt)
    A = _constraint_matrix(a, b, structure)
    result = linprog(
        np.zeros(A.shape[1]),
        A_ub=-A,
        b_ub=-np.ones(A.shape[0]),
        bounds=(None, None),
        method="highs",
    )
    if result.status not in (0, 2):  # pragma: no cover - HiGHS failure
        raise RuntimeError(f"Feasibility LP failed: {result.message}")
    return result.status == 0


@validate_params(
    {
        "X": ["array-like"],
        "z": ["array-like"],
        "y": ["array-like"],
        "v": ["array-like"],
        "norm": [StrOptions(set(_STRUCTURE_OF_NORM))],
        "opt": ["array-like", None],
        "n_starts": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def max_margin_svm(
    X, z, y, v, *, norm="frobenius", opt=None, n_starts=6, random_state=None
):
    """Attention weights of smallest norm that select the optimal tokens.

    Solves ``min ||W|| subject to (x_{i,opt_i} - x_{i,t})^T W z_i >= 1`` for
    all ``i`` and ``t != opt_i``, the limit direction of gradient descent on
    the attention classifier (see :func:`train_attention_classifier`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, dim)
        Tokens.
    z : array-like of shape (n_samples, dim)
        Queries.
    y : array-like of shape (n_samples,)
        Labels in ``{-1, +1}``.
    v : array-like of shape (dim,)
        Fixed value head.
    norm : {"frobenius", "nuclear", "l2", "l1"}, default="frobenius"
        ``"frobenius"`` and ``"nuclear"`` search over full matrices (limits of
        the combined and of the separate ``(K, Q)`` parametrization);
        ``"l2"`` and ``"l1"`` over diagonal matrices ``diag(w)`` with the
        norm of ``w`` (the same two limits for diagonal weights).
    opt : array-like of shape (n_samples,), default=None
        Token to select in each sequence; ``None`` uses
        ``argmax_t y_i v^T x_{i,t}``.
    n_starts : int, default=6
        Nuclear norm only: number of Burer-Monteiro starts (the first from the
        balanced factorisation of the Frobenius solution, the others random).
    random_state : int, RandomState instance or None, default=None
        Nuclear norm only: draws the random starts.

    Returns
    -------
    W : ndarray of shape (dim, dim)
        The solution, scaled so that its margin (smallest constraint value) is
        exactly 1; diagonal for ``"l1"`` and ``"l2"`` (``np.diag(W)`` is ``w``).
    value : float
        Its norm, which is the optimal ``norm / margin``. Exact (to solver
        tolerance) for ``"l1"``, ``"l2"`` and ``"frobenius"``; for
        ``"nuclear"`` the best local solution found from the ``n_starts``
        starts, an upper bound on the optimal value (a local method on a
        non-convex factorisation).

    Raises
    ------
    ValueError
        If no weights of the given structure separate the optimal tokens.

    See Also
    --------
    max_margin_feasible : Check feasibility first.
    attention_margin : Margin of any weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import (
    ...     make_max_margin_attention_data)
    >>> from sklearn_attn.attention import max_margin_svm
    >>> X, z, y, v, opt = make_max_margin_attention_data(6, 4, 8, random_state=0)
    >>> W_fro, fro = max_margin_svm(X, z, y, v, norm="frobenius")
    >>> W_nuc, nuc = max_margin_svm(X, z, y, v, norm="nuclear", random_state=0)
    >>> bool(np.linalg.norm(W_nuc, "nuc") <= np.linalg.norm(W_fro, "nuc"))
    True
    """
    X, z, _, _, opt, _ = _check_problem(X, z, y, v, opt)
    X, z, opt = X[0], z[0], opt[0]
    structure = _STRUCTURE_OF_NORM[norm]
    a, b = _constraint_vectors(X, z, opt)
    d = X.shape[-1]
    if norm == "l1":
        w = _l1_svm(_constraint_matrix(a, b, structure))
        W = np.diag(w)
    elif norm in ("l2", "frobenius"):
        w = _min_norm_svm(_constraint_matrix(a, b, structure), structure)
        W = np.diag(w) if structure == "diagonal" else w.reshape(d, d)
    else:
        W_fro = _min_norm_svm(_constraint_matrix(a, b, "full"), "full").reshape(d, d)
        W = _nuclear_svm(a, b, W_fro, n_starts, check_random_state(random_state))
    margin = float(np.min(np.einsum("jk,kl,jl->j", a, W, b)))
    W = W / margin
    value = {
        "l1": lambda: np.abs(np.diag(W)).sum(),
        "l2": lambda: np.linalg.norm(np.diag(W)),
        "frobenius": lambda: np.linalg.norm(W),
        "nuclear": lambda: np.linalg.norm(W, "nuc"),
    }[norm]()
    return W, float(value)


# -- solvers ---------------------------------------------------------------------------
def _infeasible(structure):
    return ValueError(
        f"No {structure} attention weights select the optimal token in every "
        "sequence (the max-margin problem is infeasible); draw another instance "
        "or pass other opt indices."
    )


def _l1_svm(A):
    """``min ||w||_1 s.t. A w >= 1`` as an LP in ``w = p - q``, ``p, q >= 0``."""
    m, p = A.shape
    result = linprog(
        np.ones(2 * p),
        A_ub=-np.hstack([A, -A]),
        b_ub=-np.ones(m),
        bounds=(0, None),
        method="highs",
    )
    if result.status == 2:
        raise _infeasible("diagonal")
    if result.status != 0:  # pragma: no cover - HiGHS failure
        raise RuntimeError(f"l1 max-margin LP failed: {result.message}")
    return result.x[:p] - result.x[p:]


def _min_norm_svm(A, structure):
    """``min ||w||_2 s.t. A w >= 1`` exactly, by least-distance programming.

    Lawson and Hanson (1974, ch. 23): with ``E = [A^T; 1^T]`` and
    ``f = (0, ..., 0, 1)``, solve the NNLS problem ``min ||E u - f||, u >= 0``;
    the residual ``r = E u - f`` gives ``w = -r[:p] / r[p]``, and ``r = 0``
    means the constraints are incompatible. ``u`` is proportional to the dual
    variables, so the active set is exact, not approached as in a penalty
    method.
    """
    m, p = A.shape
    E = np.vstack([A.T, np.ones((1, m))])
    f = np.zeros(p + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + p + 1))
    r = E @ u - f
    if np.linalg.norm(r) < _LDP_INFEASIBLE or r[-1] >= 0:
        raise _infeasible(structure)
    return -r[:p] / r[-1]


def _nuclear_objective(params):
    return 0.5 * params @ params, params


def _nuclear_svm(a, b, W_fro, n_starts, rng):
    """Burer-Monteiro: ``min (||U||^2 + ||V||^2) / 2 s.t. a_j^T U V^T b_j >= 1``.

    At a minimum ``U U^T`` and ``V V^T`` are balanced and the objective equals
    ``||U V^T||_*`` (the variational form of the nuclear norm). Full rank
    ``r = d`` factors leave no spurious low-rank constraint.
    """
    m, d = a.shape
    r = d

    def split(params):
        return params[: d * r].reshape(d, r), params[d * r :].reshape(d, r)

    def constraints(params):
        U, V = split(params)
        return np.sum((a @ U) * (b @ V), axis=1) - 1.0

    def jacobian(params):
        U, V = split(params)
        aU, bV = a @ U, b @ V
        return np.hstack(
            [
                (a[:, :, None] * bV[:, None, :]).reshape(m, d * r),
                (b[:, :, None] * aU[:, None, :]).reshape(m, d * r),
            ]
        )

    # First start: the balanced factors of the Frobenius solution (feasible).
    P, s, Qt = np.linalg.svd(W_fro)
    starts = [np.concatenate([(P * np.sqrt(s)).ravel(), (Qt.T * np.sqrt(s)).ravel()])]
    scale = np.sqrt(s.sum() / (d * r))
    starts += [scale * rng.standard_normal(2 * d * r) for _ in range(n_starts - 1)]
    best, best_value = None, np.inf
    for x0 in starts:
        # Tiny matrices: threaded BLAS costs more in synchronisation than it
        # gains here, and NumPy's and SciPy's pools would compete for the cores.
        with threadpool_limits(1):
            result = minimize(
                _nuclear_objective,
                x0,
                jac=True,
                method="SLSQP",
                constraints=[{"type": "ineq", "fun": constraints, "jac": jacobian}],
                options={"maxiter": 1000, "ftol": 1e-15},
            )
        U, V = split(result.x)
        W = U @ V.T
        margin = np.min(np.einsum("jk,kl,jl->j", a, W, b))
        if not margin > 0:
            continue
        value = np.linalg.norm(W, "nuc") / margin
        if value < best_value:
            best, best_value = W, value
    if best is None:  # pragma: no cover - the Frobenius start is feasible
        raise RuntimeError("The nuclear-norm SVM found no feasible solution.")
    return best


def _nuclear_dual_bound(a, b, W):
    """A lower bound on ``min ||W||_* s.t. a_j^T W b_j >= 1`` from ``W``.

    Weak duality: for ``alpha >= 0`` and ``M = sum_j alpha_j a_j b_j^T``, every
    feasible ``W'`` has ``||W'||_* >= <M, W'> / ||M||_2 >= sum(alpha) /
    ||M||_2``. ``alpha`` is fitted on the constraints active at ``W`` to the
    stationarity conditions ``M V = U``, ``M^T U = V`` of the balanced
    factorisation ``W = U V^T`` (non-negative least squares); at an exact
    solution the bound equals ``||W||_*``.
    """
    values = np.einsum("jk,kl,jl->j", a, W, b)
    W = W / values.min()
    active = values / values.min() <= 1 + _ACTIVE_TOL
    a, b = a[active], b[active]
    P, s, Qt = np.linalg.svd(W)
    keep = s > s[0] * 1e-9
    U, V = P[:, keep] * np.sqrt(s[keep]), Qt[keep].T * np.sqrt(s[keep])
    columns = np.hstack(
        [
            np.einsum("jk,jl,lr->jkr", a, b, V).reshape(len(a), -1),
            np.einsum("jl,jk,kr->jlr", b, a, U).reshape(len(a), -1),
        ]
    ).T
    alpha, _ = nnls(columns, np.concatenate([U.ravel(), V.ravel()]))
    M = np.einsum("j,jk,jl->kl", alpha, a, b)
    return float(alpha.sum() / np.linalg.norm(M, 2))

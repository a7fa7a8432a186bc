"""Limited-memory BFGS for large smooth problems, without bounds.

SciPy's L-BFGS-B spends, on a problem with ``n`` unknowns and ``m`` stored
pairs, time and memory that grow as ``m n`` on work it needs for bounds: on the
600,000 couplings of a protein family it spends 0.1 s (``m = 5``) to 0.4 s
(``m = 20``) per iteration outside the objective, as much as an evaluation of
the objective itself, and ``(2 m + 5) n`` doubles. Without bounds, L-BFGS is
the two-loop recursion (Nocedal and Wright, *Numerical Optimization*,
algorithm 7.4): ``4 m n`` flops in a few BLAS calls per iteration, and ``2 m n``
stored numbers, here in single precision when asked.

The step is found by backtracking from the unit step (which the scaled
recursion makes the natural one), with the Armijo condition; a pair
``(s, y)`` whose curvature ``s . y`` is not positive is not stored, so the
inverse-Hessian model stays positive definite on non-convex problems too.

The stopping rules are L-BFGS-B's: the relative decrease
``(f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol``, or the largest gradient
entry ``<= gtol``. Nothing here knows about scikit-learn or the device: the
vectors are NumPy arrays on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["minimize_lbfgs", "LBFGSResult"]

# Armijo's sufficient-decrease constant (the usual 1e-4), and the backtracking
# factor bounds of a safeguarded quadratic interpolation.
_ARMIJO = 1e-4
_SHRINK_MIN, _SHRINK_MAX = 0.1, 0.5
_MAX_BACKTRACKS = 30


@dataclass
class LBFGSResult:
    """What :func:`minimize_lbfgs` returns.

    ``status`` is 0 when a tolerance was reached, 1 when ``max_iter`` or
    ``max_fun`` stopped the run first, 2 when no step along the search direction
    decreased the objective (round-off dominates: the run is at the objective's
    floating-point floor).
    """

    x: np.ndarray
    fun: float
    jac: np.ndarray
    nit: int
    nfev: int
    status: int
    message: str


def minimize_lbfgs(
    fun,
    x0,
    *,
    max_iter=500,
    max_fun=None,
    ftol=1e-7,
    gtol=1e-7,
    history=10,
    history_dtype=np.float64,
    callback=None,
):
    """Minimise ``fun`` from ``x0`` by L-BFGS with a backtracking line search.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (value, gradient)``, with ``value`` a float and
        ``gradient`` an array shaped like ``x``.
    x0 : ndarray of shape (n,)
        Starting point (not modified).
    max_iter : int, default=500
        Maximum number of iterations (accepted steps).
    max_fun : int or None, default=None
        Maximum number of evaluations of ``fun``; ``None`` means
        ``20 * max_iter + 20``.
    ftol, gtol : float, default=1e-7
        L-BFGS-B's tolerances on the relative decrease and on the largest
        gradient entry.
    history : int, default=10
        Number of stored pairs ``m``.
    history_dtype : dtype, default=np.float64
        Storage of the pairs; ``np.float32`` halves their memory. The
        recursion's inner products accumulate in double precision.
    callback : callable or None, default=None
        Called as ``callback(iteration, x, value)`` after each iteration.

    Returns
    -------
    result : LBFGSResult
    """
    x = np.array(x0, dtype=np.float64)
    n = x.size
    if max_fun is None:
        max_fun = 20 * max_iter + 20
    s_hist = np.empty((history, n), dtype=history_dtype)
    y_hist = np.empty((history, n), dtype=history_dtype)
    rho = np.empty(history)
    n_pairs, newest = 0, -1
    value, grad = fun(x)
    value = float(value)
    n_fev = 1
    status, message = 1, f"max_iter={max_iter} iterations reached"
    n_iter = 0
    if np.abs(grad).max(initial=0.0) <= gtol:
        status, message = 0, "gradient below gtol at the start"
        max_iter = 0
    while n_iter < max_iter:
        order = [(newest - k) % history for k in range(n_pairs)]
        direction = -_two_loop(grad, s_hist, y_hist, rho, order)
        slope = float(direction @ grad)
        if slope >= 0:  # round-off broke the model: restart along -grad
            n_pairs = 0
            direction = -grad
            slope = -float(grad @ grad)
        # Unit step, except on the first iteration with no curvature known: a
        # step of unit length, as L-BFGS-B takes.
        step = 1.0 if n_pairs else min(1.0, 1.0 / np.sqrt(-slope))
        for _ in range(_MAX_BACKTRACKS):
            x_new = x + step * direction
            value_new, grad_new = fun(x_new)
            value_new = float(value_new)
            n_fev += 1
            if np.isfinite(value_new) and value_new <= value + _ARMIJO * step * slope:
                break
            if n_fev >= max_fun:
                break
            excess = value_new - value - step * slope
            if np.isfinite(excess) and excess > 0:
                shrink = -slope * step / (2.0 * excess)
            else:
                shrink = _SHRINK_MIN
            step *= min(max(shrink, _SHRINK_MIN), _SHRINK_MAX)
        else:
            value_new = np.inf
        if not (np.isfinite(value_new) and value_new <= value + _ARMIJO * step * slope):
            if n_fev >= max_fun:
                status, message = 1, f"max_fun={max_fun} evaluations reached"
            else:
                status, message = 2, "no decrease along the search direction"
            break
        s = x_new - x
        y = grad_new - grad
        curvature = float(s @ y)
        if curvature > 1e-10 * np.sqrt(float(s @ s) * float(y @ y)):
            newest = (newest + 1) % history
            s_hist[newest] = s
            y_hist[newest] = y
            rho[newest] = 1.0 / curvature
            n_pairs = min(n_pairs + 1, history)
        decrease = (value - value_new) / max(abs(value), abs(value_new), 1.0)
        x, value, grad = x_new, value_new, grad_new
        n_iter += 1
        if callback is not None:
            callback(n_iter, x, value)
        if decrease <= ftol:
            status, message = 0, "relative decrease below ftol"
            break
        if np.abs(grad).max() <= gtol:
            status, message = 0, "gradient below gtol"
            break
        if n_fev >= max_fun and n_iter < max_iter:
            status, message = 1, f"max_fun={max_fun} evaluations reached"
            break
    return LBFGSResult(x, value, grad, n_iter, n_fev, status, message)


def _two_loop(grad, s_hist, y_hist, rho, order):
    """The L-BFGS product ``H grad``, newest pair first in ``order``."""
    q = grad.astype(np.float64, copy=True)
    if not order:
        return q
    alpha = np.empty(len(order))
    for k, slot in enumerate(order):
        alpha[k] = rho[slot] * float(s_hist[slot] @ q)
        q -= alpha[k] * y_hist[slot]
    newest = order[0]
    y = y_hist[newest]
    q *= 1.0 / (rho[newest] * float(y @ y))  # gamma = s.y / y.y
    for k in reversed(range(len(order))):
        slot = order[k]
        beta = rho[slot] * float(y_hist[slot] @ q)
        q += (alpha[k] - beta) * s_hist[slot]
    return q

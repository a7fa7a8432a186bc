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

The stopping rules are L-BFGS-B's, the relative decrease
``(f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol`` or the largest gradient
entry ``<= gtol``, with one difference: the decrease must stay below ``ftol``
on two iterations in a row. A backtracked step can be short and decrease the
objective little while it still falls steadily (seen on factored Potts fits,
which stopped one step after a decrease of 5e-8 amid steps of 5e-6).

Nothing here knows about scikit-learn or the device: the vectors are NumPy
arrays on the host.
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
    initial_step=None,
    callback=None,
):
    """Minimise ``fun`` from ``x0`` by L-BFGS with a backtracking line search.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (value, gradient)``, with ``value`` a float and
        ``gradient`` a new float64 array shaped like ``x``.
    x0 : ndarray of shape (n,), or callable
        Starting point (not modified), or a function of no arguments that
        returns it: then no caller holds a reference to the start, whose
        memory goes back at the first step.
    max_iter : int, default=500
        Maximum number of iterations (accepted steps).
    max_fun : int or None, default=None
        Maximum number of evaluations of ``fun``; ``None`` means
        ``20 * max_iter + 20``.
    ftol, gtol : float, default=1e-7
        Tolerances on the relative decrease (below ``ftol`` on two iterations
        in a row) and on the largest gradient entry.
    history : int, default=10
        Number of stored pairs ``m``.
    history_dtype : {np.float64, np.float32}, default=np.float64
        Storage of the pairs, and precision of the recursion. ``np.float32``
        halves the memory of the pairs; the curvatures ``s . y`` that weigh
        them are computed in double precision before they are stored.
    initial_step : float or None, default=None
        Length of the first trial step along ``-gradient``, in units of the
        gradient; ``None`` takes a step of unit Euclidean length, as L-BFGS-B
        does. ``1.0`` suits a problem scaled so that its Hessian is about the
        identity.
    callback : callable or None, default=None
        Called as ``callback(iteration, x, value)`` after each iteration.

    Returns
    -------
    result : LBFGSResult
    """
    if callable(x0):
        x0 = x0()
    x = np.asarray(x0, dtype=np.float64)  # never written to: steps make new arrays
    del x0  # x is rebound at the first step: the start need not stay in memory
    n = x.size
    if max_fun is None:
        max_fun = 20 * max_iter + 20
    s_hist = np.empty((history, n), dtype=history_dtype)
    y_hist = np.empty((history, n), dtype=history_dtype)
    rho = np.empty(history)
    n_pairs, newest = 0, -1
    small_decreases = 0
    value, grad = fun(x)
    value = float(value)
    n_fev = 1
    status, message = 1, f"max_iter={max_iter} iterations reached"
    n_iter = 0
    if _largest_magnitude(grad) <= gtol:
        status, message = 0, "gradient below gtol at the start"
        max_iter = 0
    while n_iter < max_iter:
        order = [(newest - k) % history for k in range(n_pairs)]
        direction = _two_loop(grad, s_hist, y_hist, rho, order)
        np.negative(direction, out=direction)
        slope = _dot(direction, grad)
        if slope >= 0:  # round-off broke the model: restart along -grad
            n_pairs = 0
            np.negative(grad, out=direction)
            slope = -_dot(grad, grad)
        if n_pairs:
            step = 1.0
        elif initial_step is None:
            step = 1.0 / np.sqrt(-slope)
        else:
            step = initial_step
        # x_new = x + step * direction; the direction is not kept during the
        # evaluations (backtracking rescales x_new - x instead), which saves
        # a vector of the problem's size at the peak of memory.
        x_new = np.multiply(direction, step, out=direction)
        x_new += x
        del direction
        for _ in range(_MAX_BACKTRACKS):
            value_new, grad_new = fun(x_new)
            value_new = float(value_new)
            n_fev += 1
            if _sufficient_decrease(value_new, value, step * slope):
                break
            if n_fev >= max_fun:
                break
            del grad_new
            # Minimiser of the quadratic through f(0), f'(0) and f(step).
            excess = value_new - value - step * slope
            if np.isfinite(excess) and excess > 0:
                shrink = -slope * step / (2.0 * excess)
            else:
                shrink = _SHRINK_MIN
            shrink = min(max(shrink, _SHRINK_MIN), _SHRINK_MAX)
            step *= shrink
            x_new -= x
            x_new *= shrink
            x_new += x
        else:
            value_new = np.inf
        if not _sufficient_decrease(value_new, value, step * slope):
            if n_fev >= max_fun:
                status, message = 1, f"max_fun={max_fun} evaluations reached"
            else:
                status, message = 2, "no decrease along the search direction"
            break
        # s and y go straight into the slot of the oldest pair.
        slot = (newest + 1) % history
        curvature, s_norm2, y_norm2 = _store_step(
            x_new, x, grad_new, grad, s_hist[slot], y_hist[slot]
        )
        if curvature > 1e-10 * np.sqrt(s_norm2 * y_norm2):
            newest = slot
            rho[slot] = 1.0 / curvature
            n_pairs = min(n_pairs + 1, history)
        elif n_pairs == history:  # the oldest pair was overwritten
            n_pairs -= 1
        decrease = (value - value_new) / max(abs(value), abs(value_new), 1.0)
        x, value, grad = x_new, value_new, grad_new
        n_iter += 1
        if callback is not None:
            callback(n_iter, x, value)
        small_decreases = small_decreases + 1 if decrease <= ftol else 0
        if small_decreases >= 2:
            status, message = 0, "relative decrease below ftol twice in a row"
            break
        if _largest_magnitude(grad) <= gtol:
            status, message = 0, "gradient below gtol"
            break
        if n_fev >= max_fun and n_iter < max_iter:
            status, message = 1, f"max_fun={max_fun} evaluations reached"
            break
    return LBFGSResult(x, value, grad, n_iter, n_fev, status, message)


# Vector operations avoid BLAS: its level-1 routines wake every thread of the
# pool for each call, which on a busy machine costs ten times the arithmetic.
# einsum's own loops and NumPy's ufuncs, over chunks, need no temporaries of
# the size of the problem.
_CHUNK = 2**16


def _dot(a, b):
    return float(np.einsum("i,i", a, b, dtype=np.float64))


def _axpy(a, x, y):
    """``y += a * x`` in place."""
    buffer = np.empty(min(_CHUNK, y.size), dtype=y.dtype)
    for start in range(0, y.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        scaled = np.multiply(x[part], a, out=buffer[: y[part].size])
        y[part] += scaled


def _sufficient_decrease(value_new, value, predicted):
    """Armijo's condition, and a real decrease: a step too short to change the
    objective's floating-point value is no step (the run is at its floor)."""
    return bool(
        np.isfinite(value_new)
        and value_new < value
        and value_new <= value + _ARMIJO * predicted
    )


def _largest_magnitude(v):
    """``max |v_i|`` (0 for an empty vector) without a temporary of ``v``'s size."""
    if v.size == 0:
        return 0.0
    return max(float(v.max()), -float(v.min()))


def _store_step(x_new, x, grad_new, grad, s_out, y_out):
    """``s = x_new - x`` and ``y = grad_new - grad`` into ``s_out`` and ``y_out``
    (in their dtype), and ``s . y``, ``s . s``, ``y . y`` of the float64
    differences, in one pass over the four vectors, chunk by chunk."""
    sy = ss = yy = 0.0
    s = np.empty(min(_CHUNK, x.size))
    y = np.empty_like(s)
    for start in range(0, x.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        size = x[part].size
        s_part = np.subtract(x_new[part], x[part], out=s[:size])
        y_part = np.subtract(grad_new[part], grad[part], out=y[:size])
        s_out[part] = s_part
        y_out[part] = y_part
        sy += _dot(s_part, y_part)
        ss += _dot(s_part, s_part)
        yy += _dot(y_part, y_part)
    return sy, ss, yy


def _two_loop(grad, s_hist, y_hist, rho, order):
    """The L-BFGS product ``H grad`` (a new float64 array), newest pair first."""
    q = grad.astype(s_hist.dtype, copy=True)
    if order:
        alpha = np.empty(len(order))
        for k, slot in enumerate(order):
            alpha[k] = rho[slot] * _dot(s_hist[slot], q)
            _axpy(-alpha[k], y_hist[slot], q)
        newest = order[0]
        q *= 1.0 / (rho[newest] * _dot(y_hist[newest], y_hist[newest]))
        for k in reversed(range(len(order))):
            slot = order[k]
            beta = rho[slot] * _dot(y_hist[slot], q)
            _axpy(alpha[k] - beta, s_hist[slot], q)
    return q.astype(np.float64, copy=False)

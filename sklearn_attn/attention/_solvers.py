"""Solvers and restarts of :class:`MultiHeadAttentionLearner`.

L-BFGS and the first-order solvers (gradient descent, Adam) on the objective,
one start with its exact refit of the values, the starts in batches of
``n_jobs``, and the threshold of an exact fit after which no further start
runs.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.optimize
from sklearn.utils.parallel import Parallel, delayed
from threadpoolctl import threadpool_limits

from .._backend import free_device_memory, to_device
from ._layer import compute_dtype
from ._objective import _Objective

# L-BFGS-B's relative-decrease test, (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1):
# only stop on it once progress is at round-off level; `tol` (on the gradient)
# is the stopping rule users control.
_LBFGS_FTOL = 1e-15
_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8


def _lbfgs(objective, w0, max_iter, tol, curve):
    def record(intermediate_result):
        curve.append(float(intermediate_result.fun))

    result = scipy.optimize.minimize(
        objective,
        w0,
        jac=True,
        method="L-BFGS-B",
        callback=record,
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter + 20,
            "gtol": tol,
            "ftol": _LBFGS_FTOL,
        },
    )
    # status 1: iteration or evaluation limit; 2: the line search could not
    # make progress (round-off level), which is not a failure to converge.
    return result.x, int(result.nit), result.status != 1


def _first_order(
    objective,
    w0,
    *,
    solver,
    learning_rate,
    batch_size,
    n_samples,
    max_iter,
    tol,
    rng,
    curve,
):
    """Gradient descent or Adam, full batch or mini-batches; one epoch per iteration.

    Stops when the epoch's mean gradient has max-norm at most ``tol``.
    """
    w = w0.copy()
    first, second = np.zeros_like(w), np.zeros_like(w)
    beta1, beta2 = _ADAM_BETAS
    step = 0
    for epoch in range(1, max_iter + 1):
        if batch_size is None or batch_size >= n_samples:
            batches = [None]
        else:
            order = rng.permutation(n_samples)
            batches = [
                np.sort(order[s : s + batch_size])
                for s in range(0, n_samples, batch_size)
            ]
        epoch_loss, epoch_grad = 0.0, np.zeros_like(w)
        for rows in batches:
            share = 1.0 if rows is None else len(rows) / n_samples
            loss, grad = objective(w, rows)
            epoch_loss += share * loss
            epoch_grad += share * grad
            if solver == "gd":
                w -= learning_rate * grad
                continue
            step += 1
            first = beta1 * first + (1 - beta1) * grad
            second = beta2 * second + (1 - beta2) * grad**2
            corrected = first / (1 - beta1**step)
            w -= (
                learning_rate
                * corrected
                / (np.sqrt(second / (1 - beta2**step)) + _ADAM_EPS)
            )
        curve.append(epoch_loss)
        if not (np.isfinite(epoch_loss) and np.all(np.isfinite(w))):
            # A ValueError, as scikit-learn's SGD estimators raise.
            raise ValueError(
                f"solver={solver!r} diverged (non-finite parameters at iteration "
                f"{epoch}); lower learning_rate, or standardise X and Y."
            )
        if np.max(np.abs(epoch_grad)) <= tol:
            return w, epoch, True
    return w, max_iter, False


def _exact_fit_threshold(Y, weights, dtype, alpha):
    """Data term at which a fit counts as exact; ``-inf`` when none does.

    ``eps sqrt(N q d) E`` with ``E = (1 / 2) sum_n f_n ||Y_n||^2`` the targets'
    energy on the scale of the data term, ``N q d`` the number of target entries
    (of positive weight) and ``eps`` that of the working precision: the
    rounding error of ``E`` itself, a sum of ``N q d`` rounded squares whose
    errors add up like a random walk. A data term below it is zero at the
    targets' scale (``1 - D / E``, the uncentred training ``R^2``, is one to
    within the rounding of ``E``), which no other start can improve on. Only
    without weight decay: with ``alpha > 0`` an exact fit of smaller norm has
    a lower objective.
    """
    if alpha > 0:
        return -np.inf
    if weights is None:
        n_rows = Y.shape[0]
        energy = 0.5 * np.mean(np.einsum("nqd,nqd->n", Y, Y))
    else:
        n_rows = int(np.count_nonzero(weights))
        energy = 0.5 * float(weights @ np.einsum("nqd,nqd->n", Y, Y))
    size = n_rows * Y.shape[1] * Y.shape[2]
    threshold = np.finfo(dtype).eps * np.sqrt(size) * energy
    # Energies beyond the float range: no early stop rather than a wrong one.
    return float(threshold) if np.isfinite(threshold) else -np.inf


class _Problem:
    """The data of a fit on the host, and how to build its objective on a device.

    Picklable, so that joblib's process workers can run starts of their own.
    """

    def __init__(self, X, Y, sample_weight, param, alpha, device, chunk_threads):
        self.X, self.Y, self.sample_weight = X, Y, sample_weight
        self.param, self.alpha, self.device = param, alpha, device
        self.chunk_threads = chunk_threads

    def objective(self, executor):
        """The objective on ``self.device``, computed in the data's dtype."""
        device, dtype = self.device, compute_dtype(self.X)
        weights = self.sample_weight
        if weights is not None:
            weights = to_device(weights, device, dtype=dtype)
        return _Objective(
            to_device(self.X, device, dtype=dtype),
            to_device(self.Y, device, dtype=dtype),
            self.param,
            self.alpha,
            device,
            executor,
            self.chunk_threads,
            weights,
        )


class _VerboseCurve(list):
    """A loss curve that prints every 10th entry."""

    def __init__(self, index):
        super().__init__()
        self.index = index

    def append(self, value):
        super().append(value)
        if len(self) % 10 == 0:
            print(
                f"  start {self.index + 1}, iteration {len(self)}: "
                f"objective {value:.6g}"
            )


def _optimise(objective, w0, index, seed, settings):
    """Run one start from ``w0``; refit the values; return its result as a dict."""
    start, curve = time.perf_counter(), []
    if settings["verbose"] >= 2:
        curve = _VerboseCurve(index)
    solver = settings["solver"]
    if solver == "lbfgs":
        w, n_iter, converged = _lbfgs(
            objective, w0, settings["max_iter"], settings["tol"], curve
        )
    else:
        w, n_iter, converged = _first_order(
            objective,
            w0,
            solver=solver,
            learning_rate=settings["learning_rate"],
            batch_size=settings["batch_size"],
            n_samples=settings["n_samples"],
            max_iter=settings["max_iter"],
            tol=settings["tol"],
            rng=np.random.RandomState(seed),
            curve=curve,
        )
    w = objective.refit_values(w)
    loss = objective(w)[0]
    if settings["verbose"]:
        print(
            f"[{settings['name']}] start {index + 1}/{settings['n_starts']}: "
            f"objective {loss:.6g} after {n_iter} iterations "
            f"({'converged' if converged else 'max_iter reached'}, "
            f"{time.perf_counter() - start:.2f} s)"
        )
    return {
        "w": w,
        "loss": loss,
        "curve": list(curve),
        "n_iter": n_iter,
        "converged": converged,
    }


def _run_start(problem, w0, index, seed, settings, n_threads):
    """One start as a joblib task, its chunks on ``n_threads`` threads: the data
    moved to the device here."""
    device = problem.device
    with device.activate(), device.workers(n_threads) as executor:
        objective = problem.objective(executor)
        run = _optimise(objective, w0, index, seed, settings)
        del objective
    free_device_memory(device)
    return run


def _run_in_batches(problem, starts, seeds, settings, n_jobs, threshold):
    """The starts ``n_jobs`` at a time, until a batch holds an exact fit."""
    runs = []
    # Each start spreads its chunks over its share of this process's threads
    # (fewer threads than the chunks were cut for: the same chunks). BLAS runs
    # single-threaded here while thread workers share its pools, so that no
    # worker changes the limits under another's feet.
    n_threads = max(1, problem.chunk_threads // n_jobs)
    with threadpool_limits(1, user_api="blas"):
        parallel = Parallel(n_jobs=n_jobs, prefer="threads")
        for first in range(0, len(starts), n_jobs):
            batch = range(first, min(first + n_jobs, len(starts)))
            runs.extend(
                parallel(
                    delayed(_run_start)(
                        problem, starts[i], i, seeds[i], settings, n_threads
                    )
                    for i in batch
                )
            )
            if any(run["loss"] <= threshold for run in runs):
                break
    return runs

"""What the Potts reproduction measures a fit by: the truth's loss, the couplings'
correlation with the truth's, and whether the fit stopped before its limit."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = []


def _true_loss(codes, couplings, fields, beta):
    """The true model's masked-token loss on ``codes`` (nats per site).

    The estimate of the conditional entropy, the lowest expected test loss of
    any model, on these sequences.
    """
    from ...potts import conditional_log_probs

    log_p = conditional_log_probs(codes, couplings, fields, beta)
    return -float(np.take_along_axis(log_p, codes[:, :, None], axis=2).mean())


def _coupling_correlation(model, true_couplings):
    """Pearson correlation of a fit's couplings with the truth's.

    Both in the zero-sum gauge (the gauge of ``couplings_``), where couplings
    that give the same conditionals are equal entry by entry.
    """
    from ...potts import zero_sum_gauge

    true, _ = zero_sum_gauge(true_couplings)
    return float(np.corrcoef(model.couplings_.ravel(), true.ravel())[0, 1])


def _timed_fit(model, X):
    """Fit ``model`` on ``X``; return the seconds it took and whether it converged.

    A fit that stops at its iteration limit (a :class:`ConvergenceWarning`) is
    recorded as such rather than warned about: the tables say it.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X)
    seconds = time.perf_counter() - start
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return seconds, converged

"""Exact power-of-two rescaling, so that extreme but finite inputs neither
overflow nor underflow.

Multiplying by a power of two only changes a floating-point exponent: it is
exact (as long as nothing leaves the normal range) and commutes with every sum,
product and ReLU. A positively homogeneous map of degree ``p`` therefore
satisfies ``f(X) = 2^(p e) f(X / 2^e)`` bit for bit, and computing the
right-hand side keeps the intermediates near one whatever the scale of ``X``.
Inputs of moderate size are left alone (exponent 0), so ordinary data take
exactly the arithmetic they always took.

Works on NumPy or CuPy arrays through the array module ``xp``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "array_exponent",
    "r2_score_at_any_scale",
    "row_exponents",
    "scale_by_power_of_two",
]

# Largest absolute entries in [2^-16, 2^16] need no rescaling: a cube of such
# values, times a Gram matrix's worth of terms, stays far inside float32's
# normal range (2^-126 to 2^128) and float64's.
_MODERATE = 16


def _exponent_of(largest, xp):
    """``e`` with ``largest / 2^e`` in ``[0.5, 1)``; 0 where ``largest`` is moderate."""
    _, exponent = xp.frexp(largest)
    moderate = (largest == 0) | (
        (largest >= 2.0**-_MODERATE) & (largest <= 2.0**_MODERATE)
    )
    return xp.where(moderate, 0, exponent).astype(np.int32)


def row_exponents(X, xp=np):
    """One exponent per sample (first axis) of ``X``, as an int32 array.

    ``X[n] / 2^e[n]`` has its largest absolute entry in ``[0.5, 1)``, or ``e[n]``
    is 0 where that entry already lies in ``[2^-16, 2^16]`` (or is 0).
    """
    if X.shape[0] == 0:
        return xp.zeros(0, dtype=np.int32)
    largest = xp.abs(X.reshape(X.shape[0], -1)).max(axis=1)
    return _exponent_of(largest, xp)


def array_exponent(X, xp=np):
    """One exponent for the whole of ``X`` (see :func:`row_exponents`), an int."""
    if X.size == 0:
        return 0
    return int(_exponent_of(xp.abs(X).max(), xp))


def scale_by_power_of_two(values, exponents, xp=np):
    """``values * 2^exponents`` exactly; ``exponents`` broadcasts against ``values``."""
    return xp.ldexp(values, xp.asarray(exponents, dtype=np.int32))


def r2_score_at_any_scale(y_true, y_pred, *, sample_weight=None, **kwargs):
    """scikit-learn's ``r2_score``, exact for targets of any finite magnitude.

    R^2 is invariant to scaling both arguments (and to scaling the weights), but
    its sums of squares overflow for targets beyond ~1e154: both are divided by
    the same power of two first, the weights by another. Arguments are host
    arrays (or array-likes).
    """
    from sklearn.metrics import r2_score

    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight)
        if sample_weight.dtype.kind in "biuf" and np.isfinite(sample_weight).all():
            exponent = array_exponent(sample_weight)
            sample_weight = np.ldexp(sample_weight.astype(np.float64), -exponent)
    kwargs["sample_weight"] = sample_weight
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.dtype.kind in "biuf" and y_pred.dtype.kind in "biuf":
        largest = max(np.abs(y_true).max(initial=0.0), np.abs(y_pred).max(initial=0.0))
        if np.isfinite(largest):
            exponent = array_exponent(np.asarray(largest))
            y_true = np.ldexp(y_true.astype(np.float64), -exponent)
            y_pred = np.ldexp(y_pred.astype(np.float64), -exponent)
    return float(r2_score(y_true, y_pred, **kwargs))

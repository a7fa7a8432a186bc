"""Input validation shared by the estimators: token arrays and sample weights.

Token input is either a 3-D array ``(n_samples, n_tokens, token_dim)`` or the
same flattened to 2-D ``(n_samples, n_tokens * token_dim)`` together with the
estimator's ``token_dim`` parameter. A 2-D array without ``token_dim`` is an
error, never a guess. ``n_features_in_`` counts the flattened features.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import _check_sample_weight, validate_data

from ._backend import is_device_array, resolve_device, to_host

__all__ = [
    "as_array",
    "check_int",
    "check_real",
    "check_real_array",
    "check_sample_weight",
    "check_target_shape",
    "check_token_array",
    "reject_complex",
    "token_layout",
]


def as_array(A, name):
    """``A`` itself if it has a shape (arrays, frames), else ``np.asarray(A)``,
    with a message naming ``A`` for ragged nested lists."""
    if hasattr(A, "shape"):  # arrays, device arrays, data frames (names kept)
        return A
    try:
        return np.asarray(A)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{name} could not be read as an array (are its rows of different "
            f"lengths?): {exc}"
        ) from None


def check_real_array(value, name, *, dtype=None):
    """``value`` as a NumPy array of real numbers (bool, integer or float).

    Device arrays come to the host; object arrays of numbers become float64.
    Strings, complex numbers, objects that are not numbers and ragged nested
    sequences are refused with ``name`` in the message. ``dtype`` converts
    the result (no copy when it already has that type).
    """
    try:
        array = np.asarray(to_host(value))
    except (ValueError, TypeError):  # NumPy refuses ragged nested sequences
        raise ValueError(
            f"{name} must be a numeric array; its rows have different lengths."
        ) from None
    if array.dtype.kind == "O":
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must hold real numbers; got objects that are not."
            ) from None
    if array.dtype.kind not in "biuf":
        got = "complex values (dtype" if array.dtype.kind == "c" else "dtype"
        raise TypeError(
            f"{name} must hold real numbers; got {got} {array.dtype}"
            + (")." if array.dtype.kind == "c" else ".")
        )
    return array if dtype is None else array.astype(dtype, copy=False)


def reject_complex(A, name):
    """scikit-learn's "Complex data not supported", naming the argument."""
    dtypes = getattr(A, "dtypes", None)  # a data frame's columns (or a Series')
    if dtypes is None or not hasattr(dtypes, "__iter__"):
        dtypes = [getattr(A, "dtype", None)]
    for dtype in dtypes:
        # getattr: pandas extension dtypes have no NumPy equivalent.
        if getattr(dtype, "kind", None) == "c":
            raise ValueError(
                f"Complex data not supported: {name} must hold real numbers; got "
                f"dtype {dtype}."
            )


def token_layout(X, token_dim, what="X"):
    """Return ``(X_2d, n_tokens, token_dim)`` for 2-D or 3-D token input."""
    X = as_array(X, what)
    reject_complex(X, what)
    ndim = X.ndim
    if token_dim is not None and (
        not isinstance(token_dim, numbers.Integral)
        or isinstance(token_dim, bool)
        or token_dim < 1
    ):
        raise ValueError(
            f"token_dim must be a positive integer or None; got {token_dim!r}."
        )
    if ndim == 3:
        n_samples, n_tokens, dim = X.shape
        if token_dim is not None and dim != token_dim:
            raise ValueError(
                f"{what} has tokens of dimension {dim} (its last axis) but "
                f"token_dim={token_dim}."
            )
        return X.reshape(n_samples, n_tokens * dim), n_tokens, dim
    if ndim == 2:
        n_features = X.shape[1]
        if token_dim is None:
            raise ValueError(
                f"{what} is 2-D with {n_features} feature(s) but token_dim is None: "
                "pass 3-D input of shape (n_samples, n_tokens, token_dim), or set "
                "token_dim so the columns can be split into tokens."
            )
        if n_features % token_dim:
            raise ValueError(
                f"{what} has {n_features} feature(s), which is not divisible by "
                f"token_dim={token_dim}."
            )
        return X, n_features // token_dim, token_dim
    raise ValueError(
        f"Expected 2-D or 3-D token input for {what}; got an array with {ndim} "
        "dimension(s). Reshape your data to (n_samples, n_tokens, token_dim)."
    )


def check_token_array(
    estimator,
    X,
    y="no_validation",
    *,
    reset,
    token_dim=None,
    min_tokens=2,
    multi_output=True,
    y_numeric=True,
):
    """Validate token input and return it as ``(n_samples, n_tokens, token_dim)``.

    On ``reset=True`` this stores ``n_tokens_`` and ``token_dim_`` (and, through
    scikit-learn's ``validate_data``, ``n_features_in_`` and, for data frames,
    ``feature_names_in_``). On ``reset=False`` it checks that the token layout
    matches the one seen in ``fit``.

    CuPy arrays are validated on their device and returned as CuPy arrays.
    """
    X_2d, n_tokens, dim = token_layout(X, token_dim)
    if is_device_array(X):
        # validate_data cannot look inside CuPy arrays: check values on the device.
        xp = resolve_device(None, X).xp
        if not bool(xp.isfinite(X_2d).all()):
            raise ValueError("Input X contains NaN or infinity.")
        if reset:
            estimator.n_features_in_ = X_2d.shape[1]
        elif X_2d.shape[1] != estimator.n_features_in_:
            raise ValueError(
                f"X has {X_2d.shape[1]} features, but {type(estimator).__name__} "
                f"is expecting {estimator.n_features_in_} features as input."
            )
        X_valid = (
            X_2d if X_2d.dtype in (xp.float32, xp.float64) else X_2d.astype(xp.float64)
        )
        y_valid = (
            None if isinstance(y, str) else np.asarray(to_host(y), dtype=np.float64)
        )
    else:
        kwargs = dict(reset=reset, dtype=[np.float64, np.float32])
        if isinstance(y, str) and y == "no_validation":
            X_valid = validate_data(estimator, X_2d, **kwargs)
            y_valid = None
        else:
            X_valid, y_valid = validate_data(
                estimator,
                X_2d,
                y,
                multi_output=multi_output,
                y_numeric=y_numeric,
                **kwargs,
            )
    if min_tokens and n_tokens < min_tokens:
        raise ValueError(
            f"X has {n_tokens} token(s) of dimension {dim} ({n_tokens * dim} "
            f"feature(s)); at least {min_tokens} tokens are needed "
            "(a query and at least one key)."
        )
    if reset:
        estimator.n_tokens_ = n_tokens
        estimator.token_dim_ = dim
    elif (n_tokens, dim) != (estimator.n_tokens_, estimator.token_dim_):
        raise ValueError(
            f"X has {n_tokens} token(s) of dimension {dim}, but "
            f"{type(estimator).__name__} was fitted on {estimator.n_tokens_} "
            f"token(s) of dimension {estimator.token_dim_}."
        )
    X_3d = X_valid.reshape(X_valid.shape[0], n_tokens, dim)
    if y_valid is None:
        return X_3d
    return X_3d, y_valid


def check_target_shape(y, name, *, max_ndim, min_ndim=1, layout=None):
    """Refuse targets of the wrong dimension (or complex ones), naming the target.

    scikit-learn's own message ("Found array with dim 3, while dim <= 2 is
    required") reads as if the (legitimately 3-D) token input were wrong.
    ``layout`` describes the accepted shapes; by default 1-D ``(n_samples,)``
    or 2-D ``(n_samples, n_targets)``.
    """
    if y is None or isinstance(y, str):
        return
    y = as_array(y, name)
    reject_complex(y, name)
    ndim, shape = y.ndim, y.shape
    if min_ndim <= ndim <= max_ndim:
        return
    if layout is None:
        layout = "1-D (n_samples,) or 2-D (n_samples, n_targets)"
    raise ValueError(
        f"{name} must be {layout}; got an array of shape {tuple(shape)} "
        f"({ndim} dimension(s))."
    )


def check_sample_weight(sample_weight, n_samples, dtype=np.float64):
    """Validate non-negative sample weights that are not all zero.

    Returns ``None`` when ``sample_weight`` is ``None`` (unit weights).
    """
    if sample_weight is None:
        return None
    sample_weight = _check_sample_weight(
        to_host(sample_weight),
        np.empty((n_samples, 0)),
        dtype=dtype,
        ensure_non_negative=True,
        copy=False,
    )
    if not np.any(sample_weight > 0):
        raise ValueError(
            "sample_weight must have at least one positive entry; all are zero."
        )
    return sample_weight


def check_int(value, name, minimum):
    """An ``int`` (not a bool) at least ``minimum``, else a clear error."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be an int >= {minimum}; got {value!r} of type "
            f"{type(value).__name__}."
        )
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}.")
    return int(value)


def check_real(value, name, *, strictly_positive):
    """A finite real number, positive or non-negative, else a clear error."""
    what = "a positive" if strictly_positive else "a non-negative"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be {what} real number; got {value!r} of type "
            f"{type(value).__name__}."
        )
    value = float(value)
    if not np.isfinite(value) or value < 0 or (strictly_positive and value == 0):
        raise ValueError(f"{name} must be {what} finite real number; got {value!r}.")
    return value

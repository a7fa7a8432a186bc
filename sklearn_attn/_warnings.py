"""Warnings that point at the user's line, not at the package's internals."""

from __future__ import annotations

import os
import sys
import warnings

import joblib
import sklearn

__all__ = ["warn_at_caller"]

# Frames under these directories are ours or the caller's tools (a fit reached
# through _fit_context's wrapper, a Pipeline, cross_validate, joblib), not the
# caller: a warning names the first frame outside them.
_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(init)) + os.sep
    for init in (__file__, sklearn.__file__, joblib.__file__)
)


def _caller_stacklevel():
    """``stacklevel`` of the first frame, above this function's caller, that lies
    outside sklearn_attn, scikit-learn and joblib."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(
        frame.f_code.co_filename
    ).startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    return level


def warn_at_caller(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the user's line.

    The filename and line number of the warning are those of the first frame
    outside sklearn_attn, scikit-learn and joblib, so that ``fit`` called
    directly, in a ``Pipeline`` or by ``cross_validate`` names the line that
    started it.
    """
    # _caller_stacklevel counts from this function's frame (level 1 is here).
    warnings.warn(message, category, stacklevel=_caller_stacklevel())

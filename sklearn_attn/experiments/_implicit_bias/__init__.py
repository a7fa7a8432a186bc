"""Reproduction: implicit bias of gradient descent on softmax attention.

The study (data, training, measures and the driver, :func:`run_implicit_bias`)
is apart from its report (text tables) and its figure; see ``_study`` for what
is computed.
"""

from ._figure import plot_implicit_bias
from ._report import format_implicit_bias_summary
from ._study import (
    INITS,
    MEASURES,
    PARAMETRIZATIONS,
    STRUCTURES,
    THEOREM_MEASURES,
    default_implicit_bias_config,
    run_implicit_bias,
)

__all__ = [
    "INITS",
    "MEASURES",
    "PARAMETRIZATIONS",
    "STRUCTURES",
    "THEOREM_MEASURES",
    "default_implicit_bias_config",
    "format_implicit_bias_summary",
    "plot_implicit_bias",
    "run_implicit_bias",
]

"""Reproduction: implicit bias of gradient descent on softmax attention.

The settings (``_config``), the instances and training runs (``_runs``), the
measures against the max-margin solutions (``_measures``) and the driver
(``_study``, :func:`run_implicit_bias`) are apart from the report (text
tables) and the figure; see ``_study`` for what is computed.
"""

from ._config import (
    INITS,
    MEASURES,
    PARAMETRIZATIONS,
    STRUCTURES,
    THEOREM_MEASURES,
    default_implicit_bias_config,
)
from ._figure import plot_implicit_bias
from ._report import format_implicit_bias_summary
from ._study import run_implicit_bias

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

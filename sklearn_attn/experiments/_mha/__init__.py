"""Reproduction: learning planted multi-head attention layers (Chen and Li, 2024).

Planted layers ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` with ``m`` in
{1, 2, 3} heads label Boolean token sequences
(:func:`~sklearn_attn.datasets.make_attention_layer_regression`). For each
``m`` and number of training samples ``n`` three models are compared on a fresh
test set by the relative error ``||F_hat - F||^2 / ||F||^2``:

* ``learner``: :class:`~sklearn_attn.MultiHeadAttentionLearner` with ``m`` heads
  (its default settings: L-BFGS, several starts, exact refit of the ``W_i``);
* ``too_few_heads``: the same with ``m - 1`` heads (for ``m >= 2``);
* ``uniform_linear``: uniform attention, ``Y_a = mean_b(x_b) B``, ``B`` fitted by
  least squares.

Every repetition plants a new layer; the training sets of one repetition are
nested prefixes of one pool and the test set is shared by all ``n``.

The settings (``_config``), the learning curves (``_curves``), the recovery
thresholds (``_thresholds``) and the driver (``_study``) are apart from the
report (text tables) and the figure.
"""

from ._config import (
    CRITERIA,
    FUNCTION_TOL,
    GRID,
    INPUTS,
    MODELS,
    PARAMETER_TOL,
    default_mha_config,
)
from ._figure import plot_mha
from ._report import format_mha_summary
from ._study import run_mha

__all__ = [
    "CRITERIA",
    "FUNCTION_TOL",
    "GRID",
    "INPUTS",
    "MODELS",
    "PARAMETER_TOL",
    "default_mha_config",
    "format_mha_summary",
    "plot_mha",
    "run_mha",
]

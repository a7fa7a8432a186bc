"""Reproduction of the random-feature attention claims (Fu et al., 2023).

The studies, on the simulated key-averaged targets of
:func:`~sklearn_attn.datasets.make_token_regression`, each cell a mean and a
standard deviation over repetitions (every repetition draws new data and new
random weights; the models compared within a repetition share both):

``degree`` and ``degree_thresholds``
    The test error against the number of training samples ``n`` of RFA,
    BiasedRFA and RFMLP (the same number of trained weights) on targets of
    exactly degree 1 to 4 in the correlations ``t_i = <x_0, x_i> / sqrt(d)``
    and on ``t_i**3``, beside RFA and BiasedRFA without the constant in their
    scores; and the smallest ``n`` reaching a threshold.
``scaling`` and ``scaling_slopes``
    That smallest ``n`` of RFA and RFMLP on the degree-1 target against the
    token dimension ``d`` and the number of keys ``N``, and the slopes of
    ``log n*`` against ``log N`` and ``log d``.
``biased`` and ``biased_thresholds``
    BiasedRFA against RFA on correlation targets against ``d`` and on
    ``exp(gamma t)`` against ``gamma``.
``mean_scale``
    BiasedRFA's mean scale ``mu`` (``qk_mean_scale``; ``mu = 0`` is RFA) on
    the degree-2 target: its error and its paired ratio to RFA's.
``softmax`` and ``softmax_temperature``
    RFA with ReLU against softmax attention weights, and the softmax's
    inverse temperature.

Errors are normalised test errors ``MSE / Var(y_test)`` on fresh samples (1
means "no better than predicting the mean"). Every fit selects its ridge
penalty by generalized cross-validation (``alpha="auto"``).

The settings, the curves (tasks), the tables and the driver are apart from
the report (text tables) and the figure.
"""

from ._config import MODELS, default_config, target_spec
from ._figure import plot_rfa
from ._report import format_rfa_summary
from ._study import TABLES, run_rfa
from ._tables import smallest_n

__all__ = [
    "MODELS",
    "TABLES",
    "default_config",
    "format_rfa_summary",
    "plot_rfa",
    "run_rfa",
    "smallest_n",
    "target_spec",
]

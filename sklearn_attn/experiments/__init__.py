"""Reproductions of the papers' experiments, run by ``python -m sklearn_attn``.

Each reproduction is a ``run_*`` function returning tables (lists of dict rows,
written with :func:`write_csv`) and a ``plot_*`` function drawing its figure
(matplotlib is imported only there).

- :func:`run_rfa`: random-feature attention against the random-feature MLP, and
  biased against unbiased query-key weights (Fu, Guo, Bai and Mei, 2023).
- :func:`run_potts`: factored self-attention as pseudo-likelihood of a Potts model,
  on planted sequences and on the PF00014 protein family (Rende et al., 2024).
- :func:`run_mha`: learning planted multi-head attention layers (Chen and Li, 2024).
- :func:`run_implicit_bias`: separate key/query against combined weights and their
  max-margin limits (Sheen, Chen, Wang and Zhou, 2024).
"""

from ._common import write_csv
from ._implicit_bias import (
    format_implicit_bias_summary,
    plot_implicit_bias,
    run_implicit_bias,
)
from ._mha import format_mha_summary, plot_mha, run_mha
from ._potts import format_potts_summary, plot_potts, run_potts
from ._rfa import default_config, format_rfa_summary, plot_rfa, run_rfa

__all__ = [
    "default_config",
    "format_implicit_bias_summary",
    "format_mha_summary",
    "format_potts_summary",
    "format_rfa_summary",
    "plot_implicit_bias",
    "plot_mha",
    "plot_potts",
    "plot_rfa",
    "run_implicit_bias",
    "run_mha",
    "run_potts",
    "run_rfa",
    "write_csv",
]

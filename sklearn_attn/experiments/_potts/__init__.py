"""Reproduction of Rende, Gerace, Laio and Goldt (2024): attention as a Potts model.

(a) Synthetic: sequences from a planted generalized Potts model (one channel on
a ring); the factored self-attention layer's test masked-token loss against
the number of training samples, approaching the true conditional entropy,
against the full plmDCA parametrization, with the planted couplings recovered.
(b) Dense: a dense signed teacher (Gaussian position couplings scaled by
``1/sqrt(L)``, Gaussian colour embeddings), which one free factored head
represents and one layer of vanilla self-attention does not: the test loss of
the factored head, of the vanilla layer and of the full model against ``n``.
(c) Real: contact precision on the Kunitz/BPTI family (PF00014) with plmc's
settings, from the alignment shipped in :func:`sklearn_attn.datasets.load_pf00014`.

The settings (``_config``), the three parts (``_ring``, ``_dense``, ``_real``),
what their fits are measured by (``_measures``) and the driver (``_study``) are
apart from the report (text tables) and the figure. The dense part's teacher,
models and fit are public here for the benchmarks that extend the study.
"""

from ._config import DENSE_MODELS, default_config
from ._dense import dense_model, draw_dense_teacher, fit_dense
from ._figure import plot_potts
from ._report import format_potts_summary
from ._study import run_potts

__all__ = [
    "DENSE_MODELS",
    "default_config",
    "dense_model",
    "draw_dense_teacher",
    "fit_dense",
    "format_potts_summary",
    "plot_potts",
    "run_potts",
]

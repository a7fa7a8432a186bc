"""Reproduction of Rende, Gerace, Laio and Goldt (2024): attention as a Potts model."""

from ._study import (
    DENSE_MODELS,
    _contact_rows,
    default_config,
    dense_model,
    draw_dense_teacher,
    fit_dense,
    format_potts_summary,
    plot_potts,
    run_potts,
)

__all__ = [
    "DENSE_MODELS",
    "_contact_rows",
    "default_config",
    "dense_model",
    "draw_dense_teacher",
    "fit_dense",
    "format_potts_summary",
    "plot_potts",
    "run_potts",
]

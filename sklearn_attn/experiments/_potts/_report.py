"""Plain-text summary tables of the Potts reproduction."""

from __future__ import annotations

import numpy as np

from .._common import _seeds_text, format_table, summarize
from ._config import DENSE_MODELS
from ._ring import PARAMETRIZATIONS

__all__ = ["format_potts_summary"]


def format_potts_summary(tables):
    """A plain-text summary: the learning curve's end points and the contacts.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_potts`.

    Returns
    -------
    text : str
        The synthetic part's relative excess loss and coupling correlation per
        parametrization and training size (mean ± std over the seeds, the
        value alone over one seed; the title says how many), then the
        PF00014 models' iterations, fit times and contact precisions.
    """
    lines = []
    synthetic = tables.get("synthetic") or []
    for parametrization in PARAMETRIZATIONS:
        rows = [r for r in synthetic if r["parametrization"] == parametrization]
        for n_train in sorted({r["n_train"] for r in rows}):
            sel = [r for r in rows if r["n_train"] == n_train]
            several = len(sel) > 1
            lines.append(
                [
                    parametrization,
                    n_train,
                    _fixed_spread(
                        [r["relative_excess_loss"] for r in sel],
                        several,
                        scale=100,
                        sign=True,
                        unit="%",
                    ),
                    _fixed_spread(
                        [r["coupling_correlation"] for r in sel], several, digits=3
                    ),
                ]
            )
    n_seeds = len({r["seed"] for r in synthetic})
    spread = "mean ± std over " if n_seeds > 1 else ""
    text = (
        f"Synthetic ring{_sizes_text(synthetic, math=False)}: test loss over the "
        f"true conditional entropy, {spread}{_seeds_text([n_seeds])}\n"
    )
    text += format_table(["model", "n_train", "excess loss", "coupling corr"], lines)
    if tables.get("dense"):
        text += "\n\n" + _format_dense(tables["dense"])
    if tables.get("real"):
        keys = [k for k in tables["real"][0] if k.startswith("precision_top_")]
        real_lines = [
            [
                r["model"],
                r["n_iter"],
                f"{r['fit_seconds']:.1f}",
                *(f"{r[k]:.3f}" for k in keys),
            ]
            for r in tables["real"]
        ]
        text += (
            "\n\nPF00014 contact precision (|i - j| >= 6, < 8 A), plmc's settings, "
            "one fit per model (no randomness)\n"
        )
        text += format_table(
            [
                "model",
                "iterations",
                "seconds",
                *(k.replace("precision_top_", "top ") for k in keys),
            ],
            real_lines,
        )
    return text


def _format_dense(rows):
    """The dense study's table: losses against the truth per model and size."""
    sizes = sorted({r["n_train"] for r in rows})
    n_seeds = len({r["seed"] for r in rows})
    several = n_seeds > 1

    lines, skipped = [], []
    for name in DENSE_MODELS:
        sel = [r for r in rows if r["model"] == name]
        if not sel:
            continue
        for n_train in sizes:
            cur = [r for r in sel if r["n_train"] == n_train]
            if not cur:
                lines.append([name, n_train, "not run", "", "", "", "", ""])
                skipped.append(name)
                continue
            excess = [r["relative_excess_loss"] for r in cur]
            stopped = sum(not r["converged"] for r in cur)
            lines.append(
                [
                    name,
                    n_train,
                    _fixed_spread([r["test_loss"] for r in cur], several, digits=3),
                    _fixed_spread(
                        [r["true_conditional_entropy"] for r in cur],
                        several,
                        digits=3,
                    ),
                    _fixed_spread(excess, several, scale=100, sign=True) + "%",
                    f"{100 * max(excess):+.2f}%",
                    _fixed_spread(
                        [r["train_relative_excess_loss"] for r in cur],
                        several,
                        scale=100,
                        sign=True,
                    )
                    + "%",
                    f"{np.mean([r['n_iter'] for r in cur]):.0f}"
                    + (f" ({stopped} at max_iter)" if stopped else ""),
                ]
            )
    first = rows[0]
    spread = "mean ± std over " if several else ""
    text = (
        f"Dense signed teacher (L = {first['n_sites']}, q = {first['n_states']}, "
        f"beta = {first['beta']:g}, {first['n_test']} test sequences): test loss "
        f"against the true conditional entropy, {spread}{_seeds_text([n_seeds])} "
        "(one teacher per seed)\n"
    )
    text += format_table(
        [
            "model",
            "n_train",
            "test loss",
            "entropy",
            "excess",
            "worst excess",
            "train excess",
            "iterations",
        ],
        lines,
    )
    if "vanilla" in skipped:
        limit = next(r["vanilla_max_n"] for r in rows if r["model"] == "vanilla")
        text += (
            f"\nvanilla: not run above n = {limit}; its fits are the slowest (the "
            "user guide's Potts section has its longer runs)"
        )
    return text


def _fixed_spread(values, several, *, scale=1.0, digits=2, sign=False, unit=""):
    """``"mean<unit> ± std"`` of the finite ``values`` in fixed point, times
    ``scale``; the mean alone unless ``several`` (one seed has no spread)."""
    mean, std = summarize(values)
    text = f"{scale * mean:{'+' if sign else ''}.{digits}f}{unit}"
    return text + (f" ± {scale * std:.{digits}f}" if several else "")


def _sizes_text(rows, math=True):
    """``", L = 20, q = 10, 4000 test sequences"`` from the synthetic rows."""
    if not rows or "n_sites" not in rows[0]:
        return ""  # tables written before these columns
    first = rows[0]
    if math:
        return (
            f", $L = {first['n_sites']}$, $q = {first['n_states']}$, "
            f"{first['n_test']} test sequences"
        )
    return (
        f" (L = {first['n_sites']}, q = {first['n_states']}, "
        f"{first['n_test']} test sequences)"
    )

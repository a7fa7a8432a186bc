"""The figure of the multi-head attention reproduction."""

from __future__ import annotations

import numpy as np

from .._common import (
    _caption,
    _curve,
    _figure,
    _figure_legend,
    _log_axis,
    _save,
    _seeds_text,
)
from ._config import _SUCCESS, MODELS

__all__ = ["plot_mha"]


_COLORS = {
    "learner": "tab:blue",
    "too_few_heads": "tab:orange",
    "uniform_linear": "tab:green",
}
_LABELS = {
    "learner": "learner, $m$ heads",
    "too_few_heads": "learner, $m - 1$ heads",
    "uniform_linear": "uniform attention, linear",
}


def plot_mha(tables, path=None):
    r"""Draw :func:`run_mha`'s table: test error against ``n``, a panel per ``m``.

    Lines are medians of the test relative error
    :math:`\|\hat F - F\|^2 / \|F\|^2` over the repetitions; bands span the
    smallest to the largest error when there are several repetitions (log
    scales; errors are floored at 1e-18 for display). The dotted line is the
    success threshold 1e-6. One legend for the figure, below the panels; the
    title states the sizes and the number of seeds. matplotlib is imported
    here, not with the module.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_mha`.
    path : str or path-like, default=None
        If given, the figure is saved there.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.
    """
    rows = tables.get("learning_curves") or []
    heads = sorted({r["m"] for r in rows})
    fig = _figure(3.6 * max(len(heads), 1) + 0.4, 3.9)
    axes = fig.subplots(1, max(len(heads), 1), squeeze=False, sharey=True)[0]
    floor = 1e-18
    for ax, m in zip(axes, heads, strict=False):
        ax.set_yscale("log")
        ax.axhline(
            _SUCCESS,
            color="k",
            linewidth=0.6,
            linestyle=":",
            label=f"success threshold ($10^{{{int(np.log10(_SUCCESS))}}}$)",
        )
        for model in MODELS:
            sel = sorted(
                (r for r in rows if r["m"] == m and r["model"] == model),
                key=lambda r: r["n_train"],
            )
            if not sel:
                continue
            _curve(
                ax,
                [r["n_train"] for r in sel],
                np.maximum([r["error_median"] for r in sel], floor),
                low=np.maximum([r["error_min"] for r in sel], floor),
                high=np.maximum([r["error_max"] for r in sel], floor),
                n_seeds=min(r["n_seeds"] for r in sel),
                color=_COLORS[model],
                label=_LABELS[model],
            )
        ax.set_ylim(floor / 10, 10)
        _log_axis(ax, "x", ticks=[r["n_train"] for r in rows if r["m"] == m])
        _log_axis(ax, "y")
        ax.set_title(f"$m = {m}$ planted head{'s' if m > 1 else ''}", fontsize=9)
        ax.set_xlabel("$n$ (training sequences)")
        ax.grid(True, which="major", alpha=0.3)
    if heads:
        axes[0].set_ylabel(r"test $\|\hat F - F\|^2 / \|F\|^2$")
    if rows:
        several = any(r["n_seeds"] > 1 for r in rows)
        _caption(
            fig,
            "Learning planted multi-head attention layers (Chen and Li, 2024)",
            f"$d = {rows[0]['d']}$, $k = {rows[0]['k']}$ tokens, Boolean inputs, "
            f"noiseless; median over {_seeds_text(r['n_seeds'] for r in rows)}"
            + (", bands from the smallest to the largest error" if several else ""),
        )
    _figure_legend(fig, ncols=4, order=list(_LABELS.values()))
    _save(fig, path)
    return fig

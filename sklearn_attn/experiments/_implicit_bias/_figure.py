"""The figure of the implicit-bias reproduction."""

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
from ._config import PARAMETRIZATIONS, STRUCTURES

__all__ = ["plot_implicit_bias"]

# -- figure ----------------------------------------------------------------------------
_COLORS = {"separate": "tab:blue", "combined": "tab:orange"}
_LABELS = {"separate": "separate $(K, Q)$", "combined": "combined $W$"}
_SVM_LABEL = {
    "full": ("nuclear", "Frobenius"),
    "diagonal": (r"$\ell_1$", r"$\ell_2$"),
}
# Solid: the nuclear-norm (l1) SVM, dashed: the Frobenius-norm (l2) one.
_SVM_STYLE = {"nuc": "-", "fro": "--"}


_MAX_DIGITS = 1e300
_TITLE_SIZE = 9


def _loss_gap_axis(ax):
    """``-log10(L - L*)``, the decimal digits of the loss gap, on a log axis.

    The gap falls faster than exponentially, to ``10^(-10^40)`` and below,
    beyond floating point: what can be drawn is its number of digits (the
    tables hold ``log10(L - L*)``). Call it after the data are drawn: the
    limits and ticks are set from them, as matplotlib's own would pass the
    largest float on an axis of 300 decades.
    """
    from matplotlib import ticker

    ax.set_yscale("log")
    low, high = ax.dataLim.intervaly
    if not (np.isfinite(low) and np.isfinite(high) and 0 < low <= high):
        low, high = 0.1, 10.0  # nothing drawn
    top = max(1, int(np.ceil(np.log10(high))))
    # At most six ticks, at 1, 2 or 5 times a power of ten of decades.
    step = min(k * 10**e for e in range(4) for k in (1, 2, 5) if k * 10**e >= top / 5)
    ax.yaxis.set_major_locator(ticker.FixedLocator(10.0 ** np.arange(0, top + 1, step)))
    ax.yaxis.set_major_formatter(ticker.LogFormatterSciNotation(base=10))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.set_ylim(min(low, 1.0) / 2, 10.0 ** min(top + 0.5, 305))


def plot_implicit_bias(tables, path=None):
    r"""Draw the figure of :func:`run_implicit_bias`'s tables.

    One column per structure (diagonal, full), from top to bottom against
    the iteration: the loss
    gap :math:`L - L^*` (median, and quartiles when several runs reach
    :math:`L^*`, over the runs that do; its axis is log-log, as the gap
    falls to :math:`10^{-10^{40}}`; the title counts the runs that reach
    :math:`L^*`); the correlation of ``W`` with the nuclear (:math:`\ell_1`)
    and Frobenius (:math:`\ell_2`) SVMs, mean ± std; the norm ratios
    :math:`\|W\|_* / \mathrm{margin}` and :math:`\|W\|_F / \mathrm{margin}`
    over their optima, once every run has a positive margin; and the
    singular values of ``W / margin`` at the end against those of the SVM
    solutions (for diagonal weights: the sorted :math:`|w_j|`). When the
    tables hold the theorem study, a last column shows the same three panels for
    its runs (full matrices, equal non-optimal scores, against the SVMs of the
    optimal tokens) and, per seed in increasing order, the distance ``1 -
    corr`` of each run from its predicted limit (separate: the nuclear-norm
    SVM, combined: the Frobenius one) on those instances (solid) and on the
    generic ones (dotted). Colour is the parametrization; solid lines refer to
    the nuclear (:math:`\ell_1`) SVM, dashed ones to the Frobenius
    (:math:`\ell_2`) SVM. Bands (± one std or quartiles) only over several
    seeds. One legend for the figure, below the panels; the title states the
    sizes and the number of seeds.

    matplotlib is imported here, not with the module; no pyplot state is used.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_implicit_bias`.
    path : str or path-like, default=None
        If given, the figure is saved there.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> from sklearn_attn.experiments import (
    ...     plot_implicit_bias, run_implicit_bias)
    >>> fig = plot_implicit_bias(run_implicit_bias(quick=True, progress=False),
    ...                          "implicit_bias.png")  # doctest: +SKIP
    """
    traj = tables.get("trajectories") or []
    spectra = tables.get("spectra") or []
    theorem = tables.get("theorem_trajectories") or []
    structures = [s for s in STRUCTURES if any(r["structure"] == s for r in traj)]
    # (rows, structure, name of the row) per row of panels; the theorem study
    # (full matrices, equal non-optimal scores) last.
    panels = [(traj, s, f"{s} $W$") for s in structures]
    if theorem:
        panels.append((theorem, "full", "full $W$, equal scores"))
    # A column per row of ``panels`` (at most three), its four panels stacked:
    # scaled to a page column, a figure this wide keeps its text readable.
    n_cols = max(len(panels), 1)
    fig = _figure(3.6 * n_cols, 3.0 * 4 + 1.6)
    grid = fig.add_gridspec(4, n_cols)
    # Added a column at a time: fig.axes lists each column's panels together.
    axes = [[fig.add_subplot(grid[k, i]) for k in range(4)] for i in range(n_cols)]
    sizes = []
    for i, (rows_all, s, name) in enumerate(panels):
        ax_loss, ax_corr, ax_ratio, ax_sv = axes[i]
        rows_s = [r for r in rows_all if r["structure"] == s and r["iteration"] > 0]
        first = rows_s[0]
        if rows_all is traj:
            sizes.append(
                f"{s}: $n = {first.get('n_samples', '?')}$, "
                f"$T = {first.get('n_tokens', '?')}$, $d = {first.get('dim', '?')}$"
            )
        else:
            sizes.append(
                f"equal scores: the full sizes, score gap {first['score_gap']:g}, "
                "against the optimal tokens' SVMs"
            )
        _plot_training_row(ax_loss, ax_corr, ax_ratio, rows_s, s, name)
        if rows_all is traj:
            _plot_spectra(ax_sv, [r for r in spectra if r["structure"] == s], s)
        else:
            _plot_theorem_ends(ax_sv, tables.get("theorem_final") or [])
    counted = traj + theorem
    n_seeds = _seeds_text(r["n_seeds"] for r in counted)
    several = any(r["n_seeds"] > 1 for r in counted)
    steps = max((r["iteration"] for r in counted), default=0)
    _caption(
        fig,
        "Implicit bias of softmax attention (Sheen et al., 2024):\nseparate "
        r"$(K, Q)$ $\to$ nuclear ($\ell_1$) max margin, combined $W$ $\to$ "
        r"Frobenius ($\ell_2$) max margin",
        # Short lines: the caption is no wider than the panels below it.
        "\n".join(
            ["; ".join(s for s in sizes if not s.startswith("equal"))]
            + [s for s in sizes if s.startswith("equal")]
            + [
                f"{n_seeds} (an instance each), {steps} steps"
                + ("; bands: ± one std (loss gap: quartiles)" if several else "")
            ]
        ),
    )
    _figure_legend(fig, ncols=3, order=list(_LABELS.values()), fontsize=9)
    _save(fig, path)
    return fig


def _plot_training_row(ax_loss, ax_corr, ax_ratio, rows_s, s, name):
    """Loss gap, correlations and norm ratios of one row against the iteration.

    ``name`` (e.g. ``"full $W$"``) heads the titles; a long one gets a line of
    its own.
    """
    last = max(r["iteration"] for r in rows_s)
    ax_loss.set_yscale("log")
    ax_loss.set_autoscaley_on(False)  # _loss_gap_axis sets the limits
    reached = []
    for p in PARAMETRIZATIONS:
        rows = sorted(
            (r for r in rows_s if r["parametrization"] == p),
            key=lambda r: r["iteration"],
        )
        if not rows:
            continue
        _plot_trajectories(ax_loss, ax_corr, ax_ratio, rows, p)
        reached.append(f"{p} {rows[-1]['n_reached']}/{rows[-1]['n_seeds']}")
    for ax in (ax_loss, ax_corr, ax_ratio):
        ax.set_xlim(1, last * 1.2)
        _log_axis(ax, "x")
        ax.set_xlabel("iteration")
        ax.grid(True, which="major", alpha=0.3)
    nuc, fro = _SVM_LABEL[s]
    _loss_gap_axis(ax_loss)
    ax_loss.set_ylabel(r"$-\log_{10}(L - L^*)$")
    ax_loss.set_title(
        f"{name}: loss gap $L - L^* = 10^{{-y}}$\nreaching $L^*$: {', '.join(reached)}",
        fontsize=_TITLE_SIZE,
    )
    ax_corr.set_ylim(max(0.0, ax_corr.get_ylim()[0]), 1.01)
    ax_corr.set_ylabel("correlation with the SVM solution")
    against = f"vs {nuc} (solid), {fro} (dashed) SVM"
    ax_corr.set_title(
        f"{name} {against}" if len(name) < 16 else f"{name}\n{against}",
        fontsize=_TITLE_SIZE,
    )
    ax_ratio.set_ylim(0.95, 3.0)
    _log_axis(ax_ratio, "y", ticks=(1.0, 1.25, 1.5, 2.0, 3.0))
    ax_ratio.axhline(1.0, color="k", linewidth=0.8)
    ax_ratio.set_ylabel("norm / margin over its optimum")
    ax_ratio.set_title("norm / margin, once all margins > 0", fontsize=_TITLE_SIZE)


# The theorem's limit of each parametrization: the SVM whose correlation the
# last panel of the theorem row shows.
_THEOREM_LIMIT = {"separate": "corr_nuc_opt", "combined": "corr_fro_opt"}
# In that panel: the theorem study's instances ("equal" scores) solid, the
# reproduction's full-matrix ones ("generic") dotted.
_SCORES_STYLE = {"equal": "-", "generic": ":"}
_GENERIC_LABELS = {
    p: f"{label}, generic tokens (last panel)" for p, label in _LABELS.items()
}


def _plot_theorem_ends(ax, final):
    """``1 - corr`` with each parametrization's predicted SVM, per seed, sorted.

    Separate ``(K, Q)`` against the optimal tokens' nuclear-norm SVM, combined
    ``W`` against their Frobenius one, on the theorem's instances (solid) and
    on the generic ones (dotted, with entries of their own in the figure's
    legend); seeds in increasing order of the distance, as a fraction of the
    seeds.
    """
    ax.set_yscale("log")
    for p, column in _THEOREM_LIMIT.items():
        for scores, style in _SCORES_STYLE.items():
            values = np.sort(
                [
                    1.0 - r[column]
                    for r in final
                    if r["parametrization"] == p and r["scores"] == scores
                ]
            )
            if values.size == 0:
                continue
            _curve(
                ax,
                (np.arange(values.size) + 0.5) / values.size,
                values,
                color=_COLORS[p],
                linestyle=style,
                marker=None if values.size >= 3 else "o",
                label=_LABELS[p] if scores == "equal" else _GENERIC_LABELS[p],
            )
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of the seeds")
    ax.set_ylabel("1 - correlation")
    ax.set_title(
        "at the end: $(K, Q)$ vs nuclear, $W$ vs Frobenius SVM\nof the optimal "
        "tokens, per seed (sorted)",
        fontsize=_TITLE_SIZE,
    )
    ax.grid(True, which="major", alpha=0.3)


def _plot_trajectories(ax_loss, ax_corr, ax_ratio, rows, p):
    it = np.array([r["iteration"] for r in rows], dtype=float)
    color = _COLORS[p]
    n_seeds = rows[-1]["n_seeds"]
    n_reached = rows[-1]["n_reached"]
    digits = {
        key: -np.array([r[f"log10_excess_loss_{key}"] for r in rows], dtype=float)
        for key in ("median", "q25", "q75")
    }
    # Past 1e300 digits (or once log10(L - L*) itself is -inf) the axis would
    # leave float64: the band stops at the cap, the median is not drawn.
    digits["median"][~(digits["median"] <= _MAX_DIGITS)] = np.nan
    for key in ("q25", "q75"):
        digits[key] = np.minimum(digits[key], _MAX_DIGITS)
    # The quartiles of log10(L - L*): q75 is the larger gap, fewer digits.
    _curve(
        ax_loss,
        it,
        digits["median"],
        low=digits["q75"],
        high=digits["q25"],
        n_seeds=n_reached,
        color=color,
        marker=None,
        label=_LABELS[p],
    )
    # Ratios once every run has a positive margin (before, some are NaN).
    settled = [r for r in rows if r["n_positive_margin"] == r["n_seeds"]]
    for name, style in _SVM_STYLE.items():
        line = dict(
            n_seeds=n_seeds,
            color=color,
            linestyle=style,
            label=_LABELS[p] if style == "-" else None,
        )
        _mean_band(ax_corr, rows, f"corr_{name}", **line)
        ax_ratio.set_yscale("log")
        _mean_band(ax_ratio, settled, f"ratio_{name}", floor=0.5, **line)


def _mean_band(ax, rows, column, *, floor=-np.inf, **kwargs):
    """The mean of ``column`` over the seeds against the iteration, with a band
    of one standard deviation (its lower edge at least ``floor``)."""
    mean = np.array([r[f"{column}_mean"] for r in rows], dtype=float)
    std = np.array([r[f"{column}_std"] for r in rows], dtype=float)
    _curve(
        ax,
        [r["iteration"] for r in rows],
        mean,
        low=np.maximum(mean - std, floor),
        high=mean + std,
        marker=None,
        **kwargs,
    )


def _plot_spectra(ax, spectra, structure):
    from matplotlib import ticker

    nuc, fro = _SVM_LABEL[structure]
    styles = {
        "separate": dict(color=_COLORS["separate"], marker="o"),
        "combined": dict(color=_COLORS["combined"], marker="s"),
        "svm_nuclear": dict(
            color="k",
            linestyle="-",
            linewidth=0.9,
            marker=None,
            label=r"nuclear ($\ell_1$) SVM: solid",
        ),
        "svm_frobenius": dict(
            color="k",
            linestyle="--",
            linewidth=0.9,
            marker=None,
            label=r"Frobenius ($\ell_2$) SVM: dashed",
        ),
    }
    for source, style in styles.items():
        rows = sorted(
            (r for r in spectra if r["source"] == source), key=lambda r: r["index"]
        )
        if rows:
            _curve(
                ax,
                [r["index"] for r in rows],
                [r["value_mean"] for r in rows],
                markersize=4,
                **style,
            )
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("index (largest first)")
    ax.set_ylabel("singular value of $W$ / margin")
    ax.set_title("spectra at the end (mean over seeds)", fontsize=_TITLE_SIZE)
    ax.grid(True, alpha=0.3)

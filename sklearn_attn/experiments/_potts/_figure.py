"""The figure of the Potts reproduction: learning curves and PF00014's contacts."""

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
    summarize,
)
from ._config import _CUTOFF, _MIN_SEPARATION
from ._report import _sizes_text

__all__ = ["plot_potts"]

# A colour and a label per model; the full model is the same in both teachers.
_CURVES = {
    "ring": (
        ("parametrization", "factored", "tab:blue", "factored (one softmax head)"),
        ("parametrization", "full", "tab:red", "full (plmDCA)"),
    ),
    "dense": (
        ("model", "factored", "tab:cyan", "factored (one free head)"),
        ("model", "vanilla", "tab:green", "vanilla attention (one layer)"),
        ("model", "full", "tab:red", "full (plmDCA)"),
    ),
}
_REAL_COLORS = ("tab:red", "tab:purple", "tab:brown")


def plot_potts(tables, path=None):
    r"""Draw :func:`run_potts`'s tables: learning curves and PF00014's contacts.

    Top: the relative excess test loss (test loss over the true conditional
    entropy, minus 1; log-log) and the correlation of the couplings with the
    planted ones against the number of training sequences on the ring
    teacher, a line per parametrization (mean, with a band of ± one standard
    deviation when there are several seeds). Below, when the dense study ran,
    the same two panels for the dense signed teacher: the factored head, the
    vanilla layer (on the loss panel only: it has no couplings) and the full
    model. Bottom, when the real-data part ran: the precision of the top
    ``k`` predicted contacts of PF00014 against ``k`` up to ``2L`` (ticks at
    ``L/5``, ``L/2``, ``L``, ``2L``), a line per model, and the contact map:
    the true contacts (distance below 8 Å, ``|i - j| >= 6``) as grey squares
    in both triangles and the top ``2L`` predictions of the first model above
    the diagonal (of the second model, if any, below it), correct and wrong
    ones in two colours. One legend for the figure, below the panels; the
    title states the sizes and the number of seeds.

    matplotlib is imported here, not with the module; no pyplot state is used.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_potts`.
    path : str or path-like, default=None
        If given, the figure is saved there.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> from sklearn_attn.experiments import plot_potts, run_potts
    >>> tables = run_potts(quick=True, progress=False)  # doctest: +SKIP
    >>> fig = plot_potts(tables, "potts.png")  # doctest: +SKIP
    """
    synthetic = tables.get("synthetic") or []
    dense = tables.get("dense") or []
    real = tables.get("real") or []
    contacts = tables.get("contacts") or []
    has_real = bool(real and contacts)
    n_rows = 1 + bool(dense) + has_real
    fig = _figure(10.0, 4.4 + 4.2 * (n_rows - 1))
    axes = fig.subplots(n_rows, 2, squeeze=False)
    _plot_learning_curves(*axes[0], synthetic, "ring")
    axes[0, 0].set_title("Ring teacher: relative excess masked-token loss", fontsize=9)
    axes[0, 1].set_title("Ring teacher: coupling recovery (zero-sum gauge)", fontsize=9)
    n_seeds = len({r["seed"] for r in synthetic})
    details = [
        f"ring: planted Potts model on a ring{_sizes_text(synthetic)}, "
        f"{_seeds_text([n_seeds])}"
    ]
    if dense:
        _plot_learning_curves(*axes[1], dense, "dense")
        axes[1, 0].set_title(
            "Dense signed teacher: relative excess masked-token loss", fontsize=9
        )
        axes[1, 1].set_title(
            "Dense signed teacher: coupling recovery (no vanilla: no couplings)",
            fontsize=9,
        )
        details.append(_dense_caption(dense))
    if has_real:
        _plot_precision(axes[-1, 0], real, contacts)
        _plot_contact_map(axes[-1, 1], real, contacts)
        details.append("PF00014 (13,600 sequences, $L = 53$), plmc's settings")
    several = n_seeds > 1 or len({r["seed"] for r in dense}) > 1
    _caption(
        fig,
        "Factored self-attention as a Potts model (Rende et al., 2024)",
        "\n".join(details) + ("; bands ± one std" if several else ""),
    )
    _figure_legend(fig, ncols=4)
    _save(fig, path)
    return fig


def _dense_caption(rows):
    """What the dense study ran: the teacher, the seeds, the vanilla limit."""
    first = rows[0]
    text = (
        f"dense: Gaussian couplings / $\\sqrt{{L}}$ at $\\beta = {first['beta']:g}$"
        f"{_sizes_text(rows)}, {_seeds_text([len({r['seed'] for r in rows})])}"
    )
    sizes = {r["n_train"] for r in rows}
    vanilla = {r["n_train"] for r in rows if r["model"] == "vanilla"}
    if vanilla and vanilla != sizes:
        text += f", vanilla up to $n = {max(vanilla)}$ (slow)"
    return text


def _plot_learning_curves(ax_loss, ax_corr, rows, teacher):
    """Excess loss and coupling correlation against ``n``, a line per model."""
    ax_loss.set_yscale("log")
    sizes = sorted({r["n_train"] for r in rows})
    for column, name, color, label in _CURVES[teacher]:
        sel = [r for r in rows if r[column] == name]
        n = sorted({r["n_train"] for r in sel})
        for ax, key in (
            (ax_loss, "relative_excess_loss"),
            (ax_corr, "coupling_correlation"),
        ):
            values = [[r.get(key) for r in sel if r["n_train"] == k] for k in n]
            if not any(v is not None for cell in values for v in cell):
                continue  # the vanilla layer has no couplings
            stats = np.array(
                [
                    summarize([np.nan if v is None else v for v in cell])
                    for cell in values
                ]
            ).reshape(-1, 2)
            mean, std = stats[:, 0], stats[:, 1]
            n_seeds = min((len(cell) for cell in values), default=0)
            _curve(
                ax,
                n,
                mean,
                low=np.maximum(mean - std, mean * 0.05)
                if ax is ax_loss
                else mean - std,
                high=mean + std,
                n_seeds=n_seeds,
                color=color,
                label=label,
            )
    ax_loss.set_ylabel("test loss / conditional entropy $- 1$")
    ax_corr.set_ylabel("Pearson correlation with planted $J$")
    for ax in (ax_loss, ax_corr):
        _log_axis(ax, "x", ticks=sizes)
        ax.set_xlabel("$n$ (training sequences)")
        ax.grid(True, which="major", alpha=0.3)
    _log_axis(ax_loss, "y")


def _top_pairs(contacts, model, k=None):
    """The candidate pairs of ``model`` in rank order (the first ``k``)."""
    ranked = sorted(
        (r for r in contacts if r["model"] == model and r["rank"] is not None),
        key=lambda r: r["rank"],
    )
    return ranked if k is None else ranked[:k]


def _plot_precision(ax, real, contacts):
    n_sites = 1 + max(max(r["i"], r["j"]) for r in contacts)
    marks = {"L/5": n_sites // 5, "L/2": n_sites // 2, "L": n_sites, "2L": 2 * n_sites}
    for row, color in zip(real, _REAL_COLORS, strict=False):
        ranked = _top_pairs(contacts, row["model"], 2 * n_sites)
        hits = np.cumsum([r["contact"] for r in ranked])
        k = np.arange(1, hits.size + 1)
        _curve(
            ax,
            k,
            hits / k,
            color=color,
            marker=None,
            label=f"PF00014: {row['model']}, {row['n_iter']} iterations",
        )
    for value in marks.values():
        ax.axvline(value, color="0.7", linewidth=0.8, linestyle=":")
    ax.set_xticks(list(marks.values()))
    ax.set_xticklabels([f"{name}\n{value}" for name, value in marks.items()])
    ax.set_xlim(0, 2 * n_sites + 2)
    ax.set_ylim(0, 1.04)
    ax.set_xlabel(
        f"$k$: number of top-ranked pairs ($|i - j| \\geq {_MIN_SEPARATION}$)"
    )
    ax.set_ylabel(f"precision of the top $k$ (distance < {_CUTOFF:g} Å)")
    ax.set_title("PF00014: contact precision against rank", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def _plot_contact_map(ax, real, contacts):
    n_sites = 1 + max(max(r["i"], r["j"]) for r in contacts)
    first = real[0]["model"]
    true = [r for r in contacts if r["model"] == first and r["contact"]]
    ti = np.array([r["i"] for r in true]) + 1
    tj = np.array([r["j"] for r in true]) + 1
    ax.scatter(
        np.r_[ti, tj],
        np.r_[tj, ti],
        s=16,
        marker="s",
        color="0.82",
        linewidths=0,
        label=f"true contact (< {_CUTOFF:g} Å, $|i - j| \\geq {_MIN_SEPARATION}$)",
    )
    titles = []
    # The first model above the diagonal (i < j), the second below it.
    for row, upper in zip(real[:2], (True, False), strict=False):
        ranked = _top_pairs(contacts, row["model"], 2 * n_sites)
        i = np.array([r["i"] for r in ranked]) + 1
        j = np.array([r["j"] for r in ranked]) + 1
        hit = np.array([r["contact"] for r in ranked], dtype=bool)
        x, y = (j, i) if upper else (i, j)
        ax.scatter(x[hit], y[hit], s=12, color="tab:blue", label="predicted: contact")
        ax.scatter(
            x[~hit],
            y[~hit],
            s=14,
            marker="x",
            color="tab:red",
            linewidths=1.0,
            label="predicted: no contact",
        )
        side = "above" if upper else "below"
        titles.append(f"{side}: {row['model']} ({hit.sum()}/{hit.size} correct)")
    ax.plot([0.5, n_sites + 0.5], [0.5, n_sites + 0.5], color="0.6", linewidth=0.6)
    ax.set_xlim(0.5, n_sites + 0.5)
    ax.set_ylim(n_sites + 0.5, 0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("residue (alignment column)")
    ax.set_ylabel("residue (alignment column)")
    ax.set_title(
        "PF00014: top $2L$ predicted contacts\n" + "; ".join(titles), fontsize=9
    )

"""Plain-text summary tables of the implicit-bias reproduction."""

from __future__ import annotations

import numpy as np

from .._common import _mean_spread, _seeds_text, format_table
from ._config import PARAMETRIZATIONS, STRUCTURES

__all__ = ["format_implicit_bias_summary"]


# -- summary ---------------------------------------------------------------------------
def format_implicit_bias_summary(tables):
    """Plain-text table of the final correlations and norm ratios.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_implicit_bias`.

    Returns
    -------
    text : str
        One line per structure and parametrization: mean (min) over seeds
        (the title says how many) of the correlation with the nuclear (l1)
        and Frobenius (l2) SVMs, mean normalised ratios, mean rank of ``W``
        against the SVMs', and how many runs selected the optimal tokens.
        Then, when the tables have them, the aligned study's rows (full
        matrices): mean ± std and worst over seeds of the correlations and
        norm ratios per start scale, parametrization and start. Then the
        theorem study's rows (full matrices, equal non-optimal scores, and the
        generic tokens as the contrast): how many runs selected the optimal
        tokens, and mean ± std (worst) over seeds of the correlations with the
        optimal tokens' SVMs and of the norm ratios.
    """
    lines = []
    rows = tables.get("final") or []
    for s in STRUCTURES:
        for p in PARAMETRIZATIONS:
            sel = [r for r in rows if r["structure"] == s and r["parametrization"] == p]
            if not sel:
                continue

            def col(name, sel=sel):
                return np.array([r[name] for r in sel], dtype=float)

            cells = [f"{s} {p}"]
            for name in ("corr_nuc", "corr_fro"):
                cells.append(f"{np.mean(col(name)):.4f} ({np.min(col(name)):.4f})")
            for name in ("ratio_nuc", "ratio_fro"):
                cells.append(f"{np.nanmean(col(name)):.4f}")
            cells.append(
                f"{np.mean(col('rank')):.1f} / {np.mean(col('rank_svm_nuc')):.1f}"
                f" / {np.mean(col('rank_svm_fro')):.1f}"
            )
            cells.append(f"{int(np.sum(col('reached')))}/{len(sel)}")
            lines.append(cells)
    header = [
        "weights",
        "corr nuc/l1 mean (min)",
        "corr fro/l2 mean (min)",
        "||W||_*/m / opt",
        "||W||_F/m / opt",
        "rank W / nuc / fro",
        "optimal tokens",
    ]
    seeds = _seeds_text(
        sum(r["structure"] == s and r["parametrization"] == p for r in rows)
        for s in STRUCTURES
        for p in PARAMETRIZATIONS
        if any(r["structure"] == s and r["parametrization"] == p for r in rows)
    )
    text = (
        "Implicit bias of softmax attention (separate K Q^T -> nuclear/l1 SVM, "
        f"combined W -> Frobenius/l2 SVM), mean (min) over {seeds}\n"
        + format_table(header, lines)
    )
    if tables.get("aligned"):
        text += "\n\n" + _format_aligned(tables["aligned"])
    if tables.get("theorem"):
        text += "\n\n" + _format_theorem(tables["theorem"])
    return text


def _spread_cell(row, name, worst="min"):
    """``mean ± std (worst)`` of one measure of a summary row."""
    n = row[f"{name}_n"]
    value = _mean_spread(row[f"{name}_mean"], row[f"{name}_std"], n, digits=4)
    if n > 1:
        value += f" ({worst} {row[f'{name}_{worst}']:.4f})"
    return value


def _format_theorem(summary):
    """The theorem study: optimal tokens reached, correlations and norm ratios."""
    header = [
        "scores",
        "weights",
        "optimal tokens",
        "corr nuc (opt)",
        "corr fro (opt)",
        "corr nuc, reached",
        "corr fro, reached",
        "||W||_*/m / opt",
        "||W||_F/m / opt",
        "rank W / nuc / fro",
    ]
    lines = [
        [
            row["scores"],
            row["parametrization"],
            f"{row['n_reached']}/{row['n_seeds']}",
            _spread_cell(row, "corr_nuc_opt"),
            _spread_cell(row, "corr_fro_opt"),
            _spread_cell(row, "corr_nuc_opt_reached"),
            _spread_cell(row, "corr_fro_opt_reached"),
            _spread_cell(row, "ratio_nuc_opt", "max"),
            _spread_cell(row, "ratio_fro_opt", "max"),
            f"{row['rank_mean']:.1f} / {row['rank_svm_nuc_mean']:.1f} / "
            f"{row['rank_svm_fro_mean']:.1f}",
        ]
        for row in summary
    ]
    seeds = _seeds_text(row["n_seeds"] for row in summary)
    return (
        "The theorem's setting (full matrices; 'equal': every non-optimal token "
        "has the same score, 'generic': the runs above), mean ± std (worst) over "
        f"{seeds}, against the SVMs of the optimal tokens; 'reached' and the norm "
        "ratios: over the runs that select them\n" + format_table(header, lines)
    )


def _format_aligned(summary):
    """The aligned study: mean ± std (worst) over seeds per scale and start."""
    cell = _spread_cell

    header = [
        "init_scale",
        "weights",
        "start",
        "corr nuc",
        "corr fro",
        "||W||_*/m / opt",
        "corr nuc (opt)",
        "corr fro (opt)",
        "||W||_*/m / opt (opt)",
        "optimal tokens",
        "corr nuc at 0",
    ]
    lines = [
        [
            f"{row['init_scale']:g}",
            row["parametrization"],
            row["init"],
            cell(row, "corr_nuc"),
            cell(row, "corr_fro"),
            cell(row, "ratio_nuc", "max"),
            cell(row, "corr_nuc_opt"),
            cell(row, "corr_fro_opt"),
            cell(row, "ratio_nuc_opt", "max"),
            f"{row['n_reached']}/{row['n_seeds']}",
            f"{row['corr_nuc_start_mean']:.3f}",
        ]
        for row in summary
    ]
    seeds = _seeds_text(row["n_seeds"] for row in summary)
    return (
        "Full matrices from aligned against random starts, mean ± std (worst) "
        f"over {seeds}; '(opt)': against the SVMs of the optimal tokens\n"
        + format_table(header, lines)
    )

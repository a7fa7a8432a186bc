"""Plain-text summary tables of the multi-head attention reproduction."""

from __future__ import annotations

import numpy as np

from .._common import _seeds_text, format_table
from ._config import FUNCTION_TOL, MODELS, PARAMETER_TOL

__all__ = ["format_mha_summary"]


def format_mha_summary(tables):
    """Plain-text table of the median test errors at every ``n``.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_mha`.

    Returns
    -------
    text : str
        A line per ``m`` and ``n``, a column per model (median test relative
        error over the repetitions) and the learner's success rate.
    """
    rows = tables.get("learning_curves") or []
    if not rows:
        return ""
    cells = {(r["m"], r["n_train"], r["model"]): r for r in rows}
    lines = []
    for m, n in dict.fromkeys((r["m"], r["n_train"]) for r in rows):
        line = [str(m), str(n)]
        for model in MODELS:
            row = cells.get((m, n, model))
            line.append("-" if row is None else f"{row['error_median']:.2g}")
        learner = cells.get((m, n, "learner"))
        line.append(f"{learner['success_rate']:.2f}" if learner else "-")
        lines.append(line)
    first = rows[0]
    text = (
        f"Planted multi-head attention, d={first['d']}, k={first['k']}: median "
        f"test ||F_hat - F||^2 / ||F||^2 over "
        f"{_seeds_text(r['n_seeds'] for r in rows)}\n"
        + format_table(["m", "n", *MODELS, "learner recovered"], lines)
    )
    blocks = [text, _format_thresholds(tables), _format_degenerate(tables)]
    return "\n\n".join(block for block in blocks if block)


def _n(value):
    return ">max" if not np.isfinite(value) else f"{value:g}"


def _threshold_cell(row, criterion):
    """``median [min, max]`` over several seeds, the value alone over one."""
    med = _n(row[f"threshold_{criterion}_median"])
    if row["n_seeds"] == 1:
        return med
    low = _n(row[f"threshold_{criterion}_min"])
    high = _n(row[f"threshold_{criterion}_max"])
    return f"{med} [{low}, {high}]"


def _at_threshold(row, criterion):
    starts = row[f"starts_{criterion}_median"]
    secs = row[f"seconds_{criterion}_median"]
    return (
        "-" if starts is None else f"{starts:g}",
        "-" if secs is None else f"{secs:.2f}",
    )


def _format_thresholds(tables):
    rows = tables.get("thresholds") or []
    if not rows:
        return ""
    lines = [
        [
            r["inputs"],
            str(r["d"]),
            str(r["m"]),
            str(r["n_count"]),
            _threshold_cell(r, "function"),
            f"{r['recovered_function']}/{r['n_seeds']}",
            *_at_threshold(r, "function"),
            _threshold_cell(r, "parameters"),
            str(r["violations_function"] + r["violations_parameters"]),
            f"{r['seconds']:.0f}",
        ]
        for r in rows
    ]
    header = [
        "inputs",
        "d",
        "m",
        "n_count",
        "n* function",
        "recovered",
        "starts at n*",
        "s at n*",
        "n* parameters",
        "violations",
        "cell s",
    ]
    grid = max(r["n_max"] for r in rows)
    return (
        f"Recovery thresholds n* (k = {rows[0]['k']} tokens, n <= {grid}; "
        "median [min, max] over "
        f"{_seeds_text(r['n_seeds'] for r in rows)} per cell; function: test "
        f"rel. error <= {FUNCTION_TOL:g}; parameters: matched Theta and W errors "
        f"<= {PARAMETER_TOL:g}; starts and seconds: medians at n*)\n"
        + format_table(header, lines)
    )


def _format_degenerate(tables):
    rows = tables.get("degenerate") or []
    if not rows:
        return ""
    lines = []
    for r in rows:
        lines.append(
            [
                "independent" if r["delta"] is None else f"{r['delta']:g}",
                _threshold_cell(r, "function"),
                f"{r['recovered_function']}/{r['n_seeds']}",
                _threshold_cell(r, "parameters"),
                f"{r['recovered_parameters']}/{r['n_seeds']}",
                *_at_threshold(r, "parameters"),
                f"{r['theta_error_at_max_median']:.1e}",
                f"{r['values_error_at_max_median']:.1e}",
                f"{r['test_error_at_max_median']:.1e}",
                f"{r['seconds']:.0f}",
            ]
        )
    header = [
        "delta",
        "n* function",
        "recovered",
        "n* parameters",
        "recovered",
        "starts at n*",
        "s at n*",
        "Theta err @max",
        "W err @max",
        "test err @max",
        "cell s",
    ]
    r0 = rows[0]
    return (
        f"Near-degenerate heads (m = {r0['m']}, d = {r0['d']}, k = {r0['k']}, "
        f"{r0['inputs']}; ||Theta_2 - Theta_1||_F = delta, ||Theta_i||_F = "
        f"{r0['theta_norm']:g}; errors at n = {r0['n_max']}, medians over "
        f"{_seeds_text(r['n_seeds'] for r in rows)})\n" + format_table(header, lines)
    )

"""Plain-text summary tables of the random-feature attention reproduction."""

from __future__ import annotations

from .._common import _mean_spread, _seeds_text, format_table

__all__ = ["format_rfa_summary"]


def _sizes(rows):
    return sorted({row["n_train"] for row in rows})


def _by(rows, *keys):
    return {tuple(row[k] for k in keys): row for row in rows}


def _seeds_of(rows, key="n_seeds"):
    seeds = _seeds_text(row[key] for row in rows)
    spread = " \u00b1 std" if any(row[key] > 1 for row in rows) else ""
    return f"mean{spread} over {seeds}"


def _model_name(row):
    """``RFA``, or ``RFA (no qk_bias)`` for the contrast without the constant."""
    return row["model"] + (" (no qk_bias)" if row.get("qk_bias") is False else "")


def _needed_text(row):
    if row is None:
        return "-"
    if row["n_needed"] is None and not row["n_reached"]:
        return f"> {row['largest_n']}"
    needed = "-" if row["n_needed"] is None else str(row["n_needed"])
    low, high = row["n_needed_min"], row["n_needed_max"]
    seeds = f"{row['n_reached']}/{row['n_seeds']}"
    span = f"{low}" if low == high else f"{low}-{high}"
    return f"{needed} [{span}, {seeds}]"


def _format_degree(rows, thresholds):
    sizes = _sizes(rows)
    cells = _by(rows, "target", "model", "qk_bias", "n_train")
    needed = _by(thresholds or [], "target", "model", "qk_bias")
    header = ["target", "model", *(f"n={n}" for n in sizes), "n*"]
    lines = []
    for target, model, qk_bias in dict.fromkeys(
        (r["target"], r["model"], r["qk_bias"]) for r in rows
    ):
        row = cells[target, model, qk_bias, sizes[0]]
        line = [target, _model_name(row)]
        for n in sizes:
            cell = cells.get((target, model, qk_bias, n))
            line.append(
                _mean_spread(cell["error_mean"], cell["error_std"], cell["n_seeds"])
                if cell
                else "-"
            )
        line.append(_needed_text(needed.get((target, model, qk_bias))))
        lines.append(line)
    first = rows[0]
    text = (
        f"Degree table: test MSE / Var y against n ({_seeds_of(rows)}), "
        f"d={first['d']}, N={first['N']}, {first['n_params']} trained weights "
        "per model"
    )
    if thresholds:
        text += (
            f"\nn* = smallest n whose mean error is <= {thresholds[0]['threshold']:g} "
            "[range over the seeds that reach it, seeds reaching it]"
        )
    return text + "\n" + format_table(header, lines)


def _n_star_text(row):
    """``median [min-max, reached/seeds]``, ``>`` where not reached."""
    above = f">{row['largest_n']}"
    median = row["n_star_median"]
    median = above if median is None else f"{median:g}"
    if row["n_reached"] == 0:
        return f"{median} [0/{row['n_seeds']}]"
    low = str(row["n_star_min"])
    high = above if row["n_star_max"] is None else str(row["n_star_max"])
    span = low if low == high else f"{low}-{high}"
    return f"{median} [{span}, {row['n_reached']}/{row['n_seeds']}]"


def _slope_text(mean, std, n_seeds):
    if mean is None or mean != mean:
        return "-"
    return f"{mean:.2f} \u00b1 {std:.2f}" if n_seeds > 1 else f"{mean:.2f}"


def _format_scaling(rows, slopes):
    token_dims = sorted({r["d"] for r in rows})
    n_keys = sorted({r["N"] for r in rows})
    cells = _by(rows, "model", "d", "N")
    header = ["model", "d", *(f"N={n}" for n in n_keys)]
    lines = []
    for model in dict.fromkeys(r["model"] for r in rows):
        for d in token_dims:
            lines.append(
                [model, str(d)] + [_n_star_text(cells[model, d, n]) for n in n_keys]
            )
    first = rows[0]
    text = (
        f"Sample complexity: n* = smallest n with test MSE / Var y <= "
        f"{first['threshold']:g} on {first['target']}, median [range] over "
        f"{_seeds_text(r['n_seeds'] for r in rows)}, seeds reaching it (a curve "
        f"stops at its n*; '>' not reached by n = {first['largest_n']})\n"
        + format_table(header, lines)
    )
    if slopes:
        lines = []
        for row in slopes:
            fit = "joint" if row["fit"] == "joint" else f"at {row['fixed']}"
            lines.append(
                [
                    row["model"],
                    f"log n* ~ log {row['axis']}",
                    fit,
                    _slope_text(
                        row["slope_mean"], row["slope_std"], row["n_seeds_fitted"]
                    ),
                    _slope_text(
                        row["slope_censored_at_2n_mean"],
                        row["slope_censored_at_2n_std"],
                        row["n_seeds_fitted"],
                    ),
                    f"{row['n_censored']}/{row['n_cells']}",
                ]
            )
        spread = " \u00b1 std" if max(r["n_seeds"] for r in rows) > 1 else ""
        text += (
            f"\n\nSlopes of log n* (mean{spread} over seeds): over the cells "
            "reached, and with the cells not reached at twice the largest n\n"
            + format_table(
                ["model", "slope", "fit", "reached", "censored at 2n", "censored"],
                lines,
            )
        )
    return text


def _format_biased(rows, thresholds):
    sizes = _sizes(rows)
    cells = _by(rows, "target", "d", "n_train")
    needed = _by(thresholds or [], "target", "d", "model")
    header = [
        "target",
        "d",
        *(f"ratio n={n}" for n in sizes),
        "n* RFA",
        "n* BiasedRFA",
    ]
    lines = []
    for target, d in dict.fromkeys((r["target"], r["d"]) for r in rows):
        line = [target, str(d)]
        for n in sizes:
            cell = cells[target, d, n]
            line.append(
                _mean_spread(cell["ratio_mean"], cell["ratio_std"], cell["n_seeds"])
            )
        line += [
            _needed_text(needed.get((target, d, "RFA"))),
            _needed_text(needed.get((target, d, "BiasedRFA"))),
        ]
        lines.append(line)
    first = rows[0]
    return (
        "BiasedRFA against RFA: paired ratio of test errors, below 1 BiasedRFA "
        f"better ({_seeds_of(rows)}), N={first['N']}, {first['n_params']} "
        "trained weights at the first d\n" + format_table(header, lines)
    )


def _format_mean_scale(rows):
    sizes = _sizes(rows)
    cells = _by(rows, "mean_scale", "n_train")
    header = [
        "mu",
        *(f"error n={n}" for n in sizes),
        *(f"ratio n={n}" for n in sizes),
    ]
    lines = []
    for mu in dict.fromkeys(r["mean_scale"] for r in rows):
        line = [f"{mu:g}"]
        for column in ("error", "ratio_to_rfa"):
            for n in sizes:
                row = cells[mu, n]
                line.append(
                    _mean_spread(
                        row[f"{column}_mean"], row[f"{column}_std"], row["n_seeds"]
                    )
                )
        lines.append(line)
    first = rows[0]
    return (
        f"BiasedRFA's mean scale mu on {first['target']} (mu = 0 is RFA, 1 the "
        f"default): test MSE / Var y and the paired ratio to RFA's, below 1 "
        f"BiasedRFA better ({_seeds_of(rows)}), d={first['d']}, N={first['N']}\n"
        + format_table(header, lines)
    )


def _format_softmax(rows, temperature):
    sizes = _sizes(rows)
    cells = _by(rows, "target", "n_train")
    header = ["target"]
    for n in sizes:
        header += [f"relu n={n}", f"softmax n={n}"]
    lines = []
    for target in dict.fromkeys(r["target"] for r in rows):
        line = [target]
        for n in sizes:
            row = cells[target, n]
            for column in ("relu", "softmax"):
                line.append(
                    _mean_spread(
                        row[f"{column}_mean"], row[f"{column}_std"], row["n_seeds"]
                    )
                )
        lines.append(line)
    first = rows[0]
    text = (
        f"RFA: ReLU against softmax attention weights, test MSE / Var y "
        f"({_seeds_of(rows)}), d={first['d']}, N={first['N']}\n"
        + format_table(header, lines)
    )
    if temperature:
        sizes = _sizes(temperature)
        cells = _by(temperature, "target", "inverse_temperature", "n_train")
        lines = []
        for target, c in dict.fromkeys(
            (r["target"], r["inverse_temperature"]) for r in temperature
        ):
            line = [target, f"{c:g}"]
            for n in sizes:
                row = cells[target, c, n]
                line.append(
                    _mean_spread(row["error_mean"], row["error_std"], row["n_seeds"])
                )
            lines.append(line)
        text += (
            "\n\nSoftmax inverse temperature c (qk_std = c / sqrt(d); c = 1 is the "
            f"default), test MSE / Var y ({_seeds_of(temperature)})\n"
            + format_table(["target", "c", *(f"n={n}" for n in sizes)], lines)
        )
    return text


def format_rfa_summary(tables):
    """Plain-text tables of :func:`run_rfa`'s results.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_rfa`.

    Returns
    -------
    text : str
        The degree table (a line per target and model, a column per ``n``,
        and the smallest ``n`` reaching the threshold), the sample-complexity
        grid of ``n*`` against ``d`` and ``N`` with its slopes, BiasedRFA's
        paired error ratios to RFA, the mean-scale table and the softmax/ReLU
        table (with the inverse temperatures when run); cells ``mean ± std``
        over the repetitions (the mean alone over one), each title saying how
        many.
    """
    parts = []
    if tables.get("degree"):
        parts.append(_format_degree(tables["degree"], tables.get("degree_thresholds")))
    if tables.get("scaling"):
        parts.append(_format_scaling(tables["scaling"], tables.get("scaling_slopes")))
    if tables.get("biased"):
        parts.append(_format_biased(tables["biased"], tables.get("biased_thresholds")))
    if tables.get("mean_scale"):
        parts.append(_format_mean_scale(tables["mean_scale"]))
    if tables.get("softmax"):
        parts.append(
            _format_softmax(tables["softmax"], tables.get("softmax_temperature"))
        )
    return "\n\n".join(parts)

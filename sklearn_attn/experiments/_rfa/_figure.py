"""The figure of the random-feature attention reproduction."""

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
from ._config import target_spec

__all__ = ["plot_rfa"]

_COLORS = {"RFA": "tab:blue", "BiasedRFA": "tab:orange", "RFMLP": "tab:green"}
# Targets in the degree panels: a colour per degree, the power t^3 in grey.
_TARGET_COLORS = ("tab:purple", "tab:red", "tab:brown", "tab:pink", "tab:olive")
_STYLES = ("-", "--", ":", "-.")
# The docs show the figure scaled to a page column (about 900 px): at most
# three panels a row on a figure of this width keep 10-pt ticks and labels and
# 9-pt titles and legends readable there.
_WIDTH = 10.5
_MAX_COLS = 3
_PANEL_HEIGHT = 3.3
_TITLE_SIZE = 9
_LEGEND_SIZE = 9


def _target_math(label):
    r"""A target name as mathtext, e.g. ``$\mathrm{mean}_i\, Q_2(t_i)$``."""
    spec = target_spec(label)
    if spec["target"] == "gamma":
        return rf"$\mathrm{{mean}}_i\, e^{{{spec['gamma']:g} t_i}}$"
    p = spec["degree"]
    term = f"t_i^{{{p}}}" if spec["polynomial"] == "power" else f"Q_{{{p}}}(t_i)"
    if p == 1:
        term = "t_i"
    if spec["target"] == "value":
        term += r"\, x_{i1}"
    return rf"$\mathrm{{mean}}_i\, {term}$"


def _target_short(label):
    """A target in a few characters of mathtext: ``$Q_2$``, ``$t^3$``, ..."""
    spec = target_spec(label)
    if spec["target"] == "gamma":
        return rf"$e^{{{spec['gamma']:g} t}}$"
    p = spec["degree"]
    term = f"t^{{{p}}}" if spec["polynomial"] == "power" else f"Q_{{{p}}}"
    if p == 1:
        term = "t"
    return f"${term}\\, x_1$" if spec["target"] == "value" else f"${term}$"


def _series(rows, column="error", **match):
    sel = [r for r in rows if all(r[k] == v for k, v in match.items())]
    sel.sort(key=lambda r: r["n_train"])
    mean = np.array([r[f"{column}_mean"] for r in sel], dtype=float)
    std = np.array([r[f"{column}_std"] for r in sel], dtype=float)
    n_seeds = min((r["n_seeds"] for r in sel), default=0)
    # On log axes: keep the lower edge of the band positive.
    low = np.maximum(mean - std, mean * 0.05)
    return [r["n_train"] for r in sel], mean, low, mean + std, n_seeds


def _reference_lines(ax, threshold=None):
    ax.axhline(
        1.0, color="0.5", linewidth=0.8, linestyle=":", label="predicting the mean"
    )
    if threshold is not None:
        ax.axhline(
            threshold,
            color="k",
            linewidth=0.8,
            linestyle="--",
            label=f"threshold {threshold:g}",
        )


def _target_style(target, targets):
    """Colour and line style of a target's curves in the degree panels."""
    spec = target_spec(target)
    if spec.get("polynomial") == "power":
        return {"color": "0.45"}
    polynomials = [t for t in targets if target_spec(t).get("polynomial") != "power"]
    return {"color": _TARGET_COLORS[polynomials.index(target) % len(_TARGET_COLORS)]}


def plot_rfa(tables, path=None):
    r"""Draw the figure of :func:`run_rfa`'s tables.

    At most three panels a row. Top (the degree table): the normalised test
    error against ``n`` (log-log), one panel per model (the paper's models,
    then the contrasts without the constant in the scores), a line per target
    (a colour per degree, grey for :math:`t^3`), the dashed line the threshold
    of ``n*`` (given in the panel's title per target) and the dotted line at 1
    the error of predicting the mean. Next row: ``n*`` of RFA (solid) and
    RFMLP (dashed) against the number of keys ``N`` (a colour per ``d``) and
    against ``d`` (a colour per ``N``), the median over the seeds, with open
    markers at the largest size where it is not reached; BiasedRFA's paired
    error ratio to RFA against ``n`` (a colour per target, a line style per
    ``d``). Bottom row: that ratio on the :math:`e^{\gamma t}` targets
    against :math:`\gamma` (a shade per ``n``), against BiasedRFA's mean
    scale :math:`\mu`, and RFA's error with ReLU and softmax weights per
    target at the largest ``n``. Bands (or error bars) are ± one standard
    deviation over the repetitions, when there are several; each of the
    three parts has its legend below it; the title states the sizes and the
    number of seeds.

    matplotlib is imported here, not with the module; no pyplot state or
    interactive backend is used.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_rfa`.
    path : str or path-like, default=None
        If given, the figure is saved there (the format follows the suffix).

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> from sklearn_attn.experiments import plot_rfa, run_rfa
    >>> fig = plot_rfa(run_rfa(quick=True, progress=False), "rfa.png")  # doctest: +SKIP
    """
    degree = tables.get("degree") or []
    scaling = tables.get("scaling") or []
    biased = tables.get("biased") or []
    mean_scale = tables.get("mean_scale") or []
    softmax = tables.get("softmax") or []
    gamma_rows = [r for r in biased if target_spec(r["target"])["target"] == "gamma"]
    ratio_rows = [r for r in biased if r not in gamma_rows]
    variants = list(dict.fromkeys((r["model"], r["qk_bias"]) for r in degree))
    middle = 2 * bool(scaling) + bool(ratio_rows)
    bottom = bool(gamma_rows) + bool(mean_scale) + bool(softmax)
    # Blocks of panels, each a subfigure with its own legend below it: the
    # degree panels wrap onto rows of at most three (two and two for four).
    degree_cols = 2 if len(variants) == 4 else min(len(variants), _MAX_COLS)
    degree_rows = -(-len(variants) // _MAX_COLS)
    blocks = [n for n in (degree_rows if variants else 0, middle, bottom) if n]
    heights = [
        (degree_rows if k == 0 and variants else 1) * _PANEL_HEIGHT + 0.9
        for k in range(len(blocks))
    ]
    fig = _figure(_WIDTH, sum(heights) + 1.0)
    panels = (
        fig.subfigures(len(blocks), 1, squeeze=False, height_ratios=heights)[:, 0]
        if blocks
        else []
    )
    panels = iter(panels)
    if variants:
        sub = next(panels)
        _plot_degree(
            sub,
            degree,
            tables.get("degree_thresholds") or [],
            variants,
            degree_rows,
            degree_cols,
        )
        _figure_legend(sub, ncols=4, fontsize=_LEGEND_SIZE)
    if middle:
        sub = next(panels)
        axes = list(sub.subplots(1, _MAX_COLS, squeeze=False)[0])
        for ax in axes[middle:]:
            ax.remove()
        if scaling:
            _plot_n_star(axes.pop(0), scaling, "N", "d")
            _plot_n_star(axes.pop(0), scaling, "d", "N")
        if ratio_rows:
            _plot_ratios(axes.pop(0), ratio_rows)
        _figure_legend(sub, ncols=4, fontsize=_LEGEND_SIZE)
    if bottom:
        sub = next(panels)
        axes = list(sub.subplots(1, _MAX_COLS, squeeze=False)[0])
        for ax in axes[bottom:]:
            ax.remove()
        if gamma_rows:
            _plot_gamma(axes.pop(0), gamma_rows)
        if mean_scale:
            _plot_mean_scale(axes.pop(0), mean_scale)
        if softmax:
            _plot_softmax(axes.pop(0), softmax)
        _figure_legend(sub, ncols=6, fontsize=_LEGEND_SIZE)

    every = degree + scaling + biased + mean_scale + softmax
    seeds = _seeds_text(r["n_seeds"] for r in every)
    spread = ", bands ± one std" if any(r["n_seeds"] > 1 for r in every) else ""
    _caption(
        fig,
        "Random-feature attention (Fu et al., 2023): normalised test error "
        "MSE / Var($y$)",
        f"mean over {seeds}{spread}; $n$ training samples; every model of a "
        "panel with the same number of trained weights",
    )
    _save(fig, path)
    return fig


def _variant_title(model, qk_bias):
    if qk_bias is False:
        return f"{model} without the constant (qk_bias=False)"
    return model


def _plot_degree(fig, rows, thresholds, variants, n_rows, n_cols):
    """A panel per model variant: the error against n, a line per target, on
    ``n_rows`` rows of ``n_cols`` panels sharing their y axis."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    sizes = sorted({r["n_train"] for r in rows})
    needed = {(r["target"], r["model"], r["qk_bias"]): r for r in thresholds}
    threshold = thresholds[0]["threshold"] if thresholds else None
    grid = fig.add_gridspec(n_rows, n_cols)
    axes = []
    for k in range(len(variants)):
        share = axes[0] if axes else None
        axes.append(fig.add_subplot(grid[k // n_cols, k % n_cols], sharey=share))
    for j, (ax, (model, qk_bias)) in enumerate(zip(axes, variants, strict=True)):
        ax.set_yscale("log")
        _reference_lines(ax, threshold)
        for target in targets:
            x, mean, low, high, n_seeds = _series(
                rows, target=target, model=model, qk_bias=qk_bias
            )
            _curve(
                ax,
                x,
                mean,
                low=low,
                high=high,
                n_seeds=n_seeds,
                **_target_style(target, targets),
                label=_target_math(target),
            )
        first = rows[0]
        title = (
            f"{_variant_title(model, qk_bias)}\n$d = {first['d']}$, $N = {first['N']}$"
        )
        if thresholds:
            entries = [
                f"{_target_short(t)} {_short_needed(needed.get((t, model, qk_bias)))}"
                for t in targets
            ]
            lines = [", ".join(entries[i : i + 3]) for i in range(0, len(entries), 3)]
            title += "\n$n^*$: " + ",\n".join(lines)
        ax.set_title(title, fontsize=_TITLE_SIZE)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("$n$ (training samples)")
        if j % n_cols == 0:
            ax.set_ylabel("test MSE / Var($y$)")
    for ax in axes:
        _log_axis(ax, "x", ticks=sizes)
        _log_axis(ax, "y")


def _short_needed(row):
    if row is None:
        return "-"
    if row["n_needed"] is None:
        return f"$> {row['largest_n']}$"
    return str(row["n_needed"])


def _plot_n_star(ax, rows, axis, other):
    """n* against ``axis`` ("N" or "d"), a colour per value of ``other``,
    RFA solid and RFMLP dashed, bars from the smallest to the largest n* over
    the seeds; open markers at the largest size where the median is not
    reached."""
    values = sorted({r[other] for r in rows})
    palette = ("tab:purple", "tab:red", "tab:brown", "tab:cyan", "tab:olive")
    colors = dict(zip(values, palette, strict=False))
    styles = dict(zip(dict.fromkeys(r["model"] for r in rows), _STYLES, strict=False))
    largest = max(r["largest_n"] for r in rows)
    for model, style in styles.items():
        for value in values:
            sel = sorted(
                (r for r in rows if r["model"] == model and r[other] == value),
                key=lambda r: r[axis],
            )
            reached = [r for r in sel if r["n_star_median"] is not None]
            color = colors[value]
            label = f"{model}, ${other} = {value}$"
            if reached:
                x = np.array([r[axis] for r in reached], dtype=float)
                y = np.array([r["n_star_median"] for r in reached], dtype=float)
                ax.plot(
                    x,
                    y,
                    color=color,
                    linestyle=style,
                    marker="o",
                    markersize=3.5,
                    label=label,
                )
                low = np.array([r["n_star_min"] for r in reached], dtype=float)
                high = np.array(
                    [
                        largest if r["n_star_max"] is None else r["n_star_max"]
                        for r in reached
                    ],
                    dtype=float,
                )
                if min(r["n_seeds"] for r in reached) > 1 and (high > low).any():
                    ax.errorbar(
                        x,
                        y,
                        yerr=[y - low, high - y],
                        fmt="none",
                        ecolor=color,
                        elinewidth=1,
                        capsize=2,
                    )
            censored = [r[axis] for r in sel if r["n_star_median"] is None]
            if censored:
                ax.plot(
                    censored,
                    [largest] * len(censored),
                    marker="^",
                    markersize=6,
                    linestyle="none",
                    markerfacecolor="none",
                    color=color,
                    label=None if reached else label,
                )
    ax.axhline(largest, color="0.5", linewidth=0.8, linestyle=":")
    ax.set_xlabel(f"${axis}$ ({'keys' if axis == 'N' else 'token dimension'})")
    ax.set_ylabel("$n^*$ (median over seeds)")
    ax.set_title(
        f"$n^*$ against ${axis}$\nsolid RFA, dashed RFMLP; bars: range\n"
        f"open $\\wedge$: not reached by $n = {largest}$",
        fontsize=_TITLE_SIZE,
    )
    ax.grid(True, which="major", alpha=0.3)
    _log_axis(ax, "x", ticks=sorted({r[axis] for r in rows}))
    _log_axis(ax, "y")


def _plot_ratios(ax, rows):
    """BiasedRFA / RFA against n, a colour per target, a style per d."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    dims = sorted({r["d"] for r in rows})
    styles = dict(zip(dims, _STYLES, strict=False))
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", linewidth=0.8)
    for k, target in enumerate(targets):
        for d in dims:
            x, mean, low, high, n_seeds = _series(
                rows, column="ratio", target=target, d=d
            )
            _curve(
                ax,
                x,
                mean,
                low=low,
                high=high,
                n_seeds=n_seeds,
                color=_TARGET_COLORS[k % len(_TARGET_COLORS)],
                linestyle=styles[d],
                label=f"{_target_short(target)}, $d = {d}$",
            )
    ax.set_xlabel("$n$ (training samples)")
    ax.set_ylabel("error BiasedRFA / error RFA")
    ax.set_title(
        "BiasedRFA against RFA (paired)\nbelow 1: BiasedRFA better\n"
        "colour: target, style: $d$",
        fontsize=_TITLE_SIZE,
    )
    ax.grid(True, which="major", alpha=0.3)
    _log_axis(ax, "x", ticks=sorted({r["n_train"] for r in rows}))
    _log_axis(ax, "y")


def _ratio_against(ax, rows, x_of, column, title, xlabel):
    """BiasedRFA's paired error ratio to RFA (``column``) against ``x_of(row)``,
    a shade per n."""
    sizes = sorted({r["n_train"] for r in rows})
    shades = np.linspace(0.35, 1.0, len(sizes)) if len(sizes) > 1 else [1.0]
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", linewidth=0.8)
    for size, shade in zip(sizes, shades, strict=True):
        sel = sorted((r for r in rows if r["n_train"] == size), key=x_of)
        mean = np.array([r[f"{column}_mean"] for r in sel], dtype=float)
        std = np.array([r[f"{column}_std"] for r in sel], dtype=float)
        _curve(
            ax,
            [x_of(r) for r in sel],
            mean,
            low=np.maximum(mean - std, mean * 0.05),
            high=mean + std,
            n_seeds=min(r["n_seeds"] for r in sel),
            color=_shade(_COLORS["BiasedRFA"], shade),
            label=f"$n = {size}$",
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("error BiasedRFA / error RFA")
    ax.set_title(f"{title}\n(paired; shade: $n$)", fontsize=_TITLE_SIZE)
    ax.grid(True, which="major", alpha=0.3)
    _log_axis(ax, "y")


def _plot_gamma(ax, rows):
    """BiasedRFA's error ratio to RFA against gamma, a shade per n."""
    _ratio_against(
        ax,
        rows,
        lambda r: target_spec(r["target"])["gamma"],
        "ratio",
        f"BiasedRFA against RFA on $e^{{\\gamma t}}$, $d = {rows[0]['d']}$",
        r"$\gamma$ of $\mathrm{mean}_i\, e^{\gamma t_i}$",
    )


def _plot_mean_scale(ax, rows):
    """BiasedRFA's error ratio to RFA against mu, a shade per n."""
    _ratio_against(
        ax,
        rows,
        lambda r: r["mean_scale"],
        "ratio_to_rfa",
        f"{_target_math(rows[0]['target'])}: below 1, BiasedRFA better",
        r"mean scale $\mu$ (qk_mean_scale; $\mu = 0$ is RFA)",
    )


def _plot_softmax(ax, rows):
    """RFA with ReLU and with softmax weights, per target at the largest n."""
    size = max(r["n_train"] for r in rows)
    sel = [r for r in rows if r["n_train"] == size]
    x = np.arange(len(sel))
    ax.set_yscale("log")
    _reference_lines(ax)
    for offset, (column, color, label) in zip(
        (-0.12, 0.12),
        (
            ("relu", _COLORS["RFA"], "RFA, ReLU"),
            ("softmax", "tab:purple", "RFA, softmax"),
        ),
        strict=True,
    ):
        mean = np.array([r[f"{column}_mean"] for r in sel], dtype=float)
        std = np.array([r[f"{column}_std"] for r in sel], dtype=float)
        ax.plot(
            x + offset,
            mean,
            marker="o",
            markersize=4,
            linestyle="none",
            color=color,
            label=label,
        )
        if min(r["n_seeds"] for r in sel) > 1:
            low = np.maximum(mean - std, mean * 0.05)
            ax.errorbar(
                x + offset,
                mean,
                yerr=[mean - low, std],
                fmt="none",
                ecolor=color,
                elinewidth=1,
                capsize=2,
            )
    ax.set_xticks(x, [_target_short(r["target"]) for r in sel])
    ax.set_ylabel("test MSE / Var($y$)")
    ax.set_title(f"ReLU against softmax attention, $n = {size}$", fontsize=_TITLE_SIZE)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    _log_axis(ax, "y")


def _shade(color, amount):
    """Blend ``color`` with white: ``amount`` 1 is the colour, 0 white."""
    from matplotlib.colors import to_rgb

    rgb = np.array(to_rgb(color))
    return tuple(1.0 - amount * (1.0 - rgb))

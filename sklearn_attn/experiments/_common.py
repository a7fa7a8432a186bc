"""Helpers shared by the reproductions: progress lines, CSV tables, seeds, tasks,
and the house style of their figures."""

from __future__ import annotations

import csv
import math
import os

import numpy as np
from joblib import parallel_config
from sklearn.utils.parallel import Parallel, delayed

from .._console import Progress

__all__ = [
    "Progress",
    "format_table",
    "merge_config",
    "run_tasks",
    "seed_pair",
    "summarize",
    "write_csv",
]


def seed_pair(random_state, *keys):
    """Two independent integer seeds (data, weights) for one repetition.

    Derived from ``random_state`` and integer ``keys`` with
    :class:`numpy.random.SeedSequence`, so every repetition, part and setting
    gets fresh data and fresh random weights, reproducibly.
    """
    entropy = [int(random_state), *(int(k) for k in keys)]
    data_seed, weight_seed = np.random.SeedSequence(entropy).generate_state(2)
    return int(data_seed), int(weight_seed)


def _in_sequence(function, *args):
    # A task's own joblib calls (learning_curve, restarts) stay in its worker:
    # under the dask backend they would otherwise go back to the scheduler.
    with parallel_config(backend="sequential"):
        return function(*args)


def run_tasks(tasks, *, n_jobs=None):
    """Run the calls ``function(*args)`` of ``tasks``; yield results in order.

    The grid of a reproduction, through :class:`sklearn.utils.parallel.Parallel`:
    one task after another in this process with ``n_jobs=None``, on joblib
    workers otherwise, or on a Dask cluster under
    ``joblib.parallel_config(backend="dask")``. Every task carries its own
    seeds, so the results do not depend on where it ran.

    Parameters
    ----------
    tasks : list of tuple
        ``(function, *args)`` per call; ``function`` is defined at module level
        (workers in other processes import it).
    n_jobs : int, default=None
        Joblib workers; ``None`` takes the active ``parallel_config``'s
        (one at a time outside one).

    Returns
    -------
    results : generator
        The results in the order of ``tasks``, each as soon as it and those
        before it are done.
    """
    return Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_in_sequence)(*task) for task in tasks
    )


def merge_config(defaults, overrides):
    """``defaults`` updated by ``overrides``, one level of nested dicts deep.

    A study given as a dict is merged into the default one; any other value
    (``None`` leaves a study out) replaces it. Names that the defaults do not
    have are an error, so that a misspelt setting is never silently ignored.

    Examples
    --------
    >>> from sklearn_attn.experiments._common import merge_config
    >>> merge_config({"n": 1, "study": {"a": 1, "b": 2}}, {"study": {"b": 3}})
    {'n': 1, 'study': {'a': 1, 'b': 3}}
    """
    merged = dict(defaults)
    for key, value in (overrides or {}).items():
        if key not in merged:
            raise ValueError(
                f"Unknown setting {key!r} in config; expected some of {sorted(merged)}."
            )
        if isinstance(value, dict) and isinstance(merged[key], dict):
            unknown = sorted(set(value) - set(merged[key]))
            if unknown:
                raise ValueError(
                    f"Unknown settings {unknown} in config[{key!r}]; expected "
                    f"some of {sorted(merged[key])}."
                )
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def summarize(values):
    """Mean and standard deviation (``ddof=0``) of the finite entries."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    return float(values.mean()), float(values.std())


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def write_csv(rows, path):
    """Write a table (a list of dict rows) to a CSV file.

    Parameters
    ----------
    rows : list of dict
        The rows; the columns are the keys of the first row, in order, followed
        by any new keys of later rows. ``None`` and NaN are written as empty
        cells, floats at full precision.
    path : str or path-like
        Output file; its folder is created if needed.

    Returns
    -------
    path : str
        The path written.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_attn.experiments import write_csv
    >>> path = os.path.join(tempfile.mkdtemp(), "table.csv")
    >>> _ = write_csv([{"model": "RFA", "error": 0.5}], path)
    >>> print(open(path).read().strip())
    model,error
    RFA,0.5
    """
    rows = list(rows)
    columns = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(key)) for key in columns])
    return path


def format_table(header, lines):
    """Align a header and lines of cells (strings) as a plain-text table."""
    cells = [list(map(str, header))] + [list(map(str, line)) for line in lines]
    widths = [max(len(row[j]) for row in cells) for j in range(len(header))]
    out = []
    for i, row in enumerate(cells):
        out.append(
            "  ".join(
                c.rjust(w) if j else c.ljust(w)
                for j, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


# -- figures -------------------------------------------------------------------
# One house style for the reproductions' figures: mathtext labels, log axes
# labelled at powers (or at the data's own values) with unlabelled minor ticks,
# one legend per figure below the panels, bands only over several seeds, a
# caption that states the sizes and the number of seeds. matplotlib is imported
# in these functions only.


def _figure(width, height):
    """A figure with constrained layout, outside pyplot (no global state)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _tick_label(value, _position=None):
    """A tick label: plain for ``1e-3 <= |value| < 1e5``, else in powers of ten."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    exponent = math.floor(math.log10(abs(value)) + 1e-9)
    mantissa = value / 10.0**exponent
    if -3 <= exponent <= 4:
        return f"{value:.6g}"
    if abs(mantissa - round(mantissa)) < 1e-6 and round(mantissa) == 1:
        return rf"$10^{{{exponent}}}$"
    return rf"${mantissa:.2g} \times 10^{{{exponent}}}$"


def _log_axis(ax, which, *, ticks=None, max_labels=7):
    """Put the ``which`` (``"x"`` or ``"y"``) axis of ``ax`` on a log scale
    with readable ticks.

    With ``ticks`` (the data's own values, e.g. training sizes) the labels are
    those values, at most ``max_labels`` of them (the others unlabelled).
    Otherwise the labels are powers of ten when the axis spans two decades or
    more and multiples 1, 2, 5 of them down to one decade; an axis narrower
    than that goes back to a linear scale, where a log scale would show one
    tick label or none. Minor ticks are never labelled, so labels do not
    collide. Call it after the data are drawn: the choice depends on the
    axis limits.
    """
    from matplotlib import ticker

    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    formatter = ticker.FuncFormatter(_tick_label)
    if ticks is not None:
        ticks = np.unique(np.asarray(ticks, dtype=float))
        ticks = ticks[ticks > 0]
        step = max(1, math.ceil(len(ticks) / max_labels))
        axis.set_major_locator(ticker.FixedLocator(ticks[::step]))
        axis.set_minor_locator(ticker.FixedLocator(ticks))
    else:
        low, high = sorted(axis.get_view_interval())
        decades = math.log10(high / low) if low > 0 else math.inf
        if decades < 1:
            getattr(ax, f"set_{which}scale")("linear")
            return
        if decades >= 2:
            axis.set_major_locator(ticker.LogLocator(base=10, numticks=max_labels))
            formatter = ticker.LogFormatterSciNotation(base=10)
        else:
            axis.set_major_locator(ticker.LogLocator(base=10, subs=(1, 2, 5)))
        axis.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(2, 10)))
    axis.set_major_formatter(formatter)
    axis.set_minor_formatter(ticker.NullFormatter())


def _curve(ax, x, y, *, low=None, high=None, n_seeds=1, **kwargs):
    """A line with markers, or markers alone when there are fewer than 3 points.

    The spread from ``low`` to ``high`` (e.g. mean ± std) is drawn only when
    the points summarise several seeds (``n_seeds > 1``): as a band along a
    line, as error bars on lone markers. Points that are not finite (or not
    positive on a log axis) are left out; nothing is drawn (and ``None``
    returned) when none is left, so a legend never lists an empty line.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    if ax.get_yscale() == "log":
        keep &= y > 0
    if not keep.any():
        return None
    kwargs.setdefault("marker", "o")
    kwargs.setdefault("markersize", 3.5)
    markers_only = keep.sum() < 3
    if markers_only:
        kwargs["linestyle"] = "none"
    (line,) = ax.plot(x[keep], y[keep], **kwargs)
    if n_seeds > 1 and low is not None and high is not None:
        low = np.asarray(low, dtype=float)[keep]
        high = np.asarray(high, dtype=float)[keep]
        if markers_only:
            ax.errorbar(
                x[keep],
                y[keep],
                yerr=[y[keep] - low, high - y[keep]],
                fmt="none",
                ecolor=line.get_color(),
                elinewidth=1,
                capsize=2,
            )
        else:
            ax.fill_between(
                x[keep], low, high, color=line.get_color(), alpha=0.18, linewidth=0
            )
    return line


def _figure_legend(fig, *, ncols=None, order=(), fontsize=8, **kwargs):
    """One legend for the whole figure (or subfigure), below its panels (off
    the data).

    Each label once, from the artists drawn in the axes (lines without data
    are skipped): those in ``order`` first, the others in drawing order.
    """
    handles, labels = [], []
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label in labels:
                continue
            data = getattr(handle, "get_xdata", None)
            if data is not None and len(data()) == 0:
                continue
            handles.append(handle)
            labels.append(label)
    if not handles:
        return None
    rank = {label: k for k, label in enumerate(order)}
    pairs = sorted(
        zip(handles, labels, strict=True),
        key=lambda pair: rank.get(pair[1], len(rank)),
    )
    handles, labels = [list(x) for x in zip(*pairs, strict=True)]
    if ncols is None:
        ncols = min(len(handles), 4)
    return fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=ncols,
        fontsize=fontsize,
        frameon=False,
        **kwargs,
    )


def _caption(fig, title, details):
    """The figure's title and, below it, what was run (sizes, seeds)."""
    fig.suptitle(f"{title}\n{details}", fontsize=10)


def _save(fig, path):
    """Save ``fig`` (if ``path`` is given), the outside legend included."""
    if path is not None:
        fig.savefig(path, dpi=110, bbox_inches="tight")


def _seeds_text(counts):
    """``"1 seed"``, ``"3 seeds"`` or ``"2 to 3 seeds"`` from per-point counts."""
    counts = sorted({int(c) for c in counts})
    if not counts:
        return "no seeds"
    low, high = counts[0], counts[-1]
    word = "seed" if high == 1 else "seeds"
    return f"{low} {word}" if low == high else f"{low} to {high} {word}"


def _mean_spread(mean, std, n_seeds, digits=3):
    """``"mean ± std"`` over several seeds, the value alone over one."""
    if mean is None or not np.isfinite(mean):
        return "-"
    if n_seeds is None or n_seeds > 1:
        return f"{mean:.{digits}g} \u00b1 {std:.1g}"
    return f"{mean:.{digits}g}"


# -- settings --------------------------------------------------------------------
def check_count(value, name):
    """``value`` as an ``int`` when it is a positive whole number.

    A bool, a fraction or a value below one is a ``ValueError`` that names
    ``name`` (e.g. ``"n_seeds"``); a float of whole value (``3.0``) is accepted.

    Examples
    --------
    >>> from sklearn_attn.experiments._common import check_count
    >>> check_count(3.0, "n_seeds")
    3
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not float(value).is_integer()
        or value < 1
    ):
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)

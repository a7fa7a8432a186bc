"""Reproduction: learning planted multi-head attention layers (Chen and Li, 2024).

Planted layers ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` with ``m`` in
{1, 2, 3} heads label Boolean token sequences
(:func:`~sklearn_attn.datasets.make_attention_layer_regression`). For each
``m`` and number of training samples ``n`` three models are compared on a fresh
test set by the relative error ``||F_hat - F||^2 / ||F||^2``:

* ``learner``: :class:`~sklearn_attn.MultiHeadAttentionLearner` with ``m`` heads
  (its default settings: L-BFGS, several starts, exact refit of the ``W_i``);
* ``too_few_heads``: the same with ``m - 1`` heads (for ``m >= 2``);
* ``uniform_linear``: uniform attention, ``Y_a = mean_b(x_b) B``, ``B`` fitted by
  least squares.

Every repetition plants a new layer; the training sets of one repetition are
nested prefixes of one pool and the test set is shared by all ``n``.
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..attention._learner import MultiHeadAttentionLearner, match_heads
from ..datasets._attention import make_attention_layer_regression
from ._common import (
    Progress,
    _caption,
    _curve,
    _figure,
    _figure_legend,
    _log_axis,
    _save,
    _seeds_text,
    format_table,
    run_tasks,
    seed_pair,
    summarize,
)

__all__ = ["default_mha_config", "format_mha_summary", "plot_mha", "run_mha"]

MODELS = ("learner", "too_few_heads", "uniform_linear")

# A start counts as a success below this test relative error (noiseless data:
# recovered layers reach 1e-15 and below, failures stay above 1e-3).
_SUCCESS = 1e-6

# Defaults from pilot runs on a 2-core machine. d = k = 6 (sizes of the paper
# notes' pilots) give 2 m d^2 = 72 m parameters and k d = 36 equations per
# sample, so n = 2 m samples are needed to pin the parameters down. With
# ||Theta_i||_F = 2 and noiseless labels the pilot recovered the layer exactly
# (test error ~1e-15) from n = 8 for m = 1, 2 and n = 16 for m = 3, so the
# sizes start at 2 to show the threshold; the default run took ~70 s.
_DEFAULT_CONFIG = {
    "n_seeds": 3,
    "n_test": 2000,
    "token_dim": 6,
    "n_tokens": 6,
    "n_heads": (1, 2, 3),
    "theta_norm": 2.0,
    "noise": 0.0,
    "train_sizes": (2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024),
}

_QUICK_CONFIG = {
    "n_seeds": 2,
    "n_test": 1000,
    "token_dim": 4,
    "n_tokens": 4,
    "n_heads": (1, 2),
    "theta_norm": 2.0,
    "noise": 0.0,
    "train_sizes": (2, 4, 8, 32, 128, 512),
}


def default_mha_config(quick=False):
    """A deep copy of the default (or ``quick``) settings of :func:`run_mha`."""
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


def _relative_error(pred, target):
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))


def _uniform_linear(X, Y, X_test):
    """Least squares for ``Y_a = mean_b(x_b) B``: every token gets the same output,
    so this is least squares of the token-averaged targets on the averaged inputs."""
    B = np.linalg.lstsq(X.mean(axis=1), Y.mean(axis=1), rcond=None)[0]
    return np.repeat((X_test.mean(axis=1) @ B)[:, None, :], X_test.shape[1], axis=1)


def _one_instance(m, seed, cfg, random_state):
    """Errors of every model at every n on one planted layer; a list of dicts."""
    data_seed, weight_seed = seed_pair(random_state, m, seed)
    test_seed, _ = seed_pair(random_state, m, seed, 1)
    sizes = sorted(int(s) for s in cfg["train_sizes"])
    shape = dict(n_heads=m, n_tokens=cfg["n_tokens"], token_dim=cfg["token_dim"])
    X_pool, Y_pool, layer = make_attention_layer_regression(
        sizes[-1],
        **shape,
        theta_norm=cfg["theta_norm"],
        noise=cfg["noise"],
        random_state=data_seed,
    )
    X_test, Y_test, _ = make_attention_layer_regression(
        cfg["n_test"], **shape, layer=layer, random_state=test_seed
    )
    results = []
    for n in sizes:
        X, Y = X_pool[:n], Y_pool[:n]
        for name, n_heads in (("learner", m), ("too_few_heads", m - 1)):
            if n_heads < 1:
                continue
            start = time.perf_counter()
            model = MultiHeadAttentionLearner(n_heads, random_state=weight_seed)
            with warnings.catch_warnings():
                # Tiny n and too few heads may stop at max_iter; the error says
                # how good the fit is.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X, Y)
            seconds = time.perf_counter() - start
            error = _relative_error(model.predict(X_test), Y_test)
            theta_error = np.nan
            if name == "learner":
                theta_error = match_heads(
                    model.theta_, model.values_, layer.theta, layer.values
                ).theta_error
            results.append(
                {
                    "model": name,
                    "m": m,
                    "n_train": n,
                    "error": error,
                    "theta_error": theta_error,
                    "seconds": seconds,
                    "n_fit_heads": n_heads,
                }
            )
        start = time.perf_counter()
        error = _relative_error(_uniform_linear(X, Y, X_test), Y_test)
        results.append(
            {
                "model": "uniform_linear",
                "m": m,
                "n_train": n,
                "error": error,
                "theta_error": np.nan,
                "seconds": time.perf_counter() - start,
                "n_fit_heads": 0,
            }
        )
    return results


def run_mha(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Learn planted multi-head attention layers: test error against ``n``.

    For ``m`` in ``config["n_heads"]`` (default 1, 2, 3) and every training
    size ``n``, fits :class:`~sklearn_attn.MultiHeadAttentionLearner` with
    ``m`` heads, the same with ``m - 1`` heads, and a uniform-attention linear
    baseline ``Y_a = mean_b(x_b) B`` on noiseless Boolean data from a planted
    layer (``||Theta_i||_F = 2``, ``W_i`` with ``N(0, 1/d)`` entries), and
    measures the test relative error ``||F_hat - F||^2 / ||F||^2`` on fresh
    samples.

    Parameters
    ----------
    quick : bool, default=False
        Reduced settings (``d = k = 4``, ``m`` in {1, 2}, six sizes, two
        repetitions): 25 s to a minute on a two-core machine (measured at
        loads of 1 to 11). The default settings took about 70 s on two free
        cores.
    n_seeds : int, default=None
        Repetitions (new planted layer, data and starts each); ``None`` uses
        the setting's default (3, or 2 with ``quick``).
    random_state : int, default=0
        Master seed; all data and start seeds are derived from it.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` prints them to standard error,
        ``False`` drops them, a callable receives each line.
    n_jobs : int, default=None
        Repetitions run in parallel with
        :class:`sklearn.utils.parallel.Parallel` (``None``: one at a time,
        each fit using all cores).
    config : dict, default=None
        Overrides of ``default_mha_config(quick)``, e.g. ``{"n_heads": (2,)}``.

    Returns
    -------
    tables : dict
        ``"learning_curves"``: a list of dict rows with keys ``model``
        ({"learner", "too_few_heads", "uniform_linear"}), ``m``, ``d``, ``k``,
        ``n_train``, ``n_fit_heads``, ``error_mean``, ``error_std``,
        ``error_median``, ``error_min``, ``error_max`` (test relative errors
        over the repetitions), ``success_rate`` (share of repetitions with
        error at most 1e-6), ``theta_error_median`` (relative error of the
        attention matrices after matching heads; learner only),
        ``fit_seconds_mean`` and ``n_seeds``.

    See Also
    --------
    plot_mha : Draw the table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_mha
    >>> tables = run_mha(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['learning_curves']
    """
    cfg = default_mha_config(quick)
    cfg.update(config or {})
    n_seeds = cfg["n_seeds"] if n_seeds is None else n_seeds
    if int(n_seeds) < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    report = Progress(progress, prefix="[mha] ")
    report(
        f"planted layers, d={cfg['token_dim']}, k={cfg['n_tokens']}, m in "
        f"{list(cfg['n_heads'])}, n in {list(cfg['train_sizes'])}, {n_seeds} seeds"
    )
    jobs = [(int(m), seed) for m in cfg["n_heads"] for seed in range(n_seeds)]
    outputs = run_tasks(
        [(_one_instance, m, seed, cfg, random_state) for m, seed in jobs],
        n_jobs=n_jobs,
    )
    collected = []
    for count, ((m, seed), results) in enumerate(zip(jobs, outputs, strict=True), 1):
        collected.extend(results)
        largest = max(r["n_train"] for r in results)
        final = {r["model"]: r["error"] for r in results if r["n_train"] == largest}
        report(
            f"[{count}/{len(jobs)}] m={m} seed {seed}: error at n={largest} "
            + ", ".join(f"{k} {v:.2g}" for k, v in final.items())
        )
    report("done")
    return {"learning_curves": _aggregate(collected, cfg)}


def _aggregate(results, cfg):
    rows = []
    keys = list(dict.fromkeys((r["m"], r["model"], r["n_train"]) for r in results))
    for m, model, n in sorted(
        keys, key=lambda key: (key[0], MODELS.index(key[1]), key[2])
    ):
        sel = [
            r for r in results if (r["m"], r["model"], r["n_train"]) == (m, model, n)
        ]
        errors = np.array([r["error"] for r in sel])
        mean, std = summarize(errors)
        theta = np.array([r["theta_error"] for r in sel])
        rows.append(
            {
                "model": model,
                "m": m,
                "d": cfg["token_dim"],
                "k": cfg["n_tokens"],
                "n_train": n,
                "n_fit_heads": sel[0]["n_fit_heads"],
                "error_mean": mean,
                "error_std": std,
                "error_median": float(np.median(errors)),
                "error_min": float(np.min(errors)),
                "error_max": float(np.max(errors)),
                "success_rate": float(np.mean(errors <= _SUCCESS)),
                "theta_error_median": (
                    float(np.median(theta)) if np.all(np.isfinite(theta)) else None
                ),
                "fit_seconds_mean": float(np.mean([r["seconds"] for r in sel])),
                "n_seeds": len(sel),
            }
        )
    return rows


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
    return (
        f"Planted multi-head attention, d={first['d']}, k={first['k']}: median "
        f"test ||F_hat - F||^2 / ||F||^2 over "
        f"{_seeds_text(r['n_seeds'] for r in rows)}\n"
        + format_table(["m", "n", *MODELS, "learner recovered"], lines)
    )


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

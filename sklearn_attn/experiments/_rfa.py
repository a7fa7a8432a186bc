"""Reproduction of the random-feature attention comparisons (Fu et al., 2023).

Two parts, both on simulated key-averaged targets
(:func:`~sklearn_attn.datasets.make_token_regression`):

A. test error against the number of training samples ``n`` (through
   :func:`sklearn.model_selection.learning_curve`) of RFA, BiasedRFA and the
   RFMLP baseline at matched trained-parameter counts, for several numbers of
   keys ``N``;
B. BiasedRFA against RFA across the ``gamma`` of the target
   ``mean_i exp(gamma t_i)`` and on the degree-2 correlation target, at a few
   ``n``.

Errors are normalised test errors ``MSE / Var(y_test)`` on fresh samples
(1 means "no better than predicting the mean"), averaged over repetitions that
each draw new data and new random weights.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.model_selection import learning_curve

from ..datasets import make_token_regression
from ..random_features import RFMLP, BiasedRFA, RandomFeatureAttentionRegressor
from ._common import (
    Progress,
    _caption,
    _curve,
    _figure,
    _figure_legend,
    _log_axis,
    _mean_spread,
    _save,
    _seeds_text,
    format_table,
    run_tasks,
    seed_pair,
    summarize,
)

__all__ = ["default_config", "format_rfa_summary", "plot_rfa", "run_rfa"]

MODELS = ("RFA", "BiasedRFA", "RFMLP")

# Defaults, chosen by pilot runs on a 2-core machine (numbers in the comments
# are normalised test errors from those pilots, one seed).
#
# Part A uses d = 4: there RFA reaches errors of 1e-3 on the degree-1
# key-averaged targets by n = 1024, while at d = 8 with the same budget (400
# heads, n up to 8192) it only gets to ~0.07 on the correlation target, too
# little separation from the baseline to show the N-dependence well. With 500
# heads the models have p = 500 * (4 + 1) = 2500 trained weights (RFMLP gets
# 2500 hidden units).
#
# alpha is fixed, not selected per fit: leave-one-out selection needs an
# eigendecomposition per fit (seconds each at these sizes) and would dominate
# the run. The pilot scanned alpha in {1e-3, 1e-2, 1e-1, 1} at n in {256,
# 1024, 2048, 4096} and N in {4, 32}: 0.1 was within ~30% of the best alpha for
# every model and target at n >= 1024 (e.g. RFA 0.0015 vs best 0.0015, RFMLP
# 0.015 vs 0.011 at N = 4), while 1e-3 and 1e-2 let RFMLP blow up near the
# interpolation threshold n ~ p (errors of 1.4 to 2.9 at N = 32).
#
# Part B uses d = 8, where RFA cannot learn the degree-2 correlation target
# within the budget but BiasedRFA can; the degree-1 target is the control
# (at d = 8 the two are about equal on it). Features there are ~3x larger (the
# kernel trace grows with d), and the pilot's best alpha over {0.03, ..., 3}
# was 0.3 to 1 for BiasedRFA and 1 to 3 for RFA at n = 8192; alpha = 1 keeps
# RFA from over-fitting (error above 1) so its failure is not an artefact of
# too little regularisation. n avoids the interpolation threshold p = 3600.
#
# Run time on a 2-core machine with nothing else running: about 5 minutes
# (4 seeds; part A ~3, part B ~2); --quick 15 s (before gamma = 1 was added
# to its part B, a sixth more fits, so that its curves have three points).
# Other processes on the same cores slow it down more than proportionally
# (thread oversubscription): 7-14 minutes were measured at a load of 4 to 6,
# and 75-175 s for --quick at a load of 5 to 11.
_DEFAULT_CONFIG = {
    "n_seeds": 4,
    "n_test": 2000,
    "learning_curves": {
        "token_dim": 4,
        "n_keys": (4, 8, 16, 32),
        "targets": (("correlation", 1), ("value", 1)),
        "models": MODELS,
        "n_heads": 500,
        "alpha": 0.1,
        "train_sizes": (32, 64, 128, 256, 512, 1024, 2048, 4096),
    },
    "gamma": {
        "token_dim": 8,
        "n_keys": 8,
        "degrees": (1, 2),
        "gammas": (0.25, 0.5, 1.0, 2.0, 3.0),
        "models": ("RFA", "BiasedRFA"),
        "n_heads": 400,
        "alpha": 1.0,
        "train_sizes": (512, 2048, 8192),
    },
}

_QUICK_CONFIG = {
    "n_seeds": 2,
    "n_test": 1000,
    "learning_curves": {
        "token_dim": 4,
        "n_keys": (4, 16),
        "targets": (("correlation", 1), ("value", 1)),
        "models": MODELS,
        "n_heads": 150,
        "alpha": 0.1,
        "train_sizes": (32, 128, 512, 1024),
    },
    "gamma": {
        "token_dim": 8,
        "n_keys": 8,
        "degrees": (2,),
        "gammas": (0.5, 1.0, 2.0),
        "models": ("RFA", "BiasedRFA"),
        "n_heads": 150,
        "alpha": 1.0,
        "train_sizes": (256, 2048),
    },
}


def default_config(quick=False):
    """The default (or ``--quick``) settings of :func:`run_rfa`.

    Parameters
    ----------
    quick : bool, default=False
        Return the reduced settings.

    Returns
    -------
    config : dict
        A deep copy (safe to modify): ``n_seeds``, ``n_test`` and, for each
        part (``"learning_curves"``, ``"gamma"``), ``token_dim``, ``n_keys``,
        the targets, ``models``, ``n_heads``, ``alpha`` and ``train_sizes``.

    Examples
    --------
    >>> from sklearn_attn.experiments import default_config
    >>> default_config()["learning_curves"]["n_keys"]
    (4, 8, 16, 32)
    """
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


def _make_model(name, *, n_heads, token_dim, alpha, random_state):
    if name == "RFA":
        return RandomFeatureAttentionRegressor(
            n_heads, alpha=alpha, random_state=random_state
        )
    if name == "BiasedRFA":
        return BiasedRFA(n_heads, alpha=alpha, random_state=random_state)
    if name == "RFMLP":
        # Matched trained-parameter count: M (d + 1) output weights.
        return RFMLP(n_heads * (token_dim + 1), alpha=alpha, random_state=random_state)
    raise ValueError(f"Unknown model {name!r}; expected one of {list(MODELS)}.")


def _curve_errors(model, X, y, n_train_max, train_sizes):
    """Normalised test errors of ``model`` at each train size.

    The first ``n_train_max`` samples are the training pool (nested prefixes of
    it are used), the rest a fixed test set of fresh samples.
    """
    n = X.shape[0]
    train_idx = np.arange(n_train_max)
    test_idx = np.arange(n_train_max, n)
    sizes, _, test_scores = learning_curve(
        model,
        X,
        y,
        train_sizes=np.asarray(train_sizes),
        cv=[(train_idx, test_idx)],
        scoring="neg_mean_squared_error",
        shuffle=False,
        error_score="raise",
    )
    return sizes, -test_scores[:, 0] / np.var(y[test_idx])


def _one_curve(name, setting, cfg, n_test, data_seed, weight_seed):
    """One task of the grid: the learning curve of one model on one draw."""
    d = cfg["token_dim"]
    train_sizes = tuple(int(s) for s in cfg["train_sizes"])
    n_max = max(train_sizes)
    X, y = make_token_regression(
        n_max + n_test,
        n_keys=setting["N"],
        token_dim=d,
        target=setting["target"],
        degree=setting["degree"] or 1,
        gamma=setting["gamma"] or 1.0,
        random_state=data_seed,
    )
    model = _make_model(
        name,
        n_heads=cfg["n_heads"],
        token_dim=d,
        alpha=cfg["alpha"],
        random_state=weight_seed,
    )
    return _curve_errors(model, X, y, n_max, train_sizes)


def _curve_tasks(settings, part, cfg, n_seeds, random_state, n_test):
    """The grid of one part: ``(curve key, task arguments)`` per model, setting
    and repetition, the repetitions of a curve next to each other."""
    tasks = []
    for key, setting in enumerate(settings):
        for model_index, name in enumerate(cfg["models"]):
            for seed in range(n_seeds):
                # Same data for every model in a repetition (paired comparison);
                # fresh weights per model, setting and repetition.
                data_seed, _ = seed_pair(random_state, part, key, seed)
                _, weight_seed = seed_pair(random_state, part, key, seed, model_index)
                tasks.append(
                    (
                        (part, key, name),
                        (
                            _one_curve,
                            name,
                            setting,
                            cfg,
                            n_test,
                            data_seed,
                            weight_seed,
                        ),
                    )
                )
    return tasks


def _curve_rows(setting, name, cfg, sizes, errors):
    """Table rows of one curve from its repetitions' errors."""
    d, n_heads = cfg["token_dim"], cfg["n_heads"]
    errors = np.asarray(errors)
    rows = []
    for j, size in enumerate(sizes):
        mean, std = summarize(errors[:, j])
        rows.append(
            {
                "model": name,
                "target": setting["target"],
                "degree": setting["degree"],
                "gamma": setting["gamma"],
                "N": setting["N"],
                "d": d,
                "n_train": int(size),
                "error_mean": mean,
                "error_std": std,
                "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                "n_params": n_heads * (d + 1),
                "alpha": float(cfg["alpha"]),
            }
        )
    return rows


def _setting_label(row):
    if row["target"] == "gamma":
        return f"gamma={row['gamma']:g}"
    return f"{row['target']}(p={row['degree']})"


def run_rfa(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Run the RFA / BiasedRFA / RFMLP comparisons of Fu et al. (2023).

    Part A measures the normalised test error ``MSE / Var(y_test)`` against the
    number of training samples ``n`` of
    :class:`~sklearn_attn.RandomFeatureAttentionRegressor` (RFA),
    :class:`~sklearn_attn.BiasedRFA` and :class:`~sklearn_attn.RFMLP`
    (with ``n_heads * (d + 1)`` hidden units, the same number of trained
    weights) on key-averaged targets ``mean_i t_i`` ("correlation") and
    ``mean_i t_i x_i[0]`` ("value"), ``t_i = <x_0, x_i> / sqrt(d)``, for
    several numbers of keys ``N``. Part B compares BiasedRFA with RFA on
    ``mean_i exp(gamma t_i)`` across ``gamma`` and on ``mean_i t_i**p``
    (``p`` = 1 and 2) at a larger token dimension.

    Each curve comes from :func:`sklearn.model_selection.learning_curve` with a
    single split: the training sets are nested prefixes of a pool of
    ``max(train_sizes)`` samples and the test set is a fixed set of fresh
    samples. Every repetition draws new data and new random weights; the
    models of one repetition share the data.

    Parameters
    ----------
    quick : bool, default=False
        Use the reduced settings (fewer ``N``, heads, sizes and repetitions):
        75 s to 3 minutes on a two-core machine shared with other work
        (measured at loads of 5 to 11), much less on free cores. The default
        settings took about 5 minutes on two free cores.
    n_seeds : int, default=None
        Number of repetitions; ``None`` uses the setting's default (4, or 2
        with ``quick``).
    random_state : int, default=0
        Master seed; all data and weight seeds are derived from it.
    progress : callable, None or False, default=None
        Where the progress lines go (one per part, setting and model, with the
        elapsed time): ``None`` prints them to standard error, ``False`` drops
        them, a callable receives each line.
    n_jobs : int, default=None
        Learning curves computed at once by
        :class:`sklearn.utils.parallel.Parallel`, one task per model, setting
        and repetition (each with its own seeds, so the tables do not depend
        on ``n_jobs`` or on the joblib backend: under
        ``joblib.parallel_config(backend="dask")`` the tasks run on a Dask
        cluster). ``None`` runs them one after another, each fit using all
        BLAS threads.
    config : dict, default=None
        Overrides of the settings returned by ``default_config(quick)``, e.g.
        ``{"learning_curves": {"n_keys": (4,)}}`` (nested dicts are merged).

    Returns
    -------
    tables : dict
        ``"learning_curves"`` (part A) and ``"gamma"`` (part B), each a list of
        dict rows with keys ``model``, ``target``, ``degree``, ``gamma``,
        ``N``, ``d``, ``n_train``, ``error_mean``, ``error_std``, ``n_seeds``,
        ``n_params`` and ``alpha`` (``degree`` is ``None`` for the gamma
        target, ``gamma`` is ``None`` for the others).

    See Also
    --------
    plot_rfa : Draw the tables.
    write_csv : Save a table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_rfa
    >>> tables = run_rfa(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['gamma', 'learning_curves']
    """
    cfg = default_config(quick)
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    if n_seeds is None:
        n_seeds = cfg["n_seeds"]
    if int(n_seeds) < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    report = Progress(progress, prefix="[rfa] ")

    lc, gm = cfg["learning_curves"], cfg["gamma"]
    settings_a = [
        {"target": target, "degree": int(degree), "gamma": None, "N": int(n_keys)}
        for n_keys in lc["n_keys"]
        for target, degree in lc["targets"]
    ]
    settings_b = [
        {
            "target": "correlation",
            "degree": int(degree),
            "gamma": None,
            "N": int(gm["n_keys"]),
        }
        for degree in gm["degrees"]
    ] + [
        {
            "target": "gamma",
            "degree": None,
            "gamma": float(gamma),
            "N": int(gm["n_keys"]),
        }
        for gamma in gm["gammas"]
    ]
    parts = [(settings_a, lc), (settings_b, gm)]
    tasks = [
        task
        for part, (settings, part_cfg) in enumerate(parts)
        for task in _curve_tasks(
            settings, part, part_cfg, n_seeds, random_state, cfg["n_test"]
        )
    ]
    n_curves = len(tasks) // n_seeds
    report(
        f"part A: test error vs n, d={lc['token_dim']}, N in {list(lc['n_keys'])}, "
        f"{lc['n_heads']} heads, {n_seeds} seeds"
    )
    report(
        f"part B: BiasedRFA vs RFA across gamma, d={gm['token_dim']}, "
        f"N={gm['n_keys']}, {gm['n_heads']} heads"
    )
    report(f"{len(tasks)} tasks: {n_curves} curves x {n_seeds} seeds")
    results = run_tasks([task for _, task in tasks], n_jobs=n_jobs)
    tables = ([], [])
    errors = []
    for count, ((part, key, name), (sizes, errs)) in enumerate(
        zip((curve for curve, _ in tasks), results, strict=True), 1
    ):
        errors.append(errs)
        if count % n_seeds:
            continue
        # The last repetition of a curve: its rows and a progress line.
        settings, part_cfg = parts[part]
        setting = settings[key]
        tables[part].extend(_curve_rows(setting, name, part_cfg, sizes, errors))
        mean, std = summarize(np.asarray(errors)[:, -1])
        report(
            f"[{count // n_seeds}/{n_curves}] part {'AB'[part]} "
            f"{_setting_label(setting)} N={setting['N']} {name}: error {mean:.3g} "
            f"\u00b1 {std:.2g} at n={sizes[-1]}"
        )
        errors = []
    report("done")
    rows_a, rows_b = tables
    return {"learning_curves": rows_a, "gamma": rows_b}


# -- summary -------------------------------------------------------------------


def _at_largest_n(rows):
    largest = {}
    for row in rows:
        key = (row["target"], row["degree"], row["gamma"], row["N"], row["model"])
        if key not in largest or row["n_train"] > largest[key]["n_train"]:
            largest[key] = row
    return largest


def format_rfa_summary(tables):
    """Plain-text tables of the errors at the largest ``n`` of each setting.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_rfa`.

    Returns
    -------
    text : str
        One table per part: a line per target and ``N`` (part A) or target and
        ``gamma`` (part B), a column per model, cells ``mean ± std`` of the
        normalised test error over the repetitions (the mean alone over one
        repetition); each table's title says how many.
    """
    parts = []
    for name, title in (
        ("learning_curves", "Part A: normalised test error"),
        ("gamma", "Part B: BiasedRFA vs RFA"),
    ):
        rows = tables.get(name) or []
        if not rows:
            continue
        largest = _at_largest_n(rows)
        models = list(dict.fromkeys(row["model"] for row in rows))
        settings = list(dict.fromkeys(key[:4] for key in largest))
        lines = []
        for target, degree, gamma, n_keys in settings:
            label = _setting_label({"target": target, "degree": degree, "gamma": gamma})
            cells = [label, str(n_keys)]
            n_train = None
            for model in models:
                row = largest.get((target, degree, gamma, n_keys, model))
                cells.append(
                    _mean_spread(row["error_mean"], row["error_std"], row["n_seeds"])
                    if row
                    else "-"
                )
                n_train = row["n_train"] if row else n_train
            cells.append(str(n_train))
            lines.append(cells)
        d = rows[0]["d"]
        seeds = _seeds_text(row["n_seeds"] for row in rows)
        spread = " \u00b1 std" if any(row["n_seeds"] > 1 for row in rows) else ""
        parts.append(
            f"{title} (MSE / Var y, mean{spread} over {seeds}), d={d}\n"
            + format_table(["target", "N", *models, "n"], lines)
        )
    return "\n\n".join(parts)


# -- figure --------------------------------------------------------------------

_COLORS = {"RFA": "tab:blue", "BiasedRFA": "tab:orange", "RFMLP": "tab:green"}


def _target_math(target, degree=None, gamma=None):
    r"""The target as mathtext, e.g. ``$\mathrm{mean}_i\, e^{\gamma t_i}$``."""
    power = "" if degree in (None, 1) else f"^{{{degree}}}"
    if target == "gamma":
        rate = r"\gamma" if gamma is None else f"{gamma:g}"
        return rf"$\mathrm{{mean}}_i\, e^{{{rate} t_i}}$"
    if target == "value":
        return rf"$\mathrm{{mean}}_i\, t_i{power} x_{{i1}}$"
    return rf"$\mathrm{{mean}}_i\, t_i{power}$"


def _series(rows, **match):
    sel = [r for r in rows if all(r[k] == v for k, v in match.items())]
    sel.sort(key=lambda r: r["n_train"])
    mean = np.array([r["error_mean"] for r in sel], dtype=float)
    std = np.array([r["error_std"] for r in sel], dtype=float)
    n_seeds = min((r["n_seeds"] for r in sel), default=0)
    # On log axes: keep the lower edge of the band positive.
    low = np.maximum(mean - std, mean * 0.05)
    return [r["n_train"] for r in sel], mean, low, mean + std, n_seeds


def plot_rfa(tables, path=None):
    r"""Draw the figure of :func:`run_rfa`'s tables.

    Top (part A): the normalised test error against ``n`` (log-log), one panel
    per target (row) and number of keys ``N`` (column), a line per model with
    a band of ± one standard deviation over the repetitions (when there are
    several); the panels of a row share their y axis and the dotted line at 1
    is the error of predicting the mean. Bottom (part B): BiasedRFA and RFA
    against ``gamma`` for the targets :math:`\frac{1}{N}\sum_i e^{\gamma t_i}`
    (a shade per ``n``), the ratio of their errors, and their learning curves
    on the correlation targets :math:`\frac{1}{N}\sum_i t_i^p`. One legend
    for the figure, below the panels; the title states the sizes and the
    number of seeds. Series of fewer than three points are drawn as markers.

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
    rows_a = tables.get("learning_curves") or []
    rows_b = tables.get("gamma") or []
    targets = list(dict.fromkeys((r["target"], r["degree"]) for r in rows_a))
    n_keys = sorted({r["N"] for r in rows_a})
    n_cols = max(len(n_keys), 3 if rows_b else 1)
    height_a = 2.6 * len(targets)
    height_b = 2.9 if rows_b else 0.0
    fig = _figure(3.1 * n_cols, max(height_a + height_b, 2.6) + 0.9)
    if rows_a and rows_b:
        top, bottom = fig.subfigures(2, 1, height_ratios=[height_a, height_b])
    else:
        top = bottom = fig
    if rows_a:
        _plot_learning_curves(top, rows_a, targets, n_keys)
    if rows_b:
        _plot_gamma_row(bottom, rows_b)

    rows = rows_a + rows_b
    parts = []
    if rows_a:
        first = rows_a[0]
        parts.append(
            f"top: $d = {first['d']}$, {first['n_params']} trained weights per model"
        )
    if rows_b:
        first = rows_b[0]
        parts.append(
            f"bottom: $d = {first['d']}$, $N = {first['N']}$, "
            f"{first['n_params']} trained weights"
        )
    seeds = _seeds_text(r["n_seeds"] for r in rows)
    spread = ", bands ± one std" if any(r["n_seeds"] > 1 for r in rows) else ""
    _caption(
        fig,
        "Random-feature attention against the random-feature MLP "
        "(Fu et al., 2023): normalised test error MSE / Var($y$)",
        "; ".join(parts) + f"; mean over {seeds}{spread}; $n$ training samples",
    )
    _figure_legend(fig, ncols=7)
    _save(fig, path)
    return fig


def _plot_learning_curves(fig, rows, targets, n_keys):
    """Part A: a panel per target (row) and ``N`` (column)."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    sizes = sorted({r["n_train"] for r in rows})
    axes = fig.subplots(len(targets), len(n_keys), squeeze=False, sharey="row")
    for i, (target, degree) in enumerate(targets):
        for j, n in enumerate(n_keys):
            ax = axes[i, j]
            ax.axhline(
                1.0,
                color="0.5",
                linewidth=0.8,
                linestyle=":",
                label="predicting the mean",
            )
            ax.set_yscale("log")
            for model in models:
                x, mean, low, high, n_seeds = _series(
                    rows, target=target, degree=degree, N=n, model=model
                )
                _curve(
                    ax,
                    x,
                    mean,
                    low=low,
                    high=high,
                    n_seeds=n_seeds,
                    color=_COLORS.get(model),
                    label=model,
                )
            ax.set_title(
                f"{target}: {_target_math(target, degree)}, $N = {n}$", fontsize=9
            )
            ax.grid(True, which="major", alpha=0.3)
            if j == 0:
                ax.set_ylabel("test MSE / Var($y$)")
            if i == len(targets) - 1:
                ax.set_xlabel("$n$ (training samples)")
    for ax in axes.ravel():
        _log_axis(ax, "x", ticks=sizes)
        _log_axis(ax, "y")


def _plot_gamma_row(fig, rows):
    """Part B: errors against ``gamma``, their ratio, the correlation curves."""
    gamma_rows = [r for r in rows if r["target"] == "gamma"]
    corr = [r for r in rows if r["target"] != "gamma"]
    d, n_keys = rows[0]["d"], rows[0]["N"]
    panels = (1 if gamma_rows else 0) * 2 + (1 if corr else 0)
    axes = list(fig.subplots(1, panels, squeeze=False)[0])
    if gamma_rows:
        ax_err, ax_ratio = axes[0], axes[1]
        _plot_gamma_panels(ax_err, ax_ratio, gamma_rows)
        ax_err.set_title(
            f"{_target_math('gamma')}, $d = {d}$, $N = {n_keys}$ (shade: $n$)",
            fontsize=9,
        )
    if corr:
        ax_curve = axes[-1]
        ax_curve.axhline(1.0, color="0.5", linewidth=0.8, linestyle=":")
        ax_curve.set_yscale("log")
        degrees = sorted({r["degree"] for r in corr}, reverse=True)
        styles = dict(zip(degrees, ["-", "--", ":", "-."], strict=False))
        for degree in degrees:
            for model in ("RFA", "BiasedRFA"):
                x, mean, low, high, n_seeds = _series(corr, degree=degree, model=model)
                _curve(
                    ax_curve,
                    x,
                    mean,
                    low=low,
                    high=high,
                    n_seeds=n_seeds,
                    color=_COLORS[model],
                    linestyle=styles[degree],
                    label=model,
                )
        _log_axis(ax_curve, "x", ticks=[r["n_train"] for r in corr])
        _log_axis(ax_curve, "y")
        ax_curve.set_xlabel("$n$ (training samples)")
        ax_curve.set_ylabel("test MSE / Var($y$)")
        title = f"{_target_math('correlation', 'p')}, $d = {d}$, $N = {n_keys}$"
        if len(degrees) > 1:
            names = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dot"}
            title += "\n" + ", ".join(
                f"{names[styles[degree]]} $p = {degree}$" for degree in degrees
            )
        else:
            title += f", $p = {degrees[0]}$"
        ax_curve.set_title(title, fontsize=9)
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)


def _plot_gamma_panels(ax_err, ax_ratio, rows):
    sizes = sorted({r["n_train"] for r in rows})
    shades = np.linspace(0.4, 1.0, len(sizes)) if len(sizes) > 1 else [1.0]
    ax_err.set_yscale("log")
    ax_ratio.set_yscale("log")
    ax_ratio.axhline(1.0, color="k", linewidth=0.8)
    for size, shade in zip(sizes, shades, strict=True):
        by_model = {}
        for model in ("RFA", "BiasedRFA"):
            sel = sorted(
                (r for r in rows if r["model"] == model and r["n_train"] == size),
                key=lambda r: r["gamma"],
            )
            if not sel:
                continue
            gammas = [r["gamma"] for r in sel]
            mean = np.array([r["error_mean"] for r in sel], dtype=float)
            std = np.array([r["error_std"] for r in sel], dtype=float)
            by_model[model] = (gammas, mean)
            _curve(
                ax_err,
                gammas,
                mean,
                low=np.maximum(mean - std, mean * 0.05),
                high=mean + std,
                n_seeds=min(r["n_seeds"] for r in sel),
                color=_shade(_COLORS[model], shade),
            )
        if len(by_model) == 2 and by_model["RFA"][0] == by_model["BiasedRFA"][0]:
            # Grey shades: the legend's key to the training sizes of both panels.
            _curve(
                ax_ratio,
                by_model["RFA"][0],
                by_model["BiasedRFA"][1] / by_model["RFA"][1],
                color=_shade("k", shade),
                label=f"$n = {size}$",
            )
    for ax in (ax_err, ax_ratio):
        ax.set_xlabel(r"$\gamma$")
        _log_axis(ax, "y")
    ax_err.set_ylabel("test MSE / Var($y$)")
    ax_ratio.set_ylabel("error BiasedRFA / error RFA")
    ax_ratio.set_title("ratio of the errors: below 1, BiasedRFA better", fontsize=9)


def _shade(color, amount):
    """Blend ``color`` with white: ``amount`` 1 is the colour, 0 white."""
    from matplotlib.colors import to_rgb

    rgb = np.array(to_rgb(color))
    return tuple(1.0 - amount * (1.0 - rgb))

"""Reproduction: implicit bias of gradient descent on softmax attention.

A one-layer softmax attention classifier with a fixed value head
(:func:`~sklearn_attn.attention.train_attention_classifier`) is
trained from a small random initialisation on separable random instances
(:func:`~sklearn_attn.attention.make_max_margin_attention_data`),
with the attention weights either combined (``W``) or separate (``W = K Q^T``),
full or diagonal. The direction of ``W`` is compared along training with the
max-margin solutions (:func:`~sklearn_attn.attention.max_margin_svm`):

* combined ``W``: the Frobenius-norm SVM (Tarzanagh et al., 2023);
* separate ``(K, Q)``: the nuclear-norm SVM (Sheen, Chen, Wang and Zhou, 2024).

For diagonal weights ``W = diag(w)`` the nuclear norm is ``||w||_1`` and the
Frobenius norm ``||w||_2``, so the same columns hold the l1 and l2 SVMs.

Each run is compared with the SVMs of the tokens it selects in the end
(Tarzanagh et al.'s protocol): when the loss tends to its infimum these are
the optimal tokens, otherwise a locally optimal selection (``reached`` says
which). Norm ratios are ``||W||_* / margin(W)`` (or ``||W||_F / margin(W)``)
divided by the optimal value, so 1 is optimal.
"""

from __future__ import annotations

import copy

import numpy as np

from ..attention._implicit_bias import (
    make_max_margin_attention_data,
    train_attention_classifier,
)
from ..attention._max_margin import _constraint_vectors, max_margin_svm
from ._common import Progress, format_table, run_tasks, seed_pair, summarize

__all__ = [
    "default_implicit_bias_config",
    "format_implicit_bias_summary",
    "plot_implicit_bias",
    "run_implicit_bias",
]

STRUCTURES = ("diagonal", "full")
PARAMETRIZATIONS = ("separate", "combined")

# Defaults from pilot runs on a 2-core machine (tests/test_implicit_bias.py
# and benchmarks/bench_implicit_bias.py hold the numbers). Full matrices: the
# paper notes' n = 6, T = 4, d = 8. Diagonal: n = 5, T = 3, d = 10 rather than
# the notes' n = 8, T = 4, d = 6, where the few separable instances have
# nearly the same l1 and l2 solutions (correlation 0.996 on average, so the
# two limits cannot be told apart); here it is 0.88.
#
# "relative_gd" (steps of 1% of ||params||): the (K, Q) direction converges
# logarithmically in ||W||, so normalised steps of fixed length (the TF-as-SVM
# protocol) leave the nuclear correlation at 0.986 on average (min 0.92) after
# 80000 steps, against 0.9999 (min 0.9998) here; on diagonal weights 0.89
# (min 0.41) against 0.9999 (min 0.9994) with the l1 SVM. With 20000 steps, 4
# of 24 diagonal (k, q) runs were still short of 0.999 (benchmark numbers).
_DEFAULT_CONFIG = {
    "n_seeds": 20,
    "full": {"n_samples": 6, "n_tokens": 4, "dim": 8},
    "diagonal": {"n_samples": 5, "n_tokens": 3, "dim": 10},
    "loss": "exponential",
    "optimizer": "relative_gd",
    "learning_rate": 0.01,
    "n_iter": 80000,
    "init_scale": 1e-2,
    "checkpoints": 30,
    "n_starts": 6,
    "rank_tol": 1e-3,
}

_QUICK_CONFIG = {
    **_DEFAULT_CONFIG,
    "n_seeds": 3,
    "learning_rate": 0.03,
    "n_iter": 4000,
    "checkpoints": 15,
    "n_starts": 3,
}


def default_implicit_bias_config(quick=False):
    """A deep copy of the default (or ``--quick``) settings of
    :func:`run_implicit_bias`."""
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


# -- one structure ---------------------------------------------------------------------
def _draw(structure, cfg, n_seeds, random_state):
    data = []
    for seed in range(n_seeds):
        data_seed, _ = seed_pair(random_state, STRUCTURES.index(structure), seed)
        data.append(
            make_max_margin_attention_data(
                **cfg[structure], structure=structure, random_state=data_seed
            )
        )
    return data


def _train(structure, parametrization, data, cfg, random_state):
    stacked = [np.stack(a) for a in zip(*data, strict=True)][:4]
    _, weight_seed = seed_pair(
        random_state,
        STRUCTURES.index(structure),
        PARAMETRIZATIONS.index(parametrization),
    )
    return train_attention_classifier(
        *stacked,
        parametrization=parametrization,
        structure=structure,
        loss=cfg["loss"],
        optimizer=cfg["optimizer"],
        learning_rate=cfg["learning_rate"],
        n_iter=cfg["n_iter"],
        init_scale=cfg["init_scale"],
        checkpoints=cfg["checkpoints"],
        random_state=weight_seed,
    )


def _svms(structure, instance, selected, cfg, cache, key):
    """Nuclear and Frobenius SVMs (l1 / l2 if diagonal) of a token selection."""
    cache_key = (key, tuple(int(t) for t in selected))
    if cache_key not in cache:
        X, z, y, v, _ = instance
        names = ("nuclear", "frobenius") if structure == "full" else ("l1", "l2")
        cache[cache_key] = [
            max_margin_svm(
                X,
                z,
                y,
                v,
                norm=name,
                opt=selected,
                n_starts=cfg["n_starts"],
                random_state=0,
            )
            for name in names
        ]
    return cache[cache_key]


def _margins(W, instance, selected):
    """``min_j a_j^T W b_j`` for a stack of ``W`` (checkpoints)."""
    X, z = instance[0], instance[1]
    a, b = _constraint_vectors(X, z, selected)
    return np.einsum("jk,ckl,jl->cj", a, W, b).min(axis=1)


def _rank(W, tol):
    s = np.linalg.svd(W, compute_uv=False)
    return int(np.sum(s > tol * s[0])) if s[0] > 0 else 0


def _evaluate(structure, parametrization, data, result, cfg, cache):
    """Per-checkpoint and final measurements of one batched run."""
    n_seeds = len(data)
    corr = np.empty((2, n_seeds, len(result.iterations)))
    ratio = np.full_like(corr, np.nan)
    finals, spectra = [], []
    for b, instance in enumerate(data):
        selected = result.selected_tokens[b]
        (W_nuc, nuc), (W_fro, fro) = _svms(structure, instance, selected, cfg, cache, b)
        W = result.W[b]
        margin = _margins(W, instance, selected)
        positive = margin > 0
        for k, (W_svm, value, norms) in enumerate(
            (
                (W_nuc, nuc, result.nuclear_norm[b]),
                (W_fro, fro, result.frobenius_norm[b]),
            )
        ):
            corr[k, b] = np.einsum("cij,ij->c", W, W_svm) / (
                result.frobenius_norm[b] * np.linalg.norm(W_svm)
            )
            ratio[k, b, positive] = norms[positive] / margin[positive] / value
        sv = result.singular_values[b, -1] / margin[-1]
        reached = bool(np.array_equal(selected, instance[4]))
        finals.append(
            {
                "structure": structure,
                "parametrization": parametrization,
                "seed": b,
                "corr_nuc": float(corr[0, b, -1]),
                "corr_fro": float(corr[1, b, -1]),
                "ratio_nuc": float(ratio[0, b, -1]),
                "ratio_fro": float(ratio[1, b, -1]),
                "nuc_over_margin": float(result.nuclear_norm[b, -1] / margin[-1]),
                "fro_over_margin": float(result.frobenius_norm[b, -1] / margin[-1]),
                "svm_nuc": nuc,
                "svm_fro": fro,
                "rank": _rank(W[-1], cfg["rank_tol"]),
                "rank_svm_nuc": _rank(W_nuc, cfg["rank_tol"]),
                "rank_svm_fro": _rank(W_fro, cfg["rank_tol"]),
                "log10_excess_loss": float(result.log10_excess_loss[b, -1]),
                "reached": reached,
                "selected": " ".join(str(int(t)) for t in selected),
            }
        )
        # Each parametrization's spectrum, and that of the SVM it should reach.
        own = (
            ("svm_nuclear", W_nuc)
            if parametrization == "separate"
            else ("svm_frobenius", W_fro)
        )
        spectra.append(
            {parametrization: sv, own[0]: np.linalg.svd(own[1], compute_uv=False)}
        )
    reached = np.array([r["reached"] for r in finals])
    traj = []
    for c, it in enumerate(result.iterations):
        row = {
            "structure": structure,
            "parametrization": parametrization,
            "iteration": int(it),
        }
        for k, name in enumerate(("nuc", "fro")):
            row[f"corr_{name}_mean"], row[f"corr_{name}_std"] = summarize(corr[k, :, c])
            row[f"corr_{name}_min"] = float(np.min(corr[k, :, c]))
            row[f"ratio_{name}_mean"], row[f"ratio_{name}_std"] = summarize(
                ratio[k, :, c]
            )
        # L* is reached only by runs that select the optimal tokens; the others
        # stall at the loss of their selection, so they are left out here.
        losses = result.log10_excess_loss[reached, c]
        for name, q in (("median", 0.5), ("q25", 0.25), ("q75", 0.75)):
            row[f"log10_excess_loss_{name}"] = (
                float(np.quantile(losses, q, method="nearest"))
                if losses.size
                else np.nan
            )
        row["opt_attention_mean"] = float(np.mean(result.opt_attention[:, c]))
        row["n_seeds"] = n_seeds
        row["n_reached"] = int(reached.sum())
        row["n_positive_margin"] = int(np.isfinite(ratio[0, :, c]).sum())
        traj.append(row)
    return traj, finals, spectra


def _spectra_rows(structure, spectra_by_par):
    rows = []
    sources = {}
    for spectra in spectra_by_par:
        for per_seed in spectra:
            for source, values in per_seed.items():
                sources.setdefault(source, []).append(values)
    for source in ("separate", "combined", "svm_nuclear", "svm_frobenius"):
        values = np.asarray(sources.get(source, []))
        for k in range(values.shape[1] if values.size else 0):
            mean, std = summarize(values[:, k])
            rows.append(
                {
                    "structure": structure,
                    "source": source,
                    "index": k + 1,
                    "value_mean": mean,
                    "value_std": std,
                    "n_seeds": int(values.shape[0]),
                }
            )
    return rows


# -- driver ----------------------------------------------------------------------------
def run_implicit_bias(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Train combined and separate attention weights and compare with the SVMs.

    For every seed a separable instance is drawn per structure (diagonal and
    full weights); both parametrizations are trained on all seeds at once
    (one vectorised loop per structure and parametrization) and measured at
    log-spaced checkpoints against the nuclear-norm (l1) and Frobenius-norm
    (l2) max-margin solutions of the tokens each run selects.

    Parameters
    ----------
    quick : bool, default=False
        Reduced settings (3 seeds, 4000 steps of 3%): a few seconds on two
        cores. The default (20 seeds, 80000 steps of 1%) takes about a
        minute.
    n_seeds : int, default=None
        Number of instances per structure; ``None`` uses the setting's
        default (20, or 3 with ``quick``).
    random_state : int, default=0
        Master seed; data and initialisation seeds derive from it.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` prints them to standard error,
        ``False`` drops them, a callable receives each line.
    n_jobs : int, default=None
        Joblib workers over the four training runs (each uses one BLAS
        thread); 2 halves the training time on two cores. Each run has its
        own seeds, so the tables do not depend on ``n_jobs`` or on the joblib
        backend: under ``joblib.parallel_config(backend="dask")`` the runs
        go to a Dask cluster.
    config : dict, default=None
        Overrides of ``default_implicit_bias_config(quick)``, e.g.
        ``{"n_iter": 5000, "full": {"dim": 6}}`` (nested dicts are merged).

    Returns
    -------
    tables : dict
        ``"trajectories"``: per structure, parametrization and checkpoint,
        mean / std / min over seeds of the correlations ``corr_nuc``,
        ``corr_fro`` with the SVM solutions, mean / std of the normalised
        norm ratios ``ratio_nuc``, ``ratio_fro`` (NaN while the margin is not
        positive), quartiles of ``log10(L - L*)`` and the mean attention on
        the optimal token (the loss over the runs that reach ``L*`` only,
        counted in ``n_reached``; ``n_positive_margin`` counts the runs whose
        ratios are defined). ``"final"``: one row per structure,
        parametrization and seed at the last step (also ``||W||_* / margin``,
        the SVM optima, ranks at relative tolerance ``rank_tol``, whether the
        optimal tokens were selected). ``"spectra"``: singular values of
        ``W / margin`` at the end and of the two SVM solutions, mean / std
        over seeds, largest first.

    See Also
    --------
    plot_implicit_bias : Draw the tables.
    format_implicit_bias_summary : Plain-text summary.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_implicit_bias
    >>> tables = run_implicit_bias(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['final', 'spectra', 'trajectories']
    """
    cfg = default_implicit_bias_config(quick)
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    n_seeds = cfg["n_seeds"] if n_seeds is None else n_seeds
    if (
        isinstance(n_seeds, bool)
        or not isinstance(n_seeds, (int, np.integer))
        or (n_seeds < 1)
    ):
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    report = Progress(progress, prefix="[implicit-bias] ")
    report(
        f"{n_seeds} seeds, {cfg['n_iter']} steps of {cfg['optimizer']} "
        f"(learning_rate={cfg['learning_rate']}), {cfg['loss']} loss"
    )
    data = {s: _draw(s, cfg, int(n_seeds), random_state) for s in STRUCTURES}
    report("drew the instances")
    jobs = [(s, p) for s in STRUCTURES for p in PARAMETRIZATIONS]
    results = list(
        run_tasks(
            [(_train, s, p, data[s], cfg, random_state) for s, p in jobs],
            n_jobs=n_jobs,
        )
    )
    tables = {"trajectories": [], "final": [], "spectra": []}
    for s in STRUCTURES:
        cache, spectra = {}, []
        for p in PARAMETRIZATIONS:
            result = results[jobs.index((s, p))]
            traj, finals, spec = _evaluate(s, p, data[s], result, cfg, cache)
            tables["trajectories"] += traj
            tables["final"] += finals
            spectra.append(spec)
            last = traj[-1]
            report(
                f"{s} {p}: corr(nuclear SVM) {last['corr_nuc_mean']:.4f} "
                f"(min {last['corr_nuc_min']:.4f}), corr(Frobenius SVM) "
                f"{last['corr_fro_mean']:.4f}; ||W||_*/margin over optimum "
                f"{last['ratio_nuc_mean']:.4f}"
            )
        tables["spectra"] += _spectra_rows(s, spectra)
    report("done")
    return tables


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
        One line per structure and parametrization: mean (min) over seeds of
        the correlation with the nuclear (l1) and Frobenius (l2) SVMs, mean
        normalised ratios, mean rank of ``W`` against the SVMs', and how many
        runs selected the optimal tokens.
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
    return (
        "Implicit bias of softmax attention (separate K Q^T -> nuclear/l1 SVM, "
        "combined W -> Frobenius/l2 SVM)\n" + format_table(header, lines)
    )


# -- figure ----------------------------------------------------------------------------
_COLORS = {"separate": "tab:blue", "combined": "tab:orange"}
_SVM_LABEL = {"full": ("nuclear", "Frobenius"), "diagonal": ("l1", "l2")}


def _band(ax, x, mean, std, **kw):
    mean, std = np.asarray(mean, float), np.asarray(std, float)
    (line,) = ax.plot(x, mean, **kw)
    ax.fill_between(
        x, mean - std, mean + std, color=line.get_color(), alpha=0.15, linewidth=0
    )


def plot_implicit_bias(tables, path=None):
    """Draw the figure of :func:`run_implicit_bias`'s tables.

    One row per structure (diagonal, full): ``log10(-log10(L - L*))`` against
    the iteration (median and quartiles over the runs that reach ``L*``);
    correlation of ``W`` with the nuclear (l1) and Frobenius (l2) SVMs,
    mean ± std; the norm ratios
    ``||W||_* / margin`` and ``||W||_F / margin`` over their optima; the
    singular values of ``W / margin`` at the end against those of the SVM
    solutions (for diagonal weights: the sorted ``|w_j|``).

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

    Examples
    --------
    >>> from sklearn_attn.experiments import (
    ...     plot_implicit_bias, run_implicit_bias)
    >>> fig = plot_implicit_bias(run_implicit_bias(quick=True, progress=False),
    ...                          "implicit_bias.png")  # doctest: +SKIP
    """
    from matplotlib.figure import Figure

    traj = tables.get("trajectories") or []
    spectra = tables.get("spectra") or []
    structures = [s for s in STRUCTURES if any(r["structure"] == s for r in traj)]
    fig = Figure(figsize=(15, 3.4 * max(len(structures), 1)), layout="constrained")
    axes = fig.subplots(max(len(structures), 1), 4, squeeze=False)
    for i, s in enumerate(structures):
        nuc, fro = _SVM_LABEL[s]
        ax_loss, ax_corr, ax_ratio, ax_sv = axes[i]
        for p in PARAMETRIZATIONS:
            rows = sorted(
                (r for r in traj if r["structure"] == s and r["parametrization"] == p),
                key=lambda r: r["iteration"],
            )
            rows = [r for r in rows if r["iteration"] > 0]
            if not rows:
                continue
            it = [r["iteration"] for r in rows]
            color = _COLORS[p]
            # log10(-log10(L - L*)) on a linear axis: -log10(L - L*) reaches
            # 1e300 and +inf (once even the logarithm leaves float64).
            with np.errstate(invalid="ignore", divide="ignore"):
                loss = {
                    key: np.log10(
                        -np.array([r[f"log10_excess_loss_{key}"] for r in rows])
                    )
                    for key in ("median", "q25", "q75")
                }
            shown = np.isfinite(loss["median"]) & np.isfinite(loss["q25"])
            shown &= np.isfinite(loss["q75"])
            ax_loss.plot(
                np.array(it)[shown],
                loss["median"][shown],
                color=color,
                label=f"{p} ({rows[-1]['n_reached']}/{rows[-1]['n_seeds']} reach L*)",
            )
            ax_loss.fill_between(
                np.array(it)[shown],
                loss["q75"][shown],
                loss["q25"][shown],
                color=color,
                alpha=0.15,
                linewidth=0,
            )
            # Ratios once every run has a positive margin (before, some are NaN).
            settled = [r for r in rows if r["n_positive_margin"] == r["n_seeds"]]
            for name, style, label in (("nuc", "-", nuc), ("fro", "--", fro)):
                _band(
                    ax_corr,
                    it,
                    [r[f"corr_{name}_mean"] for r in rows],
                    [r[f"corr_{name}_std"] for r in rows],
                    color=color,
                    linestyle=style,
                    label=f"{p} vs {label} SVM",
                )
                _band(
                    ax_ratio,
                    [r["iteration"] for r in settled],
                    [r[f"ratio_{name}_mean"] for r in settled],
                    [r[f"ratio_{name}_std"] for r in settled],
                    color=color,
                    linestyle=style,
                    label=f"{p}: {label} norm / margin",
                )
        last = max((r["iteration"] for r in traj if r["structure"] == s), default=1)
        for ax in (ax_loss, ax_corr, ax_ratio):
            if not any(len(line.get_xdata()) for line in ax.lines):
                # Nothing to draw (no run reached L*, say): a log axis needs
                # positive limits of its own.
                ax.set_xlim(1, max(last, 10))
            ax.set_xscale("log")
            ax.set_xlabel("iteration")
            ax.grid(True, alpha=0.3)
        ax_loss.set_ylabel("log10(-log10(L - L*))")
        ax_loss.set_title(f"{s} weights: excess loss (runs reaching L*)", fontsize=9)
        ax_loss.legend(fontsize=7)
        ax_corr.set_ylim(max(0.0, ax_corr.get_ylim()[0]), 1.01)
        ax_corr.set_ylabel("correlation with SVM solution")
        ax_corr.set_title(f"solid: {nuc} SVM, dashed: {fro} SVM", fontsize=9)
        ax_corr.legend(fontsize=6)
        ax_ratio.set_yscale("log")
        ax_ratio.set_ylim(0.95, 3.0)
        ax_ratio.axhline(1.0, color="k", linewidth=0.8)
        ax_ratio.set_ylabel("norm / margin over its optimum")
        ax_ratio.set_title("1 = max-margin (once all margins are positive)", fontsize=9)
        ax_ratio.legend(fontsize=6)
        styles = {
            "separate": ("o-", _COLORS["separate"]),
            "combined": ("s-", _COLORS["combined"]),
            "svm_nuclear": ("--", "k"),
            "svm_frobenius": (":", "k"),
        }
        for source, (fmt, color) in styles.items():
            rows = sorted(
                (r for r in spectra if r["structure"] == s and r["source"] == source),
                key=lambda r: r["index"],
            )
            if rows:
                label = {
                    "svm_nuclear": f"{nuc} SVM",
                    "svm_frobenius": f"{fro} SVM",
                }.get(source, source)
                ax_sv.plot(
                    [r["index"] for r in rows],
                    [r["value_mean"] for r in rows],
                    fmt,
                    color=color,
                    markersize=4,
                    label=label,
                )
        ax_sv.set_xlabel("index")
        ax_sv.set_ylabel("singular value of W / margin")
        ax_sv.set_title("spectrum at the end (mean over seeds)", fontsize=9)
        ax_sv.grid(True, alpha=0.3)
        ax_sv.legend(fontsize=7)
    fig.suptitle(
        "Implicit bias of softmax attention: separate (K, Q) -> nuclear/l1 "
        "max margin, combined W -> Frobenius/l2 max margin",
        fontsize=10,
    )
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig

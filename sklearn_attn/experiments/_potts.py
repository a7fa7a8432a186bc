"""Reproduction of Rende, Gerace, Laio and Goldt (2024): attention as a Potts model.

(a) Synthetic: sequences from a planted generalized Potts model (one channel on
a ring); the factored self-attention layer's test masked-token loss against
the number of training samples, approaching the true conditional entropy,
against the full plmDCA parametrization, with the planted couplings recovered.
(b) Real: contact precision on the Kunitz/BPTI family (PF00014) with plmc's
settings, from the alignment shipped in :func:`sklearn_attn.datasets.load_pf00014`.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

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

__all__ = ["run_potts", "plot_potts", "format_potts_summary"]

# Contacts as in the tables: |i - j| >= 6 along the chain, distance below 8 A.
_MIN_SEPARATION = 6
_CUTOFF = 8.0


def default_config(quick=False):
    """Sizes of the default run or of the quick one (``demo``)."""
    if quick:
        # Sized to run in well under a minute on two cores. The PF00014 fit
        # stops after 5 L-BFGS iterations (20 took 35 s, a third of the run
        # under load): precisions at L/5, L/2, L, 2L of 1.000, 0.962, 0.962,
        # 0.811, against 1.000, 1.000, 0.962, 0.830 after 20. n up to 4000
        # (6400 took 60% more): excess loss 2.84%, 0.73%, 0.13% (factored)
        # against 31.7%, 30.1%, 9.6% (full) at n = 250, 1000, 4000; from
        # n = 200 the full model's curve was not monotone (29%, 33%, 12%).
        return dict(
            n_sites=20,
            n_states=10,
            n_train=[250, 1000, 4000],
            n_test=4000,
            n_seeds=1,
            real_max_iter=5,
            real_factored=False,
        )
    return dict(
        n_sites=20,
        n_states=10,
        n_train=[400, 800, 1600, 3200, 6400, 12800, 25600],
        n_test=10000,
        n_seeds=2,
        real_max_iter=100,
        real_factored=True,
    )


def _coupling_correlation(model, true_couplings):
    from ..potts._model import zero_sum_gauge

    true, _ = zero_sum_gauge(true_couplings, np.zeros(true_couplings.shape[:2]))
    return float(np.corrcoef(model.couplings_.ravel(), true.ravel())[0, 1])


def _draw_synthetic(cfg, seed, random_state):
    """One repetition's planted model and sequences, and the true test loss."""
    from ..datasets import make_potts_sequences
    from ..potts._sampling import conditional_log_probs

    data_seed, model_seed = seed_pair(random_state, 3, seed)
    X, params = make_potts_sequences(
        n_samples=max(cfg["n_train"]) + cfg["n_test"],
        n_sites=cfg["n_sites"],
        n_states=cfg["n_states"],
        graph="ring",
        n_channels=1,
        random_state=data_seed,
    )
    X_test = X[max(cfg["n_train"]) :]
    log_p = conditional_log_probs(X_test, params.couplings, params.fields, params.beta)
    true_loss = -float(np.take_along_axis(log_p, X_test[:, :, None], axis=2).mean())
    return X, params, true_loss, model_seed


def _fit_synthetic(parametrization, X_train, X_test, couplings, model_seed):
    """One task: fit on the first sequences, measure on the test ones."""
    from ..potts import PottsPseudoLikelihood

    model = PottsPseudoLikelihood(parametrization, random_state=model_seed)
    start = time.perf_counter()
    model.fit(X_train)
    seconds = time.perf_counter() - start
    return {
        "test_loss": -model.score(X_test),
        "coupling_correlation": _coupling_correlation(model, couplings),
        "n_iter": model.n_iter_,
        "fit_seconds": seconds,
    }


def _fit_real(label, kwargs, max_iter, random_state):
    """One task: a model of PF00014 with plmc's settings, and its contacts."""
    from ..datasets import load_pf00014
    from ..potts import PottsPseudoLikelihood, contact_precision

    data = load_pf00014()
    # plmc's settings: its penalties, 80% identity reweighting, gap as a state.
    model = PottsPseudoLikelihood(
        alpha_fields=0.01,
        alpha_couplings=16.0,
        sequence_identity=0.8,
        max_iter=max_iter,
        random_state=random_state,
        **kwargs,
    )
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # The quick run caps the iterations: say so in the table instead.
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(data.sequences)
    seconds = time.perf_counter() - start
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    scores = model.contact_scores()
    precision = contact_precision(
        scores,
        data.contact_i,
        data.contact_j,
        data.distance,
        min_separation=_MIN_SEPARATION,
        cutoff=_CUTOFF,
    )
    row = {
        "part": "real",
        "model": label,
        "n_iter": model.n_iter_,
        "converged": converged,
        "objective_plmc_units": model.objective_,
        "fit_seconds": seconds,
        **{f"precision_top_{k}": v for k, v in precision.items()},
    }
    return row, _contact_rows(label, scores, data)


def _contact_rows(label, scores, data):
    """One row per pair of the contact map: its score, distance and rank.

    ``rank`` orders the candidate pairs (``|i - j| >= 6``, finite distance) as
    :func:`~sklearn_attn.potts.contact_precision` does (largest score first,
    ties by ``(i, j)``), from 1; it is ``None`` for the other pairs.
    """
    i, j = (
        np.minimum(data.contact_i, data.contact_j),
        np.maximum(data.contact_i, data.contact_j),
    )
    distance = np.asarray(data.distance, dtype=np.float64)
    pair_scores = scores[i, j]
    candidate = (j - i >= _MIN_SEPARATION) & np.isfinite(distance)
    rank = np.zeros(i.size, dtype=np.int64)
    (index,) = np.nonzero(candidate)
    order = np.lexsort((j[index], i[index], -pair_scores[index]))
    rank[index[order]] = np.arange(1, index.size + 1)
    return [
        {
            "model": label,
            "i": int(i[p]),
            "j": int(j[p]),
            "distance": float(distance[p]),
            "contact": bool(candidate[p] and distance[p] < _CUTOFF),
            "score": float(pair_scores[p]),
            "rank": int(rank[p]) if rank[p] else None,
        }
        for p in range(i.size)
    ]


def _synthetic_row(parametrization, n_train, seed, true_loss, fitted, cfg):
    return {
        "part": "synthetic",
        "parametrization": parametrization,
        "n_train": n_train,
        "seed": seed,
        "test_loss": fitted["test_loss"],
        "true_conditional_entropy": true_loss,
        "relative_excess_loss": fitted["test_loss"] / true_loss - 1.0,
        "coupling_correlation": fitted["coupling_correlation"],
        "n_iter": fitted["n_iter"],
        "fit_seconds": fitted["fit_seconds"],
        "n_sites": int(cfg["n_sites"]),
        "n_states": int(cfg["n_states"]),
        "n_test": int(cfg["n_test"]),
    }


def _real_models(cfg):
    models = [("full", dict(parametrization="full"))]
    if cfg["real_factored"]:
        models.append(("factored (32 heads)", dict(n_heads=32)))
    return models


def run_potts(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    real=True,
    n_jobs=None,
    config=None,
):
    """Run the Potts reproduction and return its tables.

    Parameters
    ----------
    quick : bool, default=False
        Smaller sizes, for ``demo``: 40 s to 2 minutes on a two-core machine
        shared with other work (measured at loads of 5 to 11). The default
        settings are much larger: 7 training sizes up to 25,600 sequences, 2
        seeds, and two PF00014 models of up to 100 iterations each.
    n_seeds : int, default=None
        Repetitions of the synthetic part; ``None`` takes the configuration's.
    random_state : int, default=0
        Seed of everything.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` standard error, ``False`` nowhere.
    real : bool, default=True
        Also run the real-data part (contact precision on PF00014).
    n_jobs : int, default=None
        Fits run at once by :class:`sklearn.utils.parallel.Parallel`, one task
        per parametrization, training size and repetition, and one per
        PF00014 model (each with its own seeds, so the tables do not depend on
        ``n_jobs`` or on the joblib backend: under
        ``joblib.parallel_config(backend="dask")`` the fits run on a Dask
        cluster). ``None`` runs them one after another. The sequences are
        sampled here, before.
    config : dict, default=None
        Overrides of the settings of ``default_config(quick)`` (``n_sites``,
        ``n_states``, ``n_train``, ``n_test``, ``n_seeds``, ``real_max_iter``,
        ``real_factored``), e.g. ``{"n_train": [200, 400]}``.

    Returns
    -------
    tables : dict of list of dict
        ``"synthetic"`` (one row per parametrization, training size and seed,
        with the sizes ``n_sites``, ``n_states`` and ``n_test``),
        ``"real"`` (one row per PF00014 model: iterations, objective, fit
        time, contact precisions) and ``"contacts"`` (one row per model and
        pair of columns ``i < j`` of PF00014: ``score``, ``distance``,
        ``contact`` (``|i - j| >= 6`` and distance below 8 A) and ``rank``
        among the candidate pairs ``|i - j| >= 6``, from 1, ``None`` for the
        others), from which the precision at any number of top pairs follows.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_potts
    >>> tables = run_potts(quick=True, progress=False)  # doctest: +SKIP
    """
    cfg = default_config(quick)
    cfg.update(config or {})
    progress = Progress(progress, prefix="[potts] ")
    n_seeds = cfg["n_seeds"] if n_seeds is None else n_seeds
    if int(n_seeds) < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_max = max(cfg["n_train"])
    # The fits are the tasks; the sequences are drawn first, here.
    synthetic = []
    for seed in range(int(n_seeds)):
        X, params, true_loss, model_seed = _draw_synthetic(cfg, seed, random_state)
        progress(
            f"synthetic seed {seed}: sampled {len(X)} sequences, "
            f"true conditional entropy {true_loss:.4f}"
        )
        for parametrization in ("factored", "full"):
            for n_train in cfg["n_train"]:
                synthetic.append(
                    (
                        (parametrization, n_train, seed, true_loss),
                        (
                            _fit_synthetic,
                            parametrization,
                            X[:n_train],
                            X[n_max:],
                            params.beta * params.couplings,
                            model_seed,
                        ),
                    )
                )
    models = _real_models(cfg) if real else []
    tasks = [task for _, task in synthetic] + [
        (_fit_real, label, kwargs, cfg["real_max_iter"], random_state)
        for label, kwargs in models
    ]
    results = run_tasks(tasks, n_jobs=n_jobs)
    tables = {"synthetic": [], "real": [], "contacts": []}
    for (parametrization, n_train, seed, true_loss), _ in synthetic:
        row = _synthetic_row(
            parametrization, n_train, seed, true_loss, next(results), cfg
        )
        tables["synthetic"].append(row)
        progress(
            f"synthetic {parametrization:8s} n={n_train:6d}: test loss "
            f"{row['test_loss']:.4f} ({100 * row['relative_excess_loss']:+.2f}% "
            f"over the truth), coupling corr {row['coupling_correlation']:.3f}"
        )
    for row, contacts in results:
        tables["real"].append(row)
        tables["contacts"].extend(contacts)
        progress(
            f"PF00014 {row['model']}: {row['n_iter']} iterations"
            f"{'' if row['converged'] else ' (max_iter reached)'}, "
            f"{row['fit_seconds']:.1f} s, precision "
            + ", ".join(
                f"{k.replace('precision_top_', '')} {v:.3f}"
                for k, v in row.items()
                if k.startswith("precision_top_")
            )
        )
    return tables


def format_potts_summary(tables):
    """A plain-text summary: the learning curve's end points and the contacts.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_potts`.

    Returns
    -------
    text : str
        The synthetic part's relative excess loss and coupling correlation per
        parametrization and training size (mean ± std over the seeds, the
        value alone over one seed; the title says how many), then the
        PF00014 models' iterations, fit times and contact precisions.
    """
    lines = []
    synthetic = tables.get("synthetic") or []
    for parametrization in ("factored", "full"):
        rows = [r for r in synthetic if r["parametrization"] == parametrization]
        for n_train in sorted({r["n_train"] for r in rows}):
            sel = [r for r in rows if r["n_train"] == n_train]
            excess, excess_std = summarize([r["relative_excess_loss"] for r in sel])
            corr, corr_std = summarize([r["coupling_correlation"] for r in sel])
            several = len(sel) > 1
            lines.append(
                [
                    parametrization,
                    n_train,
                    f"{100 * excess:+.2f}%"
                    + (f" ± {100 * excess_std:.2f}" if several else ""),
                    f"{corr:.3f}" + (f" ± {corr_std:.3f}" if several else ""),
                ]
            )
    n_seeds = len({r["seed"] for r in synthetic})
    spread = "mean ± std over " if n_seeds > 1 else ""
    text = (
        f"Synthetic ring{_sizes_text(synthetic, math=False)}: test loss over the "
        f"true conditional entropy, {spread}{_seeds_text([n_seeds])}\n"
    )
    text += format_table(["model", "n_train", "excess loss", "coupling corr"], lines)
    if tables.get("real"):
        keys = [k for k in tables["real"][0] if k.startswith("precision_top_")]
        real_lines = [
            [
                r["model"],
                r["n_iter"],
                f"{r['fit_seconds']:.1f}",
                *(f"{r[k]:.3f}" for k in keys),
            ]
            for r in tables["real"]
        ]
        text += (
            "\n\nPF00014 contact precision (|i - j| >= 6, < 8 A), plmc's settings, "
            "one fit per model (no randomness)\n"
        )
        text += format_table(
            [
                "model",
                "iterations",
                "seconds",
                *(k.replace("precision_top_", "top ") for k in keys),
            ],
            real_lines,
        )
    return text


# -- figure ----------------------------------------------------------------------------
_COLORS = {"factored": "tab:blue", "full": "tab:red"}
_REAL_COLORS = ("tab:red", "tab:purple", "tab:brown")


def plot_potts(tables, path=None):
    r"""Draw :func:`run_potts`'s tables: learning curves and PF00014's contacts.

    Top: the relative excess test loss (test loss over the true conditional
    entropy, minus 1; log-log) and the correlation of the couplings with the
    planted ones against the number of training sequences, a line per
    parametrization (mean, with a band of ± one standard deviation when there
    are several seeds). Bottom, when the real-data part ran: the precision of
    the top ``k`` predicted contacts of PF00014 against ``k`` up to ``2L``
    (ticks at ``L/5``, ``L/2``, ``L``, ``2L``), a line per model, and the
    contact map: the true contacts (distance below 8 Å, ``|i - j| >= 6``) as
    grey squares in both triangles and the top ``2L`` predictions of the first
    model above the diagonal (of the second model, if any, below it), correct
    and wrong ones in two colours. One legend for the figure, below the
    panels; the title states the sizes and the number of seeds.

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
    real = tables.get("real") or []
    contacts = tables.get("contacts") or []
    has_real = bool(real and contacts)
    fig = _figure(10.0, 8.6 if has_real else 4.4)
    axes = fig.subplots(2 if has_real else 1, 2, squeeze=False)
    ax_loss, ax_corr = axes[0]
    _plot_synthetic(ax_loss, ax_corr, synthetic)
    if has_real:
        _plot_precision(axes[1, 0], real, contacts)
        _plot_contact_map(axes[1, 1], real, contacts)
    n_seeds = len({r["seed"] for r in synthetic})
    details = [
        f"top: planted Potts model on a ring{_sizes_text(synthetic)}, "
        f"{_seeds_text([n_seeds])}" + (", bands ± one std" if n_seeds > 1 else "")
    ]
    if has_real:
        details.append("bottom: PF00014 (13,600 sequences, $L = 53$), plmc's settings")
    _caption(
        fig,
        "Factored self-attention as a Potts model (Rende et al., 2024)",
        "; ".join(details),
    )
    _figure_legend(fig, ncols=4)
    _save(fig, path)
    return fig


def _sizes_text(rows, math=True):
    """``", L = 20, q = 10, 4000 test sequences"`` from the synthetic rows."""
    if not rows or "n_sites" not in rows[0]:
        return ""  # tables written before these columns
    first = rows[0]
    if math:
        return (
            f", $L = {first['n_sites']}$, $q = {first['n_states']}$, "
            f"{first['n_test']} test sequences"
        )
    return (
        f" (L = {first['n_sites']}, q = {first['n_states']}, "
        f"{first['n_test']} test sequences)"
    )


def _plot_synthetic(ax_loss, ax_corr, rows):
    ax_loss.set_yscale("log")
    sizes = sorted({r["n_train"] for r in rows})
    labels = {"factored": "factored (one head)", "full": "full (plmDCA)"}
    for parametrization, color in _COLORS.items():
        sel = [r for r in rows if r["parametrization"] == parametrization]
        n = sorted({r["n_train"] for r in sel})
        for ax, key in (
            (ax_loss, "relative_excess_loss"),
            (ax_corr, "coupling_correlation"),
        ):
            stats = np.array(
                [summarize([r[key] for r in sel if r["n_train"] == k]) for k in n]
            ).reshape(-1, 2)
            mean, std = stats[:, 0], stats[:, 1]
            n_seeds = min((sum(r["n_train"] == k for r in sel) for k in n), default=0)
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
                label=labels[parametrization],
            )
    ax_loss.set_ylabel("test loss / conditional entropy $- 1$")
    ax_loss.set_title("Relative excess masked-token loss", fontsize=9)
    ax_corr.set_ylabel("Pearson correlation with planted $J$")
    ax_corr.set_title("Coupling recovery (zero-sum gauge)", fontsize=9)
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

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

from ._common import Progress, format_table, run_tasks, seed_pair, summarize

__all__ = ["run_potts", "plot_potts", "format_potts_summary"]


def default_config(quick=False):
    """Sizes of the default run (under ten minutes on two cores) or the quick one."""
    if quick:
        return dict(
            n_sites=20,
            n_states=10,
            n_train=[400, 1600, 6400],
            n_test=4000,
            n_seeds=1,
            real_max_iter=20,
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
    precision = contact_precision(
        model.contact_scores(), data.contact_i, data.contact_j, data.distance
    )
    return {
        "part": "real",
        "model": label,
        "n_iter": model.n_iter_,
        "converged": converged,
        "objective_plmc_units": model.objective_,
        "fit_seconds": seconds,
        **{f"precision_top_{k}": v for k, v in precision.items()},
    }


def _synthetic_row(parametrization, n_train, seed, true_loss, fitted):
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
        Smaller sizes, for ``demo`` (about a minute on two cores).
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
        ``"synthetic"`` (one row per parametrization, training size and seed)
        and ``"real"`` (one row per model).

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
    tables = {"synthetic": [], "real": []}
    for (parametrization, n_train, seed, true_loss), _ in synthetic:
        row = _synthetic_row(parametrization, n_train, seed, true_loss, next(results))
        tables["synthetic"].append(row)
        progress(
            f"synthetic {parametrization:8s} n={n_train:6d}: test loss "
            f"{row['test_loss']:.4f} ({100 * row['relative_excess_loss']:+.2f}% "
            f"over the truth), coupling corr {row['coupling_correlation']:.3f}"
        )
    for row in results:
        tables["real"].append(row)
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
    """A plain-text summary: the learning curve's end points and the contacts."""
    lines = []
    for parametrization in ("factored", "full"):
        rows = [
            r for r in tables["synthetic"] if r["parametrization"] == parametrization
        ]
        for n_train in sorted({r["n_train"] for r in rows}):
            sel = [r for r in rows if r["n_train"] == n_train]
            excess, excess_std = summarize([r["relative_excess_loss"] for r in sel])
            corr, _ = summarize([r["coupling_correlation"] for r in sel])
            lines.append(
                [
                    parametrization,
                    n_train,
                    f"{100 * excess:+.2f}% ± {100 * excess_std:.2f}",
                    f"{corr:.3f}",
                ]
            )
    text = (
        "Synthetic ring (L = 20, q = 10): test loss over the true conditional entropy\n"
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
        text += "\n\nPF00014 contact precision (|i - j| >= 6, < 8 A), plmc's settings\n"
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


def plot_potts(tables, path=None):
    """Draw the learning curves (excess loss, coupling recovery) and contacts."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    colors = {"factored": "C0", "full": "C3"}
    for parametrization, color in colors.items():
        rows = [
            r for r in tables["synthetic"] if r["parametrization"] == parametrization
        ]
        sizes = sorted({r["n_train"] for r in rows})
        for ax, key in zip(
            axes[:2], ("relative_excess_loss", "coupling_correlation"), strict=True
        ):
            stats = [
                summarize([r[key] for r in rows if r["n_train"] == n]) for n in sizes
            ]
            mean = np.array([s[0] for s in stats])
            std = np.array([s[1] for s in stats])
            ax.plot(sizes, mean, "o-", color=color, label=parametrization)
            ax.fill_between(sizes, mean - std, mean + std, color=color, alpha=0.2)
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="training sequences",
        ylabel="test loss / true conditional entropy - 1",
        title="Masked-token loss (ring, L = 20, q = 10)",
    )
    axes[1].set(
        xscale="log",
        xlabel="training sequences",
        ylabel="Pearson corr. with planted couplings",
        title="Coupling recovery (zero-sum gauge)",
    )
    for ax in axes[:2]:
        ax.legend()
        ax.grid(alpha=0.3)
    ax = axes[2]
    if tables.get("real"):
        keys = [k for k in tables["real"][0] if k.startswith("precision_top_")]
        width = 0.8 / len(tables["real"])
        for m, row in enumerate(tables["real"]):
            ax.bar(
                np.arange(len(keys)) + m * width,
                [row[k] for k in keys],
                width,
                label=row["model"],
            )
        ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
        ax.set_xticklabels([k.replace("precision_top_", "top ") for k in keys])
        ax.set(ylim=(0, 1.05), ylabel="precision", title="PF00014 contacts")
        ax.legend()
    else:
        ax.set_axis_off()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig

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

The theorem of Sheen et al. assumes that every non-optimal token has the same
score ``y_i v^T x_{i,t}`` and the optimal one a larger score; the generic
Gaussian tokens above do not satisfy it. The theorem study trains both
parametrizations of full matrices on instances that do
(``make_max_margin_attention_data(..., scores="equal")``), many seeds in one
vectorised loop, and compares them with the SVMs of the optimal tokens, beside
the same measures of the generic full-matrix runs.

This module is the driver, which turns runs into tables; the settings
(``_config``), the instances and training runs (``_runs``), the measures
against the max-margin solutions (``_measures``), the plain-text report and
the figure are modules of their own.
"""

from __future__ import annotations

from .._common import Progress, check_count, merge_config, run_tasks
from ._config import (
    PARAMETRIZATIONS,
    STRUCTURES,
    THEOREM_MEASURES,
    default_implicit_bias_config,
)
from ._measures import (
    _aligned_rows,
    _evaluate,
    _spectra_rows,
    _summary,
    _theorem_rows,
)
from ._runs import (
    _aligned_runs,
    _draw,
    _draw_theorem,
    _theorem_weight_seed,
    _train,
)

__all__ = ["run_implicit_bias"]


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
    (one vectorised loop per structure and parametrization) and compared at
    log-spaced checkpoints against the nuclear-norm (l1) and Frobenius-norm
    (l2) max-margin solutions of the tokens each run selects. The theorem
    study (``config["theorem"]``) does the same for full matrices on
    instances of the theorem's setting, equal non-optimal scores and a margin
    ``score_gap`` for the optimal token, against the SVMs of the optimal
    tokens.

    Parameters
    ----------
    quick : bool, default=False
        Reduced settings (3 seeds, 10 in the theorem study, 4000 steps of
        3%) instead of the default (20 seeds, 100 in the theorem study,
        80000 steps of 1%); :doc:`/user_guide/reproducing` gives their
        running times.
    n_seeds : int, default=None
        Number of instances per structure and in the theorem study; ``None``
        uses the settings' defaults (``config["n_seeds"]`` and
        ``config["theorem"]["n_seeds"]``).
    random_state : int, default=0
        Master seed; data and initialisation seeds derive from it.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` prints them to standard error,
        ``False`` drops them, a callable receives each line.
    n_jobs : int, default=None
        Joblib workers over the training runs (each uses one BLAS
        thread; the runs are independent, so up to one worker per core
        shortens the training). Each run has its
        own seeds, so the tables do not depend on ``n_jobs`` or on the joblib
        backend: under ``joblib.parallel_config(backend="dask")`` the runs
        go to a Dask cluster.
    config : dict, default=None
        Overrides of ``default_implicit_bias_config(quick)``, e.g.
        ``{"n_iter": 5000, "full": {"dim": 6}}`` (nested dicts are merged; a
        name the defaults do not have is a ``ValueError``).

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
        ratios are defined), and the instances' sizes ``n_samples``,
        ``n_tokens`` and ``dim``. ``"final"``: one row per structure,
        parametrization and seed at the last step (also ``||W||_* / margin``,
        the SVM optima, ranks at relative tolerance ``rank_tol``, whether the
        optimal tokens were selected). ``"spectra"``: singular values of
        ``W / margin`` at the end and of the two SVM solutions, mean / std
        over seeds, largest first. ``"aligned_final"``: full matrices, one row
        per start scale ``init_scale``, parametrization, start ``init``
        (``"random"``, ``"aligned/nuclear_svm"``: singular vectors of the
        optimal tokens' nuclear-norm SVM, ``"aligned/gradient"``: those of
        the loss's descent direction at ``W = 0``; see
        :func:`~sklearn_attn.attention.train_attention_classifier`) and
        seed, at the last step: ``corr_nuc``, ``corr_fro``, ``ratio_nuc``,
        ``ratio_fro`` against the SVMs of the selected tokens, the same
        against those of the optimal tokens (``*_opt``), the start's
        correlation ``corr_nuc_start`` with the optimal tokens' nuclear SVM,
        ``reached``, ``selected`` and ``log10_excess_loss``; the random start
        at the reproduction's ``init_scale`` is its full-matrix run.
        ``"aligned"``: per start scale, parametrization and start, mean /
        std / min / max over seeds of each measure (``*_n`` counts the finite
        values), ``n_seeds`` and ``n_reached``. ``"theorem_final"``: full
        matrices, one row per token scores ``scores`` (``"equal"``: the
        theorem study's instances; ``"generic"``: the full-matrix runs above),
        parametrization and seed, at the last step, against the SVMs of the
        optimal tokens: ``corr_nuc_opt``, ``corr_fro_opt``, the same as
        ``corr_nuc_opt_reached`` and ``corr_fro_opt_reached`` (NaN unless the
        run selects the optimal tokens), ``ratio_nuc_opt``,
        ``ratio_fro_opt`` (NaN unless the margin is positive), the SVM optima
        ``svm_nuc`` and ``svm_fro``, the ranks, the instance's smallest
        margin of an optimal score over the others ``score_gap_min`` and
        largest spread of the non-optimal scores ``nonopt_score_spread``,
        ``reached``, ``log10_excess_loss`` and ``selected``. ``"theorem"``:
        per ``scores`` and parametrization, mean / std / min / max over seeds
        of each measure, ``n_seeds`` and ``n_reached``.
        ``"theorem_trajectories"``: the theorem study's runs per
        checkpoint, with the columns of ``"trajectories"`` measured against
        the optimal tokens' SVMs, and ``scores`` and ``score_gap``. The three
        are empty when ``config["theorem"]`` is ``None``.

    See Also
    --------
    plot_implicit_bias : Draw the tables.
    format_implicit_bias_summary : Plain-text summary.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_implicit_bias
    >>> tables = run_implicit_bias(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['aligned', 'aligned_final', 'final', 'spectra', 'theorem', 'theorem_final',
     'theorem_trajectories', 'trajectories']
    """
    cfg = merge_config(default_implicit_bias_config(quick), config)
    theorem = cfg.get("theorem") or None
    if n_seeds is not None:
        n_seeds = check_count(n_seeds, "n_seeds")
    n_theorem = 0
    if theorem:
        n_theorem = check_count(
            theorem["n_seeds"] if n_seeds is None else n_seeds,
            "config['theorem']['n_seeds']",
        )
    n_seeds = check_count(cfg["n_seeds"] if n_seeds is None else n_seeds, "n_seeds")
    report = Progress(progress, prefix="[implicit-bias] ")
    report(
        f"{n_seeds} seeds ({n_theorem} in the theorem's setting), {cfg['n_iter']} "
        f"steps of {cfg['optimizer']} (learning_rate={cfg['learning_rate']}), "
        f"{cfg['loss']} loss"
    )
    data = {s: _draw(s, cfg, n_seeds, random_state) for s in STRUCTURES}
    theorem_data = _draw_theorem(cfg, n_theorem, random_state) if theorem else []
    report("drew the instances")
    jobs = [(s, p) for s in STRUCTURES for p in PARAMETRIZATIONS]
    # The aligned study's random start at the reproduction's scale is the
    # reproduction's own full-matrix run; the others are trained beside it.
    aligned = _aligned_runs(cfg)
    own = [
        run
        for run in aligned
        if run[2] == "random" and run[0] == float(cfg["init_scale"])
    ]
    extra = [run for run in aligned if run not in own]
    # The theorem's runs (the most seeds, the longest) go first, so that
    # parallel workers do not wait for them at the end.
    tasks = [
        (
            _train,
            "full",
            p,
            theorem_data,
            cfg,
            random_state,
            None,
            None,
            _theorem_weight_seed(random_state, p),
        )
        for p in (PARAMETRIZATIONS if theorem else ())
    ]
    n_first = len(tasks)
    tasks += [(_train, s, p, data[s], cfg, random_state) for s, p in jobs]
    tasks += [
        (_train, "full", p, data["full"], cfg, random_state, name, scale)
        for scale, p, name in extra
    ]
    results = list(run_tasks(tasks, n_jobs=n_jobs))
    theorem_results, results = results[:n_first], results[n_first:]
    tables = {
        "trajectories": [],
        "final": [],
        "spectra": [],
        "aligned": [],
        "aligned_final": [],
        "theorem": [],
        "theorem_final": [],
        "theorem_trajectories": [],
    }
    caches = {}
    for s in STRUCTURES:
        cache, spectra = caches.setdefault(s, {}), []
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
    for run in aligned:
        scale, p, name = run
        if run in own:
            result = results[jobs.index(("full", p))]
        else:
            result = results[len(jobs) + extra.index(run)]
        rows = _aligned_rows(scale, p, name, data["full"], result, cfg, caches["full"])
        tables["aligned_final"] += rows
        last = _summary(rows)[0]
        report(
            f"full {p} from {name} at init_scale={scale:g}: corr(nuclear SVM of "
            f"the optimal tokens) {last['corr_nuc_opt_mean']:.4f} (min "
            f"{last['corr_nuc_opt_min']:.4f}), optimal tokens "
            f"{last['n_reached']}/{last['n_seeds']}"
        )
    tables["aligned"] = _summary(tables["aligned_final"])
    if theorem:
        cache = caches.setdefault("theorem", {})
        for p, result in zip(PARAMETRIZATIONS, theorem_results, strict=True):
            traj, finals, _ = _evaluate(
                "full", p, theorem_data, result, cfg, cache, tokens="optimal"
            )
            tables["theorem_trajectories"] += [
                {"scores": "equal", "score_gap": theorem["score_gap"], **row}
                for row in traj
            ]
            tables["theorem_final"] += _theorem_rows("equal", theorem_data, finals)
        # The contrast: the reproduction's full-matrix runs on generic tokens,
        # measured against the SVMs of their optimal tokens.
        for p in PARAMETRIZATIONS:
            result = results[jobs.index(("full", p))]
            _, finals, _ = _evaluate(
                "full", p, data["full"], result, cfg, caches["full"], tokens="optimal"
            )
            tables["theorem_final"] += _theorem_rows("generic", data["full"], finals)
        tables["theorem"] = _summary(
            tables["theorem_final"],
            by=("scores", "parametrization"),
            measures=THEOREM_MEASURES,
        )
        for row in tables["theorem"]:
            report(
                f"full {row['parametrization']}, {row['scores']} scores: optimal "
                f"tokens {row['n_reached']}/{row['n_seeds']}, corr(nuclear SVM of "
                f"the optimal tokens) {row['corr_nuc_opt_mean']:.4f} (min "
                f"{row['corr_nuc_opt_min']:.4f}), corr(Frobenius SVM) "
                f"{row['corr_fro_opt_mean']:.4f} (min {row['corr_fro_opt_min']:.4f})"
            )
    report("done")
    return tables

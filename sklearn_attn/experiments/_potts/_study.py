"""The Potts reproduction's driver: settings in, tables out.

The parts' sequences and fit tasks are in ``_ring``, ``_dense`` and ``_real``;
this module merges the settings, runs every part's tasks in one grid and
gathers their rows.
"""

from __future__ import annotations

from .._common import Progress, check_count, merge_config, run_tasks
from ._config import default_config
from ._dense import _dense_row, _dense_tasks
from ._real import _fit_real, _real_models
from ._ring import _synthetic_row, _synthetic_tasks

__all__ = ["run_potts"]


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
        Smaller sizes, for ``demo``. The default settings are much larger:
        the ring at 4 training sizes up to 25,600 sequences over 2 seeds, the
        dense teacher at the same sizes over 3 teachers, and two PF00014
        models of up to 100 iterations each (see :ref:`reproducing` for their
        run times).
    n_seeds : int, default=None
        Repetitions of the ring; ``None`` takes the configuration's. The
        dense study has its own (``config["dense"]["n_seeds"]``, 3; 1 with
        ``quick``).
    random_state : int, default=0
        Seed of everything.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` standard error, ``False`` nowhere.
    real : bool, default=True
        Also run the real-data part (contact precision on PF00014).
    n_jobs : int, default=None
        Fits run at once by :class:`sklearn.utils.parallel.Parallel`, one task
        per parametrization (or model of the dense study), training size and
        repetition, and one per PF00014 model (each with its own seeds, so
        the tables do not depend on ``n_jobs`` or on the joblib backend: under
        ``joblib.parallel_config(backend="dask")`` the fits run on a Dask
        cluster). ``None`` runs them one after another. The sequences are
        sampled here, before.
    config : dict, default=None
        Overrides of the settings of ``default_config(quick)`` (``n_sites``,
        ``n_states``, ``n_train``, ``n_test``, ``n_seeds``, ``real_max_iter``,
        ``real_factored``, ``dense``), e.g. ``{"n_train": [200, 400]}``.
        ``dense`` is a dict of the dense study's settings, updated key by key
        (``{"dense": {"n_seeds": 1}}``), or ``None`` to leave the study out:
        ``beta``, ``n_train``, ``n_test``, ``n_seeds`` (teachers), ``tol``
        (of the factored and full fits), ``vanilla_max_iter``,
        ``vanilla_max_n`` (the vanilla layer runs only up to this size) and
        ``max_mixing_z`` (a teacher whose two Gibbs runs disagree by more, in
        RMS z-score, is skipped and the next one drawn; see
        ``draw_dense_teacher`` in this package).

    Returns
    -------
    tables : dict of list of dict
        ``"synthetic"`` (one row per parametrization, training size and seed,
        with the sizes ``n_sites``, ``n_states`` and ``n_test``),
        ``"dense"`` (one row per model, training size and teacher: the test
        and training losses against the true conditional entropy on the same
        sequences, the coupling correlation (``None`` for the vanilla layer),
        iterations, limits, convergence, fit time, the teacher's draw and its
        mixing check), ``"real"`` (one row per PF00014 model: iterations, objective, fit
        time, contact precisions) and ``"contacts"`` (one row per model and
        pair of columns ``i < j`` of PF00014: ``score``, ``distance``,
        ``contact`` (``|i - j| >= 6`` and distance below 8 A) and ``rank``
        among the candidate pairs ``|i - j| >= 6``, from 1, ``None`` for the
        others), from which the precision at any number of top pairs follows.

    Raises
    ------
    ValueError
        For a setting of ``config`` that ``default_config(quick)`` does not have
        (a misspelt setting is never silently ignored), or a number of seeds
        (``n_seeds``, ``config["dense"]["n_seeds"]``) that is not a positive
        integer.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_potts
    >>> tables = run_potts(quick=True, progress=False)  # doctest: +SKIP
    """
    cfg = merge_config(default_config(quick), config)
    progress = Progress(progress, prefix="[potts] ")
    n_seeds = check_count(cfg["n_seeds"] if n_seeds is None else n_seeds, "n_seeds")
    # The fits are the tasks; the sequences are drawn first, here.
    synthetic = _synthetic_tasks(cfg, n_seeds, random_state, progress)
    dense = _dense_tasks(cfg, random_state, progress)
    models = _real_models(cfg) if real else []
    tasks = (
        [task for _, task in synthetic]
        + [task for _, task in dense]
        + [
            (_fit_real, label, kwargs, cfg["real_max_iter"], random_state)
            for label, kwargs in models
        ]
    )
    results = run_tasks(tasks, n_jobs=n_jobs)
    tables = {"synthetic": [], "dense": [], "real": [], "contacts": []}
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
    for (name, n_train, seed, mixing), _ in dense:
        row = _dense_row(name, n_train, seed, mixing, next(results), cfg)
        tables["dense"].append(row)
        progress(
            f"dense {name:8s} n={n_train:6d} seed {seed}: test loss "
            f"{row['test_loss']:.4f} ({100 * row['relative_excess_loss']:+.2f}% "
            f"over the truth, training {100 * row['train_relative_excess_loss']:+.2f}%)"
            f", {row['n_iter']} iterations"
            + ("" if row["converged"] else " (max_iter reached)")
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

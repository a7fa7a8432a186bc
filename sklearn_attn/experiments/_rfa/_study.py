"""The random-feature attention reproduction's driver: settings in, tables out.

The curves (tasks) are in ``_curves``, the tables built from them in
``_tables``.
"""

from __future__ import annotations

import numpy as np

from .._common import (
    Progress,
    _mean_spread,
    check_count,
    merge_config,
    run_tasks,
    summarize,
)
from . import _tables
from ._config import default_config, target_spec
from ._curves import _Curves, _label, _request_curves

__all__ = ["TABLES", "run_rfa"]

TABLES = (
    "degree",
    "degree_thresholds",
    "scaling",
    "scaling_slopes",
    "biased",
    "biased_thresholds",
    "mean_scale",
    "softmax",
    "softmax_temperature",
)


# -- the run -------------------------------------------------------------------
def _check_targets(cfg):
    """Unknown target names fail before any fit."""
    for part in ("degree", "biased", "softmax"):
        study = cfg.get(part) or {}
        for key in ("targets", "gamma_targets", "temperature_targets"):
            for target in study.get(key, ()):
                target_spec(target)
    for part in ("scaling", "mean_scale"):
        if cfg.get(part):
            target_spec(cfg[part]["target"])


def run_rfa(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Run the random-feature attention studies of Fu et al. (2023).

    Measures the normalised test error ``MSE / Var(y_test)`` of
    :class:`~sklearn_attn.RandomFeatureAttentionRegressor` (RFA),
    :class:`~sklearn_attn.BiasedRFA` and :class:`~sklearn_attn.RFMLP`, every
    model of a study with the same number of trained weights (its ``width``,
    at least four times the study's largest training size), against the
    number of training samples ``n``, on key-averaged targets of the
    correlations ``t_i = <x_0, x_i> / sqrt(d)``:

    * **degree**: targets ``mean_i Q_p(t_i)`` of exactly degree ``p`` = 1 to 4
      (``Q_p`` the orthogonal polynomial of degree ``p``) and ``mean_i
      t_i**3``, for the three models and, as a contrast, RFA and BiasedRFA
      without the constant in the scores (``qk_bias=False``); and the smallest
      ``n`` reaching an error threshold;
    * **scaling**: that smallest ``n``, ``n*``, of RFA and RFMLP on the
      degree-1 target against the token dimension ``d`` and the number of keys
      ``N``, per seed, with the slopes of ``log n*`` against ``log N`` and
      ``log d``;
    * **biased**: BiasedRFA against RFA (paired error ratios and ``n*``) on the
      correlation targets against ``d``, and on ``mean_i exp(gamma t_i)``
      against ``gamma``;
    * **mean_scale**: BiasedRFA's ``qk_mean_scale`` on the degree-2 target,
      with its error ratio to RFA on the same data and random weights;
    * **softmax**: RFA with ``activation="relu"`` against ``"softmax"``, and
      the softmax's inverse temperature ``c`` (``qk_std = c / sqrt(d)``).

    Each point of a curve is a fresh fit on a prefix of one training pool,
    scored on a fixed set of fresh test samples, as
    :func:`sklearn.model_selection.learning_curve` makes them; in the scaling
    study a curve stops at the first size that reaches the threshold. Every
    fit chooses its ridge penalty by generalized cross-validation
    (``alpha="auto"``). Every repetition draws new data and new random
    weights; within a repetition the models share the data of a target and
    setting and the random part of the weights, and a curve that several
    tables use is fitted once.

    Parameters
    ----------
    quick : bool, default=False
        Use the reduced settings (fewer targets, dimensions, sizes and
        repetitions, narrower models). Measured times are in the reproduction
        guide.
    n_seeds : int, default=None
        Number of repetitions; ``None`` uses the setting's default (3, or 2
        with ``quick``).
    random_state : int, default=0
        Master seed; all data and weight seeds are derived from it.
    progress : callable, None or False, default=None
        Where the progress lines go (one per distinct curve, with the elapsed
        time): ``None`` prints them to standard error, ``False`` drops them, a
        callable receives each line.
    n_jobs : int, default=None
        Curves computed at once by :class:`sklearn.utils.parallel.Parallel`,
        one task per curve and repetition (each with its own seeds and one
        BLAS thread, so the tables do not depend on ``n_jobs`` or on the
        joblib backend: under ``joblib.parallel_config(backend="dask")`` the
        tasks run on a Dask cluster). ``None`` runs them one after another.
    config : dict, default=None
        Overrides of the settings returned by ``default_config(quick)``, e.g.
        ``{"degree": {"train_sizes": (100, 1000)}}`` (nested dicts are merged,
        unknown names are an error); a study set to ``None`` is left out, and
        its tables are empty.

    Returns
    -------
    tables : dict
        Lists of dict rows, by name (the columns are described in the
        reproduction guide):

        - ``"degree"``: ``model``, ``qk_bias``, ``target``, ``d``, ``N``,
          ``n_params``, ``n_train``, ``error_mean``, ``error_std``,
          ``n_seeds``;
        - ``"degree_thresholds"``, ``"biased_thresholds"``: per model and
          target, ``n_needed`` (from the mean curve; ``None`` if not reached),
          its range over the seeds that reach it and their number, and the
          error at the largest size;
        - ``"scaling"``: per model, ``d`` and ``N``, the median, smallest and
          largest ``n*`` over the seeds;
        - ``"scaling_slopes"``: per model and fit, the slopes of ``log n*``
          (mean and std over seeds);
        - ``"biased"``: per target, ``d`` and ``n_train``, the errors of RFA
          and BiasedRFA and their paired ratio;
        - ``"mean_scale"``: per ``mean_scale`` and ``n_train``, the error and
          the paired ratio ``error(BiasedRFA) / error(RFA)``;
        - ``"softmax"``, ``"softmax_temperature"``: the ReLU and softmax
          errors per target, and the softmax's per inverse temperature.

    See Also
    --------
    plot_rfa : Draw the tables.
    write_csv : Save a table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_rfa
    >>> tables = run_rfa(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['biased', 'biased_thresholds', 'degree', 'degree_thresholds', ...]
    """
    cfg = merge_config(default_config(quick), config)
    n_seeds = check_count(cfg["n_seeds"] if n_seeds is None else n_seeds, "n_seeds")
    _check_targets(cfg)
    threshold = float(cfg["threshold"])
    report = Progress(progress, prefix="[rfa] ")

    curves = _Curves(n_seeds)
    _request_curves(curves, cfg)
    tasks = curves.tasks(random_state, cfg["n_test"])
    n_curves = len(curves.sizes)
    report(f"{len(tasks)} tasks: {n_curves} distinct curves x {n_seeds} seeds")
    results = run_tasks([task for _, task in tasks], n_jobs=n_jobs)
    errors = []
    for count, ((key, _), result) in enumerate(zip(tasks, results, strict=True), 1):
        errors.append(result)
        if count % n_seeds:
            continue
        # The last repetition of a curve: store it, say where it ended.
        curves.store(key, errors)
        last = np.asarray(errors)
        fitted = np.isfinite(last)
        reached = [row[ok][-1] for row, ok in zip(last, fitted, strict=True)]
        mean, std = summarize(reached)
        report(
            f"[{count // n_seeds}/{n_curves}] {curves.origin[key]}: "
            f"{_label(key)}: error {_mean_spread(mean, std, n_seeds)} "
            f"at the last size fitted"
        )
        errors = []
    report("done")

    tables = {name: [] for name in TABLES}
    if cfg.get("degree"):
        tables["degree"] = _tables._degree_rows(curves, cfg["degree"])
        tables["degree_thresholds"] = _tables._degree_threshold_rows(
            curves, cfg["degree"], threshold
        )
    if cfg.get("scaling"):
        n_star = _tables._scaling_n_star(curves, cfg["scaling"], threshold)
        tables["scaling"] = _tables._scaling_rows(n_star, cfg["scaling"], threshold)
        tables["scaling_slopes"] = _tables._scaling_slope_rows(n_star, cfg["scaling"])
    if cfg.get("biased"):
        tables["biased"] = _tables._biased_rows(curves, cfg["biased"])
        tables["biased_thresholds"] = _tables._biased_threshold_rows(
            curves, cfg["biased"], threshold
        )
    if cfg.get("mean_scale"):
        tables["mean_scale"] = _tables._mean_scale_rows(curves, cfg["mean_scale"])
    if cfg.get("softmax"):
        tables["softmax"] = _tables._softmax_rows(curves, cfg["softmax"])
        tables["softmax_temperature"] = _tables._temperature_rows(
            curves, cfg["softmax"]
        )
    return tables

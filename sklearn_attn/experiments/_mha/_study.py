"""The multi-head attention reproduction's driver: settings in, tables out."""

from __future__ import annotations

from .._common import Progress, check_count, merge_config, run_tasks
from ._config import default_mha_config
from ._curves import _aggregate, _one_instance
from ._thresholds import _instance_row, _specs, _threshold_instance, _threshold_summary

__all__ = ["run_mha"]


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
    samples. Then maps where recovery fails: the smallest ``n`` that recovers
    the layer against ``m`` (1 to 4) and ``d`` (4 and 8), for Boolean and
    Gaussian inputs, and for two nearly degenerate heads against their
    distance (``make_attention_layer_regression(head_distance=delta)``).

    Parameters
    ----------
    quick : bool, default=False
        Reduced settings (``d = k = 4``, ``m`` in {1, 2}, six sizes, two
        repetitions; thresholds for ``d = k = 4``, ``m`` in {1, 2}, ``n`` up
        to 32, two seeds, no near-degenerate sweep); the user guide
        (:ref:`reproducing`) gives their running times.
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
        Overrides of ``default_mha_config(quick)``, e.g. ``{"n_heads": (2,)}``;
        the nested ``"thresholds"``, ``"degenerate"`` and ``"learner"`` (the
        thresholds' learner's keyword arguments) are merged, and ``None``
        for ``"thresholds"`` or ``"degenerate"`` leaves that study out. A
        name the defaults do not have (outside ``"learner"``) is a
        ``ValueError``. ``n_seeds`` counts the learning curves' repetitions;
        the thresholds have their own (``config["thresholds"]["n_seeds"]``,
        3).

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
        ``"thresholds"``: where recovery fails, one row per cell (``inputs``
        Boolean or Gaussian, ``m``, ``d``, ``k``), over ``n_seeds`` instances
        (new layer, data and starts each): the smallest training size of the
        grid that recovers the layer, found by bisection (assuming success
        is monotone in ``n``), under two criteria, ``function`` (test
        relative error at most 1e-6) and ``parameters`` (matched ``Theta_i``
        and ``W_i`` relative errors at most 1e-3): ``threshold_*_median``,
        ``_min``, ``_max`` (``inf`` above the grid), ``recovered_*``
        (instances with a finite threshold), ``starts_*_median`` (starts
        the learner ran at the threshold, ``n_init_run_``) and
        ``seconds_*_median`` (that fit's time), ``violations_*`` (fits above
        the threshold that failed: non-zero means it is not sharp), the
        counting bound ``n_count = ceil(2 m d / k)``, the median errors at
        the largest size ``n_max``, and the cell's ``fits`` and ``seconds``.
        ``"degenerate"``: the same for two heads at Frobenius distance
        ``delta`` (``None``: independent heads). ``"threshold_instances"``:
        one row per instance, with its thresholds, ``n_fits`` and the
        ``fitted_sizes``.

    See Also
    --------
    plot_mha : Draw the table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_mha
    >>> tables = run_mha(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['degenerate', 'learning_curves', 'threshold_instances', 'thresholds']
    """
    overrides = dict(config or {})
    # The learner's keyword arguments are open: merged here, not checked
    # against the (empty) defaults.
    learner = overrides.pop("learner", None) or {}
    cfg = merge_config(default_mha_config(quick), overrides)
    cfg["learner"] = {**cfg["learner"], **learner}
    n_seeds = check_count(cfg["n_seeds"] if n_seeds is None else n_seeds, "n_seeds")
    report = Progress(progress, prefix="[mha] ")
    report(
        f"planted layers, d={cfg['token_dim']}, k={cfg['n_tokens']}, m in "
        f"{list(cfg['n_heads'])}, n in {list(cfg['train_sizes'])}, {n_seeds} seeds"
    )
    jobs = [(int(m), seed) for m in cfg["n_heads"] for seed in range(n_seeds)]
    specs = _specs(cfg)
    # One grid: the learning curves' repetitions, then the thresholds'
    # instances (each carries its own seeds).
    outputs = run_tasks(
        [(_one_instance, m, seed, cfg, random_state) for m, seed in jobs]
        + [(_threshold_instance, spec, cfg, random_state) for spec in specs],
        n_jobs=n_jobs,
    )
    collected = []
    for count, (m, seed) in enumerate(jobs, 1):
        results = next(outputs)
        collected.extend(results)
        largest = max(r["n_train"] for r in results)
        final = {r["model"]: r["error"] for r in results if r["n_train"] == largest}
        report(
            f"[{count}/{len(jobs)}] m={m} seed {seed}: error at n={largest} "
            + ", ".join(f"{k} {v:.2g}" for k, v in final.items())
        )
    instances = []
    for count, spec in enumerate(specs, 1):
        out = next(outputs)
        instances.append(out)
        delta = "" if spec.get("delta") is None else f" delta={spec['delta']:g}"
        report(
            f"[{count}/{len(specs)}] {spec['study']} {spec['inputs']} m={spec['m']} "
            f"d={spec['d']} k={spec['k']}{delta} seed {spec['keys'][-1]}: n* "
            f"function {out['threshold_function']}, parameters "
            f"{out['threshold_parameters']} ({len(out['fits'])} fits, "
            f"{out['seconds']:.1f} s)"
        )
    summary = _threshold_summary(instances)
    report("done")
    return {
        "learning_curves": _aggregate(collected, cfg),
        "thresholds": [r for r in summary if r["study"] == "thresholds"],
        "degenerate": [r for r in summary if r["study"] == "degenerate"],
        "threshold_instances": [_instance_row(out) for out in instances],
    }

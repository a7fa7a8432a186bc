"""``reproduce rfa``: the random-feature attention studies and their tables.

The tiny settings below run every study in a few seconds; the tables are
checked against their definitions (the smallest size reaching the threshold,
least-squares slopes, paired ratios) recomputed from the curves they came from.
"""

import csv
import importlib.util
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_attn.__main__ import main
from sklearn_attn.experiments import _rfa, format_rfa_summary, run_rfa
from sklearn_attn.experiments._rfa import _curves, _tables

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

_SETTING = ["d", "N", "n_params"]
_THRESHOLD = [
    "threshold",
    "n_needed",
    "n_needed_min",
    "n_needed_max",
    "n_reached",
    "n_seeds",
    "largest_n",
    "error_at_largest_n_mean",
    "error_at_largest_n_std",
]
# The CSV files of ``reproduce rfa`` and their columns.
RFA_COLUMNS = {
    "degree": [
        "model",
        "qk_bias",
        "target",
        *_SETTING,
        "n_train",
        "error_mean",
        "error_std",
        "n_seeds",
    ],
    "degree_thresholds": ["model", "qk_bias", "target", *_SETTING, *_THRESHOLD],
    "scaling": [
        "model",
        "target",
        *_SETTING,
        "threshold",
        "n_star_median",
        "n_star_min",
        "n_star_max",
        "n_reached",
        "n_seeds",
        "largest_n",
    ],
    "scaling_slopes": [
        "model",
        "fit",
        "axis",
        "fixed",
        "slope_mean",
        "slope_std",
        "n_seeds_fitted",
        "slope_censored_at_2n_mean",
        "slope_censored_at_2n_std",
        "n_cells",
        "n_censored",
    ],
    "biased": [
        "target",
        *_SETTING,
        "n_train",
        "rfa_mean",
        "rfa_std",
        "biased_mean",
        "biased_std",
        "ratio_mean",
        "ratio_std",
        "n_seeds",
    ],
    "biased_thresholds": ["model", "target", *_SETTING, *_THRESHOLD],
    "mean_scale": [
        "target",
        "mean_scale",
        *_SETTING,
        "n_train",
        "error_mean",
        "error_std",
        "ratio_to_rfa_mean",
        "ratio_to_rfa_std",
        "n_seeds",
    ],
    "softmax": [
        "target",
        *_SETTING,
        "n_train",
        "relu_mean",
        "relu_std",
        "softmax_mean",
        "softmax_std",
        "ratio_softmax_to_relu_mean",
        "ratio_softmax_to_relu_std",
        "n_seeds",
    ],
    "softmax_temperature": [
        "target",
        "inverse_temperature",
        "qk_std",
        *_SETTING,
        "n_train",
        "error_mean",
        "error_std",
        "n_seeds",
    ],
}
# Columns that may be empty: thresholds not reached, slopes not determined,
# and the qk_bias of RFMLP (which has no scores).
_OPTIONAL = {
    "qk_bias",
    "fixed",
    "n_needed",
    "n_needed_min",
    "n_needed_max",
    "n_star_median",
    "n_star_min",
    "n_star_max",
    "slope_mean",
    "slope_std",
    "slope_censored_at_2n_mean",
    "slope_censored_at_2n_std",
}
_TEXT = {"model", "target", "fit", "axis", "fixed", "qk_bias"}


def read_csv(path):
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def check_rfa_csv(out, name):
    """The columns of ``rfa_NAME.csv``; its numbers finite (errors positive)."""
    columns, rows = read_csv(out / f"rfa_{name}.csv")
    assert columns == RFA_COLUMNS[name]
    assert rows
    for row in rows:
        for column in columns:
            if column in _TEXT or (column in _OPTIONAL and row[column] == ""):
                continue
            assert np.isfinite(float(row[column])), (name, column, row)
            if column.endswith("_mean") and not column.startswith("slope"):
                assert float(row[column]) > 0, (name, column, row)  # errors, ratios
    return rows


# Tiny settings of every study over the quick ones (a few seconds). The
# degree, biased, mean-scale and softmax studies share d, N and the width, so
# their RFA and BiasedRFA curves are the same fits.
TINY = {
    "n_seeds": 2,
    "n_test": 200,
    # Reached by RFA and BiasedRFA on correlation-1 (errors 0.1 to 0.6 here),
    # not on correlation-2 nor by RFMLP: the threshold rows are checked both
    # ways.
    "threshold": 0.6,
    "degree": {
        "token_dim": 3,
        "n_keys": 3,
        "width": 64,
        "targets": ("correlation-1", "correlation-2"),
        "train_sizes": (16, 32, 64),
    },
    "scaling": {
        "token_dims": (2, 3),
        "n_keys": (2, 4),
        "width": 64,
        "train_sizes": (8, 16, 32, 64),
    },
    "biased": {
        "token_dims": (3, 4),
        "n_keys": 3,
        "width": 64,
        "targets": ("correlation-1",),
        "gamma_targets": ("gamma-1",),
        "train_sizes": (16, 64),
    },
    "mean_scale": {
        "token_dim": 3,
        "n_keys": 3,
        "width": 64,
        "mean_scales": (0.0, 1.0, 2.0),
        "train_sizes": (64,),
    },
    "softmax": {
        "token_dim": 3,
        "n_keys": 3,
        "width": 64,
        "targets": ("correlation-2", "value-1"),
        "train_sizes": (32, 64),
        "inverse_temperatures": (0.5, 1.0),
        "temperature_targets": ("value-1",),
        "temperature_train_sizes": (64,),
    },
}


@pytest.fixture(scope="module")
def tiny_run():
    messages = []
    tables = run_rfa(quick=True, random_state=3, progress=messages.append, config=TINY)
    return tables, messages


def test_every_table_has_its_columns(tiny_run):
    tables, _ = tiny_run
    assert sorted(tables) == sorted(RFA_COLUMNS)
    for name, rows in tables.items():
        assert rows and all(list(row) == RFA_COLUMNS[name] for row in rows), name
    counts = {name: len(rows) for name, rows in tables.items()}
    # 2 targets x (3 models + 1 contrast) x 3 sizes; 2 d x 2 N x 2 models; ...
    assert counts == {
        "degree": 24,
        "degree_thresholds": 8,
        "scaling": 8,
        "scaling_slopes": 2 * (2 + 2 + 2),
        "biased": 6,
        "biased_thresholds": 6,
        "mean_scale": 3,
        "softmax": 4,
        "softmax_temperature": 2,
    }
    # The same number of trained weights for every model: ceil(64 / 4) heads
    # of 4 value weights, 64 hidden units.
    assert {row["n_params"] for row in tables["degree"]} == {64}
    contrast = [r for r in tables["degree"] if r["qk_bias"] is False]
    assert {r["model"] for r in contrast} == {"RFA"}  # the quick contrast
    assert {r["qk_bias"] for r in tables["degree"] if r["model"] == "RFMLP"} == {None}


def test_shared_curves_are_fitted_once(tiny_run):
    """mu = 0 is RFA, mu = 1 BiasedRFA's default, the softmax table's ReLU
    column RFA, c = 1 the softmax's default: the same fits, the same numbers."""
    tables, messages = tiny_run
    degree = {
        (r["target"], r["model"], r["qk_bias"], r["n_train"]): r
        for r in tables["degree"]
    }
    rfa, biased = (
        degree["correlation-2", "RFA", True, 64],
        degree["correlation-2", "BiasedRFA", True, 64],
    )
    scale = {r["mean_scale"]: r for r in tables["mean_scale"]}
    assert scale[0.0]["error_mean"] == rfa["error_mean"]
    assert (scale[0.0]["ratio_to_rfa_mean"], scale[0.0]["ratio_to_rfa_std"]) == (1, 0)
    assert scale[1.0]["error_mean"] == biased["error_mean"]
    assert scale[2.0]["error_mean"] != biased["error_mean"]
    softmax = {r["target"]: r for r in tables["softmax"] if r["n_train"] == 64}
    assert softmax["correlation-2"]["relu_mean"] == rfa["error_mean"]
    temperature = {r["inverse_temperature"]: r for r in tables["softmax_temperature"]}
    assert temperature[1.0]["error_mean"] == softmax["value-1"]["softmax_mean"]
    assert temperature[0.5]["qk_std"] == pytest.approx(0.5 / math.sqrt(3))
    biased_rows = {(r["target"], r["d"], r["n_train"]): r for r in tables["biased"]}
    shared = biased_rows["correlation-1", 3, 64]
    assert shared["rfa_mean"] == degree["correlation-1", "RFA", True, 64]["error_mean"]
    # Distinct curves: 8 (degree) + 8 (scaling) + 6 (biased, 2 of them the
    # degree table's) + 1 (mu = 2) + 3 (softmax on both targets, ReLU on
    # value-1) + 1 (c = 0.5), then "done".
    n_curves = 8 + 8 + 4 + 1 + 3 + 1
    assert f"{n_curves} distinct curves x 2 seeds" in messages[0]
    assert sum(f"/{n_curves}] " in m for m in messages) == n_curves
    assert all(m.startswith("[rfa]") and m.endswith("s]") for m in messages)


def test_threshold_rows_follow_the_curves(tiny_run):
    tables, _ = tiny_run
    sizes = TINY["degree"]["train_sizes"]
    degree = {
        (r["target"], r["model"], r["qk_bias"], r["n_train"]): r
        for r in tables["degree"]
    }
    for row in tables["degree_thresholds"]:
        key = row["target"], row["model"], row["qk_bias"]
        curve = [degree[(*key, n)]["error_mean"] for n in sizes]
        below = zip(sizes, curve, strict=True)
        reached = [n for n, e in below if e <= row["threshold"]]
        assert row["n_needed"] == (reached[0] if reached else None)
        assert row["error_at_largest_n_mean"] == curve[-1]
        assert 0 <= row["n_reached"] <= 2
    needed = [row["n_needed"] for row in tables["degree_thresholds"]]
    assert None in needed and any(n is not None for n in needed)


def _scaling_errors(model, d, n_keys, seed):
    """The errors of one scaling curve, recomputed by its task."""
    cfg = _rfa.default_config(quick=True)["scaling"] | TINY["scaling"]
    curves = _curves._Curves(2)
    key = (model, {}, cfg["target"], d, n_keys, cfg["width"], TINY["threshold"])
    curves.need("scaling", cfg["train_sizes"], *key)
    _, (function, *args) = curves.tasks(3, TINY["n_test"])[seed]
    return function(*args)


def test_scaling_rows_are_the_first_size_below_the_threshold(tiny_run):
    """Each seed's n* is the first size whose error reaches the threshold, and
    its curve stops there (NaN beyond); the rows summarise them over seeds."""
    tables, _ = tiny_run
    sizes = TINY["scaling"]["train_sizes"]
    threshold = TINY["threshold"]
    for row in tables["scaling"]:
        per_seed = []
        for seed in range(2):
            errors = _scaling_errors(row["model"], row["d"], row["N"], seed)
            fitted = np.isfinite(errors)
            stop = int(fitted.sum())
            assert fitted[:stop].all() and not fitted[stop:].any()
            below = [k for k, e in enumerate(errors) if e <= threshold]
            if below:
                assert below[0] == stop - 1  # stopped at the first one
                per_seed.append(sizes[below[0]])
            else:
                assert stop == len(sizes)
                per_seed.append(None)
        reached = [n for n in per_seed if n is not None]
        assert row["n_reached"] == len(reached)
        assert row["n_star_min"] == min(reached, default=None)
        expected_max = max(reached) if len(reached) == 2 else None
        assert row["n_star_max"] == expected_max
        if len(reached) == 2:
            assert row["n_star_median"] == np.mean(reached)
        else:
            assert row["n_star_median"] is None  # the median of 2 is censored
    medians = [row["n_star_median"] for row in tables["scaling"]]
    assert None in medians and any(m is not None for m in medians)


def test_slopes_are_least_squares_fits_of_log_n_star():
    """The joint fit against NumPy's least squares, the one-axis fits against
    np.polyfit, on invented n* of two seeds; a cell not reached is left out,
    or counted at twice the largest size."""
    cfg = {"models": ("RFA",), "token_dims": (2, 4), "n_keys": (2, 8, 32)}
    cfg["train_sizes"] = (8, 16, 32, 64, 128, 256)
    n_star = {
        ("RFA", 2, 2): [8, 16],
        ("RFA", 2, 8): [16, 16],
        ("RFA", 2, 32): [64, None],
        ("RFA", 4, 2): [32, 32],
        ("RFA", 4, 8): [64, 128],
        ("RFA", 4, 32): [256, None],
    }
    rows = {
        (r["fit"], r["axis"], r["fixed"]): r
        for r in _tables._scaling_slope_rows(n_star, cfg)
    }
    for seed, capped in ((0, False), (1, False), (1, True)):
        points = [
            (n if n is not None else 512, n_keys, d)
            for (_, d, n_keys), values in n_star.items()
            if (n := values[seed]) is not None or capped
        ]
        logs = np.log2(np.array(points, dtype=float))
        design = np.column_stack([np.ones(len(logs)), logs[:, 1], logs[:, 2]])
        coef = np.linalg.lstsq(design, logs[:, 0], rcond=None)[0]
        if seed == 0:
            slope_n0, slope_d0 = coef[1], coef[2]
        elif not capped:
            slope_n1, slope_d1 = coef[1], coef[2]
        else:
            bound_n1, bound_d1 = coef[1], coef[2]
    joint_n = rows["joint", "N", None]
    assert_allclose(joint_n["slope_mean"], (slope_n0 + slope_n1) / 2, rtol=1e-12)
    assert_allclose(joint_n["slope_std"], abs(slope_n0 - slope_n1) / 2, rtol=1e-12)
    assert_allclose(
        joint_n["slope_censored_at_2n_mean"], (slope_n0 + bound_n1) / 2, rtol=1e-12
    )
    assert (joint_n["n_cells"], joint_n["n_censored"]) == (12, 2)
    joint_d = rows["joint", "d", None]
    assert_allclose(joint_d["slope_mean"], (slope_d0 + slope_d1) / 2, rtol=1e-12)
    assert_allclose(
        joint_d["slope_censored_at_2n_mean"], (slope_d0 + bound_d1) / 2, rtol=1e-12
    )
    # In N at d = 2: seed 0 over 3 cells, seed 1 over the 2 it reached.
    at_d2 = rows["N", "N", "d=2"]
    slopes = [
        np.polyfit(np.log2([2, 8, 32]), np.log2([8, 16, 64]), 1)[0],
        np.polyfit(np.log2([2, 8]), np.log2([16, 16]), 1)[0],
    ]
    assert_allclose(at_d2["slope_mean"], np.mean(slopes), rtol=1e-12)
    assert at_d2["n_seeds_fitted"] == 2
    # In d at N = 32: seed 1 reached no cell, so one seed is fitted.
    at_n32 = rows["d", "d", "N=32"]
    assert at_n32["n_seeds_fitted"] == 1
    assert_allclose(at_n32["slope_mean"], math.log2(256 / 64), rtol=1e-12)


def test_censored_median():
    assert _tables._censored_median([8, 16, 32]) == 16
    assert _tables._censored_median([8, 16]) == 12
    assert _tables._censored_median([8, None, 32]) == 32
    assert _tables._censored_median([8, None]) is None
    assert _tables._censored_median([None, None, 8]) is None


def test_biased_ratios_are_paired(tiny_run):
    """The ratio is the mean over seeds of each seed's BiasedRFA / RFA, not
    the ratio of the means (those differ unless the seeds agree)."""
    tables, _ = tiny_run
    cfg = _rfa.default_config(quick=True)["biased"] | TINY["biased"]
    curves = _curves._Curves(2)
    _curves._request_curves(curves, {"threshold": 0.6, "biased": cfg})
    by_key = {}
    for key, (function, *args) in curves.tasks(3, TINY["n_test"]):
        by_key.setdefault(key, []).append(function(*args))
    for key, errors in by_key.items():
        curves.store(key, errors)
    assert _tables._biased_rows(curves, cfg) == tables["biased"]
    row = tables["biased"][0]
    assert row["ratio_mean"] != pytest.approx(row["biased_mean"] / row["rfa_mean"])


def test_runs_are_reproducible_and_studies_independent(tiny_run):
    tables, _ = tiny_run
    again = run_rfa(quick=True, random_state=3, progress=False, config=TINY)
    assert again == tables
    alone = run_rfa(
        quick=True,
        random_state=3,
        progress=False,
        config={**TINY, "scaling": None, "mean_scale": None, "softmax": None},
    )
    assert alone["degree"] == tables["degree"]
    assert alone["biased"] == tables["biased"]
    assert not alone["scaling"] and not alone["softmax"]
    summary = format_rfa_summary(tables)
    for text in (
        "Degree table",
        "(no qk_bias)",
        "Sample complexity",
        "Slopes of log n*",
        "BiasedRFA against RFA",
        "mean scale",
        "softmax n=64",
        "temperature",
    ):
        assert text in summary, text


@pytest.mark.parametrize(
    "config, message",
    [
        ({"degre": {}}, "Unknown setting 'degre'"),
        ({"degree": {"n_head": 3}}, "Unknown settings \\['n_head'\\]"),
        ({"degree": {"targets": ("correlation-x",)}}, "Unknown target"),
        ({"softmax": {"targets": ("cubic-1",)}}, "Unknown target"),
        ({"scaling": {"target": "gamma-x"}}, "Unknown target"),
        ({"n_seeds": 0}, "n_seeds must be a positive integer"),
    ],
)
def test_run_rfa_rejects_unknown_settings(config, message):
    with pytest.raises(ValueError, match=message):
        run_rfa(quick=True, progress=False, config=config)


def test_reproduce_rfa_writes_every_table(tmp_path, monkeypatch, capsys):
    """``reproduce rfa`` (its default settings made tiny) writes every table."""
    tiny = _rfa.default_config(quick=False)
    for key, value in TINY.items():
        tiny[key] = {**tiny[key], **value} if isinstance(value, dict) else value
    monkeypatch.setattr(_rfa._config, "_DEFAULT_CONFIG", tiny)
    assert main(["reproduce", "rfa", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    for name in RFA_COLUMNS:
        rows = check_rfa_csv(tmp_path, name)
        assert all(row.get("n_seeds", "2") == "2" for row in rows)
        assert str(tmp_path / f"rfa_{name}.csv") in captured.out
    assert "Degree table" in captured.out and "Softmax inverse" in captured.out
    if HAS_MATPLOTLIB:
        assert (tmp_path / "rfa.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_committed_width_check_finds_the_same_n_star():
    """The guide states that the width does not decide n*: the committed
    sample-complexity cells at twice the width (``bench_rfa_claims.py --parts
    width``) have the n* of the committed default run, cell by cell."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    wide = json.loads((results / "rfa_claims.json").read_text())["parts"]["width"]
    _, default = read_csv(results / "reproduce" / "rfa" / "rfa_scaling.csv")
    default = {(r["model"], int(r["d"]), int(r["N"])): r for r in default}
    rows = wide["tables"]["scaling"]
    assert rows and wide["config"]["scaling"]["width"] == 2 * 8192
    for row in rows:
        same = default[row["model"], row["d"], row["N"]]
        assert row["n_params"] > int(same["n_params"])
        expected = same["n_star_median"]
        assert row["n_star_median"] == (float(expected) if expected else None), row

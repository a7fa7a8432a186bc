"""The command line (``python -m sklearn_attn``) and the RFA reproduction."""

import csv
import importlib.util
import json
import os
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from sklearn_attn.__main__ import REPRODUCTIONS, main
from sklearn_attn.experiments import format_rfa_summary, run_rfa, write_csv

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
COLUMNS = [
    "model",
    "target",
    "degree",
    "gamma",
    "N",
    "d",
    "n_train",
    "error_mean",
    "error_std",
    "n_seeds",
    "n_params",
    "alpha",
]


def _read_csv(path):
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["--help"])
    assert excinfo.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "reproduce" in out


def test_reproduce_help_lists_names(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["reproduce", "--help"])
    assert excinfo.value.code == 0
    out = capsys.readouterr().out
    assert "rfa" in out and "--scheduler ADDRESS" in out


def test_unknown_reproduction_is_an_error(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["reproduce", "no-such-paper"])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "no-such-paper" in err
    for name in REPRODUCTIONS:
        assert name in err


def test_scheduler_without_dask_says_how_to_install(monkeypatch, capsys):
    # As if dask.distributed were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    argv = ["reproduce", "rfa", "--quick", "--scheduler", "tcp://127.0.0.1:8786"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "--scheduler needs dask.distributed" in err
    assert "pip install sklearn-attn[dask]" in err


def test_unreachable_scheduler_is_an_error(tmp_path, capsys):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    # Nothing listens on port 1; give up after half a second, not 30.
    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
        status = main(
            [
                "reproduce",
                "rfa",
                "--scheduler",
                "tcp://127.0.0.1:1",
                "--out",
                str(tmp_path),
            ]
        )
    assert status == 1
    err = capsys.readouterr().err
    assert "could not connect to the Dask scheduler at tcp://127.0.0.1:1" in err
    assert not list(tmp_path.iterdir())  # nothing ran


def test_missing_command_is_an_error():
    with pytest.raises(SystemExit) as excinfo:
        main([])
    assert excinfo.value.code == 2


@pytest.mark.parametrize("seeds", ["0", "-1", "two"])
def test_bad_seed_count_is_an_error(seeds):
    with pytest.raises(SystemExit) as excinfo:
        main(["reproduce", "rfa", "--seeds", seeds])
    assert excinfo.value.code == 2


def test_demo_writes_tables_and_figure(tmp_path, capsys):
    """The full demo (``reproduce rfa --quick``), run once in the suite."""
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out)]) == 0
    captured = capsys.readouterr()

    columns, rows = _read_csv(out / "rfa_learning_curves.csv")
    assert columns == COLUMNS
    assert {row["model"] for row in rows} == {"RFA", "BiasedRFA", "RFMLP"}
    assert {row["target"] for row in rows} == {"correlation", "value"}
    assert len({row["N"] for row in rows}) >= 2
    errors = np.array([float(row["error_mean"]) for row in rows])
    assert np.all(np.isfinite(errors)) and np.all(errors >= 0)
    assert all(row["gamma"] == "" for row in rows)

    columns, rows = _read_csv(out / "rfa_gamma.csv")
    assert columns == COLUMNS
    assert {row["model"] for row in rows} == {"RFA", "BiasedRFA"}
    assert {row["target"] for row in rows} == {"correlation", "gamma"}
    assert all(row["degree"] == "" for row in rows if row["target"] == "gamma")

    # The PF00014 contacts: every pair listed; the full model's fit has no
    # randomness, and its precision at L (1.000 here, 53 of 53) is far above
    # 0.9 (five wrong pairs more), whatever the BLAS's rounding.
    contacts = out / "contacts_pf00014"
    columns, rows = _read_csv(contacts / "contacts.csv")
    assert columns == ["i", "j", "residue_i", "residue_j", "score", "score_raw"]
    assert len(rows) == 53 * 52 // 2
    summary = json.loads((contacts / "summary.json").read_text())
    assert summary["precision"]["L"] >= 0.9
    assert "contacts of PF00014" in captured.out

    if HAS_MATPLOTLIB:
        assert (contacts / "contact_map.png").stat().st_size > 0
        png = out / "rfa.png"
        assert png.stat().st_size > 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The summary table and where the files went go to stdout, progress to stderr.
    assert "RFMLP" in captured.out and "BiasedRFA" in captured.out
    assert str(out / "rfa_learning_curves.csv") in captured.out
    assert "[rfa]" in captured.err

    # The other reproductions' quick versions run too.
    _, rows = _read_csv(out / "potts_synthetic.csv")
    assert {row["parametrization"] for row in rows} == {"factored", "full"}
    assert all(float(row["test_loss"]) > 0 for row in rows)
    _, rows = _read_csv(out / "potts_real.csv")
    assert float(rows[0]["precision_top_L/5"]) > 0.5
    # Every pair of PF00014's 53 columns, ranked as contact_precision ranks them.
    _, contacts = _read_csv(out / "potts_contacts.csv")
    assert len(contacts) == 53 * 52 // 2
    ranked = sorted((r for r in contacts if r["rank"]), key=lambda r: int(r["rank"]))
    top_l = [r["contact"] == "True" for r in ranked[:53]]
    assert sum(top_l) / 53 == float(rows[0]["precision_top_L"])
    _, rows = _read_csv(out / "potts_dense.csv")
    assert {row["model"] for row in rows} == {"factored", "vanilla", "full"}
    assert (out / "mha_learning_curves.csv").stat().st_size > 0
    # The recovery thresholds, per cell and per instance (the quick run has no
    # near-degenerate sweep).
    _, rows = _read_csv(out / "mha_thresholds.csv")
    assert {(r["inputs"], r["m"]) for r in rows} == {
        (inputs, m) for inputs in ("boolean", "gaussian") for m in ("1", "2")
    }
    assert all(r["n_seeds"] == "2" for r in rows)
    _, rows = _read_csv(out / "mha_threshold_instances.csv")
    assert len(rows) == 4 * 2
    assert not (out / "mha_degenerate.csv").exists()
    assert "Recovery thresholds" in captured.out
    assert list(out.glob("implicit_bias_*.csv"))
    # Aligned against random starts, full matrices.
    _, rows = _read_csv(out / "implicit_bias_aligned.csv")
    assert {r["init"] for r in rows} == {
        "random",
        "aligned/nuclear_svm",
        "aligned/gradient",
    }
    _, rows = _read_csv(out / "implicit_bias_aligned_final.csv")
    assert all(r["corr_nuc_opt"] for r in rows)
    if HAS_MATPLOTLIB:
        for name in ("potts.png", "mha.png", "implicit_bias.png"):
            assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in REPRODUCTIONS:
        assert f"reproduce {name} --quick took" in captured.out


DENSE_COLUMNS = [
    "part",
    "model",
    "n_train",
    "seed",
    "test_loss",
    "true_conditional_entropy",
    "relative_excess_loss",
    "train_loss",
    "train_conditional_entropy",
    "train_relative_excess_loss",
    "coupling_correlation",
    "objective",
    "n_iter",
    "max_iter",
    "tol",
    "converged",
    "fit_seconds",
    "beta",
    "n_sites",
    "n_states",
    "n_test",
    "vanilla_max_n",
    "teacher_draw",
    "mixing_z_rms",
    "max_mixing_z",
]


def _tiny_potts_config(quick=False):
    """``reproduce potts`` at sizes that run in seconds (dense: 2 teachers)."""
    return dict(
        n_sites=6,
        n_states=3,
        n_train=[100],
        n_test=200,
        n_seeds=1,
        real_max_iter=1,
        real_factored=False,
        dense=dict(
            beta=3.0,
            n_train=[100, 200],
            n_test=300,
            n_seeds=2,
            tol=1e-5,
            vanilla_max_iter=5,
            vanilla_max_n=100,
            max_mixing_z=1.5,
        ),
    )


def test_reproduce_potts_writes_the_dense_table(tmp_path, monkeypatch, capsys):
    """The dense study's table beside the ring's: columns, models, sizes, values."""
    from sklearn_attn.experiments import _potts

    monkeypatch.setattr(_potts, "default_config", _tiny_potts_config)
    out = tmp_path / "out"
    assert main(["reproduce", "potts", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    columns, rows = _read_csv(out / "potts_dense.csv")
    assert columns == DENSE_COLUMNS
    cells = {(r["model"], int(r["n_train"]), int(r["seed"])) for r in rows}
    # The vanilla layer only up to vanilla_max_n, the others at every size.
    assert cells == {
        (model, n, seed)
        for model in ("factored", "vanilla", "full")
        for n in (100, 200)
        for seed in (0, 1)
        if not (model == "vanilla" and n > 100)
    }
    assert len(rows) == len(cells)
    for row in rows:
        number = {k: float(row[k]) for k in DENSE_COLUMNS[4:10] + ["mixing_z_rms"]}
        assert all(np.isfinite(v) and v > -1 for v in number.values()), row
        assert number["relative_excess_loss"] == pytest.approx(
            number["test_loss"] / number["true_conditional_entropy"] - 1, rel=1e-12
        )
        # A teacher whose Gibbs runs disagree is skipped, not used.
        assert number["mixing_z_rms"] <= 1.5
        if row["model"] == "vanilla":
            assert row["coupling_correlation"] == ""  # it has no couplings
            assert row["max_iter"] == "5"
        else:
            assert -1 <= float(row["coupling_correlation"]) <= 1
            assert row["tol"] == "1e-05"
    # One teacher per seed: one entropy on its test set, one draw.
    for seed in ("0", "1"):
        sel = [r for r in rows if r["seed"] == seed]
        assert len({r["true_conditional_entropy"] for r in sel}) == 1
        assert len({r["teacher_draw"] for r in sel}) == 1
    assert len({r["teacher_draw"] for r in rows}) == 2
    # The printed table says where the vanilla layer was not run, and why.
    assert "Dense signed teacher" in captured.out
    assert "not run above n = 100" in captured.out
    assert str(out / "potts_dense.csv") in captured.out
    if HAS_MATPLOTLIB:
        assert (out / "potts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_potts_dense_skips_teachers_that_do_not_mix():
    """With a bound no Gibbs run meets, every teacher is skipped and said so."""
    from sklearn_attn.experiments import format_potts_summary, run_potts

    config = _tiny_potts_config()
    config["dense"].update(n_seeds=1, max_mixing_z=-1.0)  # an RMS is >= 0
    messages = []
    tables = run_potts(real=False, progress=messages.append, config=config)
    assert tables["dense"] == []
    assert sum("skipped, its Gibbs runs do not mix" in m for m in messages) == 10
    assert any("only 0 of 10 teachers mixed" in m for m in messages)
    assert "Dense" not in format_potts_summary(tables)


def test_run_rfa_small_config_and_progress_callable():
    messages = []
    config = {
        "n_test": 200,
        "learning_curves": {
            "n_keys": (3,),
            "targets": (("correlation", 1),),
            "n_heads": 20,
            "train_sizes": (16, 64),
        },
        "gamma": {
            "gammas": (1.0,),
            "degrees": (),
            "n_heads": 20,
            "train_sizes": (64,),
            "token_dim": 3,
            "n_keys": 2,
        },
    }
    tables = run_rfa(
        quick=True, n_seeds=2, random_state=3, progress=messages.append, config=config
    )
    curves, gamma = tables["learning_curves"], tables["gamma"]
    # 3 models x 2 sizes, 2 models x 1 size
    assert len(curves) == 6 and len(gamma) == 2
    assert all(row["n_seeds"] == 2 for row in curves + gamma)
    assert {row["n_params"] for row in curves} == {20 * 5}
    # One line per (part, setting, model), plus headers; all with elapsed time.
    assert sum("] part A " in m for m in messages) == 3
    assert sum("] part B " in m for m in messages) == 2
    assert all(m.startswith("[rfa]") and m.endswith("s]") for m in messages)
    # Reproducible from the master seed, and silent with progress=False.
    again = run_rfa(
        quick=True, n_seeds=2, random_state=3, progress=False, config=config
    )
    assert again == tables
    summary = format_rfa_summary(tables)
    assert "Part A" in summary and "gamma=1" in summary


def test_write_csv_blank_cells(tmp_path):
    path = write_csv(
        [{"a": 1, "b": None}, {"a": float("nan"), "c": "x"}], tmp_path / "sub" / "t.csv"
    )
    columns, rows = _read_csv(path)
    assert columns == ["a", "b", "c"]
    assert rows == [{"a": "1", "b": "", "c": ""}, {"a": "", "b": "", "c": "x"}]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="needs matplotlib")
@pytest.mark.parametrize(
    "example", sorted(path.name for path in EXAMPLES.glob("plot_*.py"))
)
def test_example_runs(example, monkeypatch, tmp_path):
    """Each gallery example runs as a script and saves its figures."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)  # figures an example saves land here
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        runpy.run_path(os.fspath(EXAMPLES / example), run_name="__main__")
    finally:
        plt.close("all")
    assert sorted(tmp_path.glob("*.png")), f"{example} saved no figure"

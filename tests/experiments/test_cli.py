"""The command line (``python -m sklearn_attn``).

The RFA reproduction's own tests are in ``test_reproduce_rfa.py``.
"""

import csv
import importlib.util
import json
import os
import runpy
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
from test_reproduce_rfa import RFA_COLUMNS, check_rfa_csv

from sklearn_attn.__main__ import REPRODUCTIONS, main
from sklearn_attn.experiments import write_csv

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


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

    # The quick rfa: every table but the softmax temperatures (not run).
    for name in RFA_COLUMNS:
        if name != "softmax_temperature":
            check_rfa_csv(out, name)
    assert not (out / "rfa_softmax_temperature.csv").exists()

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
    assert "Degree table" in captured.out and "RFMLP" in captured.out
    assert str(out / "rfa_degree.csv") in captured.out
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
    # The theorem's setting (equal non-optimal scores) against generic tokens.
    _, rows = _read_csv(out / "implicit_bias_theorem.csv")
    assert {(r["scores"], r["parametrization"]) for r in rows} == {
        (scores, p) for scores in ("equal", "generic") for p in ("separate", "combined")
    }
    assert all(r["corr_nuc_opt_mean"] and r["n_reached"] for r in rows)
    assert (out / "implicit_bias_theorem_final.csv").stat().st_size > 0
    assert (out / "implicit_bias_theorem_trajectories.csv").stat().st_size > 0
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
    from sklearn_attn.experiments._potts import _study as _potts

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


def test_run_json_records_how_the_tables_were_made(tmp_path, monkeypatch, capsys):
    """``--run-json``: the command, the tables, the time, load and versions."""
    import platform

    import scipy
    import sklearn

    def fake_rfa(out_dir, *, quick, n_seeds, random_state, n_jobs):
        assert (quick, n_seeds, random_state, n_jobs) == (False, 2, 3, None)
        written = [write_csv([{"a": 1}], os.path.join(out_dir, "rfa_x.csv"))]
        Path(out_dir, "rfa.png").write_bytes(b"")
        return "summary", written + [os.path.join(out_dir, "rfa.png")], []

    monkeypatch.setitem(REPRODUCTIONS, "rfa", fake_rfa)
    argv = ["reproduce", "rfa", "--out", str(tmp_path), "--seeds", "2"]
    assert main(argv + ["--random-state", "3"]) == 0
    assert not (tmp_path / "run.json").exists()

    assert main(argv + ["--random-state", "3", "--run-json"]) == 0
    assert str(tmp_path / "run.json") in capsys.readouterr().out
    record = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert record["command"] == (
        f"python -m sklearn_attn reproduce rfa --out {shlex.quote(str(tmp_path))} "
        "--seeds 2 --random-state 3 --run-json"
    )
    assert record["tables"] == ["rfa_x.csv"]  # the figure is not a table
    assert 0 <= record["wall_seconds"] < 60
    for key in ("load_average_1_5_15_before", "load_average_1_5_15_after"):
        assert len(record[key]) == 3 and min(record[key]) >= 0
    assert record["python"] == platform.python_version()
    assert (record["numpy"], record["scipy"], record["sklearn"]) == (
        np.__version__,
        scipy.__version__,
        sklearn.__version__,
    )
    assert record["platform"] == platform.platform()
    assert record["date"][:4].isdigit() and "T" in record["date"]


def test_write_csv_blank_cells(tmp_path):
    path = write_csv(
        [{"a": 1, "b": None}, {"a": float("nan"), "c": "x"}], tmp_path / "sub" / "t.csv"
    )
    columns, rows = _read_csv(path)
    assert columns == ["a", "b", "c"]
    assert rows == [{"a": "1", "b": "", "c": ""}, {"a": "", "b": "", "c": "x"}]


def test_examples_grouped_by_family():
    """Each example lies in the folder of its family, a section of the gallery with
    its own README.txt (the gallery lists no example outside a section)."""
    examples = sorted(EXAMPLES.rglob("plot_*.py"))
    assert examples
    for path in examples:
        assert path.parent.parent == EXAMPLES, path
        assert (path.parent / "README.txt").is_file(), path


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="needs matplotlib")
@pytest.mark.parametrize(
    "example",
    sorted(
        path.relative_to(EXAMPLES).as_posix() for path in EXAMPLES.rglob("plot_*.py")
    ),
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

"""The reproductions' figures in the docs are drawn from their committed tables.

``docs/_ext/reproduction_figures.py`` reads the CSV tables of each default run
back and calls the reproduction's own ``plot_*`` function; it is loaded here from
its path, as the documentation build loads it.
"""

import importlib.util
from pathlib import Path

import pytest

from sklearn_attn.experiments import write_csv

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "reproduction_figures", ROOT / "docs" / "_ext" / "reproduction_figures.py"
)
figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figures)


def test_tables_read_back_as_written(tmp_path):
    rows = [
        {"model": "RFA", "qk_bias": True, "n": 64, "error": 0.25, "n_needed": None},
        {"model": "RFMLP", "qk_bias": None, "n": 128, "error": 1e-17, "n_needed": 512},
    ]
    write_csv(rows, tmp_path / "rfa_degree.csv")
    write_csv(rows[:1], tmp_path / "rfa_biased.csv")
    (tmp_path / "other.csv").write_text("a\n1\n", encoding="utf-8")
    tables = figures.read_tables(tmp_path, "rfa")
    assert tables == {"biased": rows[:1], "degree": rows}


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_every_reproduction_has_committed_tables(name):
    _, prefix = figures.FIGURES[name]
    assert figures.read_tables(figures.RESULTS / name, prefix)


def test_figures_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    written = figures.draw_all(output=tmp_path)
    assert sorted(p.name for p in written) == sorted(
        f"{prefix}.png" for _, prefix in figures.FIGURES.values()
    )
    assert all(p.stat().st_size > 10_000 for p in written)

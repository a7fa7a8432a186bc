"""The reproductions' figures, drawn from their committed tables at build time.

``python -m sklearn_attn reproduce NAME`` writes its tables as CSV files and draws
its figure from them. The tables of each default run are committed with the
project's other results (see ``RESULTS``; the figures are not); when the
documentation is built, this extension reads those tables back and calls the same
``plot_*`` function of :mod:`sklearn_attn.experiments`, so the figure on each
reproduction's page is the one the command draws from those tables. Only plotting
is done: no experiment is run.

The figures are written to ``docs/generated/reproduce/PREFIX.png`` (``generated/``
is not committed) and included with ``.. figure:: /generated/reproduce/PREFIX.png``,
at twice the command's resolution: a page shows them scaled to its column, and a
reader who opens one at full size (or on a high-density screen) reads its small print.
"""

from __future__ import annotations

import csv
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "reproduce"
# Twice the 110 dpi at which the command saves them.
DPI = 220
OUTPUT = Path(__file__).resolve().parents[1] / "generated" / "reproduce"

# Folder of the committed run -> (plot function, file prefix), as in
# sklearn_attn.__main__._SPECS.
FIGURES = {
    "rfa": ("plot_rfa", "rfa"),
    "potts": ("plot_potts", "potts"),
    "mha": ("plot_mha", "mha"),
    "implicit-bias": ("plot_implicit_bias", "implicit_bias"),
}


def _cell(text):
    """A CSV cell as the value the reproduction wrote (``write_csv``'s inverse)."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_tables(folder, prefix):
    """``{table: rows}`` of the ``PREFIX_TABLE.csv`` files of a folder."""
    tables = {}
    for path in sorted(Path(folder).glob(f"{prefix}_*.csv")):
        with open(path, encoding="utf-8", newline="") as handle:
            rows = [
                {k: _cell(v) for k, v in row.items()} for row in csv.DictReader(handle)
            ]
        tables[path.stem[len(prefix) + 1 :]] = rows
    return tables


def draw_all(results=RESULTS, output=OUTPUT):
    """Draw every reproduction's figure; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_attn import experiments

    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (plot, prefix) in FIGURES.items():
        tables = read_tables(Path(results) / name, prefix)
        if not tables:
            raise FileNotFoundError(
                f"no {prefix}_*.csv tables in {Path(results) / name}"
            )
        path = output / f"{prefix}.png"
        fig = getattr(experiments, plot)(tables)
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def _builder_inited(app):
    draw_all()


def setup(app):
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

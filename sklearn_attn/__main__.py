"""Command line: ``python -m sklearn_attn demo``, ``reproduce NAME``, ``contacts``.

``reproduce NAME`` runs one paper reproduction with progress shown on standard
error, writes its tables as CSV and its figure as PNG under ``--out`` and
prints a summary table. ``demo`` runs the quick version of every reproduction,
then predicts the contacts of the bundled PF00014 alignment. ``contacts
ALIGNMENT`` predicts residue contacts from an alignment file (see
``sklearn_attn.contacts``).

``--scheduler ADDRESS`` (``reproduce`` and ``demo``) connects a
``dask.distributed.Client`` to a running scheduler and runs each reproduction's
grid of fits on that cluster, through joblib's ``dask`` backend; every task
carries its own seeds, so the tables are those of the local run.

New reproductions are added to ``_SPECS``: a name mapped to the names of its
``run_*``, ``format_*_summary`` and ``plot_*`` functions in
:mod:`sklearn_attn.experiments` and the prefix of its files (``REPRODUCTIONS``
holds their runners); their grids go
through ``sklearn_attn.experiments._common.run_tasks`` (or
:class:`sklearn.utils.parallel.Parallel`) to run on a cluster.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import sys
import time
from typing import NamedTuple

from ._console import CommandError, on_cluster

DEFAULT_OUT = "sklearn_attn_out"


class _Reproduction(NamedTuple):
    """A reproduction: its functions in :mod:`sklearn_attn.experiments`, and the
    prefix of its files (``PREFIX_TABLE.csv``, ``PREFIX.png``)."""

    run: str
    summary: str
    plot: str
    prefix: str
    # A table a study left out of the config has no rows; some studies write
    # every table all the same, so that their outputs always have the same files.
    write_empty_tables: bool


_SPECS = {
    "rfa": _Reproduction("run_rfa", "format_rfa_summary", "plot_rfa", "rfa", False),
    "potts": _Reproduction(
        "run_potts", "format_potts_summary", "plot_potts", "potts", True
    ),
    "mha": _Reproduction("run_mha", "format_mha_summary", "plot_mha", "mha", False),
    "implicit-bias": _Reproduction(
        "run_implicit_bias",
        "format_implicit_bias_summary",
        "plot_implicit_bias",
        "implicit_bias",
        True,
    ),
}


def _reproduce(spec, out_dir, *, quick, n_seeds, random_state, n_jobs):
    """Run a reproduction; returns its summary text, written paths and notes."""
    from . import experiments

    tables = getattr(experiments, spec.run)(
        quick=quick, n_seeds=n_seeds, random_state=random_state, n_jobs=n_jobs
    )
    written = [
        experiments.write_csv(rows, os.path.join(out_dir, f"{spec.prefix}_{table}.csv"))
        for table, rows in tables.items()
        if rows or spec.write_empty_tables
    ]
    notes = []
    figure = os.path.join(out_dir, f"{spec.prefix}.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        notes.append(
            "matplotlib is not installed: wrote only the CSV files (pip install "
            f"matplotlib, or sklearn-attn[plot], for {os.path.basename(figure)})."
        )
    else:
        getattr(experiments, spec.plot)(tables, figure)
        written.append(figure)
    return getattr(experiments, spec.summary)(tables), written, notes


# name -> runner(out_dir, quick, n_seeds, random_state, n_jobs)
#         -> (summary text, written paths, notes)
REPRODUCTIONS = {
    name: functools.partial(_reproduce, spec) for name, spec in _SPECS.items()
}


def _build_parser():
    from ._console import add_scheduler_option, positive_int
    from .contacts import add_parser as add_contacts_parser

    parser = argparse.ArgumentParser(
        prog="python -m sklearn_attn",
        description="Reproduce the experiments of the papers behind sklearn-attn. "
        "Progress goes to standard error; tables (CSV), figures (PNG) and a "
        "summary are written.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="quick versions of every reproduction, then the PF00014 contacts "
        "(100 s on two free cores, more on busy ones)",
        description="Run 'reproduce NAME --quick' for every reproduction, print "
        "their summary tables and say where the files went.",
    )
    demo.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: ./{DEFAULT_OUT})",
    )
    add_scheduler_option(demo)

    rep = sub.add_parser(
        "reproduce",
        help="reproduce one paper's experiments",
        description="Reproduce one paper's experiments, writing CSV tables and a "
        "PNG figure.",
    )
    rep.add_argument(
        "name",
        choices=sorted(REPRODUCTIONS),
        metavar="NAME",
        help="which reproduction: " + ", ".join(sorted(REPRODUCTIONS)),
    )
    rep.add_argument(
        "--quick",
        action="store_true",
        help="reduced settings: from about 10 s (rfa, implicit-bias) to 30 s "
        "(mha) on two free cores, more on busy ones",
    )
    rep.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: ./{DEFAULT_OUT})",
    )
    rep.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        metavar="K",
        help="number of repetitions (new data and weights each)",
    )
    rep.add_argument(
        "--random-state",
        type=int,
        default=0,
        metavar="SEED",
        help="master seed (default: 0)",
    )
    rep.add_argument(
        "--n-jobs",
        type=int,
        default=None,
        metavar="J",
        help="joblib workers over the reproduction's fits (default: None, one "
        "after another)",
    )
    rep.add_argument(
        "--run-json",
        action="store_true",
        help="also write DIR/run.json: the command, its wall time, the load "
        "average before and after, the library versions, the platform and the date",
    )
    add_scheduler_option(rep)
    add_contacts_parser(sub)
    return parser


def main(argv=None):
    """Run the command line.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    status : int
        0 on success, 1 when ``--scheduler`` cannot be used (no
        dask.distributed, no scheduler at the address). Invalid arguments
        exit through :class:`SystemExit` (status 2), as with any argparse
        program.
    """
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = _build_parser().parse_args(argv)
    if args.command == "contacts":
        return _run_contacts(args)
    out_dir = os.path.abspath(args.out)
    try:
        with on_cluster(args.scheduler):
            if args.command == "demo":
                for name in REPRODUCTIONS:
                    _run(
                        name,
                        out_dir,
                        quick=True,
                        n_seeds=None,
                        random_state=0,
                        n_jobs=None,
                    )
                _demo_contacts(os.path.join(out_dir, "contacts_pf00014"))
            else:
                _run(
                    args.name,
                    out_dir,
                    run_json=(
                        shlex.join(["python", "-m", "sklearn_attn", *argv])
                        if args.run_json
                        else None
                    ),
                    quick=args.quick,
                    n_seeds=args.seeds,
                    random_state=args.random_state,
                    n_jobs=args.n_jobs,
                )
    except CommandError as exc:
        print(f"sklearn-attn {args.command}: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _run_contacts(args):
    """``contacts``: input problems end the command with a message, not a trace."""
    try:
        return args.run(args)
    except (OSError, ValueError, ImportError, RuntimeError, MemoryError) as exc:
        # A missing file, a bad alignment or option, no CuPy or no GPU.
        print(f"sklearn-attn contacts: error: {exc}", file=sys.stderr)
        return 1


def _demo_contacts(out_dir):
    """Contacts of the bundled PF00014 alignment, scored against its structure."""
    from importlib import resources

    folder = resources.files("sklearn_attn.datasets") / "data" / "PF00014"
    with (
        resources.as_file(folder / "PF00014_mgap6.fasta.gz") as alignment,
        resources.as_file(folder / "PF00014_distances.tsv") as distances,
    ):
        args = _build_parser().parse_args(
            ["contacts", str(alignment), "--distances", str(distances), "-o", out_dir]
        )
        summary = args.predict(args)
    precision = summary["precision"]
    print(
        "contacts of PF00014 (Kunitz domain, 13,600 sequences, full Potts model): "
        "precision at L/5, L/2, L, 2L = "
        + ", ".join(f"{precision[k]:.3f}" for k in ("L/5", "L/2", "L", "2L"))
    )
    print(f"contacts took {summary['wall_time_s']:.0f} s; wrote:")
    for path in summary["files"] + [os.path.join(out_dir, "summary.json")]:
        print(f"  {path}")
    print()


def _load_average():
    return [round(load, 2) for load in os.getloadavg()]


def _write_run_json(path, *, command, files, seconds, load_before):
    """How a committed table was made, so that it can be made again and compared."""
    import platform

    import numpy
    import scipy
    import sklearn

    from . import __version__

    record = {
        "command": command,
        "tables": sorted(os.path.basename(f) for f in files if f.endswith(".csv")),
        "wall_seconds": round(seconds, 1),
        "load_average_1_5_15_before": load_before,
        "load_average_1_5_15_after": _load_average(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "sklearn": sklearn.__version__,
        "sklearn_attn": __version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")
    return path


def _run(name, out_dir, run_json=None, **options):
    """Run one reproduction; ``run_json`` is the command line to record in
    ``out_dir/run.json`` (None: no record)."""
    load_before = _load_average()
    start = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    summary, written, notes = REPRODUCTIONS[name](out_dir, **options)
    seconds = time.perf_counter() - start
    if run_json is not None:
        written.append(
            _write_run_json(
                os.path.join(out_dir, "run.json"),
                command=run_json,
                files=written,
                seconds=seconds,
                load_before=load_before,
            )
        )
    print(summary)
    print()
    for note in notes:
        print(note)
    quick = " --quick" if options["quick"] else ""
    print(f"reproduce {name}{quick} took {seconds:.0f} s; wrote:")
    for path in written:
        print(f"  {path}")
    print()
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

"""``python -m sklearn_attn contacts`` beside plmc, on the same families and settings.

Both fit plmDCA's model with plmc's protein settings (``-le 16 -lh 0.01 -t 0.2``,
at most 100 L-BFGS iterations; ours: ``--alpha-couplings 16 --alpha-fields 0.01
--identity 0.8 --max-iter 100``), one after the other in this script, each in a
process of its own under ``/usr/bin/time -v`` (wall time and peak resident
memory). The families: the bundled PF00014, and planted Potts models of
L = 100, 200 and 400 sites (n = 5,000 sequences, q = 21, couplings on a random
regular graph of degree 3; their contacts are the coupled pairs). The precision
of both at L and 2L is measured against the same contact map by
:func:`sklearn_attn.contacts.contact_precision`, plmc's from its coupling-scores
file (its APC-corrected scores). With ``--gaps-ignore`` both leave gapped sites
out of the model (plmc's ``-g``, our ``--gaps ignore``).

plmc is built from its public source (https://github.com/debbiemarkslab/plmc,
``make all-openmp``); give its binary with ``--plmc PATH``. Results in
``benchmarks/results/contacts_plmc.json``.

Usage::

    python benchmarks/bench_contacts_plmc.py --plmc /tmp/plmc/bin/plmc
    python benchmarks/bench_contacts_plmc.py --plmc ... --sizes 100 --quick
    python benchmarks/bench_contacts_plmc.py --plmc ... --sizes --gaps-ignore \
        --output benchmarks/results/contacts_plmc_gaps.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info  # noqa: E402

from sklearn_attn.contacts import contact_precision, read_distances  # noqa: E402
from sklearn_attn.datasets import make_potts_sequences  # noqa: E402
from sklearn_attn.potts import decode_sequences  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "contacts_plmc.json"
ROOT = Path(__file__).resolve().parents[1]


def _timed(command, cwd):
    """Exit status, wall seconds and peak resident memory (MB) of a command."""
    result = subprocess.run(
        ["/usr/bin/time", "-v", *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    report = result.stderr
    wall = re.search(
        r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", report
    )
    hours, minutes, seconds = (float(x) if x else 0.0 for x in wall.groups())
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)[1])
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed:\n{report[-2000:]}")
    return {
        "wall_s": 3600 * hours + 60 * minutes + seconds,
        "peak_rss_mb": peak * 1024 / 1e6,
        "stderr_tail": report.split("\tCommand being timed")[0][-400:],
    }


def _plmc_objective(stderr):
    """plmc's objective ``fx`` at its last iteration, from its progress table
    (``iter time cond fx -loglk ||h|| ||e||``)."""
    rows = [line.split() for line in stderr.splitlines()]
    rows = [row for row in rows if len(row) == 7 and row[0].isdigit()]
    return float(rows[-1][3]) if rows else None


def _plmc_scores(path, n_sites):
    """plmc's APC-corrected coupling scores as an (L, L) matrix."""
    scores = np.zeros((n_sites, n_sites))
    for line in Path(path).read_text().splitlines():
        i, _, j, _, _, score = line.split()
        scores[int(i) - 1, int(j) - 1] = scores[int(j) - 1, int(i) - 1] = float(score)
    return scores


def _our_scores(folder, n_sites):
    scores = np.zeros((n_sites, n_sites))
    for line in (folder / "contacts.ec").read_text().splitlines():
        i, _, j, _, _, score = line.split()
        scores[int(i) - 1, int(j) - 1] = scores[int(j) - 1, int(i) - 1] = float(score)
    return scores


def _planted(folder, n_sites, n_samples, seed=0):
    codes, params = make_potts_sequences(
        n_samples=n_samples,
        n_sites=n_sites,
        n_states=21,
        graph="random_regular",
        degree=3,
        random_state=seed,
    )
    sequences = decode_sequences(codes, alphabet="protein")
    alignment = folder / f"planted_L{n_sites}.fasta"
    alignment.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(sequences)))
    coupled = np.abs(params.couplings).sum(axis=(1, 3)) > 0
    i, j = np.triu_indices(n_sites, 1)
    distances = folder / f"planted_L{n_sites}_distances.tsv"
    distances.write_text(
        "".join(
            f"{a + 1} {b + 1} {1.0 if coupled[a, b] else 20.0}\n"
            for a, b in zip(i, j, strict=True)
        )
    )
    return alignment, distances


def _pf00014(folder):
    data = resources.files("sklearn_attn.datasets") / "data" / "PF00014"
    alignment = folder / "PF00014.fasta"
    alignment.write_bytes(
        gzip.decompress((data / "PF00014_mgap6.fasta.gz").read_bytes())
    )
    distances = folder / "PF00014_distances.tsv"
    distances.write_bytes((data / "PF00014_distances.tsv").read_bytes())
    return alignment, distances


def compare(plmc, name, alignment, distances, folder, max_iter, gaps_ignore=False):
    ec = folder / f"{name}.plmc.ec"
    ours_dir = folder / f"{name}.ours"
    plmc_run = _timed(
        [
            plmc,
            "-le",
            "16",
            "-lh",
            "0.01",
            "-t",
            "0.2",
            "-m",
            str(max_iter),
            "-n",
            str(os.cpu_count()),
            *(["-g"] if gaps_ignore else []),
            "-c",
            str(ec),
            str(alignment),
        ],
        folder,
    )
    ours_run = _timed(
        [
            sys.executable,
            "-m",
            "sklearn_attn",
            "contacts",
            str(alignment),
            "--alpha-couplings",
            "16",
            "--alpha-fields",
            "0.01",
            "--identity",
            "0.8",
            "--max-iter",
            str(max_iter),
            "--gaps",
            "ignore" if gaps_ignore else "state",
            "-q",
            "-o",
            str(ours_dir),
        ],
        folder,
    )
    summary = json.loads((ours_dir / "summary.json").read_text())
    n_sites = summary["L"]
    known = read_distances(distances)
    top = ("L", "2L")
    plmc_run["precision"] = contact_precision(
        _plmc_scores(ec, n_sites), *known, top=top
    )
    ours_run["precision"] = contact_precision(
        _our_scores(ours_dir, n_sites), *known, top=top
    )
    plmc_run["objective"] = _plmc_objective(plmc_run["stderr_tail"])
    ours_run["objective"] = summary["objective"]
    ours_run["algorithm"] = summary.get("algorithm", "dense")
    ours_run["iterations"] = summary["iterations"]
    ours_run["timings_s"] = summary["timings_s"]
    return {
        "family": name,
        "L": n_sites,
        "n_sequences": summary["sequences_kept"],
        "plmc": plmc_run,
        "ours": ours_run,
        "wall_ratio_ours_over_plmc": ours_run["wall_s"] / plmc_run["wall_s"],
        "memory_ratio_ours_over_plmc": ours_run["peak_rss_mb"]
        / plmc_run["peak_rss_mb"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plmc", required=True, help="path of the plmc binary")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 200, 400])
    parser.add_argument("--n-sequences", type=int, default=5000)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument(
        "--no-pf00014", action="store_true", help="the planted families only"
    )
    parser.add_argument(
        "--gaps-ignore",
        action="store_true",
        help="gapped sites as missing data (plmc -g, ours --gaps ignore)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS,
        help="where the results go (default: results/contacts_plmc.json)",
    )
    parser.add_argument("--quick", action="store_true", help="10 iterations, no file")
    args = parser.parse_args(argv)
    max_iter = 10 if args.quick else args.max_iter
    record = {
        "machine": machine_info(),
        "max_iter": max_iter,
        "gaps": "ignore" if args.gaps_ignore else "state",
        "families": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        families = [] if args.no_pf00014 else [("PF00014", *_pf00014(folder))]
        for n_sites in args.sizes:
            families.append(
                (f"planted_L{n_sites}", *_planted(folder, n_sites, args.n_sequences))
            )
        for name, alignment, distances in families:
            row = compare(
                args.plmc,
                name,
                alignment,
                distances,
                folder,
                max_iter,
                gaps_ignore=args.gaps_ignore,
            )
            record["families"].append(row)
            print(json.dumps({k: v for k, v in row.items()}, indent=1), flush=True)
    record["machine"]["load_average_after"] = machine_info()["load_average_1_5_15"]
    if not args.quick:
        args.output.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

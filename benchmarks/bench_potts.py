"""The contacts command against plmc on PF00014, and the factored model.

Measured in one run, on the shipped PF00014 alignment (13,600 sequences, L = 53,
q = 21) with plmc's settings (``-le 16 -lh 0.01``, 80% identity reweighting,
gap as a state):

* ``python -m sklearn_attn contacts`` as a user runs it (a subprocess: reading,
  weights, fit, writing, and the interpreter's start): wall time, peak memory
  above the interpreter's baseline (from its summary.json), plmc's objective in
  its own units against plmc's reference optimum 282,623.8, and the precision of
  contacts.csv at L/5, L/2, L, 2L;
* plmc itself, when ``--plmc PATH`` names a binary (built from
  debbiemarkslab/plmc with ``make all-openmp``), run as ``plmc -c scores -le 16.0
  -lh 0.01 -m 100 -t 0.2 -n 2``: wall time, peak memory (``wait4``), its last
  objective and the precision of its scores; the speed and memory targets are
  ratios to this same-run measurement (without a binary, to the 45.9 s and 92.5
  MB recorded in ``shared/data/README.md``);
* the factored model (``--model factored``) with ``--factored``: time,
  parameters and precision beside the full model's;
* one objective-and-gradient evaluation against its floating-point work at the
  float32 matrix-multiply rate measured in the same run;
* synthetic (L = 20, q = 10, one channel on a ring): the factored layer's test
  masked-token loss against the true conditional entropy, and the correlation
  of learned and planted couplings.

Usage::

    python benchmarks/bench_potts.py --plmc /path/to/plmc   # writes results/potts.json
    python benchmarks/bench_potts.py --quick                # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, matmul_rate  # noqa: E402

PLMC_OPTIMUM = 282_623.8
PLMC_RECORDED = {"seconds": 45.9, "peak_mb": 92.5, "objective": 282_944.0}
PLMC_PRECISION = {"L/5": 1.0, "L/2": 1.0, "L": 1.0, "2L": 0.821}


def _data_paths():
    from importlib import resources

    folder = resources.files("sklearn_attn.datasets") / "data" / "PF00014"
    return folder / "PF00014_mgap6.fasta.gz", folder / "PF00014_distances.tsv"


_TIME = "/usr/bin/time"


def _timed_child(command, **kwargs):
    """Run ``command``: wall time, peak memory (bytes), stderr, exit status.

    The peak comes from GNU time's ``%M`` where it exists: ``wait4``'s
    ``ru_maxrss`` would also count this (large) process, copied by the fork
    before the command started. Without it the peak is that upper bound.
    """
    use_time = os.access(_TIME, os.X_OK)
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = os.path.join(tmp, "peak")
        full = [_TIME, "-f", "%M", "-o", peak_file, *command] if use_time else command
        with open(os.path.join(tmp, "err"), "w+") as err:
            start = time.perf_counter()
            child = subprocess.Popen(
                full, stdout=subprocess.DEVNULL, stderr=err, **kwargs
            )
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - start
            err.seek(0)
            stderr = err.read()
        if use_time:
            with open(peak_file) as handle:
                peak = int(handle.read().split()[-1]) * 1024
        else:
            peak = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return seconds, peak, stderr, os.waitstatus_to_exitcode(status)


def _cli(workdir, model, extra=()):
    """The contacts command on PF00014, as a user runs it."""
    alignment, distances = _data_paths()
    out = Path(workdir) / f"contacts_{model}"
    command = [
        sys.executable,
        "-m",
        "sklearn_attn",
        "contacts",
        str(alignment),
        "--distances",
        str(distances),
        "--model",
        model,
        "--output-dir",
        str(out),
        *extra,
    ]
    seconds, peak, stderr, status = _timed_child(command, cwd=ROOT)
    if status != 0:
        raise RuntimeError(f"contacts failed:\n{stderr}")
    summary = json.loads((out / "summary.json").read_text())
    # Precision read back from the written contacts.csv, as a user would.
    from sklearn_attn.contacts import contact_precision, read_distances

    i, j, distance = read_distances(str(distances))
    scores = np.zeros((summary["L"], summary["L"]))
    with open(out / "contacts.csv") as handle:
        next(handle)
        for line in handle:
            a, b, _, _, score, _ = line.split(",")
            scores[int(a) - 1, int(b) - 1] = scores[int(b) - 1, int(a) - 1] = float(
                score
            )
    return {
        "command": " ".join(["python"] + command[1:]),
        "wall_seconds": seconds,
        "internal_wall_seconds": summary["wall_time_s"],
        "timings_s": summary["timings_s"],
        "peak_memory_mb_above_baseline": summary["peak_memory_mb"],
        "peak_memory_mb_whole_process": peak / 1e6,
        "iterations": summary["iterations"],
        "objective": summary["objective"],
        "relative_gap_to_plmc_optimum": summary["objective"] / PLMC_OPTIMUM - 1.0,
        "parameters": summary["parameters"],
        "precision_contacts_csv": contact_precision(scores, i, j, distance),
        "n_eff": summary["N_eff"],
    }


def _plmc(binary, workdir):
    """plmc with the issue's settings: wall time, peak memory, objective, precision."""
    import gzip

    from sklearn_attn.contacts import contact_precision, read_distances

    alignment, distances = _data_paths()
    fasta = Path(workdir) / "PF00014.fasta"
    fasta.write_bytes(gzip.decompress(Path(str(alignment)).read_bytes()))
    scores_path = Path(workdir) / "plmc_scores.txt"
    command = [
        binary,
        "-c",
        str(scores_path),
        "-le",
        "16.0",
        "-lh",
        "0.01",
        "-m",
        "100",
        "-t",
        "0.2",
        "-n",
        "2",
        str(fasta),
    ]
    seconds, peak, stderr, status = _timed_child(command)
    if status != 0:
        raise RuntimeError(f"plmc failed:\n{stderr}")
    # plmc's per-iteration lines: iter time cond fx -loglk ||h|| ||e||.
    rows = [
        line.split()
        for line in stderr.splitlines()
        if line.split() and line.split()[0].isdigit() and len(line.split()) == 7
    ]
    i, j, distance = read_distances(str(distances))
    table = np.loadtxt(scores_path, usecols=(0, 2, 5))
    L = int(table[:, 1].max())
    scores = np.zeros((L, L))
    a, b = table[:, 0].astype(int) - 1, table[:, 1].astype(int) - 1
    scores[a, b] = scores[b, a] = table[:, 2]
    return {
        "command": " ".join(command),
        "wall_seconds": seconds,
        "peak_memory_mb": peak / 1e6,
        "iterations": int(rows[-1][0]),
        "objective": float(rows[-1][3]),
        "precision": contact_precision(scores, i, j, distance),
    }


def _evaluation_timing(repeats, rate):
    from sklearn_attn.datasets import load_pf00014
    from sklearn_attn.potts import encode_sequences, sequence_weights
    from sklearn_attn.potts._estimator import _PRODUCT_DTYPE
    from sklearn_attn.potts._model import FullCouplings, OneHotRows, objective

    data = load_pf00014()
    codes = encode_sequences(data.sequences)
    weights = sequence_weights(codes, identity_threshold=0.8)
    unique, inverse = np.unique(codes, axis=0, return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=weights)
    n, L = unique.shape
    q = 21
    rows = OneHotRows(unique, weights, q, dtype=_PRODUCT_DTYPE)
    parametrization = FullCouplings(L, q)
    theta = 0.01 * np.random.default_rng(0).standard_normal(parametrization.n_params)
    objective(theta, parametrization, rows, 0.01, 16.0)  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        objective(theta, parametrization, rows, 0.01, 16.0)
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    dense = 4.0 * n * (L * q) ** 2
    return {
        "n_unique_sequences": n,
        "n_sites": L,
        "n_states": q,
        "product_dtype": np.dtype(_PRODUCT_DTYPE).name,
        "seconds_median": seconds,
        "seconds_all": times,
        "dense_flops": dense,
        "ratio_to_dense_flops_at_matmul_rate": seconds / (dense / rate),
    }


def _synthetic(quick):
    from sklearn_attn.experiments import run_potts

    tables = run_potts(quick=quick, n_seeds=1, random_state=0, real=False)
    rows = tables["synthetic"]
    largest = max(r["n_train"] for r in rows)
    at_largest = {r["parametrization"]: r for r in rows if r["n_train"] == largest}
    return {
        "rows": rows,
        "at_largest_n": at_largest,
        "targets": {
            "relative_excess_loss_at_most": 0.02,
            "coupling_correlation_at_least": 0.95,
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plmc", default=None, help="path of a plmc binary")
    parser.add_argument(
        "--factored", action="store_true", help="also run --model factored (slow)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "potts.json")
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 1
    rate = matmul_rate(dtype=np.float32)
    report = {
        "benchmark": "potts",
        "machine": machine_info(),
        "matmul_flops_per_s_float32": rate,
        "matmul_flops_per_s_float64": matmul_rate(),
        "plmc_optimum": PLMC_OPTIMUM,
        "plmc_recorded": {**PLMC_RECORDED, "precision": PLMC_PRECISION},
    }
    report["evaluation"] = _evaluation_timing(args.repeats, rate)
    print(
        f"evaluation: {report['evaluation']['seconds_median']:.3f} s", file=sys.stderr
    )
    with tempfile.TemporaryDirectory() as workdir:
        extra = ["--max-iter", "5"] if args.quick else []
        full = _cli(workdir, "full", extra)
        report["contacts_full"] = full
        print(f"contacts (full): {json.dumps(full)}", file=sys.stderr)
        if args.plmc:
            plmc = _plmc(args.plmc, workdir)
            report["plmc"] = plmc
            print(f"plmc: {json.dumps(plmc)}", file=sys.stderr)
        else:
            plmc = dict(PLMC_RECORDED, precision=PLMC_PRECISION)
        report["targets"] = {
            "plmc_measured_here": bool(args.plmc),
            "time_ratio_to_plmc": full["wall_seconds"] / plmc["wall_seconds"]
            if args.plmc
            else full["wall_seconds"] / PLMC_RECORDED["seconds"],
            "time_ratio_at_most": 0.5,
            "peak_memory_mb": full["peak_memory_mb_above_baseline"],
            "peak_memory_mb_at_most": plmc.get("peak_memory_mb", 92.5),
            "relative_gap_to_plmc_optimum": full["relative_gap_to_plmc_optimum"],
            "relative_gap_at_most": 1e-3,
            "precision": full["precision_contacts_csv"],
            "precision_at_least": PLMC_PRECISION,
        }
        if args.factored:
            extra = ["--max-iter", "5"] if args.quick else []
            factored = _cli(workdir, "factored", extra)
            report["contacts_factored"] = factored
            print(f"contacts (factored): {json.dumps(factored)}", file=sys.stderr)
    report["synthetic"] = _synthetic(args.quick)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["targets"], indent=2))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

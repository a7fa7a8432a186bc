"""The ``contacts`` command at scale: many families on a cluster, and a family too
long for memory refused before the work.

Two parts, results in ``benchmarks/results/contacts_scale.json``:

``families``
    Ten synthetic families (planted Potts models, q = 21) fitted one by one by
    ten commands, then by one command on a ``LocalCluster`` of two
    single-threaded workers (``--scheduler``). Records both wall times, their
    ratio, and whether every family's files are the same bytes.
``refusal``
    A FASTA alignment of 3,000 columns, whose full model needs about 222 GB:
    the command's exit status, its message and its wall time (reading the file
    and estimating), against the same command on a 60-column family stopped
    after one iteration (the smallest real fit), run in the same process.

Usage::

    python benchmarks/bench_contacts_scale.py           # about two minutes
    python benchmarks/bench_contacts_scale.py --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info  # noqa: E402

from sklearn_attn.__main__ import main  # noqa: E402
from sklearn_attn.datasets import make_potts_sequences  # noqa: E402
from sklearn_attn.potts import decode_sequences  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "contacts_scale.json"
FILES = ("contacts.csv", "contacts.ec", "couplings.npz")


def _write_family(path, seed, n_samples, n_sites):
    codes, _ = make_potts_sequences(
        n_samples=n_samples, n_sites=n_sites, n_states=21, random_state=seed
    )
    sequences = decode_sequences(codes, alphabet="protein")
    path.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(sequences)))
    return str(path)


def _command(*argv):
    """Exit status, standard error and wall time of one ``contacts`` command."""
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err):
        status = main(["contacts", *argv])
    return status, err.getvalue(), time.perf_counter() - start


def families(folder, n_families, n_samples, n_sites, max_iter):
    from dask.distributed import LocalCluster
    from threadpoolctl import threadpool_limits

    paths = [
        _write_family(folder / f"family{k}.fasta", k, n_samples, n_sites)
        for k in range(n_families)
    ]
    options = ["--max-iter", str(max_iter), "-q"]
    # Single-threaded BLAS in both runs: the workers are single-threaded, and
    # the files can only be the same bytes when the sums run in the same order.
    with threadpool_limits(1, user_api="blas"):
        start = time.perf_counter()
        for path in paths:
            status, err, _ = _command(
                path, *options, "-o", str(folder / "alone" / Path(path).stem)
            )
            assert status == 0, err
        one_by_one = time.perf_counter() - start
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        status, err, on_cluster = _command(
            *paths,
            *options,
            "-o",
            str(folder / "cluster"),
            "--scheduler",
            cluster.scheduler_address,
        )
    assert status == 0, err
    same = all(
        (folder / "alone" / Path(p).stem / name).read_bytes()
        == (folder / "cluster" / Path(p).stem / name).read_bytes()
        for p in paths
        for name in FILES
    )
    return {
        "n_families": n_families,
        "n_sequences": n_samples,
        "n_sites": n_sites,
        "max_iter": max_iter,
        "one_by_one_s": one_by_one,
        "cluster_2_workers_s": on_cluster,
        "speedup": one_by_one / on_cluster,
        "files_identical": same,
    }


def refusal(folder, n_sites=3000, n_sequences=200):
    rng = np.random.default_rng(0)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
    long_path = folder / "long.fasta"
    long_path.write_text(
        "".join(
            f">s{k}\n{''.join(rng.choice(letters, n_sites))}\n"
            for k in range(n_sequences)
        )
    )
    status, err, seconds = _command(str(long_path), "-o", str(folder / "long"))
    small = _write_family(folder / "small.fasta", 0, n_sequences, 60)
    _, _, reference = _command(small, "--max-iter", "1", "-q", "-o", str(folder / "s"))
    return {
        "n_sites": n_sites,
        "n_sequences": n_sequences,
        "exit_status": status,
        "message": err.strip().splitlines()[-1],
        "refusal_s": seconds,
        "reference_fit_L60_one_iteration_s": reference,
        "nothing_written": not (folder / "long").exists(),
    }


def main_(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    sizes = (4, 200, 20, 5) if args.quick else (10, 1000, 40, 30)
    record = {"machine": machine_info()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        record["families"] = families(folder, *sizes)
        print(json.dumps(record["families"], indent=2))
        record["refusal"] = refusal(folder)
        print(json.dumps(record["refusal"], indent=2))
    record["machine"]["load_average_after"] = machine_info()["load_average_1_5_15"]
    if not args.quick:
        RESULTS.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main_()

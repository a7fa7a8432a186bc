"""What random-feature attention learns, against the claims of Fu et al. (2023).

The study is that of ``python -m sklearn_attn reproduce rfa``
(:func:`sklearn_attn.experiments.run_rfa`, one implementation); this script
runs it with longer settings, in three parts:

1. **long**: the reproduction's studies with 5 seeds and training sizes up to
   2048 in the degree, BiasedRFA, mean-scale and softmax studies (8192
   trained weights per model, four times the largest size).
2. **scaling_d16**: the sample-complexity study at ``d = 16`` for RFA, with
   training sizes up to 8192 and 32768 trained weights: the cells that the
   default run (sizes up to 2048) leaves above its grid.
3. **width**: the default sample-complexity study at ``d = 4, 8`` with twice
   the width (16384 trained weights, eight times the largest size): where its
   ``n*`` equals the default run's, the width did not decide it.

Usage::

    python benchmarks/bench_rfa_claims.py --n-jobs 2   # all three parts
    python benchmarks/bench_rfa_claims.py --parts width
    python benchmarks/bench_rfa_claims.py --quick      # reproduce rfa --quick

Results go to ``benchmarks/results/rfa_claims.json`` (``--out``): per part the
settings, the tables and the wall time, with the machine and the
matrix-multiply rate of the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, matmul_rate  # noqa: E402

from sklearn_attn.experiments import (  # noqa: E402
    default_config,
    format_rfa_summary,
    run_rfa,
)

_SIZES = (64, 128, 256, 512, 1024, 2048)
# The longer settings, as overrides of reproduce rfa's defaults, per part.
PARTS = {
    "long": {
        "n_seeds": 5,
        "degree": {"width": 8192, "train_sizes": _SIZES},
        "scaling": None,
        "biased": {"width": 8192, "train_sizes": _SIZES},
        "mean_scale": {"width": 8192, "train_sizes": (256, 1024, 2048)},
        "softmax": {
            "width": 8192,
            "train_sizes": (256, 1024, 2048),
            "temperature_train_sizes": (2048,),
        },
    },
    "scaling_d16": {
        "degree": None,
        "scaling": {
            "token_dims": (16,),
            "models": ("RFA",),
            "width": 32768,
            "train_sizes": (*_SIZES, 4096, 8192),
        },
        "biased": None,
        "mean_scale": None,
        "softmax": None,
    },
    "width": {
        "degree": None,
        "scaling": {"token_dims": (4, 8), "width": 16384},
        "biased": None,
        "mean_scale": None,
        "softmax": None,
    },
}


def settings(part, quick=False):
    """The settings of one part: ``reproduce rfa --quick``'s, or the longer ones."""
    config = default_config(quick)
    if not quick:
        for key, value in PARTS[part].items():
            config[key] = {**config[key], **value} if isinstance(value, dict) else value
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the settings of reproduce rfa --quick"
    )
    parser.add_argument(
        "--parts", nargs="+", choices=sorted(PARTS), default=list(PARTS)
    )
    parser.add_argument("--n-jobs", type=int, default=None, help="joblib workers")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "rfa_claims.json",
    )
    args = parser.parse_args(argv)
    parts = ["quick"] if args.quick else args.parts
    results = {"n_jobs": args.n_jobs, "machine": machine_info(), "parts": {}}
    if args.out.exists() and not args.quick:
        # Parts run separately are collected in one file.
        results["parts"] = json.loads(args.out.read_text()).get("parts", {})
    for part in parts:
        config = settings(part, quick=args.quick)
        load_before = machine_info()["load_average_1_5_15"]
        start = time.perf_counter()
        tables = run_rfa(quick=args.quick, config=config, n_jobs=args.n_jobs)
        seconds = time.perf_counter() - start
        results["parts"][part] = {
            "config": config,
            "total_seconds": seconds,
            "load_average_before": load_before,
            "load_average_after": machine_info()["load_average_1_5_15"],
            "tables": tables,
        }
        print(f"== {part} ({seconds:.0f} s)\n{format_rfa_summary(tables)}\n")
    results["matmul_flops"] = matmul_rate()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

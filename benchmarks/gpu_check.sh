#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA GPU (issue 5).
#
#   bash benchmarks/gpu_check.sh OUTPUT_DIR [--quick]
#
# Runs from the checkout without installing anything (PYTHONPATH=.), on a
# Python that already has CuPy, NumPy, SciPy, scikit-learn, joblib and pytest,
# and needs no network. Within 8 minutes it
#   1. records the GPU (nvidia-smi) and the Python packages, and checks that
#      the package imports and fits on the GPU at all (else it stops),
#   2. runs the tests marked `gpu` (CPU and GPU results agree, GridSearchCV with
#      device="cuda", GPU-fitted pickles predict on the CPU, memory released),
#   3. runs benchmarks/bench_gpu.py --device cuda: the RFA fit at n = 100,000,
#      4096 heads, float32, and the per-iteration times of the attention
#      learner and the Potts model, with ratios against the committed CPU
#      reference benchmarks/results/gpu_cpu_reference.json,
# and writes everything into OUTPUT_DIR (at most 6 files). Each step has its own
# time limit (10 + 20 + 60 + 160 + 200 s, plus 15 s grace for the last two:
# 480 s at most), so a hung step cannot eat the others' time; the exit status
# is non-zero when any step failed. --quick runs the benchmarks at smoke-test sizes.
set -u
out=${1:?usage: bash benchmarks/gpu_check.sh OUTPUT_DIR [--quick]}
quick=${2:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
status=0

{
    timeout 10 nvidia-smi || echo "nvidia-smi failed"
    timeout 20 "$python" -c "import sys, numpy, scipy, sklearn, cupy; print(sys.version); \
print('numpy', numpy.__version__, 'scipy', scipy.__version__, \
'sklearn', sklearn.__version__, 'cupy', cupy.__version__); \
print('devices', cupy.cuda.runtime.getDeviceCount())"
} >"$out/environment.txt" 2>&1 || status=1

# Preflight: the package imports and one tiny fit runs on the GPU (this also
# starts CUDA, cuBLAS and cuSOLVER). If that fails nothing else can work, so
# stop here and keep the time.
if ! timeout 60 "$python" -c "
import numpy as np
from sklearn_attn import RandomFeatureAttentionRegressor
X = np.random.default_rng(0).standard_normal((64, 4, 3))
model = RandomFeatureAttentionRegressor(n_heads=8, device='cuda').fit(X, X[:, 0, 0])
print('preflight ok:', model.predict(X[:2]))
" >"$out/preflight.log" 2>&1; then
    cat "$out/preflight.log"
    echo "gpu_check.sh: preflight failed; see $out/preflight.log"
    exit 1
fi

# The gpu-marked tests only (the fake-CuPy runs of the same tests run in CI).
# SIGINT first, so that pytest still writes its summary and junit file.
timeout -s INT -k 15 160 "$python" -m pytest -m gpu -q -p no:cacheprovider \
    -o addopts="" --junitxml="$out/gpu_tests.xml" \
    tests/test_devices.py tests/test_backend.py >"$out/gpu_tests.log" 2>&1 || status=1
tail -n 3 "$out/gpu_tests.log"

# The benchmark rewrites its JSON after every stage: a time limit loses only
# the stage it interrupts.
timeout -s INT -k 15 200 "$python" benchmarks/bench_gpu.py --device cuda $quick \
    --output "$out/gpu_bench.json" >"$out/gpu_bench.log" 2>&1 || status=1
tail -n 5 "$out/gpu_bench.log"

echo "gpu_check.sh finished with status $status; results in $out"
exit $status

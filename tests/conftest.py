import os

import _fake_cupy
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# -- seeds ---------------------------------------------------------------------------
# As in scikit-learn: every statistical test takes ``global_random_seed`` and must
# pass for every seed in 0-99. The default run uses one fixed seed; the sweep is
# SKLEARN_ATTN_TESTS_GLOBAL_RANDOM_SEED=all (0-99), a range "0-9" or one seed "7".
SEED_ENV = "SKLEARN_ATTN_TESTS_GLOBAL_RANDOM_SEED"
SEED_RANGE = range(100)
DEFAULT_SEED = 42


def _seeds_from_env(value):
    if value is None or value.strip() == "":
        return [DEFAULT_SEED]
    value = value.strip()
    if value == "all":
        return list(SEED_RANGE)
    try:
        if "-" in value:
            start, stop = (int(part) for part in value.split("-"))
            seeds = list(range(start, stop + 1))
        else:
            seeds = [int(value)]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < SEED_RANGE.start or max(seeds) >= SEED_RANGE.stop:
        raise ValueError(
            f"{SEED_ENV} must be an integer in 0-99, a range such as 0-99 with "
            f"start <= stop, or 'all'; got {value!r}."
        )
    return seeds


def pytest_generate_tests(metafunc):
    if "global_random_seed" in metafunc.fixturenames:
        metafunc.parametrize(
            "global_random_seed", _seeds_from_env(os.environ.get(SEED_ENV))
        )


def pytest_report_header(config):
    return f"{SEED_ENV}: {_seeds_from_env(os.environ.get(SEED_ENV))}"


# -- Hypothesis profiles -------------------------------------------------------------
# "ci" (the default) is derandomised and bounded, so a run is the same on every
# machine and its length is known; no deadline, as shared machines are slow at times.
# "dev" draws fresh examples, ten times as many: HYPOTHESIS_PROFILE=dev, or
# ``python -m pytest --hypothesis-profile=dev``.
settings.register_profile(
    "ci",
    max_examples=50,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    parent=settings.get_profile("ci"),
    max_examples=500,
    derandomize=False,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` unless CuPy sees a CUDA device."""
    try:
        import cupy

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture
def tokens():
    """Small 3-D token data: 60 samples, a query and 5 keys in R^4."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 6, 4))
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / 5 + 0.1 * rng.standard_normal(60)
    return X, y


@pytest.fixture(params=["fake", pytest.param("cupy", marks=pytest.mark.gpu)])
def cupy(request, monkeypatch):
    """CuPy on a GPU machine; everywhere, also the NumPy-backed fake of ``_fake_cupy``.

    The fake is as strict as CuPy about host/device mixing, so the device code
    paths are exercised on every CI run; the real one checks them on a GPU.
    """
    if request.param == "fake":
        return _fake_cupy.install(monkeypatch)
    import cupy

    return cupy

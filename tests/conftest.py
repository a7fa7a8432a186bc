import _fake_cupy
import numpy as np
import pytest


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

"""Device dispatch, on a machine with or without CuPy."""

import importlib.util
import pickle

import _fake_cupy
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn import RandomFeatureAttentionRegressor
from sklearn_attn._backend import (
    Device,
    LowerGram,
    is_device_array,
    resolve_device,
    to_device,
    to_host,
    to_output,
)

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def test_none_follows_numpy_input():
    device = resolve_device(None, np.zeros(3), [1, 2])
    assert device == Device("cpu") and device.xp is np


def test_cpu_device():
    assert resolve_device("cpu").kind == "cpu"


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda:-1", "CPU"])
def test_unknown_device_string(device):
    with pytest.raises(
        ValueError, match="device must be None, 'cpu', 'cuda' or 'cuda:N'"
    ):
        resolve_device(device)


def test_device_of_wrong_type():
    with pytest.raises(TypeError, match="device must be"):
        resolve_device(0)


@pytest.mark.skipif(HAS_CUPY, reason="checks the message shown without CuPy")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_cupy_says_how_to_install(device):
    with pytest.raises(ImportError, match=r"pip install 'sklearn-attn\[gpu\]'"):
        resolve_device(device)


@pytest.mark.skipif(HAS_CUPY, reason="checks the message shown without CuPy")
def test_estimator_with_cuda_without_cupy(tokens):
    X, y = tokens
    with pytest.raises(ImportError, match="sklearn-attn\\[gpu\\]"):
        RandomFeatureAttentionRegressor(n_heads=5, device="cuda").fit(X, y)


def test_host_round_trip():
    a = np.arange(4.0)
    assert to_host(a) is a
    assert to_device(a, Device("cpu")) is a
    assert not is_device_array(a)


def test_pickle_has_no_device_cache(tokens):
    X, y = tokens
    model = RandomFeatureAttentionRegressor(n_heads=5, random_state=0).fit(X, y)
    model._device_cache = {("coef_", "cuda", 0): object()}  # as a GPU fit leaves it
    state = pickle.loads(pickle.dumps(model)).__dict__
    assert "_device_cache" not in state
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(model)).predict(X), model.predict(X)
    )


def test_cuda_resolves_with_a_device(monkeypatch):
    _fake_cupy.install(monkeypatch)
    assert resolve_device("cuda") == Device("cuda", 0)
    assert resolve_device("cuda:0").xp.is_fake
    with pytest.raises(ValueError, match=r"cuda:3.*only 1 CUDA device"):
        resolve_device("cuda:3")


def test_cuda_without_a_device_says_how_to_use_the_cpu(monkeypatch):
    cupy = _fake_cupy.install(monkeypatch)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 0)
    with pytest.raises(RuntimeError, match=r"no CUDA device.*set_params"):
        resolve_device("cuda")

    def broken_driver():
        raise OSError("CUDA driver version is insufficient")

    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", broken_driver)
    with pytest.raises(RuntimeError, match=r"insufficient.*sklearn-attn\[gpu\]"):
        resolve_device("cuda")


def test_none_follows_cupy_input(monkeypatch):
    cupy = _fake_cupy.install(monkeypatch)
    device = resolve_device(None, np.zeros(2), cupy.zeros(3))
    assert device == Device("cuda", 0, return_device_arrays=True)
    moved = to_device(np.arange(3.0), device)
    assert is_device_array(moved)
    assert_array_equal(to_host(moved), np.arange(3.0))
    assert to_output(moved, Device("cpu")).__class__ is np.ndarray


def test_fake_cupy_is_as_strict_as_cupy(monkeypatch):
    """The fake must fail where CuPy fails, or the device tests prove nothing."""
    cupy = _fake_cupy.install(monkeypatch)
    a = cupy.arange(3.0)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="mixing NumPy and CuPy"):
        a + np.ones(3)
    with pytest.raises(TypeError, match="mixing NumPy and CuPy"):
        cupy.matmul(a, np.ones(3))
    assert is_device_array(a.sum())  # reductions stay on the device
    assert np.isfinite(cupy.linalg.cholesky(-cupy.eye(2)).get()).all()  # silent
    import scipy.linalg

    with pytest.raises(TypeError):
        scipy.linalg.cho_factor(cupy.eye(2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("fake", [False, True])
def test_lower_gram_matches_products(monkeypatch, dtype, order, fake):
    rng = np.random.default_rng(0)
    blocks = [np.asarray(rng.standard_normal((7, 4)), dtype=dtype, order=order)]
    blocks.append(np.asarray(rng.standard_normal((7, 3)), dtype=dtype, order=order))
    device = Device()
    if fake:
        _fake_cupy.install(monkeypatch)
        device = Device("cuda", 0)
    gram = LowerGram(7, device)
    for block in blocks:
        gram.add(to_device(block, device))
    u, v = rng.standard_normal(7), rng.standard_normal(7)
    full = sum(b.astype(np.float64) @ b.T.astype(np.float64) for b in blocks)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert_allclose(to_host(gram.matvec(to_device(u, device))), full @ u, rtol=tol)
    gram.rank2_update(0.5, to_device(u, device), to_device(v, device))
    expected = full + 0.5 * (np.outer(u, v) + np.outer(v, u))
    result = to_host(gram.symmetric())
    assert result.dtype == np.float64
    assert_allclose(result, expected, rtol=tol, atol=tol)


def test_chunking_follows_the_device(monkeypatch):
    cpu = Device()
    assert cpu.chunk_length(32, 1000) == 32
    with cpu.workers(2) as workers:
        assert workers.n_threads == 2
    with cpu.workers(1) as workers:
        assert workers is None
    _fake_cupy.install(monkeypatch)
    gpu = Device("cuda", 0)
    assert gpu.chunk_length(32, 1000) == 1000  # one launch per block
    with gpu.workers() as workers, gpu.limit_blas(1):
        assert workers is None


def test_device_cholesky_failure_raises(monkeypatch):
    """CuPy's silent Cholesky failure must reach the ridge's eigen fallback."""
    from sklearn_attn._backend import cholesky_solve

    _fake_cupy.install(monkeypatch)
    device = Device("cuda", 0)
    indefinite = to_device(np.diag([1.0, -1.0]), device)
    with pytest.raises(np.linalg.LinAlgError):
        cholesky_solve(indefinite, to_device(np.ones((2, 1)), device), device)
    spd = to_device(np.array([[2.0, 1.0], [1.0, 2.0]]), device)
    x = cholesky_solve(spd, to_device(np.array([[3.0], [3.0]]), device), device)
    assert_allclose(to_host(x), [[1.0], [1.0]])

"""Device dispatch, on a machine with or without CuPy."""

import importlib.util
import pickle

import _fake_cupy
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn import RandomFeatureAttentionRegressor
from sklearn_attn._backend import (
    CholeskyFactor,
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


def test_fake_cupy_is_as_strict_as_cupy(cupy):
    """The fake must fail where CuPy fails, or the device tests prove nothing;
    on a GPU this checks the same claims against CuPy itself."""
    import scipy.linalg

    a = cupy.arange(3.0)
    with pytest.raises(TypeError):
        np.asarray(a)
    with pytest.raises(TypeError):
        a + np.ones(3)
    with pytest.raises(TypeError):
        cupy.matmul(a, np.ones(3))
    with pytest.raises(TypeError):
        scipy.linalg.cho_factor(cupy.eye(2))
    assert is_device_array(a.sum())  # reductions stay on the device
    assert cupy.asarray(a) is a  # no copy of a device array
    # CuPy's default: no error from a failed factorisation ...
    cupy.linalg.cholesky(-cupy.eye(2))
    # ... unless asked for.
    import cupyx

    with cupyx.errstate(linalg="raise"), pytest.raises(np.linalg.LinAlgError):
        cupy.linalg.cholesky(-cupy.eye(2))


def _lower_gram_case(dtype, order, device):
    rng = np.random.default_rng(0)
    blocks = [np.asarray(rng.standard_normal((7, 4)), dtype=dtype, order=order)]
    blocks.append(np.asarray(rng.standard_normal((7, 3)), dtype=dtype, order=order))
    gram = LowerGram(7, device)
    for block in blocks:
        gram.add(to_device(block, device))
    expected = sum(b.astype(np.float64) @ b.T.astype(np.float64) for b in blocks)
    result = to_host(gram.symmetric())
    assert result.dtype == np.float64
    tol = 1e-12 if dtype == np.float64 else 1e-6
    assert_allclose(result, expected, rtol=tol, atol=tol)
    # Adding after completing the matrix keeps both triangles right.
    gram.add(to_device(blocks[0], device))
    expected += blocks[0].astype(np.float64) @ blocks[0].T.astype(np.float64)
    assert_allclose(to_host(gram.symmetric()), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_lower_gram_matches_products(dtype, order):
    _lower_gram_case(dtype, order, Device())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_lower_gram_matches_products_on_device(cupy, dtype, order):
    _lower_gram_case(dtype, order, Device("cuda", 0))


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


def test_failed_cholesky_leaves_the_matrix_unchanged():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 3))
    matrix = np.asfortranarray(a @ a.T - 0.1 * np.eye(6))  # indefinite
    before = matrix.copy()
    with pytest.raises(np.linalg.LinAlgError):
        CholeskyFactor(matrix, Device())
    assert_array_equal(matrix, before)


def test_device_cholesky_failure_raises(cupy):
    """CuPy's silent Cholesky failure must raise, to reach the eigen fallback."""
    device = Device("cuda", 0)
    indefinite = to_device(np.diag([1.0, -1.0]), device)
    with pytest.raises(np.linalg.LinAlgError):
        CholeskyFactor(indefinite, device)
    spd = to_device(np.array([[2.0, 1.0], [1.0, 2.0]]), device)
    x = CholeskyFactor(spd, device).solve(to_device(np.array([[3.0], [3.0]]), device))
    assert_allclose(to_host(x), [[1.0], [1.0]])

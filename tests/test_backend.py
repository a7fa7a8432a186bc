"""Device dispatch, on a machine with or without CuPy."""

import importlib.util
import pickle

import numpy as np
import pytest

from sklearn_attn import RandomFeatureAttentionRegressor
from sklearn_attn._backend import (
    Device,
    is_device_array,
    resolve_device,
    to_device,
    to_host,
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


@pytest.mark.gpu
def test_gpu_and_cpu_predictions_agree(tokens):  # pragma: no cover - needs a GPU
    import cupy

    X, y = tokens
    cpu = RandomFeatureAttentionRegressor(n_heads=50, random_state=0).fit(X, y)
    gpu = RandomFeatureAttentionRegressor(n_heads=50, random_state=0, device="cuda")
    gpu.fit(X, y)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), rtol=1e-6, atol=1e-8)
    out = (
        RandomFeatureAttentionRegressor(n_heads=50, random_state=0)
        .fit(cupy.asarray(X), y)
        .predict(cupy.asarray(X))
    )
    assert is_device_array(out)
    restored = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(
        restored.predict(X), cpu.predict(X), rtol=1e-6, atol=1e-8
    )

"""A stand-in for CuPy that computes with NumPy, to run the GPU code paths on a CPU.

Installing it (see :func:`install`) makes ``import cupy`` return a module whose
arrays live in "device memory" the way CuPy's do, strictly:

* converting one implicitly to NumPy (``np.asarray``, SciPy, ``__array__``)
  raises ``TypeError``, as CuPy does; ``.get()`` or ``cupy.asnumpy`` copies;
* mixing one with a NumPy array in an operation raises ``TypeError``;
* reductions return 0-d device arrays, not NumPy scalars;
* ``cupy.linalg.cholesky`` returns a finite wrong factor instead of raising on
  a matrix that is not positive definite (CuPy's default), and raises
  ``LinAlgError`` only inside ``cupyx.errstate(linalg="raise")``.

Everything else is NumPy, so results match the CPU path up to the order of
operations. The real CuPy is used instead on a machine with a GPU (tests marked
``gpu``); this module is what lets CI check the device branches without one.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import numpy.lib.mixins


class _DeviceId:
    def __init__(self, id=0):
        self.id = id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


def _reject_host(value, where):
    if isinstance(value, np.ndarray):
        raise TypeError(
            f"Unsupported type {type(value)} in {where}: mixing NumPy and CuPy "
            "arrays (fake CuPy is as strict as CuPy)."
        )


def _unwrap(value, where):
    """Replace fake device arrays by their NumPy data; reject host arrays."""
    if isinstance(value, ndarray):
        return value._data
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, where) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v, where) for k, v in value.items()}
    _reject_host(value, where)
    return value


def _wrap(value):
    if isinstance(value, np.ndarray):
        return ndarray(value)
    if isinstance(value, np.generic) and not isinstance(value, np.dtype):
        return ndarray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class ndarray(numpy.lib.mixins.NDArrayOperatorsMixin):
    """An array "on the GPU": NumPy data that refuses implicit host conversion."""

    __module__ = "cupy"
    __array_priority__ = 100

    def __init__(self, data):
        self._data = data

    # -- what CuPy forbids ---------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        where = f"numpy.{ufunc.__name__}"
        out = kwargs.get("out")
        args = _unwrap(inputs, where)
        kwargs = _unwrap(kwargs, where)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        where = f"numpy.{func.__name__}"
        return _wrap(func(*_unwrap(args, where), **_unwrap(kwargs, where)))

    # -- data access ---------------------------------------------------------------
    def get(self):
        return self._data.copy()

    @property
    def device(self):
        return _DeviceId(0)

    def __getitem__(self, key):
        return _wrap(self._data[_unwrap_index(key)])

    def __setitem__(self, key, value):
        self._data[_unwrap_index(key)] = _unwrap(value, "__setitem__")

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (_wrap(row) for row in self._data)

    def __float__(self):
        return float(self._data)

    def __int__(self):
        return int(self._data)

    def __bool__(self):
        return bool(self._data)

    def __repr__(self):
        return f"fake_cupy.{self._data!r}"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._data, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args, **kwargs):
            where = f"ndarray.{name}"
            return _wrap(attr(*_unwrap(args, where), **_unwrap(kwargs, where)))

        return method

    # Attributes NDArrayOperatorsMixin or __getattr__ would get wrong.
    @property
    def T(self):
        return ndarray(self._data.T)

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def flags(self):
        return self._data.flags

    def tolist(self):
        return self._data.tolist()

    def item(self):
        return self._data.item()


def _unwrap_index(key):
    # Stricter than CuPy, which copies host index arrays to the device on every
    # call: refusing them keeps the code under test free of those copies.
    if isinstance(key, ndarray):
        return key._data
    if isinstance(key, tuple):
        return tuple(_unwrap_index(k) for k in key)
    _reject_host(key, "indexing")
    return key


# -- module functions ----------------------------------------------------------------

_FROM_HOST = {"asarray", "array", "asanyarray"}


def _device_function(name, func):
    def call(*args, **kwargs):
        if name in _FROM_HOST:
            source = args[0]
            args = tuple(a._data if isinstance(a, ndarray) else a for a in args)
            data = (np.array if name == "array" else func)(*args, **kwargs)
            if isinstance(source, ndarray) and data is source._data:
                return source  # like CuPy: asarray of a device array is itself
            if data is args[0]:
                data = data.copy()  # host to device is always a copy
            return ndarray(np.asarray(data))
        where = f"cupy.{name}"
        return _wrap(func(*_unwrap(args, where), **_unwrap(kwargs, where)))

    call.__name__ = name
    return call


def _numpy_namespace(name, source):
    module = types.ModuleType(name)

    def __getattr__(attr):
        value = getattr(source, attr)
        if callable(value) and not isinstance(value, type):
            return _device_function(attr, value)
        return value

    module.__getattr__ = __getattr__
    return module


class _MemoryPool:
    def __init__(self):
        self.n_frees = 0

    def free_all_blocks(self):
        self.n_frees += 1

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0


_LINALG_ERRORS = ["ignore"]  # cupyx.errstate(linalg=...) setting, innermost last


class _errstate:
    def __init__(self, linalg=None):
        self.linalg = linalg

    def __enter__(self):
        _LINALG_ERRORS.append(self.linalg or _LINALG_ERRORS[-1])

    def __exit__(self, *exc):
        _LINALG_ERRORS.pop()
        return False


def _cholesky(matrix):
    # CuPy's default ignores cuSOLVER's status: a failed factorisation returns
    # finite garbage (a partial factor). Only errstate(linalg="raise") raises.
    try:
        return ndarray(np.linalg.cholesky(matrix._data))
    except np.linalg.LinAlgError:
        if _LINALG_ERRORS[-1] == "raise":
            raise
        return ndarray(np.tril(np.ones(matrix.shape)))


def _eigh(matrix, UPLO="L"):
    return _wrap(np.linalg.eigh(matrix._data, UPLO=UPLO))


def _solve_triangular(a, b, trans=0, lower=False, **kwargs):
    import scipy.linalg

    return ndarray(
        scipy.linalg.solve_triangular(
            _unwrap(a, "solve_triangular"),
            _unwrap(b, "solve_triangular"),
            trans=trans,
            lower=lower,
        )
    )


def _syrk(trans, a, out=None, alpha=1.0, beta=0.0, lower=False):
    # cupy.cublas.syrk: alpha * a @ a.T (trans="N") or a.T @ a (trans="T"),
    # written to one triangle of out; the other triangle is left as it was.
    assert a.ndim == 2  # CuPy asserts these too
    assert out is None or (out.dtype == a.dtype and out.ndim == 2)
    data = a._data
    product = alpha * (data @ data.T if trans in ("N", 0) else data.T @ data)
    triangle = np.tril if lower else np.triu
    if out is None:
        return ndarray(triangle(product).astype(data.dtype))
    mask = triangle(np.ones(product.shape, dtype=bool))
    out._data[mask] = (beta * out._data + product)[mask]
    return out


def build():
    """Return the fake ``cupy`` module and its ``cupyx`` companions by name."""
    cupy = _numpy_namespace("cupy", np)
    cupy.ndarray = ndarray
    cupy.asnumpy = lambda a: a.get() if isinstance(a, ndarray) else np.asarray(a)
    cupy.get_array_module = lambda *arrays: cupy
    pool = _MemoryPool()
    cupy.get_default_memory_pool = lambda: pool
    cupy.linalg = _numpy_namespace("cupy.linalg", np.linalg)
    cupy.linalg.cholesky = _cholesky
    cupy.linalg.eigh = _eigh
    cupy.__version__ = "0+fake"
    cupy.cuda = types.SimpleNamespace(
        Device=_DeviceId,
        runtime=types.SimpleNamespace(
            getDeviceCount=lambda: 1,
            getDeviceProperties=lambda index: {
                "name": b"fake CuPy on NumPy",
                "totalGlobalMem": 0,
                "multiProcessorCount": 0,
            },
            runtimeGetVersion=lambda: 0,
            driverGetVersion=lambda: 0,
        ),
    )
    cupy.cublas = types.ModuleType("cupy.cublas")
    cupy.cublas.syrk = _syrk
    cupy.is_fake = True

    cupyx = types.ModuleType("cupyx")
    cupyx.errstate = _errstate
    cupyx_scipy = types.ModuleType("cupyx.scipy")
    cupyx_linalg = types.ModuleType("cupyx.scipy.linalg")
    cupyx_linalg.solve_triangular = _solve_triangular
    cupyx.scipy = cupyx_scipy
    cupyx_scipy.linalg = cupyx_linalg
    return {
        "cupy": cupy,
        "cupy.cublas": cupy.cublas,
        "cupyx": cupyx,
        "cupyx.scipy": cupyx_scipy,
        "cupyx.scipy.linalg": cupyx_linalg,
    }


def install(monkeypatch):
    """Make ``import cupy`` return the fake for the rest of the test."""
    modules = build()
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return modules["cupy"]

"""Device and array namespace: NumPy on the CPU, CuPy on a CUDA GPU.

This is the only module that knows about CuPy. Estimators ask it for a
:class:`Device` (the array module ``xp`` plus where results go back to), move
arrays with :func:`to_device` / :func:`to_host`, and call the few linear-algebra
routines that differ between the two libraries through :func:`eigh`,
:class:`CholeskyFactor` and :class:`LowerGram`.

Device rules (the ``device`` parameter of every estimator):

* ``None``: follow the input. CuPy input is computed on its GPU and results
  come back as CuPy arrays; anything else runs on the CPU.
* ``"cpu"``: NumPy. CuPy input is copied to the host first.
* ``"cuda"`` or ``"cuda:N"``: NumPy in, GPU compute, NumPy out, so that
  ``GridSearchCV``, ``learning_curve`` and joblib workers work unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

__all__ = [
    "Device",
    "available_memory_bytes",
    "peak_rss_bytes",
    "current_rss_bytes",
    "resolve_device",
    "to_device",
    "to_host",
    "is_device_array",
    "eigh",
    "CholeskyFactor",
    "LowerGram",
    "to_output",
    "free_device_memory",
    "DeviceCacheMixin",
    "limit_optimizer_blas",
    "cpu_workers",
    "blas_threads",
    "Workers",
    "chunk_bytes",
    "fast_take_options",
]

_INSTALL_HINT = (
    "Install the GPU extra with `pip install 'sklearn-attn[gpu]'` "
    "(CuPy for CUDA 12) or `pip install 'sklearn-attn[gpu-cuda13]'` (CUDA 13)."
)
# A model fitted on a GPU keeps device="cuda"; on a machine without one the
# error must say how to predict on the CPU as well as how to get CuPy.
_CPU_HINT = (
    "To use a model fitted on a GPU on this machine, call "
    "model.set_params(device='cpu')."
)
_CUDA_PATTERN = re.compile(r"^cuda(?::(\d+))?$")


def _import_cupy():
    try:
        import cupy
    except ImportError:  # pragma: no cover - exercised on machines with CuPy
        return None
    return cupy


def is_device_array(array: Any) -> bool:
    """Whether ``array`` is a CuPy array (checked without importing CuPy)."""
    return type(array).__module__.split(".")[0] == "cupy"


@dataclass(frozen=True)
class Device:
    """Where computation happens and where results go.

    Attributes
    ----------
    kind : {"cpu", "cuda"}
    index : int or None
        CUDA device ordinal, ``None`` on the CPU.
    return_device_arrays : bool
        True when the caller passed CuPy arrays and gets CuPy arrays back.
    """

    kind: str = "cpu"
    index: int | None = None
    return_device_arrays: bool = False

    @property
    def xp(self):
        """The array module: ``numpy`` or ``cupy``."""
        if self.kind == "cpu":
            return np
        return _import_cupy()

    def activate(self):
        """Context manager selecting this CUDA device (no-op on the CPU)."""
        if self.kind == "cpu":
            return contextlib.nullcontext()
        return self.xp.cuda.Device(self.index or 0)

    def workers(self, n_threads=None):
        """Context manager yielding threads to spread chunks over, or ``None``.

        On the CPU, :func:`cpu_workers`; on a GPU ``None``: its kernels are
        already parallel and asynchronous, so chunks run one after another.
        """
        if self.kind == "cpu":
            return cpu_workers(n_threads)
        return contextlib.nullcontext(None)

    def chunk_length(self, cpu_length, total):
        """Items per chunk: ``cpu_length`` (sized for the cache) on the CPU, all
        ``total`` at once on a GPU, where large launches are what is fast."""
        return cpu_length if self.kind == "cpu" else max(1, total)

    @property
    def single_precision_products(self):
        """Whether float32 data is multiplied in float32 (then refined in float64).

        True on a GPU, where float32 products are as fast as or (on most
        chips) many times faster than float64 ones and the refinement's extra
        passes over the data are cheap. False on the CPU, where the gain of
        float32 products is lost to those memory-bound passes: float32 data
        is multiplied in float64 there, which needs no refinement.
        """
        return self.kind != "cpu"

    def limit_blas(self, n_threads=1):
        """Context manager limiting the CPU's BLAS threads (no-op on a GPU)."""
        if self.kind == "cpu":
            from threadpoolctl import threadpool_limits

            return threadpool_limits(n_threads)
        return contextlib.nullcontext()


# Bytes of intermediates per chunk on a GPU: large enough to keep it busy.
_GPU_CHUNK_BYTES = 2**30


def chunk_bytes(xp, cpu_bytes):
    """Working-set budget of one chunk for array module ``xp`` (NumPy or CuPy)."""
    return cpu_bytes if xp is np else _GPU_CHUNK_BYTES


def fast_take_options(xp):
    """Keyword arguments that make ``xp.take(..., out=...)`` fast.

    NumPy's ``take`` with ``out`` is slow unless it may skip bounds checks
    (``mode="clip"``); CuPy's ``take`` has no such option.
    """
    return {"mode": "clip"} if xp is np else {}


# -- threads over chunks on the CPU ----------------------------------------------


@contextlib.contextmanager
def cpu_workers(n_threads=None):
    """Threads over sample chunks, with every BLAS library limited to one thread.

    Per-sample products are far too small for BLAS to parallelise, and NumPy and
    SciPy each bundle an OpenBLAS whose idle threads spin: inside
    ``scipy.optimize.minimize`` the two pools were seen to slow an evaluation
    down 2-6 times. Limiting both to one thread and running chunks on our own
    threads avoids the collision and parallelises the element-wise softmax too.

    Parameters
    ----------
    n_threads : int, default=None
        Number of worker threads; ``None`` uses the BLAS thread count in force
        (so inside a joblib worker limited to one thread this stays serial).

    Yields
    ------
    workers : Workers or None
        ``None`` when one thread is used.
    """
    controller = _blas_controller()
    if n_threads is None:
        n_threads = blas_threads()
    with controller.limit(limits=1):
        if n_threads <= 1:
            yield None
            return
        with ThreadPoolExecutor(n_threads) as executor:
            yield Workers(executor, n_threads)


def blas_threads():
    """The BLAS thread count in force: the fewest of the loaded BLAS libraries.

    Follows ``threadpoolctl.threadpool_limits`` (and a joblib worker's limit
    of one thread), so compiled kernels run on as many threads as BLAS would.
    """
    counts = [lib.num_threads for lib in _blas_controller().lib_controllers]
    return max(1, min(counts)) if counts else os.cpu_count() or 1


@functools.cache
def _blas_controller():
    """The BLAS libraries loaded in the process, inspected once.

    ``threadpoolctl`` scans the loaded libraries at each call of
    ``threadpool_limits``, about 4 ms: as long as a small transform. NumPy's and
    SciPy's BLAS are loaded by the time this is first called (scikit-learn
    imports both).
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


class Workers:
    """A thread pool and its size (what :func:`cpu_workers` yields)."""

    def __init__(self, executor, n_threads):
        self.executor = executor
        self.n_threads = n_threads

    def map(self, func, items):
        # NumPy's error state (np.errstate) is per thread: run the workers in
        # the caller's, so that what it ignores or raises holds for them too.
        state = np.geterr()

        def run(item):
            with np.errstate(**state):
                return func(item)

        return self.executor.map(run, items)


def _check_cuda_available(index: int) -> None:
    cupy = _import_cupy()
    if cupy is None:
        raise ImportError(
            f"device='cuda' needs CuPy, which is not installed. {_INSTALL_HINT} "
            f"{_CPU_HINT}"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy without a driver raises CUDARuntimeError
        raise RuntimeError(
            f"device='cuda' was requested but CUDA is not usable here ({exc}). "
            f"{_INSTALL_HINT} {_CPU_HINT}"
        ) from exc
    if count == 0:
        raise RuntimeError(
            f"device='cuda' was requested but CuPy finds no CUDA device. {_CPU_HINT}"
        )
    if index >= count:
        raise ValueError(
            f"device='cuda:{index}' was requested but only {count} CUDA "
            "device(s) exist."
        )


def resolve_device(device: str | None, *arrays: Any) -> Device:
    """Turn an estimator's ``device`` parameter and its inputs into a Device.

    Parameters
    ----------
    device : None, "cpu", "cuda" or "cuda:N"
        The estimator's ``device`` parameter.
    *arrays : array-like
        Inputs; with ``device=None`` a CuPy input selects its GPU.

    Returns
    -------
    Device

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn._backend import resolve_device
    >>> resolve_device(None, np.zeros(3)).kind
    'cpu'
    """
    if device is None:
        for array in arrays:
            if is_device_array(array):
                return Device("cuda", int(array.device.id), return_device_arrays=True)
        return Device("cpu")
    if not isinstance(device, str):
        raise TypeError(
            f"device must be None, 'cpu', 'cuda' or 'cuda:N'; got {device!r} "
            f"of type {type(device).__name__}."
        )
    if device == "cpu":
        return Device("cpu")
    match = _CUDA_PATTERN.match(device)
    if match is None:
        raise ValueError(
            f"device must be None, 'cpu', 'cuda' or 'cuda:N'; got {device!r}."
        )
    index = int(match.group(1) or 0)
    _check_cuda_available(index)
    return Device("cuda", index)


def to_device(array: Any, device: Device, dtype=None):
    """Copy ``array`` to ``device`` (no copy when it is already there)."""
    if device.kind == "cpu":
        return np.asarray(to_host(array), dtype=dtype)
    with device.activate():
        return device.xp.asarray(array, dtype=dtype)


def to_host(array: Any):
    """Return ``array`` as a NumPy array (copying from the GPU if needed)."""
    if is_device_array(array):
        return array.get()
    return array


def free_device_memory(device: Device) -> None:
    """Give CuPy's cached blocks back to the driver after a fit."""
    if device.kind == "cuda":
        device.xp.get_default_memory_pool().free_all_blocks()


def _raise_on_solver_failure():
    """CuPy ignores cuSOLVER's error codes unless asked: a failed factorisation
    returns finite garbage. Inside this context it raises ``LinAlgError``."""
    import cupyx

    return cupyx.errstate(linalg="raise")


# Below this size the CPU eigendecomposition runs on one BLAS thread.
_EIGH_SERIAL_SIZE = 2048


def eigh(matrix, device: Device):
    """Eigendecomposition of a symmetric matrix (overwriting it on the CPU).

    Raises ``numpy.linalg.LinAlgError`` when the solver fails, on either device.
    """
    if device.kind == "cpu":
        # LAPACK's tridiagonal reduction is half level-2 BLAS, whose threads
        # synchronise at every step: with spinning BLAS threads and another
        # busy process, small problems run many times slower on several
        # threads than on one. Large ones gain from threads on idle cores;
        # the threshold gives up that gain below it for the loss it avoids on
        # busy ones (the benchmark pages have both).
        n_threads = 1 if matrix.shape[0] <= _EIGH_SERIAL_SIZE else None
        with _blas_controller().limit(limits=n_threads):
            return scipy.linalg.eigh(
                matrix, overwrite_a=True, check_finite=False, driver="evd"
            )
    with _raise_on_solver_failure():
        return device.xp.linalg.eigh(matrix)


class CholeskyFactor:
    """Cholesky factor of a symmetric positive definite matrix: factorise once,
    :meth:`solve` for as many right-hand sides as needed (iterative refinement
    solves several times with one factor).

    On the CPU the factor overwrites the matrix's lower triangle; CuPy
    factorises a copy. If the matrix is not numerically positive definite this
    raises ``numpy.linalg.LinAlgError`` on either device and leaves the matrix
    as it was (on the CPU its lower triangle is restored from the untouched
    upper one, and its diagonal from a copy).

    Parameters
    ----------
    matrix : array of shape (n, n)
        float64, Fortran-ordered on the CPU, both triangles filled.
    device : Device
    """

    def __init__(self, matrix, device: Device):
        self.device = device
        if device.kind == "cpu":
            diagonal = matrix.diagonal().copy()
            try:
                self._factor = scipy.linalg.cho_factor(
                    matrix, lower=True, overwrite_a=True, check_finite=False
                )
            except np.linalg.LinAlgError:
                # LAPACK overwrote the lower triangle and the diagonal.
                _copy_triangle(matrix, np, from_lower=False)
                np.fill_diagonal(matrix, diagonal)
                raise
            return
        xp = device.xp
        with _raise_on_solver_failure():
            lower = xp.linalg.cholesky(matrix)
        # A NaN in the matrix can pass cuSOLVER's pivot checks; every row's
        # NaN reaches its diagonal entry, so the diagonal is enough to check.
        if not bool(xp.isfinite(lower.diagonal()).all()):
            raise np.linalg.LinAlgError("matrix is not positive definite")
        # Keep U = L^T: CuPy returns L in C order, so L^T is Fortran-ordered and
        # the triangular solves below use it without a copy.
        self._upper = lower.T

    def solve(self, rhs):
        """``matrix^-1 @ rhs``."""
        if self.device.kind == "cpu":
            return scipy.linalg.cho_solve(self._factor, rhs, check_finite=False)
        import cupyx.scipy.linalg

        solve_triangular = cupyx.scipy.linalg.solve_triangular
        # L y = rhs is U^T y = rhs; then U x = y.
        tmp = solve_triangular(self._upper, rhs, trans="T", lower=False)
        return solve_triangular(self._upper, tmp, lower=False)


class DeviceCacheMixin:
    """Keep device copies of fitted arrays out of pickles.

    Subclasses store device copies in ``self._device_cache`` (a dict); it is
    dropped on pickling and rebuilt lazily, so a model fitted on a GPU loads
    and predicts on a machine without one.
    """

    def _clear_device_cache(self):
        """Forget the device copies (call at the start of every ``fit``)."""
        self.__dict__.pop("_device_cache", None)

    def _cached_on(self, name: str, device: Device):
        if device.kind == "cpu":
            return getattr(self, name)
        cache = self.__dict__.setdefault("_device_cache", {})
        key = (name, device.kind, device.index)
        if key not in cache:
            cache[key] = to_device(getattr(self, name), device)
        return cache[key]

    def __getstate__(self):
        state = (
            super().__getstate__()
            if hasattr(super(), "__getstate__")
            else dict(self.__dict__)
        )
        state = dict(state)
        state.pop("_device_cache", None)
        return state


class LowerGram:
    """A symmetric matrix ``G = sum_b B_b B_b^T`` accumulated block by block.

    The blocks are multiplied by one ``syrk`` each (half the flops of a general
    product; BLAS on the CPU, cuBLAS on the GPU), which writes only the lower
    triangle; :meth:`symmetric` completes the matrix when it is needed.

    ``G`` is always float64. Float32 blocks are multiplied in float32, the fast
    path that carries nearly all the flops, into a float32 scratch matrix that
    is then added to ``G``: the rounding error of ``G`` is that of one block's
    float32 product, not of the whole sum. (The ridge solver then refines its
    solution against the exact float64 operator, see ``random_features/_ridge.py``.)

    Parameters
    ----------
    size : int
        ``G`` has shape ``(size, size)``.
    device : Device
    """

    def __init__(self, size, device: Device):
        self.device = device
        self.matrix = device.xp.zeros((size, size), dtype=np.float64, order="F")
        self._scratch = None
        self._upper_valid = False

    def add(self, block) -> None:
        """``G += block @ block.T`` for a block of shape ``(size, k)``."""
        xp = self.device.xp
        if not (block.flags.f_contiguous or block.flags.c_contiguous):
            block = xp.ascontiguousarray(block)
        # Hand BLAS whichever of block / block.T is Fortran-ordered: no copy.
        a, trans = (block, 0) if block.flags.f_contiguous else (block.T, 1)
        single = block.dtype == np.float32
        if single and self._scratch is None:
            self._scratch = xp.zeros(self.matrix.shape, dtype=np.float32, order="F")
        target, beta = (self._scratch, 0.0) if single else (self.matrix, 1.0)
        if self.device.kind == "cpu":
            from scipy.linalg.blas import dsyrk, ssyrk

            syrk = ssyrk if single else dsyrk
            result = syrk(
                1.0, a, beta=beta, c=target, trans=trans, lower=1, overwrite_c=1
            )
        else:
            trans = "T" if trans else "N"
            result = _cublas().syrk(trans, a, out=target, beta=beta, lower=True)
        if result is not target:  # a silent copy would lose the update
            raise RuntimeError("syrk did not update the Gram matrix in place")
        if single:
            # The scratch's upper triangle is never written: it stays zero.
            self.matrix += self._scratch
        self._upper_valid = False

    def symmetric(self):
        """``G`` with both triangles filled (in place, blockwise); frees the scratch."""
        self._scratch = None
        if not self._upper_valid:
            _copy_triangle(self.matrix, self.device.xp)
            self._upper_valid = True
        return self.matrix


def _copy_triangle(matrix, xp, *, from_lower=True, block=1024):
    """Copy the lower triangle onto the upper one (or the upper onto the lower),
    in place and blockwise: no temporary of the matrix's size."""
    n = matrix.shape[0]
    for start in range(0, n, block):
        stop = min(start + block, n)
        tile = matrix[start:stop, start:stop]
        if from_lower:
            matrix[start:stop, stop:] = matrix[stop:, start:stop].T
            tile[...] = xp.tril(tile) + xp.tril(tile, -1).T
        else:
            matrix[stop:, start:stop] = matrix[start:stop, stop:].T
            tile[...] = xp.triu(tile) + xp.triu(tile, 1).T


def _cublas():
    import importlib

    return importlib.import_module("cupy.cublas")


def to_output(array, device: Device):
    """Results as the caller expects them: CuPy for CuPy input, else NumPy."""
    if device.return_device_arrays:
        return to_device(array, device)
    return to_host(array)


def limit_optimizer_blas():
    """Context manager: every BLAS library except NumPy's runs single-threaded.

    NumPy and SciPy wheels each bundle an OpenBLAS. In an optimisation loop the
    heavy products run in NumPy's while SciPy's only serves the optimiser's
    vector updates; with both pools at full size their idle threads spin against
    each other on few cores and an evaluation can take several times longer.
    """
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    others = [
        lib
        for lib in controller.lib_controllers
        if lib.user_api == "blas" and "numpy" not in lib.filepath
    ]
    return controller.select(filepath=[lib.filepath for lib in others]).limit(limits=1)


def available_memory_bytes():
    """Memory the system can give this process without swapping, or None.

    Linux's ``MemAvailable``; None where it is unknown (the check is then left
    to the system).
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def peak_rss_bytes():
    """Peak resident memory of this process so far, or None where unknown.

    On Linux, the kernel's high-water mark of this program (``VmHWM``):
    ``ru_maxrss`` would also count the parent's memory copied by the fork
    before this interpreter started.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def current_rss_bytes():
    """Resident memory now (Linux), else the peak so far."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return peak_rss_bytes()

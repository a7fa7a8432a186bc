"""The one-hot products as gathers from the codes, by compiled kernels (numba).

A one-hot row has one nonzero per site, so the logits ``X @ J_mat.T`` of a
sequence are a sum of ``L`` rows of ``J_mat.T``, and the coupling gradient
``D^T X`` a sum of residual rows grouped by the state at each site: ``n L^2 q``
additions each, instead of the ``2 n (L q)^2`` flops of a dense product. For
symmetric couplings stored by pairs (the full model), a third kernel adds
the gradient straight into the pairs, so no ``(L q)^2`` gradient is formed.
The kernels work on column panels narrow enough that the panel in use stays in
cache; the rows of the matrix a panel gathers get one extra zero row, where a
missing site points. The logits gather from panels relative to the alignment's
most frequent state at each site (:func:`relative_panels`): a sequence then sums
the rows of only the sites where it differs from that consensus.

numba is optional (the ``fast`` extra) and imported at the first kernel call,
not with the package; :func:`available` tells whether it can be.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import threading

import numpy as np

__all__ = [
    "available",
    "resolve_algorithm",
    "PANEL_WIDTH",
    "panel_width",
    "panels_shape",
    "column_panels",
    "reference_states",
    "relative_panels",
    "relative_sites",
    "site_groups",
    "gather_logits",
    "gather_gradient",
    "gather_pair_gradient",
    "softmax_residual",
]

#: Columns of a panel: a multiple of the SIMD width, and narrow enough that a
#: panel of ``L q + 1`` rows stays in a core's share of the cache.
PANEL_WIDTH = 128
_PANEL_BYTES = 3 * 2**20
_SMALLEST_PANEL = 32


def available():
    """Whether numba can be imported (without importing it)."""
    return importlib.util.find_spec("numba") is not None


def resolve_algorithm(algorithm="auto", device=None):
    """The products a Potts fit computes by, ``"gather"`` or ``"dense"``.

    What :class:`~sklearn_attn.PottsPseudoLikelihood` with these ``algorithm``
    and ``device`` runs (its ``algorithm_``), known before the fit: ``"auto"``
    is the gathers on the CPU when numba is installed, the dense one-hot
    products otherwise (always on a GPU).

    Parameters
    ----------
    algorithm : {"auto", "gather", "dense"}, default="auto"
    device : None, "cpu", "cuda" or "cuda:N", default=None
        ``None`` is the CPU (an estimator with ``device=None`` follows its
        input: pass the device of the input).

    Returns
    -------
    algorithm : {"gather", "dense"}

    Raises
    ------
    ValueError
        For another ``algorithm``, or ``"gather"`` on a GPU.
    ImportError
        For ``"gather"`` without numba (the ``fast`` extra).

    Examples
    --------
    >>> from sklearn_attn.potts import resolve_algorithm
    >>> resolve_algorithm("dense")
    'dense'
    >>> resolve_algorithm("auto", device="cuda")
    'dense'
    """
    if algorithm not in ("auto", "gather", "dense"):
        raise ValueError(
            f"algorithm must be 'auto', 'gather' or 'dense'; got {algorithm!r}."
        )
    on_cpu = device is None or str(device) == "cpu"
    if algorithm == "auto":
        return "gather" if on_cpu and available() else "dense"
    if algorithm == "gather" and not on_cpu:
        raise ValueError(
            "algorithm='gather' computes on the CPU only; use algorithm="
            f"'dense' or 'auto' on device={device!r}."
        )
    if algorithm == "gather" and not available():
        raise ImportError(
            "algorithm='gather' needs numba: pip install 'sklearn-attn[fast]', "
            "or use algorithm='dense'."
        )
    return algorithm


_LAUNCH_LOCK = threading.Lock()


@functools.cache
def _kernels():
    import numba

    # GNU OpenMP, numba's usual threading layer on Linux, kills a child
    # process forked after a parallel kernel ran (multiprocessing's "fork"):
    # unless the user chose a layer, take one that survives a fork.
    if numba.config.THREADING_LAYER == "default":
        numba.config.THREADING_LAYER = "forksafe"
    from . import _gather_kernels

    return _gather_kernels


def _launch_guard():
    """A lock for the workqueue layer (the fork-safe layer left when neither
    TBB nor Intel's OpenMP is installed), which aborts when two threads launch
    kernels at once; nothing for the others."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no kernel has run yet: the layer is not chosen
        layer = "workqueue"
    return _LAUNCH_LOCK if layer == "workqueue" else contextlib.nullcontext()


def _launch(kernel, *args, n_threads):
    import numba

    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    with _launch_guard():
        kernel(*args)


def panel_width(n_rows, itemsize):
    """Columns per panel of a matrix of ``n_rows`` rows: :data:`PANEL_WIDTH`,
    halved while a panel exceeds 3 MiB, down to 32."""
    width = PANEL_WIDTH
    while width > _SMALLEST_PANEL and (n_rows + 1) * width * itemsize > _PANEL_BYTES:
        width //= 2
    return width


def panels_shape(n_rows, n_columns, itemsize):
    """Shape of the :func:`column_panels` of an ``(n_rows, n_columns)`` matrix."""
    width = panel_width(n_rows, itemsize)
    return (-(-n_columns // width), n_rows + 1, width)


def column_panels(matrix, width, *, out=None):
    """``matrix`` (rows, columns) as ``(n_panels, rows + 1, width)`` panels.

    Panel ``p`` holds columns ``p * width`` to ``(p + 1) * width``; the last
    row and the columns past the matrix's are zero. ``out``, when given, is
    filled instead of a new array.
    """
    n_rows, n_columns = matrix.shape
    n_panels = -(-n_columns // width)
    shape = (n_panels, n_rows + 1, width)
    if out is None:
        out = np.empty(shape, dtype=matrix.dtype)
    elif out.shape != shape or out.dtype != matrix.dtype:
        raise ValueError(f"out must have shape {shape} and dtype {matrix.dtype}.")
    out[:, n_rows] = 0
    for p in range(n_panels):
        columns = matrix[:, p * width : (p + 1) * width]
        out[p, :n_rows, : columns.shape[1]] = columns
        out[p, :n_rows, columns.shape[1] :] = 0
    return out


def reference_states(codes, n_states):
    """The state of most rows at each site (missing codes not counted; the
    lowest of a tie), as an int64 array of shape (L,)."""
    n_sites = codes.shape[1]
    flat = np.where(codes >= 0, codes, n_states) + (n_states + 1) * np.arange(n_sites)
    counts = np.bincount(flat.ravel(), minlength=n_sites * (n_states + 1))
    return counts.reshape(n_sites, n_states + 1)[:, :n_states].argmax(axis=1)


def relative_panels(matrix, reference, n_states, width, *, out=None):
    """``matrix`` (L q, columns) in column panels relative to ``reference``.

    A sequence's sum of the rows of its sites, ``sum_i matrix[i q + s_i]``, is
    the sum of the reference rows ``sum_i matrix[i q + r_i]`` plus, at the sites
    where ``s_i != r_i``, ``matrix[i q + s_i] - matrix[i q + r_i]`` (or minus
    the reference row, where the site is missing): in an alignment whose
    sequences mostly share the reference (the consensus), far fewer rows.
    The panels, of shape ``(n_panels, L q + L + 1, width)``, hold those
    differences in rows ``i q + a`` (zero at the reference state), minus the
    reference row of site ``i`` in row ``L q + i``, and the sum of the
    reference rows (taken in float64) in the last row; :func:`relative_sites`
    lists the rows a sequence sums. Columns past the matrix's are zero;
    ``out``, when given, is filled instead of a new array.
    """
    n_rows, n_columns = matrix.shape
    n_sites = reference.shape[0]
    if n_rows != n_sites * n_states:
        raise ValueError(
            f"matrix must have L q = {n_sites * n_states} rows; got {n_rows}."
        )
    n_panels = -(-n_columns // width)
    shape = (n_panels, n_rows + n_sites + 1, width)
    if out is None:
        out = np.empty(shape, dtype=matrix.dtype)
    elif out.shape != shape or out.dtype != matrix.dtype:
        raise ValueError(f"out must have shape {shape} and dtype {matrix.dtype}.")
    reference_rows = n_states * np.arange(n_sites) + reference
    for p in range(n_panels):
        columns = matrix[:, p * width : (p + 1) * width]
        used = columns.shape[1]
        panel = out[p]
        base = columns[reference_rows]
        # Splitting the first axis of a view is always a view: the
        # differences are written into the panel.
        np.subtract(
            columns.reshape(n_sites, n_states, used),
            base[:, None, :],
            out=panel[:n_rows, :used].reshape(n_sites, n_states, used),
        )
        np.negative(base, out=panel[n_rows : n_rows + n_sites, :used])
        panel[-1, :used] = base.sum(axis=0, dtype=np.float64)
        panel[:, used:] = 0
    return out


def relative_sites(codes, reference, n_states):
    """The rows of :func:`relative_panels` each sequence of ``codes`` sums.

    Returns ``(indptr, indices)``: sequence ``s`` sums the rows
    ``indices[indptr[s] : indptr[s + 1]]``, the last row of the panels (the
    reference's sum) first, then, at each site ``i`` where its code differs
    from ``reference[i]``, row ``i q + s_i``, or ``L q + i`` where the site is
    missing (code ``-1``). ``indptr`` is int64 of shape (n + 1,), ``indices``
    int32.
    """
    n_rows, n_sites = codes.shape
    width = n_sites * n_states
    rows = np.where(
        codes >= 0, codes + n_states * np.arange(n_sites), width + np.arange(n_sites)
    )
    table = np.hstack([np.full((n_rows, 1), width + n_sites), rows])
    summed = np.hstack([np.ones((n_rows, 1), dtype=bool), codes != reference])
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(summed.sum(axis=1), out=indptr[1:])
    return indptr, table[summed].astype(np.int32)


def site_groups(codes, n_states):
    """The rows of ``codes`` (n, L) grouped by their state at each site.

    Returns
    -------
    order : ndarray of shape (L, n), int32
        ``order[i]`` lists the rows sorted by their code at site ``i``, the
        missing ones (code ``-1``) first.
    bounds : ndarray of shape (L, n_states + 1), int64
        The rows of state ``a`` at site ``i`` are ``order[i, bounds[i, a] :
        bounds[i, a + 1]]``; ``bounds[i, 0]`` counts the missing ones.
    """
    n_rows, n_sites = codes.shape
    order = np.ascontiguousarray(np.argsort(codes, axis=0, kind="stable").T)
    flat = (codes + 1) + (n_states + 1) * np.arange(n_sites)[None, :]
    counts = np.bincount(flat.ravel(), minlength=n_sites * (n_states + 1))
    bounds = np.cumsum(counts.reshape(n_sites, n_states + 1), axis=1)
    return order.astype(np.int32), bounds.astype(np.int64)


def gather_logits(panels, sites, out, *, n_threads):
    """``out[s]``, the sum of the rows of the panels listed for sequence ``s``.

    ``sites`` is an (n, L) array of row indices, each sequence's sites in the
    :func:`column_panels` of a matrix (``rows``, the zero row, where a site
    is missing): ``out[s, c] = sum_i matrix[sites[s, i], c]``; or the
    ``(indptr, indices)`` of :func:`relative_sites`, for
    :func:`relative_panels`. ``out`` (n, columns) is overwritten.
    """
    if isinstance(sites, tuple):
        indptr, indices = sites
    else:
        n_rows, n_sites = sites.shape
        indices = np.ascontiguousarray(sites, dtype=np.int32).reshape(-1)
        indptr = n_sites * np.arange(n_rows + 1, dtype=np.int64)
    _launch(_kernels().gather_logits, panels, indptr, indices, out, n_threads=n_threads)
    return out


def gather_gradient(
    groups, residual, grad, *, n_threads, panels=None, column_sums=None
):
    """Add ``residual.T @ X`` to the float64 ``grad``, ``X`` the one-hot rows.

    ``groups`` is :func:`site_groups` of the rows' codes; ``residual`` is
    (n, L q), ``grad`` (L q, L q). The residual is first copied into column
    panels (into ``panels`` when given, of the shape :func:`column_panels`
    makes), so that the rows a panel gathers are contiguous. At each site, the
    state of most rows is not summed but found as the column sums of all rows
    (``column_sums``, float64, computed when not given) less the other states'
    sums and the sums of the rows that miss the site, unless more rows miss
    it than have that state.
    """
    order, bounds = groups
    width = panels_shape(*residual.shape, residual.dtype.itemsize)[2]
    panels = column_panels(residual, width, out=panels)
    if column_sums is None:
        column_sums = residual.sum(axis=0, dtype=np.float64)
    _launch(
        _kernels().gather_gradient,
        order,
        bounds,
        panels,
        column_sums,
        grad,
        n_threads=n_threads,
    )
    return grad


def gather_pair_gradient(
    groups, residual, pairs, *, n_threads, panels=None, column_sums=None
):
    """Add the gradient of symmetric couplings stored by pairs to ``pairs``.

    For each pair of sites ``i < j``, ``pairs[k, a, b]`` (``k`` the pair's
    index in ``np.triu_indices(L, 1)`` order) gains the sum of
    ``residual[s, j q + b]`` over the rows with ``s_i = a`` and of
    ``residual[s, i q + a]`` over those with ``s_j = b``: the blocks ``(i, j)``
    and ``(j, i)^T`` of ``residual.T @ X`` together, which is the gradient of
    a coupling that appears in both. ``groups``, ``residual``, ``panels`` and
    ``column_sums`` are those of :func:`gather_gradient`; ``pairs`` is a
    C-contiguous float64 array of shape ``(L (L - 1) / 2, q, q)``.
    """
    order, bounds = groups
    n_sites, n_states = bounds.shape[0], bounds.shape[1] - 1
    expected = (n_sites * (n_sites - 1) // 2, n_states, n_states)
    if pairs.shape != expected or pairs.dtype != np.float64:
        raise ValueError(f"pairs must be float64 of shape {expected}.")
    if not pairs.flags.c_contiguous:
        raise ValueError("pairs must be C-contiguous.")
    width = panels_shape(*residual.shape, residual.dtype.itemsize)[2]
    panels = column_panels(residual, width, out=panels)
    n_panels = panels.shape[0]
    # First, last, second, second to last...: neighbours in this order do
    # short and long halves of the work, so equal runs of it are balanced.
    panel_order = np.empty(n_panels, dtype=np.int64)
    panel_order[0::2] = np.arange((n_panels + 1) // 2)
    panel_order[1::2] = n_panels - 1 - np.arange(n_panels // 2)
    if column_sums is None:
        column_sums = residual.sum(axis=0, dtype=np.float64)
    kernel = _kernels().gather_pair_gradient
    flat = pairs.reshape(-1)
    for later in (True, False):
        _launch(
            kernel,
            order,
            bounds,
            panels,
            column_sums,
            panel_order,
            flat,
            later,
            n_threads=n_threads,
        )
    return pairs


def softmax_residual(logits, fields_row, positions, present, weights, *, n_threads):
    """A block's data term from its logits; leaves ``w_s (p - x)`` in ``logits``.

    ``logits`` (n, L q) holds ``X @ J_mat.T``; ``fields_row`` (1, L q) the
    fields; ``positions`` (n, L) the column of each site's observed state,
    ``present`` (n, L) whether the site is there (None: all are), ``weights``
    (n,) float64. Each site's logits are shifted by their largest before the
    exponentials (NumPy's, which are vectorised), so no normaliser
    underflows. Returns ``-sum_s w_s sum_{i present} log p(s_i | s_-i)``.
    """
    kernels = _kernels()
    if present is None:
        present = np.ones(positions.shape, dtype=np.bool_)
    observed = np.empty(logits.shape[0])
    log_norm = np.empty(logits.shape[0])
    _launch(
        kernels.shift_logits,
        logits,
        fields_row,
        positions,
        present,
        observed,
        n_threads=n_threads,
    )
    np.exp(logits, out=logits)
    _launch(
        kernels.normalise_residual,
        logits,
        positions,
        present,
        weights,
        log_norm,
        n_threads=n_threads,
    )
    return -float(weights @ (observed - log_norm))

"""The compiled loops of :mod:`._gather`; importing this module imports numba.

Both kernels run over column panels in parallel: every output entry is
written by one thread in a fixed order, so the result does not depend on the
number of threads. Sums within a panel run in the dtype of the inputs, as a
BLAS product of the same dtype would.
"""

import numba
import numpy as np

_OPTIONS = {"parallel": True, "fastmath": True, "cache": True, "nogil": True}


@numba.njit(**_OPTIONS)
def gather_logits(panels, sites, out):  # pragma: no cover - compiled
    """``out[s, c] = sum_i matrix[sites[s, i], c]``, the matrix in panels."""
    n_panels, _, width = panels.shape
    n_rows, n_sites = sites.shape
    n_columns = out.shape[1]
    for p in numba.prange(n_panels):
        first = p * width
        used = min(width, n_columns - first)
        panel = panels[p]
        acc = np.empty(width, dtype=panels.dtype)
        for s in range(n_rows):
            acc[:] = 0
            # Four rows at a time: four independent loads per addition.
            i = 0
            while i + 4 <= n_sites:
                r0 = panel[sites[s, i]]
                r1 = panel[sites[s, i + 1]]
                r2 = panel[sites[s, i + 2]]
                r3 = panel[sites[s, i + 3]]
                for k in range(width):
                    acc[k] += (r0[k] + r1[k]) + (r2[k] + r3[k])
                i += 4
            while i < n_sites:
                r0 = panel[sites[s, i]]
                for k in range(width):
                    acc[k] += r0[k]
                i += 1
            for k in range(used):
                out[s, first + k] = acc[k]


@numba.njit(**_OPTIONS)
def gather_gradient(order, bounds, residual_panels, grad):  # pragma: no cover
    """``grad[c, i q + a] += sum_{s : s_i = a} residual[s, c]``, the residual
    in panels.

    ``order[i]`` lists the rows sorted by their state at site ``i``, missing
    rows first; rows ``bounds[i, a]`` to ``bounds[i, a + 1]`` of it have state
    ``a``.
    """
    n_sites = bounds.shape[0]
    n_states = bounds.shape[1] - 1
    n_panels, _, width = residual_panels.shape
    n_columns = grad.shape[0]
    for p in numba.prange(n_panels):
        first = p * width
        used = min(width, n_columns - first)
        panel = residual_panels[p]
        acc = np.empty(width, dtype=residual_panels.dtype)
        for i in range(n_sites):
            for a in range(n_states):
                start = bounds[i, a]
                stop = bounds[i, a + 1]
                if start == stop:
                    continue
                acc[:] = 0
                for t in range(start, stop):
                    row = panel[order[i, t]]
                    for k in range(width):
                        acc[k] += row[k]
                column = i * n_states + a
                for k in range(used):
                    grad[first + k, column] += acc[k]

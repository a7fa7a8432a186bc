"""The compiled loops of :mod:`._gather`; importing this module imports numba.

The gathers run over column panels in parallel, the softmax of a block over
its rows: every output entry is written by one thread in a fixed order, so
the result does not depend on the number of threads. Sums within a panel run
in the dtype of the inputs, as a BLAS product of the same dtype would; the
normalisers and log-likelihoods of the softmax in float64.
"""

import numba
import numpy as np

_OPTIONS = {"parallel": True, "fastmath": True, "cache": True, "nogil": True}


@numba.njit(fastmath=True, cache=True, nogil=True)
def _add_rows(acc, panel, rows, lo, hi):  # pragma: no cover - compiled
    """``acc[lo:hi] += panel[r, lo:hi]`` for each ``r`` in ``rows``, four rows
    at a time (four independent loads per addition), in a fixed order."""
    part = acc[lo:hi]  # indexed from zero: a loop from ``lo`` does not vectorise
    n_rows = rows.shape[0]
    t = 0
    while t + 4 <= n_rows:
        r0 = panel[rows[t], lo:hi]
        r1 = panel[rows[t + 1], lo:hi]
        r2 = panel[rows[t + 2], lo:hi]
        r3 = panel[rows[t + 3], lo:hi]
        for k in range(hi - lo):
            part[k] += (r0[k] + r1[k]) + (r2[k] + r3[k])
        t += 4
    while t < n_rows:
        r0 = panel[rows[t], lo:hi]
        for k in range(hi - lo):
            part[k] += r0[k]
        t += 1


@numba.njit(fastmath=True, cache=True, nogil=True)
def _largest_group(bounds, site):  # pragma: no cover - compiled
    """The state of most rows at ``site``, or -1 when fewer rows have it than
    miss the site: its sum, taken as the column sums less the other groups and
    the missing rows, would then cost more rows than it saves."""
    largest, size = 0, bounds[site, 1] - bounds[site, 0]
    for a in range(1, bounds.shape[1] - 1):
        if bounds[site, a + 1] - bounds[site, a] > size:
            largest, size = a, bounds[site, a + 1] - bounds[site, a]
    return largest if size > bounds[site, 0] else -1


@numba.njit(fastmath=True, cache=True, nogil=True)
def _rest_of_group(
    rest, acc, panel, missing_rows, lo, hi
):  # pragma: no cover - compiled
    """Start ``rest[lo:hi]``, the sums the largest group is the column sums
    less, with the sums of the rows that miss the site (in ``acc``'s dtype,
    as the groups are summed)."""
    part = rest[lo:hi]
    if missing_rows.shape[0] == 0:
        part[:] = 0
        return
    acc[lo:hi] = 0
    _add_rows(acc, panel, missing_rows, lo, hi)
    summed = acc[lo:hi]
    for k in range(hi - lo):
        part[k] = summed[k]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _add_to_pairs(
    pairs, values, first, lo, hi, g, a, n_sites, n_states, later
):  # pragma: no cover - compiled
    """Add ``values[lo:hi]``, the sums of group ``(g, a)`` over the columns
    ``first + lo`` to ``first + hi``, to the pairs they are the gradient of:
    ``(g, site)`` at ``(a, state)`` for the sites after ``g`` (``later``), or
    ``(site, g)`` at ``(state, a)`` for those before it."""
    # The columns in runs of one site: one pair, consecutive states, written
    # with a stride of 1 (later) or q.
    k = lo
    while k < hi:
        site = (first + k) // n_states
        state = first + k - site * n_states
        run = min(hi - k, n_states - state)
        if later:
            pair = g * (2 * n_sites - g - 1) // 2 + site - g - 1
            base = (pair * n_states + a) * n_states + state
            stride = 1
        else:
            pair = site * (2 * n_sites - site - 1) // 2 + g - site - 1
            base = (pair * n_states + state) * n_states + a
            stride = n_states
        for r in range(run):
            pairs[base + r * stride] += values[k + r]
        k += run


@numba.njit(**_OPTIONS)
def gather_logits(panels, indptr, indices, out):  # pragma: no cover - compiled
    """``out[s, c] = sum_r panels[..., r, c]`` over the rows ``r`` in
    ``indices[indptr[s] : indptr[s + 1]]``."""
    n_panels, _, width = panels.shape
    n_rows = indptr.shape[0] - 1
    n_columns = out.shape[1]
    for p in numba.prange(n_panels):
        first = p * width
        used = min(width, n_columns - first)
        panel = panels[p]
        acc = np.empty(width, dtype=panels.dtype)
        for s in range(n_rows):
            acc[:] = 0
            _add_rows(acc, panel, indices[indptr[s] : indptr[s + 1]], 0, width)
            for k in range(used):
                out[s, first + k] = acc[k]


@numba.njit(**_OPTIONS)
def gather_gradient(
    order, bounds, residual_panels, column_sums, grad
):  # pragma: no cover - compiled
    """``grad[c, i q + a] += sum_{s : s_i = a} residual[s, c]``, the residual
    in panels.

    ``order[i]`` lists the rows sorted by their state at site ``i``, missing
    rows first; rows ``bounds[i, a]`` to ``bounds[i, a + 1]`` of it have state
    ``a``. The largest group of a site is not summed: it is ``column_sums``
    (float64, the sums of all rows) less the other groups and the rows that
    miss the site, which saves its rows (in a protein alignment, the consensus
    residue's) wherever it holds more rows than miss the site.
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
        rest = np.empty(width)
        for i in range(n_sites):
            largest = _largest_group(bounds, i)
            if largest >= 0:
                _rest_of_group(rest, acc, panel, order[i, : bounds[i, 0]], 0, width)
            else:
                rest[:] = 0  # summed below but not read
            for a in range(n_states):
                start = bounds[i, a]
                stop = bounds[i, a + 1]
                if start == stop or a == largest:
                    continue
                acc[:] = 0
                _add_rows(acc, panel, order[i, start:stop], 0, width)
                column = i * n_states + a
                for k in range(used):
                    grad[first + k, column] += acc[k]
                    rest[k] += acc[k]
            if largest >= 0:
                column = i * n_states + largest
                for k in range(used):
                    grad[first + k, column] += column_sums[first + k] - rest[k]


@numba.njit(**_OPTIONS)
def gather_pair_gradient(
    order, bounds, residual_panels, column_sums, panel_order, pairs, later
):  # pragma: no cover - compiled
    """Half of the gradient of symmetric couplings stored by pairs ``i < j``.

    ``pairs`` is the flat float64 ``(L (L - 1) / 2, q, q)`` array of the pairs
    in ``np.triu_indices`` order. With ``later``, the groups of each site ``g``
    meet the residual columns of the sites after it: ``pairs[(g, j), a, b] +=
    sum_{s : s_g = a} residual[s, j q + b]``; without, those before it:
    ``pairs[(i, g), a, b] += sum_{s : s_g = b} residual[s, i q + a]``. The two
    halves write the same entries from different panels, so each is a launch
    of its own; ``panel_order`` pairs early and late panels, whose halves are
    short and long, so that the threads' shares of the work are alike. As in
    :func:`gather_gradient`, the largest group of a site is ``column_sums``
    less the others and the missing rows.
    """
    n_sites = bounds.shape[0]
    n_states = bounds.shape[1] - 1
    n_panels, _, width = residual_panels.shape
    n_columns = n_sites * n_states
    for t in numba.prange(n_panels):
        p = panel_order[t]
        first = p * width
        used = min(width, n_columns - first)
        panel = residual_panels[p]
        acc = np.empty(width, dtype=residual_panels.dtype)
        rest = np.empty(width)
        for g in range(n_sites):
            if later:
                lo, hi = max(0, (g + 1) * n_states - first), used
            else:
                lo, hi = 0, min(used, g * n_states - first)
            if lo >= hi:
                continue
            largest = _largest_group(bounds, g)
            if largest >= 0:
                _rest_of_group(rest, acc, panel, order[g, : bounds[g, 0]], lo, hi)
            for a in range(n_states):
                start = bounds[g, a]
                stop = bounds[g, a + 1]
                if start == stop or a == largest:
                    continue
                acc[lo:hi] = 0
                _add_rows(acc, panel, order[g, start:stop], lo, hi)
                _add_to_pairs(pairs, acc, first, lo, hi, g, a, n_sites, n_states, later)
                if largest >= 0:
                    part, summed = rest[lo:hi], acc[lo:hi]
                    for k in range(hi - lo):
                        part[k] += summed[k]
            if largest >= 0:
                part, total = rest[lo:hi], column_sums[first + lo : first + hi]
                for k in range(hi - lo):
                    part[k] = total[k] - part[k]
                _add_to_pairs(
                    pairs, rest, first, lo, hi, g, largest, n_sites, n_states, later
                )


@numba.njit(**_OPTIONS)
def shift_logits(logits, fields_row, positions, present, observed):  # pragma: no cover
    """Add the fields to ``logits`` (n, L q) and shift each site's ``q`` logits
    by their largest; ``observed[s]`` is the sum over the present sites of the
    shifted logit of the observed state (``positions`` its column)."""
    n_rows, n_sites = positions.shape
    n_states = logits.shape[1] // n_sites
    for s in numba.prange(n_rows):
        total = 0.0
        for i in range(n_sites):
            z = logits[s, i * n_states : (i + 1) * n_states]
            f = fields_row[0, i * n_states : (i + 1) * n_states]
            top = z[0] + f[0]
            for a in range(n_states):
                z[a] += f[a]
                top = max(top, z[a])
            for a in range(n_states):
                z[a] -= top
            if present[s, i]:
                total += logits[s, positions[s, i]]
        observed[s] = total


@numba.njit(**_OPTIONS)
def normalise_residual(z, positions, present, weights, log_norm):  # pragma: no cover
    """From the exponentials ``z`` of shifted logits, ``z = w_s (p - x)`` in
    place (zero at the missing sites), and ``log_norm[s]``, the sum over the
    present sites of the log normaliser."""
    n_rows, n_sites = positions.shape
    n_states = z.shape[1] // n_sites
    for s in numba.prange(n_rows):
        w = weights[s]
        total = 0.0
        for i in range(n_sites):
            site = z[s, i * n_states : (i + 1) * n_states]
            if not present[s, i]:
                site[:] = 0
                continue
            norm = np.float64(0.0)
            for a in range(n_states):
                norm += site[a]
            total += np.log(norm)
            scale = w / norm
            for a in range(n_states):
                site[a] *= scale
            z[s, positions[s, i]] -= w
        log_norm[s] = total

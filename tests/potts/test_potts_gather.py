"""The gather kernels against loops, and the estimator's choice of algorithm.

The kernels' sums are exact up to the order of float additions; codes,
residuals and matrices are drawn from ``global_random_seed``.
"""

import builtins
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import _fake_cupy
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import _gather, _model, resolve_algorithm
from sklearn_attn.potts._model import OneHotRows

needs_numba = pytest.mark.skipif(
    not _gather.available(), reason="the gather kernels need numba (the fast extra)"
)


def _codes(rng, n, n_sites, n_states, missing=0.2):
    codes = rng.integers(0, n_states, size=(n, n_sites))
    codes[rng.random(codes.shape) < missing] = -1
    return codes


def _sites(codes, n_states):
    """Row of each site's state in the matrix, the zero row when missing."""
    n_sites = codes.shape[1]
    sites = codes + n_states * np.arange(n_sites)
    return np.where(codes >= 0, sites, n_sites * n_states).astype(np.int32)


# Complete codes; a few sites missing (the consensus skip still applies at
# sites with missing rows); many missing (sites sum every state).
MISSING = pytest.mark.parametrize(
    "missing", [0.0, 0.03, 0.2], ids=["complete", "few-missing", "missing"]
)


def _sums_of_site_rows(codes, matrix, n_states):
    """``sum_i matrix[i q + s_i]`` over the sites present of each row, by loops."""
    n_rows, n_sites = codes.shape
    expected = np.zeros((n_rows, matrix.shape[1]))
    for s in range(n_rows):
        for i in range(n_sites):
            if codes[s, i] >= 0:
                expected[s] += matrix[i * n_states + codes[s, i]]
    return expected


@pytest.mark.parametrize(
    "n_rows, n_columns, width", [(10, 7, 32), (40, 64, 32), (5, 130, 128)]
)
def test_column_panels_hold_the_columns_and_a_zero_row(n_rows, n_columns, width):
    matrix = np.arange(n_rows * n_columns, dtype=np.float32).reshape(n_rows, n_columns)
    panels = _gather.column_panels(matrix, width)
    assert panels.shape == (-(-n_columns // width), n_rows + 1, width)
    rebuilt = np.concatenate(list(panels), axis=1)
    assert_allclose(rebuilt[:n_rows, :n_columns], matrix, rtol=0, atol=0)
    assert not rebuilt[n_rows].any() and not rebuilt[:, n_columns:].any()
    # Into a reused buffer holding anything: the same panels.
    out = np.full_like(panels, np.nan)
    assert _gather.column_panels(matrix, width, out=out) is out
    assert_allclose(out, panels, rtol=0, atol=0)
    with pytest.raises(ValueError, match="out must have shape"):
        _gather.column_panels(matrix, width, out=out[:, :-1])


def test_panel_width_halves_for_long_matrices():
    assert _gather.panel_width(1000, 4) == _gather.PANEL_WIDTH
    # (rows + 1) * width * itemsize must stay within 3 MiB, down to 32 columns.
    assert _gather.panel_width(8400, 4) == 64
    assert _gather.panel_width(10**7, 8) == 32
    assert _gather.panels_shape(8400, 8400, 4) == (132, 8401, 64)


def test_site_groups_sort_the_rows_by_state(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 50, 6, 4)
    order, bounds = _gather.site_groups(codes, 4)
    assert order.dtype == np.int32 and order.shape == (6, 50)
    assert bounds.shape == (6, 5)
    for i in range(6):
        assert bounds[i, 0] == (codes[:, i] < 0).sum()
        assert sorted(order[i]) == list(range(50))
        for a in range(4):
            group = order[i, bounds[i, a] : bounds[i, a + 1]]
            assert set(group) == set(np.flatnonzero(codes[:, i] == a))


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_sites, n_states", [(3, 2), (7, 5), (13, 21)])
def test_gather_logits_match_loops(n_sites, n_states, dtype, global_random_seed):
    """Each entry sums at most 13 numbers of order one: the loops' sums to
    float rounding of that order (1e-5 in float32, 1e-12 in float64)."""
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 37, n_sites, n_states)
    width = n_sites * n_states
    matrix = rng.standard_normal((width, width)).astype(dtype)
    panels = _gather.column_panels(matrix, 32)
    out = np.full((37, width), np.nan, dtype)
    _gather.gather_logits(panels, _sites(codes, n_states), out, n_threads=2)
    expected = _sums_of_site_rows(codes, matrix, n_states)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_allclose(out, expected, rtol=tol, atol=tol)


def test_reference_states_are_the_most_frequent(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 40, 6, 4, missing=0.3)
    codes[:, 5] = -1  # no row has the site: the lowest state
    reference = _gather.reference_states(codes, 4)
    for i in range(6):
        counts = [(codes[:, i] == a).sum() for a in range(4)]
        assert reference[i] == int(np.argmax(counts))


def test_relative_panels_hold_differences_from_the_reference(global_random_seed):
    """Row by row against the definition, in float64 (exact differences)."""
    rng = np.random.default_rng(global_random_seed)
    n_sites, q, n_columns, width = 4, 3, 70, 32
    matrix = rng.standard_normal((n_sites * q, n_columns))
    reference = rng.integers(0, q, n_sites)
    panels = _gather.relative_panels(matrix, reference, q, width)
    assert panels.shape == (3, n_sites * q + n_sites + 1, width)
    full = np.hstack(list(panels))  # (rows, 3 * width)
    assert_array_equal(full[:, n_columns:], 0.0)
    for i in range(n_sites):
        base = matrix[i * q + reference[i]]
        for a in range(q):
            assert_array_equal(full[i * q + a, :n_columns], matrix[i * q + a] - base)
        assert_array_equal(full[n_sites * q + i, :n_columns], -base)
    expected_sum = matrix[q * np.arange(n_sites) + reference].sum(axis=0)
    assert_allclose(full[-1, :n_columns], expected_sum, rtol=1e-14, atol=1e-14)
    out = np.full_like(panels, np.nan)
    assert _gather.relative_panels(matrix, reference, q, width, out=out) is out
    assert_array_equal(out, panels)
    with pytest.raises(ValueError, match="out must have shape"):
        _gather.relative_panels(matrix, reference, q, width, out=out[:, :-1])
    with pytest.raises(ValueError, match="L q = 12 rows"):
        _gather.relative_panels(matrix[:-1], reference, q, width)


def test_relative_sites_list_the_sites_off_the_reference(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 30, 5, 3, missing=0.2)
    reference = _gather.reference_states(codes, 3)
    indptr, indices = _gather.relative_sites(codes, reference, 3)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    assert indptr[0] == 0 and indptr[-1] == indices.size
    for s in range(30):
        expected = [5 * 3 + 5] + [
            i * 3 + codes[s, i] if codes[s, i] >= 0 else 5 * 3 + i
            for i in range(5)
            if codes[s, i] != reference[i]
        ]
        assert_array_equal(indices[indptr[s] : indptr[s + 1]], expected)


@needs_numba
@MISSING
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_sites, n_states", [(3, 2), (7, 5), (13, 21)])
def test_relative_logits_match_loops(
    n_sites, n_states, dtype, missing, global_random_seed
):
    """The sums of the rows of each sequence's sites, through panels relative
    to the most frequent states: each entry sums at most 14 numbers of order
    one and the differences, so float rounding of order 1e-5 in float32 (the
    differences' own rounding included) and 1e-12 in float64."""
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 37, n_sites, n_states, missing=missing)
    width = n_sites * n_states
    matrix = rng.standard_normal((width, width)).astype(dtype)
    reference = _gather.reference_states(codes, n_states)
    panels = _gather.relative_panels(matrix, reference, n_states, 32)
    out = np.full((37, width), np.nan, dtype)
    _gather.gather_logits(
        panels,
        _gather.relative_sites(codes, reference, n_states),
        out,
        n_threads=2,
    )
    expected = _sums_of_site_rows(codes, matrix, n_states)
    tol = 5e-5 if dtype == np.float32 else 1e-12
    assert_allclose(out, expected, rtol=tol, atol=tol)


@needs_numba
@MISSING
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_sites, n_states", [(3, 2), (7, 5), (13, 21)])
def test_gather_gradient_matches_loops(
    n_sites, n_states, dtype, missing, global_random_seed
):
    """``grad += residual.T @ X`` by loops; at most 37 terms of order one a sum
    (float32 rounding ~1e-6 relative each), into a float64 start that is kept.
    A site takes its largest state as the column sums less the other states
    and the missing rows where more rows have that state than miss the site
    (every site when none is missing; with few missing, sites with missing
    rows too), and sums every state where not (many missing, many states)."""
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 37, n_sites, n_states, missing=missing)
    width = n_sites * n_states
    residual = rng.standard_normal((37, width)).astype(dtype)
    start = rng.standard_normal((width, width))
    grad = start.copy()
    _gather.gather_gradient(
        _gather.site_groups(codes, n_states), residual, grad, n_threads=2
    )
    expected = start.copy()
    for s in range(37):
        for i in range(n_sites):
            if codes[s, i] >= 0:
                expected[:, i * n_states + codes[s, i]] += residual[s]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert_allclose(grad, expected, rtol=tol, atol=tol)


@needs_numba
@MISSING
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_sites, n_states", [(2, 3), (3, 2), (7, 5), (13, 21)])
def test_gather_pair_gradient_matches_loops(
    n_sites, n_states, dtype, missing, global_random_seed
):
    """For each pair ``i < j``, ``pairs[k, a, b]`` gains the residual of
    column ``(j, b)`` over the rows with ``s_i = a`` and of column ``(i, a)``
    over those with ``s_j = b``; at most 2 x 37 terms of order one a sum, into
    a float64 start that is kept (tolerances as for the full gradient); the
    largest state of a complete site as in ``gather_gradient``."""
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 37, n_sites, n_states, missing=missing)
    q = n_states
    residual = rng.standard_normal((37, n_sites * q)).astype(dtype)
    n_pairs = n_sites * (n_sites - 1) // 2
    start = rng.standard_normal((n_pairs, q, q))
    pairs = start.copy()
    _gather.gather_pair_gradient(
        _gather.site_groups(codes, q), residual, pairs, n_threads=2
    )
    expected = start.copy()
    for k, (i, j) in enumerate(zip(*np.triu_indices(n_sites, 1), strict=True)):
        for s in range(37):
            if codes[s, i] >= 0:
                expected[k, codes[s, i], :] += residual[s, j * q : (j + 1) * q]
            if codes[s, j] >= 0:
                expected[k, :, codes[s, j]] += residual[s, i * q : (i + 1) * q]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert_allclose(pairs, expected, rtol=tol, atol=tol)


def test_gather_pair_gradient_checks_the_pairs():
    codes = np.zeros((4, 3), dtype=int)
    groups = _gather.site_groups(codes, 2)
    residual = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match=r"float64 of shape \(3, 2, 2\)"):
        _gather.gather_pair_gradient(groups, residual, np.zeros((3, 2)), n_threads=1)
    with pytest.raises(ValueError, match="float64"):
        _gather.gather_pair_gradient(
            groups, residual, np.zeros((3, 2, 2), np.float32), n_threads=1
        )
    with pytest.raises(ValueError, match="C-contiguous"):
        _gather.gather_pair_gradient(
            groups, residual, np.zeros((3, 2, 2)).transpose(0, 2, 1), n_threads=1
        )


@needs_numba
@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_residual_matches_loops(missing, dtype, global_random_seed):
    """Value and ``w (p - x)`` by a loop over sequences and sites in float64;
    logits of order ten (some conditionals near 0 and 1), so float32 holds the
    residual to ~1e-6 and the value, a sum of 37 x 9 terms, to ~1e-5 relative."""
    rng = np.random.default_rng(global_random_seed)
    n, n_sites, q = 37, 9, 4
    codes = _codes(rng, n, n_sites, q, missing=missing)
    weights = rng.uniform(0.2, 2.0, n)
    logits = (10 * rng.standard_normal((n, n_sites * q))).astype(dtype)
    fields_row = rng.standard_normal((1, n_sites * q)).astype(dtype)
    present = codes >= 0
    positions = np.where(present, codes, 0) + q * np.arange(n_sites)
    expected_value = 0.0
    expected = np.zeros((n, n_sites * q))
    for s in range(n):
        for i in range(n_sites):
            if not present[s, i]:
                continue
            z = logits[s, i * q : (i + 1) * q].astype(np.float64)
            z = z + fields_row[0, i * q : (i + 1) * q]
            p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            expected_value -= weights[s] * np.log(p[codes[s, i]])
            expected[s, i * q : (i + 1) * q] = weights[s] * p
            expected[s, i * q + codes[s, i]] -= weights[s]
    out = logits.copy()
    value = _gather.softmax_residual(
        out,
        fields_row,
        positions,
        None if missing == 0 else present,
        weights,
        n_threads=2,
    )
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert value == pytest.approx(expected_value, rel=tol)
    assert_allclose(out, expected, rtol=tol, atol=tol)


@needs_numba
@MISSING
def test_kernels_do_not_depend_on_the_number_of_threads(missing, global_random_seed):
    """Each entry is summed by one thread in a fixed order: bit-identical."""
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 300, 20, 21, missing=missing)
    width = 20 * 21
    matrix = rng.standard_normal((width, width)).astype(np.float32)
    panels = _gather.column_panels(matrix, 32)
    sites, groups = _sites(codes, 21), _gather.site_groups(codes, 21)
    reference = _gather.reference_states(codes, 21)
    relative_panels = _gather.relative_panels(matrix, reference, 21, 32)
    relative_sites = _gather.relative_sites(codes, reference, 21)
    results = []
    for n_threads in (1, 2, 3):
        relative = np.empty((300, width), np.float32)
        _gather.gather_logits(
            relative_panels, relative_sites, relative, n_threads=n_threads
        )
        logits = np.empty((300, width), np.float32)
        _gather.gather_logits(panels, sites, logits, n_threads=n_threads)
        grad = np.zeros((width, width))
        _gather.gather_gradient(groups, logits, grad, n_threads=n_threads)
        pairs = np.zeros((20 * 19 // 2, 21, 21))
        _gather.gather_pair_gradient(groups, logits, pairs, n_threads=n_threads)
        positions = codes.clip(0) + 21 * np.arange(20)
        value = _gather.softmax_residual(
            logits,
            np.zeros((1, width), np.float32),
            positions,
            codes >= 0,
            np.ones(300),
            n_threads=n_threads,
        )
        results.append((relative, logits, grad, pairs, value))
    for result in results[1:]:
        for got, first in zip(result, results[0], strict=True):
            assert_allclose(got, first, rtol=0, atol=0)


@needs_numba
def test_gather_blocks_are_those_of_the_one_hot_blocks(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _codes(rng, 23, 5, 3)
    weights = rng.uniform(0.5, 2.0, 23)
    rows = OneHotRows(codes, weights, 3, gather=True)
    blocks = rows.gather_blocks(10)
    assert rows.gather_blocks(10) is blocks  # made once
    dense = list(rows.blocks(10))
    assert [len(b[0]) for b in blocks] == [10, 10, 3]
    assert_array_equal(rows.reference_states, _gather.reference_states(codes, 3))
    matrix = rng.standard_normal((15, 15))
    panels = _gather.relative_panels(matrix, rows.reference_states, 3, 32)
    for (w, positions, present, sites, _), (onehot, w_d, pos_d, present_d) in zip(
        blocks, dense, strict=True
    ):
        assert_allclose(w, w_d)
        assert_allclose(positions, pos_d)
        assert_allclose(present, present_d)
        # The sums of the rows of each sequence's sites are the one-hot products.
        out = np.empty((len(w), 15))
        _gather.gather_logits(panels, sites, out, n_threads=1)
        assert_allclose(out, onehot @ matrix, rtol=1e-12, atol=1e-12)


def test_gather_rows_need_numpy_and_numba(monkeypatch):
    codes = np.zeros((4, 3), dtype=int)
    with pytest.raises(ValueError, match="xp must be numpy"):
        OneHotRows(codes, np.ones(4), 2, gather=True, xp=_fake_cupy.build()["cupy"])
    monkeypatch.setattr(_model._gather, "available", lambda: False)
    with pytest.raises(ImportError, match=r"sklearn-attn\[fast\]"):
        OneHotRows(codes, np.ones(4), 2, gather=True)


def test_available_does_not_import_numba(monkeypatch):
    imported = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    _gather.available()
    assert "numba" not in imported


def _planted(seed, n=600):
    X, _ = make_potts_sequences(
        n_samples=n, n_sites=8, n_states=4, coupling_scale=0.4, random_state=seed
    )
    return X


@needs_numba
@pytest.mark.parametrize("parametrization", ["full", "factored"])
def test_gather_and_dense_fits_reach_the_same_optimum(
    parametrization, global_random_seed
):
    """Both routes minimise one objective and differ by float32 rounding of
    the sums. The fits stop where the relative decrease falls below ``tol``,
    and in the flat directions of some draws (rare states) that point moves
    with the rounding: over seeds 0-99 the objectives end at most 3e-6 apart
    (relative) and the couplings (of order 0.1) at most 7e-3, so the bounds
    are 1e-5 and 2e-2. The route's own sums are checked exactly against
    loops above, and its gradient against finite differences in
    ``test_potts_model``."""
    X = _planted(global_random_seed)
    fits = {
        algorithm: PottsPseudoLikelihood(
            parametrization,
            algorithm=algorithm,
            attention="free",
            n_heads=2,
            tol=1e-10,
            max_iter=300,
            random_state=0,
        ).fit(X)
        for algorithm in ("dense", "gather")
    }
    assert fits["gather"].algorithm_ == "gather"
    assert fits["dense"].algorithm_ == "dense"
    assert fits["gather"].objective_ == pytest.approx(
        fits["dense"].objective_, rel=1e-5
    )
    assert_allclose(
        fits["gather"].couplings_, fits["dense"].couplings_, rtol=0, atol=2e-2
    )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_chooses_gather_on_the_cpu_with_numba(monkeypatch):
    X = _planted(0, n=50)
    model = PottsPseudoLikelihood("full", max_iter=2).fit(X)
    assert model.algorithm_ == ("gather" if _gather.available() else "dense")
    monkeypatch.setattr(_gather, "available", lambda: False)
    assert PottsPseudoLikelihood("full", max_iter=2).fit(X).algorithm_ == "dense"
    with pytest.raises(ImportError, match=r"sklearn-attn\[fast\].*'dense'"):
        PottsPseudoLikelihood("full", algorithm="gather").fit(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gather_is_refused_on_a_gpu_and_auto_is_dense(monkeypatch):
    _fake_cupy.install(monkeypatch)
    X = _planted(0, n=50)
    model = PottsPseudoLikelihood("full", max_iter=2, device="cuda").fit(X)
    assert model.algorithm_ == "dense"
    with pytest.raises(ValueError, match="CPU only"):
        PottsPseudoLikelihood("full", algorithm="gather", device="cuda").fit(X)


def test_resolve_algorithm_is_what_a_fit_runs(monkeypatch):
    expected_auto = "gather" if _gather.available() else "dense"
    assert resolve_algorithm() == resolve_algorithm("auto", "cpu") == expected_auto
    assert resolve_algorithm("auto", "cuda:1") == "dense"
    assert resolve_algorithm("dense", "cuda") == "dense"
    with pytest.raises(ValueError, match="algorithm must be 'auto', 'gather'"):
        resolve_algorithm("blas")
    with pytest.raises(ValueError, match="CPU only.*device='cuda'"):
        resolve_algorithm("gather", "cuda")
    monkeypatch.setattr(_gather, "available", lambda: False)
    assert resolve_algorithm("auto") == "dense"
    with pytest.raises(ImportError, match=r"sklearn-attn\[fast\]"):
        resolve_algorithm("gather")


def test_algorithm_is_validated():
    with pytest.raises(ValueError, match="algorithm"):
        PottsPseudoLikelihood(algorithm="blas").fit(_planted(0, n=20))


_FORK_AFTER_A_KERNEL = """
import os
import numpy as np
from sklearn_attn.potts import _gather

codes = np.random.default_rng(0).integers(0, 3, size=(50, 6))
panels = _gather.column_panels(np.ones((18, 18), np.float32), 32)
sites = (codes + 3 * np.arange(6)).astype(np.int32)
out = np.empty((50, 18), np.float32)
_gather.gather_logits(panels, sites, out, n_threads=2)
pid = os.fork()
if pid == 0:
    _gather.gather_logits(panels, sites, out, n_threads=2)
    os._exit(0 if (out == 6).all() else 3)
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"""


@needs_numba
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_after_the_kernels_can_run_them():
    """GNU OpenMP kills a child forked after a parallel kernel ran; the kernels
    take a fork-safe threading layer unless the user chose one."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run(
        [sys.executable, "-c", _FORK_AFTER_A_KERNEL],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


@needs_numba
def test_fits_in_two_threads_at_once_are_the_fits_one_by_one():
    """Kernels launched from two threads at once (a threaded joblib or Dask
    worker): no abort, and each fit as it is alone."""
    data = [_planted(seed, n=300) for seed in (0, 1)]

    def fit(X):
        return PottsPseudoLikelihood("full", algorithm="gather", max_iter=15).fit(X)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        alone = [fit(X) for X in data]
        with ThreadPoolExecutor(2) as executor:
            together = list(executor.map(fit, data))
    for a, b in zip(alone, together, strict=True):
        assert_allclose(b.couplings_, a.couplings_, rtol=0, atol=0)

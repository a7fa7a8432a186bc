"""Max-margin problems on attention weights: the instances and the SVM solvers.

References are slow and obvious: loops over sequences and tokens, vertex
enumeration, an independent SciPy solver and the explicit min-norm formula.
"""

import itertools

import numpy as np
import pytest
from _max_margin_instances import NORMS, _diag_data, _full_data
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import linprog, minimize
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_attn.attention import _max_margin as mm
from sklearn_attn.attention import (
    attention_margin,
    make_max_margin_attention_data,
    max_margin_feasible,
    max_margin_svm,
)


def _constraint_values_loop(W, X, z, opt):
    values = []
    for i in range(X.shape[0]):
        for t in range(X.shape[1]):
            if t != opt[i]:
                values.append((X[i, opt[i]] - X[i, t]) @ W @ z[i])
    return np.array(values)


def _norm(W, norm):
    if norm == "l1":
        return np.abs(np.diag(W)).sum()
    if norm == "nuclear":
        return np.linalg.norm(W, "nuc")
    return np.linalg.norm(W)


# -- data ------------------------------------------------------------------------------
def test_data_follow_the_protocol():
    X, z, y, v, opt = _full_data(3)
    assert X.shape == (6, 4, 8) and z.shape == (6, 8) and v.shape == (8,)
    assert_allclose(np.linalg.norm(X, axis=2), 1.0)
    assert_allclose(np.linalg.norm(z, axis=1), 1.0)
    assert_allclose(np.linalg.norm(v), 1.0)
    assert set(np.unique(y)) <= {-1.0, 1.0}
    assert_array_equal(opt, np.argmax(y[:, None] * (X @ v), axis=1))
    assert max_margin_feasible(X, z, y, v)
    again = _full_data(3)
    for a, b in zip((X, z, y, v, opt), again, strict=True):
        assert_array_equal(a, b)


def test_diagonal_data_are_separable_by_diagonal_weights():
    for seed in range(3):
        X, z, y, v, opt = _diag_data(seed)
        assert max_margin_feasible(X, z, y, v, structure="diagonal")


def test_data_gives_up_when_separation_is_impossible():
    # One weight and 40 constraints: separable draws essentially never occur.
    with pytest.raises(RuntimeError, match="No instance separable"):
        make_max_margin_attention_data(
            20, 3, 1, structure="diagonal", max_tries=3, random_state=0
        )


def _scores_loop(X, y, v):
    """``gamma_it = y_i sum_k v_k x_itk`` by explicit loops."""
    n, T, d = X.shape
    gamma = np.zeros((n, T))
    for i in range(n):
        for t in range(T):
            gamma[i, t] = y[i] * sum(v[k] * X[i, t, k] for k in range(d))
    return gamma


@pytest.mark.parametrize("score_gap", [0.5, 0.1, 1.0])
def test_equal_scores_data_are_the_theorem_setting(score_gap, global_random_seed):
    """Every non-optimal score is 0 and the optimal one ``score_gap``, to rounding.

    The tokens are unit vectors ``y_i gamma_t v + sqrt(1 - gamma_t^2) u`` with
    ``u`` a unit vector orthogonal to ``v``; scores, norms and the orthogonality
    are sums of eight products of numbers at most 1, so they hold to a few
    units of rounding (``1e-15``), whatever the seed.
    """
    n, T, d = 6, 4, 8
    X, z, y, v, opt = make_max_margin_attention_data(
        n, T, d, scores="equal", score_gap=score_gap, random_state=global_random_seed
    )
    assert X.shape == (n, T, d) and z.shape == (n, d) and v.shape == (d,)
    assert opt.shape == (n,) and set(opt) <= set(range(T))
    assert_allclose(np.linalg.norm(X, axis=2), 1.0, rtol=1e-15)
    assert_allclose(np.linalg.norm(z, axis=1), 1.0, rtol=1e-15)
    assert_allclose(np.linalg.norm(v), 1.0, rtol=1e-15)
    assert set(np.unique(y)) <= {-1.0, 1.0}
    gamma = _scores_loop(X, y, v)
    is_opt = np.arange(T) == opt[:, None]
    assert_allclose(gamma[is_opt], score_gap, rtol=0, atol=1e-15)
    assert_allclose(gamma[~is_opt], 0.0, rtol=0, atol=1e-15)
    # The gap of every non-optimal token is the margin.
    gaps = gamma[is_opt][:, None] - gamma[~is_opt].reshape(n, T - 1)
    assert_allclose(gaps, score_gap, rtol=0, atol=2e-15)
    assert_array_equal(np.argmax(gamma, axis=1), opt)
    # The parts orthogonal to v: unit vectors (times sqrt(1 - gamma^2)).
    along = np.einsum("ntd,d->nt", X, v)
    ortho = X - along[..., None] * v
    assert_allclose(np.abs(along), np.where(is_opt, score_gap, 0.0), atol=1e-15)
    assert_allclose(
        np.linalg.norm(ortho, axis=2),
        np.sqrt(1.0 - np.where(is_opt, score_gap, 0.0) ** 2),
        atol=1e-15,
    )
    assert max_margin_feasible(X, z, y, v)
    again = make_max_margin_attention_data(
        n, T, d, scores="equal", score_gap=score_gap, random_state=global_random_seed
    )
    for a, b in zip((X, z, y, v, opt), again, strict=True):
        assert_array_equal(a, b)


def test_equal_scores_data_separable_by_diagonal_weights(global_random_seed):
    X, z, y, v, opt = make_max_margin_attention_data(
        5,
        3,
        10,
        structure="diagonal",
        scores="equal",
        random_state=global_random_seed,
    )
    assert max_margin_feasible(X, z, y, v, structure="diagonal")
    assert_array_equal(np.argmax(_scores_loop(X, y, v), axis=1), opt)


def test_equal_scores_options_are_validated():
    with pytest.raises(InvalidParameterError, match="'scores' parameter"):
        make_max_margin_attention_data(scores="uniform")
    for gap in (0.0, -0.5, 1.5):
        with pytest.raises(InvalidParameterError, match="'score_gap' parameter"):
            make_max_margin_attention_data(scores="equal", score_gap=gap)
    with pytest.raises(ValueError, match="dim must be at least 2"):
        make_max_margin_attention_data(2, 2, 1, scores="equal", random_state=0)
    # A gap far below the rounding of the zero scores (about 1e-17): some
    # non-optimal token of the 600 comes out above it.
    with pytest.raises(ValueError, match="score_gap=1e-30 is below"):
        make_max_margin_attention_data(
            200, 4, 8, scores="equal", score_gap=1e-30, random_state=0
        )
    # score_gap is ignored by the generic protocol.
    for a, b in zip(
        make_max_margin_attention_data(random_state=0),
        make_max_margin_attention_data(score_gap=0.9, random_state=0),
        strict=True,
    ):
        assert_array_equal(a, b)


# -- max-margin solvers ----------------------------------------------------------------
def _infeasible_problem():
    # d = 1: the two sequences ask for 2 w >= 1 and -2 w >= 1.
    X = np.array([[[1.0], [-1.0]], [[1.0], [-1.0]]])
    z = np.array([[1.0], [-1.0]])
    return X, z, np.array([1.0, 1.0]), np.array([1.0])


@pytest.mark.parametrize("norm", ["frobenius", "nuclear", "l2", "l1"])
def test_infeasible_problems_raise(norm):
    X, z, y, v = _infeasible_problem()
    structure = mm._STRUCTURE_OF_NORM[norm]
    assert not max_margin_feasible(X, z, y, v, structure=structure)
    with pytest.raises(ValueError, match="infeasible"):
        max_margin_svm(X, z, y, v, norm=norm, random_state=0)


@pytest.mark.parametrize("structure", ["full", "diagonal"])
def test_solutions_are_feasible_and_no_worse_than_other_feasible_points(
    structure, global_random_seed
):
    seed = global_random_seed
    data = _full_data(seed) if structure == "full" else _diag_data(seed)
    X, z, y, v, opt = data
    rng = np.random.default_rng(seed)
    a, b = mm._constraint_vectors(X, z, opt)
    A = mm._constraint_matrix(a, b, structure)
    d = X.shape[2]
    # Other feasible points: LP vertices for random objectives in a box, and
    # random perturbations of the solution at several scales, each scaled to
    # unit margin (any W with a positive margin becomes feasible that way).
    others = []
    for _ in range(10):
        res = linprog(
            rng.standard_normal(A.shape[1]),
            A_ub=-A,
            b_ub=-np.ones(len(A)),
            bounds=(-1e3, 1e3),
            method="highs",
        )
        w = res.x
        others.append(np.diag(w) if structure == "diagonal" else w.reshape(d, d))
    for norm in NORMS[structure]:
        W, value = max_margin_svm(X, z, y, v, norm=norm, random_state=0)
        values = _constraint_values_loop(W, X, z, opt)
        assert values.min() >= 1 - 1e-9
        assert_allclose(values.min(), 1.0, rtol=1e-12)
        assert_allclose(value, _norm(W, norm), rtol=1e-12)
        if structure == "diagonal":
            assert_array_equal(W, np.diag(np.diag(W)))
        candidates = list(others)
        for scale in (1e-3, 1e-2, 1e-1, 1.0):
            for _ in range(20):
                noise = (
                    rng.standard_normal((d, d))
                    if structure == "full"
                    else (np.diag(rng.standard_normal(d)))
                )
                candidates.append(W + scale * np.linalg.norm(W) * noise / d)
        n_checked = 0
        for C in candidates:
            margin = attention_margin(C, X, z, y, v)
            if margin > 0:
                n_checked += 1
                # 1e-9: the solvers' own tolerance on the optimal value.
                assert _norm(C / margin, norm) >= value * (1 - 1e-9)
        assert n_checked >= 50


def _vertex_enumeration_2d(A, norm):
    """min ||w|| over {A w >= 1} in R^2 by enumerating candidate points.

    l1: the optimum of a piecewise-linear convex function over a polygon is at
    a vertex of the polygon or where an edge crosses a coordinate axis (a kink
    of ||.||_1). l2: at a vertex or at the projection of 0 on an edge line.
    """
    m = len(A)
    points = []
    for j, k in itertools.combinations(range(m), 2):
        M = A[[j, k]]
        if abs(np.linalg.det(M)) > 1e-12:
            points.append(np.linalg.solve(M, np.ones(2)))
    for j in range(m):
        for axis in range(2):  # the edge line crossing an axis
            if abs(A[j, 1 - axis]) > 1e-12:
                p = np.zeros(2)
                p[1 - axis] = 1.0 / A[j, 1 - axis]
                points.append(p)
        points.append(A[j] / (A[j] @ A[j]))
    points = [p for p in points if np.all(A @ p >= 1 - 1e-9)]
    order = 1 if norm == "l1" else 2
    return min(points, key=lambda p: np.linalg.norm(p, order))


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_diagonal_svms_match_vertex_enumeration_in_2d(norm, global_random_seed):
    n_checked = 0
    for seed in range(40 * global_random_seed, 40 * global_random_seed + 40):
        X, z, y, v, opt = make_max_margin_attention_data(
            3, 3, 2, structure="diagonal", random_state=seed
        )
        a, b = mm._constraint_vectors(X, z, opt)
        expected = _vertex_enumeration_2d(a * b, norm)
        W, value = max_margin_svm(X, z, y, v, norm=norm)
        # Both solve the same small active systems, some nearly singular (values
        # up to 5.5e3 on seeds 0-99): the solution, and so its norm, agree to
        # 1e-7 relative (worst 5e-9 on the norm).
        assert_allclose(np.diag(W), expected, rtol=1e-7, atol=1e-9)
        assert_allclose(
            value, np.linalg.norm(expected, 1 if norm == "l1" else 2), rtol=1e-7
        )
        n_checked += 1
    assert n_checked == 40


def test_frobenius_svm_is_the_explicit_min_norm_solution_when_all_active(
    global_random_seed,
):
    """If alpha = (A A^T)^{-1} 1 >= 0, then W = A^T alpha solves the SVM (KKT).

    Such instances (all constraints active) are common: three turn up in the
    first 200 draws from every seed in 0-99.
    """
    found = 0
    for seed in range(200 * global_random_seed, 200 * global_random_seed + 200):
        X, z, y, v, opt = make_max_margin_attention_data(3, 3, 4, random_state=seed)
        a, b = mm._constraint_vectors(X, z, opt)
        A = mm._constraint_matrix(a, b, "full")
        alpha = np.linalg.solve(A @ A.T, np.ones(len(A)))
        if alpha.min() <= 1e-3:
            continue
        W, value = max_margin_svm(X, z, y, v, norm="frobenius")
        explicit = (A.T @ alpha).reshape(4, 4)
        assert_allclose(W, explicit, rtol=1e-9, atol=1e-12)
        assert_allclose(value**2, alpha.sum(), rtol=1e-9)  # ||W||^2 = 1^T alpha
        found += 1
        if found == 3:
            break
    assert found == 3


@pytest.mark.parametrize("structure", ["full", "diagonal"])
def test_min_norm_svm_matches_slsqp(structure):
    """The exact active-set solution against an independent QP formulation."""
    X, z, y, v, opt = _full_data(4) if structure == "full" else _diag_data(4)
    a, b = mm._constraint_vectors(X, z, opt)
    A = mm._constraint_matrix(a, b, structure)
    norm = "frobenius" if structure == "full" else "l2"
    W, value = max_margin_svm(X, z, y, v, norm=norm)
    res = minimize(
        lambda w: (0.5 * w @ w, w),
        np.linalg.pinv(A) @ np.ones(len(A)),
        jac=True,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda w: A @ w - 1, "jac": lambda w: A}],
        options={"ftol": 1e-13, "maxiter": 500},
    )
    assert res.success
    # SLSQP stops at ftol: values agree to ~1e-8, solutions to ~1e-6.
    assert_allclose(value, np.linalg.norm(res.x), rtol=1e-8)
    expected = np.diag(res.x) if structure == "diagonal" else res.x.reshape(W.shape)
    assert_allclose(W, expected, atol=1e-6 * np.abs(W).max())


def test_nuclear_svm_meets_its_dual_lower_bound(global_random_seed):
    X, z, y, v, opt = _full_data(global_random_seed)
    W, value = max_margin_svm(X, z, y, v, norm="nuclear", random_state=0)
    a, b = mm._constraint_vectors(X, z, opt)
    lower = mm._nuclear_dual_bound(a, b, W)
    # Weak duality makes `lower` a certified bound; SLSQP's ftol of 1e-15 on
    # the objective leaves a gap of ~1e-8 relative at most.
    assert lower <= value * (1 + 1e-12)
    assert value - lower <= 1e-6 * value
    W_fro, fro = max_margin_svm(X, z, y, v, norm="frobenius")
    assert value <= np.linalg.norm(W_fro, "nuc") + 1e-9
    assert fro <= np.linalg.norm(W) + 1e-9
    # The nuclear solution is of lower rank (the pilot's rank 3 against 6).
    tol = 1e-6 * value
    rank = np.sum(np.linalg.svd(W, compute_uv=False) > tol)
    assert rank < np.sum(np.linalg.svd(W_fro, compute_uv=False) > tol)


def test_nuclear_and_frobenius_agree_for_one_sequence():
    """One query z: W z = u must hold, so both solutions are u z^T (rank 1)."""
    X, z, y, v, opt = make_max_margin_attention_data(1, 5, 4, random_state=0)
    W_fro, fro = max_margin_svm(X, z, y, v, norm="frobenius")
    W_nuc, nuc = max_margin_svm(X, z, y, v, norm="nuclear", random_state=0)
    assert_allclose(nuc, fro, rtol=1e-7)
    assert_allclose(W_nuc, W_fro, atol=1e-6 * np.abs(W_fro).max())
    assert_allclose(np.linalg.svd(W_fro, compute_uv=False)[1:], 0, atol=1e-12)


def test_attention_margin_matches_loop():
    X, z, y, v, opt = _full_data(1)
    W = np.random.default_rng(0).standard_normal((8, 8))
    assert_allclose(
        attention_margin(W, X, z, y, v),
        _constraint_values_loop(W, X, z, opt).min(),
        rtol=1e-13,
    )
    w = np.arange(8.0)
    assert_allclose(
        attention_margin(w, X, z, y, v),
        attention_margin(np.diag(w), X, z, y, v),
        rtol=1e-13,
    )
    other = (opt + 1) % 4
    assert_allclose(
        attention_margin(W, X, z, y, v, opt=other),
        _constraint_values_loop(W, X, z, other).min(),
        rtol=1e-13,
    )


def test_attention_margin_of_a_stack_is_the_margin_of_each_matrix(global_random_seed):
    X, z, y, v, opt = _full_data(global_random_seed)
    W = np.random.default_rng(global_random_seed).standard_normal((5, 8, 8))
    margins = attention_margin(W, X, z, y, v, opt=opt)
    assert margins.shape == (5,)
    expected = [attention_margin(w, X, z, y, v, opt=opt) for w in W]
    assert_allclose(margins, expected, rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="W must have shape \\(n_weights, 8, 8\\)"):
        attention_margin(W[:, :3], X, z, y, v)


def test_svm_inputs_are_validated_and_not_modified():
    X, z, y, v, opt = _full_data(0)
    copies = [a.copy() for a in (X, z, y, v)]
    max_margin_svm(X, z, y, v, norm="frobenius")
    for a, b in zip((X, z, y, v), copies, strict=True):
        assert_array_equal(a, b)
    with pytest.raises(InvalidParameterError, match="norm"):
        max_margin_svm(X, z, y, v, norm="l3")
    with pytest.raises(ValueError, match="y must contain only -1 and"):
        max_margin_svm(X, z, np.zeros(6), v)
    with pytest.raises(ValueError, match="z must have shape"):
        max_margin_svm(X, z[:, :3], y, v)
    with pytest.raises(ValueError, match="opt must be token indices"):
        max_margin_svm(X, z, y, v, opt=np.full(6, 9))
    with pytest.raises(ValueError, match="X must be 3-D"):
        max_margin_svm(X[0], z, y, v)
    with pytest.raises(ValueError, match="W must have shape"):
        attention_margin(np.eye(3), X, z, y, v)

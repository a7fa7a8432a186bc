"""Missing sites (``missing_state``, plmc's ``-g``) against loops and brute force.

A missing site (code ``-1`` in the core) has no conditional and adds nothing to
the conditionals of the other sites. The core is checked against the masked
pseudo-likelihood written out with loops (its gradient against finite
differences is in ``test_potts_model.py``) and the conditionals of the exact
joint of the sites present (by enumeration); the estimator against the fit of
the same data without the state, and its predictions against the loops. Every
tolerance holds for any seed (the reason is given next to it).
"""

import itertools
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.potts import _model
from sklearn_attn.potts._model import (
    FactoredAttention,
    FullCouplings,
    OneHotRows,
    log_conditionals,
    objective,
    one_hot,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

L, Q = 4, 3

PARAMETRIZATIONS = [
    FullCouplings(L, Q),
    FactoredAttention(L, Q, 2, "softmax"),
    FactoredAttention(L, Q, 2, "free"),
]


def _gapped_codes(rng, n=25, missing=0.3):
    """Codes in ``[0, Q)`` with about ``missing`` of the sites at ``-1``."""
    codes = rng.integers(0, Q, size=(n, L))
    codes[rng.random((n, L)) < missing] = -1
    codes[0] = -1  # a sequence with no site at all adds nothing
    codes[1, 1:] = -1  # one site alone: its conditional is its fields'
    return codes


def _masked_pseudo_likelihood_loop(codes, weights, couplings, fields, alpha_h, alpha_j):
    """plmc's -g objective with loops: missing sites (-1) are skipped twice."""
    n_sites, n_states = fields.shape
    sites = range(n_sites)
    total = 0.0
    for s, w in zip(codes, weights, strict=True):
        for i in sites:
            if s[i] < 0:
                continue
            z = [
                fields[i, a]
                + sum(couplings[i, a, j, s[j]] for j in sites if j != i and s[j] >= 0)
                for a in range(n_states)
            ]
            total -= w * (z[s[i]] - np.log(np.sum(np.exp(z))))
    penalty_j = sum(
        (couplings[i, :, j, :] ** 2).sum() for i in sites for j in sites if i != j
    )
    return total + alpha_h * (fields**2).sum() + alpha_j / 2 * penalty_j


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS, ids=repr)
def test_masked_objective_matches_loops(parametrization, gather, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng)
    weights = rng.uniform(0.2, 2.0, len(codes))
    rows = OneHotRows(codes, weights, Q, gather=gather)
    assert rows.has_missing
    theta = rng.standard_normal(parametrization.n_params)
    value, _ = objective(theta, parametrization, rows, 0.3, 0.7)
    couplings_mat, fields = parametrization.couplings(theta)
    expected = _masked_pseudo_likelihood_loop(
        codes, weights, couplings_mat.reshape(L, Q, L, Q), fields, 0.3, 0.7
    )
    # ~70 terms of order one summed in another order: ~1e-15 relative apart.
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masked_full_objective_across_blocks(
    dtype, gather, monkeypatch, global_random_seed
):
    """Blocks of 4 rows (the reused buffer, the float64 sum of their gradients)
    give the value and gradient of one block of float64 rows."""
    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng, n=23)
    weights = rng.uniform(0.2, 2.0, len(codes))
    parametrization = FullCouplings(L, Q)
    theta = 0.5 * rng.standard_normal(parametrization.n_params)
    expected = objective(
        theta, parametrization, OneHotRows(codes, weights, Q), 0.1, 0.3
    )
    monkeypatch.setattr(_model, "_PRODUCT_ROWS", 4)
    rows = OneHotRows(codes, weights, Q, dtype=dtype, block_rows=4, gather=gather)
    value, grad = objective(theta, parametrization, rows, 0.1, 0.3)
    # float32 products of order-one terms, summed in float64: ~1e-6 relative
    # per entry (about ten rounding errors of 6e-8), far below 1e-4.
    tol = 1e-12 if dtype == np.float64 else 1e-4
    assert value == pytest.approx(expected[0], rel=tol)
    assert_allclose(grad, expected[1], rtol=tol, atol=tol)


def test_masked_conditionals_are_those_of_the_sites_present(global_random_seed):
    """A sequence's conditionals are those of the exact joint of the Potts model
    of its present sites, by enumeration of that joint's states.

    Standard normal parameters give energies of a few tens at most, so both
    sides agree to ~1e-14 relative for any seed.
    """
    rng = np.random.default_rng(global_random_seed)
    parametrization = FullCouplings(L, Q)
    couplings_mat, fields = parametrization.couplings(
        rng.standard_normal(parametrization.n_params)
    )
    J = couplings_mat.reshape(L, Q, L, Q)
    codes = _gapped_codes(rng, n=12, missing=0.4)
    log_p = log_conditionals(one_hot(codes, Q), couplings_mat, fields)
    for s, row in zip(codes, log_p, strict=True):
        present = np.flatnonzero(s >= 0)
        joint = {}
        for states in itertools.product(range(Q), repeat=present.size):
            energy = sum(fields[i, a] for i, a in zip(present, states, strict=True))
            energy += sum(
                J[present[k], states[k], present[m], states[m]]
                for k in range(present.size)
                for m in range(k + 1, present.size)
            )
            joint[states] = np.exp(energy)
        for k, i in enumerate(present):
            observed = tuple(s[present])
            options = [observed[:k] + (a,) + observed[k + 1 :] for a in range(Q)]
            exact = np.array([joint[o] for o in options])
            assert_allclose(np.exp(row[i]), exact / exact.sum(), rtol=1e-10)


def test_one_hot_rows_of_missing_sites_are_zero(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng, n=9)
    expected = np.zeros((len(codes), L * Q))
    for s, row in enumerate(codes):
        for i, a in enumerate(row):
            if a >= 0:
                expected[s, i * Q + a] = 1.0
    assert_array_equal(one_hot(codes, Q), expected)
    rows = OneHotRows(codes, np.ones(len(codes)), Q, block_rows=4)
    blocks = list(rows.blocks(reuse=True))
    for k, (block, _, _, present) in enumerate(rows.blocks(reuse=True)):
        assert_array_equal(block, expected[4 * k : 4 * k + len(block)])
        assert_array_equal(present, codes[4 * k : 4 * k + len(block)] >= 0)
    assert len(blocks) == 3


# ---------------------------------------------------------------------------
# The estimator


def _gapped_text(rng, n=60):
    """Aligned strings over "-ABC" with gaps, and over "ABC" without."""
    codes = rng.integers(0, 3, size=(n, 5))
    letters = np.array(list("ABC"))[codes]
    gapped = letters.copy()
    gapped[rng.random(gapped.shape) < 0.25] = "-"
    return ["".join(r) for r in gapped], ["".join(r) for r in letters]


def test_fit_without_the_missing_state_is_the_fit_without_it(global_random_seed):
    """Data that never show the missing state fit as a model without it."""
    rng = np.random.default_rng(global_random_seed)
    _, clean = _gapped_text(rng)
    options = dict(parametrization="full", max_iter=30, sequence_identity=0.8)
    ignored = PottsPseudoLikelihood(alphabet="-ABC", missing_state="-", **options).fit(
        clean
    )
    reference = PottsPseudoLikelihood(alphabet="ABC", **options).fit(clean)
    assert_array_equal(ignored.states_, reference.states_)
    assert_array_equal(ignored.couplings_, reference.couplings_)
    assert_array_equal(ignored.fields_, reference.fields_)
    assert ignored.n_eff_ == reference.n_eff_
    # Codes: states [0, 1, 2, 3] less the missing 0 are the states [1, 2, 3].
    codes = np.array([[" ABC".index(c) for c in s] for s in clean])
    from_codes = PottsPseudoLikelihood(states=range(4), missing_state=0, **options).fit(
        codes
    )
    assert_array_equal(from_codes.states_, [1, 2, 3])
    assert_array_equal(from_codes.couplings_, reference.couplings_)


def test_fitted_objective_and_predictions_match_the_loops(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    gapped, _ = _gapped_text(rng)
    model = PottsPseudoLikelihood(
        "full", alphabet="-ABC", missing_state="-", alpha_couplings=0.5, max_iter=40
    ).fit(gapped)
    assert_array_equal(model.states_, list("ABC"))
    n_sites, q = 5, 3
    assert model.couplings_.shape == (n_sites, q, n_sites, q)
    codes = np.array([["-ABC".index(c) - 1 for c in s] for s in gapped])
    unique, counts = np.unique(codes, axis=0, return_counts=True)
    expected = _masked_pseudo_likelihood_loop(
        unique,
        counts,
        model._fitted_couplings,
        model._last_fit["fields"],
        model.alpha_fields,
        model.alpha_couplings_,
    )
    # The objective is reported from the optimiser's float32 products of
    # order-one terms over ~300 sites: ~1e-6 relative at most.
    assert model.objective_ == pytest.approx(expected, rel=1e-5)

    log_p = np.log(model.predict_proba(gapped))
    scores = model.score_samples(gapped)
    for s, row in enumerate(codes):
        logits = model.fields_.copy()
        for i in range(n_sites):
            for j in range(n_sites):
                if j != i and row[j] >= 0:
                    logits[i] += model.couplings_[i, :, j, row[j]]
        expected_log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        # float64 throughout: rounding only.
        assert_allclose(log_p[s], expected_log_p, rtol=1e-10, atol=1e-12)
        present = row >= 0
        if present.any():
            picked = expected_log_p[np.flatnonzero(present), row[present]]
            assert scores[s] == pytest.approx(picked.mean(), rel=1e-10)
        else:
            assert np.isnan(scores[s])
    # Every site is predicted, the missing ones too.
    assert set(np.unique(model.predict(gapped))) <= set("ABC")


def test_frequencies_and_weights_of_a_gapped_fit(global_random_seed):
    """plmc's -g: the start's frequencies condition on the site being present;
    the identity reweighting counts two gaps as agreeing."""
    from sklearn_attn.potts._alignment import _state_frequencies

    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng)
    codes[:, 3] = -1  # a column of gaps only: uniform
    weights = rng.uniform(0.2, 2.0, len(codes))
    frequencies = _state_frequencies(codes, weights, Q).reshape(L, Q)
    for i in range(L):
        present = codes[:, i] >= 0
        for a in range(Q):
            if present.any():
                expected = weights[codes[:, i] == a].sum() / weights[present].sum()
            else:
                expected = 1.0 / Q
            assert frequencies[i, a] == pytest.approx(expected, rel=1e-12)

    gapped, _ = _gapped_text(rng)
    options = dict(parametrization="full", max_iter=1, sequence_identity=0.7)
    as_state = PottsPseudoLikelihood(alphabet="-ABC", **options).fit(gapped)
    missing = PottsPseudoLikelihood(alphabet="-ABC", missing_state="-", **options).fit(
        gapped
    )
    assert missing.n_eff_ == as_state.n_eff_


def test_site_coverage_matches_loops(monkeypatch, global_random_seed):
    """Blocks of 8 rows: exact sums of the weights (of order one, 25 terms)."""
    from sklearn_attn.potts import _alignment

    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng)
    weights = rng.uniform(0.2, 2.0, len(codes))
    monkeypatch.setattr(_alignment, "_COVERAGE_BLOCK_BYTES", 8 * 8 * L * Q)
    coverage = _alignment._site_coverage(codes, weights, Q)
    expected = np.zeros((L, L * Q))
    for s, w in zip(codes, weights, strict=True):
        for i in range(L):
            for j in range(L):
                if s[i] >= 0 and s[j] >= 0:
                    expected[i, j * Q + s[j]] += w
    assert_allclose(coverage, expected, rtol=1e-12, atol=1e-12)
    assert _alignment._site_coverage(codes.clip(0), weights, Q) is None


@pytest.mark.parametrize("missing", [0.0, 0.3], ids=["complete", "missing"])
def test_curvature_is_the_hessian_diagonal_at_the_independent_model(
    missing, global_random_seed
):
    """The preconditioner's curvature against central differences of the
    gradient, at zero couplings and fields whose conditionals are the
    frequencies of the sequences that have the site. Both are exact there;
    the differences' error (h^2 times third derivatives of order ten) is
    ~1e-7, far below the tolerance."""
    from sklearn_attn.potts._alignment import _site_coverage, _state_frequencies

    rng = np.random.default_rng(global_random_seed)
    codes = _gapped_codes(rng, n=40, missing=missing)
    if missing == 0:
        codes = rng.integers(0, Q, size=(40, L))
    weights = rng.uniform(0.2, 2.0, len(codes))
    parametrization = FullCouplings(L, Q)
    rows = OneHotRows(codes, weights, Q)
    frequencies = _state_frequencies(codes, weights, Q)
    coverage = _site_coverage(codes, weights, Q)
    assert (coverage is None) == (missing == 0)
    curvature = parametrization.curvature(
        frequencies, weights.sum(), 0.3, 0.7, coverage
    )
    theta = np.zeros(parametrization.n_params)
    theta[: L * Q] = np.log(np.maximum(frequencies, 1e-12))
    h = 1e-4
    expected = np.empty_like(theta)
    for k in range(theta.size):
        step = np.zeros_like(theta)
        step[k] = h
        up = objective(theta + step, parametrization, rows, 0.3, 0.7)[1][k]
        down = objective(theta - step, parametrization, rows, 0.3, 0.7)[1][k]
        expected[k] = (up - down) / (2 * h)
    assert_allclose(curvature, expected, rtol=1e-5, atol=1e-5)


def test_missing_state_in_predictions_after_auto_states(global_random_seed):
    """With states='auto', the missing code need not occur in fit."""
    rng = np.random.default_rng(global_random_seed)
    codes = rng.integers(1, 4, size=(40, 4))
    model = PottsPseudoLikelihood("full", missing_state=0, max_iter=5).fit(codes)
    assert_array_equal(model.states_, [1, 2, 3])
    gapped = codes.copy()
    gapped[:, 0] = 0
    log_p = model.predict_proba(gapped)
    assert log_p.shape == (40, 4, 3)
    assert np.isin(model.predict(gapped), [1, 2, 3]).all()
    with pytest.raises(ValueError, match="state 7"):
        model.predict(np.full((1, 4), 7))


def test_missing_state_errors():
    text = ["AB-A", "BA-B", "AABB"]
    with pytest.raises(ValueError, match="missing_state='Z' is not one of"):
        PottsPseudoLikelihood(alphabet="-AB", missing_state="Z").fit(text)
    with pytest.raises(TypeError, match="one character of the alphabet"):
        PottsPseudoLikelihood(alphabet="-AB", missing_state=0).fit(text)
    with pytest.raises(TypeError, match="must be a number"):
        PottsPseudoLikelihood(missing_state="-").fit([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="not one of the states of states"):
        PottsPseudoLikelihood(states=[1, 2, 3], missing_state=0).fit([[1, 2], [2, 3]])
    with pytest.raises(ValueError, match="at least 2 are needed"):
        PottsPseudoLikelihood(alphabet="-A", missing_state="-").fit(["A-", "-A"])


def test_gapped_model_pickles_and_clones(global_random_seed):
    from sklearn.base import clone

    rng = np.random.default_rng(global_random_seed)
    gapped, _ = _gapped_text(rng, n=30)
    model = PottsPseudoLikelihood(
        "full", alphabet="-ABC", missing_state="-", max_iter=5
    ).fit(gapped)
    loaded = pickle.loads(pickle.dumps(model))
    assert_array_equal(loaded.predict_proba(gapped), model.predict_proba(gapped))
    assert clone(model).get_params()["missing_state"] == "-"

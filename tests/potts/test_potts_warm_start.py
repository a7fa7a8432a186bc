"""``warm_start`` of PottsPseudoLikelihood: continuing a fit from its parameters.

The data are small (300 sequences of 6 sites and 3 states, at most 729 distinct
rows), so that a fit to convergence takes a few hundredths of a second. Data and
initialisations come from ``global_random_seed``; every bound below holds for each
seed of 0-99, for the reason given in its test.

Two facts set the tolerances. (1) L-BFGS accepts only steps that decrease the
objective, and a warm start evaluates it first at the stored parameters, which are
the last fit's to one rounding (they are multiplied and divided by the same
preconditioner): so a warm fit of an unchanged objective can only go down, up to
that rounding. (2) A converged fit is not at the exact minimum: the stopping rule
looks at the decrease per iteration (``tol``), and the float32 products of the
objective set a floor below which no step is seen to decrease it. Two fits of the
same convex problem that end at that floor differ by up to a few ``1e-6`` in
relative objective, and their couplings by a few ``1e-3`` (measured below).
"""

import functools
import pickle

import _fake_cupy
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.datasets import make_potts_sequences

few_iterations = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning"
)

PARAMETRIZATIONS = ["full", "factored"]

# A decreasing path of coupling penalties; the default for L = 6, q = 3 is 0.1.
PENALTY_PATH = [3.0, 1.0, 0.3, 0.1]

# Relative error of re-evaluating the objective at the stored parameters: one
# rounding of the float64 parameters (1e-16 relative), which reaches the float32
# products only when a number lies on a float32 rounding boundary (then about
# 1e-11 relative, for one entry). Measured: exactly 0 in 600 re-evaluations
# (seeds 0-99, both models, after 1, 5 and 20 iterations). 1e-9 is far above
# that and far below the decrease of an iteration that these tests look at.
REEVALUATION_RTOL = 1e-9


@functools.cache
def _data(seed):
    """300 sequences of a planted 6-site ring with q = 3 (cached, never modified).

    embedding_dim = 12 and beta = 0.7, as in test_potts_estimator, keep every
    state at every site observed, so that no field runs off to the penalty's
    bound and the fits converge in tens of iterations.
    """
    X, _ = make_potts_sequences(
        n_samples=300,
        n_sites=6,
        n_states=3,
        embedding_dim=12,
        beta=0.7,
        random_state=seed,
    )
    return X


def _model(parametrization, seed, **params):
    return PottsPseudoLikelihood(parametrization, random_state=seed, **params)


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_warm_start_from_a_converged_fit_stops_at_once(
    parametrization, global_random_seed
):
    """On the same data and penalties, a warm fit continues from the solution:
    it takes few iterations and ends at the same objective.

    It cannot end above the converged objective (fact 1, up to
    REEVALUATION_RTOL), and it ends at most 2e-5 (relative) below it (fact 2:
    worst of seeds 0-99, full 5.0e-6, factored 9.8e-7). Iterations: 2 (the
    fewest the stopping rule allows) for 99 seeds of 100 with the full model,
    and 10 at worst (after a cold fit that had stopped at 13); 2 or 3 with the
    factored model, whose cold fits take 32 or more. Bounds: 15 and 6.
    """
    X = _data(global_random_seed)
    model = _model(parametrization, global_random_seed).fit(X)
    converged = model.objective_
    model.set_params(warm_start=True).fit(X)
    assert model.objective_ <= converged * (1 + REEVALUATION_RTOL)
    assert model.objective_ >= converged * (1 - 2e-5)
    assert model.n_iter_ <= (15 if parametrization == "full" else 6)


@few_iterations
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_warm_start_starts_from_the_fitted_parameters(
    parametrization, global_random_seed
):
    """With max_iter=0 the warm fit is the last fit's parameters, re-evaluated
    under the new penalty: the couplings do not move, and the objective changes
    by exactly the change of the coupling penalty,
    (alpha_new - alpha_old) / 2 * sum_{i != j} |J_ij|^2, in the fitted gauge.

    Deterministic: the tolerances are rounding (the parameters pass through a
    preconditioner once each way, and the objective is a sum of ~1e3 terms).
    """
    X = _data(global_random_seed)
    model = _model(parametrization, global_random_seed, max_iter=20).fit(X)
    couplings, fields = model.couplings_.copy(), model.fields_.copy()
    if parametrization == "full":  # symmetric: the Frobenius scores are |J_ij|
        norms = model.contact_scores(gauge="fitted", apc_correction=False)
        squared = 0.5 * (norms**2).sum()
    else:  # J = sum_k A^k (x) V^k, with zero diagonal blocks
        couplings_mat = np.einsum("kij,kab->iajb", model.attention_, model.values_)
        squared = 0.5 * (couplings_mat**2).sum()
    before = model.objective_
    model.set_params(warm_start=True, max_iter=0, alpha_couplings=1.0).fit(X)
    assert model.n_iter_ == 0
    assert_allclose(model.couplings_, couplings, rtol=1e-12, atol=1e-14)
    assert_allclose(model.fields_, fields, rtol=1e-12, atol=1e-14)
    default = 0.01 * (3 - 1) * (6 - 1)  # alpha_couplings=None: 0.01 (q-1) (L-1)
    expected = before + (1.0 - default) * squared
    assert model.objective_ == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_penalty_path_warm_starts_reach_the_cold_objective(
    parametrization, global_random_seed
):
    """Along a decreasing penalty path, warm-started fits end where fits from the
    initialisation do, in fewer iterations in all.

    Objectives (both models): at each penalty the warm fit ends no more than
    2e-5 (full) or 2e-4 (factored) above the cold fit, relative (fact 2;
    worst of seeds 0-99: 6.7e-6 and 5.7e-5; below is fine, and common). The
    factored objective is not convex, so its fits may end in different local
    minima: only objectives are compared for it.

    Parameters (full model: convex, both fits approach its one minimiser): the
    couplings differ by at most 2% in Frobenius norm (worst 0.52%), and by at
    most 0.3 times the distance between the cold fits at this and the previous
    penalty (worst 0.092), so the warm fit did move from its start to the new
    solution.

    Iterations: the warm path takes at most 0.9 times the cold path's (worst of
    seeds 0-99: full 0.71, factored 0.75).
    """
    X = _data(global_random_seed)
    warm = _model(parametrization, global_random_seed, warm_start=True)
    warm_iterations = cold_iterations = 0
    previous = None
    for alpha in PENALTY_PATH:
        warm.set_params(alpha_couplings=alpha).fit(X)
        cold = _model(parametrization, global_random_seed, alpha_couplings=alpha)
        cold.fit(X)
        warm_iterations += warm.n_iter_
        cold_iterations += cold.n_iter_
        gap = (warm.objective_ - cold.objective_) / cold.objective_
        assert gap <= (2e-5 if parametrization == "full" else 2e-4), alpha
        if parametrization == "full":
            distance = np.linalg.norm(warm.couplings_ - cold.couplings_)
            assert distance <= 0.02 * np.linalg.norm(cold.couplings_), alpha
            if previous is not None:
                assert distance <= 0.3 * np.linalg.norm(cold.couplings_ - previous)
            previous = cold.couplings_
    assert warm_iterations <= 0.9 * cold_iterations


@few_iterations
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
@pytest.mark.parametrize("first, then", [(1, 1), (1, 10), (5, 3), (20, 50)])
def test_continued_fit_never_increases_the_objective(
    parametrization, first, then, global_random_seed
):
    """fit(max_iter=first), then a warm fit(max_iter=then), then another: the
    objective after every iteration is below the one before, across the fits.

    Within a fit, the line search accepts only decreasing steps; across fits, the
    warm fit starts from the same objective up to REEVALUATION_RTOL (fact 1).
    """
    X = _data(global_random_seed)
    model = _model(parametrization, global_random_seed, max_iter=first).fit(X)
    curve = [model.objective_]
    model.set_params(warm_start=True, max_iter=then)
    for _ in range(2):
        model.fit(X)
        # Across the fits, up to the re-evaluation of the start (fact 1).
        start = curve[-1] * (1 + REEVALUATION_RTOL)
        losses = np.array(model.loss_curve_)
        assert losses.size <= then
        assert np.all(losses <= start)
        assert np.all(np.diff(losses) < 0)
        assert model.objective_ <= start
        if losses.size:
            assert model.objective_ == losses[-1]
        curve.append(model.objective_)


@few_iterations
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_warm_start_on_an_unfitted_model_is_a_plain_fit(
    parametrization, global_random_seed
):
    X = _data(global_random_seed)
    plain = _model(parametrization, global_random_seed, max_iter=30).fit(X)
    warm = _model(parametrization, global_random_seed, max_iter=30, warm_start=True)
    warm.fit(X)
    assert_array_equal(warm.couplings_, plain.couplings_)
    assert_array_equal(warm.fields_, plain.fields_)
    assert warm.loss_curve_ == plain.loss_curve_
    assert warm.n_iter_ == plain.n_iter_


@few_iterations
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_warm_start_survives_pickling(parametrization, global_random_seed):
    """A pickled model continues exactly as the original does."""
    X = _data(global_random_seed)
    model = _model(parametrization, global_random_seed, max_iter=10).fit(X)
    loaded = pickle.loads(pickle.dumps(model))
    for estimator in (model, loaded):
        estimator.set_params(warm_start=True, alpha_couplings=1.0).fit(X)
    assert_array_equal(loaded.couplings_, model.couplings_)
    assert loaded.loss_curve_ == model.loss_curve_
    again = pickle.loads(pickle.dumps(loaded))
    assert_array_equal(again.predict_proba(X[:5]), model.predict_proba(X[:5]))


@few_iterations
@pytest.mark.parametrize("parametrization", PARAMETRIZATIONS)
def test_warm_start_on_the_device_path(parametrization, monkeypatch):
    """On a device (here the NumPy-backed fake CuPy, as strict about host and
    device arrays as CuPy), a warm fit continues as on the host: the parameters
    it reads are kept on the host. The fake computes with NumPy, so the two
    runs are the same to rounding of the order of operations (with the dense
    products on the CPU too, as on the device)."""
    cupy = _fake_cupy.install(monkeypatch)
    X = _data(0)
    fits = []
    for device, codes in (("cpu", X), ("cuda", X), (None, cupy.asarray(X))):
        model = _model(
            parametrization, 0, max_iter=10, device=device, algorithm="dense"
        ).fit(codes)
        model.set_params(warm_start=True, alpha_couplings=1.0).fit(codes)  # 10 more
        fits.append(model)
    for model in fits[1:]:
        assert type(model.couplings_) is np.ndarray
        assert model.n_iter_ == fits[0].n_iter_
        assert model.objective_ == pytest.approx(fits[0].objective_, rel=1e-10)


@few_iterations
def test_new_data_of_the_same_shape_and_states_is_accepted(global_random_seed):
    """The data may change (a learning curve): the warm fit starts from the
    parameters fitted on the old data, and fits the new ones."""
    X = _data(global_random_seed)
    model = _model("full", global_random_seed, max_iter=10, warm_start=True)
    couplings = model.fit(X[:100]).couplings_
    model.set_params(max_iter=0).fit(X[100:])
    assert_allclose(model.couplings_, couplings, rtol=1e-12, atol=1e-14)
    assert model.n_eff_ == 200
    text = np.array(["AC-G", "CCAG", "-AGT", "GT-A"])
    model = PottsPseudoLikelihood(alphabet="dna", max_iter=5, warm_start=True)
    couplings = model.fit(text).couplings_
    model.set_params(max_iter=0).fit(text[::-1].tolist())  # another text form
    assert "".join(model.states_) == "-ACGT"
    assert_allclose(model.couplings_, couplings, rtol=1e-12, atol=1e-14)


def _changed(X):
    """Fits that a warm start from a fit on ``X`` (integer codes) cannot continue:
    ``(parameters, X, what the message names)``."""
    relabelled = X.copy()
    relabelled[relabelled == 2] = 7
    fewer_states = X.copy()
    fewer_states[fewer_states == 2] = 1
    return [
        ({}, X[:, :5], "6 sites; X has 5"),
        ({}, relabelled, r"states_ were \[0, 1, 2\]; X has the states \[0, 1, 7\]"),
        ({}, fewer_states, r"states_ were \[0, 1, 2\]; X has the states \[0, 1\]"),
        ({}, ["ACGTAC", "ACGTCA"], "saw integer codes; X holds strings"),
        ({"parametrization": "full"}, X, "parametrization='factored'"),
        ({"n_heads": 2}, X, "n_heads=1; got n_heads=2"),
        ({"attention": "free"}, X, "attention='softmax'"),
    ]


@few_iterations
@pytest.mark.parametrize("case", range(7))
def test_incompatible_warm_start_raises_and_keeps_the_model(case):
    """A change of shape, states, kind of input or model raises a ValueError
    naming it (scikit-learn's MLP and SGD estimators raise too), and the fitted
    model is left as it was."""
    X = _data(0)
    params, X_new, match = _changed(X)[case]
    model = _model("factored", 0, max_iter=5).fit(X)
    states, proba = model.states_.copy(), model.predict_proba(X[:3])
    model.set_params(warm_start=True, **params)
    with pytest.raises(ValueError, match=match):
        model.fit(X_new)
    assert_array_equal(model.states_, states)
    assert model.n_features_in_ == 6
    assert_array_equal(model.predict_proba(X[:3]), proba)
    # Without warm_start the same fit starts from scratch.
    model.set_params(warm_start=False).fit(X_new)


@few_iterations
def test_text_then_codes_or_another_alphabet_is_refused():
    text = ["ACGT", "CAGT", "GTCA"]
    model = PottsPseudoLikelihood(alphabet="dna", max_iter=3, warm_start=True)
    model.fit(text)
    with pytest.raises(ValueError, match="saw strings; X holds integer codes"):
        model.fit(np.array([[0, 1, 2, 3], [1, 0, 2, 3]]))
    message = r"X has the states \['A', 'C', 'G', 'U'\] \(its alphabet\)"
    with pytest.raises(ValueError, match=message):
        model.set_params(alphabet="ACGU").fit(["ACGU", "CAGU"])
    assert "".join(model.states_) == "-ACGT"

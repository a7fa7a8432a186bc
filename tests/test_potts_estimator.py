"""PottsPseudoLikelihood as a scikit-learn estimator, on synthetic and string data."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import gibbs_sample, sequence_weights
from sklearn_attn.potts._model import zero_sum_gauge


@pytest.fixture(scope="module")
def ring_data():
    return make_potts_sequences(
        n_samples=3000, n_sites=8, n_states=4, graph="ring", random_state=0
    )


def _expected_failures(estimator):
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "the check fits continuous random floats, and the model takes integer "
            "state codes only; the same equivalence is tested on codes in "
            "test_sample_weight_equivalence"
        ),
    }


@parametrize_with_checks(
    [
        PottsPseudoLikelihood(max_iter=30, random_state=0),
        PottsPseudoLikelihood("full", max_iter=30, random_state=0),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("parametrization", ["factored", "full"])
def test_predictions_are_consistent(parametrization, ring_data):
    X, _ = ring_data
    model = PottsPseudoLikelihood(parametrization, max_iter=50, random_state=0).fit(X)
    proba = model.predict_proba(X[:20])
    assert proba.shape == (20, 8, 4)
    assert_allclose(proba.sum(axis=2), 1.0)
    assert_array_equal(model.predict(X[:20]), model.states_[proba.argmax(axis=2)])
    picked = np.log(np.take_along_axis(proba, X[:20, :, None], axis=2))[..., 0]
    assert_allclose(model.score_samples(X[:20]), picked.mean(axis=1))
    assert model.score(X[:20]) == pytest.approx(picked.mean())


def test_recovers_planted_ring_couplings(ring_data):
    X, params = ring_data
    model = PottsPseudoLikelihood(random_state=0).fit(X)
    true, _ = zero_sum_gauge(
        params.beta * params.couplings, params.beta * params.fields
    )
    corr = np.corrcoef(model.couplings_.ravel(), true.ravel())[0, 1]
    # Seeded; 3000 samples of an 8-site ring, in the model class (observed ~0.98).
    assert corr > 0.9
    assert_allclose(model.attention_.sum(axis=2), 1.0)


def test_score_approaches_true_conditional_entropy(ring_data):
    X, params = ring_data
    X_test = gibbs_sample(
        params.couplings, params.fields, 3000, beta=params.beta, random_state=1
    )
    model = PottsPseudoLikelihood(random_state=0).fit(X)
    oracle = PottsPseudoLikelihood(random_state=0).fit(X)
    oracle.couplings_, oracle.fields_ = zero_sum_gauge(
        params.beta * params.couplings, params.beta * params.fields
    )
    gap = oracle.score(X_test) - model.score(X_test)
    # The learned model is at most slightly worse than the truth on fresh data.
    assert -0.01 < gap < 0.02


def test_sequence_identity_equals_explicit_weights():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 3, size=(30, 6))
    X = np.vstack([base, base[:10]])  # duplicates change the weights
    kwargs = dict(parametrization="full", max_iter=40, random_state=0)
    weights = sequence_weights(X, identity_threshold=0.8)
    by_identity = PottsPseudoLikelihood(sequence_identity=0.8, **kwargs).fit(X)
    by_weights = PottsPseudoLikelihood(**kwargs).fit(X, sample_weight=weights)
    assert_allclose(by_identity.couplings_, by_weights.couplings_)
    assert by_identity.objective_ == pytest.approx(by_weights.objective_)


def test_duplicates_merge_exactly():
    """Fitting duplicated rows equals fitting unique rows with summed weights."""
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(25, 5))
    doubled = PottsPseudoLikelihood("full", max_iter=30).fit(np.vstack([X, X]))
    weighted = PottsPseudoLikelihood("full", max_iter=30).fit(
        X, sample_weight=2 * np.ones(25)
    )
    assert doubled.objective_ == pytest.approx(weighted.objective_, rel=1e-10)


@pytest.mark.parametrize("parametrization", ["factored", "full"])
def test_sample_weight_equivalence(parametrization):
    """Integer weights (zeros included) equal repeating (or dropping) sequences."""
    rng = np.random.default_rng(4)
    X = rng.integers(0, 3, size=(30, 5))
    weights = rng.integers(0, 4, size=30)
    weights[:3] = 1  # every state keeps a positive weight
    X[:3] = [[0] * 5, [1] * 5, [2] * 5]
    kwargs = dict(parametrization=parametrization, max_iter=30, random_state=0)
    weighted = PottsPseudoLikelihood(**kwargs).fit(X, sample_weight=weights)
    repeated = PottsPseudoLikelihood(**kwargs).fit(np.repeat(X, weights, axis=0))
    assert_allclose(weighted.couplings_, repeated.couplings_, rtol=1e-7, atol=1e-9)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-9)


def test_strings_and_contacts():
    rng = np.random.default_rng(2)
    alphabet = "-ACGT"
    seqs = ["".join(rng.choice(list(alphabet), size=7)) for _ in range(60)]
    model = PottsPseudoLikelihood("full", alphabet="dna", max_iter=20).fit(seqs)
    assert "".join(model.states_) == alphabet
    assert model.predict(seqs[:3]).shape == (3, 7)
    assert set(np.unique(model.predict(seqs))) <= set(alphabet)
    scores = model.contact_scores()
    assert scores.shape == (7, 7)
    assert_allclose(scores, scores.T)
    assert model.contact_scores(apc_correction=False, exclude_states=["-"]).min() >= 0
    assert model.sample(5, random_state=0).shape == (5, 7)


def test_grid_search_over_penalty(ring_data):
    X, _ = ring_data
    search = GridSearchCV(
        PottsPseudoLikelihood(max_iter=40, random_state=0),
        {"alpha_couplings": [0.01, 100.0]},
        cv=3,
    ).fit(X[:600])
    assert search.best_params_["alpha_couplings"] == 0.01


def test_pickle_and_reproducibility(ring_data):
    X, _ = ring_data
    first = PottsPseudoLikelihood(max_iter=20, random_state=3).fit(X[:500])
    second = PottsPseudoLikelihood(max_iter=20, random_state=3).fit(X[:500])
    assert_array_equal(first.couplings_, second.couplings_)
    loaded = pickle.loads(pickle.dumps(first))
    assert_array_equal(loaded.predict_proba(X[:5]), first.predict_proba(X[:5]))


@pytest.mark.parametrize(
    "X, match",
    [
        (["ACGT", "ACG"], "aligned length|length"),
        (["ACGZ", "ACGT"], "Z"),
        (np.array([[0, 1, np.nan], [1, 0, 1]]), "NaN"),
        (np.array([[0], [1]]), "at least 2 sites"),
        (np.array([[0.5, 1], [1, 0]]), "integer"),
    ],
)
def test_bad_input_at_fit(X, match):
    with pytest.raises(ValueError, match=match):
        PottsPseudoLikelihood(alphabet="dna", max_iter=5).fit(X)


def test_negative_weights_and_unseen_states():
    X = np.array([[0, 1, 2], [1, 0, 1], [2, 2, 0]])
    with pytest.raises(ValueError, match="sample_weight"):
        PottsPseudoLikelihood(max_iter=5).fit(X, sample_weight=[1, -1, 1])
    model = PottsPseudoLikelihood(max_iter=5).fit(X)
    with pytest.raises(ValueError, match="state 7 .* not seen in fit"):
        model.predict(np.array([[0, 7, 1]]))
    with pytest.raises(ValueError, match="fitted on integer codes"):
        model.predict(["ACG"])

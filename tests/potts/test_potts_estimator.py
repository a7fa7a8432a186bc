"""PottsPseudoLikelihood as a scikit-learn estimator, on synthetic and string data.

Data, initialisations and samplers are seeded from ``global_random_seed``; each
statistical tolerance holds for every seed of the sweep, for the reason given in
the test. Fits that deliberately stop after a few iterations ignore the
ConvergenceWarning.
"""

import functools
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import conditional_log_probs, gibbs_sample, sequence_weights
from sklearn_attn.potts._model import zero_sum_gauge

few_iterations = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning"
)


@functools.cache
def _ring_data(seed):
    """3000 training and 3000 test sequences of a planted 8-site ring, q = 4.

    embedding_dim = 12 keeps the colour similarity U near the identity, and beta =
    0.7 the couplings moderate, so that for every seed each colour keeps an exact
    marginal above 0.02 (with the defaults, embedding_dim = q and beta = 1, some
    seeds order into one colour and never show another). Cached: several tests
    read the same data, none modifies it.
    """
    rng = np.random.RandomState(seed)
    X, params = make_potts_sequences(
        n_samples=3000,
        n_sites=8,
        n_states=4,
        graph="ring",
        embedding_dim=12,
        beta=0.7,
        random_state=rng,
    )
    X_test = gibbs_sample(
        params.couplings, params.fields, 3000, beta=params.beta, random_state=rng
    )
    return X, params, X_test


@functools.cache
def _fitted_on_ring(seed):
    """The default model fitted (to convergence) on ``_ring_data(seed)``."""
    X, _, _ = _ring_data(seed)
    return PottsPseudoLikelihood(random_state=seed).fit(X)


@few_iterations
@pytest.mark.parametrize("parametrization", ["factored", "full"])
def test_predictions_are_consistent(parametrization, global_random_seed):
    X, _, _ = _ring_data(global_random_seed)
    model = PottsPseudoLikelihood(
        parametrization, max_iter=50, random_state=global_random_seed
    ).fit(X)
    proba = model.predict_proba(X[:20])
    assert proba.shape == (20, 8, 4)
    assert_allclose(proba.sum(axis=2), 1.0)
    assert_array_equal(model.predict(X[:20]), model.states_[proba.argmax(axis=2)])
    picked = np.log(np.take_along_axis(proba, X[:20, :, None], axis=2))[..., 0]
    assert_allclose(model.score_samples(X[:20]), picked.mean(axis=1))
    assert model.score(X[:20]) == pytest.approx(picked.mean())


def test_recovers_planted_ring_couplings(global_random_seed):
    """3000 samples of a planted 8-site ring, in the model class (one softmax head
    represents it): the fitted couplings correlate with the truth above 0.95.

    A bound set from the sweep, with a clear margin: the correlation is 0.989 at
    worst over seeds 0-99, 0.998 typically.
    """
    _, params, _ = _ring_data(global_random_seed)
    model = _fitted_on_ring(global_random_seed)
    true, _ = zero_sum_gauge(
        params.beta * params.couplings, params.beta * params.fields
    )
    corr = np.corrcoef(model.couplings_.ravel(), true.ravel())[0, 1]
    assert corr > 0.95
    assert_allclose(model.attention_.sum(axis=2), 1.0)


def test_score_approaches_true_conditional_entropy(global_random_seed):
    """On fresh data the fitted model scores almost as well as the true model.

    The gap is the mean over test sequences of d = true - fitted mean
    log-conditional. Given the fitted model, E[d] is a mean KL divergence between
    conditionals, so E[gap] >= 0: gap > -6 standard errors, the standard error
    estimated over the 1000 independent chains of the test set (a chain's records
    are averaged first, so their correlation is accounted for), fails with
    probability ~1e-9. From above, the excess risk of a well-specified fit of
    p = 112 parameters is about p / (2 n L) = 0.0023 nats; the bound 0.01 leaves a
    clear margin over the sweep (worst of seeds 0-99: 0.0027; the lower bound's
    worst is -0.7 standard errors).
    """
    _, params, X_test = _ring_data(global_random_seed)
    model = _fitted_on_ring(global_random_seed)
    true_log_p = conditional_log_probs(
        X_test, params.couplings, params.fields, params.beta
    )
    true_scores = np.take_along_axis(true_log_p, X_test[..., None], 2)[..., 0]
    d = true_scores.mean(axis=1) - model.score_samples(X_test)
    # Row k * 1000 + c of the test set is the k-th record of chain c.
    per_chain = d.reshape(-1, 1000).mean(axis=0)
    standard_error = per_chain.std(ddof=1) / np.sqrt(per_chain.size)
    assert -6 * standard_error < d.mean() < 0.01


@few_iterations
def test_sequence_identity_equals_explicit_weights(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    base = rng.integers(0, 3, size=(30, 6))
    X = np.vstack([base, base[:10]])  # duplicates change the weights
    kwargs = dict(parametrization="full", max_iter=40, random_state=global_random_seed)
    weights = sequence_weights(X, identity_threshold=0.8)
    by_identity = PottsPseudoLikelihood(sequence_identity=0.8, **kwargs).fit(X)
    by_weights = PottsPseudoLikelihood(**kwargs).fit(X, sample_weight=weights)
    assert_allclose(by_identity.couplings_, by_weights.couplings_)
    assert by_identity.objective_ == pytest.approx(by_weights.objective_)


@few_iterations
def test_duplicates_merge_exactly(global_random_seed):
    """Fitting duplicated rows equals fitting unique rows with summed weights."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.integers(0, 3, size=(25, 5))
    doubled = PottsPseudoLikelihood("full", max_iter=30).fit(np.vstack([X, X]))
    weighted = PottsPseudoLikelihood("full", max_iter=30).fit(
        X, sample_weight=2 * np.ones(25)
    )
    assert doubled.objective_ == pytest.approx(weighted.objective_, rel=1e-10)


@few_iterations
@pytest.mark.parametrize("parametrization", ["factored", "full"])
def test_sample_weight_equivalence(parametrization, global_random_seed):
    """Integer weights (zeros included) equal repeating (or dropping) sequences."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.integers(0, 3, size=(30, 5))
    weights = rng.integers(0, 4, size=30)
    weights[:3] = 1  # every state keeps a positive weight
    X[:3] = [[0] * 5, [1] * 5, [2] * 5]
    kwargs = dict(
        parametrization=parametrization, max_iter=30, random_state=global_random_seed
    )
    weighted = PottsPseudoLikelihood(**kwargs).fit(X, sample_weight=weights)
    repeated = PottsPseudoLikelihood(**kwargs).fit(np.repeat(X, weights, axis=0))
    assert_allclose(weighted.couplings_, repeated.couplings_, rtol=1e-7, atol=1e-9)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-9)


@few_iterations
def test_strings_and_contacts(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
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
    assert model.sample(5, random_state=global_random_seed).shape == (5, 7)


@few_iterations
def test_grid_search_over_penalty(global_random_seed):
    # A penalty of 1e4 (against a data term of 800 sequences per fold) flattens
    # the couplings, so the small penalty wins by about the information that the
    # couplings carry, 0.029 nats per site for the weakest planted model of seeds
    # 0-99 (exact enumeration). Measured: it wins by 0.029 or more, at least 7.7
    # standard errors of the 1200 validation scores.
    X, _, _ = _ring_data(global_random_seed)
    search = GridSearchCV(
        PottsPseudoLikelihood(max_iter=40, random_state=global_random_seed),
        {"alpha_couplings": [0.01, 1e4]},
        cv=3,
    ).fit(X[:1200])
    assert search.best_params_["alpha_couplings"] == 0.01


@few_iterations
def test_pickle_and_reproducibility(global_random_seed):
    X, _, _ = _ring_data(global_random_seed)
    kwargs = dict(max_iter=20, random_state=global_random_seed)
    first = PottsPseudoLikelihood(**kwargs).fit(X[:500])
    second = PottsPseudoLikelihood(**kwargs).fit(X[:500])
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
        PottsPseudoLikelihood(alphabet="dna", unknown_letters="error", max_iter=5).fit(
            X
        )


@few_iterations
def test_negative_weights_and_unseen_states():
    X = np.array([[0, 1, 2], [1, 0, 1], [2, 2, 0]])
    with pytest.raises(ValueError, match="sample_weight"):
        PottsPseudoLikelihood(max_iter=5).fit(X, sample_weight=[1, -1, 1])
    model = PottsPseudoLikelihood(max_iter=5).fit(X)
    with pytest.raises(ValueError, match="state 7 .* not seen in fit"):
        model.predict(np.array([[0, 7, 1]]))
    with pytest.raises(ValueError, match="fitted on integer codes"):
        model.predict(["ACG"])


@few_iterations
@pytest.mark.parametrize("parametrization", ["factored", "full"])
def test_integer_penalties_equal_float_penalties(parametrization, global_random_seed):
    """alpha_couplings=1 is alpha_couplings=1.0 (an int once made the full model's
    penalty vector an integer array, so the field penalty 0.01 became 0)."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.integers(0, 3, size=(40, 5))
    kwargs = dict(max_iter=20, random_state=global_random_seed)
    as_int = PottsPseudoLikelihood(parametrization, alpha_couplings=1, **kwargs)
    as_float = PottsPseudoLikelihood(parametrization, alpha_couplings=1.0, **kwargs)
    assert as_int.fit(X).objective_ == as_float.fit(X).objective_
    assert_array_equal(as_int.couplings_, as_float.couplings_)
    both_int = PottsPseudoLikelihood(
        parametrization, alpha_couplings=2, alpha_fields=1, **kwargs
    ).fit(X)
    both_float = PottsPseudoLikelihood(
        parametrization, alpha_couplings=2.0, alpha_fields=1.0, **kwargs
    ).fit(X)
    assert_array_equal(both_int.fields_, both_float.fields_)


@few_iterations
@pytest.mark.parametrize("weight_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code_dtype", [np.int8, np.int64, np.float32])
def test_dtypes_and_inputs_left_untouched(weight_dtype, code_dtype):
    """Codes are labels: their dtype is that of states_ and of the predicted
    states; parameters, probabilities and scores are float64. Neither X nor
    sample_weight is modified (nor converted in place)."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(40, 5)).astype(code_dtype)
    weights = rng.uniform(0.5, 2.0, size=40).astype(weight_dtype)
    X_before, weights_before = X.copy(), weights.copy()
    model = PottsPseudoLikelihood(max_iter=5, random_state=0)
    model.fit(X, sample_weight=weights)
    model.score(X, sample_weight=weights)
    assert_array_equal(X, X_before)
    assert_array_equal(weights, weights_before)
    assert X.dtype == code_dtype and weights.dtype == weight_dtype
    assert model.states_.dtype == code_dtype
    assert model.predict(X).dtype == code_dtype
    assert model.sample(2, burn_in=1).dtype == code_dtype
    for array in (
        model.predict_proba(X),
        model.score_samples(X),
        model.contact_scores(),
        model.fields_,
        model.couplings_,
        model.attention_,
        model.values_,
    ):
        assert array.dtype == np.float64

"""The states the estimators are given (``states=``), and what the fit reports.

References: the same fit on aligned text over the alphabet (the states of text are
the alphabet's letters, present or not), and the parameter counts of the two
parametrisations written out by hand.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.potts import VanillaAttentionPseudoLikelihood, decode_sequences

ESTIMATORS = [
    lambda **kw: PottsPseudoLikelihood(
        "full", max_iter=15, random_state=0, tol=0, **kw
    ),
    lambda **kw: PottsPseudoLikelihood(
        n_heads=2, max_iter=15, random_state=0, tol=0, **kw
    ),
    lambda **kw: VanillaAttentionPseudoLikelihood(
        embedding_dim=3, max_iter=15, random_state=0, tol=0, **kw
    ),
]


def _codes(seed, n=40, length=5, used=(0, 1, 3)):
    """Codes over the DNA alphabet ``-ACGT`` that never use states 2 and 4."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.asarray(used), size=(n, length))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("make", ESTIMATORS)
def test_given_states_fit_as_text_over_the_alphabet(make, global_random_seed):
    codes = _codes(global_random_seed)
    on_codes = make(states=range(5)).fit(codes)
    on_text = make(alphabet="dna").fit(decode_sequences(codes, "dna"))
    assert_array_equal(on_codes.states_, np.arange(5))
    assert on_codes.n_iter_ == on_text.n_iter_
    assert on_codes.objective_ == on_text.objective_
    assert_array_equal(on_codes.loss_curve_, on_text.loss_curve_)
    assert_array_equal(
        on_codes.predict_proba(codes),
        on_text.predict_proba(decode_sequences(codes, "dna")),
    )
    # The states the data lack are states of the model all the same.
    assert on_codes.predict_proba(codes).shape == (len(codes), 5, 5)
    auto = make().fit(codes)
    assert_array_equal(auto.states_, [0, 1, 3])


@pytest.mark.parametrize(
    "states",
    [[0], [1, 1, 2], [2, 1, 0], [[0, 1], [2, 3]], ["a", "b"], [0, np.nan], [True]],
)
def test_bad_states_are_refused_by_name(states):
    with pytest.raises(ValueError, match="states must be 'auto' or at least 2"):
        PottsPseudoLikelihood(states=states, max_iter=1).fit(_codes(0))
    with pytest.raises(ValueError, match="'states' parameter"):
        PottsPseudoLikelihood(states=3, max_iter=1).fit(_codes(0))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_codes_outside_the_given_states_are_refused():
    codes = _codes(0)
    with pytest.raises(ValueError, match="not given in states; the states are"):
        PottsPseudoLikelihood(states=[0, 1, 2], max_iter=1).fit(codes)
    model = PottsPseudoLikelihood(states=range(4), max_iter=2).fit(codes)
    with pytest.raises(ValueError, match="not seen in fit"):
        model.predict(np.full((1, 5), 4))


def test_states_are_for_codes_only():
    with pytest.raises(ValueError, match="states applies to integer codes"):
        PottsPseudoLikelihood(states=range(5), alphabet="dna").fit(["ACGT", "A-GT"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_n_parameters_counts_the_free_parameters():
    codes = _codes(0)  # L = 5 sites, q = 3 states
    L, q = 5, 3
    full = PottsPseudoLikelihood("full", max_iter=2).fit(codes)
    assert full.n_parameters_ == L * q + L * (L - 1) // 2 * q * q
    factored = PottsPseudoLikelihood(n_heads=2, max_iter=2).fit(codes)
    assert factored.n_parameters_ == L * q + 2 * (L * L + q * q)

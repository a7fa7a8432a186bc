"""Vanilla self-attention on masked tokens: the core against brute force, the estimator.

The core (:mod:`sklearn_attn.potts._vanilla`) is checked against a loop that
builds each masked copy of each sequence and runs the layer on it, and its
gradient against central finite differences, on codes, weights and parameters
drawn from ``global_random_seed``; each tolerance is exact up to rounding and
holds for any seed (the reason is given next to it).
"""

import warnings

import numpy as np
import pytest
from _strategies import (
    INVALID_RANDOM_STATES,
    Expect,
    check_contract,
    examples,
    hyper_parameters,
    sample_weights,
)
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from test_properties_potts import (
    ALPHABET_NAMES,
    _log_probabilities,
    _probabilities,
    code_inputs,
    sequence_inputs,
)

from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import VanillaAttentionPseudoLikelihood
from sklearn_attn.potts._vanilla import VanillaAttention

L, Q, D = 4, 3, 5

few_iterations = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning"
)


def _tiny(rng, n=7):
    layer = VanillaAttention(L, Q, D)
    codes = rng.integers(0, Q, size=(n, L))
    weights = rng.uniform(0.2, 2.0, n)
    # Random parameters of order one: scores and logits of a few units.
    theta = layer.initial(np.random.RandomState(rng.integers(2**31)))
    theta += 0.5 * rng.standard_normal(layer.n_params)
    return layer, codes, weights, theta


def _layer_loop(layer, theta, codes):
    """log p(s_i = a | s_-i) by running the layer on every masked copy in turn."""
    p = layer.split(theta)
    n = codes.shape[0]
    out = np.empty((n, L, Q))
    for s in range(n):
        for i in range(L):
            x = [p["token"][codes[s, j]] + p["position"][j] for j in range(L)]
            x[i] = p["mask"] + p["position"][i]  # the masked site's token replaced
            query = x[i] @ p["query"]
            scores = np.array([query @ (x[j] @ p["key"]) for j in range(L)])
            scores /= np.sqrt(D)
            a = np.exp(scores - scores.max())
            a /= a.sum()
            attended = sum(a[j] * (x[j] @ p["value"]) for j in range(L))
            z = (x[i] + attended) @ p["output"] + p["bias"]
            out[s, i] = z - z.max() - np.log(np.exp(z - z.max()).sum())
    return out


def test_log_conditionals_match_loops(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    layer, codes, _, theta = _tiny(rng)
    # Entries of order one computed in another order: ~1e-15 apart.
    assert_allclose(
        layer.log_conditionals(theta, codes),
        _layer_loop(layer, theta, codes),
        rtol=1e-12,
        atol=1e-12,
    )


def test_objective_matches_loops(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    layer, codes, weights, theta = _tiny(rng)
    value, _ = layer.objective(theta, [(codes, weights)], 0.3)
    log_p = _layer_loop(layer, theta, codes)
    picked = np.take_along_axis(log_p, codes[:, :, None], axis=2)[:, :, 0]
    # The penalty leaves out the output bias, the last q parameters.
    expected = -weights @ picked.sum(axis=1) + 0.15 * (theta[:-Q] ** 2).sum()
    # ~30 terms of order one, and a penalty of ~100: ~1e-15 relative apart.
    assert value == pytest.approx(expected, rel=1e-12)


def test_gradient_matches_finite_differences(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    layer, codes, weights, theta = _tiny(rng)
    _, grad = layer.objective(theta, [(codes, weights)], 0.1)
    eps = 1e-6
    numeric = np.empty_like(theta)
    for k in range(theta.size):
        step = np.zeros_like(theta)
        step[k] = eps
        plus, _ = layer.objective(theta + step, [(codes, weights)], 0.1)
        minus, _ = layer.objective(theta - step, [(codes, weights)], 0.1)
        numeric[k] = (plus - minus) / (2 * eps)
    # Central differences: truncation ~eps^2 * (third derivative, a few tens)
    # ~1e-10, rounding ~1e-16 |f| / eps ~ 1e-8 (|f| ~ 50-100 for any seed):
    # both far below 1e-6.
    assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


def test_objective_does_not_depend_on_the_blocks(global_random_seed):
    """Blocks of 1, 3 or all rows: the same sums in another order (~1e-15)."""
    rng = np.random.default_rng(global_random_seed)
    layer, codes, weights, theta = _tiny(rng)
    value, grad = layer.objective(theta, [(codes, weights)], 0.1)
    for size in (1, 3):
        blocks = [
            (codes[k : k + size], weights[k : k + size])
            for k in range(0, len(codes), size)
        ]
        value_b, grad_b = layer.objective(theta, blocks, 0.1)
        assert value_b == pytest.approx(value, rel=1e-12)
        assert_allclose(grad_b, grad, rtol=1e-10, atol=1e-12)


def test_split_and_join_are_inverse(global_random_seed):
    layer = VanillaAttention(L, Q, D)
    theta = np.random.default_rng(global_random_seed).standard_normal(layer.n_params)
    parts = layer.split(theta)
    assert parts["token"].shape == (Q, D) and parts["output"].shape == (D, Q)
    assert_array_equal(layer.join(parts), theta)


# -- the estimator ------------------------------------------------------------------


def _sequences(seed, n=300):
    X, _ = make_potts_sequences(
        n_samples=n,
        n_sites=5,
        n_states=3,
        embedding_dim=9,
        beta=0.7,
        random_state=seed,
    )
    return X


@few_iterations
def test_predictions_are_consistent(global_random_seed):
    X = _sequences(global_random_seed)
    model = VanillaAttentionPseudoLikelihood(
        max_iter=30, random_state=global_random_seed
    ).fit(X)
    assert model.embedding_dim_ == 5 + model.states_.size
    proba = model.predict_proba(X[:20])
    assert proba.shape == (20, 5, model.states_.size)
    assert_allclose(proba.sum(axis=2), 1.0)
    assert_array_equal(model.predict(X[:20]), model.states_[proba.argmax(axis=2)])
    codes = np.searchsorted(model.states_, X[:20])
    picked = np.log(np.take_along_axis(proba, codes[:, :, None], axis=2))[..., 0]
    assert_allclose(model.score_samples(X[:20]), picked.mean(axis=1))
    assert model.score(X[:20]) == pytest.approx(picked.mean())
    # The fitted attributes are the layer's parameters: the core agrees.
    layer = VanillaAttention(5, model.states_.size, model.embedding_dim_)
    theta = layer.join(
        {
            "token": model.token_embedding_,
            "mask": model.mask_embedding_,
            "position": model.position_embedding_,
            "query": model.query_weights_,
            "key": model.key_weights_,
            "value": model.value_weights_,
            "output": model.output_weights_,
            "bias": model.output_bias_,
        }
    )
    assert_allclose(np.exp(layer.log_conditionals(theta, codes)), proba, rtol=1e-12)


def test_fit_decreases_the_objective_and_keeps_the_best_start(global_random_seed):
    """Every start ends below where it began, and the kept one is the lowest.

    L-BFGS accepts only steps that decrease the objective, so the final value
    of each start is at most its initial one, for any seed.
    """
    X = _sequences(global_random_seed, n=200)
    model = VanillaAttentionPseudoLikelihood(
        embedding_dim=6, max_iter=15, n_init=3, random_state=global_random_seed
    )
    with pytest.warns(ConvergenceWarning):
        model.fit(X)
    assert model.init_objectives_.shape == (3,)
    assert model.best_init_ == int(np.argmin(model.init_objectives_))
    assert model.objective_ == model.init_objectives_[model.best_init_]
    assert model.loss_curve_[-1] == pytest.approx(model.objective_)
    assert np.all(np.diff(model.loss_curve_) <= 0)
    # The first start does not depend on how many follow it.
    single = VanillaAttentionPseudoLikelihood(
        embedding_dim=6, max_iter=15, n_init=1, random_state=global_random_seed
    )
    with pytest.warns(ConvergenceWarning):
        single.fit(X)
    assert single.init_objectives_[0] == model.init_objectives_[0]


@few_iterations
def test_sample_weight_equivalence(global_random_seed):
    """Integer weights fit as repeated sequences: the same distinct sequences
    and weights reach the optimiser, so the fits are identical."""
    X = _sequences(global_random_seed, n=60)
    weights = np.random.default_rng(global_random_seed).integers(0, 3, len(X))
    kwargs = dict(embedding_dim=4, max_iter=10, random_state=0)
    weighted = VanillaAttentionPseudoLikelihood(**kwargs).fit(X, sample_weight=weights)
    repeated = VanillaAttentionPseudoLikelihood(**kwargs).fit(
        np.repeat(X, weights, axis=0)
    )
    assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-12)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-10)


@few_iterations
def test_text_input():
    sequences = ["ACDA", "CADD", "DDCA", "ACCA", "AADC"] * 4
    model = VanillaAttentionPseudoLikelihood(
        alphabet="ACD", embedding_dim=3, max_iter=5, random_state=0
    ).fit(sequences)
    assert_array_equal(model.states_, list("ACD"))
    assert model.predict(sequences[:2]).shape == (2, 4)
    with pytest.raises(ValueError, match="integer codes"):
        model.predict_proba(np.zeros((2, 4), dtype=int))


@few_iterations
def test_agrees_on_the_device(cupy):
    X = _sequences(0, n=120)
    kwargs = dict(embedding_dim=5, max_iter=10, random_state=0)
    cpu = VanillaAttentionPseudoLikelihood(device="cpu", **kwargs).fit(X)
    gpu = VanillaAttentionPseudoLikelihood(device="cuda", **kwargs).fit(X)
    assert type(gpu.token_embedding_) is np.ndarray
    assert gpu.n_iter_ == cpu.n_iter_
    # The same float64 operations in another order: ~1e-15 per evaluation,
    # grown by ten iterations of L-BFGS to far less than 1e-8.
    assert gpu.objective_ == pytest.approx(cpu.objective_, rel=1e-10)
    assert_allclose(gpu.predict_proba(X), cpu.predict_proba(X), rtol=1e-8, atol=1e-12)
    follow = gpu.set_params(device=None)
    out = follow.predict_proba(cupy.asarray(X))
    assert_allclose(out.get(), cpu.predict_proba(X), rtol=1e-8, atol=1e-12)


# -- the input contract (Hypothesis), with the strategies of the Potts estimator ----

VANILLA_SPEC = {
    "embedding_dim": ([None, 2, 5], [0, -1, 2.5]),
    "alpha": ([0.01, 0.0, 1.0], [-1.0, np.nan, "0"]),
    "sequence_identity": ([None, 0.8, 1.0], [0.0, 1.5]),
    "max_iter": ([3, 0, 1], [-1, 2.5]),
    "tol": ([1e-7, 0.0, 1e-2], [-1.0, np.nan]),
    "n_init": ([1, 2], [0, 1.5]),
    "random_state": ([0, 1], INVALID_RANDOM_STATES),
}


@examples(2)
@given(data=st.data())
def test_fit_contract(data):
    """fit on codes or text in any form, then every prediction on the same
    data: the error contract of ``_strategies.check_contract``, as for
    PottsPseudoLikelihood."""
    params, verdict = data.draw(hyper_parameters(VANILLA_SPEC), label="params")
    if data.draw(st.booleans(), label="text"):
        alphabet = data.draw(st.sampled_from(ALPHABET_NAMES), label="alphabet")
        X, _, n, L, x_verdict = data.draw(sequence_inputs(alphabet), label="X")
    else:
        alphabet = "protein"
        X, n, L, x_verdict = data.draw(code_inputs(), label="X")
    verdict |= x_verdict
    sample_weight = data.draw(sample_weights(n), label="sample_weight")
    verdict |= sample_weight.verdict
    model = VanillaAttentionPseudoLikelihood(**params, alphabet=alphabet)

    def call():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, sample_weight=sample_weight.value)
        q = len(model.states_)
        return [
            Expect("predict", model.predict(X), shape=(n, L), dtypes=None),
            Expect(
                "predict_proba",
                model.predict_proba(X),
                shape=(n, L, q),
                check=_probabilities,
            ),
            Expect(
                "score_samples",
                model.score_samples(X),
                shape=(n,),
                check=_log_probabilities,
            ),
            Expect("score", model.score(X), shape=(), dtypes=None),
        ]

    check_contract(
        call, verdict=verdict, inputs=[X, sample_weight.value], fitted=[model]
    )

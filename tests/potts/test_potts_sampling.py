"""Gibbs sampling and exact enumeration of Potts models against slow references.

The random data of every test (models, codes, the sampler's random numbers) come
from ``global_random_seed``. Statistical checks hold for every seed: each
tolerance is derived from the sampling error, with a margin that makes a failure
anywhere in the 100-seed sweep negligible, and is stated next to the check with the
error it would catch.
"""

import functools
import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn._backend import Device
from sklearn_attn.potts import (
    _sampling,
    conditional_log_probs,
    enumerate_states,
    exact_conditional_entropy,
    exact_distribution,
    gibbs_sample,
    zero_sum_gauge,
)
from sklearn_attn.potts._sampling import _GibbsChains

# -- models and slow references -----------------------------------------------------


def _zero_diagonal(J):
    for i in range(J.shape[0]):
        J[i, :, i, :] = 0.0
    return J


def _dense_model(L, q, seed, scale=1.0, field_scale=0.5, symmetric=True):
    """Generic couplings (every pair of sites, every pair of states) and fields."""
    rng = np.random.default_rng(seed)
    J = scale * rng.standard_normal((L, q, L, q))
    if symmetric:
        J = (J + J.transpose(2, 3, 0, 1)) / 2
    h = field_scale * rng.standard_normal((L, q))
    return _zero_diagonal(J), h


def _ring_model(L, q, seed, field_scale=0.5):
    """Nearest-neighbour ring with a random symmetric colour similarity."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((q, q))
    U = E @ E.T / q
    J = np.zeros((L, q, L, q))
    for i in range(L):
        j = (i + 1) % L
        J[i, :, j, :] = U
        J[j, :, i, :] = U.T
    return J, field_scale * rng.standard_normal((L, q))


def _log_weight_loop(s, J, h, beta):
    """beta * (sum_{i<j} J[i, s_i, j, s_j] + sum_i h[i, s_i]) by loops."""
    total = 0.0
    for i in range(len(s)):
        total += h[i, s[i]]
        for j in range(i + 1, len(s)):
            total += J[i, s[i], j, s[j]]
    return beta * total


def _exact_loop(J, h, beta):
    L, q = h.shape
    states = list(itertools.product(range(q), repeat=L))
    weights = np.array([np.exp(_log_weight_loop(s, J, h, beta)) for s in states])
    return np.array(states), weights / weights.sum()


def _conditional_loop(s, J, h, beta):
    """(L, q) array of log p(s_i = a | s_-i) by loops."""
    L, q = h.shape
    out = np.empty((L, q))
    for i in range(L):
        logits = [
            beta * (h[i, a] + sum(J[i, a, j, s[j]] for j in range(L) if j != i))
            for a in range(q)
        ]
        top = max(logits)
        norm = top + np.log(sum(np.exp(v - top) for v in logits))
        out[i] = [v - norm for v in logits]
    return out


def _state_index(codes, q):
    L = codes.shape[1]
    return codes @ (q ** np.arange(L - 1, -1, -1))


def _empirical(codes, q):
    return np.bincount(_state_index(codes, q), minlength=q ** codes.shape[1]) / len(
        codes
    )


def _total_variation(p, r):
    return 0.5 * np.abs(p - r).sum()


def _tv_tolerance(p, n, inflation=2.0, k=6.0):
    """A bound that TV(empirical law of ``n`` Gibbs draws, ``p``) stays below.

    For n independent draws each frequency is ~ N(p_s, p_s (1 - p_s) / n), so
    E[TV] ~ (1/2) sum_s sqrt(2 p_s (1 - p_s) / (pi n)) and sd[TV] is at most about
    s_n = (1/2) sqrt((1 - 2 / pi) / n). Records of one chain are correlated, which
    inflates every variance by a factor that the callers bound by ``inflation``:
    the bound is E[TV] + k s_n for n / inflation draws. With the defaults it lies
    9.8 to 13 standard deviations s_n above the i.i.d. mean of TV in these tests
    (11.6 or more in the generator's). TV's right tail is heavier than a normal
    one when many states are rare (by simulation, 5 s_n are exceeded with
    probability 6e-6 for the 256-state ring below, against 3e-7 for a normal law),
    but it still falls by over 10 per standard deviation, so the 100-seed sweep
    fails with negligible probability.
    """
    n_eff = n / inflation
    mean = 0.5 * np.sqrt(2 * p * (1 - p) / (np.pi * n_eff)).sum()
    return mean + k * 0.5 * np.sqrt((1 - 2 / np.pi) / n_eff)


def _bernstein_tolerance(p, n, delta=1e-9):
    """t with P(|frequency - p| >= t) <= delta for n independent draws.

    Bernstein's inequality, P(|f - p| >= t) <= 2 exp(-n t^2 / (2 (v + t / 3))) with
    v = p (1 - p), solved for t; valid for any p, however small.
    """
    log_term = np.log(2 / delta)
    return log_term / (3 * n) + np.sqrt(
        (log_term / (3 * n)) ** 2 + 2 * log_term * p * (1 - p) / n
    )


# -- exact enumeration --------------------------------------------------------------


def test_enumerate_states_lexicographic():
    states = enumerate_states(3, 4)
    assert states.shape == (64, 3)
    assert states.dtype == np.int64
    assert_array_equal(states, list(itertools.product(range(4), repeat=3)))
    assert_array_equal(enumerate_states(1, 1), [[0]])


def test_enumerate_states_refuses_large_models():
    with pytest.raises(ValueError, match=r"2\*\*22 = 4194304 states"):
        enumerate_states(22, 2)
    with pytest.raises(ValueError, match="at most 2097152"):
        exact_distribution(np.zeros((7, 10, 7, 10)), np.zeros((7, 10)))


@pytest.mark.parametrize("beta", [0.0, 0.7, 2.0])
def test_exact_distribution_against_loop(beta, global_random_seed):
    J, h = _dense_model(3, 3, seed=global_random_seed)
    states, p = exact_distribution(J, h, beta)
    expected_states, expected = _exact_loop(J, h, beta)
    assert_array_equal(states, expected_states)
    assert_allclose(p, expected, rtol=1e-12)
    assert_allclose(p.sum(), 1.0, rtol=1e-14)


def test_exact_conditionals_are_those_of_the_joint_law(global_random_seed):
    # With symmetric J, conditional_log_probs must be P(s_i = a, s_-i) normalised
    # over a: checks the factor 1/2 between sum_{i<j} and the conditionals.
    J, h = _dense_model(3, 3, seed=global_random_seed)
    beta = 0.8
    states, p = exact_distribution(J, h, beta)
    q = 3
    log_probs = conditional_log_probs(states, J, h, beta)
    for n, s in enumerate(states):
        for i in range(3):
            joint = []
            for a in range(q):
                t = s.copy()
                t[i] = a
                joint.append(p[_state_index(t[None], q)[0]])
            assert_allclose(
                np.exp(log_probs[n, i]), np.array(joint) / sum(joint), rtol=1e-10
            )


@pytest.mark.parametrize("symmetric", [True, False])
def test_conditional_log_probs_against_loop(symmetric, global_random_seed):
    J, h = _dense_model(4, 3, seed=global_random_seed, symmetric=symmetric)
    codes = np.random.default_rng(global_random_seed).integers(0, 3, size=(6, 4))
    beta = 1.3
    log_probs = conditional_log_probs(codes, J, h, beta)
    assert log_probs.shape == (6, 4, 3)
    expected = np.array([_conditional_loop(s, J, h, beta) for s in codes])
    assert_allclose(log_probs, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("beta", [0.5, 1.5])
def test_exact_conditional_entropy_against_loop(beta, global_random_seed):
    J, h = _dense_model(3, 3, seed=global_random_seed)
    states, p = _exact_loop(J, h, beta)
    expected = 0.0
    for s, weight in zip(states, p, strict=True):
        log_cond = _conditional_loop(s, J, h, beta)
        expected -= weight * np.mean([log_cond[i, s[i]] for i in range(3)])
    assert_allclose(exact_conditional_entropy(J, h, beta), expected, rtol=1e-12)


def test_exact_conditional_entropy_of_independent_sites(global_random_seed):
    # Without couplings the conditionals are the softmax of beta * h: the entropy is
    # the mean entropy of those softmaxes (log q without fields).
    h = np.random.default_rng(global_random_seed).standard_normal((3, 4))
    J = np.zeros((3, 4, 3, 4))
    p = np.exp(2 * h) / np.exp(2 * h).sum(axis=1, keepdims=True)
    expected = -(p * np.log(p)).sum(axis=1).mean()
    assert_allclose(exact_conditional_entropy(J, h, beta=2.0), expected, rtol=1e-12)
    assert_allclose(exact_conditional_entropy(J, 0 * h), np.log(4), rtol=1e-14)


# -- Gibbs sampling against the exact law ---------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        # Dense J: every site moves every other site's field (dense update path).
        functools.partial(_dense_model, 4, 3, 5),
        # Ring of 4 sites, q = 3, embedding-like colour similarity and fields.
        functools.partial(_ring_model, 4, 3, 4),
        # Ring of 8 sites, q = 2: 2 neighbours <= 8 / 4 uses the sparse update.
        functools.partial(_ring_model, 8, 2, 9, field_scale=0.3),
    ],
    ids=["dense-L4-q3", "ring-L4-q3", "ring-L8-q2-sparse"],
)
def test_gibbs_matches_exact_distribution(model, global_random_seed):
    """The empirical law of 20,000 draws is within sampling error of the exact law.

    The models are fixed (each exercises an update path); the seed drives the
    sampler. The draws are 20 records, 10 sweeps apart, of each of 1000 chains.
    The exact sweep kernels (``_sweep_kernel``) of the three models have second
    eigenvalues of modulus 0.36, 0.79 and 0.07: after the 200 burn-in sweeps the
    chains are stationary (to < 1e-14), and two records of a chain have correlation
    at most 0.79**10 = 0.10, inflating any frequency's variance by at most
    (1 + 0.10) / (1 - 0.10) = 1.22, well within the factor 2 of ``_tv_tolerance``.
    """
    J, h = model()
    L, q = h.shape
    beta, n = 1.0, 20_000
    _, p = exact_distribution(J, h, beta)
    codes = gibbs_sample(J, h, n, beta=beta, random_state=global_random_seed)
    assert codes.shape == (n, L)
    assert codes.dtype == np.int64
    tolerance = _tv_tolerance(p, n)
    assert _total_variation(_empirical(codes, q), p) < tolerance
    # Power: draws from a wrong law p' are within _tv_tolerance(p') of p', so at
    # least TV(p', p) - _tv_tolerance(p') from p. A sampler at 0.8 beta, or one
    # counting every pair twice (2 J), is caught.
    _, p_hot = exact_distribution(J, h, 0.8 * beta)
    _, p_double = exact_distribution(2 * J, h, beta)
    for p_wrong in (p_hot, p_double):
        assert _total_variation(p_wrong, p) > tolerance + _tv_tolerance(p_wrong, n)


def test_sparse_and_dense_updates_draw_the_same_samples(
    monkeypatch, global_random_seed
):
    # Both updates keep the same field up to rounding, so with the same uniforms they
    # make the same draws (a draw can only differ when a uniform falls within
    # ~1e-15 of a category boundary: probability ~1e-11 over the ~2e4 draws here).
    J, h = _ring_model(12, 3, seed=global_random_seed)
    runs = {}
    for sparse in (True, False):
        monkeypatch.setattr(
            _sampling, "_GibbsChains", functools.partial(_GibbsChains, sparse=sparse)
        )
        runs[sparse] = gibbs_sample(
            J, h, 300, n_chains=50, burn_in=20, random_state=global_random_seed
        )
    assert_array_equal(runs[True], runs[False])


@pytest.mark.parametrize("sparse", [True, False])
def test_running_field_stays_exact(sparse, global_random_seed):
    J, h = _ring_model(12, 4, seed=global_random_seed)
    rng = np.random.RandomState(global_random_seed)
    states = rng.randint(4, size=(30, 12))
    chains = _GibbsChains(J, h, 0.9, states, Device("cpu"), sparse=sparse)
    assert chains.sparse is sparse
    for _ in range(25):
        chains.sweep(rng, Device("cpu"))
    # 300 updates of fields of order ten each add rounding of ~1e-15.
    assert_allclose(chains.field, chains.full_field(J, 0.9, Device("cpu")), atol=1e-12)
    assert not np.array_equal(chains.states, states)


def test_sparse_update_chosen_for_sparse_couplings(global_random_seed):
    J, h = _ring_model(8, 2, seed=global_random_seed)
    states = np.zeros((2, 8), dtype=np.int64)
    assert _GibbsChains(J, h, 1.0, states, Device("cpu")).sparse
    J, h = _dense_model(8, 2, seed=global_random_seed)
    assert not _GibbsChains(J, h, 1.0, states, Device("cpu")).sparse


def _sweep_kernel(J, h, beta):
    """Exact transition matrix of one sweep: the average, over the L! site orders,
    of the product of the site-update (heat-bath) kernels."""
    L, q = h.shape
    states = [tuple(s) for s in itertools.product(range(q), repeat=L)]
    index = {s: k for k, s in enumerate(states)}
    site_kernels = []
    for i in range(L):
        K = np.zeros((len(states), len(states)))
        for s in states:
            p = np.exp(_conditional_loop(np.array(s), J, h, beta)[i])
            for a in range(q):
                t = list(s)
                t[i] = a
                K[index[s], index[tuple(t)]] += p[a]
        site_kernels.append(K)
    orders = list(itertools.permutations(range(L)))
    sweep = np.zeros_like(site_kernels[0])
    for order in orders:
        product = np.eye(len(states))
        for i in order:
            product = product @ site_kernels[i]
        sweep += product / len(orders)
    return sweep


def _stationary(K):
    values, vectors = np.linalg.eig(K.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return pi / pi.sum()


def test_asymmetric_couplings_sample_the_chain_stationary_law(global_random_seed):
    """Asymmetric J has no joint law with its conditionals; the sampler runs the
    chain they define, and its draws follow the stationary law of the exact sweep
    kernel (a fixed model; the seed drives the sampler)."""
    J, h = _dense_model(3, 2, seed=10, scale=1.5, symmetric=False)
    K = _sweep_kernel(J, h, 1.0)
    pi = _stationary(K)
    # Sanity of the reference: for symmetric J the kernel preserves the Gibbs law.
    J_sym = (J + J.transpose(2, 3, 0, 1)) / 2
    _, p_sym = exact_distribution(J_sym, h)
    assert_allclose(p_sym @ _sweep_kernel(J_sym, h, 1.0), p_sym, atol=1e-12)
    # Records 10 sweeps apart are nearly independent: from any state, 10 sweeps
    # reach pi to within 0.01 (8e-5 here), so the factor 2 of _tv_tolerance on the
    # variances is generous; 200 burn-in sweeps leave no trace of the start.
    assert np.abs(np.linalg.matrix_power(K, 10) - pi).max() < 0.01
    n = 20_000
    codes = gibbs_sample(J, h, n, random_state=global_random_seed)
    tolerance = _tv_tolerance(pi, n)
    assert _total_variation(_empirical(codes, 2), pi) < tolerance
    # The sampled law is not the (nonexistent) Gibbs law of J or of its symmetric
    # part: the tolerance separates them.
    assert _total_variation(pi, p_sym) > tolerance + _tv_tolerance(p_sym, n)


def test_independent_sites_follow_softmax_of_fields(global_random_seed):
    rng = np.random.RandomState(global_random_seed)
    h = rng.standard_normal((3, 4))
    J = np.zeros((3, 4, 3, 4))
    n = 10_000
    codes = gibbs_sample(J, h, n, beta=1.5, random_state=rng)
    p = np.exp(1.5 * h) / np.exp(1.5 * h).sum(axis=1, keepdims=True)
    freq = np.stack([np.bincount(codes[:, i], minlength=4) / n for i in range(3)])
    # Without couplings every sweep redraws each site from its softmax, so the
    # draws are exactly independent: Bernstein bounds each of the 12 frequencies
    # (delta = 1e-9: the 100-seed sweep fails with probability < 2e-6).
    assert np.all(np.abs(freq - p) < _bernstein_tolerance(p, n))


def _per_sequence_loss(codes, J, h, beta=1.0):
    """-(1/L) sum_i log p(s_i | s_-i) of each sequence."""
    log_probs = conditional_log_probs(codes, J, h, beta)
    return -np.take_along_axis(log_probs, codes[..., None], 2)[..., 0].mean(axis=1)


def test_conditional_entropy_estimated_on_samples(global_random_seed):
    """The documented estimator, -mean log p(s_i | s_-i) on Gibbs samples, is
    within sampling error of the exact conditional entropy.

    Its standard error is sqrt(Var_P[loss] / n) for independent draws, computed
    exactly by enumeration (0.0034 nats here); the chains' correlation inflates the
    variance by < 1.12 for this model (second eigenvalue 0.75 of the sweep kernel,
    0.75**10 = 0.055 between records), within the factor 2 allowed. 6 standard
    errors: a normal tail of 2e-9 per seed. (A fixed model; the seed drives the
    sampler.)
    """
    J, h = _ring_model(4, 3, seed=12)
    n = 20_000
    states, p = exact_distribution(J, h)
    loss = _per_sequence_loss(states, J, h)
    entropy = exact_conditional_entropy(J, h)
    tolerance = 6 * np.sqrt(2 * (p @ (loss - entropy) ** 2) / n)
    codes = gibbs_sample(J, h, n, random_state=global_random_seed)
    assert abs(_per_sequence_loss(codes, J, h).mean() - entropy) < tolerance
    # Power: a sampler at 0.9 beta would shift the estimate by over 2 tolerances.
    _, p_hot = exact_distribution(J, h, 0.9)
    assert abs(p_hot @ loss - entropy) > 2 * tolerance


# -- chains, records and reproducibility ----------------------------------------------


def test_reproducible_with_random_state(global_random_seed):
    # Weak couplings, so that draws vary: for every seed two draws of the model
    # coincide with probability sum_s P(s)**2 < 0.03, and runs of 20 chains with
    # other random numbers agree everywhere with negligible probability. (A ring
    # with U = E E^T / q can freeze into one state: seed 2 does.)
    J, h = _dense_model(5, 3, seed=global_random_seed, scale=0.3)
    kwargs = dict(n_chains=20, burn_in=5, thin=2)
    seed = global_random_seed
    a = gibbs_sample(J, h, 100, random_state=seed, **kwargs)
    assert_array_equal(a, gibbs_sample(J, h, 100, random_state=seed, **kwargs))
    assert not np.array_equal(
        a, gibbs_sample(J, h, 100, random_state=seed + 1, **kwargs)
    )
    rng = np.random.RandomState(seed)
    assert_array_equal(a, gibbs_sample(J, h, 100, random_state=rng, **kwargs))
    assert not np.array_equal(a, gibbs_sample(J, h, 100, random_state=rng, **kwargs))


def test_rows_are_records_of_chains_in_turn(global_random_seed):
    # Row k * n_chains + c is the k-th sample of chain c: the first record does not
    # depend on how many records follow, and n_samples need not be a multiple of
    # n_chains.
    J, h = _ring_model(5, 3, seed=global_random_seed)
    kwargs = dict(n_chains=8, burn_in=3, thin=2, random_state=global_random_seed)
    first = gibbs_sample(J, h, 8, **kwargs)
    more = gibbs_sample(J, h, 21, **kwargs)
    assert more.shape == (21, 5)
    assert_array_equal(more[:8], first)
    assert gibbs_sample(J, h, 3, n_chains=10, random_state=0).shape == (3, 5)
    # Default: min(n_samples, 1000) chains, i.e. one record for small n_samples.
    assert_array_equal(
        gibbs_sample(J, h, 30, random_state=0),
        gibbs_sample(J, h, 30, n_chains=30, random_state=0),
    )


def test_initial_states_are_used(global_random_seed):
    # Strong ferromagnetic ring: from a uniform start the chains stay put (leaving
    # costs ~exp(-40) per update, whatever the seed).
    seed = global_random_seed
    L, q = 4, 3
    J = np.zeros((L, q, L, q))
    for i in range(L):
        J[i, :, (i + 1) % L, :] = J[(i + 1) % L, :, i, :] = 20 * np.eye(q)
    h = np.zeros((L, q))
    codes = gibbs_sample(
        J,
        h,
        50,
        burn_in=0,
        thin=1,
        initial=[2, 2, 2, 2],
        n_chains=10,
        random_state=seed,
    )
    assert np.all(codes == 2)
    start = np.array([[0] * L, [1] * L])
    codes = gibbs_sample(J, h, 10, burn_in=0, thin=1, initial=start, random_state=seed)
    assert_array_equal(codes[0::2], 0)
    assert_array_equal(codes[1::2], 1)
    # One state of shape (L,) starts the default min(n_samples, 1000) chains.
    J, h = _ring_model(L, q, seed=seed)
    single = gibbs_sample(J, h, 40, initial=[0, 1, 2, 0], random_state=seed)
    tiled = gibbs_sample(
        J, h, 40, initial=np.tile([0, 1, 2, 0], (40, 1)), random_state=seed
    )
    assert_array_equal(single, tiled)


def test_infinite_temperature_is_uniform(global_random_seed):
    J, h = _dense_model(2, 3, seed=global_random_seed, scale=5.0, field_scale=5.0)
    n = 9000
    codes = gibbs_sample(J, h, n, beta=0.0, random_state=global_random_seed)
    # At beta = 0 every sweep redraws each site uniformly: 9000 independent draws
    # of 9 states of probability 1/9. Bernstein bounds each frequency (delta = 1e-9:
    # < 1e-6 over the 100-seed sweep); the tolerance is ~7 standard errors, 0.0033.
    assert_allclose(_empirical(codes, 3), 1 / 9, atol=_bernstein_tolerance(1 / 9, n))


def test_inputs_not_modified_and_float32_accepted():
    J, h = _ring_model(4, 3, seed=16)
    J32, h32 = J.astype(np.float32), h.astype(np.float32)
    codes = np.array([[0, 1, 2, 0], [2, 2, 1, 0]])
    initial = codes.copy()
    copies = [a.copy() for a in (J, h, J32, h32, codes)]
    gibbs_sample(J32, h32, 10, initial=initial, random_state=0)
    conditional_log_probs(codes, J32, h32)
    exact_distribution(J, h)
    exact_conditional_entropy(J, h)
    for original, copy in zip((J, h, J32, h32, codes), copies, strict=True):
        assert_array_equal(original, copy)
    assert_array_equal(initial, codes)
    assert_allclose(
        conditional_log_probs(codes, J32, h32),
        conditional_log_probs(codes, J32.astype(np.float64), h32.astype(np.float64)),
    )


def test_device_argument():
    J, h = _ring_model(4, 3, seed=17)
    expected = gibbs_sample(J, h, 20, random_state=0)
    assert_array_equal(gibbs_sample(J, h, 20, random_state=0, device="cpu"), expected)
    assert_array_equal(
        gibbs_sample(J, h, 20, random_state=0, device=Device("cpu")), expected
    )


# -- bad input ----------------------------------------------------------------------

_J, _H = _ring_model(3, 2, seed=0)


def _with_diagonal():
    J = _J.copy()
    J[1, 0, 1, 1] = 0.5
    return J


def _with_nan():
    J = _J.copy()
    J[0, 0, 1, 0] = J[1, 0, 0, 0] = np.nan
    return J


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(couplings=np.zeros((3, 2, 3))), ValueError, r"shape \(L, q, L, q\)"),
        (dict(couplings=np.zeros((3, 2, 2, 2))), ValueError, r"shape \(L, q, L, q\)"),
        (dict(couplings="abc"), TypeError, "couplings must hold real numbers"),
        (dict(fields=np.zeros((3, 3))), ValueError, "fields must have shape"),
        (dict(couplings=_with_diagonal()), ValueError, "zero diagonal blocks.*block 1"),
        (dict(couplings=_with_nan()), ValueError, "couplings contains NaN"),
        (dict(fields=np.full((3, 2), np.inf)), ValueError, "fields contains NaN"),
        (dict(n_samples=0), ValueError, "n_samples must be an int >= 1"),
        (dict(n_samples=2.0), TypeError, "n_samples must be an int"),
        (dict(beta=-1.0), ValueError, "beta must be a non-negative"),
        (dict(beta="1"), TypeError, "beta must be a non-negative real"),
        (dict(beta=np.nan), ValueError, "beta must be a non-negative finite"),
        (dict(n_chains=0), ValueError, "n_chains must be an int >= 1"),
        (dict(burn_in=-1), ValueError, "burn_in must be an int >= 0"),
        (dict(thin=0), ValueError, "thin must be an int >= 1"),
        (dict(initial=[0, 1]), ValueError, r"initial must have shape \(n_chains, L\)"),
        (dict(initial=[0, 1, 2]), ValueError, r"initial must hold states in \[0, 2\)"),
        (dict(initial=[0, 1, 0.5]), TypeError, "initial must hold integer states"),
        (
            dict(initial=np.zeros((4, 3), int), n_chains=5),
            ValueError,
            "initial has 4 rows but n_chains=5",
        ),
        (dict(device="tpu"), ValueError, "device must be"),
    ],
)
def test_gibbs_sample_bad_input(kwargs, error, match):
    arguments = dict(couplings=_J, fields=_H, n_samples=10)
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        gibbs_sample(
            arguments.pop("couplings"),
            arguments.pop("fields"),
            arguments.pop("n_samples"),
            **arguments,
        )


@pytest.mark.parametrize(
    "codes, error, match",
    [
        (np.zeros((2, 4), int), ValueError, r"shape \(n_samples, L\) with L = 3"),
        (np.zeros(3, int), ValueError, r"shape \(n_samples, L\)"),
        (np.full((2, 3), 2), ValueError, r"states in \[0, 2\)"),
        (np.full((2, 3), -1), ValueError, r"states in \[0, 2\)"),
        (np.array([["a", "b", "c"]]), TypeError, "integer states"),
    ],
)
def test_conditional_log_probs_bad_codes(codes, error, match):
    with pytest.raises(error, match=match):
        conditional_log_probs(codes, _J, _H)


def test_integral_float_codes_accepted():
    codes = np.array([[0.0, 1.0, 1.0]])
    assert_allclose(
        conditional_log_probs(codes, _J, _H),
        conditional_log_probs(codes.astype(int), _J, _H),
    )


def test_exact_functions_need_symmetric_couplings():
    J, h = _dense_model(3, 2, seed=19, symmetric=False)
    for func in (exact_distribution, exact_conditional_entropy):
        with pytest.raises(ValueError, match="couplings must be symmetric"):
            func(J, h)
    # Asymmetric couplings are fine where no joint law is needed.
    assert gibbs_sample(J, h, 5, random_state=0).shape == (5, 3)
    assert conditional_log_probs([[0, 1, 0]], J, h).shape == (1, 3, 2)


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 2), ValueError, "n_sites must be an int >= 1"),
        ((2, 0), ValueError, "n_states must be an int >= 1"),
        ((2.0, 2), TypeError, "n_sites must be an int"),
    ],
)
def test_enumerate_states_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        enumerate_states(*args)


# -- the zero-sum gauge ----------------------------------------------------------------


def _gauge_loop(J, h):
    """Block by block: remove row and column means, move the row means to h."""
    L, q = h.shape
    J0, h0 = np.zeros_like(J), h.astype(float).copy()
    for i in range(L):
        for j in range(L):
            if i == j:
                continue
            block = J[i, :, j, :]
            rows = block.mean(axis=1)
            cols = block.mean(axis=0)
            grand = block.mean()
            for a in range(q):
                for b in range(q):
                    J0[i, a, j, b] = block[a, b] - rows[a] - cols[b] + grand
                h0[i, a] += rows[a] - grand
    return J0, h0


@pytest.mark.parametrize("symmetric", [True, False])
def test_zero_sum_gauge_against_loop_and_keeps_conditionals(
    symmetric, global_random_seed
):
    L, q = 5, 4
    J, h = _dense_model(L, q, global_random_seed, symmetric=symmetric)
    J_before, h_before = J.copy(), h.copy()
    J0, h0 = zero_sum_gauge(J, h)
    # The inputs are not modified.
    assert_array_equal(J, J_before)
    assert_array_equal(h, h_before)
    J_loop, h_loop = _gauge_loop(J, h)
    # Sums of O(q) terms of unit size: a few ulps.
    assert_allclose(J0, J_loop, rtol=0, atol=1e-13)
    assert_allclose(h0, h_loop, rtol=0, atol=1e-13)
    # Every block sums to zero along its rows and columns; diagonal stays zero.
    assert_allclose(J0.sum(axis=1), 0.0, atol=1e-13)
    assert_allclose(J0.sum(axis=3), 0.0, atol=1e-13)
    assert_array_equal(J0[np.arange(L), :, np.arange(L), :], 0.0)
    if symmetric:
        assert_allclose(J0, J0.transpose(2, 3, 0, 1), rtol=0, atol=1e-13)
    # Same conditionals at any inverse temperature (log-probabilities of unit
    # size, computed from sums of L terms: 1e-12 is hundreds of ulps).
    rng = np.random.default_rng(global_random_seed)
    codes = rng.integers(0, q, size=(50, L))
    beta = rng.uniform(0.1, 3.0)
    assert_allclose(
        conditional_log_probs(codes, J0, h0, beta),
        conditional_log_probs(codes, J, h, beta),
        rtol=0,
        atol=1e-12,
    )
    # Idempotent.
    J1, h1 = zero_sum_gauge(J0, h0)
    assert_allclose(J1, J0, rtol=0, atol=1e-13)
    assert_allclose(h1, h0, rtol=0, atol=1e-13)


def test_zero_sum_gauge_defaults_and_dtypes():
    J, h = _dense_model(3, 2, 0)
    J0, h0 = zero_sum_gauge(J)
    J1, h1 = zero_sum_gauge(J, np.zeros((3, 2)))
    assert_array_equal(J0, J1)
    assert_array_equal(h0, h1)
    J32, h32 = zero_sum_gauge(J.astype(np.float32), h.astype(np.float32))
    assert J32.dtype == h32.dtype == np.float64
    # Integer couplings are real numbers too.
    Ji = np.zeros((2, 2, 2, 2), dtype=int)
    Ji[0, :, 1, :] = Ji[1, :, 0, :] = [[2, 0], [0, 0]]
    assert_allclose(zero_sum_gauge(Ji)[1], [[0.5, -0.5], [0.5, -0.5]])


def test_fitted_couplings_are_in_the_zero_sum_gauge(global_random_seed):
    """PottsPseudoLikelihood reports its couplings in this gauge already."""
    from sklearn_attn import PottsPseudoLikelihood

    rng = np.random.default_rng(global_random_seed)
    X = rng.integers(0, 3, size=(60, 4))
    model = PottsPseudoLikelihood("full", alphabet="ABC").fit(X)
    J0, h0 = zero_sum_gauge(model.couplings_, model.fields_)
    scale = np.abs(model.couplings_).max() + np.abs(model.fields_).max()
    assert_allclose(J0, model.couplings_, rtol=0, atol=1e-12 * scale)
    assert_allclose(h0, model.fields_, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize(
    "args, error, match",
    [
        (
            (np.zeros((2, 2, 2)),),
            ValueError,
            r"couplings must have shape \(L, q, L, q\)",
        ),
        ((np.zeros((2, 2, 3, 2)),), ValueError, "couplings must have shape"),
        ((np.zeros((0, 2, 0, 2)),), ValueError, "at least one site and one state"),
        ((np.zeros((2, 2, 2, 2)), np.zeros((2, 3))), ValueError, "fields must have"),
        ((np.full((2, 2, 2, 2), np.nan),), ValueError, "NaN or infinity"),
        ((np.zeros((2, 2, 2, 2)), np.full((2, 2), np.inf)), ValueError, "fields"),
        ((np.ones((2, 2, 2, 2)),), ValueError, "zero diagonal blocks"),
        ((np.full((2, 2, 2, 2), "a"),), TypeError, "couplings"),
    ],
)
def test_zero_sum_gauge_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        zero_sum_gauge(*args)

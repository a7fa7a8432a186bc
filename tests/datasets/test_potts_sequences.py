"""Tests for the generalized Potts sequence generator make_potts_sequences.

The models and samples of every test are drawn from ``global_random_seed``. Each
statistical tolerance is derived from the sampling error with a margin that makes
a failure anywhere in the 100-seed sweep negligible; the reason is stated next to
the check.
"""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn.datasets._potts import (
    _color_similarity,
    _position_couplings,
    make_potts_sequences,
)
from sklearn_attn.potts import (
    conditional_log_probs,
    enumerate_states,
    exact_distribution,
    gibbs_sample,
)

GRAPHS = [
    ("chain", {}),
    ("ring", {}),
    ("lattice", {"n_sites": 16}),
    ("random_regular", {"degree": 3}),
    ("dense", {}),
]


def _edge_set(adjacency):
    u, v = np.nonzero(np.triu(adjacency))
    return {(int(a), int(b)) for a, b in zip(u, v, strict=True)}


@pytest.mark.parametrize("graph, kwargs", GRAPHS)
def test_shapes_and_params(graph, kwargs, global_random_seed):
    n_sites = kwargs.get("n_sites", 10)
    codes, params = make_potts_sequences(
        n_samples=30,
        n_sites=n_sites,
        n_states=4,
        graph=graph,
        n_channels=2,
        burn_in=5,
        thin=1,
        random_state=global_random_seed,
        **{k: v for k, v in kwargs.items() if k != "n_sites"},
    )
    assert codes.shape == (30, n_sites)
    assert codes.dtype == np.int64
    assert codes.min() >= 0 and codes.max() < 4
    assert set(params) == {
        "couplings",
        "fields",
        "position_couplings",
        "color_similarity",
        "beta",
        "graph",
    }
    J = params.couplings
    assert J.shape == (n_sites, 4, n_sites, 4)
    assert params.fields.shape == (n_sites, 4)
    assert params.position_couplings.shape == (2, n_sites, n_sites)
    assert params.color_similarity.shape == (2, 4, 4)
    assert params.graph == graph and params.beta == 1.0
    # J[i, a, j, b] = sum_c J^c_ij U^c_ab, by loops.
    expected = np.zeros_like(J)
    for c in range(2):
        for i in range(n_sites):
            for j in range(n_sites):
                expected[i, :, j, :] += (
                    params.position_couplings[c, i, j] * params.color_similarity[c]
                )
    assert_allclose(J, expected, rtol=1e-13, atol=1e-15)
    # Symmetric (a joint law exists) with zero diagonal blocks, exactly.
    assert_array_equal(J, J.transpose(2, 3, 0, 1))
    for i in range(n_sites):
        assert not np.any(J[i, :, i, :])
    for matrix in (*params.position_couplings, *params.color_similarity):
        assert_array_equal(matrix, matrix.T)
    assert not np.any(np.diagonal(params.position_couplings, axis1=1, axis2=2))


def test_chain_and_ring_structure():
    rng = np.random.RandomState(0)
    chain = _position_couplings("chain", 6, rng)
    assert _edge_set(chain) == {(i, i + 1) for i in range(5)}
    assert_array_equal(chain.sum(axis=1), [1, 2, 2, 2, 2, 1])
    ring = _position_couplings("ring", 6, rng)
    assert _edge_set(ring) == {(i, i + 1) for i in range(5)} | {(0, 5)}
    assert_array_equal(ring.sum(axis=1), 2)
    # Two sites: the ring's wrap-around edge is the chain's edge, weight 1.
    assert_array_equal(_position_couplings("ring", 2, rng), [[0, 1], [1, 0]])
    assert_array_equal(_position_couplings("chain", 2, rng), [[0, 1], [1, 0]])


@pytest.mark.parametrize("side", [3, 4, 5])
def test_lattice_structure(side):
    adjacency = _position_couplings("lattice", side * side, np.random.RandomState(0))
    expected = set()
    for r in range(side):
        for c in range(side):
            here = r * side + c
            for there in (r * side + (c + 1) % side, ((r + 1) % side) * side + c):
                expected.add((min(here, there), max(here, there)))
    assert _edge_set(adjacency) == expected
    assert_array_equal(adjacency.sum(axis=1), 4)
    assert set(np.unique(adjacency)) == {0.0, 1.0}


def test_lattice_of_side_two():
    # Left and right neighbours coincide on a periodic side of 2: degree 2, weight 1.
    adjacency = _position_couplings("lattice", 4, np.random.RandomState(0))
    assert _edge_set(adjacency) == {(0, 1), (2, 3), (0, 2), (1, 3)}
    assert set(np.unique(adjacency)) == {0.0, 1.0}


@pytest.mark.parametrize(
    "n_sites, degree", [(20, 3), (10, 4), (7, 2), (10, 7), (9, 8), (30, 5)]
)
def test_random_regular_structure(n_sites, degree, global_random_seed):
    rng = np.random.RandomState(global_random_seed)
    adjacency = _position_couplings("random_regular", n_sites, rng, degree=degree)
    assert_array_equal(adjacency, adjacency.T)
    assert not np.any(np.diag(adjacency))
    assert set(np.unique(adjacency)) <= {0.0, 1.0}
    assert_array_equal(adjacency.sum(axis=1), degree)
    if 0 < degree < n_sites - 1:
        # Fresh graphs are drawn: two draws can coincide (there are only 465
        # 2-regular graphs on 7 sites), five more all equal to the first cannot
        # (probability ~465**-5).
        others = [
            _position_couplings("random_regular", n_sites, rng, degree=degree)
            for _ in range(5)
        ]
        assert not all(np.array_equal(adjacency, other) for other in others)


def test_random_regular_channels_differ(global_random_seed):
    _, params = make_potts_sequences(
        n_samples=2,
        n_sites=12,
        n_states=2,
        graph="random_regular",
        n_channels=3,
        burn_in=0,
        thin=1,
        random_state=global_random_seed,
    )
    # There are 1.2e10 labelled 3-regular graphs on 12 sites: equal draws are
    # negligible.
    first, second, _ = params.position_couplings
    assert not np.array_equal(first, second)


def test_dense_couplings_law(global_random_seed):
    # GOE / sqrt(L): off-diagonal entries of variance 1 / L. With 200 * 199 / 2
    # independent entries the relative standard error of the variance estimate is
    # sqrt(2 / 19900) = 0.01, that of the mean 1 / sqrt(19900): both within 6
    # standard errors (a normal tail of 2e-9 per seed).
    L = 200
    J = _position_couplings("dense", L, np.random.RandomState(global_random_seed))
    assert_array_equal(J, J.T)
    assert not np.any(np.diag(J))
    upper = J[np.triu_indices(L, 1)]
    assert_allclose(upper.var() * L, 1.0, rtol=6 * np.sqrt(2 / upper.size))
    assert abs(upper.mean()) * np.sqrt(L) < 6 / np.sqrt(upper.size)


def test_color_similarity(global_random_seed):
    rng = np.random.RandomState(global_random_seed)
    assert_array_equal(_color_similarity("identity", 5, rng, 3), np.eye(5))
    U = _color_similarity("embedding", 5, rng, 2)
    assert_array_equal(U, U.T)
    eigenvalues = np.linalg.eigvalsh(U)
    assert eigenvalues.min() > -1e-12  # E E^T / d is positive semi-definite
    assert np.sum(eigenvalues > 1e-10) == 2  # of rank embedding_dim
    # E[U] = I: the diagonal averages chi^2_d / d, of variance 2 / d; off-diagonal
    # entries have variance 1 / d and are uncorrelated. Over 200 draws of a 6 x 6
    # matrix with d = 6, the mean of the 1200 diagonal entries has standard error
    # sqrt(2 / 6 / 1200) = 0.017, that of the 15 * 200 distinct off-diagonal
    # entries sqrt(1 / 6 / 3000) = 0.0075; both within 6 standard errors.
    draws = np.stack([_color_similarity("embedding", 6, rng, 6) for _ in range(200)])
    assert abs(np.mean(np.diagonal(draws, axis1=1, axis2=2)) - 1) < 6 * 0.017
    off = draws[:, ~np.eye(6, dtype=bool)]
    assert abs(off.mean()) < 6 * 0.0075


def test_embedding_dim_defaults_to_n_states(global_random_seed):
    seed = global_random_seed
    _, default = make_potts_sequences(5, n_sites=3, n_states=4, random_state=seed)
    _, explicit = make_potts_sequences(
        5, n_sites=3, n_states=4, embedding_dim=4, random_state=seed
    )
    assert_array_equal(default.color_similarity, explicit.color_similarity)


def test_scales(global_random_seed):
    seed = global_random_seed
    kwargs = dict(n_samples=2, n_sites=5, n_states=3, burn_in=0, thin=1)
    _, base = make_potts_sequences(random_state=seed, **kwargs)
    assert_array_equal(base.fields, 0.0)
    _, scaled = make_potts_sequences(
        coupling_scale=-0.5, field_scale=2.0, random_state=seed, **kwargs
    )
    assert_allclose(scaled.position_couplings, -0.5 * base.position_couplings)
    assert_array_equal(scaled.color_similarity, base.color_similarity)
    assert_allclose(scaled.couplings, -0.5 * base.couplings)
    # Fields N(0, 2^2): 15 entries, all finite, not all zero.
    assert np.all(np.isfinite(scaled.fields)) and np.any(scaled.fields)
    _, wide = make_potts_sequences(
        2,
        n_sites=40,
        n_states=50,
        field_scale=2.0,
        burn_in=0,
        thin=1,
        random_state=seed,
    )
    # 2000 Gaussian entries: the sample std has relative standard error
    # 1 / sqrt(2 * 2000) = 0.016; rtol 0.1 is over 6 standard errors.
    assert_allclose(wide.fields.std(), 2.0, rtol=0.1)


def test_reproducible_with_random_state(global_random_seed):
    seed = global_random_seed
    # Weak couplings, so that samples vary: two draws of any of these models
    # coincide with probability sum_s P(s)**2 < 0.01 (seeds 0-99), and 40 samples
    # drawn with other random numbers agree only with negligible probability.
    kwargs = dict(
        n_samples=40,
        n_sites=6,
        n_states=3,
        graph="dense",
        coupling_scale=0.3,
        field_scale=0.5,
        burn_in=10,
        thin=2,
    )
    codes1, params1 = make_potts_sequences(random_state=seed, **kwargs)
    codes2, params2 = make_potts_sequences(random_state=seed, **kwargs)
    assert_array_equal(codes1, codes2)
    for key in ("couplings", "fields", "position_couplings", "color_similarity"):
        assert_array_equal(params1[key], params2[key])
    # Another seed: other Gaussian couplings, and other samples.
    codes3, params3 = make_potts_sequences(random_state=seed + 1, **kwargs)
    assert not np.array_equal(params1.couplings, params3.couplings)
    assert not np.array_equal(codes1, codes3)
    rng = np.random.RandomState(seed)
    codes4, _ = make_potts_sequences(random_state=rng, **kwargs)
    assert_array_equal(codes1, codes4)
    codes5, params5 = make_potts_sequences(random_state=rng, **kwargs)
    assert not np.array_equal(params5.couplings, params1.couplings)


def test_model_does_not_depend_on_sampler_settings(global_random_seed):
    # The model is drawn before the samples: a larger data set, or other sampler
    # settings, come from the same planted model.
    kwargs = dict(
        n_sites=6,
        n_states=3,
        graph="random_regular",
        field_scale=1.0,
        random_state=global_random_seed,
    )
    _, small = make_potts_sequences(10, burn_in=2, thin=1, **kwargs)
    _, large = make_potts_sequences(50, burn_in=7, thin=3, n_chains=5, **kwargs)
    assert_array_equal(small.couplings, large.couplings)
    assert_array_equal(small.fields, large.fields)


def _sweep_kernel_modulus(J, h, beta):
    """Second largest eigenvalue modulus of the exact transition matrix of one sweep.

    A sweep updates the sites in a uniformly random order: its kernel is the mean
    over orders of products of the heat-bath site kernels, summed here over the
    subsets of already updated sites.
    """
    L, q = h.shape
    states = enumerate_states(L, q)
    n = len(states)
    conditionals = np.exp(conditional_log_probs(states, J, h, beta))
    powers = q ** np.arange(L - 1, -1, -1)
    site_kernels = []
    for i in range(L):
        others = states @ powers - states[:, i] * powers[i]
        K = np.zeros((n, n))
        K[np.arange(n)[:, None], others[:, None] + powers[i] * np.arange(q)] = (
            conditionals[:, i]
        )
        site_kernels.append(K)
    products = {0: np.eye(n)}  # bit mask of the updated sites -> sum over orders
    for mask in range(1, 2**L):
        products[mask] = sum(
            products[mask & ~(1 << i)] @ K
            for i, K in enumerate(site_kernels)
            if mask >> i & 1
        )
    sweep = products[2**L - 1] / math.factorial(L)
    return np.sort(np.abs(np.linalg.eigvals(sweep)))[-2]


def test_samples_follow_the_planted_model(global_random_seed):
    """End to end against exact enumeration (81 states): the generator's draws
    follow its planted model within sampling error.

    U close to I (embedding_dim = 12) and beta = 0.5 keep every planted model
    well mixed (with embedding_dim = q some seeds order into one colour and mix
    too slowly for the default burn-in). The tolerance is the sampler test's
    (``_tv_tolerance`` there): E[TV] + 6 sd[TV] for n / 2 independent draws, the
    factor 2 bounding the variance inflation from the correlation of a chain's
    records, which the exact sweep kernel bounds; that puts it over 10 standard
    deviations above the i.i.d. mean of TV.
    """
    n = 20_000
    codes, params = make_potts_sequences(
        n,
        n_sites=4,
        n_states=3,
        embedding_dim=12,
        field_scale=0.5,
        beta=0.5,
        random_state=global_random_seed,
    )
    _, p = exact_distribution(params.couplings, params.fields, params.beta)
    # Records 10 sweeps apart have correlation at most rho = modulus**10, which
    # inflates variances by at most (1 + rho) / (1 - rho) <= 2 for rho <= 1/3; the
    # 200 burn-in sweeps leave modulus**200 of the uniform start. (Over seeds 0-99
    # the modulus is at most 0.66: rho < 0.02.)
    modulus = _sweep_kernel_modulus(params.couplings, params.fields, params.beta)
    assert modulus**10 <= 1 / 3 and modulus**200 < 1e-9
    n_eff = n / 2
    index = codes @ (3 ** np.arange(3, -1, -1))
    empirical = np.bincount(index, minlength=81) / n
    expected_tv = 0.5 * np.sqrt(2 * p * (1 - p) / (np.pi * n_eff)).sum()
    sd_tv = 0.5 * np.sqrt((1 - 2 / np.pi) / n_eff)
    assert 0.5 * np.abs(empirical - p).sum() < expected_tv + 6 * sd_tv


def _frequencies(codes, q):
    n, L = codes.shape
    x = np.zeros((n, L * q))
    x[np.arange(n)[:, None], codes + q * np.arange(L)] = 1.0
    return x.mean(axis=0), x.T @ x / n


def test_defaults_mix(global_random_seed):
    """The defaults (L = 20, q = 10, ring, embedding similarity, beta = 1) against a
    second run on the same model started from the all-zero state: single- and
    two-site frequencies agree within sampling noise.

    Each run has 2000 samples, 2 records 10 sweeps apart of 1000 chains. If both
    runs are stationary, every z-score below has variance tau, the inflation from
    the correlation of a chain's 2 records (1 <= tau <= 2); records this far apart
    are nearly uncorrelated (the RMS z-score is 0.86-1.16 over seeds 0-99, so 1.3
    leaves a clear margin). |z| < 7: a normal tail of 3e-12 per score, so a union
    bound over the 19,200 distinct scores of 100 seeds gives 5e-6 (scores of rare
    pairs, (A - B) / sqrt(A + B) given A + B, have sub-Gaussian tails too); the
    largest over the sweep is 4.6. A chain stuck near its start shifts them by tens
    of standard errors.
    """
    n = 2000
    rng = np.random.RandomState(global_random_seed)
    codes, params = make_potts_sequences(n, random_state=rng)
    cold = gibbs_sample(
        params.couplings,
        params.fields,
        n,
        beta=params.beta,
        initial=np.zeros(20, dtype=int),
        random_state=rng,
    )
    single_a, pair_a = _frequencies(codes, 10)
    single_b, pair_b = _frequencies(cold, 10)
    other_sites = np.kron(1 - np.eye(20), np.ones((10, 10))).astype(bool)
    for a, b in ((single_a, single_b), (pair_a[other_sites], pair_b[other_sites])):
        p = (a + b) / 2
        seen = p > 0
        z = (a - b)[seen] / np.sqrt(p[seen] * (1 - p[seen]) * 2 / n)
        assert np.sqrt(np.mean(z**2)) < 1.3
        assert np.abs(z).max() < 7
    # The planted couplings show in the samples, so the agreement above is not
    # that of two uniform samples. Were neighbouring sites independent, the terms
    # n (f_ab - f_a f_b)^2 / (f_a f_b) of their cells would average (q - 1)^2 / q^2
    # = 0.81 times tau <= 2; the exact neighbour laws (by transfer matrices) have
    # phi^2 >= 0.11 for seeds 0-99, for an average of 0.81 + n phi^2 / q^2 = 3.0 or
    # more (2.98 at worst in the sweep, with a standard deviation of ~0.07).
    f = single_a.reshape(20, 10)
    terms = []
    for i in range(20):
        j = (i + 1) % 20
        product = np.outer(f[i], f[j])
        joint = pair_a[10 * i : 10 * i + 10, 10 * j : 10 * j + 10]
        seen = product > 0
        terms.append(n * (joint - product)[seen] ** 2 / product[seen])
    assert np.concatenate(terms).mean() > 2.2


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_samples=0), ValueError, "n_samples must be an int >= 1"),
        (dict(n_sites=1), ValueError, "n_sites must be an int >= 2"),
        (dict(n_sites=4.0), TypeError, "n_sites must be an int"),
        (dict(n_states=1), ValueError, "n_states must be an int >= 2"),
        (dict(graph="star"), ValueError, "graph must be one of"),
        (dict(graph=None), ValueError, "graph must be one of"),
        (dict(graph="lattice", n_sites=12), ValueError, "perfect square"),
        (
            dict(graph="random_regular", n_sites=5, degree=3),
            ValueError,
            "n_sites \\* degree to be even",
        ),
        (
            dict(graph="random_regular", n_sites=5, degree=5),
            ValueError,
            "degree <= n_sites - 1 = 4",
        ),
        (dict(degree=0), ValueError, "degree must be an int >= 1"),
        (dict(n_channels=0), ValueError, "n_channels must be an int >= 1"),
        (
            dict(color_similarity="gaussian"),
            ValueError,
            "color_similarity must be one of",
        ),
        (dict(embedding_dim=0), ValueError, "embedding_dim must be an int >= 1"),
        (dict(coupling_scale=np.inf), ValueError, "coupling_scale must be a finite"),
        (dict(coupling_scale="1"), TypeError, "coupling_scale must be a finite"),
        (dict(field_scale=-1.0), ValueError, "field_scale must be a non-negative"),
        (dict(beta=-0.5), ValueError, "beta must be a non-negative"),
        (dict(burn_in=-1), ValueError, "burn_in must be an int >= 0"),
        (dict(thin=0), ValueError, "thin must be an int >= 1"),
        (dict(n_chains=0), ValueError, "n_chains must be an int >= 1"),
    ],
)
def test_bad_input(kwargs, error, match):
    arguments = dict(n_samples=5, n_sites=6, n_states=3)
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        make_potts_sequences(arguments.pop("n_samples"), **arguments)

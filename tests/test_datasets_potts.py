"""Tests for the generalized Potts sequence generator make_potts_sequences.

Statistical checks are seeded, so they are deterministic; each tolerance is stated
next to the check with the reason it holds.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_attn.datasets._potts import (
    _color_similarity,
    _position_couplings,
    make_potts_sequences,
)
from sklearn_attn.potts._sampling import exact_distribution, gibbs_sample

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
def test_shapes_and_params(graph, kwargs):
    n_sites = kwargs.get("n_sites", 10)
    codes, params = make_potts_sequences(
        n_samples=30,
        n_sites=n_sites,
        n_states=4,
        graph=graph,
        n_channels=2,
        burn_in=5,
        thin=1,
        random_state=0,
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
def test_random_regular_structure(n_sites, degree):
    rng = np.random.RandomState(0)
    adjacency = _position_couplings("random_regular", n_sites, rng, degree=degree)
    assert_array_equal(adjacency, adjacency.T)
    assert not np.any(np.diag(adjacency))
    assert set(np.unique(adjacency)) <= {0.0, 1.0}
    assert_array_equal(adjacency.sum(axis=1), degree)
    other = _position_couplings("random_regular", n_sites, rng, degree=degree)
    if 0 < degree < n_sites - 1:
        assert not np.array_equal(adjacency, other)


def test_random_regular_channels_differ():
    _, params = make_potts_sequences(
        n_samples=2,
        n_sites=12,
        n_states=2,
        graph="random_regular",
        n_channels=3,
        burn_in=0,
        thin=1,
        random_state=0,
    )
    first, second, _ = params.position_couplings
    assert not np.array_equal(first, second)


def test_dense_couplings_law():
    # GOE / sqrt(L): off-diagonal entries of variance 1 / L. With 200 * 199 / 2
    # independent entries the relative standard error of the variance estimate is
    # sqrt(2 / 19900) = 0.01; rtol 0.05 is 5 standard errors.
    L = 200
    J = _position_couplings("dense", L, np.random.RandomState(0))
    assert_array_equal(J, J.T)
    assert not np.any(np.diag(J))
    upper = J[np.triu_indices(L, 1)]
    assert_allclose(upper.var() * L, 1.0, rtol=0.05)
    assert abs(upper.mean()) * np.sqrt(L) < 5 / np.sqrt(upper.size)


def test_color_similarity():
    rng = np.random.RandomState(0)
    assert_array_equal(_color_similarity("identity", 5, rng, 3), np.eye(5))
    U = _color_similarity("embedding", 5, rng, 2)
    assert_array_equal(U, U.T)
    eigenvalues = np.linalg.eigvalsh(U)
    assert eigenvalues.min() > -1e-12  # E E^T / d is positive semi-definite
    assert np.sum(eigenvalues > 1e-10) == 2  # of rank embedding_dim
    # E[U] = I: the diagonal averages chi^2_d / d. Over 200 draws of a 6 x 6 matrix
    # with d = 6, the mean diagonal has standard error sqrt(2 / 6 / 1200) = 0.017
    # and the mean off-diagonal entry sqrt(1 / 6 / 6000) = 0.005.
    draws = np.stack([_color_similarity("embedding", 6, rng, 6) for _ in range(200)])
    assert abs(np.mean(np.diagonal(draws, axis1=1, axis2=2)) - 1) < 0.09
    off = draws[:, ~np.eye(6, dtype=bool)]
    assert abs(off.mean()) < 0.03


def test_embedding_dim_defaults_to_n_states():
    _, default = make_potts_sequences(5, n_sites=3, n_states=4, random_state=0)
    _, explicit = make_potts_sequences(
        5, n_sites=3, n_states=4, embedding_dim=4, random_state=0
    )
    assert_array_equal(default.color_similarity, explicit.color_similarity)


def test_scales():
    kwargs = dict(n_samples=2, n_sites=5, n_states=3, burn_in=0, thin=1)
    _, base = make_potts_sequences(random_state=0, **kwargs)
    assert_array_equal(base.fields, 0.0)
    _, scaled = make_potts_sequences(
        coupling_scale=-0.5, field_scale=2.0, random_state=0, **kwargs
    )
    assert_allclose(scaled.position_couplings, -0.5 * base.position_couplings)
    assert_array_equal(scaled.color_similarity, base.color_similarity)
    assert_allclose(scaled.couplings, -0.5 * base.couplings)
    # Fields N(0, 2^2): 15 entries, all finite, not all zero.
    assert np.all(np.isfinite(scaled.fields)) and np.any(scaled.fields)
    _, wide = make_potts_sequences(
        2, n_sites=40, n_states=50, field_scale=2.0, burn_in=0, thin=1, random_state=0
    )
    # 2000 Gaussian entries: the sample std has relative standard error 0.016.
    assert_allclose(wide.fields.std(), 2.0, rtol=0.08)


def test_reproducible_with_random_state():
    kwargs = dict(
        n_samples=40,
        n_sites=6,
        n_states=3,
        graph="dense",
        field_scale=0.5,
        burn_in=10,
        thin=2,
    )
    codes1, params1 = make_potts_sequences(random_state=7, **kwargs)
    codes2, params2 = make_potts_sequences(random_state=7, **kwargs)
    assert_array_equal(codes1, codes2)
    for key in ("couplings", "fields", "position_couplings", "color_similarity"):
        assert_array_equal(params1[key], params2[key])
    codes3, params3 = make_potts_sequences(random_state=8, **kwargs)
    assert not np.array_equal(params1.couplings, params3.couplings)
    assert not np.array_equal(codes1, codes3)
    rng = np.random.RandomState(7)
    codes4, _ = make_potts_sequences(random_state=rng, **kwargs)
    assert_array_equal(codes1, codes4)
    codes5, params5 = make_potts_sequences(random_state=rng, **kwargs)
    assert not np.array_equal(params5.couplings, params1.couplings)


def test_model_does_not_depend_on_sampler_settings():
    # The model is drawn before the samples: a larger data set, or other sampler
    # settings, come from the same planted model.
    kwargs = dict(
        n_sites=6, n_states=3, graph="random_regular", field_scale=1.0, random_state=3
    )
    _, small = make_potts_sequences(10, burn_in=2, thin=1, **kwargs)
    _, large = make_potts_sequences(50, burn_in=7, thin=3, n_chains=5, **kwargs)
    assert_array_equal(small.couplings, large.couplings)
    assert_array_equal(small.fields, large.fields)


def test_samples_follow_the_planted_model():
    # End to end against exact enumeration (81 states), as in the sampler's own
    # test: E[TV] under i.i.d. sampling is ~0.017 here, its standard deviation
    # < 0.0021, so E[TV] + 0.012 holds with a wide margin.
    n = 20_000
    codes, params = make_potts_sequences(
        n, n_sites=4, n_states=3, field_scale=0.5, beta=0.8, random_state=1
    )
    states, p = exact_distribution(params.couplings, params.fields, params.beta)
    index = codes @ (3 ** np.arange(3, -1, -1))
    empirical = np.bincount(index, minlength=81) / n
    expected_tv = 0.5 * np.sqrt(2 * p * (1 - p) / (np.pi * n)).sum()
    assert 0.5 * np.abs(empirical - p).sum() < expected_tv + 0.012


def _frequencies(codes, q):
    n, L = codes.shape
    x = np.zeros((n, L * q))
    x[np.arange(n)[:, None], codes + q * np.arange(L)] = 1.0
    return x.mean(axis=0), x.T @ x / n


def test_defaults_mix():
    # The defaults (L = 20, q = 10, ring, embedding similarity, beta = 1) against a
    # second run on the same model started from the all-zero state: single- and
    # two-site frequencies agree within sampling noise. With 2000 samples per run
    # from 1000 chains the z-scores of the 200 single-site and 38,000 two-site
    # differences would be ~N(0, 1) for independent draws (max |z| ~ 3 and ~4.5);
    # a chain stuck near its start shifts them by tens of standard errors.
    n = 2000
    codes, params = make_potts_sequences(n, random_state=0)
    cold = gibbs_sample(
        params.couplings,
        params.fields,
        n,
        beta=params.beta,
        initial=np.zeros(20, dtype=int),
        random_state=1,
    )
    single_a, pair_a = _frequencies(codes, 10)
    single_b, pair_b = _frequencies(cold, 10)
    other_sites = np.kron(1 - np.eye(20), np.ones((10, 10))).astype(bool)
    for a, b in ((single_a, single_b), (pair_a[other_sites], pair_b[other_sites])):
        p = (a + b) / 2
        seen = p > 0
        z = (a - b)[seen] / np.sqrt(p[seen] * (1 - p[seen]) * 2 / n)
        assert np.sqrt(np.mean(z**2)) < 1.3
        assert np.abs(z).max() < 6
    # The planted model is informative: the states are far from uniform.
    assert single_a.max() > 2 / 10


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

"""Sequences sampled from generalized Potts models (factored self-attention).

The generator :func:`make_potts_sequences` plants a generalized Potts model with
couplings ``J[i, a, j, b] = sum_c J^c[i, j] U^c[a, b]`` (position couplings
``J^c`` on a graph, colour similarities ``U^c``), the model that one layer of
factored self-attention represents exactly (Rende, Gerace, Laio and Goldt,
2024), and samples it by heat-bath Gibbs sampling.

Private helpers used by the tests:

- :func:`_position_couplings` builds one channel's ``(L, L)`` matrix;
- :func:`_color_similarity` builds one channel's ``(q, q)`` matrix.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._validation import check_int as _check_int
from .._validation import check_real as _check_real
from ..potts import gibbs_sample

__all__ = ["make_potts_sequences"]

_GRAPHS = ("chain", "ring", "lattice", "random_regular", "dense")
_COLOR_SIMILARITIES = ("identity", "embedding")
# Restarts of the random regular graph construction before giving up.
_MAX_GRAPH_TRIES = 100


# -- position couplings -----------------------------------------------------------


def _ring_edges(n_sites):
    """Edges ``(i, i + 1 mod n)`` of the periodic chain."""
    sites = np.arange(n_sites)
    return sites, (sites + 1) % n_sites


def _lattice_edges(n_sites):
    """Right and down neighbours on the periodic ``side x side`` square lattice."""
    side = math.isqrt(n_sites)
    row, col = np.divmod(np.arange(n_sites), side)
    right = row * side + (col + 1) % side
    down = ((row + 1) % side) * side + col
    sites = np.arange(n_sites)
    return np.concatenate([sites, sites]), np.concatenate([right, down])


def _pairs_left(leftover, edges):
    """Whether two distinct sites of ``leftover`` are still unconnected."""
    sites = sorted(set(leftover))
    return any((u, v) not in edges for k, u in enumerate(sites) for v in sites[k + 1 :])


def _try_regular_edges(n_sites, degree, rng):
    """One attempt at a ``degree``-regular graph by random stub matching.

    Stubs (``degree`` per site) are shuffled and paired; pairs that would make a
    loop or a repeated edge go back to the pool, which is reshuffled until it is
    empty (the Steger-Wormald variant that networkx's ``random_regular_graph``
    uses). Returns the set of edges, or None when the pool gets stuck.
    """
    edges = set()
    stubs = np.repeat(np.arange(n_sites), degree)
    while stubs.size:
        rng.shuffle(stubs)
        leftover = []
        for u, v in zip(stubs[0::2].tolist(), stubs[1::2].tolist(), strict=True):
            u, v = min(u, v), max(u, v)
            if u != v and (u, v) not in edges:
                edges.add((u, v))
            else:
                leftover += [u, v]
        if leftover and not _pairs_left(leftover, edges):
            return None
        stubs = np.array(leftover, dtype=np.int64)
    return edges


def _random_regular_adjacency(n_sites, degree, rng):
    """0/1 adjacency of a random ``degree``-regular simple graph on ``n_sites``."""
    if 2 * degree > n_sites - 1:
        # Dense regular graphs are the complements of sparse ones, which the stub
        # matching finds far more easily.
        complement = _random_regular_adjacency(n_sites, n_sites - 1 - degree, rng)
        adjacency = 1.0 - complement
        np.fill_diagonal(adjacency, 0.0)
        return adjacency
    adjacency = np.zeros((n_sites, n_sites))
    if degree == 0:
        return adjacency
    for _ in range(_MAX_GRAPH_TRIES):
        edges = _try_regular_edges(n_sites, degree, rng)
        if edges is not None:
            u, v = np.array(sorted(edges)).T
            adjacency[u, v] = adjacency[v, u] = 1.0
            return adjacency
    raise RuntimeError(  # pragma: no cover - vanishingly unlikely for valid input
        f"Could not build a random {degree}-regular graph on {n_sites} sites in "
        f"{_MAX_GRAPH_TRIES} attempts."
    )


def _position_couplings(graph, n_sites, rng, degree=3):
    """One channel's symmetric ``(L, L)`` position couplings, zero diagonal.

    Unit weights on the edges of ``"chain"``, ``"ring"``, ``"lattice"`` and
    ``"random_regular"`` graphs; ``"dense"`` is a GOE matrix (off-diagonal
    entries N(0, 1), symmetric) divided by ``sqrt(L)``. Not validated here.
    """
    adjacency = np.zeros((n_sites, n_sites))
    if graph == "chain":
        u, v = _ring_edges(n_sites)
        u, v = u[:-1], v[:-1]
    elif graph == "ring":
        u, v = _ring_edges(n_sites)
    elif graph == "lattice":
        u, v = _lattice_edges(n_sites)
    elif graph == "random_regular":
        return _random_regular_adjacency(n_sites, degree, rng)
    else:  # "dense"
        gaussian = rng.standard_normal((n_sites, n_sites))
        omega = (gaussian + gaussian.T) / np.sqrt(2.0)
        np.fill_diagonal(omega, 0.0)
        return omega / np.sqrt(n_sites)
    # Assignment, not addition: on a ring of 2 sites or a lattice of side 2 an edge
    # found twice (both ways round) still has weight 1.
    adjacency[u, v] = adjacency[v, u] = 1.0
    return adjacency


def _color_similarity(kind, n_states, rng, embedding_dim):
    """One channel's symmetric ``(q, q)`` colour similarity. Not validated here."""
    if kind == "identity":
        return np.eye(n_states)
    embedding = rng.standard_normal((n_states, embedding_dim))
    similarity = embedding @ embedding.T / embedding_dim
    return (similarity + similarity.T) / 2.0  # exactly symmetric


# -- validation ---------------------------------------------------------------------


def _check_option(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {list(options)}; got {value!r}.")
    return value


def _check_finite_real(value, name):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be a finite real number; got {value!r} of type "
            f"{type(value).__name__}."
        )
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number; got {value!r}.")
    return float(value)


def _check_graph_size(graph, n_sites, degree):
    if graph == "lattice" and math.isqrt(n_sites) ** 2 != n_sites:
        raise ValueError(
            f"graph='lattice' needs n_sites to be a perfect square (side x side); "
            f"got n_sites={n_sites}."
        )
    if graph == "random_regular":
        if degree > n_sites - 1:
            raise ValueError(
                f"graph='random_regular' needs degree <= n_sites - 1 = "
                f"{n_sites - 1}; got degree={degree}."
            )
        if (n_sites * degree) % 2:
            raise ValueError(
                "graph='random_regular' needs n_sites * degree to be even (each "
                f"edge has two ends); got n_sites={n_sites}, degree={degree}."
            )


# -- the generator ------------------------------------------------------------------


def make_potts_sequences(
    n_samples: int = 1000,
    *,
    n_sites: int = 20,
    n_states: int = 10,
    graph: str = "ring",
    n_channels: int = 1,
    color_similarity: str = "embedding",
    embedding_dim: int | None = None,
    coupling_scale: float = 1.0,
    field_scale: float = 0.0,
    beta: float = 1.0,
    burn_in: int = 200,
    thin: int = 10,
    n_chains: int | None = None,
    degree: int = 3,
    random_state=None,
):
    r"""Generate sequences from a planted generalized Potts model.

    The model has ``L = n_sites`` sites, each in one of ``q = n_states``
    states ("colours"), and couplings that factor into positions and colours,

    .. math::

        J_{ia,jb} = \sum_{c=1}^{C} J^c_{ij} \, U^c_{ab},

    the model that one layer of factored self-attention with ``C`` heads
    represents exactly. Sequences are drawn from
    :math:`P(s) \propto \exp(\beta (\sum_{i<j} J_{i s_i, j s_j} + \sum_i
    h_{i s_i}))` by heat-bath Gibbs sampling.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of sequences, at least 1.

    n_sites : int, default=20
        Sequence length ``L``, at least 2.

    n_states : int, default=10
        Number of states ``q`` per site, at least 2.

    graph : {"ring", "chain", "lattice", "random_regular", "dense"}, default="ring"
        Interaction graph of the position couplings ``J^c`` (symmetric, zero
        diagonal):

        - ``"chain"``: open 1-D chain, ``J_{i,i+1} = 1``;
        - ``"ring"``: periodic 1-D chain (each site has 2 neighbours);
        - ``"lattice"``: periodic 2-D square lattice of side ``sqrt(L)``
          (``n_sites`` must be a perfect square; 4 neighbours for sides of at
          least 3);
        - ``"random_regular"``: random ``degree``-regular graph, unit weights,
          drawn afresh for each channel;
        - ``"dense"``: symmetric Gaussian, off-diagonal entries
          ``N(0, 1) / sqrt(L)``, drawn afresh for each channel (a Potts glass
          at large ``beta``, where Gibbs sampling mixes slowly).

        The deterministic graphs are the same in every channel.

    n_channels : int, default=1
        Number of channels ``C`` (attention heads), at least 1.

    color_similarity : {"embedding", "identity"}, default="embedding"
        Colour similarity ``U^c``: ``"identity"`` is the standard Potts model;
        ``"embedding"`` is ``U = E E^T / embedding_dim`` with ``E`` a Gaussian
        ``(q, embedding_dim)`` matrix, drawn afresh for each channel.

    embedding_dim : int, default=None
        Embedding dimension for ``"embedding"``; ``None`` uses ``n_states``.

    coupling_scale : float, default=1.0
        Factor applied to the position couplings; may be negative.

    field_scale : float, default=0.0
        Standard deviation of the Gaussian fields ``h``, non-negative.

    beta : float, default=1.0
        Inverse temperature, non-negative.

    burn_in : int, default=200
        Gibbs sweeps before a chain's first sample.

    thin : int, default=10
        Gibbs sweeps between two samples of a chain.

    n_chains : int, default=None
        Number of independent chains; ``None`` uses ``min(n_samples, 1000)``.

    degree : int, default=3
        Degree of ``"random_regular"`` graphs, at least 1 (``n_sites * degree``
        must be even); validated but ignored for the other graphs.

    random_state : int, RandomState instance or None, default=None
        Seed or generator for the model and the sampler. Pass an int for
        reproducible output across calls.

    Returns
    -------
    codes : ndarray of shape (n_samples, n_sites), dtype int64
        States in ``[0, n_states)``. Neighbouring rows come from different
        chains (see :func:`~sklearn_attn.potts.gibbs_sample`).

    params : :class:`~sklearn.utils.Bunch`
        The planted model, NumPy arrays:

        - ``couplings``, shape ``(L, q, L, q)``: ``J`` (symmetric, zero
          diagonal blocks);
        - ``fields``, shape ``(L, q)``: ``h``;
        - ``position_couplings``, shape ``(C, L, L)``: the ``J^c`` (with
          ``coupling_scale`` applied);
        - ``color_similarity``, shape ``(C, q, q)``: the ``U^c``;
        - ``beta`` and ``graph``, as passed.

    See Also
    --------
    sklearn_attn.potts.gibbs_sample : Draw more sequences from
        ``params`` (e.g. a test set from the same model).
    sklearn_attn.potts.conditional_log_probs : True conditionals of
        ``params``, e.g. to estimate the optimal pseudo-likelihood loss.

    Notes
    -----
    The model is drawn first (for each channel ``J^c`` then ``U^c``, then the
    fields), then the sequences, all from one ``random_state``: the model does
    not depend on ``n_samples`` or the sampler's settings. To draw a test set
    from the same model, call ``gibbs_sample(params.couplings, params.fields,
    n, beta=params.beta, random_state=other_seed)``.

    With the defaults (ring, embedding similarity, ``beta = 1``) the model is
    one-dimensional and has no phase transition, so Gibbs sampling mixes fast.
    Compared with a second run started from the all-zero state (``L = 20``,
    25 for the lattice, ``q = 10``, 10,000 samples): at
    ``beta = 1`` the ring, chain, ``random_regular`` with degree 3 and dense
    graphs agree on single- and two-site frequencies within sampling noise,
    while the lattice and ``random_regular`` with degree 4 order into one
    colour and do not mix (use ``beta = 0.5`` there, which mixes). Dense
    couplings form a Potts glass at large ``beta``.

    At ``beta = 1`` the dense teacher is weak: its conditional entropy, about
    2.2 nats at ``L = 20``, ``q = 10``, is close to the ``log 10 = 2.30`` of
    independent sites. ``graph="dense", beta=3`` gives a dense signed teacher
    of about one nat per site, the regime where the factored fit has local
    optima (see ``init`` in :class:`~sklearn_attn.PottsPseudoLikelihood`):
    over seeds 0-99 its conditional entropy is 0.57-1.95 nats (median 1.27),
    and for 89 of these 100 teachers a second run started from the all-zero
    state agrees with the first on the single-site frequencies (RMS z-score
    at most 1.3 on 2,000 samples); the 11 others, of entropies 0.60-1.21, are
    glassy: their chains stay near where they start, some even after
    ``burn_in=2000`` sweeps. Seeds 0-9 all mix.

    With few states the default ``embedding_dim = n_states`` gives a colour
    similarity with a very uneven diagonal, and the model can be strongly
    ordered (most sequences constant for ``L = 6``, ``q = 3``); a larger
    ``embedding_dim`` brings ``U`` closer to the identity.

    References
    ----------
    R. Rende, F. Gerace, A. Laio and S. Goldt, "Mapping of attention mechanisms
    to a generalized Potts model", Phys. Rev. Research 6, 023057 (2024),
    arXiv:2304.07235.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.datasets import make_potts_sequences
    >>> codes, params = make_potts_sequences(
    ...     n_samples=200, n_sites=6, n_states=4, random_state=0)
    >>> codes.shape, params.couplings.shape, params.position_couplings.shape
    ((200, 6), (6, 4, 6, 4), (1, 6, 6))
    >>> bool(codes.min() >= 0 and codes.max() < 4)
    True
    >>> J = params.couplings
    >>> bool(np.allclose(J, J.transpose(2, 3, 0, 1)))
    True
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_sites = _check_int(n_sites, "n_sites", 2)
    n_states = _check_int(n_states, "n_states", 2)
    graph = _check_option(graph, "graph", _GRAPHS)
    n_channels = _check_int(n_channels, "n_channels", 1)
    color_similarity = _check_option(
        color_similarity, "color_similarity", _COLOR_SIMILARITIES
    )
    if embedding_dim is None:
        embedding_dim = n_states
    embedding_dim = _check_int(embedding_dim, "embedding_dim", 1)
    coupling_scale = _check_finite_real(coupling_scale, "coupling_scale")
    field_scale = _check_real(field_scale, "field_scale", strictly_positive=False)
    beta = _check_real(beta, "beta", strictly_positive=False)
    burn_in = _check_int(burn_in, "burn_in", 0)
    thin = _check_int(thin, "thin", 1)
    if n_chains is not None:
        n_chains = _check_int(n_chains, "n_chains", 1)
    degree = _check_int(degree, "degree", 1)
    _check_graph_size(graph, n_sites, degree)

    rng = check_random_state(random_state)
    positions = np.empty((n_channels, n_sites, n_sites))
    colors = np.empty((n_channels, n_states, n_states))
    for channel in range(n_channels):
        positions[channel] = coupling_scale * _position_couplings(
            graph, n_sites, rng, degree
        )
        colors[channel] = _color_similarity(
            color_similarity, n_states, rng, embedding_dim
        )
    couplings = np.einsum("cij,cab->iajb", positions, colors)
    fields = field_scale * rng.standard_normal((n_sites, n_states))
    codes = gibbs_sample(
        couplings,
        fields,
        n_samples,
        beta=beta,
        n_chains=n_chains,
        burn_in=burn_in,
        thin=thin,
        random_state=rng,
        device="cpu",
    )
    params = Bunch(
        couplings=couplings,
        fields=fields,
        position_couplings=positions,
        color_similarity=colors,
        beta=beta,
        graph=graph,
    )
    return codes, params

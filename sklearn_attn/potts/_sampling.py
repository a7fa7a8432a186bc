"""Sampling from generalized Potts models: heat-bath Gibbs, and the conditionals.

A model on ``L`` sites with ``q`` states has couplings ``J`` of shape
``(L, q, L, q)`` with zero diagonal blocks ``J[i, :, i, :] = 0`` and fields ``h``
of shape ``(L, q)`` (the conventions of :mod:`sklearn_attn.potts._model`). The
conditional of site ``i`` given the others is

    p(s_i = a | s_-i) ∝ exp(beta * (h[i, a] + sum_{j != i} J[i, a, j, s_j])).

When ``J`` is symmetric (``J[i, a, j, b] == J[j, b, i, a]``) these are the
conditionals of the Gibbs law

    P(s) ∝ exp(beta * (sum_{i<j} J[i, s_i, j, s_j] + sum_i h[i, s_i])).

- :func:`gibbs_sample` runs heat-bath Gibbs sampling on many chains at once
  (NumPy or CuPy through ``xp = device.xp``);
- :func:`conditional_log_probs` gives every site's log-conditional, vectorised;
- :func:`zero_sum_gauge` puts couplings and fields in the zero-sum gauge.

Exact enumeration of tiny models is in :mod:`sklearn_attn.potts._enumeration`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.utils import check_random_state

from .._backend import (
    Device,
    fast_take_options,
    resolve_device,
    to_device,
    to_host,
    to_output,
)
from .._validation import check_int as _check_int
from .._validation import check_real_array
from ._alignment import check_codes
from ._model import log_conditionals, one_hot
from ._model import zero_sum_gauge as _zero_sum_gauge

__all__ = [
    "gibbs_sample",
    "conditional_log_probs",
    "zero_sum_gauge",
]

# Default number of chains: enough to amortise Python's per-step overhead, few
# enough that burn-in (paid once per chain) stays a small part of the work.
_DEFAULT_MAX_CHAINS = 1000


# -- validation ---------------------------------------------------------------------


def _check_beta(beta):
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool):
        raise TypeError(
            f"beta must be a non-negative real number; got {beta!r} of type "
            f"{type(beta).__name__}."
        )
    beta = float(beta)
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(
            f"beta must be a non-negative finite real number; got {beta!r}."
        )
    return beta


def _check_model(couplings, fields, *, require_symmetric=False):
    """Validate ``(couplings, fields)`` and return them as float64 NumPy arrays.

    These may share memory with the user's arrays: callers only read them.
    """
    J = check_real_array(couplings, "couplings", dtype=np.float64)
    if J.ndim != 4 or J.shape[:2] != J.shape[2:]:
        raise ValueError(
            f"couplings must have shape (L, q, L, q); got shape {J.shape}."
        )
    n_sites, n_states = J.shape[:2]
    if n_sites < 1 or n_states < 1:
        raise ValueError(
            f"couplings must have at least one site and one state; got shape {J.shape}."
        )
    h = check_real_array(fields, "fields", dtype=np.float64)
    if h.shape != (n_sites, n_states):
        raise ValueError(
            f"fields must have shape (L, q) = {(n_sites, n_states)} to match "
            f"couplings of shape {J.shape}; got shape {h.shape}."
        )
    if not np.isfinite(J).all():
        raise ValueError("couplings contains NaN or infinity.")
    if not np.isfinite(h).all():
        raise ValueError("fields contains NaN or infinity.")
    sites = np.arange(n_sites)
    diagonal = J[sites, :, sites, :]
    if np.any(diagonal != 0):
        site = int(np.argmax(np.abs(diagonal).reshape(n_sites, -1).max(axis=1)))
        raise ValueError(
            "couplings must have zero diagonal blocks couplings[i, :, i, :] (a site "
            f"does not interact with itself); block {site} is not zero."
        )
    if require_symmetric:
        transposed = J.transpose(2, 3, 0, 1)
        scale = max(1.0, float(np.abs(J).max()))
        if not np.allclose(J, transposed, rtol=1e-10, atol=1e-12 * scale):
            raise ValueError(
                "couplings must be symmetric (couplings[i, a, j, b] == "
                "couplings[j, b, i, a]) for the Gibbs law P(s) to exist; an "
                "asymmetric model only defines conditionals. Symmetrise it with "
                "(J + J.transpose(2, 3, 0, 1)) / 2, or estimate quantities from "
                "gibbs_sample draws."
            )
    return J, h


def _resolve(device, *arrays):
    if isinstance(device, Device):
        return device
    return resolve_device(device, *arrays)


# -- Gibbs sampling -----------------------------------------------------------------


class _GibbsChains:
    """Independent heat-bath chains sharing one model, advanced one sweep at a time.

    ``field[c, i * q + a]`` is ``beta * (h[i, a] + sum_j J[i, a, j, s_cj])`` for
    the current state of chain ``c``. When site ``j`` of chain ``c`` moves from
    ``b`` to ``b'``, the field of every site ``i`` changes by
    ``beta * (J[i, :, j, b'] - J[i, :, j, b])``, read from two precomputed rows
    (diagonal blocks are zero, so the moving site's own field is untouched). A
    sweep therefore costs ``O(chains L^2 q)``, not the ``O(chains L^3 q^2)`` of
    recomputing every field at each update.

    When every site interacts with at most ``L / 4`` others (chains, rings,
    lattices, sparse random graphs), only the fields of the interacting sites
    are updated, ``O(chains L q deg)`` per sweep; scattering into scattered
    rows costs about four times more per number than the dense update, hence
    the threshold.
    """

    def __init__(self, couplings, fields, beta, states, device, sparse=None):
        n_chains, n_sites = states.shape
        n_states = fields.shape[1]
        size = n_sites * n_states
        self.xp = xp = device.xp
        self.n_states = n_states
        # interacts[i, j]: the field of site i depends on the state of site j.
        interacts = np.any(couplings != 0, axis=(1, 3))
        width = max(1, int(interacts.sum(axis=0).max()))
        self.sparse = 4 * width <= n_sites if sparse is None else sparse
        # changes[j * q + b] = beta * J[targets, :, j, b]: the fields that a move of
        # site j to state b adds to (or, for the old state, removes from).
        columns = (beta * couplings).transpose(2, 3, 0, 1)  # [j, b, i, a]
        if self.sparse:
            # Each site's interacting sites, padded with the site itself: its block
            # is zero, so padding adds nothing.
            targets = np.tile(np.arange(n_sites)[:, None], (1, width))
            for j in range(n_sites):
                found = np.flatnonzero(interacts[:, j])
                targets[j, : found.size] = found
            # Advanced indices around a slice come first: [j, d, b, a].
            changes = columns[np.arange(n_sites)[:, None], :, targets, :]
            changes = changes.transpose(0, 2, 1, 3).reshape(size, width * n_states)
            self._targets = to_device(targets, device)
        else:
            width = n_sites
            changes = columns.reshape(size, size)
        self._changes = to_device(np.ascontiguousarray(changes), device)
        self._fields = to_device((beta * fields).ravel(), device)
        # A copy: the chains write their states in place.
        self.states = to_device(np.array(states, dtype=np.int64), device)
        self.field = self.full_field(couplings, beta, device)
        self._chain = xp.arange(n_chains)
        self._chain_rows = self._chain * n_sites  # chain c's first row in (C * L, q)
        self._lower = xp.asarray(np.tril(np.ones((n_states, n_states))))
        self._moved_to = xp.empty((n_chains, width * n_states))
        self._moved_from = xp.empty((n_chains, width * n_states))
        self._take_kwargs = fast_take_options(xp)

    def full_field(self, couplings, beta, device):
        """The field recomputed from the states (one matrix product)."""
        size = self._fields.shape[0]
        J_mat = to_device(beta * couplings.reshape(size, size), device)
        x = one_hot(self.states, self.n_states, self.xp)
        return x @ J_mat.T + self._fields

    def sweep(self, rng, device):
        """Update every site of every chain once, in a fresh random order per chain.

        The order and the uniforms are drawn on the host from ``rng``, so runs
        are reproducible and CPU and GPU runs consume identical random numbers.
        """
        n_chains, n_sites = self.states.shape
        order = np.argsort(rng.random_sample((n_chains, n_sites)), axis=1)
        uniforms = rng.random_sample((n_sites, n_chains))
        order = to_device(np.ascontiguousarray(order.T), device)
        uniforms = to_device(uniforms, device)
        for step in range(n_sites):
            self._update(order[step], uniforms[step])

    def _update(self, sites, uniforms):
        xp, q = self.xp, self.n_states
        chain = self._chain
        # Logits of the updated sites, states along rows so that the reductions
        # below run over whole rows of chains (NumPy is slow along short axes).
        rows = self._chain_rows + sites
        z = xp.ascontiguousarray(xp.take(self.field.reshape(-1, q), rows, axis=0).T)
        z -= z.max(axis=0)
        xp.exp(z, out=z)
        cdf = self._lower @ z  # cumulative weights, (q, C); one small GEMM
        # Inverse CDF: the new state is the number of cumulative weights <= u * total,
        # so states of zero weight are (up to rounding) never chosen; the minimum
        # guards u * total rounding up to the total.
        new = (cdf <= uniforms * cdf[-1]).sum(axis=0)
        xp.minimum(new, q - 1, out=new)
        old = self.states[chain, sites]
        self.states[chain, sites] = new
        kwargs = self._take_kwargs
        first = sites * q
        xp.take(self._changes, first + new, axis=0, out=self._moved_to, **kwargs)
        xp.take(self._changes, first + old, axis=0, out=self._moved_from, **kwargs)
        self._moved_to -= self._moved_from
        if not self.sparse:
            self.field += self._moved_to
            return
        # Rows (chain, target site) of the field seen as (C * L, q). A chain's
        # padded targets repeat its moving site, whose rows all receive 0, so the
        # repeated writes agree.
        rows = (self._chain_rows[:, None] + self._targets[sites]).ravel()
        self.field.reshape(-1, q)[rows] += self._moved_to.reshape(-1, q)


def _check_initial(initial, n_sites, n_states, n_chains):
    """Starting states as an (n_chains, L) int64 array, or None to draw them.

    A single state of shape (L,) starts every one of the ``n_chains`` chains.
    """
    if initial is None:
        return None
    try:
        array = np.asarray(to_host(initial))
    except ValueError:  # NumPy refuses ragged nested sequences
        raise ValueError(
            "initial must have shape (n_chains, L) or (L,); its rows have "
            "different lengths."
        ) from None
    if array.ndim == 1:
        array = np.broadcast_to(array[None, :], (n_chains, array.shape[0]))
    elif array.ndim == 2 and n_chains is not None and array.shape[0] != n_chains:
        raise ValueError(
            f"initial has {array.shape[0]} rows but n_chains={n_chains}; pass one "
            "state per chain, a single state of shape (L,), or n_chains=None."
        )
    return check_codes(
        array, n_sites=n_sites, n_states=n_states, name="initial", rows="n_chains"
    )


def gibbs_sample(
    couplings,
    fields,
    n_samples,
    *,
    beta=1.0,
    n_chains=None,
    burn_in=200,
    thin=10,
    initial=None,
    random_state=None,
    device=None,
):
    """Draw states of a generalized Potts model by heat-bath Gibbs sampling.

    Many independent chains run at once. Each sweep updates every site of every
    chain once, in a fresh random order per chain, drawing the site's new state
    from its exact conditional

    ``p(s_i = a | s_-i) ∝ exp(beta * (h[i, a] + sum_{j != i} J[i, a, j, s_j]))``.

    Each chain runs ``burn_in`` sweeps, then contributes one sample every
    ``thin`` sweeps (its first after ``burn_in + thin`` sweeps) until
    ``n_samples`` samples are collected.

    Parameters
    ----------
    couplings : array-like of shape (L, q, L, q)
        Couplings ``J`` with zero diagonal blocks ``J[i, :, i, :]``.

    fields : array-like of shape (L, q)
        Fields ``h``.

    n_samples : int
        Number of samples, at least 1.

    beta : float, default=1.0
        Inverse temperature, non-negative (0 gives uniform states).

    n_chains : int, default=None
        Number of independent chains; ``None`` uses ``min(n_samples, 1000)`` (or
        the number of rows of a 2-D ``initial``). The work is about
        ``n_chains * burn_in + n_samples * thin`` chain sweeps.

    burn_in : int, default=200
        Sweeps before a chain's first sample, at least 0.

    thin : int, default=10
        Sweeps between two samples of a chain, at least 1.

    initial : array-like of shape (L,) or (n_chains, L), default=None
        Starting states (integers in ``[0, q)``); ``None`` draws them uniformly
        at random.

    random_state : int, RandomState instance or None, default=None
        Seed or generator of the initial states, the site orders and the
        uniforms of the categorical draws, all drawn with NumPy on the host.

    device : None, "cpu", "cuda", "cuda:N" or Device, default=None
        Where the chains run. ``None`` follows the input (CuPy couplings: GPU,
        CuPy out); otherwise NumPy comes back.

    Returns
    -------
    codes : ndarray of shape (n_samples, L), dtype int64
        Row ``k * n_chains + c`` is the ``k``-th sample of chain ``c``: rows
        next to each other come from different chains, and a chain's samples
        are ``n_chains`` rows apart.

    See Also
    --------
    exact_distribution : Exact law of a tiny model, the reference of the tests.
    conditional_log_probs : Log-conditionals of every site.

    Notes
    -----
    The running field ``F[c, i, :] = beta * (h[i, :] + sum_j J[i, :, j, s_cj])``
    is updated in ``O(L q)`` per site update (two rows of ``J``), so a sweep
    costs ``O(n_chains L^2 q)``; when every site interacts with at most ``L / 4``
    others (rings, lattices, sparse graphs) only those fields are updated,
    ``O(n_chains L q deg)``. Memory: three ``(n_chains, L q)`` arrays and the
    ``(L q, L q)`` couplings. Computation is in float64. New states are drawn
    by inverting the cumulative conditional with host-drawn uniforms, so the
    same ``random_state`` gives the same samples, and CPU and GPU runs consume
    the same random numbers (their draws agree unless floating-point rounding
    of ``exp`` differs at a category boundary, which is rare).

    With symmetric ``J`` the chain's stationary law is the Gibbs law
    ``P(s) ∝ exp(beta * (sum_{i<j} J[i, s_i, j, s_j] + sum_i h[i, s_i]))``. With
    asymmetric ``J`` (e.g. a factored-attention model fitted by
    pseudo-likelihood) there is no joint law with these conditionals in
    general; the sampler still runs the Markov chain defined by them, and its
    stationary law only approximately has these conditionals.

    Mixing is slow for strong couplings (large ``beta``, glassy dense ``J``):
    check it by comparing runs from different starts.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import gibbs_sample
    >>> J = np.zeros((3, 2, 3, 2))
    >>> J[0, :, 1, :] = J[1, :, 0, :] = 2.0 * np.eye(2)  # sites 0 and 1 agree
    >>> codes = gibbs_sample(J, np.zeros((3, 2)), 2000, random_state=0)
    >>> codes.shape, codes.dtype
    ((2000, 3), dtype('int64'))
    >>> agree = np.mean(codes[:, 0] == codes[:, 1])  # exact: e^2 / (1 + e^2)
    >>> bool(abs(agree - np.exp(2) / (1 + np.exp(2))) < 0.03)
    True
    """
    J, h = _check_model(couplings, fields)
    n_sites, n_states = h.shape
    n_samples = _check_int(n_samples, "n_samples", 1)
    beta = _check_beta(beta)
    if n_chains is not None:
        n_chains = _check_int(n_chains, "n_chains", 1)
    burn_in = _check_int(burn_in, "burn_in", 0)
    thin = _check_int(thin, "thin", 1)
    try:
        initial_ndim = np.ndim(initial)
    except ValueError:  # ragged rows, which _check_initial reports
        initial_ndim = None
    if n_chains is None and initial_ndim != 2:
        n_chains = min(n_samples, _DEFAULT_MAX_CHAINS)
    initial = _check_initial(initial, n_sites, n_states, n_chains)
    device = _resolve(device, couplings, fields)
    rng = check_random_state(random_state)
    if n_chains is None:
        n_chains = initial.shape[0]
    if initial is None:
        initial = rng.randint(n_states, size=(n_chains, n_sites)).astype(np.int64)

    n_records = math.ceil(n_samples / n_chains)
    records = np.empty((n_records, n_chains, n_sites), dtype=np.int64)
    with device.activate():
        chains = _GibbsChains(J, h, beta, initial, device)
        for record in range(n_records):
            for _ in range((burn_in if record == 0 else 0) + thin):
                chains.sweep(rng, device)
            records[record] = to_host(chains.states)
    return to_output(records.reshape(-1, n_sites)[:n_samples], device)


# -- conditionals -----------------------------------------------------------------


def _log_conditionals(codes, J, h, beta, xp=np):
    """Unvalidated core of :func:`conditional_log_probs` (arrays already on ``xp``)."""
    n_sites, n_states = h.shape
    size = n_sites * n_states
    x = one_hot(codes, n_states, xp)
    return log_conditionals(x, beta * J.reshape(size, size), beta * h, xp)


def conditional_log_probs(codes, couplings, fields, beta=1.0, *, device=None):
    """Log-conditionals ``log p(s_i = a | s_-i)`` of every site of every sequence.

    Parameters
    ----------
    codes : array-like of shape (n_samples, L)
        Integer states in ``[0, q)``.

    couplings : array-like of shape (L, q, L, q)
        Couplings with zero diagonal blocks; need not be symmetric.

    fields : array-like of shape (L, q)

    beta : float, default=1.0
        Inverse temperature, non-negative.

    device : None, "cpu", "cuda", "cuda:N" or Device, default=None
        Where to compute; ``None`` follows the input.

    Returns
    -------
    log_probs : ndarray of shape (n_samples, L, q)
        ``log_probs[n, i, a] = log p(s_i = a | s_-i = codes[n, -i])``, float64.

    See Also
    --------
    exact_conditional_entropy : Its exact expectation for a tiny model.

    Notes
    -----
    The conditional entropy ``-E[(1/L) sum_i log p(s_i | s_-i)]``, the lowest
    possible pseudo-likelihood test loss, is estimated on samples ``codes`` by
    ``-np.take_along_axis(log_probs, codes[..., None], 2).mean()``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import conditional_log_probs
    >>> J = np.zeros((2, 2, 2, 2))
    >>> J[0, :, 1, :] = J[1, :, 0, :] = np.eye(2)
    >>> p = np.exp(conditional_log_probs([[0, 0]], J, np.zeros((2, 2))))
    >>> np.round(p[0, 0], 3)  # site 0 given s_1 = 0: (e, 1) / (e + 1)
    array([0.731, 0.269])
    """
    device = _resolve(device, codes, couplings, fields)
    J, h = _check_model(couplings, fields)
    codes = check_codes(
        codes, n_sites=h.shape[0], n_states=h.shape[1], rows="n_samples"
    )
    beta = _check_beta(beta)
    with device.activate():
        xp = device.xp
        log_probs = _log_conditionals(
            to_device(codes, device),
            to_device(J, device),
            to_device(h, device),
            beta,
            xp,
        )
        return to_output(log_probs, device)


def zero_sum_gauge(couplings, fields=None):
    """The same conditionals with couplings in the zero-sum gauge.

    Adding to ``J[i, a, j, b]`` a function of ``b`` alone does not change the
    conditional of site ``i``, and a function of ``a`` alone can move into
    the field ``h[i, a]``: the couplings are defined up to such a gauge. The
    zero-sum gauge removes from every block its row and column means (and
    adds back its grand mean), so that each row and each column of every
    ``q x q`` block sums to zero, and moves the row means into the fields.
    It is the gauge of the ``couplings_`` and ``fields_`` of
    :class:`~sklearn_attn.PottsPseudoLikelihood`, the one in which couplings
    of different fits (or a fit and the truth) compare entry by entry.

    Parameters
    ----------
    couplings : array-like of shape (L, q, L, q)
        Couplings with zero diagonal blocks; need not be symmetric.
    fields : array-like of shape (L, q), default=None
        The fields; ``None`` means zero fields.

    Returns
    -------
    couplings : ndarray of shape (L, q, L, q)
        float64, every block with zero row and column sums, zero diagonal
        blocks, symmetric when ``couplings`` is.
    fields : ndarray of shape (L, q)
        float64, the fields that keep every conditional
        ``p(s_i = a | s_-i)`` (see :func:`conditional_log_probs`) unchanged,
        at every inverse temperature. Their constant shift per site (which
        the conditionals ignore) is left as it falls.

    Raises
    ------
    ValueError
        For shapes other than ``(L, q, L, q)`` and ``(L, q)``, no site or no
        state, NaN or infinity, or non-zero diagonal blocks.
    TypeError
        For values that are not real numbers.

    See Also
    --------
    frobenius_scores : Contact scores, optionally in this gauge.

    Notes
    -----
    The inputs are not modified. Applying the function twice gives the same
    result as once (up to rounding).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import zero_sum_gauge
    >>> J = np.zeros((2, 2, 2, 2))
    >>> J[0, :, 1, :] = J[1, :, 0, :] = [[2.0, 0.0], [0.0, 0.0]]
    >>> J0, h0 = zero_sum_gauge(J)
    >>> J0[0, :, 1, :]
    array([[ 0.5, -0.5],
           [-0.5,  0.5]])
    >>> h0
    array([[ 0.5, -0.5],
           [ 0.5, -0.5]])
    """
    if fields is None:
        fields = np.zeros(np.shape(couplings)[:2])
    J, h = _check_model(couplings, fields)
    # J and h are float64 and may be the user's arrays: the core only reads them.
    return _zero_sum_gauge(J, h)

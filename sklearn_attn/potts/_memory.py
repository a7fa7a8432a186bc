"""The memory a Potts fit needs, known before the work: an estimate, and the check.

The peak of a fit is set by the arrays of the size of the couplings, ``(L q)^2``
numbers: the parameters, the preconditioned coordinates and the gradient (float64),
the L-BFGS history (float32 pairs), the preconditioner, and the coupling matrix
and its gradient that each evaluation forms; beside them, the sequences in
blocks. By one-hot products (``algorithm="dense"``), an evaluation holds the
coupling matrix, its float64 gradient and a float32 block of it, and the
one-hot blocks of the sequences; by gathers, the full model's gradient goes
straight into the parameters, so an evaluation holds only the coupling matrix
and its panels, then the panels and the gradient, and the blocks of logits of
at most 2,048 sequences. The factored model forms the same coupling matrix
from its heads, but its parameters and history are small. The coefficients
bound from above the peak of the arrays a fit allocates (the tests compare
them with the peak that ``tracemalloc`` records), so that a fit the estimate
allows does not run out of memory for them.
"""

from __future__ import annotations

from numbers import Integral

from .._console import format_bytes
from ._model import _PRODUCT_ROWS

__all__ = ["estimate_fit_memory"]

# Bytes per entry of the (L q) x (L q) coupling matrix at the peak of a fit,
# by model and algorithm.
_BYTES_PER_COUPLING = {
    ("full", "dense"): 56,
    ("full", "gather"): 46,
    ("factored", "dense"): 28,
    ("factored", "gather"): 28,
}
# Bytes per one-hot entry n x (L q): one float32 copy of the sequences.
_BYTES_PER_ONE_HOT = 4
# The gathers' blocks: float32 logits and their panels, (L q) numbers each for
# the sequences of a block, and the sites' indices of every sequence.
_BYTES_PER_LOGIT = 8
_BYTES_PER_SITE = 32
# Bytes per entry L x (L q) of the full model's site coverage, the weights of
# the sequences that have each pair of sites (float64; formed when some are
# missing, for the preconditioner).
_BYTES_PER_COVERAGE = 8
# Bytes per parameter held besides the coupling matrix (the factored model's
# parameters, gradient and L-BFGS history).
_BYTES_PER_PARAMETER = {"full": 0, "factored": 96}
# Small arrays: fields, frequencies, weights, codes, the optimiser's scalars.
_OVERHEAD_BYTES = 32 * 2**20


def estimate_fit_memory(
    n_sequences,
    n_sites,
    n_states,
    parametrization="factored",
    n_heads=1,
    *,
    algorithm="dense",
):
    """Peak memory, in bytes, of fitting :class:`~sklearn_attn.PottsPseudoLikelihood`.

    An estimate from above of the arrays a fit allocates on the compute device
    (the interpreter and the libraries come on top): about ``56 (L q)^2`` bytes
    for the full model by one-hot products and ``46 (L q)^2`` by gathers,
    ``28 (L q)^2`` for the factored one, plus ``4 n L q`` for the one-hot
    sequences (by gathers: ``8 L q`` for each of at most 2,048 sequences and
    ``32 L`` for each), plus ``8 L^2 q`` for the full model's site coverage
    (its preconditioner with missing sites). ``fit`` checks it against the
    available memory before any work, and the ``contacts`` command against
    ``--max-memory``.

    Parameters
    ----------
    n_sequences : int
        Sequences of the fit (distinct ones, or all of them for a bound).
    n_sites, n_states : int
        ``L`` and ``q``.
    parametrization : {"factored", "full"}, default="factored"
        The model.
    n_heads : int, default=1
        Attention heads of the factored model.
    algorithm : {"dense", "gather"}, default="dense"
        How the fit computes (the estimator's resolved ``algorithm_``); the
        dense bound also holds for the gathers.

    Returns
    -------
    n_bytes : int

    Examples
    --------
    >>> from sklearn_attn.potts import estimate_fit_memory
    >>> round(estimate_fit_memory(13_600, 53, 21, "full") / 2**20)  # MiB
    156
    """
    for name, value, low in (
        ("n_sequences", n_sequences, 1),
        ("n_sites", n_sites, 2),
        ("n_states", n_states, 2),
        ("n_heads", n_heads, 1),
    ):
        if not isinstance(value, Integral) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    if parametrization not in _BYTES_PER_PARAMETER:
        raise ValueError(
            f"parametrization must be 'factored' or 'full'; got {parametrization!r}."
        )
    if algorithm not in ("dense", "gather"):
        raise ValueError(f"algorithm must be 'dense' or 'gather'; got {algorithm!r}.")
    n_sequences, n_sites = int(n_sequences), int(n_sites)
    width = n_sites * int(n_states)
    n_parameters = width
    if parametrization == "factored":
        n_parameters += int(n_heads) * (n_sites**2 + int(n_states) ** 2)
    if algorithm == "gather":
        sequences = (
            _BYTES_PER_LOGIT * min(n_sequences, _PRODUCT_ROWS) * width
            + _BYTES_PER_SITE * n_sequences * n_sites
        )
    else:
        sequences = _BYTES_PER_ONE_HOT * n_sequences * width
    coverage = _BYTES_PER_COVERAGE * n_sites * width if parametrization == "full" else 0
    return (
        _BYTES_PER_COUPLING[parametrization, algorithm] * width**2
        + sequences
        + coverage
        + _BYTES_PER_PARAMETER[parametrization] * n_parameters
        + _OVERHEAD_BYTES
    )


def memory_error(estimate, limit, *, where, options):
    """The error of a fit that would not fit: the estimate, the limit, the ways out."""
    return MemoryError(
        f"{where} needs about {format_bytes(estimate)} of memory, more than "
        f"{format_bytes(limit)} available; nothing was fitted. {options}"
    )

"""The Potts reproduction's real part: contact precision on the Kunitz/BPTI
family (PF00014) with plmc's settings, and the ranked pairs behind it."""

from __future__ import annotations

import numpy as np

from ._config import _CUTOFF, _MIN_SEPARATION
from ._measures import _timed_fit

__all__ = []


def _real_models(cfg):
    """The PF00014 models to fit: ``(label, keywords)`` pairs."""
    models = [("full", dict(parametrization="full"))]
    if cfg["real_factored"]:
        models.append(("factored (32 heads)", dict(n_heads=32)))
    return models


def _fit_real(label, kwargs, max_iter, random_state):
    """One task: a model of PF00014 with plmc's settings, and its contacts."""
    from ...contacts import contact_precision
    from ...datasets import load_pf00014
    from ...potts import PottsPseudoLikelihood

    data = load_pf00014()
    # plmc's settings: its penalties, 80% identity reweighting, gap as a state.
    model = PottsPseudoLikelihood(
        alpha_fields=0.01,
        alpha_couplings=16.0,
        sequence_identity=0.8,
        max_iter=max_iter,
        random_state=random_state,
        **kwargs,
    )
    # The quick run caps the iterations: the table says so instead of a warning.
    seconds, converged = _timed_fit(model, data.sequences)
    scores = model.contact_scores()
    precision = contact_precision(
        scores,
        data.contact_i,
        data.contact_j,
        data.distance,
        min_separation=_MIN_SEPARATION,
        cutoff=_CUTOFF,
    )
    row = {
        "part": "real",
        "model": label,
        "n_iter": model.n_iter_,
        "converged": converged,
        "objective_plmc_units": model.objective_,
        "fit_seconds": seconds,
        **{f"precision_top_{k}": v for k, v in precision.items()},
    }
    return row, _contact_rows(label, scores, data)


def _contact_rows(label, scores, data):
    """One row per pair of the contact map: its score, distance and rank.

    ``rank`` orders the candidate pairs (``|i - j| >= 6``, finite distance) as
    :func:`~sklearn_attn.contacts.contact_precision` does (largest score first,
    ties by ``(i, j)``), from 1; it is ``None`` for the other pairs.
    """
    i, j = (
        np.minimum(data.contact_i, data.contact_j),
        np.maximum(data.contact_i, data.contact_j),
    )
    distance = np.asarray(data.distance, dtype=np.float64)
    pair_scores = scores[i, j]
    candidate = (j - i >= _MIN_SEPARATION) & np.isfinite(distance)
    rank = np.zeros(i.size, dtype=np.int64)
    (index,) = np.nonzero(candidate)
    order = np.lexsort((j[index], i[index], -pair_scores[index]))
    rank[index[order]] = np.arange(1, index.size + 1)
    return [
        {
            "model": label,
            "i": int(i[p]),
            "j": int(j[p]),
            "distance": float(distance[p]),
            "contact": bool(candidate[p] and distance[p] < _CUTOFF),
            "score": float(pair_scores[p]),
            "rank": int(rank[p]) if rank[p] else None,
        }
        for p in range(i.size)
    ]

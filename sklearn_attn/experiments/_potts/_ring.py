"""The Potts reproduction's ring part: a planted Potts model on a ring, and the
factored layer and the full model fitted on its sequences at growing ``n``."""

from __future__ import annotations

import time

from .._common import seed_pair
from ._measures import _coupling_correlation, _true_loss

__all__ = ["PARAMETRIZATIONS"]

# The two models of the ring, by their PottsPseudoLikelihood parametrization.
PARAMETRIZATIONS = ("factored", "full")


def _draw_synthetic(cfg, seed, random_state):
    """One repetition's planted model and sequences, and the true test loss."""
    from ...datasets import make_potts_sequences

    data_seed, model_seed = seed_pair(random_state, 3, seed)
    X, params = make_potts_sequences(
        n_samples=max(cfg["n_train"]) + cfg["n_test"],
        n_sites=cfg["n_sites"],
        n_states=cfg["n_states"],
        graph="ring",
        n_channels=1,
        random_state=data_seed,
    )
    X_test = X[max(cfg["n_train"]) :]
    true_loss = _true_loss(X_test, params.couplings, params.fields, params.beta)
    return X, params, true_loss, model_seed


def _fit_synthetic(parametrization, X_train, X_test, couplings, model_seed):
    """One task: fit on the first sequences, measure on the test ones."""
    from ...potts import PottsPseudoLikelihood

    model = PottsPseudoLikelihood(parametrization, random_state=model_seed)
    start = time.perf_counter()
    model.fit(X_train)
    seconds = time.perf_counter() - start
    return {
        "test_loss": -model.score(X_test),
        "coupling_correlation": _coupling_correlation(model, couplings),
        "n_iter": model.n_iter_,
        "fit_seconds": seconds,
    }


def _synthetic_tasks(cfg, n_seeds, random_state, progress):
    """Draw the ring's sequences here; one fit task per model, size and seed.

    Returns ``(key, task)`` pairs: the key ``(parametrization, n_train, seed,
    true_loss)`` makes the task's row (:func:`_synthetic_row`), the task is
    ``(function, *args)`` for :func:`~sklearn_attn.experiments._common.run_tasks`.
    """
    n_max = max(cfg["n_train"])
    tasks = []
    for seed in range(n_seeds):
        X, params, true_loss, model_seed = _draw_synthetic(cfg, seed, random_state)
        progress(
            f"synthetic seed {seed}: sampled {len(X)} sequences, "
            f"true conditional entropy {true_loss:.4f}"
        )
        for parametrization in PARAMETRIZATIONS:
            for n_train in cfg["n_train"]:
                tasks.append(
                    (
                        (parametrization, n_train, seed, true_loss),
                        (
                            _fit_synthetic,
                            parametrization,
                            X[:n_train],
                            X[n_max:],
                            params.beta * params.couplings,
                            model_seed,
                        ),
                    )
                )
    return tasks


def _synthetic_row(parametrization, n_train, seed, true_loss, fitted, cfg):
    """A row of the ``synthetic`` table: a fit's measures, with its sizes."""
    return {
        "part": "synthetic",
        "parametrization": parametrization,
        "n_train": n_train,
        "seed": seed,
        "test_loss": fitted["test_loss"],
        "true_conditional_entropy": true_loss,
        "relative_excess_loss": fitted["test_loss"] / true_loss - 1.0,
        "coupling_correlation": fitted["coupling_correlation"],
        "n_iter": fitted["n_iter"],
        "fit_seconds": fitted["fit_seconds"],
        "n_sites": int(cfg["n_sites"]),
        "n_states": int(cfg["n_states"]),
        "n_test": int(cfg["n_test"]),
    }

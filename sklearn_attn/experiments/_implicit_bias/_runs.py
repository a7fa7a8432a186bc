"""Instances and training runs of the implicit-bias reproduction.

The separable instances of every structure and of the theorem's setting, the
seeds of every run, and one vectorised training run over all seeds.
"""

from __future__ import annotations

import numpy as np

from ...attention import make_max_margin_attention_data, train_attention_classifier
from .._common import seed_pair
from ._config import INITS, PARAMETRIZATIONS, STRUCTURES


def _draw(structure, cfg, n_seeds, random_state):
    data = []
    for seed in range(n_seeds):
        data_seed, _ = seed_pair(random_state, STRUCTURES.index(structure), seed)
        data.append(
            make_max_margin_attention_data(
                **cfg[structure], structure=structure, random_state=data_seed
            )
        )
    return data


def _draw_theorem(cfg, n_seeds, random_state):
    """Full-matrix instances with equal non-optimal scores (the theorem's setting).

    Their data seeds are keyed apart from those of both structures, so the
    instances are independent of the generic ones.
    """
    data = []
    for seed in range(n_seeds):
        data_seed, _ = seed_pair(random_state, len(STRUCTURES), seed)
        data.append(
            make_max_margin_attention_data(
                **cfg["full"],
                structure="full",
                scores="equal",
                score_gap=cfg["theorem"]["score_gap"],
                random_state=data_seed,
            )
        )
    return data


def _theorem_weight_seed(random_state, parametrization):
    """The initialisation seed of a theorem-study run (keyed apart from the rest)."""
    keys = (len(STRUCTURES) + 1, PARAMETRIZATIONS.index(parametrization))
    return seed_pair(random_state, *keys)[1]


def _weight_seed(random_state, structure, parametrization, init_name, init_scale):
    """The initialisation seed of one run.

    ``None`` for ``init_name`` (the reproduction's random start at its
    ``init_scale``) keeps the reproduction's seeds; the other starts of the
    aligned study get their own.
    """
    keys = [STRUCTURES.index(structure), PARAMETRIZATIONS.index(parametrization)]
    if init_name is not None:
        keys += [1 + list(INITS).index(init_name), round(1e6 * init_scale)]
    return seed_pair(random_state, *keys)[1]


def _train(
    structure,
    parametrization,
    data,
    cfg,
    random_state,
    init_name=None,
    init_scale=None,
    seed=None,
):
    """One vectorised run over all seeds.

    ``init_name=None``: the reproduction's run (random start at
    ``cfg["init_scale"]``, log-spaced checkpoints), initialised from ``seed``
    if given (the theorem study) or from the reproduction's seed. Otherwise a
    run of the aligned study from the start ``INITS[init_name]`` at
    ``init_scale``, recorded at the first and last steps only.
    """
    if seed is None:
        seed = _weight_seed(
            random_state, structure, parametrization, init_name, init_scale
        )
    stacked = [np.stack(a) for a in zip(*data, strict=True)][:4]
    if init_name is None:
        init, init_basis = INITS["random"]
        scale, checkpoints = cfg["init_scale"], cfg["checkpoints"]
    else:
        init, init_basis = INITS[init_name]
        scale, checkpoints = init_scale, [0, cfg["n_iter"]]
    return train_attention_classifier(
        *stacked,
        parametrization=parametrization,
        structure=structure,
        loss=cfg["loss"],
        optimizer=cfg["optimizer"],
        learning_rate=cfg["learning_rate"],
        n_iter=cfg["n_iter"],
        init_scale=scale,
        init=init,
        init_basis=init_basis,
        checkpoints=checkpoints,
        random_state=seed,
    )


def _aligned_runs(cfg):
    """``(init_scale, parametrization, init)`` of the aligned study's runs."""
    aligned = cfg.get("aligned") or {}
    drop = {(float(s), name) for s, name in aligned.get("drop", ())}
    return [
        (float(scale), p, name)
        for scale in aligned.get("init_scales", ())
        for p in PARAMETRIZATIONS
        for name in aligned.get("inits", ())
        if (float(scale), name) not in drop
    ]

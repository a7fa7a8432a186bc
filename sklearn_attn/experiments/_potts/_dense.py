"""The Potts reproduction's dense part: a dense signed teacher, which one free
factored head represents and one layer of vanilla self-attention does not, and
the models of the study fitted on its sequences at growing ``n``."""

from __future__ import annotations

import numpy as np

from .._common import seed_pair
from ._config import DENSE_MODELS
from ._measures import _coupling_correlation, _timed_fit, _true_loss

__all__ = ["dense_model", "draw_dense_teacher", "fit_dense"]


def draw_dense_teacher(
    n_train,
    n_test,
    *,
    n_sites=20,
    n_states=10,
    beta=3.0,
    train_seed=None,
    test_seed=None,
    mixing_seed=None,
    max_mixing_z=None,
):
    """A dense signed teacher, its training and test sequences, and a mixing check.

    The teacher is ``make_potts_sequences(graph="dense", beta=beta)`` (one
    channel: Gaussian position couplings ``N(0, 1) / sqrt(L)``, symmetric with
    a zero diagonal, and Gaussian colour embeddings), drawn with
    ``random_state=train_seed`` with its ``n_train`` training sequences. The
    test sequences come from an independent Gibbs run (``test_seed``), and a
    third run of ``n_test`` sequences from the all-zero sequence
    (``mixing_seed``) checks the sampler: with both runs stationary, the
    z-scores of the differences of their per-site state frequencies have
    variance about one, so their RMS (``mixing_z_rms``) is about one; a
    glassy teacher whose chains stay near their start gives many units.
    With ``max_mixing_z``, a teacher whose RMS z-score is above it gets no
    training sequences (``X`` is ``None``): the check runs first, on the
    teacher drawn alone (``make_potts_sequences`` draws the model before the
    sequences, so it does not depend on ``n_samples``).

    Parameters
    ----------
    n_train : int
        Training sequences, from the teacher's own Gibbs run.
    n_test : int
        Test sequences, and sequences of the run from the all-zero sequence.
    n_sites : int, default=20
        Sites ``L``.
    n_states : int, default=10
        States ``q``.
    beta : float, default=3.0
        Inverse temperature of the teacher.
    train_seed, test_seed, mixing_seed : int or None, default=None
        Seeds of the teacher with its training run, of the test run and of
        the run from the all-zero sequence.
    max_mixing_z : float, default=None
        Give no training sequences to a teacher whose RMS z-score is above
        it; ``None`` accepts every teacher.

    Returns
    -------
    X : ndarray of shape (n_train, n_sites) or None
        The training sequences; ``None`` for a teacher that failed the check.
    X_test : ndarray of shape (n_test, n_sites)
        The test sequences.
    params : Bunch
        The teacher's ``couplings``, ``fields`` and ``beta``.
    mixing : dict
        ``"rms"`` and ``"max"`` of the absolute z-scores.

    Examples
    --------
    >>> from sklearn_attn.experiments._potts import draw_dense_teacher
    >>> X, X_test, params, mixing = draw_dense_teacher(
    ...     30, 40, n_sites=4, n_states=3, train_seed=0, test_seed=1, mixing_seed=2
    ... )
    >>> X.shape, X_test.shape, params.couplings.shape
    ((30, 4), (40, 4), (4, 3, 4, 3))
    >>> sorted(mixing)
    ['max', 'rms']
    """
    from ...datasets import make_potts_sequences
    from ...potts import gibbs_sample

    def draw(n_samples):
        return make_potts_sequences(
            n_samples=n_samples,
            n_sites=n_sites,
            n_states=n_states,
            graph="dense",
            beta=beta,
            random_state=train_seed,
        )

    _, params = draw(1)
    X_test = gibbs_sample(
        params.couplings, params.fields, n_test, beta=beta, random_state=test_seed
    )
    cold = gibbs_sample(
        params.couplings,
        params.fields,
        n_test,
        beta=beta,
        initial=np.zeros(n_sites, dtype=int),
        random_state=mixing_seed,
    )
    a, b = (
        np.stack([(codes == k).mean(axis=0) for k in range(n_states)])
        for codes in (X_test, cold)
    )
    p = (a + b) / 2
    seen = (p > 0) & (p < 1)  # a state both runs always or never show: z = 0
    z = np.r_[0.0, (a - b)[seen] / np.sqrt(p[seen] * (1 - p[seen]) * 2 / n_test)]
    z_rms = np.sqrt(np.sum(z**2) / max(1, seen.sum()))
    mixing = {"rms": float(z_rms), "max": float(np.abs(z).max())}
    if max_mixing_z is not None and not mixing["rms"] <= max_mixing_z:
        return None, X_test, params, mixing
    X, _ = draw(n_train)
    return X, X_test, params, mixing


def dense_model(name, seed, *, tol=None, max_iter=None):
    """An unfitted model of the dense study.

    ``"factored"``: one free factored head, default start (``init="auto"``,
    the mean-field start); ``"vanilla"``:
    :class:`~sklearn_attn.potts.VanillaAttentionPseudoLikelihood` (width
    ``L + q``); ``"full"``: the full plmDCA model (the three of
    ``DENSE_MODELS``). Two more, for comparisons beyond the reproduction:
    ``"factored-random"`` (one free head from a random start) and
    ``"softmax"`` (one factored softmax head).

    Parameters
    ----------
    name : {"factored", "vanilla", "full", "factored-random", "softmax"}
        The model.
    seed : int or None
        Its ``random_state`` (the full model has none).
    tol : float, default=None
        Tolerance of the factored and full models; ``None`` leaves the
        estimator's default.
    max_iter : int, default=None
        Iteration limit of the vanilla layer; ``None`` leaves the
        estimator's default.

    Returns
    -------
    model : PottsPseudoLikelihood or VanillaAttentionPseudoLikelihood
        The unfitted estimator.

    Raises
    ------
    ValueError
        For another ``name``.

    Examples
    --------
    >>> from sklearn_attn.experiments._potts import dense_model
    >>> model = dense_model("factored", 0, tol=1e-5)
    >>> model.attention, model.tol
    ('free', 1e-05)
    """
    from ...potts import PottsPseudoLikelihood, VanillaAttentionPseudoLikelihood

    factored = {} if tol is None else {"tol": tol}
    if name == "factored":
        return PottsPseudoLikelihood(attention="free", random_state=seed, **factored)
    if name == "factored-random":
        return PottsPseudoLikelihood(
            attention="free", init="random", random_state=seed, **factored
        )
    if name == "softmax":
        return PottsPseudoLikelihood(random_state=seed, **factored)
    if name == "vanilla":
        limit = {} if max_iter is None else {"max_iter": max_iter}
        return VanillaAttentionPseudoLikelihood(random_state=seed, **limit)
    if name == "full":
        return PottsPseudoLikelihood("full", **factored)
    raise ValueError(f"unknown model of the dense study: {name!r}")


def fit_dense(name, seed, X_train, X_test, params, *, tol=None, max_iter=None):
    """One task of the dense study: fit ``dense_model(name, seed)`` and measure it.

    Parameters
    ----------
    name : str
        The model, as in :func:`dense_model`.
    seed : int or None
        Its ``random_state``.
    X_train : ndarray of shape (n_train, n_sites)
        The training sequences.
    X_test : ndarray of shape (n_test, n_sites)
        The test sequences.
    params : Bunch
        The teacher's ``couplings``, ``fields`` and ``beta``, as returned by
        :func:`draw_dense_teacher`.
    tol, max_iter : float and int, default=None
        As in :func:`dense_model`.

    Returns
    -------
    row : dict
        The test and training losses, each against the true conditional
        entropy on the same sequences (``relative_excess_loss`` and
        ``train_relative_excess_loss``: loss over entropy, minus 1; a training
        excess as large as the test one says the model class or the
        optimiser, not the sample size, stops the fit), the correlation of
        the couplings with the teacher's (``None`` for the vanilla layer,
        which has none), the objective, the iterations and their limit, the
        tolerance, whether the fit stopped before its iteration limit
        (``converged``), and the fit time.

    Examples
    --------
    >>> from sklearn_attn.experiments._potts import draw_dense_teacher, fit_dense
    >>> X, X_test, params, _ = draw_dense_teacher(
    ...     100, 100, n_sites=4, n_states=2, train_seed=0, test_seed=1, mixing_seed=2
    ... )
    >>> row = fit_dense("full", None, X, X_test, params)
    >>> row["coupling_correlation"] is not None, row["true_conditional_entropy"] > 0
    (True, True)
    """
    model = dense_model(name, seed, tol=tol, max_iter=max_iter)
    seconds, converged = _timed_fit(model, X_train)
    truth = (params.couplings, params.fields, params.beta)
    entropy_test, entropy_train = (
        _true_loss(X_test, *truth),
        _true_loss(X_train, *truth),
    )
    test_loss, train_loss = -model.score(X_test), -model.score(X_train)
    coupling_corr = (
        _coupling_correlation(model, params.beta * params.couplings)
        if hasattr(model, "couplings_")
        else None
    )
    return {
        "test_loss": test_loss,
        "true_conditional_entropy": entropy_test,
        "relative_excess_loss": test_loss / entropy_test - 1.0,
        "train_loss": train_loss,
        "train_conditional_entropy": entropy_train,
        "train_relative_excess_loss": train_loss / entropy_train - 1.0,
        "coupling_correlation": coupling_corr,
        "objective": model.objective_,
        "n_iter": model.n_iter_,
        "max_iter": model.max_iter,
        "tol": model.tol,
        "converged": converged,
        "fit_seconds": seconds,
    }


def _dense_config(cfg):
    """The dense study's settings, or ``None`` when it is left out."""
    dense = cfg.get("dense")
    return dict(dense) if dense else None


def _dense_tasks(cfg, random_state, progress):
    """Draw the dense teachers here; one fit task per model, size and seed.

    Returns ``(key, task)`` pairs as ``_synthetic_tasks`` does, with the key
    ``(name, n_train, seed, mixing)``; none when the study is left out.
    """
    dense = _dense_config(cfg)
    if dense is None:
        return []
    if int(dense["n_seeds"]) < 1:
        raise ValueError(
            "config['dense']['n_seeds'] must be a positive integer; got "
            f"{dense['n_seeds']!r}."
        )
    tasks, seed, draw = [], 0, 0
    n_seeds = int(dense["n_seeds"])
    # A teacher whose Gibbs runs do not mix (a Potts glass, common at beta = 3
    # among the teachers of low conditional entropy) has no samples of its own
    # law to learn from or to test on: it is skipped and the next one drawn.
    while seed < n_seeds and draw < 10 * n_seeds:
        train_seed, model_seed = seed_pair(random_state, 4, draw)
        test_seed, mixing_seed = seed_pair(random_state, 5, draw)
        draw += 1
        X, X_test, params, mixing = draw_dense_teacher(
            max(dense["n_train"]),
            dense["n_test"],
            n_sites=cfg["n_sites"],
            n_states=cfg["n_states"],
            beta=dense["beta"],
            train_seed=train_seed,
            test_seed=test_seed,
            mixing_seed=mixing_seed,
            max_mixing_z=dense["max_mixing_z"],
        )
        entropy = _true_loss(X_test, params.couplings, params.fields, params.beta)
        if X is None:
            progress(
                f"dense teacher {draw - 1}: skipped, its Gibbs runs do not mix "
                f"(z rms {mixing['rms']:.2f} > {dense['max_mixing_z']:g}; "
                f"conditional entropy {entropy:.4f})"
            )
            continue
        progress(
            f"dense seed {seed} (teacher {draw - 1}): sampled {len(X)} + "
            f"{len(X_test)} sequences at beta={dense['beta']:g}, true conditional "
            f"entropy {entropy:.4f}, mixing z rms {mixing['rms']:.2f}"
        )
        mixing = {**mixing, "draw": draw - 1}
        for name in DENSE_MODELS:
            for n_train in dense["n_train"]:
                if name == "vanilla" and n_train > dense["vanilla_max_n"]:
                    continue
                tasks.append(
                    (
                        (name, n_train, seed, mixing),
                        (
                            _fit_dense_task,
                            name,
                            model_seed,
                            X[:n_train],
                            X_test,
                            params,
                            dense["tol"],
                            dense["vanilla_max_iter"],
                        ),
                    )
                )
        seed += 1
    if seed < n_seeds:
        progress(f"dense: only {seed} of {draw} teachers mixed; {seed} used")
    return tasks


def _fit_dense_task(name, seed, X_train, X_test, params, tol, max_iter):
    # run_tasks passes positional arguments only.
    return fit_dense(name, seed, X_train, X_test, params, tol=tol, max_iter=max_iter)


def _dense_row(name, n_train, seed, mixing, fitted, cfg):
    """A row of the ``dense`` table: a fit's measures, its teacher and limits."""
    dense = _dense_config(cfg)
    return {
        "part": "dense",
        "model": name,
        "n_train": n_train,
        "seed": seed,
        **fitted,
        "beta": float(dense["beta"]),
        "n_sites": int(cfg["n_sites"]),
        "n_states": int(cfg["n_states"]),
        "n_test": int(dense["n_test"]),
        "vanilla_max_n": int(dense["vanilla_max_n"]),
        "teacher_draw": mixing["draw"],
        "mixing_z_rms": mixing["rms"],
        "max_mixing_z": float(dense["max_mixing_z"]),
    }

"""Settings of the Potts reproduction, and the contact definition of its tables.

Every size is shared by the two synthetic parts (``n_sites`` sites, ``n_states``
states); the ring's sizes are at the top level, the dense teacher's in
``"dense"``, the real part's (PF00014) in ``real_*``.
"""

from __future__ import annotations

import copy

__all__ = ["DENSE_MODELS", "default_config"]

# Contacts as in the tables: |i - j| >= 6 along the chain, distance below 8 A.
_MIN_SEPARATION = 6
_CUTOFF = 8.0

# The models of the dense study, by name; the benchmark adds two of its own.
DENSE_MODELS = ("factored", "vanilla", "full")

# Why these settings:
#
# * L = 20 sites and q = 10 states: the full model's L^2 q^2 couplings then
#   need far more samples than the factored layer's, so the two learning
#   curves separate within affordable training sizes.
# * the ring and the dense teacher at training sizes a factor 4 apart: the
#   excess loss is a straight line on a log-log plot, and four points show
#   its slope; 10,000 test sequences resolve an excess of a fraction of a
#   percent.
# * the dense teacher at beta = 3, where its conditional entropy is near one
#   nat per site; tol=1e-5 stops the factored and full fits where their test
#   loss has settled (the estimators' tighter default costs several times
#   the iterations for no visible change in the excess).
# * the vanilla layer is by far the slowest fit and does not converge within
#   any affordable number of iterations: a fixed budget of iterations shows
#   its gap, and it is not fitted above vanilla_max_n.
# * max_mixing_z = 1.5: two stationary Gibbs runs give an RMS z-score of
#   their state frequencies near one, a glassy teacher whose chains stay near
#   their start several; such a teacher is skipped.
# * PF00014: the full model (plmc's) for up to 100 L-BFGS iterations, and the
#   factored one with 32 heads beside it, whose contacts are compared with it.
_DEFAULT_CONFIG = {
    "n_sites": 20,
    "n_states": 10,
    "n_train": [400, 1600, 6400, 25600],
    "n_test": 10000,
    "n_seeds": 2,
    "real_max_iter": 100,
    "real_factored": True,
    "dense": {
        "beta": 3.0,
        "n_train": [400, 1600, 6400, 25600],
        "n_test": 10000,
        "n_seeds": 3,
        "tol": 1e-5,
        "vanilla_max_iter": 200,
        "vanilla_max_n": 6400,
        "max_mixing_z": 1.5,
    },
}

# The same comparisons at two sizes each, one repetition, one dense teacher
# and fewer test sequences, for ``demo``: the factored layer's lead over the
# full model already shows at these sizes. The PF00014 full model stops after
# a few L-BFGS iterations, where its top contacts are already nearly those of
# the converged fit, and the factored PF00014 model is left out.
_QUICK_CONFIG = {
    **_DEFAULT_CONFIG,
    "n_train": [250, 1000],
    "n_test": 4000,
    "n_seeds": 1,
    "real_max_iter": 5,
    "real_factored": False,
    "dense": {
        **_DEFAULT_CONFIG["dense"],
        "n_train": [400, 1600],
        "n_test": 2000,
        "n_seeds": 1,
        "vanilla_max_iter": 100,
        "vanilla_max_n": 1600,
    },
}


def default_config(quick=False):
    """The default (or ``--quick``) settings of :func:`run_potts`.

    Parameters
    ----------
    quick : bool, default=False
        Return the reduced settings (those of ``demo``).

    Returns
    -------
    config : dict
        A deep copy (safe to modify): ``n_sites``, ``n_states``, the ring's
        ``n_train``, ``n_test`` and ``n_seeds``, the PF00014 part's
        ``real_max_iter`` and ``real_factored``, and ``dense``, the dense
        study's ``beta``, ``n_train``, ``n_test``, ``n_seeds`` (teachers),
        ``tol``, ``vanilla_max_iter``, ``vanilla_max_n`` and
        ``max_mixing_z``.

    Examples
    --------
    >>> from sklearn_attn.experiments._potts import default_config
    >>> default_config()["n_train"]
    [400, 1600, 6400, 25600]
    >>> default_config(quick=True)["dense"]["n_train"]
    [400, 1600]
    """
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)

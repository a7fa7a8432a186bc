"""scikit-learn compatible estimators for learning single attention layers."""

from .attention import MultiHeadAttentionLearner
from .potts import PottsPseudoLikelihood
from .random_features import (
    RFMLP,
    AttentionRandomFeatures,
    BiasedRFA,
    MLPRandomFeatures,
    RandomFeatureAttentionRegressor,
    brfa_kernel,
    rfa_kernel,
    rfmlp_kernel,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "AttentionRandomFeatures",
    "BiasedRFA",
    "MLPRandomFeatures",
    "MultiHeadAttentionLearner",
    "PottsPseudoLikelihood",
    "RFMLP",
    "RandomFeatureAttentionRegressor",
    "__version__",
    "brfa_kernel",
    "rfa_kernel",
    "rfmlp_kernel",
]

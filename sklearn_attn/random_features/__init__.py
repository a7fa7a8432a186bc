"""Random-feature attention (RFA, BiasedRFA) and the random-feature MLP baseline."""

from ._attention import AttentionRandomFeatures, BiasedRFA, RandomFeatureAttentionRegressor
from ._mlp import RFMLP, MLPRandomFeatures

__all__ = [
    "AttentionRandomFeatures",
    "BiasedRFA",
    "MLPRandomFeatures",
    "RFMLP",
    "RandomFeatureAttentionRegressor",
]

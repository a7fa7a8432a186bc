"""Random-feature attention (RFA, BiasedRFA) and the random-feature MLP baseline."""

from ._attention import (
    AttentionRandomFeatures,
    BiasedRFA,
    RandomFeatureAttentionRegressor,
)
from ._kernels import brfa_kernel, rfa_kernel, rfmlp_kernel
from ._mlp import RFMLP, MLPRandomFeatures

__all__ = [
    "AttentionRandomFeatures",
    "BiasedRFA",
    "MLPRandomFeatures",
    "RFMLP",
    "RandomFeatureAttentionRegressor",
    "brfa_kernel",
    "rfa_kernel",
    "rfmlp_kernel",
]

"""Synthetic data sets for the settings studied in the papers, and one real family.

Every generator is a scikit-learn style ``make_*`` function taking a
``random_state``.

- :func:`make_token_regression`: key-averaged targets of a query and keys uniform
  on the sphere (random-feature attention).
- :func:`make_attention_layer_regression`: inputs and outputs of a planted
  multi-head softmax attention layer.
- :func:`make_potts_sequences`: sequences sampled from a planted generalized
  Potts model.
- :func:`load_pf00014`: a real protein family alignment with its contact map.
"""

from ._attention import make_attention_layer_regression
from ._pf00014 import load_pf00014
from ._potts import make_potts_sequences
from ._tokens import make_token_regression

__all__ = [
    "load_pf00014",
    "make_attention_layer_regression",
    "make_potts_sequences",
    "make_token_regression",
]

"""Synthetic data sets for the settings studied in the papers, scikit-learn style.

Every generator is a ``make_*`` function returning ``(X, y)`` with token input of
shape ``(n_samples, n_tokens, token_dim)`` and taking a ``random_state``.

- :func:`make_token_regression`: key-averaged targets of a query and keys uniform
  on the sphere (random-feature attention).
"""

from ._tokens import make_token_regression

__all__ = ["make_token_regression"]

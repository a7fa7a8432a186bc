"""Feature matrices computed block by block: the interface the ridge core reads.

The random-feature estimators never hold their full ``(n_samples, n_features)``
feature matrix. They hand the ridge core (:mod:`._ridge`, :mod:`._ridge_statistics`)
a :class:`FeatureBlocks` object that computes any block ``Phi[rows, cols]`` on
demand; :class:`ExplicitFeatures` wraps a matrix held in memory.
"""

from __future__ import annotations

import numpy as np

from .._backend import Device

__all__ = ["ExplicitFeatures", "FeatureBlocks", "slices"]


class FeatureBlocks:
    """Interface of a feature matrix that is computed block by block.

    Subclasses set ``n_samples``, ``n_features`` and ``device`` and implement
    :meth:`compute`, :meth:`row_blocks` and :meth:`column_blocks`.
    """

    n_samples: int
    n_features: int
    device: Device

    def compute(self, rows: slice, cols: slice):  # pragma: no cover - interface
        """Return ``Phi[rows, cols]`` as a new floating array on ``self.device``.

        The caller owns the result and may modify it in place.
        """
        raise NotImplementedError

    def row_blocks(self):  # pragma: no cover - interface
        """Slices over samples; each block holds all features."""
        raise NotImplementedError

    def column_blocks(self):  # pragma: no cover - interface
        """Slices over features; each block holds all samples."""
        raise NotImplementedError


class ExplicitFeatures(FeatureBlocks):
    """A feature matrix held in memory, cut into fixed-size blocks."""

    def __init__(self, features, device=None, block_size=256):
        self.features = features
        self.n_samples, self.n_features = features.shape
        self.device = Device() if device is None else device
        self.block_size = block_size

    def compute(self, rows, cols):
        # A fresh array: callers scale blocks in place.
        return self.device.xp.array(self.features[rows, cols], dtype=np.float64)

    def row_blocks(self):
        return slices(self.n_samples, self.block_size)

    def column_blocks(self):
        return slices(self.n_features, self.block_size)


def slices(n, size):
    """Consecutive slices of at most ``size`` covering ``range(n)``."""
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]

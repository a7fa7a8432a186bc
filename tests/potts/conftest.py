"""Fixtures of the Potts tests."""

import pytest

from sklearn_attn.potts import _gather

_NO_NUMBA = pytest.mark.skipif(
    not _gather.available(), reason="the gather kernels need numba (the fast extra)"
)


@pytest.fixture(
    params=[False, pytest.param(True, marks=_NO_NUMBA)], ids=["dense", "gather"]
)
def gather(request):
    """Both routes of the objective's products: one-hot products and gathers."""
    return request.param

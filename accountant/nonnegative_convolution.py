"""Convolution of nonnegative arrays by blocked matrix products, with its rounding bound.

``(a * b)_k = sum_i a_i b_(k-i)`` is cut into blocks of BLOCK indices: for a block difference
``d`` the products of ``a``'s block ``q`` with ``b``'s entries ``d B + r - s`` form one matrix
product, added into the output block ``q + d``. Every entry is then a sum of nonnegative
products along a tree of depth at most ``BLOCK + blocks`` (the matrix product's sum over one
block, then one addition per block difference), so its relative rounding error is at most
``(depth + 2) u`` to first order, as for a direct sum of that many terms; the bound returned
is taken with the larger of that depth and the direct sum's (the shorter array's length).
The matrix products run on the BLAS numpy loaded (many times faster than ``np.convolve``'s
dot per output entry on long arrays); short arrays are convolved directly.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

Array = NDArray[np.float64]

__all__ = ["BLOCK", "nonnegative_convolve"]

#: indices per block
BLOCK = 256
#: below this length of the shorter array the convolution is direct
DIRECT_BELOW = 8 * BLOCK
#: unit roundoff of IEEE double
_U = 2.0**-53


def nonnegative_convolve(a: Array, b: Array) -> tuple[Array, float]:
    """(the full convolution of the nonnegative arrays ``a`` and ``b``, the relative error
    bound of every entry)."""
    terms = min(a.size, b.size)
    if terms < DIRECT_BELOW:
        return np.convolve(a, b), terms * _U * 1.01 + 2 * _U
    if a.size > b.size:
        a, b = b, a
    blocks_a = -(-a.size // BLOCK)
    blocks_b = -(-b.size // BLOCK) + 1  # the block differences d = 0 .. blocks_b - 1
    rows = np.zeros(blocks_a * BLOCK)
    rows[: a.size] = a
    rows_2d = rows.reshape(blocks_a, BLOCK)  # rows_2d[q, s] = a[q B + s]
    # padded[BLOCK + j] = b[j]: M_d[s, r] = b[d B + r - s] = window[d B + 1 + r, BLOCK - 1 - s]
    padded = np.zeros((blocks_b + 2) * BLOCK)
    padded[BLOCK : BLOCK + b.size] = b
    window = sliding_window_view(padded, BLOCK)
    out = np.zeros((blocks_a + blocks_b) * BLOCK)
    out_2d = out.reshape(blocks_a + blocks_b, BLOCK)
    for d in range(blocks_b):
        toeplitz = np.ascontiguousarray(window[d * BLOCK + 1 : (d + 1) * BLOCK + 1, ::-1].T)
        out_2d[d : d + blocks_a] += rows_2d @ toeplitz
    depth = max(terms, BLOCK + blocks_b)
    return out[: a.size + b.size - 1], depth * _U * 1.01 + 2 * _U

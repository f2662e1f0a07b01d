"""Nearest-neighbour votes: each private record votes for its ``k`` nearest public candidates.

The exact (not yet private) histogram that private selection by voting adds noise to: one
record changes at most ``k`` of its entries, each by one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["vote_histogram"]

_CHUNK = 2048


def vote_histogram(
    records: NDArray[np.float64], candidates: NDArray[np.float64], k: int
) -> NDArray[np.float64]:
    """Exact votes: each record adds 1 to each of its ``k`` nearest candidates."""
    votes = np.zeros(candidates.shape[0], dtype=np.float64)
    cand_sq = np.einsum("ij,ij->i", candidates, candidates)
    for start in range(0, records.shape[0], _CHUNK):
        chunk = records[start : start + _CHUNK]
        d2 = cand_sq[None, :] - 2.0 * chunk @ candidates.T  # + |r|^2, constant per row
        nearest = np.argpartition(d2, k - 1, axis=1)[:, :k]
        np.add.at(votes, nearest.ravel(), 1.0)
    return votes

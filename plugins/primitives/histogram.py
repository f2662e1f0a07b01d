"""Private counts: a histogram of bin indices with Laplace or Gaussian noise on every count.

Each record falls in exactly one bin, so adding or removing one record changes one count by 1:
the add/remove L1 and L2 sensitivities are both 1. Bins are public (``num_bins``).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Event,
    GaussianEvent,
    InvalidParameterError,
    LaplaceEvent,
    Ledger,
    MethodSpec,
    ProofRef,
    hookimpl,
    one_of,
    positive_finite,
    positive_int,
)
from dpledger.plugins.primitives._common import float_matrix, is_bool


@attrs.frozen
class HistogramParams:
    """``mechanism``: ``"laplace"`` or ``"gaussian"``; noise is ``noise_multiplier`` times 1."""

    num_bins: int = attrs.field(validator=positive_int)
    noise_multiplier: float = attrs.field(validator=positive_finite)
    mechanism: str = attrs.field(default="laplace", validator=one_of("laplace", "gaussian"))
    clamp_nonnegative: bool = attrs.field(default=False, validator=is_bool)


def declare(params: HistogramParams, adjacency: Adjacency) -> Event:
    if params.mechanism == "gaussian":
        return GaussianEvent(params.noise_multiplier)
    return LaplaceEvent(params.noise_multiplier)


def counts_of(params: HistogramParams, data: Any) -> np.ndarray:
    bins = float_matrix("data", data, ndim=1)
    if bins.size and (
        np.any(bins != np.floor(bins)) or bins.min() < 0 or bins.max() >= params.num_bins
    ):
        raise InvalidParameterError(
            "data",
            f"bin indices must be integers in [0, {params.num_bins})",
            "map every record to a bin of the public domain first",
        )
    return np.bincount(bins.astype(np.int64), minlength=params.num_bins).astype(np.float64)


def run(
    params: HistogramParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    counts = counts_of(params, data)
    noise = ledger.gaussian if params.mechanism == "gaussian" else ledger.laplace
    noisy = np.asarray(noise(counts, 1.0, params.noise_multiplier, step="histogram"))
    if params.clamp_nonnegative:
        noisy = np.maximum(noisy, 0.0)
    return {"counts": noisy}


SPEC = MethodSpec(
    name="private_histogram",
    params=HistogramParams,
    declare=declare,
    run=run,
    description="Histogram over public bins with Laplace or Gaussian noise (sensitivity 1)",
    proof=ProofRef("Dwork & Roth 2014, Example 3.2 (histogram queries) and Theorem A.1"),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

"""The ``clipped_sum`` method: Gaussian noise on the sum of L2-clipped rows.

Privacy argument: after clipping every row to L2 norm at most ``clip``, adding or removing one
row moves the sum by at most ``clip`` (add/remove L2 sensitivity ``clip``). Gaussian noise of
std ``noise_multiplier * clip`` is therefore a Gaussian mechanism with that noise multiplier.
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
    Ledger,
    MethodSpec,
    ProofRef,
    hookimpl,
    positive_finite,
)


@attrs.frozen
class ClippedSumParams:
    """``clip``: L2 bound of each row; noise std is ``noise_multiplier * clip``."""

    clip: float = attrs.field(validator=positive_finite)
    noise_multiplier: float = attrs.field(validator=positive_finite)


def declare(params: ClippedSumParams, adjacency: Adjacency) -> Event:
    """The privacy event of one run. Cheap, deterministic, and no heavy imports."""
    return GaussianEvent(params.noise_multiplier)


def run(
    params: ClippedSumParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """All noise goes through ``ledger``; ``rng`` is only for non-private randomness."""
    rows = np.asarray(data, dtype=float)
    if rows.ndim != 2:
        raise InvalidParameterError(
            "data", f"must be a 2-D array, got shape {rows.shape}", "pass one row per record"
        )
    # the framework clips every row, so the sensitivity accounted is the one enforced
    noisy = ledger.clipped_sum_gaussian(
        rows, params.clip, params.noise_multiplier, step="noisy_sum"
    )
    return {"sum": np.asarray(noisy)}


SPEC = MethodSpec(
    name="clipped_sum",
    params=ClippedSumParams,
    declare=declare,
    run=run,
    description="Gaussian noise on the sum of L2-clipped rows",
    proof=ProofRef("Dwork & Roth 2014, Theorem A.1 (Gaussian mechanism), sensitivity = clip"),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

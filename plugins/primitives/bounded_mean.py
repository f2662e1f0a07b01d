"""Private mean of bounded vectors: Gaussian mechanism on the clipped sum, divided by a public n.

Every row is clipped to L2 norm at most ``radius`` (R). Adding or removing one row moves the sum
by at most R, so the add/remove L2 sensitivity of the sum is R and the noise std is
``noise_multiplier * R``. The denominator ``n`` is a *public* parameter (never computed from the
private data); dividing by it is post-processing. Under replace-one adjacency the sum's
sensitivity is 2R: that factor is applied by the accountant through the adjacency.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Event,
    GaussianEvent,
    Ledger,
    MethodSpec,
    ProofRef,
    hookimpl,
    positive_finite,
    positive_int,
)
from dpledger.plugins.primitives._common import float_matrix


@attrs.frozen
class BoundedMeanParams:
    """``radius``: L2 clip bound of each row; ``n``: public row count used as the denominator."""

    radius: float = attrs.field(validator=positive_finite)
    noise_multiplier: float = attrs.field(validator=positive_finite)
    n: int = attrs.field(validator=positive_int)


def declare(params: BoundedMeanParams, adjacency: Adjacency) -> Event:
    return GaussianEvent(params.noise_multiplier)


def run(
    params: BoundedMeanParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    rows = float_matrix("data", data, ndim=2)
    noisy_sum = ledger.clipped_sum_gaussian(
        rows, params.radius, params.noise_multiplier, step="mean.sum"
    )
    return {"mean": np.asarray(noisy_sum) / params.n, "noisy_sum": np.asarray(noisy_sum)}


SPEC = MethodSpec(
    name="private_mean",
    params=BoundedMeanParams,
    declare=declare,
    run=run,
    description="Mean of L2-clipped rows: Gaussian noise on the sum, divided by a public n",
    proof=ProofRef(
        "Dwork & Roth 2014, Theorem A.1 (sensitivity R of the clipped sum); "
        "post-processing (Proposition 2.1)"
    ),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

"""Laplace mechanism on a vector query whose add/remove L1 sensitivity the caller states.

``data`` is the exact query answer; the caller vouches for ``sensitivity`` (L1 norm).

On a user-level source (``data``: the unit key column and one column of values, one value or
vector per row) the query is the *sum of the rows*, each clipped to L1 norm ``sensitivity`` by
the ledger (the core lifts the row-level event to the users' contribution bound). The release
has the shape of one row (``(1,)`` for one value per row) however many rows or users there are:
one noisy value per row would publish the number of rows.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Event,
    LaplaceEvent,
    Ledger,
    MethodSpec,
    ProofRef,
    hookimpl,
    positive_finite,
    query_answer,
)
from dpledger.plugins.primitives._common import float_matrix, summed_rows


@attrs.frozen
class LaplaceParams:
    """``sensitivity``: add/remove L1 bound; noise scale is ``noise_multiplier * sensitivity``."""

    sensitivity: float = attrs.field(validator=positive_finite)
    noise_multiplier: float = attrs.field(validator=positive_finite)


def declare(params: LaplaceParams, adjacency: Adjacency) -> Event:
    return LaplaceEvent(params.noise_multiplier)


def run(
    params: LaplaceParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    rows = summed_rows(data, ledger)
    if rows is not None:  # a user-level source: the query is the sum of the rows
        release = ledger.clipped_sum_laplace(
            rows, params.sensitivity, params.noise_multiplier, step="laplace"
        )
        return {"release": np.atleast_1d(release)}
    answer = np.atleast_1d(float_matrix("data", data, ndim=None))
    release = ledger.laplace(answer, params.sensitivity, params.noise_multiplier, step="laplace")
    return {"release": np.atleast_1d(release)}


SPEC = MethodSpec(
    name="laplace_mechanism",
    params=LaplaceParams,
    declare=declare,
    run=run,
    description="Laplace noise on a vector query of stated add/remove L1 sensitivity (on a "
    "user-level source: on the sum of the rows, each clipped to that L1 norm)",
    proof=ProofRef("Dwork, McSherry, Nissim & Smith 2006, Proposition 1"),
    neighbours=query_answer,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

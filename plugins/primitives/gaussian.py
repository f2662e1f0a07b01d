"""Gaussian mechanism on a vector query whose add/remove L2 sensitivity the caller states.

``data`` is the exact query answer. The caller vouches for ``sensitivity`` (honest-but-curious):
adding or removing one record moves the answer by at most ``sensitivity`` in L2 norm.

On a user-level source (``data``: the unit key column and one column of values, one value or
vector per row) the query is the *sum of the rows*, each clipped to L2 norm ``sensitivity`` by
the ledger, so one row moves it by at most ``sensitivity`` (the core lifts the row-level event to
the users' contribution bound). The release has the shape of one row (``(1,)`` for one value per
row) however many rows or users there are: one noisy value per row would publish the number of
rows.
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
    query_answer,
)
from dpledger.plugins.primitives._common import float_matrix, summed_rows


@attrs.frozen
class GaussianParams:
    """``sensitivity``: add/remove L2 bound; noise std is ``noise_multiplier * sensitivity``."""

    sensitivity: float = attrs.field(validator=positive_finite)
    noise_multiplier: float = attrs.field(validator=positive_finite)


def declare(params: GaussianParams, adjacency: Adjacency) -> Event:
    return GaussianEvent(params.noise_multiplier)


def run(
    params: GaussianParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    rows = summed_rows(data, ledger)
    if rows is not None:  # a user-level source: the query is the sum of the rows
        release = ledger.clipped_sum_gaussian(
            rows, params.sensitivity, params.noise_multiplier, step="gaussian"
        )
        return {"release": np.atleast_1d(release)}
    answer = np.atleast_1d(float_matrix("data", data, ndim=None))
    release = ledger.gaussian(answer, params.sensitivity, params.noise_multiplier, step="gaussian")
    return {"release": np.atleast_1d(release)}


SPEC = MethodSpec(
    name="gaussian_mechanism",
    params=GaussianParams,
    declare=declare,
    run=run,
    description="Gaussian noise on a vector query of stated add/remove L2 sensitivity (on a "
    "user-level source: on the sum of the rows, each clipped to that L2 norm)",
    proof=ProofRef("Balle & Wang 2018, Theorem 8 (analytic Gaussian mechanism)"),
    neighbours=query_answer,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

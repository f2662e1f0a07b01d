"""Private selection of synthetic candidates by noisy nearest-neighbour voting.

Each private record votes for its ``k`` nearest candidates (Euclidean distance; candidates are
public, e.g. synthetic samples). The vote histogram over candidates changes by at most 1 in
``k`` distinct entries when one record is added or removed, so its add/remove L2 sensitivity is
``sqrt(k)``. Gaussian noise of std ``noise_multiplier * sqrt(k)`` is added to every count and
the ``top_n`` candidates by noisy count are kept (post-processing).

``data`` is a mapping with ``records`` (private, shape (n, d)) and ``candidates`` (public,
shape (m, d)).
"""

from __future__ import annotations

import math
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
    nn_records,
    positive_finite,
    positive_int,
    vote_histogram,
)
from dpledger.plugins.primitives._common import field_of, float_matrix


@attrs.frozen
class NNVotingParams:
    """``k`` votes per record, ``top_n`` candidates kept."""

    k: int = attrs.field(validator=positive_int)
    top_n: int = attrs.field(validator=positive_int)
    noise_multiplier: float = attrs.field(validator=positive_finite)


def declare(params: NNVotingParams, adjacency: Adjacency) -> Event:
    return GaussianEvent(params.noise_multiplier)


def run(
    params: NNVotingParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    records = float_matrix("data.records", field_of(data, "records"), ndim=2)
    candidates = float_matrix("data.candidates", field_of(data, "candidates"), ndim=2)
    m = candidates.shape[0]
    if records.shape[1] != candidates.shape[1]:
        raise InvalidParameterError(
            "data.candidates",
            "has a different width than records",
            "use candidates with the records' columns",
        )
    for name, value in (("k", params.k), ("top_n", params.top_n)):
        if value > m:
            raise InvalidParameterError(
                name,
                f"{value} exceeds the {m} candidates",
                "use at most as many as there are candidates",
            )
    votes = vote_histogram(records, candidates, params.k)
    noisy = np.asarray(
        ledger.gaussian(
            votes, math.sqrt(params.k), params.noise_multiplier, step="nn_voting.histogram"
        )
    )
    selected = np.argsort(-noisy, kind="stable")[: params.top_n]
    return {"selected": selected.astype(np.int64), "noisy_votes": noisy}


SPEC = MethodSpec(
    name="nn_vote_selection",
    params=NNVotingParams,
    declare=declare,
    run=run,
    description="Keep the top-N synthetic candidates by Gaussian-noised k-nearest-neighbour votes",
    proof=ProofRef(
        "Gaussian mechanism on a histogram of L2 sensitivity sqrt(k) "
        "(Dwork & Roth 2014, Theorem A.1); top-N is post-processing"
    ),
    neighbours=nn_records,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

"""Private selection from a score vector: exponential mechanism, report-noisy-max, noisy top-k.

``data`` is the vector of scores computed from the private data; the caller vouches for
``sensitivity``, the add/remove bound on every score. With ``monotonic`` scores (all move in the
same direction between neighbours, e.g. counts) the factor 2 in the noise scale is dropped.

On a user-level source (``data``: the unit key column and one column holding, per row, that
row's contribution to every candidate's score) the scores are the sums of the rows, each entry
clipped to ``[-sensitivity, sensitivity]``: the candidates are the columns, a public set, never
the rows (whose number depends on the data).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Event,
    ExponentialMechanismEvent,
    Ledger,
    MethodSpec,
    ProofRef,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    hookimpl,
    positive_finite,
    positive_int,
    score_vector,
    selection_epsilon,
)
from dpledger.plugins.primitives._common import is_bool, summed_scores


@attrs.frozen
class SelectionParams:
    """``epsilon`` of one selection; ``sensitivity`` bounds every score."""

    epsilon: float = attrs.field(validator=positive_finite)
    sensitivity: float = attrs.field(default=1.0, validator=positive_finite)
    monotonic: bool = attrs.field(default=False, validator=is_bool)


@attrs.frozen
class TopKParams:
    """``k`` picks at ``epsilon`` each."""

    epsilon: float = attrs.field(validator=positive_finite)
    k: int = attrs.field(validator=positive_int)
    sensitivity: float = attrs.field(default=1.0, validator=positive_finite)
    monotonic: bool = attrs.field(default=False, validator=is_bool)


def _declare_em(params: SelectionParams, adjacency: Adjacency) -> Event:
    # the scores' sensitivity is stated for add/remove: replace-one doubles the epsilon
    return ExponentialMechanismEvent(selection_epsilon(params.epsilon, adjacency))


def _run_em(
    params: SelectionParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    scores = summed_scores(data, ledger, params.sensitivity)
    index = ledger.exponential_mechanism(
        scores, params.sensitivity, params.epsilon, step="exponential", monotonic=params.monotonic
    )
    return {"index": index}


def _declare_rnm(params: SelectionParams, adjacency: Adjacency) -> Event:
    return ReportNoisyMaxEvent(selection_epsilon(params.epsilon, adjacency))


def _run_rnm(
    params: SelectionParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    scores = summed_scores(data, ledger, params.sensitivity)
    index = ledger.report_noisy_max(
        scores,
        params.sensitivity,
        params.epsilon,
        step="report_noisy_max",
        monotonic=params.monotonic,
    )
    return {"index": index}


def _declare_top_k(params: TopKParams, adjacency: Adjacency) -> Event:
    return SelfComposedEvent(
        ExponentialMechanismEvent(selection_epsilon(params.epsilon, adjacency)), params.k
    )


def _run_top_k(
    params: TopKParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    scores = summed_scores(data, ledger, params.sensitivity)
    top = ledger.noisy_top_k(
        scores,
        params.sensitivity,
        params.epsilon,
        params.k,
        step="noisy_top_k",
        monotonic=params.monotonic,
    )
    return {"indices": top}


EXPONENTIAL = MethodSpec(
    name="exponential_mechanism",
    params=SelectionParams,
    declare=_declare_em,
    run=_run_em,
    description="Pick one index with probability proportional to exp(eps * score / (2 * sens))",
    proof=ProofRef("McSherry & Talwar 2007, Theorem 6"),
    neighbours=score_vector,
)
REPORT_NOISY_MAX = MethodSpec(
    name="report_noisy_max",
    params=SelectionParams,
    declare=_declare_rnm,
    run=_run_rnm,
    description="Argmax of scores plus Laplace(2 * sens / eps) noise",
    proof=ProofRef("Dwork & Roth 2014, Claim 3.9 (report noisy max)"),
    neighbours=score_vector,
)
NOISY_TOP_K = MethodSpec(
    name="noisy_top_k",
    params=TopKParams,
    declare=_declare_top_k,
    run=_run_top_k,
    description="Top-k indices of scores plus Gumbel noise, k exponential mechanisms",
    proof=ProofRef("Durfee & Rogers 2019, Lemma 4.2 (one-shot Gumbel top-k equals peeling)"),
    neighbours=score_vector,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    for spec in (EXPONENTIAL, REPORT_NOISY_MAX, NOISY_TOP_K):
        register(spec)

"""Plugin entry point: registers DPSWflow-r, DPSWflow and DPSWgen.

Importing this module does not import torch; the runs import it when they start.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpledger.plugin import Ledger, MethodSpec, ProofRef, hookimpl
from dpledger.plugins.swflow.declare import declare
from dpledger.plugins.swflow.params import FlowParams, FlowResampleParams, GenParams

_PROOF = (
    "Gaussian mechanism on the per-record projections y Theta^T (record in the unit ball, "
    "replace-one L2 sensitivity 2 sigma_max(Theta), or 2 sqrt(w) with failure probability p "
    "charged as (0, p)); batches sampled without replacement (Balle, Barthe & Gaboardi 2018); "
    "everything else is post-processing. See docs/methods/swflow.md"
)


def _run_flow_resample(
    params: Any, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    from dpledger.plugins.swflow.methods import run_flow_resample

    return dict(run_flow_resample(params, data, ledger, rng))


def _run_flow(params: Any, data: Any, ledger: Ledger, rng: np.random.Generator) -> dict[str, Any]:
    from dpledger.plugins.swflow.methods import run_flow

    return dict(run_flow(params, data, ledger, rng))


def _run_gen(params: Any, data: Any, ledger: Ledger, rng: np.random.Generator) -> dict[str, Any]:
    from dpledger.plugins.swflow.methods import run_gen

    return dict(run_gen(params, data, ledger, rng))


DPSWFLOW_R = MethodSpec(
    name="dpswflow-r",
    params=FlowResampleParams,
    declare=declare,
    run=_run_flow_resample,
    description="DP sliced-Wasserstein flow, projections and batch resampled every step "
    "(Sebag et al., Algorithm 1)",
    proof=ProofRef(_PROOF, "docs/methods/swflow.md"),
)

DPSWFLOW = MethodSpec(
    name="dpswflow",
    params=FlowParams,
    declare=declare,
    run=_run_flow,
    description="DP sliced-Wasserstein flow, noisy target projections released once and "
    "reused (Sebag et al., Algorithm 2)",
    proof=ProofRef(_PROOF, "docs/methods/swflow.md"),
)

DPSWGEN = MethodSpec(
    name="dpswgen",
    params=GenParams,
    declare=declare,
    run=_run_gen,
    description="generator trained on the DP sliced-Wasserstein loss (Rakotomamonjy & "
    "Ralaivola 2021 baseline)",
    proof=ProofRef(_PROOF, "docs/methods/swflow.md"),
)

SPECS: tuple[MethodSpec, ...] = (DPSWFLOW_R, DPSWFLOW, DPSWGEN)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    for spec in SPECS:
        register(spec)

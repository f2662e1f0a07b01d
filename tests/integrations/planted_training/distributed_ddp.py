"""Two ranks on one machine (gloo): DPDDP with Opacus's distributed Poisson sampler, the
correct script; and the same run without Poisson sampling (a DistributedSampler), refused.

``main(rank, world_size, store, scenario, out)`` runs one rank and writes what its tracker saw
(or the refusal) to ``out``; the test starts both ranks.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import torch
import torch.distributed as dist
from opacus import PrivacyEngine
from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from dpledger.core.errors import DPLedgerError
from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model, train

N, BATCH, PUBLIC = 200, 20, 10


def _run(scenario: str) -> dict[str, Any]:
    dataset = data(N)
    poisson = scenario == "poisson"
    sampler = None if poisson else DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    net = DPDDP(model())
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=poisson,
    )
    optimizer.expected_batch_size = PUBLIC
    try:
        tracker = OpacusTracker.attach(engine, optimizer, loader, public_normaliser=PUBLIC)
    except DPLedgerError as e:
        return {"refused": str(e)}
    train(net, optimizer, loader)
    b = tracker.batching
    return {
        "optimizer": type(optimizer).__name__,
        "batching": [b.kind, b.world_size, b.dataset_size, b.sample_rate],
        "steps": len(tracker.steps),
        "opacus_steps": sum(h[2] for h in engine.accountant.history),
        "event": tracker.event().to_dict(),
        "findings": [f.cause for f in tracker.findings],
    }


def main(rank: int, world_size: int, store: str, scenario: str, out: str) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        result = _run(scenario)
    finally:
        dist.destroy_process_group()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)

"""Distributed training without Poisson sampling: a DistributedSampler on rank 0 of 2.

Each rank takes its own fixed-size batches of its shard, while Opacus accounts Poisson
sampling at q = 1/len(data_loader).
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model


def main() -> Any:
    dataset = data(64)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0)
    net = model()
    engine = PrivacyEngine()
    return make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(dataset, batch_size=8, sampler=sampler),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )[-1]

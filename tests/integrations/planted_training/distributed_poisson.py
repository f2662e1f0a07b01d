"""Correct: rank 0 of 2 with Opacus's distributed Poisson sampler (global rate 0.1).

Run under a process group of two ranks (the test stands in for it on one process).
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from opacus.utils.uniform_sampler import DistributedUniformWithReplacementSampler
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model, train

N, RATE, PUBLIC = 200, 0.1, 10


def main() -> Any:
    sampler = DistributedUniformWithReplacementSampler(total_size=N, sample_rate=RATE)
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_sampler=sampler),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    optimizer.expected_batch_size = PUBLIC
    tracker = OpacusTracker.attach(engine, optimizer, loader, public_normaliser=PUBLIC)
    train(net, optimizer, loader)
    return tracker

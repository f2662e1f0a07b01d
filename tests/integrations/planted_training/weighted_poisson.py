"""Correct: class rebalancing through per-record Poisson rates (dpledger's WeightedPoissonSampler).

Minority records join each batch with probability 0.2, majority ones with 0.05; five batches
per pass, so Opacus's q = 1/len(data_loader) = 0.2 is the largest rate.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from dpledger.integrations.opacus_samplers import WeightedPoissonSampler
from tests.integrations.planted_training._common import data, model, train

N, MINORITY, STEPS, PUBLIC = 200, 40, 5, 20


def main() -> Any:
    rates = [0.05] * (N - MINORITY) + [0.2] * MINORITY
    net = model()
    engine = PrivacyEngine()
    loader = DataLoader(data(N), batch_sampler=WeightedPoissonSampler(rates, STEPS))
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    optimizer.expected_batch_size = PUBLIC
    tracker = OpacusTracker.attach(engine, optimizer, loader, public_normaliser=PUBLIC)
    train(net, optimizer, loader, epochs=2)
    return tracker

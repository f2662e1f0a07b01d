"""A WeightedRandomSampler of 128 draws per epoch in batches of 16, given to make_private.

make_private replaces the sampler by Poisson sampling at q = 1/len(data_loader) = 1/8 over the
whole dataset: the weights are ignored and each batch holds about n/8 records, not 16.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, WeightedRandomSampler

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model, train


def main() -> Any:
    dataset = data(1000)
    sampler = WeightedRandomSampler(torch.ones(1000), num_samples=128, replacement=True)
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(dataset, batch_size=16, sampler=sampler),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    train(net, optimizer, loader, limit=2)
    return tracker

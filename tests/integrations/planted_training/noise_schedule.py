"""A noise multiplier lowered after the first epoch (a noise schedule), shuffled batches."""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model, train


def main() -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(64), batch_size=16, shuffle=True),
        noise_multiplier=2.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    train(net, optimizer, loader)
    optimizer.noise_multiplier = 1.0
    train(net, optimizer, loader)
    return tracker

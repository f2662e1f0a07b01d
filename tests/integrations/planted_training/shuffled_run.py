"""Correct: the docs' example, shuffled fixed-size batches (poisson_sampling=False)."""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model, train


def main() -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(64), batch_size=16, shuffle=True),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    tracker = OpacusTracker.attach(engine, optimizer, loader)
    train(net, optimizer, loader, epochs=2)
    return tracker

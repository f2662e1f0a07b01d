"""Correct: Poisson batches of about 20 split into physical batches of at most 5 by Opacus's
BatchMemoryManager, averaged over a public batch size."""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from opacus.utils.batch_memory_manager import BatchMemoryManager
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model

N, BATCH, PHYSICAL, PUBLIC = 200, 20, 5, 25


def main() -> tuple[Any, int]:
    """The tracker and the number of physical batches that ran."""
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    optimizer.expected_batch_size = PUBLIC
    tracker = OpacusTracker.attach(engine, optimizer, loader, public_normaliser=PUBLIC)
    loss_fn = torch.nn.CrossEntropyLoss()
    physical = 0
    with BatchMemoryManager(
        data_loader=loader, max_physical_batch_size=PHYSICAL, optimizer=optimizer
    ) as small:
        for xb, yb in small:
            optimizer.zero_grad()
            loss_fn(net(xb), yb).backward()
            optimizer.step()
            physical += 1
    return tracker, physical

"""Ghost clipping with a clipping norm lowered on the optimizer only.

The module clips at its own max_grad_norm; the optimizer scales the noise to its own. Lowering
the optimizer's alone (a clipping schedule) leaves gradients clipped at the old, larger norm
under noise for the new one.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model


def main() -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, criterion, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        criterion=torch.nn.CrossEntropyLoss(),
        data_loader=DataLoader(data(64), batch_size=16, shuffle=True),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
        grad_sample_mode="ghost",
    )
    for _ in range(2):
        for i, (xb, yb) in enumerate(loader):
            if i >= 2:
                break
            optimizer.zero_grad()
            criterion(net(xb), yb).backward()
            optimizer.step()
        optimizer.max_grad_norm = 0.5  # the schedule: the module still clips at 1.0
    return tracker

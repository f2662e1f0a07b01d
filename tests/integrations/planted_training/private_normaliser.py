"""A normaliser derived from the dataset size: linear regression on three records.

Opacus's make_private averages the noisy gradient sum over expected_batch_size =
int(q * len(dataset)); under add/remove adjacency the dataset size is private, and on tiny
data the divisor changes between neighbouring datasets (measured leakage well above the
accounted epsilon).
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset

from dpledger.integrations.opacus import make_private


def main() -> Any:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(3, 4), torch.randn(3, 1))
    model = torch.nn.Linear(4, 1)
    engine = PrivacyEngine()
    model, optimizer, loader, tracker = make_private(
        engine,
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=DataLoader(data, batch_size=1),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(xb), yb, reduction="sum").backward()
        optimizer.step()
    return tracker

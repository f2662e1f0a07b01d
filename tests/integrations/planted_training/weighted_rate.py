"""Class rebalancing with a WeightedRandomSampler kept (poisson_sampling=False).

260 records of class 0 and 40 of class 1, each weighted by 1/(its class count), 300 draws per
epoch in batches of 32: Opacus books q = 1/len(data_loader) = 0.1, but a minority record is in
a batch with probability 1 - (1 - 1/80)^32 = 0.33.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from dpledger.integrations.opacus import make_private

MAJORITY, MINORITY, BATCH = 260, 40, 32


def main(epochs: int = 1) -> Any:
    torch.manual_seed(0)
    labels = torch.cat([torch.zeros(MAJORITY), torch.ones(MINORITY)]).long()
    dataset = TensorDataset(torch.randn(len(labels), 4), labels)
    weights = torch.where(labels == 0, 1.0 / MAJORITY, 1.0 / MINORITY)
    sampler = WeightedRandomSampler(weights, num_samples=len(labels), replacement=True)
    model = torch.nn.Linear(4, 2)
    engine = PrivacyEngine()
    model, optimizer, loader, tracker = make_private(
        engine,
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=DataLoader(dataset, batch_size=BATCH, sampler=sampler),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
    return tracker

"""Tiny data and model shared by the planted scripts."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import TensorDataset


def data(n: int, *, classes: int = 2, dim: int = 4, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    return TensorDataset(x, torch.randint(0, classes, (n,), generator=g))


def model(dim: int = 4, classes: int = 2) -> Any:
    torch.manual_seed(0)
    return torch.nn.Linear(dim, classes)


def train(
    model: Any, optimizer: Any, loader: Any, *, epochs: int = 1, limit: int | None = None
) -> None:
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for i, (xb, yb) in enumerate(loader):
            if limit is not None and i >= limit:
                break
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()

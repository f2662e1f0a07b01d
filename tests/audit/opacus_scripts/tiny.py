"""A tiny Opacus training run in the form ``dpledger audit --opacus SCRIPT.py --one-run``
reads: 60 random records, a linear model, Poisson batches of about 20, one epoch."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")  # Opacus's secure-RNG and backward-hook notes

RECORDS, BATCH = 60, 20


def _data() -> TensorDataset:
    gen = torch.Generator().manual_seed(1)
    x = torch.rand((RECORDS, 4), generator=gen)
    return TensorDataset(x, torch.randint(0, 2, (RECORDS,), generator=gen))


def _train(model: Any, optimizer: Any, data_loader: Any) -> None:
    loss = torch.nn.CrossEntropyLoss()
    for xb, yb in data_loader:
        optimizer.zero_grad()
        loss(model(xb), yb).backward()
        optimizer.step()


def opacus_training() -> tuple[Any, Any, Any, Any]:
    """What make_private returned, and the training loop."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=DataLoader(_data(), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=True,
    )
    optimizer.expected_batch_size = BATCH  # a public normaliser
    return model, optimizer, loader, _train


def plain_model() -> tuple[Any, Any, Any, Any]:
    """A model without per-sample gradients (not the module make_private returned)."""
    model, optimizer, loader, train = opacus_training()
    return model._module, optimizer, loader, train


def plain_optimizer() -> tuple[Any, Any, Any, Any]:
    """An optimizer Opacus did not make private."""
    model, _, loader, train = opacus_training()
    return model, torch.optim.SGD(model.parameters(), lr=0.1), loader, train


def shuffled() -> tuple[Any, Any, Any, Any]:
    """Shuffled batches: no Poisson rate draws the canaries."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=DataLoader(_data(), batch_size=BATCH, shuffle=True),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    return model, optimizer, loader, _train


def no_step() -> tuple[Any, Any, Any, Any]:
    """A training function that never steps."""
    model, optimizer, loader, _ = opacus_training()
    return model, optimizer, loader, lambda *args: None


def three() -> tuple[Any, Any, Any]:
    """The loop is missing."""
    return opacus_training()[:3]

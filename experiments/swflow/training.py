"""Training of the public autoencoder and feature classifier of the digits experiment."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.data import check_records
from dpledger.plugins.swflow.latent import DTYPE, AutoEncoder, Classifier

__all__ = ["train_autoencoder", "train_classifier"]


def _batches(n: int, batch: int, gen: torch.Generator) -> list[torch.Tensor]:
    return list(torch.randperm(n, generator=gen).split(batch))  # type: ignore[no-untyped-call]


def _check_training(epochs: int, lr: float) -> None:
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise InvalidParameterError(
            "epochs", f"must be an integer >= 1, got {epochs!r}", "pass e.g. 30"
        )
    if not (isinstance(lr, int | float) and lr > 0 and np.isfinite(lr)):
        raise InvalidParameterError("lr", f"must be > 0, got {lr!r}", "pass e.g. 1e-3")


def train_autoencoder(
    public: Any,
    latent_dim: int = 8,
    *,
    epochs: int = 60,
    lr: float = 3e-3,
    batch: int = 64,
    seed: int = 0,
) -> AutoEncoder:
    """Fit the autoencoder on the public images (MSE, Adam)."""
    _check_training(epochs, lr)
    x = torch.from_numpy(check_records(public, field="public"))
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = AutoEncoder(x.shape[1], latent_dim).to(DTYPE)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for idx in _batches(x.shape[0], batch, gen):
            loss = torch.mean((model(x[idx]) - x[idx]) ** 2)
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
    model.eval()
    return model


def train_classifier(
    public: Any, labels: Any, *, epochs: int = 60, lr: float = 3e-3, batch: int = 64, seed: int = 0
) -> Classifier:
    """Fit the feature classifier on the public images (cross-entropy, Adam)."""
    _check_training(epochs, lr)
    x = torch.from_numpy(check_records(public, field="public"))
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    if y.shape != (x.shape[0],):
        raise InvalidParameterError("labels", "need one label per image", "pass a 1-D array")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Classifier(x.shape[1], int(y.max()) + 1).to(DTYPE)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for idx in _batches(x.shape[0], batch, gen):
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
    model.eval()
    return model

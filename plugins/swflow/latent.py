"""Public-split models of the latent pipeline (torch): an MLP autoencoder with unit-normalised
latents (the flows run on the sphere, as the reference code's ``NormalizedEncoder``) and a
small classifier whose hidden layer is the feature space of the Frechet distance.

Both are trained on the *public* split only, so they cost no privacy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.swflow.data import check_records

DTYPE = torch.float64


class AutoEncoder(nn.Module):
    """``x -> normalize(enc(x))`` on the unit sphere of ``R^latent``; ``dec`` maps back."""

    def __init__(self, in_dim: int, latent_dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.enc = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, latent_dim)
        )
        self.dec = nn.Sequential(
            nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, in_dim), nn.Sigmoid()
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.enc(x), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dec(self.encode(x))
        return out


class Classifier(nn.Module):
    """``x -> ReLU(Linear) = features -> Linear -> logits``."""

    def __init__(self, in_dim: int, num_classes: int, hidden: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_dim, 128), nn.ReLU(), nn.Linear(128, hidden), nn.ReLU()
        )
        self.head = nn.Linear(hidden, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.body(x)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


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


def encode(model: AutoEncoder, images: Any) -> np.ndarray:
    with torch.no_grad():
        z = model.encode(torch.from_numpy(check_records(images, field="images")))
    return np.asarray(z.numpy())


def decode(model: AutoEncoder, latents: Any) -> np.ndarray:
    """Decode latents (projected onto the unit sphere first, where the decoder was trained)."""
    z = torch.from_numpy(check_records(latents, field="latents"))
    with torch.no_grad():
        out = model.dec(nn.functional.normalize(z, dim=1))
    return np.asarray(out.numpy())


def features(model: Classifier, images: Any) -> np.ndarray:
    with torch.no_grad():
        return model.features(torch.from_numpy(check_records(images, field="images"))).numpy()


def accuracy(model: Classifier, images: Any, labels: Any) -> float:
    with torch.no_grad():
        logits = model(torch.from_numpy(check_records(images, field="images")))
    return float((logits.argmax(1).numpy() == np.asarray(labels)).mean())

"""Public-split models of the latent pipeline (torch): an MLP autoencoder with unit-normalised
latents (the flows run on the sphere, as the reference code's ``NormalizedEncoder``) and a
small classifier whose hidden layer is the feature space of the Frechet distance.

Both are trained on the *public* split only, so they cost no privacy
(``experiments/swflow/training.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

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

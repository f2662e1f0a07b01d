"""The DPSWgen generator (paper C.5 architecture) and its smoothed sliced-Wasserstein loss."""

from __future__ import annotations

import torch
from torch import nn


class Generator(nn.Module):
    """noise -> Linear(h) -> ReLU -> Linear(2h) -> BatchNorm -> ReLU -> Linear(h) -> ReLU ->
    Linear(d); optionally normalised onto the unit sphere (where the encoder's latents live)."""

    def __init__(
        self, noise_dim: int, out_dim: int, hidden: int = 256, normalize_output: bool = True
    ) -> None:
        super().__init__()
        self.normalize_output = normalize_output
        self.net = nn.Sequential(
            nn.Linear(noise_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2 * hidden),
            nn.BatchNorm1d(2 * hidden),
            nn.ReLU(),
            nn.Linear(2 * hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_dim),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(z)
        if self.normalize_output:
            out = nn.functional.normalize(out, dim=1)
        return out


def sliced_loss(
    fake: torch.Tensor,
    theta: torch.Tensor,
    target_noisy: torch.Tensor,
    smoothing_std: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Mean over directions of the squared 1-D ``W_2`` between the smoothed projections of
    ``fake`` and the (already noisy) target projections; both have the batch size rows."""
    proj = fake @ theta.T
    if smoothing_std > 0:
        proj = proj + smoothing_std * torch.randn(
            proj.shape, generator=generator, dtype=proj.dtype, device=proj.device
        )
    a = torch.sort(proj, dim=0).values
    b = torch.sort(target_noisy, dim=0).values
    return torch.mean((a - b) ** 2)

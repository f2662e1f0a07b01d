"""The Gaussian-smoothed sliced-Wasserstein flow of the toy problem (the paper's Fig. 1), run
with the plugin's flow step."""

from __future__ import annotations

import torch

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.transport import flow_step, sorted_columns

__all__ = ["SIGMA_UNITS", "smoothed_flow"]

SIGMA_UNITS: tuple[str, ...] = ("absolute", "sensitivity")


def smoothed_flow(
    target: torch.Tensor,
    particles: torch.Tensor,
    *,
    num_projections: int,
    num_steps: int,
    step_size: float,
    reg: float,
    sigma: float,
    generator: torch.Generator | None,
    evaluate_at: str = "noisy",
    sigma_unit: str = "absolute",
    fixed_release: bool = False,
) -> torch.Tensor:
    """The Gaussian-smoothed flow of the toy problem (Fig. 1): smoothing noise on the target
    and particle projections.

    ``sigma_unit = "absolute"`` (default): ``sigma`` is the standard deviation itself, as in
    Algorithm 1 ("variance sigma") and Eq. (22). ``"sensitivity"``: ``sigma`` is a multiplier
    relative to the replace-one sensitivity ``2 sigma_max(Theta)`` of a unit-ball record, so the
    standard deviation is ``2 sigma sigma_max(Theta)`` (the paper's digits convention).
    ``fixed_release = False`` (default): fresh directions and fresh target noise every step
    (Algorithm 1); ``True``: directions and target noise drawn once and reused (Algorithm 2
    with all directions used every step). The particles' smoothing noise is fresh every step.
    This is a simulation of the smoothed dynamics, not an accounted private release.
    """
    if sigma_unit not in SIGMA_UNITS:
        raise InvalidParameterError(
            "sigma_unit", f"unknown unit {sigma_unit!r}", f"use one of {list(SIGMA_UNITS)}"
        )
    x = particles
    d = target.shape[1]
    theta = std = target_sorted = None
    for _ in range(num_steps):
        if target_sorted is None or not fixed_release:
            theta = torch.randn(
                (num_projections, d), generator=generator, dtype=target.dtype, device=target.device
            )
            theta = theta / theta.norm(dim=1, keepdim=True)
            std = sigma
            if sigma_unit == "sensitivity":
                std = 2.0 * sigma * float(torch.linalg.matrix_norm(theta, ord=2))
            proj = target @ theta.T
            if std > 0:
                proj = proj + std * torch.randn(
                    proj.shape, generator=generator, dtype=proj.dtype, device=proj.device
                )
            target_sorted = sorted_columns(proj)
        assert theta is not None and std is not None
        x = flow_step(
            x,
            theta,
            target_sorted,
            step_size=step_size,
            reg=reg,
            smoothing_std=std,
            generator=generator,
            evaluate_at=evaluate_at,
        )
    return x

"""The noise an Opacus optimizer actually added, against the multiplier it is accounted at.

:class:`NoiseWatch` wraps the optimizer's ``add_noise``: after it, ``p.grad - p.summed_grad``
is the noise drawn for the step. The accounting reads ``noise_multiplier`` and
``max_grad_norm`` in the step hook; a replaced ``add_noise`` (or one that changes the
multiplier while it draws and restores it) adds less noise than that. Under the accounted
scale ``s = noise_multiplier * max_grad_norm`` the sum of the squared noise coordinates over
``d`` coordinates divided by ``s^2`` is chi-squared with ``d`` degrees of freedom; a run whose
sum is ``r d`` with ``r < 1`` has probability at most ``(r e^(1 - r))^(d / 2)`` (Chernoff's
lower tail). Below :data:`FALSE_ALARM` the run is flagged: the noise added was smaller than the
noise accounted. Only the rank that draws the noise is checked (rank 0 when distributed).
"""

from __future__ import annotations

import math
from typing import Any

from dpledger.integrations.opacus_checks import FLAGGED, Finding

__all__ = ["FALSE_ALARM", "NoiseWatch", "chi2_lower_tail"]

#: the probability, under the accounted noise, that a correct run is flagged at one step
FALSE_ALARM = 1e-12


def chi2_lower_tail(total: float, d: int) -> float:
    """An upper bound of ``P[chi2_d <= total]`` (Chernoff): ``(r e^(1 - r))^(d / 2)`` for
    ``r = total / d < 1``, else 1."""
    if d <= 0 or total >= d:
        return 1.0
    if total <= 0:
        return 0.0
    r = total / d
    return math.exp(d / 2 * (math.log(r) + 1 - r))


class NoiseWatch:
    """Measures the noise of each noisy step and compares it with the accounted scale."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.original = optimizer.add_noise
        self.finding: Finding | None = None
        #: squared noise and coordinates of the step being taken (None: not measured)
        self._pending: tuple[float, int] | None = None
        self.total = 0.0
        self.coordinates = 0

    def install(self) -> None:
        self.optimizer.add_noise = self._measured

    def remove(self) -> None:
        if self.optimizer.__dict__.get("add_noise") == self._measured:
            self.optimizer.__dict__.pop("add_noise", None)

    def _measured(self) -> None:
        import torch

        self.original()
        self._pending = None
        if int(getattr(self.optimizer, "rank", 0) or 0) != 0:
            return  # distributed: rank 0 draws the noise, the others add none
        squares, count = 0.0, 0
        for p in self.optimizer.params:
            summed = getattr(p, "summed_grad", None)
            if summed is None or p.grad is None:
                return
            noise = p.grad.detach().reshape(-1) - summed.detach().reshape(-1)
            squares += float(noise.pow(2).sum(dtype=torch.float64))
            count += noise.numel()
        self._pending = (squares, count)

    def record(self, noise_multiplier: float, max_grad_norm: Any, step: int) -> None:
        """Charge the step's measured noise against the scale it is accounted at."""
        pending, self._pending = self._pending, None
        if self.finding is None and self.optimizer.__dict__.get("add_noise") != self._measured:
            self.finding = Finding(
                "noise_not_added",
                FLAGGED,
                "the optimizer's add_noise was replaced after the tracker was attached: the "
                "noise added cannot be checked and is not assumed",
                "attach the tracker after any change to the optimizer, and keep Opacus's add_noise",
                step,
                True,
            )
        if pending is None or isinstance(max_grad_norm, tuple) or self.finding is not None:
            return
        scale = noise_multiplier * float(max_grad_norm)
        if not 0 < scale < math.inf:
            return
        self.total += pending[0] / scale**2
        self.coordinates += pending[1]
        bound = chi2_lower_tail(self.total, self.coordinates)
        if bound < FALSE_ALARM:
            ratio = math.sqrt(self.total / self.coordinates)
            self.finding = Finding(
                "noise_not_added",
                FLAGGED,
                f"the noise added has a standard deviation of about {ratio:.3g} times the "
                f"accounted noise_multiplier * max_grad_norm = {scale:g} (over "
                f"{self.coordinates} coordinates; probability under the accounted noise "
                f"below {bound:.1e}): the bound does not cover the noise that ran",
                "use Opacus's add_noise unchanged and keep noise_multiplier fixed while it draws",
                step,
                True,
            )

"""Validated parameters of the three sliced-Wasserstein methods (no torch, no POT).

Noise convention. ``noise_multiplier = m`` means the noisy projections get Gaussian noise of
std ``m * C_t`` where ``C_t`` is the per-record bound of step ``t``: the exact operator norm
``sigma_max(Theta_t)`` (default) or ``sqrt(w(N_theta, d, p))`` (``sensitivity_bound =
"probabilistic"``). Records live in the unit ball, so replacing one moves the release by at most
``2 C_t``; that factor 2 is carried by the replace-one adjacency. The paper's ``sigma`` is a
multiplier relative to ``2 sqrt(w)``, so paper ``sigma`` equals ``m / 2`` here.

Privacy level: give ``noise_multiplier`` *or* ``target_epsilon`` (calibrated at ``delta`` with
the certified accountant); give neither for the non-private flow (epsilon = infinity).
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs

from dpledger.plugin import (
    InvalidParameterError,
    nonnegative_finite,
    one_of,
    positive_finite,
    positive_int,
)

SENSITIVITY_BOUNDS: tuple[str, ...] = ("operator_norm", "probabilistic")
EVALUATE_AT: tuple[str, ...] = ("noisy", "clean")


def _optional_positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (value > 0 and math.isfinite(value))
    ):
        fix = (
            "pass a noise multiplier > 0 (sigma <= 0 is not a Gaussian mechanism), or omit it "
            "for the non-private flow"
            if attribute.name == "noise_multiplier"
            else "pass a finite epsilon > 0, or omit it for the non-private flow"
        )
        raise InvalidParameterError(attribute.name, f"must be > 0 and finite, got {value!r}", fix)


def _delta(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidParameterError(
            attribute.name, f"must lie in (0, 1), got {value!r}", "pass e.g. delta = 1e-5"
        )


def _optional_probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidParameterError(
            attribute.name,
            f"must lie in (0, 1), got {value!r}",
            "pass a per-step failure probability well below delta / num_steps, or omit it",
        )


_DEVICE = re.compile(r"^(cpu|cuda(:[0-9]+)?|mps)$")


def _device(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not _DEVICE.match(value):
        raise InvalidParameterError(
            attribute.name,
            f"unknown torch device {value!r}",
            "use 'cpu', 'cuda', 'cuda:N' or 'mps'",
        )


@attrs.frozen
class _Common:
    """Fields shared by the three methods."""

    num_projections: int = attrs.field(default=70, validator=positive_int)
    num_steps: int = attrs.field(default=100, validator=positive_int)
    noise_multiplier: float | None = attrs.field(default=None, validator=_optional_positive)
    target_epsilon: float | None = attrs.field(default=None, validator=_optional_positive)
    delta: float = attrs.field(default=1e-5, validator=_delta)
    sensitivity_bound: str = attrs.field(
        default="operator_norm", validator=one_of(*SENSITIVITY_BOUNDS)
    )
    #: per-step failure probability of the probabilistic bound (default delta / (10 num_steps))
    failure_probability: float | None = attrs.field(default=None, validator=_optional_probability)
    num_particles: int = attrs.field(default=500, validator=positive_int)
    #: torch device of the particles / generator (noise is drawn by the ledger on the CPU)
    device: str = attrs.field(default="cpu", validator=_device)

    def __attrs_post_init__(self) -> None:
        if self.noise_multiplier is not None and self.target_epsilon is not None:
            raise InvalidParameterError(
                "target_epsilon",
                "given together with noise_multiplier",
                "give one of noise_multiplier or target_epsilon (or neither for epsilon = inf)",
            )
        if self.sensitivity_bound == "probabilistic" and self.failure_per_step >= self.delta:
            raise InvalidParameterError(
                "failure_probability",
                f"{self.failure_per_step!r} is not below delta",
                "choose a per-step failure probability much smaller than delta / num_steps",
            )

    @property
    def private(self) -> bool:
        return self.noise_multiplier is not None or self.target_epsilon is not None

    @property
    def failure_per_step(self) -> float:
        if self.failure_probability is not None:
            return float(self.failure_probability)
        return self.delta / (10.0 * self.failure_steps)

    @property
    def failure_steps(self) -> int:
        """How many times a fresh projection matrix meets the private data."""
        return self.num_steps


@attrs.frozen
class FlowResampleParams(_Common):
    """DPSWflow-r (Algorithm 1): fresh projections and a fresh batch every step.

    ``dataset_size`` is the public number of private records (batches are drawn without
    replacement from it); ``step_size`` is ``h``, ``reg`` is ``lambda`` (Langevin noise
    ``sqrt(2 h lambda) z``, public randomness).
    """

    dataset_size: int = attrs.field(default=1000, validator=positive_int)
    batch_size: int = attrs.field(default=250, validator=positive_int)
    step_size: float = attrs.field(default=1.0, validator=positive_finite)
    reg: float = attrs.field(default=0.0, validator=nonnegative_finite)
    evaluate_at: str = attrs.field(default="noisy", validator=one_of(*EVALUATE_AT))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.batch_size > self.dataset_size:
            raise InvalidParameterError(
                "batch_size",
                f"{self.batch_size} exceeds dataset_size {self.dataset_size}",
                "use a batch no larger than the private dataset",
            )


@attrs.frozen
class FlowParams(_Common):
    """DPSWflow (Algorithm 2): one noisy release of all ``num_projections`` projections of the
    whole private set, then ``num_steps`` post-processing steps on ``num_sub_projections``
    projections resampled (public randomness) every step."""

    num_sub_projections: int = attrs.field(default=25, validator=positive_int)
    step_size: float = attrs.field(default=1.0, validator=positive_finite)
    reg: float = attrs.field(default=0.0, validator=nonnegative_finite)
    evaluate_at: str = attrs.field(default="noisy", validator=one_of(*EVALUATE_AT))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.num_sub_projections > self.num_projections:
            raise InvalidParameterError(
                "num_sub_projections",
                f"{self.num_sub_projections} exceeds num_projections {self.num_projections}",
                "sub-sample at most num_projections projections",
            )

    @property
    def failure_steps(self) -> int:
        return 1  # one projection matrix, released once


@attrs.frozen
class GenParams(_Common):
    """DPSWgen: an MLP generator trained on the DP sliced-Wasserstein loss, one fresh batch and
    fresh projections per step. ``num_particles`` samples are generated at the end."""

    dataset_size: int = attrs.field(default=1000, validator=positive_int)
    batch_size: int = attrs.field(default=250, validator=positive_int)
    learning_rate: float = attrs.field(default=1e-3, validator=positive_finite)
    noise_dim: int = attrs.field(default=16, validator=positive_int)
    hidden: int = attrs.field(default=256, validator=positive_int)
    normalize_output: bool = attrs.field(default=True)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.batch_size > self.dataset_size:
            raise InvalidParameterError(
                "batch_size",
                f"{self.batch_size} exceeds dataset_size {self.dataset_size}",
                "use a batch no larger than the private dataset",
            )
        if not isinstance(self.normalize_output, bool):
            raise InvalidParameterError(
                "normalize_output",
                f"must be true or false, got {self.normalize_output!r}",
                "pass a boolean",
            )


AnyParams = FlowResampleParams | FlowParams | GenParams

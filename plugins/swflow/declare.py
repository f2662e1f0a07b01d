"""The privacy events of the three methods and noise calibration (no torch, no POT).

* DPSWflow-r / DPSWgen: ``num_steps`` times, a batch of exactly ``batch_size`` of the
  ``dataset_size`` records drawn without replacement, then one Gaussian release of the batch's
  projections: ``SelfComposed(SampledWithoutReplacement(n, B, Gaussian(m)), T)``.
* DPSWflow: one Gaussian release of the projections of all records: ``Gaussian(m)``; the
  iterations are post-processing.
* ``sensitivity_bound = "probabilistic"``: every projection matrix that meets the data adds an
  ``ApproxDP(0, p)`` step (the bound fails with probability at most ``p`` for a fixed pair of
  neighbours; on the complement the Gaussian analysis holds, so the failure probability adds
  to delta). It is composed *outside* the sampling (not amplified).

The release is per record (one noisy row per record, not a sum), so only the replace-one
relation applies: under add/remove the number of released rows would reveal membership.
"""

from __future__ import annotations

import functools

from dpledger.plugin import (
    Adjacency,
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    InvalidParameterError,
    NonPrivateEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    analytic_gaussian_sigma,
    calibrate_noise_multiplier,
)
from dpledger.plugins.swflow.params import AnyParams, FlowParams

#: calibration of the sampled composition searches the noise multiplier in this range (if the
#: lower end already meets the target it is used: more noise than needed, never less)
CALIBRATION_BRACKET: tuple[float, float] = (0.5, 50.0)
#: relative precision of the calibrated multiplier (the result errs on the side of more noise)
CALIBRATION_RTOL = 1e-3
#: relative margin so that every backend's rounding still certifies the target epsilon
_MARGIN = 1.0 + 1e-9


def check_adjacency(adjacency: Adjacency) -> None:
    """Refuse relations the per-record release cannot be analysed under."""
    if not isinstance(adjacency, Adjacency):
        raise InvalidParameterError(
            "adjacency",
            f"expected an Adjacency, got {adjacency!r}",
            "pass dpledger.core.adjacency.Adjacency(...)",
        )
    if adjacency.relation != "replace_one":
        raise InvalidParameterError(
            "adjacency",
            "the sliced-Wasserstein release publishes one noisy row per record, so add/remove "
            "neighbours differ in the number of rows (not a Gaussian-mechanism pair)",
            "use Adjacency(relation='replace_one') (fixed-size batches without replacement)",
        )
    if adjacency.unit != "row":
        raise InvalidParameterError(
            "adjacency",
            "user-level privacy is not supported by this method",
            "use unit = 'row' (one record per person)",
        )


def event_for(params: AnyParams, noise_multiplier: float) -> Event:
    """The declared event at a given noise multiplier."""
    gauss = GaussianEvent(noise_multiplier)
    if isinstance(params, FlowParams):
        main: Event = gauss
    else:
        main = SelfComposedEvent(
            SampledWithoutReplacementEvent(params.dataset_size, params.batch_size, gauss),
            params.num_steps,
        )
    if params.sensitivity_bound != "probabilistic":
        return main
    failure = ApproxDPEvent(0.0, params.failure_per_step)
    fail_event: Event = (
        failure if params.failure_steps == 1 else SelfComposedEvent(failure, params.failure_steps)
    )
    return ComposedEvent([main, fail_event])


@functools.lru_cache(maxsize=128)
def noise_multiplier_for(params: AnyParams, adjacency: Adjacency) -> float | None:
    """The noise multiplier the run uses (calibrated if ``target_epsilon``); None if public."""
    check_adjacency(adjacency)
    if params.noise_multiplier is not None:
        return float(params.noise_multiplier)
    if params.target_epsilon is None:
        return None
    if isinstance(params, FlowParams):
        # one Gaussian release: the analytic Gaussian mechanism (valid for every epsilon; the
        # classical sqrt(2 ln(1.25/delta))/epsilon is proven only for epsilon < 1). The failure
        # step (0, p) composes to delta_G + p - p delta_G <= delta_G + p, so calibrating the
        # Gaussian at delta - p keeps the total within delta.
        budget = params.delta
        if params.sensitivity_bound == "probabilistic":
            budget -= params.failure_per_step
        sigma = analytic_gaussian_sigma(
            params.target_epsilon, budget, sensitivity=adjacency.sensitivity_factor
        )
        return float(sigma * _MARGIN)
    result = calibrate_noise_multiplier(
        lambda m: event_for(params, m),
        adjacency,
        params.target_epsilon,
        params.delta,
        bracket=CALIBRATION_BRACKET,
        rtol=CALIBRATION_RTOL,
    )
    return float(result.noise_multiplier)


def declare(params: AnyParams, adjacency: Adjacency) -> Event:
    """The event a run of ``params`` spends (``NonPrivateEvent`` for epsilon = infinity)."""
    m = noise_multiplier_for(params, adjacency)
    if m is None:
        return NonPrivateEvent()
    return event_for(params, m)

"""The events that bound a private partition selection and a release over partition keys with
per-user contribution bounds (the analysis is in :mod:`dpledger.core.partition_selection`)."""

from __future__ import annotations

import math

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PartitionSelectionEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
)
from dpledger.core.partition_selection import (
    key_budget,
    key_release_bound,
    selection_parameters,
)

__all__ = ["dominating_event", "partitioned_noise_event"]

#: the name of the table that charges the keys held by one user
ONE_USER_KEYS = "partition selection: keys held by one user"
#: the name of the per-key table of the truncated geometric rule
GEOMETRIC_KEY = "partition selection: truncated geometric, one key"


def _up(x: float) -> float:
    return min(1.0, math.nextafter(x * (1 + 1e-12), math.inf))


def dominating_event(event: PartitionSelectionEvent) -> Event:
    """The events whose composition dominates ``event`` (the analysis of
    :mod:`dpledger.core.partition_selection`): ``k`` noise releases of sensitivity 1 and the
    ``(0, 1 - (1 - p)^k)`` pair for the keys held by one user; ``k`` copies of the
    ``(epsilon / k, delta_k)`` pair for the truncated geometric rule."""
    m, eps, delta, k = event.mechanism, event.epsilon, event.delta, event.max_partitions
    if m == "truncated_geometric":
        e, d = key_budget(m, eps, delta, k)
        floor = _up(-math.expm1(-e))  # the (e, d) pair's curve is 1 - e^eps below -e
        table = TabulatedProfileEvent((-e, e), (floor, _up(d)), name=GEOMETRIC_KEY)
        return SelfComposedEvent(table, k)
    scale, _ = selection_parameters(m, eps, delta, k)
    p = key_release_bound(m, eps, delta, k)
    q = _up(-math.expm1(k * math.log1p(-p))) if p < 1.0 else 1.0
    noise: Event = LaplaceEvent(scale) if m == "laplace" else GaussianEvent(scale)
    one_user = TabulatedProfileEvent((0.0,), (q,), name=ONE_USER_KEYS)
    return ComposedEvent((SelfComposedEvent(noise, k), one_user))


def partitioned_noise_event(
    noise: str, noise_scale: float, max_partitions: int, max_rows: int, clip: float
) -> Event:
    """A per-key sum of values clipped to ``clip`` (at most ``max_rows`` rows per user and key,
    at most ``max_partitions`` keys per user) released with noise of scale ``noise_scale``
    (Laplace ``b`` or Gaussian standard deviation) on every key: ``max_partitions`` releases of
    sensitivity ``max_rows * clip``, the noise multiplier rounded down."""
    if noise not in ("laplace", "gaussian"):
        raise InvalidParameterError("noise", f"unknown noise {noise!r}", "use laplace or gaussian")
    for name, value in (("max_partitions", max_partitions), ("max_rows", max_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParameterError(name, f"must be an integer >= 1, got {value!r}", "pass 1")
    for name, number in (("noise_scale", noise_scale), ("clip", clip)):
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise InvalidParameterError(name, f"must be a number, got {number!r}", "pass x > 0")
        if not 0 < number < math.inf:
            raise InvalidParameterError(name, f"must be > 0 and finite, got {number}", "pass x > 0")
    sensitivity = math.nextafter(float(max_rows) * float(clip), math.inf)
    multiplier = math.nextafter(float(noise_scale) / sensitivity, 0.0)
    leaf: Event = LaplaceEvent(multiplier) if noise == "laplace" else GaussianEvent(multiplier)
    return SelfComposedEvent(leaf, max_partitions)

"""Canonical worst-case neighbouring pairs of core events, as samplers.

For every supported event the pair ``(D, D')`` is the one whose output distributions attain
the event's privacy profile (the dominating pair). Noise is relative to the per-record
add/remove bound ``C = 1``; the adjacency's sensitivity factor (2 for replace-one) scales the
shift. Pairs are row level: lift a user-level release first (:mod:`dpledger.core.lifting`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

Array = NDArray[np.float64]
Sampler = Callable[[Any, int, np.random.Generator], Array]
Score = Callable[[Array], Array]

#: the two dataset labels passed to canonical samplers
D, D_PRIME = 0, 1


@attrs.frozen
class CanonicalPair:
    """A sampler over the datasets ``D`` (0) and ``D'`` (1) and its exact log-likelihood ratio."""

    sampler: Sampler
    log_likelihood_ratio: Score
    description: str
    d: int = D
    d_prime: int = D_PRIME


@attrs.frozen
class _Leaf:
    """One step: per-output samplers for D and D' and the exact LLR ``ln p_D'(x) / p_D(x)``."""

    sample: Callable[[int, int, np.random.Generator], Array]
    llr: Score
    description: str


def _rounded(llr: Array) -> Array:
    """Round an LLR to 1e-9 so float noise cannot separate the samplers' float lattices.

    Example: ``|x| - |x - 2|`` is -2 on ``x <= 0`` in exact arithmetic, but its rounding error
    depends on the low-order bits of ``x``, which differ between ``rng.laplace(0, b)`` and
    ``2 + rng.laplace(0, b)``; an event ``{score <= -2 - ulp}`` would then measure the float
    lattice (a real, but different, leak: Mironov 2012), not the mechanism's math.
    """
    return np.asarray(np.round(llr, 9), dtype=float)


def _shift(adjacency: Adjacency) -> float:
    if adjacency.unit != "row":
        raise UnsupportedEventError(
            "canonical pairs are row level; lift the event with dpledger.core.lifting first"
        )
    return float(adjacency.sensitivity_factor)


def _gaussian(s: float, shift: float) -> _Leaf:
    def sample(which: int, n: int, rng: np.random.Generator) -> Array:
        return rng.normal(shift * which, s, n)

    def llr(x: Array) -> Array:
        return _rounded((2 * x * shift - shift * shift) / (2 * s * s))

    return _Leaf(sample, llr, f"N(0, {s:g}^2) vs N({shift:g}, {s:g}^2)")


def _laplace(b: float, shift: float) -> _Leaf:
    def sample(which: int, n: int, rng: np.random.Generator) -> Array:
        return rng.laplace(shift * which, b, n)

    def llr(x: Array) -> Array:
        return _rounded((np.abs(x) - np.abs(x - shift)) / b)

    return _Leaf(sample, llr, f"Lap(0, {b:g}) vs Lap({shift:g}, {b:g})")


def _mixture(leaf_noise: str, scale: float, q: float, low: float, high: float) -> _Leaf:
    """D: ``(1-q) noise(0) + q noise(low)``; D': ``(1-q) noise(0) + q noise(high)``."""

    def draw(centre: Array, n: int, rng: np.random.Generator) -> Array:
        if leaf_noise == "gaussian":
            return rng.normal(centre, scale, n)
        return rng.laplace(centre, scale, n)

    def log_density(x: Array, m: float) -> Array:
        if leaf_noise == "gaussian":
            return np.asarray(-((x - m) ** 2) / (2 * scale * scale), dtype=float)
        return np.asarray(-np.abs(x - m) / scale, dtype=float)

    def sample(which: int, n: int, rng: np.random.Generator) -> Array:
        centre = high if which == D_PRIME else low
        included = rng.random(n) < q
        return draw(np.where(included, centre, 0.0), n, rng)

    def log_mix(x: Array, centre: float) -> Array:
        if q <= 0.0:
            return log_density(x, 0.0)
        if q >= 1.0:
            return log_density(x, centre)
        return np.asarray(
            np.logaddexp(np.log1p(-q) + log_density(x, 0.0), np.log(q) + log_density(x, centre)),
            dtype=float,
        )

    def llr(x: Array) -> Array:
        return _rounded(log_mix(x, high) - log_mix(x, low))

    return _Leaf(
        sample, llr, f"Poisson(q={q:g}) {leaf_noise}(scale {scale:g}) at {low:g} vs {high:g}"
    )


def _randomized_response(eps: float, k: int) -> _Leaf:
    p_true = np.exp(eps) / (np.exp(eps) + k - 1)

    def sample(which: int, n: int, rng: np.random.Generator) -> Array:
        truthful = rng.random(n) < p_true
        other = rng.integers(0, k - 1, n)
        other = np.where(other >= which, other + 1, other)  # uniform over the k-1 other buckets
        return np.where(truthful, which, other).astype(float)

    def llr(x: Array) -> Array:
        out = np.zeros_like(x, dtype=float)
        out[x == D_PRIME] = eps
        out[x == D] = -eps
        return out

    return _Leaf(sample, llr, f"{k}-ary randomized response eps={eps:g}, true bucket 0 vs 1")


def _leaf(event: Event, adjacency: Adjacency) -> _Leaf:
    if isinstance(event, GaussianEvent):
        return _gaussian(event.noise_multiplier, _shift(adjacency))
    if isinstance(event, LaplaceEvent):
        return _laplace(event.noise_multiplier, _shift(adjacency))
    if isinstance(event, RandomizedResponseEvent):
        return _randomized_response(event.epsilon, event.num_buckets)
    if isinstance(event, PoissonSampledEvent):
        inner = event.event
        _shift(adjacency)  # row level only
        if not isinstance(inner, GaussianEvent | LaplaceEvent):
            raise UnsupportedEventError(
                f"no canonical pair for Poisson sampling of {inner.describe()}"
            )
        noise = "gaussian" if isinstance(inner, GaussianEvent) else "laplace"
        q = event.sampling_probability
        if adjacency.relation == "add_remove":
            return _mixture(noise, inner.noise_multiplier, q, 0.0, 1.0)
        return _mixture(noise, inner.noise_multiplier, q, -1.0, 1.0)
    raise UnsupportedEventError(f"no canonical audit pair for {event.describe()}")


def canonical_pair(event: Event, adjacency: Adjacency | None = None) -> CanonicalPair:
    """The worst-case sampler pair of ``event`` (a leaf or ``SelfComposedEvent`` of a leaf).

    Composed events output one value per step; the exact LLR score is the sum of per-step LLRs.
    """
    adjacency = adjacency or Adjacency()
    if not isinstance(event, Event):
        raise InvalidParameterError("event", f"expected an Event, got {event!r}", "pass an event")
    count = 1
    if isinstance(event, SelfComposedEvent):
        count, event = event.count, event.event
        if count < 1:
            raise InvalidParameterError("count", "must be >= 1 to audit", "audit a release")
    leaf = _leaf(event, adjacency)
    if count == 1:
        return CanonicalPair(
            sampler=lambda which, n, rng: leaf.sample(int(which), n, rng),
            log_likelihood_ratio=leaf.llr,
            description=leaf.description,
        )

    def sampler(which: Any, n: int, rng: np.random.Generator) -> Array:
        return np.stack([leaf.sample(int(which), n, rng) for _ in range(count)], axis=1)

    def llr(x: Array) -> Array:
        return np.asarray(leaf.llr(x).sum(axis=1), dtype=float)

    return CanonicalPair(sampler, llr, f"{count} x [{leaf.description}]")

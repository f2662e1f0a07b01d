"""Samplers beyond Opacus's own: per-record inclusion rates, weighted and distributed batches.

A batch's privacy cost depends on how likely one record is to be in it, and the worst record
decides. This module reads that probability from the sampler objects (public parameters only:
the weights, the batch size, the world size; no data value or sampled index):

* :class:`WeightedPoissonSampler` (a batch sampler of this module): record ``i`` joins each
  batch independently with its own probability ``rates[i]``. The run is Poisson sampling at
  ``q_max = max_i rates[i]``: a record drawn at ``q_i <= q_max`` is the post-processing of one
  drawn at ``q_max`` (keep it with probability ``q_i / q_max``, else replace the release by one
  without it), so the Poisson subsampled Gaussian at ``q_max`` dominates each step.
* PyTorch's ``WeightedRandomSampler(weights, num_samples, replacement=True)`` cut into batches
  of ``B``: each batch is ``B`` independent draws, record ``i`` drawn with probability
  ``p_i = w_i / sum(w)``; it is in a batch with probability ``1 - (1 - p_i)^B``, and may be in
  it several times, each copy clipped on its own. The noisy sum of a batch is the
  post-processing of ``B`` releases of one draw each with the noise split evenly
  (``sigma / sqrt(B)`` each); one draw changes, when record ``i``'s value is replaced, with
  probability ``p_i`` by at most ``2 C``: by advanced joint convexity (Balle, Barthe, Gaboardi,
  NeurIPS 2018) its hockey-stick divergences are at most those of the Poisson subsampled
  Gaussian at ``p_max`` with multiplier ``sigma / (2 sqrt(B))`` in both directions. A step is
  therefore dominated by ``SelfComposedEvent(PoissonSampledEvent(p_max,
  GaussianEvent(sigma / (2 sqrt(B)))), B)``, a pair stated as add/remove curves for a run
  analysed under replace-one of a record in its slot. It is a certified upper bound, loose
  (the noise split costs a factor ``2 sqrt(B)``): the tight analysis of draws with
  replacement is not implemented; the weighted Poisson sampler above is the tight choice.
* Opacus's ``DistributedUniformWithReplacementSampler``: each of ``W`` ranks draws its shard
  at the rate ``q``; the union over the ranks is Poisson sampling of the whole dataset at ``q``,
  noised once (rank 0 adds the noise): one Poisson step per noisy step, world size counted once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

from dpledger.core.errors import InvalidParameterError, UnsupportedEventError

#: the spacing of torch's float64 uniform draws
GRID = 2.0**-53

__all__ = [
    "RATE_TOLERANCE",
    "WeightedPoissonSampler",
    "check_iteration",
    "draw_inclusion",
    "drawn_rate",
    "sampler_name",
    "weighted_draw_rates",
]


class WeightedPoissonSampler:
    """Batch sampler: record ``i`` joins each batch independently with probability ``rates[i]``.

    ``DataLoader(dataset, batch_sampler=WeightedPoissonSampler(rates, steps))``; ``steps``
    batches per pass. ``max_rate`` is the public bound on any record's rate (by default the
    largest rate): the rate of a record added or removed is at most it.
    """

    def __init__(
        self,
        rates: Sequence[float],
        steps: int,
        *,
        max_rate: float | None = None,
        generator: Any = None,
    ) -> None:
        values = [float(r) for r in rates]
        if not values or any(not 0.0 <= r <= 1.0 or math.isnan(r) for r in values):
            raise InvalidParameterError(
                "rates", "must be a non-empty list of probabilities in [0, 1]", "e.g. [0.01] * n"
            )
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InvalidParameterError(
                "steps", f"must be a positive int, got {steps!r}", "e.g. 100"
            )
        top = max(values) if max_rate is None else float(max_rate)
        if not max(values) <= top <= 1.0:
            raise InvalidParameterError(
                "max_rate", f"{top} is below a record's rate or above 1", "omit it or raise it"
            )
        self.rates = values
        self.steps = steps
        self.max_rate = top
        self.generator = generator

    @property
    def num_samples(self) -> int:
        return len(self.rates)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        import torch

        rates = torch.tensor(self.rates, dtype=torch.float64)
        for _ in range(self.steps):
            draw = torch.rand(len(self.rates), generator=self.generator, dtype=torch.float64)
            # draws lie on the grid k / 2^53: the record joins with probability
            # floor(rate * 2^53) / 2^53, never above its rate (``draw < rate`` could be)
            joined = (draw + GRID) <= rates
            yield joined.nonzero(as_tuple=False).reshape(-1).tolist()


def drawn_rate(rate: float) -> float:
    """The probability that ``torch.rand(n) < rate`` (Opacus's Poisson samplers) includes a
    record: torch's float32 uniform draws lie on the grid ``k / 2^24``, so it is
    ``ceil(rate * 2^24) / 2^24``, up to ``2^-24`` above ``rate`` (and at least the float64
    draws' probability). The run is accounted at it."""
    return min(1.0, math.ceil(rate * 2**24) / 2**24)


#: rates closer than this are the same rate drawn on torch's float32 grid
RATE_TOLERANCE = 2.0**-23


def sampler_name(obj: Any) -> str:
    """The class name of a sampler, through dpledger's counting wrapper."""
    return type(obj).__name__


#: attribute marking a class whose ``__iter__`` only counts what its base class yields
COUNTING = "_dpledger_counting"


def _library_classes() -> tuple[type, ...]:
    from opacus.utils.uniform_sampler import (
        DistributedUniformWithReplacementSampler,
        UniformWithReplacementSampler,
    )
    from torch.utils.data import (
        BatchSampler,
        DistributedSampler,
        RandomSampler,
        SequentialSampler,
        WeightedRandomSampler,
    )

    return (
        BatchSampler,
        DistributedSampler,
        RandomSampler,
        SequentialSampler,
        WeightedRandomSampler,
        UniformWithReplacementSampler,
        DistributedUniformWithReplacementSampler,
        WeightedPoissonSampler,
    )


def _defining(sampler: Any, name: str) -> type | None:
    """The class whose ``name`` the sampler uses, past dpledger's counting subclass."""
    for cls in type(sampler).__mro__:
        if name in cls.__dict__ and not cls.__dict__.get(COUNTING, False):
            return cls
    return None


def check_iteration(*samplers: Any) -> None:
    """Refuse a sampler whose batches are not those of the library class it is read as: a
    subclass that overrides ``__iter__`` or ``__len__`` may draw a record more often than the
    class's parameters say, and its inclusion rate cannot be read from them (None: skipped)."""
    library = _library_classes()
    for sampler, name in itertools.product(samplers, ("__iter__", "__len__")):
        cls = None if sampler is None else _defining(sampler, name)
        if cls is not None and cls not in library:
            raise UnsupportedEventError(
                f"the sampler {cls.__qualname__} overrides {name}: its batches are not those "
                "its parameters describe, and its inclusion rate cannot be read from them; use "
                "PyTorch's or Opacus's samplers unchanged (or dpledger's WeightedPoissonSampler)"
            )


def weighted_draw_rates(sampler: Any, dataset_size: int) -> tuple[float, ...]:
    """``p_i = w_i / sum(w)`` (rounded up) of a ``WeightedRandomSampler`` drawing with
    replacement over a dataset of ``dataset_size`` records; one line naming the fix otherwise."""
    if not bool(sampler.replacement):
        raise UnsupportedEventError(
            "a WeightedRandomSampler without replacement is not accounted (no theorem for its "
            "inclusion rates is implemented): draw with replacement=True, or use "
            "dpledger.integrations.opacus_samplers.WeightedPoissonSampler"
        )
    weights = [float(w) for w in sampler.weights.tolist()]
    total = math.fsum(weights)
    if len(weights) != dataset_size or total <= 0 or min(weights) < 0:
        raise InvalidParameterError(
            "sampler.weights",
            f"has {len(weights)} non-negative entries summing to {total:g}; the dataset has "
            f"{dataset_size} records",
            "give one non-negative weight per record, not all zero",
        )
    # each quotient is within a few rounding errors of w_i / sum(w): rounded up
    return tuple(min(1.0, w / total * (1 + 1e-12)) for w in weights)


def draw_inclusion(draw_rate: float, draws: int) -> float:
    """``1 - (1 - p)^B``: the probability that a record drawn with probability ``p`` at each
    of ``B`` independent draws is in the batch, rounded up (the few rounding errors of
    ``log1p``, the product and ``expm1`` are covered by a relative margin of 1e-12)."""
    value = -math.expm1(draws * math.log1p(-draw_rate)) if draw_rate < 1 else 1.0
    return min(1.0, value * (1 + 1e-12))

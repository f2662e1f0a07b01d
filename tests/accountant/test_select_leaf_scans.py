"""The scans of a ledger's leaves by their exact class: the hit-count route stops at a second
distinct leaf, a sampled noise leaf is split at once, the RDP support check and the exact lower
bound's split pass over the leaves whose answer their class decides, the RDP backend groups many
sampled Gaussians into cells in arrays."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from dpledger.accountant.exact_lower import _split
from dpledger.accountant.pld_hits import hit_count
from dpledger.accountant.rdp import RDPAccountant, _sampled_cells, _sampled_representatives
from dpledger.accountant.representatives import build, split
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")


def test_hit_count_merges_equal_leaves_and_stops_at_a_second_distinct_one() -> None:
    step = PoissonSampledEvent(0.01, GaussianEvent(2.0))
    twin = PoissonSampledEvent(0.01, GaussianEvent(2.0))  # equal, another object
    found = hit_count([(ComposedEvent([step, twin, step]), 2), (twin, 5)], ADD)
    assert found is not None and found.steps == 11
    assert found.q == 0.01 and found.eta == 0.5

    def ledger() -> Iterator[tuple[Event, int]]:
        yield SelfComposedEvent(step, 3), 1
        yield PoissonSampledEvent(0.02, GaussianEvent(2.0)), 1
        raise AssertionError("read past the second distinct leaf")

    assert hit_count(ledger(), ADD) is None
    assert hit_count([], ADD) is None
    assert hit_count([(LaplaceEvent(1.0), 3)], ADD) is None
    assert hit_count([(step, 3)], REPLACE) is None


@pytest.mark.parametrize("noise", [GaussianEvent, LaplaceEvent])
def test_a_sampled_noise_leaf_splits_into_rate_and_noise(noise: type[GaussianEvent]) -> None:
    event = PoissonSampledEvent(0.003, noise(1.7))
    found = split(event)
    assert found is not None
    shape, values, costly = found
    assert shape == ("poisson_sampled", (noise.kind,))
    assert values == (0.003, 1.7) and costly == (True, False)
    assert build(shape, values) == event
    # the same answer as the sampled event's own split, one level down
    inner = split(noise(1.7))
    assert inner == ((noise.kind,), (1.7,), (False,))


def test_rdp_support_names_the_first_unsupported_leaf() -> None:
    ok = [GaussianEvent(1.0), PoissonSampledEvent(0.1, GaussianEvent(1.0)), LaplaceEvent(2.0)]
    ok += [RandomizedResponseEvent(0.5), ExponentialMechanismEvent(1.0), PureDPEvent(0.2)]
    bad = [ApproxDPEvent(1.0, 1e-6), SampledWithoutReplacementEvent(10, 2, GaussianEvent(1.0))]
    acc = RDPAccountant(ADD)
    assert acc._unsupported_reason(ComposedEvent([*ok, ApproxDPEvent(1.0, 0.0)])) is None
    reason = acc._unsupported_reason(ComposedEvent(ok + bad))
    assert reason is not None and reason.startswith("approx_dp(") and "delta > 0" in reason
    sampled_laplace = PoissonSampledEvent(0.1, LaplaceEvent(1.0))
    reason = acc._unsupported_reason(ComposedEvent([*ok, sampled_laplace, *bad]))
    assert reason is not None and "only Gaussian sub-events" in reason
    # under replace-one the Poisson-sampled Gaussian is the first leaf refused
    reason = RDPAccountant(REPLACE)._unsupported_reason(ComposedEvent(ok + bad))
    assert reason is not None and "replace-one" in reason and reason.startswith("poisson_sampled")


def test_exact_lower_split_reads_the_pure_leaves() -> None:
    g, lap = GaussianEvent(1.0), LaplaceEvent(2.0)
    sampled = PoissonSampledEvent(0.1, GaussianEvent(1.0))
    event = ComposedEvent(
        [
            SelfComposedEvent(g, 3),
            lap,
            RandomizedResponseEvent(0.4),
            RandomizedResponseEvent(0.4, 3),  # k-ary: not a binary response, kept apart
            ExponentialMechanismEvent(1.0),
            PureDPEvent(0.25),
            SelfComposedEvent(sampled, 2),
            ApproxDPEvent(0.5, 1e-7),
            PureDPEvent(0.0),  # no loss: dropped
        ]
    )
    pure, others = _split(event)
    assert pure == [(0.4, 1), (0.5, 1), (0.25, 1)]
    assert all(math.isfinite(e) for e, _ in pure)
    # the two other leaves of the largest counts, the first one on ties
    assert others == [g, sampled]


def _reference_cells(
    sampled: dict[Event, float], merged: dict[Event, int], cells: np.ndarray, step: float
) -> list[tuple[Event, int]]:
    """Per cell in the order of its first member: the top corner (rate and mu up, never below
    a member's own) and the members' total count."""
    tops: dict[tuple[int, int], tuple[float, float, int]] = {}
    for (e, mu), (iq, imu) in zip(sampled.items(), cells.tolist(), strict=True):
        q = e.sampling_probability  # type: ignore[attr-defined]
        q0, mu0, n0 = tops.get((iq, imu), (0.0, 0.0, 0))
        tops[(iq, imu)] = (max(q0, q), max(mu0, mu), n0 + merged[e])
    width = math.log1p(step)
    out: list[tuple[Event, int]] = []
    for (iq, imu), (q, mu, n) in tops.items():
        rate = min(1.0, max(math.exp(iq * width), q))
        top_mu = max(math.exp(imu * width), mu)
        noise = math.nextafter(1.0 / top_mu * (1 - 4 * 2.0**-53), 0.0)
        out.append((PoissonSampledEvent(rate, GaussianEvent(noise)), n))
    return out


@pytest.mark.parametrize("offset", [0, 1 << 62])
def test_rdp_sampled_cells_group_as_member_by_member(offset: int) -> None:
    rng = np.random.default_rng(5)
    leaves = [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(1e-4, 3e-2, 3000), rng.uniform(0.5, 4.0, 3000), strict=True)
    ]
    merged: dict[Event, int] = {
        e: int(k) + offset for e, k in zip(leaves, rng.integers(1, 9, 3000), strict=True)
    }
    sampled = {e: 1.0 / e.event.noise_multiplier for e in leaves}  # type: ignore[attr-defined]
    step, cells = _sampled_cells(sampled)
    assert len({tuple(c) for c in cells.tolist()}) <= 64 < len(leaves)
    found = _sampled_representatives(sampled, merged, cells, step)
    assert found == _reference_cells(sampled, merged, cells, step)
    assert sum(k for _, k in found) == sum(merged.values())

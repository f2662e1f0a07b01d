"""The cases of the default accountant's benchmark (``benchmarks/accountant_default.py``).

DP-SGD-size compositions, many distinct leaves (rounded to representatives), heavy single hits,
random allocation at few steps, exact-lower cases and heterogeneous compositions of 1e4 and
1e5 components; each with its adjacency and the delta it is queried at.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

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
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

__all__ = ["CALIBRATION", "Case", "cases", "dp_sgd", "heterogeneous"]

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")


@attrs.frozen
class Case:
    """One benchmark query: epsilon of ``make()`` at ``delta`` under ``adjacency``."""

    name: str
    group: str
    make: Callable[[], Event]
    delta: float
    adjacency: Adjacency = ADD
    #: the reference value the issue states, shown beside the anchors ("" when none)
    reference: str = ""


def dp_sgd(sigma: float, q: float, steps: int) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


def heterogeneous(n: int, seed: int = 0) -> ComposedEvent:
    """``n`` distinct leaves: half DP-SGD steps of a sweep (rates 1e-4..3e-4, noise 0.9..1.1),
    a quarter Laplace counts (scales 500..1000 times sqrt(n / 1e4)), a quarter binary
    randomized responses (epsilons 1e-4..2e-4)."""
    rng = np.random.default_rng(seed)
    half, quarter = n // 2, n // 4
    scale = (n / 1e4) ** 0.5
    leaves: list[Event] = [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(1e-4, 3e-4, half), rng.uniform(0.9, 1.1, half), strict=True)
    ]
    leaves += [LaplaceEvent(float(b) * scale) for b in rng.uniform(500, 1000, quarter)]
    leaves += [
        RandomizedResponseEvent(float(e)) for e in rng.uniform(1e-4, 2e-4, n - half - quarter)
    ]
    return ComposedEvent(leaves)


def _distinct_poisson(n: int) -> Event:
    return ComposedEvent(
        [PoissonSampledEvent(1e-3 * (1 + i * 1e-4), GaussianEvent(1.0)) for i in range(n)]
    )


def _dp_sgd_cases() -> list[Case]:
    rows = [
        (1.1, 256 / 60000, 500, 1e-5),
        (1.1, 256 / 60000, 14040, 1e-5),
        (1.0, 0.01, 1000, 1e-15),
        (1.0, 1e-4, 100_000, 1e-10),
        (1.0, 1e-4, 10_000_000, 1e-5),
        (1.0, 1e-4, 100, 1e-15),
        (1.0, 1e-4, 10_000, 1e-15),
    ]
    return [
        Case(
            f"DP-SGD s={s:g} q={q:.3g} T={t:g}",
            "DP-SGD",
            (lambda s=s, q=q, t=t: dp_sgd(s, q, t)),
            d,
        )
        for s, q, t, d in rows
    ]


def _distinct_cases() -> list[Case]:
    g = "many distinct"
    return [
        Case(
            "10,000 distinct RR",
            g,
            lambda: ComposedEvent(
                [RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(10_000)]
            ),
            1e-5,
            reference="[0.53668, 0.54424]",
        ),
        Case(
            "1000 distinct approx-DP",
            g,
            lambda: ComposedEvent(
                [ApproxDPEvent(0.01 * (1 + i / 1000), 1e-9) for i in range(1000)]
            ),
            1e-5,
            reference="[1.92565, 1.92628]",
        ),
        Case(
            "1000 distinct EM",
            g,
            lambda: ComposedEvent(
                [ExponentialMechanismEvent(0.01 * (1 + i / 1000)) for i in range(1000)]
            ),
            1e-5,
            reference="RDP 0.974",
        ),
        Case(
            "257 distinct WOR (replace-one)",
            g,
            lambda: ComposedEvent(
                [
                    SampledWithoutReplacementEvent(60_000 + i, 600, GaussianEvent(1.0))
                    for i in range(257)
                ]
            ),
            1e-5,
            REPLACE,
            reference="256: [8.279, 8.685]",
        ),
        Case("2000 distinct Poisson", g, lambda: _distinct_poisson(2000), 1e-5),
        Case("2000 distinct Poisson", g, lambda: _distinct_poisson(2000), 1e-10),
        Case("10,000 distinct Poisson", g, lambda: _distinct_poisson(10_000), 1e-5),
        Case("10,000 distinct Poisson", g, lambda: _distinct_poisson(10_000), 1e-10),
        Case("1e4 heterogeneous", g, lambda: heterogeneous(10_000), 1e-5),
        Case("1e5 heterogeneous", g, lambda: heterogeneous(100_000), 1e-5),
    ]


def _heavy_cases() -> list[Case]:
    g = "heavy hits"

    def heavy() -> Event:
        return dp_sgd(0.02, 1e-6, 10_000)

    return [
        Case("s=0.02 q=1e-6 T=1e4", g, heavy, 1e-5, reference="dp-accounting 2532.2"),
        Case("s=0.02 q=1e-6 T=1e4", g, heavy, 1e-30, reference="about 13637"),
        Case("s=1 q=1e-6 T=1e7", g, lambda: dp_sgd(1.0, 1e-6, 10_000_000), 1e-15),
        Case(
            "replace-one s=0.02 q=0.1, one step",
            g,
            lambda: PoissonSampledEvent(0.1, GaussianEvent(0.02)),
            1e-5,
            REPLACE,
            reference="about 1433",
        ),
    ]


def _allocation_and_lower_cases() -> list[Case]:
    return [
        Case(
            "random allocation t=10 s=0.6",
            "random allocation",
            lambda: RandomAllocationEvent(10, GaussianEvent(0.6)),
            1e-5,
            reference="pld-accounting [5.6825, 5.7159]",
        ),
        Case(
            "random allocation t=10 s=0.6",
            "random allocation",
            lambda: RandomAllocationEvent(10, GaussianEvent(0.6)),
            1e-3,
        ),
        Case(
            "one EM eps=300",
            "exact lower",
            lambda: ExponentialMechanismEvent(300.0),
            1e-15,
        ),
        Case(
            "100 EM eps=0.1",
            "exact lower",
            lambda: SelfComposedEvent(ExponentialMechanismEvent(0.1), 100),
            1e-5,
        ),
        Case(
            "1000 EM eps=0.01527",
            "exact lower",
            lambda: SelfComposedEvent(ExponentialMechanismEvent(0.01527), 1000),
            1e-5,
            reference="RDP 0.97419",
        ),
        Case(
            "q=1 s=2 T=1e6",
            "exact lower",
            lambda: dp_sgd(2.0, 1.0, 1_000_000),
            1e-15,
            reference="exact 128969.68",
        ),
        Case(
            "Gaussian s=1 x 1e30",
            "exact lower",
            lambda: SelfComposedEvent(GaussianEvent(1.0), 10**30),
            1e-5,
            reference="exact 5.0e29",
        ),
        Case(
            "17 pure eps=0.001 + one sampled Gaussian",
            "exact lower",
            lambda: ComposedEvent(
                [
                    SelfComposedEvent(PureDPEvent(1e-3), 17),
                    PoissonSampledEvent(0.01, GaussianEvent(1.0)),
                ]
            ),
            1e-7,
        ),
        Case(
            "1000 WOR 256-of-60000 s=1 (replace-one)",
            "exact lower",
            lambda: SelfComposedEvent(
                SampledWithoutReplacementEvent(60_000, 256, GaussianEvent(1.0)), 1000
            ),
            1e-5,
            REPLACE,
        ),
        Case(
            "300 distinct allocations t=100..399 s=1",
            "random allocation",
            lambda: ComposedEvent(
                [RandomAllocationEvent(100 + i, GaussianEvent(1.0)) for i in range(300)]
            ),
            1e-5,
            reference="all t=399: 5.117; all t=100: 11.707",
        ),
        Case(
            "300 distinct shuffled epochs (replace-one)",
            "random allocation",
            _distinct_shuffled,
            1e-5,
            REPLACE,
        ),
        Case(
            "300 distinct shuffled Laplace epochs (replace-one)",
            "random allocation",
            _distinct_shuffled_laplace,
            1e-5,
            REPLACE,
            reference="RDP alone (before): [0, 6.906]",
        ),
    ]


def _distinct_shuffled() -> Event:
    """300 shuffled epochs of 60,000 records, batches of 100..399, noise 1..2."""
    return ComposedEvent(
        [ShuffledBatchesEvent(60_000, 100 + i, GaussianEvent(1.0 + i / 300)) for i in range(300)]
    )


def _distinct_shuffled_laplace() -> Event:
    """300 shuffled epochs of 2000 records, batches of 200..499, Laplace scales 20..30."""
    return ComposedEvent(
        [ShuffledBatchesEvent(2000, 200 + i, LaplaceEvent(20.0 + i / 30)) for i in range(300)]
    )


def cases() -> list[Case]:
    """Every benchmark case, in table order."""
    return _dp_sgd_cases() + _distinct_cases() + _heavy_cases() + _allocation_and_lower_cases()


#: the calibration timed beside the cases: (sampling rate, steps, target epsilon, delta)
CALIBRATION = (1e-4, 100_000, 1.0, 1e-10)

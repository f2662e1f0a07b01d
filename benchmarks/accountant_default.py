"""Default ``select.account`` against dp-accounting's PLD, battery limits, calibration time.

Run:  python benchmarks/accountant_default.py [--quick] [--distinct] [--distinct-dpa]

Prints, side by side in one run: the default ``account`` time and dp-accounting's PLD time on
DP-SGD-size cases (target ratio <= 1/3; each the median of three warm calls in this process),
the time and peak memory (RSS of a fresh child per case)
of battery cases (target <= 2 s, <= 2 GB), and the calibration time of the classic DP-SGD target
(target < 1 s). Machines are noisy: read the ratios.

``--distinct`` adds compositions of many distinct leaves (rounded to representatives): the
reproductions of 10,000 randomized responses, 1000 approximate-DP releases, 1000 exponential
mechanisms, 257 samplings without replacement, 2000 and 10,000 Poisson-sampled Gaussians, and
heterogeneous compositions of 1e4 and 1e5 components, each with its time, bracket, relative
width and the representatives' step; ``--distinct-dpa`` also times dp-accounting's PLD
composing the same leaves one by one where it can (h = 1e-4).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import time
from typing import Any

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.calibrate import calibrate_noise_multiplier
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

CASES = [
    # (sigma, q, steps, delta)
    (1.1, 256 / 60000, 500, 1e-5),
    (1.1, 256 / 60000, 14040, 1e-5),
    (1.0, 0.01, 1000, 1e-15),
    (1.0, 1e-4, 100_000, 1e-10),
    (1.0, 1e-4, 10_000_000, 1e-5),
]

#: battery cases beyond DP-SGD size: one heavy step carries delta (limits 2 s and 2 GB; printed
#: beside dp-accounting, not in the median)
EXTREME_CASES = [
    (1.0, 1e-4, 100, 1e-15),
    (1.0, 1e-4, 10_000, 1e-15),
]


def heterogeneous(n: int, seed: int = 0) -> ComposedEvent:
    """``n`` distinct leaves: half DP-SGD steps of a sweep (rates 1e-4..3e-4, noise 0.9..1.1),
    a quarter Laplace counts (scales 500..1000 times sqrt(n / 1e4)), a quarter binary
    randomized responses (epsilons 1e-4..2e-4)."""
    import numpy as np

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


def distinct_cases() -> list[tuple[str, Event, Adjacency]]:
    """The compositions of many distinct leaves (name, event, adjacency)."""
    add, replace = Adjacency(), Adjacency(relation="replace_one")
    return [
        (
            "10000 RR",
            ComposedEvent([RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(10_000)]),
            add,
        ),
        (
            "1000 ApproxDP",
            ComposedEvent([ApproxDPEvent(0.01 * (1 + i / 1000), 1e-9) for i in range(1000)]),
            add,
        ),
        (
            "1000 EM",
            ComposedEvent([ExponentialMechanismEvent(0.01 * (1 + i / 1000)) for i in range(1000)]),
            add,
        ),
        (
            "257 WOR",
            ComposedEvent(
                [
                    SampledWithoutReplacementEvent(60_000 + i, 600, GaussianEvent(1.0))
                    for i in range(257)
                ]
            ),
            replace,
        ),
        (
            "2000 Poisson",
            ComposedEvent(
                [
                    PoissonSampledEvent(1e-3 * (1 + i * 1e-4), GaussianEvent(1.0))
                    for i in range(2000)
                ]
            ),
            add,
        ),
        (
            "10000 Poisson",
            ComposedEvent(
                [
                    PoissonSampledEvent(1e-3 * (1 + i * 1e-4), GaussianEvent(1.0))
                    for i in range(10_000)
                ]
            ),
            add,
        ),
        ("1e4 heterogeneous", heterogeneous(10_000), add),
        ("1e5 heterogeneous", heterogeneous(100_000), add),
    ]


#: dp-accounting composes at most this many distinct leaves in the benchmark
DPA_MAX_LEAVES = 2000


def dpa_distinct(event: ComposedEvent, delta: float) -> float | None:
    """dp-accounting's PLD (h = 1e-4) composing the leaves one by one; None where it has no
    event for a leaf (the exponential mechanism, sampling without replacement) or for more than
    DPA_MAX_LEAVES leaves (it composes each in turn)."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from dpledger.integrations.dp_accounting import to_dp_event

    if len(event.events) > DPA_MAX_LEAVES:
        return None
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    try:
        acc.compose(dp_accounting.ComposedDpEvent([to_dp_event(leaf) for leaf in event.events]))
    except Exception:  # a leaf dp-accounting has no event or no PLD for
        return None
    return float(acc.get_epsilon(delta))


def distinct_rows(with_dpa: bool) -> None:
    """Print each many-distinct-leaf case: time, bracket, width, step (and dp-accounting)."""
    print(
        f"{'distinct leaves':>18} | {'bracket':>22} | {'width':>7} | {'t (s)':>7} | step     | dpa"
    )
    for name, event, adjacency in distinct_cases():
        start = time.perf_counter()
        sel = account(event, adjacency, delta=1e-5)
        elapsed = time.perf_counter() - start
        b = sel.bound
        assert isinstance(b, EpsilonBound)
        width = (b.epsilon - b.epsilon_lower) / b.epsilon
        step = b.details.get("representative_step", "-")
        dpa_text = "-"
        if with_dpa and isinstance(event, ComposedEvent):
            start = time.perf_counter()
            value = dpa_distinct(event, 1e-5)
            if value is not None:
                dpa_text = f"{value:.5f} in {time.perf_counter() - start:.2f} s"
        print(
            f"{name:>18} | [{b.epsilon_lower:9.5f}, {b.epsilon:9.5f}] | {width:7.2%} | "
            f"{elapsed:7.2f} | {step!s:>8.6} ({b.method}) | {dpa_text}"
        )


def dp_sgd(sigma: float, q: float, steps: int) -> SelfComposedEvent:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


def dpa(sigma: float, q: float, steps: int, delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return float(acc.get_epsilon(delta))


def _child(case: tuple[float, float, int, float], out: Any) -> None:
    start = time.perf_counter()
    sel = account(dp_sgd(*case[:3]), delta=case[3])
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.send((sel.bound.epsilon_lower, sel.bound.epsilon, elapsed, peak))  # type: ignore[union-attr]


def measured(case: tuple[float, float, int, float]) -> tuple[float, float, float, float]:
    ctx = mp.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(case, writer))
    proc.start()
    result = reader.recv()
    proc.join()
    return result  # type: ignore[no-any-return]


def _timed(fn: Any) -> tuple[Any, float]:
    """(result, median wall time of REPEATS calls)."""
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


#: each side is timed this many times in this process, alternating, and the median is kept
REPEATS = 3


def _row(case: tuple[float, float, int, float]) -> float:
    """Print one case beside dp-accounting; return the time ratio. Both sides are timed in
    this process (warm); the peak memory of ours is measured in a fresh child."""
    lo, up, _, peak = measured(case)
    _, t_ours = _timed(lambda: account(dp_sgd(*case[:3]), delta=case[3]))
    ref, t_ref = _timed(lambda: dpa(*case))
    print(
        f"{case!s:>34} | [{lo:9.5f}, {up:9.5f}] ({ref:8.5f}) | {t_ours:9.3f} {t_ref:7.3f} "
        f"{t_ours / t_ref:6.2f} | {peak / 2**30:6.2f}"
    )
    return t_ours / t_ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="first two cases only")
    parser.add_argument("--distinct", action="store_true", help="only many distinct leaves")
    parser.add_argument("--distinct-dpa", action="store_true", help="... beside dp-accounting")
    args = parser.parse_args()
    if args.distinct or args.distinct_dpa:
        distinct_rows(args.distinct_dpa)
        return
    cases = CASES[:2] if args.quick else CASES
    # both sides measured warm: lazy imports and first-call set-up happen here, once (the forked
    # children inherit them), not inside the first timed case
    account(dp_sgd(1.0, 0.01, 10), delta=1e-5)
    dpa(1.0, 0.01, 10, 1e-5)
    print(f"{'case':>34} | {'bracket':>24} | {'t default':>9} {'t dpa':>7} {'ratio':>6} | peak GB")
    ratios = [_row(case) for case in cases]
    print(f"median time ratio default account / dp-accounting PLD: {statistics.median(ratios):.2f}")
    if not args.quick:
        print("one heavy step at tiny delta (limits 2 s, 2 GB; not in the median):")
        for case in EXTREME_CASES:
            _row(case)
    start = time.perf_counter()
    result = calibrate_noise_multiplier(
        lambda s: dp_sgd(s, 256 / 60000, 500), None, 1.0, 1e-5, rtol=1e-3
    )
    print(
        "calibration (eps 1, delta 1e-5, q 256/60000, 500 steps): "
        f"sigma {result.noise_multiplier:.5f} in {time.perf_counter() - start:.2f} s"
    )


if __name__ == "__main__":
    main()

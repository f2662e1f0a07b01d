"""Side-by-side benchmark of dpledger's PLD accountant against dp-accounting and prv-accountant.

Run:  python benchmarks/accountant.py [--quick]

For every DP-SGD-size case it prints each accountant's epsilon, dpledger's certified bracket
width, and the time ratio dpledger / dp-accounting PLD (the anchor), measured in the same run.
It also times a 10,000-release heterogeneous pipeline. Machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpledger.accountant.pld import PLDAccountant
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
)

DP_SGD_CASES = [
    # (sigma, q, steps, delta)
    (1.1, 256 / 60000, 14040, 1e-5),
    (1.0, 256 / 60000, 1000, 1e-5),
    (0.8, 1e-3, 100, 1e-6),
    (1.5, 0.05, 1000, 1e-6),
    (3.0, 1e-3, 100_000, 1e-6),
    (0.67, 250 / 30000, 4200, 1e-5),
    (0.8, 250 / 30000, 2400, 1e-5),
    (2.0, 0.01, 10_000, 1e-5),
]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def ours(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    b = acc.get_epsilon(delta)
    return b.epsilon, b.epsilon_lower


def dp_accounting_pld(sigma: float, q: float, steps: int, delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return float(acc.get_epsilon(delta))


def dp_accounting_rdp(sigma: float, q: float, steps: int, delta: float) -> float:
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return float(acc.get_epsilon(delta))


def prv(sigma: float, q: float, steps: int, delta: float) -> str:
    try:
        from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

        acc = PRVAccountant(
            prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
            max_self_compositions=steps,
            eps_error=0.01,
            delta_error=delta / 1000,
        )
        lo, _est, hi = acc.compute_epsilon(delta=delta, num_self_compositions=[steps])
        return f"[{lo:.4f}, {hi:.4f}]"
    except Exception as exc:  # the library's failures are reported, not hidden
        return f"failed: {type(exc).__name__}"


def big_pipeline(n: int, seed: int = 0) -> Event:
    rng = np.random.default_rng(seed)
    k = n // 10
    events: list[Event] = [GaussianEvent(float(s)) for s in rng.uniform(20, 200, 4 * k)]
    events += [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(1e-3, 2e-3, 5 * k), rng.uniform(1.0, 1.2, 5 * k), strict=True)
    ]
    events += [LaplaceEvent(float(b)) for b in rng.uniform(500, 2000, k)]
    return ComposedEvent(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="three cases only")
    args = parser.parse_args()
    cases = DP_SGD_CASES[:3] if args.quick else DP_SGD_CASES
    header = f"{'sigma':>6} {'q':>9} {'steps':>7} {'delta':>7} | {'ours [lo, up]':>22} "
    header += f"{'width':>8} | {'dpa-PLD':>9} {'dpa-RDP':>9} {'prv':>20} | "
    header += f"{'t ours':>7} {'t dpa':>7} ratio"
    print(header)
    ratios = []
    for sigma, q, steps, delta in cases:
        (up_lo, t_ours) = timed(lambda: ours(sigma, q, steps, delta))  # noqa: B023
        upper, lower = up_lo
        ref, t_ref = timed(lambda: dp_accounting_pld(sigma, q, steps, delta))  # noqa: B023
        rdp = dp_accounting_rdp(sigma, q, steps, delta)
        prv_txt = prv(sigma, q, steps, delta)
        ratios.append(t_ours / t_ref)
        print(
            f"{sigma:>6} {q:>9.3g} {steps:>7} {delta:>7.0e} | [{lower:9.5f}, {upper:9.5f}] "
            f"{upper - lower:8.5f} | {ref:9.5f} {rdp:9.5f} {prv_txt:>20} | "
            f"{t_ours:7.3f} {t_ref:7.3f} {t_ours / t_ref:5.2f}"
        )
    print(f"median time ratio ours / dp-accounting PLD: {statistics.median(ratios):.2f}")
    event = big_pipeline(10_000)
    acc = PLDAccountant()
    acc.compose(event)
    bound, t_big = timed(lambda: acc.get_epsilon(1e-5))
    print(
        f"10,000-release heterogeneous pipeline: eps <= {bound.epsilon:.4f} "
        f"(lower {bound.epsilon_lower:.4f}) in {t_big:.2f} s"
    )


if __name__ == "__main__":
    main()

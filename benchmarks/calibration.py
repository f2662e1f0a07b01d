"""Noise calibration of DP-SGD, side by side with Opacus's, in one run.

Run:  python benchmarks/calibration.py [--only NAME] [--repeats N]

For each setting (sampling rate q, steps, target epsilon, delta), in this process after one
warm-up, the best of N runs of:

* dpledger ``calibrate_noise_multiplier`` (the least noise multiplier, to 1e-4 relative, whose
  certified epsilon meets the target) and ``calibrate_on_grid`` (three significant digits);
* Opacus ``get_noise_multiplier`` with its RDP and PRV accountants (a bisection to its
  ``epsilon_tolerance``, 0.01), whose multipliers dpledger then accounts: the certified
  epsilon at Opacus's noise, and whether it meets the target.

Prints a table (times, multipliers, certified epsilons) and the time ratio of dpledger's
calibration to each of Opacus's. Machines are noisy: compare within one run.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from dpledger.accountant.calibrate import calibrate_noise_multiplier, calibrate_on_grid
from dpledger.accountant.select import account
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent

#: (name, sampling rate, steps, target epsilon, delta)
SETTINGS = (
    ("MNIST-like, 60 epochs", 256 / 60000, 14040, 2.0, 1e-5),
    ("q 0.01, 1000 steps", 0.01, 1000, 1.0, 1e-5),
    ("q 1e-3, 1e4 steps", 1e-3, 10_000, 0.5, 1e-6),
    ("q 1e-4, 1e5 steps, delta 1e-10", 1e-4, 100_000, 1.0, 1e-10),
)


def dp_sgd(q: float, steps: int) -> Callable[[float], Event]:
    return lambda s: SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(s)), steps)


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[Any, float]:
    """(value, least seconds) of ``repeats`` calls."""
    least, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        least = min(least, time.perf_counter() - start)
    return value, least


def certified(q: float, steps: int, sigma: float, delta: float) -> float:
    bound = account(dp_sgd(q, steps)(sigma), delta=delta).bound
    return float(bound.epsilon)  # type: ignore[union-attr]


def opacus_sigma(q: float, steps: int, target: float, delta: float, accountant: str) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(
            get_noise_multiplier(
                target_epsilon=target,
                target_delta=delta,
                sample_rate=q,
                steps=steps,
                accountant=accountant,
            )
        )


def row(name: str, q: float, steps: int, target: float, delta: float, repeats: int) -> str:
    make = dp_sgd(q, steps)
    ours, t_ours = best_of(repeats, lambda: calibrate_noise_multiplier(make, None, target, delta))
    grid, t_grid = best_of(repeats, lambda: calibrate_on_grid(make, None, target, delta))
    cells = [
        name,
        f"{ours.noise_multiplier:.6g} (ε {ours.epsilon:.5g}) {t_ours:.2f} s",
        f"{grid.noise_multiplier:.4g} {t_grid:.2f} s",
    ]
    ratios = []
    for accountant in ("rdp", "prv"):
        sigma, seconds = best_of(
            repeats, lambda a=accountant: opacus_sigma(q, steps, target, delta, a)
        )
        eps = certified(q, steps, sigma, delta)
        verdict = "meets" if eps <= target else "exceeds"
        cells.append(f"{sigma:.6g} {seconds:.2f} s; certified ε {eps:.5g} ({verdict})")
        ratios.append(f"{accountant} {t_ours / seconds:.2f}")
    cells.append(", ".join(ratios))
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="", help="only the settings whose name contains this")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each, the best kept")
    args = parser.parse_args()
    calibrate_noise_multiplier(dp_sgd(0.01, 10), None, 1.0, 1e-5)  # lazy imports, first calls
    print(
        "| setting | dpledger σ (certified ε) time | dpledger on the grid | Opacus RDP σ time; "
        "dpledger's ε there | Opacus PRV σ time; dpledger's ε there | time ratio dpledger / "
        "Opacus |"
    )
    print("|---|---|---|---|---|---|")
    for name, q, steps, target, delta in SETTINGS:
        if args.only in name:
            print(row(name, q, steps, target, delta, args.repeats), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

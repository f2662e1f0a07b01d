"""Side-by-side benchmark of the vectorised sliced-Wasserstein flow step against a direct
implementation with POT's 1-D optimal-transport primitive.

Run:  python benchmarks/swflow.py [--quick] [--threads 1]

Both compute the same drift (the per-projection monotone map between the particles' and the
target's projections, averaged over directions); the direct version loops over projections and
calls ``ot.emd_1d`` (the transport plan) and a barycentric projection per direction. Prints
particles x projections per second for each and the ratio, measured in the same run, plus the
largest difference of the two drifts. Machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import ot
import torch

from dpledger.plugins.swflow.transport import drift, sorted_columns

CASES = [  # (particles n, target batch B, projections K, dimension d)
    (250, 250, 70, 8),
    (1000, 250, 70, 8),
    (2000, 2000, 200, 8),
]


def direct_drift(x: np.ndarray, theta: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per projection: exact 1-D OT plan (POT), barycentric target of each particle."""
    n, k = x.shape[0], theta.shape[0]
    out = np.zeros_like(x)
    for j in range(k):
        z = x @ theta[j]
        t = target[:, j]
        plan = ot.emd_1d(z, t)
        q = (plan @ t) * n
        out -= np.outer(z - q, theta[j]) / k
    return out


def best_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="first case only, fewer repeats")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cases = CASES[:1] if args.quick else CASES
    repeats = 3 if args.quick else 5
    print(
        f"{'n':>6} {'B':>6} {'K':>5} {'d':>3} | {'vectorised /s':>14} {'POT loop /s':>12} "
        f"{'ratio':>7} | max |diff|"
    )
    for n, b, k, d in cases:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(n, d))
        theta = rng.normal(size=(k, d))
        theta /= np.linalg.norm(theta, axis=1, keepdims=True)
        target = rng.normal(size=(b, d)) @ theta.T + 1.0
        xt, tht = torch.from_numpy(x), torch.from_numpy(theta)

        def ours(
            xt: torch.Tensor = xt, tht: torch.Tensor = tht, target: np.ndarray = target
        ) -> np.ndarray:
            return drift(xt, tht, sorted_columns(torch.from_numpy(target)), 0.0, None).numpy()

        def theirs(
            x: np.ndarray = x, theta: np.ndarray = theta, target: np.ndarray = target
        ) -> np.ndarray:
            return direct_drift(x, theta, target)

        diff = float(np.max(np.abs(ours() - theirs())))  # 0 up to rounding when n == B
        t_ours = best_time(ours, repeats)
        t_pot = best_time(theirs, repeats)
        work = n * k
        print(
            f"{n:>6} {b:>6} {k:>5} {d:>3} | {work / t_ours:>14.3g} {work / t_pot:>12.3g} "
            f"{t_pot / t_ours:>6.1f}x | {diff:.2e}"
        )


if __name__ == "__main__":
    main()

"""Benchmark of the trajectory method's particle step: vectorised torch against a plain loop.

Run:  python benchmarks/trajectories.py [--quick] [--device cpu]

Part 1 times one private iteration (entropic plans between consecutive times, Poisson-sampled
clipped data-fit blocks, transport gradient, update) of the vectorised implementation
(:mod:`dpledger.plugins.trajectories.mfld`, torch) and of a plain per-particle, per-datum loop
(numpy, same maths, same plans) side by side in one run, checks that both give the same
gradient, and prints the time ratio. Part 2 is a scaling run of the vectorised step up to
m = 1000 particles, T = 50 times and N = 10^5 points per time. Machines are noisy: read the
ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpledger.plugins.trajectories import mfld
from dpledger.plugins.trajectories.declare import TrajectoryParams


def make_problem(m: int, T: int, N: int, batch: float, seed: int, device: str) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, 1.0, T)
    data = [np.clip(np.array([t, 0.5]) + 0.1 * rng.standard_normal((N, 2)), -1, 2) for t in times]
    X = torch.as_tensor(
        np.stack([np.array([t, 0.5]) + 0.1 * rng.standard_normal((m, 2)) for t in times]),
        dtype=torch.float64,
        device=device,
    )
    rho = min(1.0, batch / N)
    idx = [np.flatnonzero(rng.random(N) < rho) for _ in range(T)]
    Ys = [torch.as_tensor(y, dtype=torch.float64, device=device) for y in data]
    params = TrajectoryParams(
        m=m,
        rho=rho,
        C=1.0,
        sigma=0.1,
        lambda_=1.0,
        diffusivity=0.5,
        radius=10.0,
        sinkhorn_iters=200,
        sinkhorn_tol=1e-6,
    )
    return {"X": X, "Ys": Ys, "idx": idx, "times": times, "params": params, "data": data}


def plans_for(pb: dict[str, Any]) -> list[torch.Tensor]:
    X, ts, p = pb["X"], pb["times"], pb["params"]
    return [
        mfld.sinkhorn_plan(
            X[u], X[u + 1], 0.5 * float(ts[u + 1] - ts[u]), p.sinkhorn_iters, p.sinkhorn_tol
        )[0]
        for u in range(X.shape[0] - 1)
    ]


def vectorised_grad(pb: dict[str, Any], plans: list[torch.Tensor]) -> torch.Tensor:
    X, ts, p = pb["X"], pb["times"], pb["params"]
    w = mfld.fit_weight(ts, p.lambda_)
    g = mfld.transport_grad(X, plans, [float(x) for x in np.diff(ts)])
    for u in range(X.shape[0]):
        s = mfld.clipped_fit_sum(X[u], pb["Ys"][u], pb["idx"][u], p, w)
        g[u] += s / (p.rho * len(pb["data"][u]))
    return g


def loop_grad(pb: dict[str, Any], plans: list[torch.Tensor]) -> np.ndarray:
    """The same gradient with explicit loops over times, data points and particles."""
    X = pb["X"].cpu().numpy()
    P = [pl.cpu().numpy() for pl in plans]
    ts, p = pb["times"], pb["params"]
    T, m, d = X.shape
    w = mfld.fit_weight(ts, p.lambda_)
    g = np.zeros_like(X)
    for u in range(T):
        for k in range(m):  # transport part, particle by particle
            if u + 1 < T:
                bary = sum(P[u][k, i] * X[u + 1, i] for i in range(m))
                g[u, k] += (X[u, k] - m * bary) / (ts[u + 1] - ts[u])
            if u > 0:
                bary = sum(P[u - 1][i, k] * X[u - 1, i] for i in range(m))
                g[u, k] += (X[u, k] - m * bary) / (ts[u] - ts[u - 1])
        total = np.zeros((m, d))
        for j in pb["idx"][u]:  # data-fit part, datum by datum, particle by particle
            y = pb["data"][u][j]
            logits = np.array(
                [-float(np.sum((X[u, k] - y) ** 2)) / (2 * p.sigma**2) for k in range(m)]
            )
            soft = np.exp(logits - logits.max())
            soft /= soft.sum()
            block = np.array([(w / p.sigma**2) * m * soft[k] * (X[u, k] - y) for k in range(m)])
            norm = math.sqrt(float(np.sum(block**2)))
            total += block * min(1.0, p.C / max(norm, 1e-300))
        g[u] += total / (p.rho * len(pb["data"][u]))
    return g


def timed(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def compare(sizes: list[tuple[int, int, int, float]], device: str, reps: int) -> None:
    print(
        "| m | T | N | batch | plans (s) | vectorised grad (s) | loop grad (s) | "
        "loop / vectorised | max abs diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for m, T, N, batch in sizes:
        pb = make_problem(m, T, N, batch, 0, device)
        t_plan, plans = timed(lambda pb=pb: plans_for(pb), reps)
        t_vec, gv = timed(lambda pb=pb, plans=plans: vectorised_grad(pb, plans), reps)
        t_loop, gl = timed(lambda pb=pb, plans=plans: loop_grad(pb, plans), 1)
        diff = float(np.max(np.abs(gv.cpu().numpy() - gl)))
        print(
            f"| {m} | {T} | {N} | {batch:g} | {t_plan:.4f} | {t_vec:.5f} | {t_loop:.4f} | "
            f"{t_loop / t_vec:.0f} | {diff:.1e} |",
            flush=True,
        )


def scaling(sizes: list[tuple[int, int, int, float]], device: str) -> None:
    print("\n| m | T | N per time | batch | one private iteration (s) | of which plans (s) |")
    print("|---|---|---|---|---|---|")
    for m, T, N, batch in sizes:
        pb = make_problem(m, T, N, batch, 1, device)
        t0 = time.perf_counter()
        plans = plans_for(pb)
        t1 = time.perf_counter()
        vectorised_grad(pb, plans)
        t2 = time.perf_counter()
        print(f"| {m} | {T} | {N} | {batch:g} | {t2 - t0:.3f} | {t1 - t0:.3f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        compare([(5, 3, 50, 5.0)], args.device, 1)
        scaling([(10, 4, 1000, 20.0)], args.device)
        return 0
    compare(
        [(10, 5, 1000, 20.0), (30, 5, 1000, 20.0), (50, 10, 1000, 20.0), (50, 10, 1000, 100.0)],
        args.device,
        3,
    )
    scaling(
        [
            (50, 10, 10**5, 20.0),
            (200, 50, 10**5, 20.0),
            (1000, 50, 10**5, 20.0),
            (1000, 50, 10**5, 1000.0),
        ],
        args.device,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

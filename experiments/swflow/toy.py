"""Toy problem of the paper (Fig. 1): five Gaussians, N_theta = 200, h = 1, lambda = 0.001.

    python experiments/swflow/toy.py [--out experiments/swflow/results]

sigma is the absolute std of the smoothing noise on both projected measures, as in the paper's
toy problem (a simulation of the smoothed dynamics, not an accounted release). Writes
``toy.md`` (SWD to the target sample after 1, 10 and 200 steps, three seeds) and ``toy.png``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from dpledger.plugins.swflow.data import toy_mixture
from dpledger.plugins.swflow.metrics import scatter_panels, sliced_wasserstein
from dpledger.plugins.swflow.transport import smoothed_flow

SIGMAS = (0.0, 0.5, 1.0)
STEPS = (1, 10, 200)


def run(n: int, sigma: float, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    target = toy_mixture(n, np.random.default_rng(seed))
    gen = torch.Generator().manual_seed(1000 + seed)
    x0 = torch.randn((n, 2), generator=gen, dtype=torch.float64)
    x = smoothed_flow(
        torch.from_numpy(target),
        x0,
        num_projections=200,
        num_steps=steps,
        step_size=1.0,
        reg=0.001,
        sigma=sigma,
        generator=gen,
    )
    return x.numpy(), target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rows = [
        "| sigma | " + " | ".join(f"SWD after {s} steps" for s in STEPS) + " |",
        "|---|" + "---|" * len(STEPS),
    ]
    panels: list[tuple[str, np.ndarray]] = []
    target0 = toy_mixture(args.n, np.random.default_rng(0))
    for sigma in SIGMAS:
        cells = []
        for steps in STEPS:
            vals = []
            for seed in range(args.seeds):
                x, target = run(args.n, sigma, steps, seed)
                vals.append(sliced_wasserstein(x, target, num_projections=500, seed=7))
                if seed == 0 and steps == STEPS[-1]:
                    panels.append((f"sigma={sigma:g}, {steps} steps", x))
            cells.append(f"{np.mean(vals):.3f} ± {np.std(vals):.3f}")
        rows.append(f"| {sigma:g} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    floor = [
        sliced_wasserstein(
            toy_mixture(args.n, np.random.default_rng(s)),
            toy_mixture(args.n, np.random.default_rng(100 + s)),
            num_projections=500,
            seed=7,
        )
        for s in range(args.seeds)
    ]
    scatter_panels(panels, target0, args.out / "toy.png")
    text = [
        "# Toy problem: five Gaussians (N_theta = 200, h = 1, lambda = 0.001)",
        "",
        f"{args.n} particles from N(0, I), target = {args.n} points of the mixture (centres on a "
        "pentagon of radius 2, std 0.2). SWD = sliced W2 (500 directions) between the particles "
        f"and the target sample; mean ± std over {args.seeds} seeds. Paper (Fig. 1): 0.08 "
        "(sigma = 0) vs 0.81 (sigma = 0.5) on its own (unpublished) mixture; the ordering is "
        "what carries over, not the values.",
        "",
        *rows,
        "",
        f"For scale: SWD between two independent {args.n}-point samples of the mixture: "
        f"{np.mean(floor):.3f}.",
        "",
        f"Total time {time.time() - t0:.0f} s.",
    ]
    (args.out / "toy.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()

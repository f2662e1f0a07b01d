"""Fig. 3 of the trajectory paper: the multimodal data, annealed and warm-started, with paths.

Paper (Sec. 5): N = 3000 points per time, T = 10; thirds on an upper semicircle, a line and a
lower semicircle, blurred by N(0, 0.005 I). Annealed run: uniform initialisation in [-1, 1]^2,
1000 iterations at (eta, tau) = (0.005, 2.5), 500 at (0.003, 1.5), 500 at (0.001, 1), in total
(1.84, 0.01)-DP with delta' = 0.01/3 per regime. Warm-started run: private 3-means plus noisy
counts per time at (1, 0.01) in total, then 50 iterations at (0.1, 2). Paths use exact OT plans
between consecutive marginals. The caption says "We plot 10 trajectories each"; the text says
"using warm starts via private initialization yields more accurate weights between clusters,
e.g. the annealing experiment results in optimization finding a local minimum."

Not stated by the paper: m, rho, C, sigma, lambda. ``rho`` is solved from the paper's own
formula (Lemma 3.1's GDP per regime, converted at delta' = 0.01/3 and summed to 1.84), and the
certified epsilon of the same run (PLD, composed, delta = 0.01) is printed beside it. The warm
start is our grid mixture (``WarmStart('mixture')``, a documented departure from private
k-means) at (1, 0.01) per marginal; each person is in one marginal (event level), so that is
(1, 0.01) for the warm start as a whole. The paper identifies the diffusivity with tau; the
default here is D = 0.1 tau (``--diffusivity-scale``), see the method page.

The non-private baseline is the same run with the privacy noise switched off: noise multiplier
1e-3 on the clipped data-fit sum, the same diffusivity (the public Langevin noise supplies the
temperature), clipping, sampling and schedule unchanged.

Measures, per run: mean W2 over times (exact OT, as W2 and W2^2), the weight of each branch in
the particles at the interior times (true: 1/3 each), and the fraction of 300 sampled paths
that change branch between interior times ("cross-cluster" paths).

Usage::

    python experiments/trajectories/fig3.py [--seeds 0 1 2] [--m 50] [--scale 1.0] \
        [--out fig3.json] [--figure fig3.png]

``--scale`` multiplies every phase's iteration count (a reduced run is ``--scale 0.25``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpledger.plugins.trajectories.data import make_multimodal
from dpledger.plugins.trajectories.declare import (
    Phase,
    TrajectoryParams,
    WarmStart,
    gdp_epsilon,
    paper_gdp_mu,
)

if TYPE_CHECKING:
    from dpledger.plugins.trajectories.data import TrajectoryData

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared modules are beside the folders
    sys.path.insert(0, str(ROOT))

#: the paper's annealing schedule: (iterations, eta, tau)
ANNEAL = ((1000, 0.005, 2.5), (500, 0.003, 1.5), (500, 0.001, 1.0))
ANNEAL_EPS, ANNEAL_DELTA = 1.84, 0.01
#: the paper's warm-started run is 50 iterations at (0.1, 2); with times on [0, 1] (dt = 1/9) a
#: step of 0.1 makes the transport drift unstable (eta * (1/dt + 1/dt) = 1.8 > 1, the particles
#: diverge), so we take 125 iterations at 0.04 (the same eta * K = 5)
PAPER_WARM = ((50, 0.1, 2.0),)
WARM = ((125, 0.04, 2.0),)
WARM_EPS, WARM_DELTA = 1.0, 0.01
NON_PRIVATE_TAU = 1e-3
BRANCHES = ("upper", "line", "lower")


def paper_epsilon(rho: float, schedule: tuple[tuple[int, float, float], ...]) -> float:
    """The paper's accounting: Lemma 3.1 per regime at delta' = 0.01/3, summed."""
    d = ANNEAL_DELTA / len(schedule)
    return float(sum(gdp_epsilon(paper_gdp_mu(rho, k, tau), d) for k, _, tau in schedule))


def paper_rho(schedule: tuple[tuple[int, float, float], ...], target: float) -> float:
    """The Poisson rate at which the paper's accounting gives ``target`` (bisection)."""
    lo, hi = 1e-6, 1.0
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if paper_epsilon(mid, schedule) < target:
            lo = mid
        else:
            hi = mid
    return lo


def branch_of(points: np.ndarray, t: float) -> np.ndarray:
    """Index of the nearest branch point at time t (0 upper, 1 line, 2 lower)."""
    centres = np.array(
        [
            [-math.cos(math.pi * t), math.sin(math.pi * t)],
            [-1.0 + 2.0 * t, 0.0],
            [-math.cos(math.pi * t), -math.sin(math.pi * t)],
        ]
    )
    d = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
    return np.asarray(d.argmin(1))


def interior(times: np.ndarray) -> list[int]:
    """Times where the three branches are well apart (branch points >= 0.5 from each other)."""
    return [i for i, t in enumerate(times) if math.sin(math.pi * t) >= 0.5]


def params_for(
    kind: str, private: bool, d: TrajectoryData, args: argparse.Namespace, rho: float
) -> TrajectoryParams:
    schedule = ANNEAL if kind == "annealed" else WARM
    phases = [
        Phase(
            max(1, round(k * args.scale)) if kind == "annealed" else k,
            eta,
            tau if private else NON_PRIVATE_TAU,
            diffusivity=tau * args.diffusivity_scale,
        )
        for k, eta, tau in schedule
    ]
    if kind == "annealed":
        ws = WarmStart("none", public_init="uniform")
    else:
        ws = WarmStart(
            "mixture",
            epsilon=WARM_EPS if private else 1e4,
            delta=WARM_DELTA,
            grid=args.grid,
            components=3,
        )
    return TrajectoryParams(
        m=args.m,
        C=args.C if kind == "annealed" else args.warm_C,
        rho=rho,
        lambda_=args.lambda_,
        sigma=args.sigma,
        schedule=phases,
        warm_start=ws,
        radius=d.radius,
        center=d.center,
        sinkhorn_iters=5000,
        sinkhorn_tol=1e-5,
    )


def measure(d: TrajectoryData, res: Any, seed: int) -> dict[str, Any]:
    from dpledger.plugins.trajectories.metrics import marginal_w2
    from dpledger.plugins.trajectories.trajectories import sample_paths
    from experiments.trajectories.paths import exact_plans

    X = np.asarray(res.particles)
    w = marginal_w2(d.marginals, list(X))
    w0 = marginal_w2(d.marginals, list(np.asarray(res.init_particles)))
    inner = interior(np.asarray(d.times))
    weights = np.zeros(3)
    for i in inner:
        weights += np.bincount(branch_of(X[i], float(d.times[i])), minlength=3) / X.shape[1]
    weights /= len(inner)
    plans = exact_plans(X)
    rng = np.random.default_rng(seed)
    paths = sample_paths(X, plans, np.asarray(d.times), 300, 1.0, rng).points
    labels = np.stack([branch_of(paths[:, i], float(d.times[i])) for i in inner], axis=1)
    cross = float(np.mean(labels.min(1) != labels.max(1)))
    return {
        "w2_init": float(w0.mean()),
        "w2": float(w.mean()),
        "w2sq": float((w**2).mean()),
        "weights": weights.tolist(),
        "weight_error": float(np.abs(weights - 1.0 / 3.0).max()),
        "cross_cluster": cross,
        "paths": paths[:10].tolist(),
    }


def run_one(
    kind: str, private: bool, seed: int, args: argparse.Namespace, rho: float
) -> dict[str, Any]:
    from dpledger.accountant.select import account
    from dpledger.core.adjacency import Adjacency
    from dpledger.plugins.trajectories import mfld
    from dpledger.plugins.trajectories.declare import declare
    from dpledger.plugins.trajectories.noise import RecordingNoise

    d = make_multimodal(N=args.N, T=10, seed=seed)
    p = params_for(kind, private, d, args, rho)
    t0 = time.time()
    res = mfld.run(d.marginals, p, adjacency=Adjacency(), noise=RecordingNoise(seed))
    out = measure(d, res, seed)
    eps = account(declare(p, Adjacency(), args.N, 10), Adjacency(), delta=0.01).bound.epsilon
    return {
        "kind": kind,
        "private": private,
        "seed": seed,
        "epsilon_certified": float(eps),
        "iterations": p.total_iterations,
        "seconds": time.time() - t0,
        **out,
    }


def summarize(rows: list[dict[str, Any]]) -> str:
    head = (
        "| run | privacy | seeds | iterations | certified ε (δ = 0.01) | mean W2 at start | "
        "mean W2 | mean W2² | "
        "branch weights (upper / line / lower) | max weight error | cross-branch paths |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = ""
    runs = sorted({(r["kind"], not r["private"], r["iterations"]) for r in rows})
    for kind, public, iterations in runs:
        private = not public
        rs = [
            r
            for r in rows
            if r["kind"] == kind and r["private"] == private and r["iterations"] == iterations
        ]
        if len({r["seed"] for r in rs}) != len(rs):
            raise ValueError(f"{kind}, {iterations} iterations: a seed is stored twice")

        def ms(key: str, rs: list[dict[str, Any]] = rs, f: str = ".3f") -> str:
            v = np.array([r[key] for r in rs], dtype=float)
            if len(v) == 1:  # one seed: no spread
                return f"{v[0]:{f}}"
            return f"{v.mean():{f}} ± {v.std(ddof=1):{f}}"

        wts = np.array([r["weights"] for r in rs])
        wtxt = " / ".join(f"{wts[:, j].mean():.2f}" for j in range(3))
        eps = rs[0]["epsilon_certified"]
        body += (
            f"| {kind} | {'private' if private else 'non-private'} | {len(rs)} | "
            f"{rs[0]['iterations']} | {eps:.4g} | {ms('w2_init')} | {ms('w2')} | "
            f"{ms('w2sq', f='.4f')} | "
            f"{wtxt} | {ms('weight_error')} | {ms('cross_cluster', f='.2f')} |\n"
        )
    return head + body


def figure(rows: list[dict[str, Any]], path: Path, N: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = make_multimodal(N=N, T=10, seed=0)
    panels = [
        (k, p)
        for k in ("annealed", "warm start")
        for p in (True, False)
        if any(r["kind"] == k and r["private"] == p for r in rows)
    ]
    fig, ax = plt.subplots(1, len(panels) + 1, figsize=(3.4 * (len(panels) + 1), 3.4))
    for i, mg in enumerate(d.marginals):
        ax[0].scatter(mg[:300, 0], mg[:300, 1], s=1, color=plt.get_cmap("viridis")(i / 9))
    ax[0].set_title("data (300 of 3000 per time)")
    for a, (k, p) in zip(ax[1:], panels, strict=True):
        r = next(r for r in rows if r["kind"] == k and r["private"] == p and r["seed"] == 0)
        for pth in np.asarray(r["paths"]):
            a.plot(pth[:, 0], pth[:, 1], lw=0.8)
        a.set_title(f"{k}, {'private' if p else 'non-private'}")
    for a in ax:
        a.set_xlim(-1.4, 1.4)
        a.set_ylim(-1.4, 1.4)
        a.set_aspect("equal")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--kinds", nargs="+", default=["annealed", "warm start"])
    ap.add_argument("--N", type=int, default=3000)
    ap.add_argument("--m", type=int, default=50)
    ap.add_argument("--C", type=float, default=100.0)
    ap.add_argument("--warm-C", type=float, default=10.0, help="C of the warm-started run")
    ap.add_argument("--sigma", type=float, default=0.1)
    ap.add_argument("--lambda_", type=float, default=0.002)
    ap.add_argument(
        "--diffusivity-scale",
        type=float,
        default=0.1,
        help="diffusivity D = scale * tau per phase (paper: D = tau)",
    )
    ap.add_argument("--grid", type=int, default=8)
    ap.add_argument("--scale", type=float, default=0.25, help="fraction of annealing iterations")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument(
        "--summarize", type=Path, nargs="+", default=None, help="print the table of JSON files"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.summarize is not None:
        stored = [r for f in args.summarize for r in json.loads(f.read_text())["rows"]]
        print(summarize(stored))
        if args.figure is not None:
            figure(stored, args.figure, args.N)
        return 0
    import torch

    torch.set_num_threads(1)
    rho = paper_rho(ANNEAL, ANNEAL_EPS)
    print(
        f"rho from the paper's accounting: {rho:.5f} "
        f"(paper epsilon {paper_epsilon(rho, ANNEAL):.3f})"
    )
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        for kind in args.kinds:
            for private in (True, False):
                rows.append(run_one(kind, private, seed, args, rho))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "paths"}), flush=True)
                if args.out is not None:
                    args.out.write_text(
                        json.dumps(
                            {
                                "rho": rho,
                                "args": {
                                    k: str(v)
                                    for k, v in vars(args).items()
                                    if k not in ("out", "figure", "summarize")  # file paths
                                },
                                "rows": rows,
                            }
                        )
                    )
    print(summarize(rows))
    if args.figure is not None:
        figure(rows, args.figure, args.N)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

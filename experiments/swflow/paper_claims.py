"""The paper's (sigma, epochs) -> epsilon claims for DPSWflow-r / DPSWgen, re-accounted.

    python experiments/swflow/paper_claims.py [--out experiments/swflow/results]

MNIST setting: private split of 30000, batch 250, latent d = 8, N_theta = 70, delta = 1e-5,
T = epochs * 30000 / 250 steps. The paper's sigma is a noise multiplier relative to the
replace-one sensitivity 2 sqrt(w) of its Lemma 1 (CLT form at delta/2, as coded), i.e. our
multiplier m = 2 sigma relative to the per-record bound sqrt(w). Writes ``paper_claims.md``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.plugins.swflow.sensitivity import bernstein_w, clt_w, sample_projections

N, B, D, K, DELTA = 30000, 250, 8, 70, 1e-5
CLAIMS = ((0.67, 35, "10"), (0.8, 20, "5"))
ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")


def eps(event: Event, adjacency: Adjacency) -> tuple[float, str]:
    sel = account(event, adjacency, delta=DELTA)
    return sel.bound.epsilon, sel.bound.method  # type: ignore[union-attr]


def mean_operator_norm(samples: int = 2000) -> float:
    rng = np.random.default_rng(0)
    return float(
        np.mean([np.linalg.norm(sample_projections(rng, K, D), ord=2) for _ in range(samples)])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    w_code = clt_w(K, D, DELTA / 2)
    smax = mean_operator_norm()
    rows = [
        "| paper sigma, epochs (T) | claimed epsilon | scheme | event (our multiplier m) | "
        "certified epsilon (backend) | reason for the gap to the claim |",
        "|---|---|---|---|---|---|",
    ]
    for sigma, epochs, claim in CLAIMS:
        steps = int(epochs * N / B)
        head = f"| {sigma}, {epochs} ({steps}) | {claim} |"
        # 1. the paper's assumption: Poisson sampling, add/remove, Gaussian sum-query analysis
        e1, b1 = eps(
            SelfComposedEvent(PoissonSampledEvent(B / N, GaussianEvent(sigma)), steps), ADD_REMOVE
        )
        rows.append(
            f"{head} paper's assumption: Poisson q = {B}/{N}, add/remove | "
            f"Poisson(Gaussian({sigma})) x {steps} | {e1:.3f} ({b1}) | the paper used Abadi's "
            "moments accountant (orders 1..32; looser than PLD) and rounded; the reference "
            "code's accountant also accumulates log-moments across orders (over-estimate). "
            "This scheme is not what the code runs (fixed-size shuffled batches) and its "
            "add/remove Gaussian analysis does not fit a per-record release |"
        )
        # 2. consistent: fixed-size batches without replacement, replace-one
        m = 2 * sigma
        e2, b2 = eps(
            SelfComposedEvent(SampledWithoutReplacementEvent(N, B, GaussianEvent(m)), steps),
            REPLACE_ONE,
        )
        rows.append(
            f"| | | consistent: batches of {B} without replacement, replace-one, CLT w as "
            f"coded (failure ignored) | WOR(Gaussian({m:.2f})) x {steps} | {e2:.3f} ({b2}) | "
            "replace-one amplification by sampling without replacement is weaker than Poisson "
            "add/remove (the code shuffles once per epoch; independent batches, as drawn here, "
            "are what the amplification theorem covers); still optimistic: the CLT w is an "
            "approximation with failure probability delta/2 per step, T delta/2 = "
            f"{steps * DELTA / 2:.3g} uncharged |"
        )
        # 3. consistent + sound probabilistic bound (Bernstein), failure charged per step
        p = DELTA / (10 * steps)
        w_b = bernstein_w(K, D, p)
        m3 = 2 * sigma * math.sqrt(w_code / w_b)
        ev3 = ComposedEvent(
            [
                SelfComposedEvent(SampledWithoutReplacementEvent(N, B, GaussianEvent(m3)), steps),
                SelfComposedEvent(ApproxDPEvent(0.0, p), steps),
            ]
        )
        e3, b3 = eps(ev3, REPLACE_ONE)
        rows.append(
            f"| | | consistent + rigorous w (Bernstein, p = delta/(10T) per step, charged) | "
            f"WOR(Gaussian({m3:.3f})) x {steps} + (0, {p:.2g}) x {steps} | {e3:.3f} ({b3}) | "
            f"same absolute noise, but the rigorous w = {w_b:.2f} exceeds the CLT w = "
            f"{w_code:.2f}, so the multiplier shrinks |"
        )
        # 4. consistent + exact operator norm (our default), same average absolute noise
        m4 = 2 * sigma * math.sqrt(w_code) / smax
        e4, b4 = eps(
            SelfComposedEvent(SampledWithoutReplacementEvent(N, B, GaussianEvent(m4)), steps),
            REPLACE_ONE,
        )
        rows.append(
            f"| | | consistent + exact sigma_max(Theta) (no failure probability; our default) | "
            f"WOR(Gaussian({m4:.3f})) x {steps} | {e4:.3f} ({b4}) | same average absolute "
            f"noise; E sigma_max(Theta) = {smax:.3f} vs sqrt(w_CLT) = {math.sqrt(w_code):.3f}: the "
            "exact bound is both sound and, on average, smaller than the approximate one |"
        )
        print("\n".join(rows[-4:]), flush=True)
    text = [
        "# The paper's privacy claims re-accounted",
        "",
        f"Setting: n = {N}, batch {B}, d = {D}, N_theta = {K}, delta = {DELTA:g}. "
        f"CLT w(N_theta, delta/2) as coded = {w_code:.3f} "
        f"(2 sqrt(w) = {2 * math.sqrt(w_code):.3f}). "
        "All epsilons are certified upper bounds from dpledger's accountant (smallest over "
        "the backends that support the event).",
        "",
        *rows,
        "",
    ]
    (args.out / "paper_claims.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()

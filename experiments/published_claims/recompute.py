"""Recompute the four seed papers' published epsilons with dpledger's accountant.

For every published privacy claim this script computes two certified upper bounds with
``dpledger.accountant.select.account`` (core events only):

* **paper's assumptions**: the mechanism exactly as the paper analyses it (its sampling scheme,
  neighbouring relation, noise and sensitivity), with parameters the paper leaves unstated
  recovered from the paper's own formula (stated in the row);
* **real assumptions**: the mechanism its algorithm or code actually runs.

Usage: ``python experiments/published_claims/recompute.py [--papers A B C D] [--out PATH]``
(writes ``RESULTS.md`` next to this file by default; about five minutes on one core).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
from scipy import optimize
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.accountant.calibrate import calibrate_noise_multiplier
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

HERE = Path(__file__).resolve().parent
ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")


@attrs.frozen
class Row:
    """One published claim and our two recomputations (certified upper bounds)."""

    paper: str
    setting: str
    claimed: float
    delta: float
    ours_paper: float
    ours_real: float
    reason: str
    key: str = ""


def epsilon(event: Event, adjacency: Adjacency, delta: float) -> float:
    """Certified epsilon upper bound of dpledger's accountant."""
    return float(select.account(event, adjacency, delta=delta).bound.epsilon)


def lower_epsilon(event: Event, adjacency: Adjacency, delta: float) -> float:
    """Certified epsilon lower bound of dpledger's accountant (the bracket's other end)."""
    return float(select.account(event, adjacency, delta=delta).bound.epsilon_lower)


def amplify(eps: float, delta: float, q: float) -> tuple[float, float]:
    """Amplification by subsampling with a common component (Balle et al. 2018, Thm 2)."""
    return math.log1p(q * math.expm1(eps)), q * delta


def gdp_mu(eps: float, delta: float) -> float:
    """The mu of mu-GDP whose exact profile gives delta at eps (inverse of Lemma 2.1)."""
    f = lambda m: norm.cdf(-eps / m + m / 2) - math.exp(eps) * norm.cdf(-eps / m - m / 2) - delta  # noqa: E731
    return float(optimize.brentq(f, 1e-9, 100.0, xtol=1e-14))


def gdp_epsilon(mu: float, delta: float) -> float:
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return float(optimize.brentq(f, 0.0, 200.0, xtol=1e-14))


def implied_tau(mu: float, rho: float, k: int) -> float:
    """Invert Lemma 3.1's mu = rho sqrt(K (e^{1/tau^2} - 1)) for the noise tau."""
    return 1.0 / math.sqrt(math.log1p((mu / rho) ** 2 / k))


# -- A: trajectories by mean-field Langevin dynamics ------------------------------------------
A_PARTICLES = 50  # m, Fig. 1
A_REASON_REAL = (
    "Alg. 1 adds N(0, C tau I), std sqrt(C tau) instead of the analysed tau C (more noise when "
    "tau < C, so this column can be lower), and Definition 2 is replace-one, not the add/remove "
    "of the GDP analysis; dividing by the realised batch size is covered by neither"
)


def _trajectory_steps(rho: float, noise: float, k: int) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(rho, GaussianEvent(noise)), k)


def a_fig1_row(n: int) -> Row:
    """Fig. 1's optimisation phase on a marginal of ``n`` points: claimed (1, 5e-4)."""
    rho, k, delta = 20 / n, 20, 5e-4
    tau = implied_tau(gdp_mu(1.0, delta), rho, k)
    paper_ev = _trajectory_steps(rho, tau, k)
    real_ev = _trajectory_steps(rho, math.sqrt(tau), k)
    return Row(
        "A",
        f"Fig. 1 optimisation, N={n}, rho=20/N, K=20 (tau={tau:.3f} implied by Lemma 3.1)",
        1.0,
        delta,
        epsilon(paper_ev, ADD_REMOVE, delta),
        epsilon(real_ev, REPLACE_ONE, delta),
        "paper's: Lemma 3.1's CLT formula is not a bound (under-states at K=20); real: "
        + A_REASON_REAL,
        key=f"A_fig1_opt_{n}",
    )


def paper_a(table2_k: int = 100) -> list[Row]:
    # the largest and smallest marginal of Table 2's digits
    rows: list[Row] = [a_fig1_row(674), a_fig1_row(394)]
    n, rho, k, delta = 674, 20 / 674, 20, 5e-4
    tau = implied_tau(gdp_mu(1.0, delta), rho, k)
    pp = _trajectory_steps(rho, math.sqrt(tau) / math.sqrt(A_PARTICLES), k)
    rows.append(
        Row(
            "A",
            f"Fig. 1 optimisation, N={n}, clipping per particle (sensitivity C sqrt(m), m=50)",
            1.0,
            delta,
            epsilon(_trajectory_steps(rho, tau, k), ADD_REMOVE, delta),
            epsilon(pp, REPLACE_ONE, delta),
            "if 'clip item-wise' clips each particle's gradient (independent noise per particle), "
            "one datum moves the m x d update by C sqrt(m); plus the two deviations above",
            key="A_fig1_per_particle",
        )
    )
    # warm start: Prop. 4.1, noise multiplier 2 sqrt(2 ln(1/delta))/eps w.r.t. C = R/N
    ws = GaussianEvent(2 * math.sqrt(2 * math.log(1 / 5e-4)) / 1.0)
    ws_eps = epsilon(ws, REPLACE_ONE, 5e-4)
    rows.append(
        Row(
            "A",
            "Fig. 1 warm start (Prop. 4.1, private means, parallel over times)",
            1.0,
            5e-4,
            ws_eps,
            ws_eps,
            "none: Prop. 4.1 holds for delta <= 0.98 (replace-one, sensitivity 2R/N)",
            key="A_fig1_warm",
        )
    )
    tau = implied_tau(gdp_mu(1.0, 5e-4), rho, k)
    total_paper = ComposedEvent([ws, _trajectory_steps(rho, tau, k)])
    total_real = ComposedEvent([ws, _trajectory_steps(rho, math.sqrt(tau), k)])
    rows.append(
        Row(
            "A",
            "Fig. 1 total (warm start + optimisation), N=674",
            2.0,
            1e-3,
            epsilon(total_paper, REPLACE_ONE, 1e-3),
            epsilon(total_real, REPLACE_ONE, 1e-3),
            "optimisation as above, composed with the warm start under replace-one",
            key="A_fig1_total",
        )
    )
    # Fig. 2: digit 7, K=100, 5 of 10 times: claimed (0.34, 5e-4) after amplification by 1/2
    n, rho, k = 626, 20 / 626, 100
    inner_eps = math.log1p(2 * math.expm1(0.34))
    tau = implied_tau(gdp_mu(inner_eps, 1e-3), rho, k)
    amp_paper = amplify(epsilon(_trajectory_steps(rho, tau, k), ADD_REMOVE, 1e-3), 1e-3, 0.5)
    # real: choosing the times reveals which marginals were used (an unused marginal's particles
    # never move), so M(D) = (1-q) A + q B(D) with A disjoint from B: delta scales by q, epsilon
    # does not shrink (advanced joint convexity needs A = B on the neighbour, which fails here)
    real_eps = epsilon(_trajectory_steps(rho, math.sqrt(tau), k), REPLACE_ONE, 1e-3)
    rows.append(
        Row(
            "A",
            f"Fig. 2, digit 7 (N=626), K=100, rho=20/N assumed, 5 of 10 times (tau={tau:.3f})",
            0.34,
            5e-4,
            amp_paper[0],
            real_eps,
            "paper's: inner steps as Fig. 1 (CLT under-states), amplified by ln(1 + (e^eps - 1)/2) "
            "as the paper does; real: subsampling the times is not subsampling the people: the "
            "output shows which marginals moved, so it halves delta but gives no epsilon "
            "amplification (the unused branch is not the mechanism run on the neighbour)",
            key="A_fig2",
        )
    )
    table2 = {
        1: (674, 1.19),
        2: (397, 1.98),
        3: (408, 1.92),
        6: (394, 1.05),
        7: (626, 1.28),
        9: (396, 1.98),
    }
    for digit, (n, claimed) in table2.items():
        rho, delta = 5 / n, 1e-4
        tau = implied_tau(gdp_mu(claimed, delta), rho, table2_k)
        rows.append(
            Row(
                "A",
                f"Table 2, digit {digit} (N={n}, rho=5/N, K={table2_k} assumed, "
                f"tau={tau:.3f} implied)",
                claimed,
                delta,
                epsilon(_trajectory_steps(rho, tau, table2_k), ADD_REMOVE, delta),
                epsilon(_trajectory_steps(rho, math.sqrt(tau), table2_k), REPLACE_ONE, delta),
                "K and tau are not stated; with tau implied by Lemma 3.1 at the assumed K the CLT "
                "under-states; real: " + A_REASON_REAL,
                key=f"A_table2_{digit}",
            )
        )
    return rows


# -- B: sliced-Wasserstein flows -----------------------------------------------------------------
B_N, B_BATCH, B_DELTA = 30_000, 250, 1e-5
B_SETTINGS = {"0.67": (0.67, 35, 10.0), "0.8": (0.8, 20, 5.0)}


def b_events(sigma: float, epochs: int) -> dict[str, tuple[Event, Adjacency]]:
    steps = epochs * B_N // B_BATCH
    q = B_BATCH / B_N
    return {
        "poisson": (
            SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps),
            ADD_REMOVE,
        ),
        # noise sigma * 2 sqrt(w) = (2 sigma) * C with C = sqrt(w) the per-record contribution
        "wor": (
            SelfComposedEvent(
                SampledWithoutReplacementEvent(B_N, B_BATCH, GaussianEvent(2 * sigma)), steps
            ),
            REPLACE_ONE,
        ),
        "shuffle": (
            SelfComposedEvent(ShuffledBatchesEvent(B_N, B_BATCH, GaussianEvent(2 * sigma)), epochs),
            REPLACE_ONE,
        ),
    }


def paper_b(settings: Sequence[str] = ("0.67", "0.8")) -> list[Row]:
    rows: list[Row] = []
    for name in settings:
        sigma, epochs, claimed = B_SETTINGS[name]
        ev = b_events(sigma, epochs)
        ours = epsilon(*ev["poisson"], B_DELTA)
        rows.append(
            Row(
                "B",
                f"DPSWflow-r MNIST, sigma={sigma}, {epochs} epochs, batch 250 of 30000 "
                "(real: fixed-size batches as sampling without replacement)",
                claimed,
                B_DELTA,
                ours,
                epsilon(*ev["wor"], B_DELTA),
                "paper's: its moments accountant is looser (and the code's sums log-moments "
                "over orders); real: shuffled fixed-size batches and the replace-one factor 2 "
                "(unit-norm latents) are not Poisson/add-remove; Lemma 1's bound fails with "
                "probability > delta at each of the steps, which no delta accounts for",
                key=f"B_wor_{name}",
            )
        )
        rows.append(
            Row(
                "B",
                f"DPSWflow-r MNIST, sigma={sigma}, {epochs} epochs "
                "(real: shuffled epochs, no amplification)",
                claimed,
                B_DELTA,
                ours,
                epsilon(*ev["shuffle"], B_DELTA),
                "shuffling has no proven amplification here: each record is in exactly one batch "
                "per epoch, a Gaussian release with mu = 1/sigma, composed over the epochs; the "
                "max-of-batch-sums attack (Chua et al. 2024) with its likelihood ratio certifies "
                "at least "
                f"{lower_epsilon(*ev['shuffle'], B_DELTA):.4f}",
                key=f"B_shuffle_{name}",
            )
        )
    return rows


# -- C: PATH (LLM fine-tuning + private selection) ----------------------------------------------
C_N, C_BATCH, C_VOTES = 102_864, 256, 10
C_CONFIGS = ((0.5, 0.25), (2.0, 0.5), (4.0, 1.0), (10.0, 1.0))


def paper_c(epochs: int = 5, configs: Sequence[tuple[float, float]] = C_CONFIGS) -> list[Row]:
    rows: list[Row] = []
    delta = 1.0 / C_N**2
    q, steps = C_BATCH / C_N, epochs * C_N // C_BATCH
    for total, select_eps in configs:
        train_eps = total - select_eps

        def make(s: float) -> Event:
            return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(s)), steps)

        sigma = calibrate_noise_multiplier(
            make,
            ADD_REMOVE,
            train_eps,
            delta / 2,
            bracket=(0.2, 50.0),
            rtol=1e-3,
            backends=["pld"],
        ).noise_multiplier
        # selection: Gaussian on the k-vote histogram, classical calibration at delta/2
        sel_s = math.sqrt(2 * math.log(1.25 / (delta / 2))) / select_eps
        paper_ev = ComposedEvent([make(sigma), GaussianEvent(sel_s)])
        # replace-one: a user's example moves one batch sum by 2C; the k votes move by
        # sqrt(2k) = sqrt(2) * sqrt(k), i.e. the multiplier sel_s * sqrt(2) at factor 2
        real_ev = ComposedEvent(
            [
                SelfComposedEvent(ShuffledBatchesEvent(C_N, C_BATCH, GaussianEvent(sigma)), epochs),
                GaussianEvent(sel_s * math.sqrt(2)),
            ]
        )
        rows.append(
            Row(
                "C",
                f"eps_total={total:g} (train {train_eps:g} + select {select_eps:g}), "
                f"n={C_N}, batch 256, {epochs} epochs assumed, sigma={sigma:.3f} calibrated",
                total,
                delta,
                epsilon(paper_ev, ADD_REMOVE, delta),
                epsilon(real_ev, REPLACE_ONE, delta),
                "paper's: calibrated to Poisson sampling (q = B/n), which shuffled batches do not "
                "satisfy, delta split unstated (half each assumed); real: shuffled epochs with "
                "fixed n (replace-one), each user in one batch per epoch, no amplification; the "
                "max-of-batch-sums attack (Chua et al. 2024) with its likelihood ratio certifies "
                "at least "
                f"{lower_epsilon(real_ev, REPLACE_ONE, delta):.4f}",
                key=f"C_{total:g}",
            )
        )
    return rows


# -- D: SHK flows, Experiment 3 -----------------------------------------------------------------
def d_terms() -> dict[str, float]:
    """Theorem 3's data-independent epsilon at Experiment 3's setting, for two initial densities.

    Worst neighbour: osc(V - V') <= 4 beta / n (cosine loss, one record changed). B bounds
    osc(log rho_0 / pi_D) over every dataset. The paper's 0.2201 is read as Theorem 1's
    data-dependent envelope of its pair (``paper.exp3_readings``): its target-floor envelope
    0.2058 needs R_0 + R'_0 = 28.4, and the von Mises rho_0 of least B with that sum certifies
    ``paper``; the reproduction's rho_0 (von Mises kappa = 5.5) has B = 2 kappa + 10 = 21.
    """
    from dpledger.plugins.shk import bounds, paper

    beta, t, n = paper.EXP3_BETA, paper.EXP3_T, 100
    implied = paper.exp3_readings()["implied"]
    return {
        "paper": implied["theorem3_von_mises"],
        "any_rho0": implied["theorem3_any"],
        "r_sum": implied["r_sum"],
        "kappa": implied["kappa"],
        "b11_target": paper.exp3_readings()["declared_b11"]["target"],
        "run_rho0": bounds.epsilon_a1_prime(t, 4.0 * beta / n, 2 * paper.RHO0_KAPPA + beta * 2.0),
    }


def paper_d() -> list[Row]:
    terms = d_terms()
    delta = 1e-4  # the paper's 1/n^2
    return [
        Row(
            "D",
            "Experiment 3 (torus mean, n=100, beta=5, t=7); paper's: the von Mises rho_0 of "
            "least B whose target-floor envelope is the paper's 0.2058 "
            f"(kappa={terms['kappa']:.3f}, R_0+R_0'={terms['r_sum']:.2f}); "
            "real: the reproduction's rho_0, von Mises kappa=5.5",
            0.2201,
            delta,
            epsilon(PureDPEvent(terms["paper"]), ADD_REMOVE, delta),
            epsilon(PureDPEvent(terms["run_rho0"]), ADD_REMOVE, delta),
            "the claim is not a DP epsilon: it is Theorem 1's data-dependent envelope of the "
            "experiment's one pair, Delta_osc(pair) + e^-t (R_0 + R_0') with the R_0 + R_0' "
            "that the paper's own target-floor envelope 0.2058 implies (Theorem 3's epsilon "
            "with B = 11 would allow at most "
            f"{terms['b11_target']:.4f} for that envelope); as a DP claim, Theorem 3 for any "
            f"rho_0 consistent with 0.2058 gives at least {terms['any_rho0']:.4f} (B >= "
            "max(R_0, R_0')), the paper's column for the least von Mises one; the reproduction's "
            "runs start from the kappa = 5.5 rho_0 (B = 21: the real column); the release "
            "samples a grid solver whose law is checked numerically, not the exact flow",
            key="D_exp3",
        )
    ]


PAPERS: dict[str, Callable[[], list[Row]]] = {
    "A": paper_a,
    "B": paper_b,
    "C": paper_c,
    "D": paper_d,
}


def markdown(rows: Sequence[Row]) -> str:
    head = (
        "# Published privacy claims, recomputed\n\n"
        "Generated by `python experiments/published_claims/recompute.py`. Every number is a "
        "certified upper bound from `dpledger.accountant.select.account` on core events at the "
        'row\'s delta. "paper\'s assumptions" is the mechanism as the paper analyses it; "real" '
        "is the mechanism its algorithm or code runs. Parameters a paper does not state are "
        "named in the setting.\n\n"
        "| paper | setting | delta | claimed eps | ours, paper's assumptions | ours, real "
        "assumptions | reason for the gap |\n|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.paper} | {r.setting} | {r.delta:.3g} | {r.claimed:g} | {r.ours_paper:.4f} | "
        f"{r.ours_real:.4f} | {r.reason} |\n"
        for r in rows
    )
    return head + body


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", nargs="+", default=list(PAPERS), choices=list(PAPERS))
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    for name in args.papers:
        rows += PAPERS[name]()
        print(f"paper {name}: done", file=sys.stderr)
    text = markdown(rows)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

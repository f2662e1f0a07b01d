"""The SHK stability paper's numerical experiments (Appendix A.3), re-run with this solver.

The paper states the potentials, the torus grid convention, the solver family (finite volume +
RK4) and the reported numbers, but **not** the initial density ``ρ_0``, the run time of
Experiments 1–2, the grid size, the time step or the data of Experiment 3. Choices made here:

* grid N = 192 — every grid quantity in Tables 1–2 (``‖V−V′‖∞ = 1.599920`` etc.) is exactly the
  N = 192 midpoint-grid value;
* ``ρ_0 ∝ exp(5.5 cos(x − 1.529))`` shared by Experiments 1–3, and ``T = 4.94`` for Tables 1–2.
  Calibrated: von Mises initial densities reproduce both tables' transient terms
  ``e^{−T}(R_0 + R′_0)`` at one common ``T`` along a one-parameter family (κ, μ(κ), T(κ)); κ = 5.5
  is the member whose Experiment-2 oscillation ``max(R_0, R′_0)`` equals the ``B ≈ 11.909`` that
  Table 4 implies (with ``λ_Gibbs = e^{−osc V}``);
* Experiment 2 is read at ``t = 5`` (Table 3's envelope implies ``e^{−t}(R_0+R′_0) = 0.1575``);
* Experiment 3 data: ``y_i = 0.25 + a·u_i``, ``u_i`` = 100 equispaced points of [−1, 1],
  ``a = 0.727934`` calibrated so that the exponential-mechanism utility floor equals the paper's
  0.10755 (the floor depends on the data only through the mean resultant length); the neighbour
  moves the point nearest 0.25 (index 50) to −2.4;
* Experiment 4 uses its own ``ρ_0 ∝ π_V e^{a cos x}`` (the target tilted into the well at 0, so
  ``R_0 = 2a``), ``a = 5.73`` calibrated to the envelope 0.414: the shared ``ρ_0`` straddles the
  barrier of the bimodal target, and a von Mises ``ρ_0`` in one well cannot match both the envelope
  and Langevin's ``KL(ρ_6‖π) = 0.371`` (it leaves mass near the barrier);
* flux: the centred finite-volume flux (``SCHEME``), which reproduces the empirical log-ratios of
  Tables 1–2 to six digits.

Numbers that depend on a calibrated input: the A1 / A1′ / target-floor envelopes of Tables 1–2
(through ``T``), Table 4 (through ``B``), Experiment 3's utility floor (through ``a``) and
Experiment 4's envelope (through the tilt).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpledger.plugins.shk import bounds
from dpledger.plugins.shk.solvers import solve_shk
from dpledger.plugins.shk.torus import (
    FloatArray,
    Potential,
    TorusGrid,
    cosine_loss,
    osc,
    scaled,
    von_mises_density,
)

N_CELLS = 192
RHO0_KAPPA, RHO0_MU = 5.5, 1.529
T_TABLES = 4.94
T_EXP2 = 5.0
#: a data-independent B of Experiment 3: osc(log rho_0) = 1 plus beta * range(L) = 10; the
#: reading of the paper's 0.2201 as Theorem 3's epsilon with it fails (see exp3_readings)
EXP3_DECLARED_B = 11.0
#: how the paper's Experiment-3 "(A1)/(A1') theorem bound" 0.2201 is read: Theorem 1's
#: data-dependent envelope of the pair, at the R_0 + R'_0 its target-floor envelope implies
EXP3_READING = "implied"
EXP3_SPREAD, EXP3_MOVED_INDEX, EXP3_NEW_VALUE, EXP3_BETA, EXP3_T = 0.727934, 50, -2.4, 5.0, 7.0
#: Experiment 4 starts from the V-target tilted into the well at 0, ρ_0 ∝ π_V e^{a cos x}.
EXP4_TILT = 5.73
EXP4_T = 6.0
#: Transport flux used to re-run the paper (see :mod:`dpledger.plugins.shk.solvers`).
SCHEME = "centred"

#: Reported values, as printed in the paper.
PAPER: dict[str, dict[str, float]] = {
    "table1": {
        "empirical": 0.644016,
        "a1": 3.365895,
        "a1_prime": 1.365895,
        "target_bound": 0.809605,
        "sup": 1.599920,
        "two_sup": 3.199839,
        "osc": 1.199839,
        "floor": 0.643549,
    },
    "table2": {
        "empirical": 1.505272,
        "a1": 1.797173,
        "a1_prime": 1.797173,
        "target_bound": 1.698790,
        "sup": 0.799893,
        "two_sup": 1.599786,
        "osc": 1.599786,
        "floor": 1.501403,
    },
    "table3": {
        "D2": 0.055881,
        "D3": 0.083185,
        "D5": 0.133828,
        "D10": 0.228820,
        "envelope": 0.635315,
    },
    "table4": {
        "c_plateau": 0.497588,
        "plateau": 111060.018822,
        "c_finite": 0.98,
        "finite": 29.683066,
    },
    "exp3": {
        "loss": 0.1816,
        "bound": 0.2201,
        "target_bound": 0.2058,
        "utility": 0.10746,
        "utility_floor": 0.10755,
        "hockey_stick": 6.57e-6,
    },
    "exp4": {"shk_log_ratio": 0.362, "envelope": 0.414, "kl_shk": 2.91e-5, "kl_langevin": 0.371},
}


def _cos_pot(a: float, k: int, extra: float = 0.0, kind: str = "") -> Potential:
    def v(x: FloatArray) -> FloatArray:
        base = a * (1.0 - np.cos(k * x))
        if kind == "sin":
            return np.asarray(base + extra * np.sin(x))
        if kind == "sin+1":
            return np.asarray(base + extra * np.sin(x) + 1.0)
        if kind == "cos":
            return np.asarray(base + extra * np.cos(x))
        return np.asarray(base)

    return v


def potentials(name: str) -> tuple[Potential, Potential]:
    """(V, V′) of an experiment: ``table1``, ``table2``, ``exp2``, ``exp4``."""
    table = {
        "table1": (_cos_pot(1.2, 2), _cos_pot(1.2, 2, 0.6, "sin+1")),
        "table2": (_cos_pot(4.0, 1), _cos_pot(4.0, 1, -0.8, "cos")),
        "exp2": (_cos_pot(1.0, 2), _cos_pot(1.0, 2, 0.45, "sin")),
        "exp4": (_cos_pot(2.5, 2), _cos_pot(2.5, 2, 0.35, "sin")),
    }
    return table[name]


def exp3_data() -> tuple[FloatArray, FloatArray]:
    """Experiment 3's dataset and its neighbour (one point moved to −2.4)."""
    y = 0.25 + EXP3_SPREAD * np.linspace(-1.0, 1.0, 100)
    y2 = y.copy()
    y2[EXP3_MOVED_INDEX] = EXP3_NEW_VALUE
    return y, y2


def _static(grid: TorusGrid, v: Potential, vp: Potential, rho0: FloatArray) -> dict[str, float]:
    h = v(grid.x) - vp(grid.x)
    pi, pip = grid.gibbs(v(grid.x)), grid.gibbs(vp(grid.x))
    lr0 = np.log(rho0)
    return {
        "sup": float(np.max(np.abs(h))),
        "two_sup": 2.0 * float(np.max(np.abs(h))),
        "osc": osc(h),
        "floor": bounds.sup_log_ratio(pi, pip),
        "r0": osc(lr0 - np.log(pi)),
        "r0_prime": osc(lr0 - np.log(pip)),
    }


def _exp3_pair(n_cells: int) -> tuple[dict[str, float], complex, complex]:
    """Experiment 3's pair on the grid: the exact target floor ``‖log π/π′‖∞``, ``osc(V − V′)``,
    ``‖V − V′‖∞`` and the complex coefficients ``c = β·mean(e^{iy})`` of both potentials
    (``V_D = β − Re(c e^{−iθ})``, so ``osc(κ cos(θ − μ) + V_D) = 2|κ e^{iμ} − c|``)."""
    grid = TorusGrid(n_cells)
    y, y2 = exp3_data()
    v = EXP3_BETA * cosine_loss(y)(grid.x)
    vp = EXP3_BETA * cosine_loss(y2)(grid.x)
    c, cp = (EXP3_BETA * complex(np.mean(np.exp(1j * d))) for d in (y, y2))
    static = {
        "floor": bounds.sup_log_ratio(grid.gibbs(v), grid.gibbs(vp)),
        "osc": osc(v - vp),
        "sup": float(np.max(np.abs(v - vp))),
    }
    return static, c, cp


def least_von_mises_kappa(c: complex, c_prime: complex, r_sum: float) -> float:
    """The least κ of a von Mises ``ρ_0 ∝ e^{κ cos(θ − μ)}`` (any μ) with
    ``R_0 + R′_0 = 2|z − c| + 2|z − c′| = r_sum``, ``z = κ e^{iμ}``: the distance from 0 to the
    ellipse with foci ``c, c′`` and major axis ``r_sum / 2`` (0 inside it)."""
    centre, half_focal = (c + c_prime) / 2, abs(c_prime - c) / 2
    a = r_sum / 4
    b = math.sqrt(max(a * a - half_focal * half_focal, 0.0))
    turn = np.exp(1j * np.angle(c_prime - c))
    t = np.linspace(0.0, 2 * math.pi, 100_001)
    return float(np.min(np.abs(centre + turn * (a * np.cos(t) + 1j * b * np.sin(t)))))


def exp3_readings(n_cells: int = N_CELLS) -> dict[str, dict[str, float]]:
    """Two readings of Experiment 3's "(A1)/(A1′) theorem bound" 0.2201, beside the paper's
    "exact target-floor envelope" 0.2058 of the same sentence (``floor + e^{−t}(R_0 + R′_0)``).

    ``declared_b11``: Theorem 3's data-independent ε with B = 11 (``R_0, R′_0 ≤ B``, so the
    largest target envelope is ``floor + 2B e^{−t}``). ``implied``: ``R_0 + R′_0`` taken from
    0.2058, and Theorem 1's data-dependent envelope ``Δ_osc(pair) + e^{−t}(R_0 + R′_0)`` (equal
    under (A1), ``2‖V − V′‖∞``, here). Per reading: ``r_sum``, ``target`` (the target-floor
    envelope, to compare with 0.2058), ``theorem1`` (to compare with 0.2201), and Theorem 3's
    data-independent ε (worst neighbour ``Δ_osc = 4β/n``) for a ρ_0 with that ``r_sum``:
    ``theorem3_any`` ≤ every such ρ_0's (B ≥ max(R_0, R′_0) ≥ r_sum / 2) and
    ``theorem3_von_mises`` for the von Mises ρ_0 of least κ (B = 2κ + β·range(L))."""
    (pair, c, c_prime), e = _exp3_pair(n_cells), math.exp(-EXP3_T)
    worst = 4.0 * EXP3_BETA / 100
    sums = {
        "declared_b11": 2.0 * EXP3_DECLARED_B,
        "implied": (PAPER["exp3"]["target_bound"] - pair["floor"]) / e,
    }
    out = {}
    for name, r_sum in sums.items():
        kappa = least_von_mises_kappa(c, c_prime, r_sum)
        out[name] = {
            "r_sum": r_sum,
            "target": pair["floor"] + e * r_sum,
            "theorem1": max(pair["osc"], 2.0 * pair["sup"]) + e * r_sum,
            "theorem3_any": bounds.epsilon_a1_prime(EXP3_T, worst, r_sum / 2.0),
            "kappa": kappa,
            "theorem3_von_mises": bounds.epsilon_a1_prime(
                EXP3_T, worst, 2.0 * kappa + 2.0 * EXP3_BETA
            ),
        }
    return out


def experiment3(
    n_cells: int = N_CELLS, record_every: int | None = None, scheme: str = SCHEME
) -> dict[str, Any]:
    """Experiment 3: exponential mechanism for torus mean estimation, SHK run to ``t = 7``."""
    grid = TorusGrid(n_cells)
    rho0 = von_mises_density(grid, RHO0_KAPPA, RHO0_MU)
    y, y2 = exp3_data()
    loss = cosine_loss(y)
    v, vp = scaled(loss, EXP3_BETA), scaled(cosine_loss(y2), EXP3_BETA)
    st = _static(grid, v, vp, rho0)
    b = max(st["r0"], st["r0_prime"])
    res = solve_shk([v, vp], EXP3_T, grid, rho0, record_every=record_every, scheme=scheme)
    p, q = res.final(0), res.final(1)
    lx = loss(grid.x)
    return {
        "loss": bounds.sup_log_ratio(p, q),
        # the paper's 0.2201 read as Theorem 1's data-dependent envelope of this pair, with the
        # R_0 + R'_0 its own target-floor envelope 0.2058 implies (see exp3_readings)
        "bound": exp3_readings(n_cells)["implied"]["theorem1"],
        # the same, data-independent, for the rho_0 this run starts from (osc log rho_0 = 2 kappa):
        # the certified epsilon of the release this run makes
        "bound_run": bounds.epsilon_a1_prime(
            EXP3_T, 4.0 * EXP3_BETA / 100, 2.0 * RHO0_KAPPA + EXP3_BETA * 2.0
        ),
        # the same theorem at this run's own pair and rho_0 (data-dependent: not a DP claim)
        "bound_data": max(
            bounds.epsilon_a1(EXP3_T, st["sup"], b), bounds.epsilon_a1_prime(EXP3_T, st["osc"], b)
        ),
        "target_bound": bounds.log_ratio_envelope(EXP3_T, st["floor"], st["r0"], st["r0_prime"]),
        "utility": grid.integrate(p * lx) - float(np.min(lx)),
        "utility_floor": grid.integrate(grid.gibbs(v(grid.x)) * lx) - float(np.min(lx)),
        "hockey_stick": bounds.symmetric_hockey_stick(p, q, 0.15, grid.dx),
        "b": b,
        "sup": st["sup"],
        "osc": st["osc"],
        "result": res,
    }


#: the three releases of Experiment 3's task compared by ``experiment3_releases``
EXP3_RELEASES = (
    "SHK grid flow at t = 7 (private)",
    "exponential mechanism π_D, exact (t → ∞, private)",
    "ERM θ̂_D = argmin L_D, no noise (non-private)",
)


def experiment3_releases(exp3: dict[str, Any], n_cells: int = N_CELLS) -> list[dict[str, Any]]:
    """Experiment 3's released law beside the exact exponential mechanism and the non-private
    estimate, on the same data and loss. The flow's certified ε is Theorem 3's for the ρ_0 it
    starts from (``bound_run``); the paper's 0.2201 (``bound``) is read as a data-dependent
    envelope, not a DP ε (:func:`exp3_readings`).

    ``exp3`` is :func:`experiment3`'s output (its flow is reused). The non-private baseline
    releases the empirical risk minimiser θ̂_D = atan2(mean sin y, mean cos y) (the circular
    mean) with no noise: its risk is min L_D = 1 − R̄ exactly, and on the neighbouring data it
    is the point θ̂_D′, so when θ̂_D ≠ θ̂_D′ its pair privacy loss is infinite and its
    hockey-stick divergence is 1 at every ε. Per release: the certified pure ε, the pair's
    privacy loss max |log p/q| and symmetric hockey-stick divergence at ε = 0.15, the risk
    E[L_D], the excess risk E[L_D] − L_D(θ̂_D) over the non-private estimate (the paper's
    utility U with the exact minimum; the table's ``utility`` cell takes the minimum over the
    grid's cell centres) and the mean angular distance E|θ − θ̂_D| to the non-private estimate.
    """
    grid = TorusGrid(n_cells)
    y, y2 = exp3_data()
    erm, erm2 = (math.atan2(float(np.mean(np.sin(d))), float(np.mean(np.cos(d)))) for d in (y, y2))
    loss, loss2 = cosine_loss(y), cosine_loss(y2)
    lx, lx2 = loss(grid.x), loss2(grid.x)
    risk_erm = float(loss(np.array([erm]))[0])
    dist = np.abs(np.angle(np.exp(1j * (grid.x - erm))))
    res = exp3["result"]
    laws = [
        (res.final(0), res.final(1), float(exp3["bound_run"])),
        (grid.gibbs(EXP3_BETA * lx), grid.gibbs(EXP3_BETA * lx2), 4.0 * EXP3_BETA / y.size),
    ]
    rows = []
    for name, (p, q, eps) in zip(EXP3_RELEASES, laws, strict=False):
        rows.append(
            {
                "release": name,
                "epsilon": eps,
                "loss": bounds.sup_log_ratio(p, q),
                "hockey_stick": bounds.symmetric_hockey_stick(p, q, 0.15, grid.dx),
                "risk": grid.integrate(p * lx),
                "excess": grid.integrate(p * lx) - risk_erm,
                "distance": grid.integrate(p * dist),
            }
        )
    same = erm == erm2
    rows.append(
        {
            "release": EXP3_RELEASES[2],
            "epsilon": math.inf,
            "loss": 0.0 if same else math.inf,
            "hockey_stick": 0.0 if same else 1.0,
            "risk": risk_erm,
            "excess": 0.0,
            "distance": 0.0,
        }
    )
    return rows

"""Exponential-mechanism sampling with spherical Hellinger–Kantorovich (birth–death Langevin) flows.

The released object is one draw from the time-``t`` law ``ρ_t`` of the SHK flow started at a
data-independent density ``ρ_0`` and driven by the potential ``V_D = β L_D``. The paper's
Theorem 3 makes the exact flow's law ``ε(t)``-pure-DP with ``ε(t) = S + 2B e^{-t}``; the grid
solver's law is certified with that ε, the particle sampler's release carries no guarantee.
The method is registered as ``shk`` by :mod:`dpledger.plugins.shk.plugin`.
"""

from __future__ import annotations

from dpledger.plugins.shk.bounds import (
    epsilon_a1,
    epsilon_a1_prime,
    hockey_stick_from_kl,
    kl_bound_theorem2,
    log_ratio_envelope,
)
from dpledger.plugins.shk.declare import (
    certificate_summary,
    declare_shk_release,
    kl_bound,
    pure_event,
)
from dpledger.plugins.shk.params import SHKMethodParams
from dpledger.plugins.shk.solvers import FlowResult, solve_fokker_planck, solve_shk
from dpledger.plugins.shk.torus import TorusGrid

__all__ = [
    "FlowResult",
    "SHKMethodParams",
    "TorusGrid",
    "certificate_summary",
    "declare_shk_release",
    "epsilon_a1",
    "epsilon_a1_prime",
    "hockey_stick_from_kl",
    "kl_bound",
    "kl_bound_theorem2",
    "log_ratio_envelope",
    "pure_event",
    "solve_fokker_planck",
    "solve_shk",
]

"""The ``shk`` method: exponential-mechanism sampling with SHK (birth–death Langevin) flows.

Registers the method (``dpledger_register_methods``) and a report section stating the honest
tiers (``dpledger_register_report_sections``). Entry point:
``shk = "dpledger.plugins.shk.plugin"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpledger.plugin import (
    Adjacency,
    Event,
    MechanismSpec,
    MethodSpec,
    ProofRef,
    ReportSectionSpec,
    circle_antipode,
    hookimpl,
)
from dpledger.plugins.shk.declare import (
    PARTICLES_REASON,
    TIER_NONE,
    TIER_SOLVER,
    TIER_THEOREM,
    declare_shk_release,
)
from dpledger.plugins.shk.events import TimeProfiledPureDPEvent
from dpledger.plugins.shk.params import SHKMethodParams
from dpledger.plugins.shk.release import run_release

METHOD_NAME = "shk"


def declare(params: SHKMethodParams, adjacency: Adjacency) -> Event:
    """Theorem 3's time-profiled pure-DP event (or Theorem 4's (ε, δ) certificate); no
    guarantee (``NonPrivateEvent``) for the particle sampler."""
    return declare_shk_release(params, adjacency)


SPEC = MethodSpec(
    name=METHOD_NAME,
    params=SHKMethodParams,
    declare=declare,
    run=run_release,
    description=(
        "Exponential mechanism on the torus sampled by the SHK (birth–death Langevin) flow run "
        "for time t from a data-independent density; grid-PDE solver (certified) or particle "
        "sampler (no privacy guarantee)"
    ),
    proof=ProofRef(
        "Mustafi & Mukherjee 2026, On the Stability of Spherical Hellinger–Kantorovich Flows "
        "and Their Implications for Differential Privacy: Theorem 3 (pure DP of the exact "
        "flow's time-t law); Theorem 4 with Theorem 2 for the (ε, δ) certificate",
        "docs/methods/shk.md",
    ),
    neighbours=circle_antipode,
)


def render_tiers(context: Mapping[str, Any]) -> str:
    """Markdown: what the SHK guarantee covers and which approximation was sampled."""
    releases = context.get("releases", [])
    rows = [r for r in releases if isinstance(r, Mapping) and r.get("method") == METHOD_NAME]
    if not rows:
        return ""  # the section does not concern this report
    lines = [
        f"The privacy statement of a grid-solver `{METHOD_NAME}` release is an {TIER_THEOREM}: "
        "Theorem 3 (or Theorem 4 with Theorem 2) bounds the privacy loss of a draw from the "
        "exact SHK flow's time-t law ρ_t^D, and the same bound holds for the solver's "
        "semi-discrete flow; its RK4 time stepping is checked numerically:",
        "",
        f"* grid solver — {TIER_SOLVER['grid']}: finite-volume PDE on the torus, RK4 in time;",
        f"* particle sampler — {TIER_NONE}: {PARTICLES_REASON}. Its releases are booked as "
        "non-private (ε = ∞).",
        "",
        "Releases: " + ", ".join(f"`{r.get('node')}` ({r.get('event')})" for r in rows) + ".",
    ]
    return "\n".join(lines)


REPORT_SECTION = ReportSectionSpec(
    name="shk_tiers", title="SHK sampling: what the guarantee covers", render=render_tiers
)


def _to_core(event: Event) -> Event:
    assert isinstance(event, TimeProfiledPureDPEvent)
    return event.to_core()


#: the method's event: pure DP at the flow's time-t epsilon
MECHANISM = MechanismSpec(
    name="time_profiled_pure_dp",
    event_class=TimeProfiledPureDPEvent,
    description=(
        "a pure-DP release whose epsilon decays with the running time of a contracting flow "
        "(floor + transient * exp(-decay_rate * time)); lowered to pure DP at that epsilon"
    ),
    proof=ProofRef(
        "Mustafi & Mukherjee 2026, Theorem 3: the exact flow's time-t law is eps(t)-DP",
        "docs/methods/shk.md",
    ),
    to_core=_to_core,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)


@hookimpl
def dpledger_register_mechanisms(register: Any) -> None:
    register(MECHANISM)


@hookimpl
def dpledger_register_report_sections(register: Any) -> None:
    register(REPORT_SECTION)

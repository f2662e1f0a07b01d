"""Report section: the trajectory paper's asymptotic GDP formula beside the certified bound.

Lemma 3.1 of the trajectory paper states that ``K`` Poisson-subsampled Gaussian steps (rate
``rho``, noise multiplier ``tau``) are *asymptotically* ``mu``-GDP with
``mu = rho * sqrt(K (exp(1/tau^2) - 1))``. The section finds every such block in the report's
events, converts ``mu`` to epsilon at the report's delta, accounts the same block with the
certified accountant, and flags every block where the formula states a smaller epsilon.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dpledger.plugins.trajectories.declare import gdp_epsilon, paper_gdp_mu


def _blocks(node: Any) -> Iterator[tuple[float, float, int]]:
    """(rho, tau, K) of every Poisson-subsampled Gaussian step block in a nested dict/list."""
    if isinstance(node, Mapping):
        kind = node.get("kind")
        inner = node.get("event")
        if kind == "self_composed" and isinstance(inner, Mapping):
            step = _step(inner)
            if step is not None:
                yield (*step, int(node.get("count", 1)))
                return
        if kind == "poisson_sampled":
            step = _step(node)
            if step is not None:
                yield (*step, 1)
                return
        for v in node.values():
            yield from _blocks(v)
    elif isinstance(node, list | tuple):
        for v in node:
            yield from _blocks(v)


def _step(node: Mapping[str, Any]) -> tuple[float, float] | None:
    inner = node.get("event")
    if (
        node.get("kind") == "poisson_sampled"
        and isinstance(inner, Mapping)
        and inner.get("kind") == "gaussian"
    ):
        return float(node["sampling_probability"]), float(inner["noise_multiplier"])
    return None


def gdp_rows(context: Mapping[str, Any], delta: float) -> list[dict[str, float | bool]]:
    """One row per distinct block: rho, tau, K, mu, paper epsilon, certified epsilon, flag."""
    from dpledger.plugin import GaussianEvent, PoissonSampledEvent, SelfComposedEvent, account

    rows = []
    for rho, tau, K in sorted(set(_blocks(context))):
        mu = paper_gdp_mu(rho, K, tau)
        paper = gdp_epsilon(mu, delta)
        event = SelfComposedEvent(PoissonSampledEvent(rho, GaussianEvent(tau)), K)
        certified = float(account(event, delta=delta).bound.epsilon)
        rows.append(
            {
                "rho": rho,
                "tau": tau,
                "K": K,
                "mu": mu,
                "paper_epsilon": paper,
                "certified_epsilon": certified,
                "understates": paper < certified,
            }
        )
    return rows


def render_gdp_check(context: Mapping[str, Any]) -> str:
    """Markdown table of :func:`gdp_rows` at the report's delta."""
    query = context.get("query")
    delta = None
    if isinstance(query, list | tuple) and len(query) == 2 and query[0] == "delta":
        delta = float(query[1])
    bound = context.get("bound")
    if delta is None and isinstance(bound, Mapping) and bound.get("delta") is not None:
        delta = float(bound["delta"])
    if delta is None:
        return ""  # no delta in this report: the GDP comparison needs one
    rows = gdp_rows(context, delta)
    if not rows:
        return ""  # no Poisson-subsampled Gaussian steps: the section does not apply
    lines = [
        f"Lemma 3.1 of the trajectory paper, μ = ρ·√(K(e^(1/τ²) − 1)), is a central-limit "
        f"approximation (K → ∞), not an upper bound. Per block of steps, at δ = {delta:g}:",
        "",
        "| ρ | τ | K | μ (paper) | ε from μ-GDP (paper) | ε certified | paper under-states? |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rho']:.4g} | {r['tau']:.4g} | {r['K']} | {r['mu']:.4g} | "
            f"{r['paper_epsilon']:.4g} | {r['certified_epsilon']:.4g} | "
            f"{'**yes**' if r['understates'] else 'no'} |"
        )
    if any(r["understates"] for r in rows):
        lines += [
            "",
            "Where flagged, the asymptotic formula reports less privacy loss than the "
            "certified accountant: only the certified value is a guarantee.",
        ]
    return "\n".join(lines)

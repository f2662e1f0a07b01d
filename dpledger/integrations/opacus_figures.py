"""Opacus's own figures for a tracked run, and how each relates to the certified bracket.

Opacus accounts a run with the one accountant its ``PrivacyEngine`` was made with, from the
history it records: ``(noise_multiplier, sample_rate, steps)`` per stretch of identical steps.
:func:`opacus_figures` gives that history to a fresh instance of each of Opacus's ``prv`` and
``rdp`` accountants (Opacus's own code, its default settings; steps of equal noise multiplier
and rate counted together, as composition is order-free), so a run's record holds both figures
whichever one the engine used (the engine's own figure is taken from the engine);
:func:`explain` and :func:`comparison` say what each figure is beside the certified bracket of
what ran, and :func:`difference` why the two differ.
None of these figures is certified by dpledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, PoissonSampledEvent
from dpledger.integrations.opacus_events import (
    POISSON,
    SAMPLED,
    SHUFFLED,
    Batching,
    Step,
    compose_counts,
)
from dpledger.report.numbers import fmt_down, fmt_up

__all__ = [
    "ACCOUNTANTS",
    "AGREEMENT",
    "KINDS",
    "OpacusFigure",
    "bracket",
    "comparison",
    "difference",
    "explain",
    "grouped",
    "opacus_figures",
    "same_relation",
]

#: relative gap under which Opacus's figure is said to agree with the certified upper bound
AGREEMENT = 0.02
#: Opacus's accountants whose figures the record of a run holds
ACCOUNTANTS = ("prv", "rdp")
#: what each of Opacus's accountants computes for Poisson sampling
KINDS = {
    "rdp": "an RDP upper bound for Poisson sampling",
    "prv": "a PRV numerical bound for Poisson sampling",
    "gdp": "a central-limit approximation, not a bound",
}
History = Sequence[tuple[float, float, int]]


@attrs.frozen
class OpacusFigure:
    """One of Opacus's accountants on the run's history: its epsilon (None when Opacus could
    not compute it, ``error`` saying why) and how it relates to the certified bracket."""

    accountant: str
    epsilon: float | None
    comparison: str
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "accountant": self.accountant,
            "epsilon": self.epsilon,
            "comparison": self.comparison,
            "error": self.error,
        }


def bracket(selection: select.Selection) -> tuple[float, float, str]:
    """(upper, lower, method) of a selection."""
    bound = selection.bound
    eps = getattr(bound, "epsilon", math.inf)
    low = getattr(bound, "epsilon_lower", 0.0)
    return float(eps), float(low), str(bound.method)


def same_relation(
    steps: tuple[Step, ...], rate: float, adjacency: Adjacency, delta: float
) -> float:
    """Poisson sampling at Opacus's rate under the run's relation (a reference, did not run)."""
    sigmas = [s.noise_multiplier for s in steps]
    reference = compose_counts([(PoissonSampledEvent(rate, GaussianEvent(s)), 1) for s in sigmas])
    return bracket(select.account(reference, adjacency, delta=delta))[0]


#: the most distinct (noise multiplier, rate) pairs an accountant other than the engine's is run
#: on (Opacus's PRV accountant takes about a second per pair)
MAX_PAIRS = 64


def grouped(history: History) -> list[tuple[float, float, int]]:
    """``history`` with the steps of equal (noise multiplier, rate) counted together, in order
    of first appearance (composition does not depend on the order of the steps)."""
    counts: dict[tuple[float, float], int] = {}
    for s, q, n in history:
        key = (float(s), float(q))
        counts[key] = counts.get(key, 0) + int(n)
    return [(s, q, n) for (s, q), n in counts.items()]


def _opacus_epsilon(accountant: str, history: History, delta: float) -> float:
    pairs = grouped(history)
    if len(pairs) > MAX_PAIRS:
        raise ValueError(
            f"not computed: the history holds {len(pairs)} distinct (noise multiplier, rate) "
            f"pairs, more than {MAX_PAIRS}"
        )
    from opacus.accountants import create_accountant

    instance = create_accountant(accountant)
    instance.history = pairs
    return float(instance.get_epsilon(delta))


def opacus_figures(
    history: History,
    delta: float,
    batching: Batching,
    lower: float,
    upper: float,
    rate: float | None,
    known: tuple[str, float | None] = ("", None),
) -> tuple[OpacusFigure, ...]:
    """Opacus's prv and rdp figures on ``history`` at ``delta`` (empty history: none), each
    with its comparison to the certified bracket ``[lower, upper]``; ``known``: the engine's
    own accountant and its figure on the same history, not computed again."""
    if not history:
        return ()
    out = []
    for name in ACCOUNTANTS:
        try:
            eps: float | None = (
                known[1]
                if name == known[0] and known[1] is not None
                else _opacus_epsilon(name, history, delta)
            )
            error = ""
        except Exception as exc:  # Opacus's numerics fail in many ways
            eps, error = None, (str(exc).splitlines() or [type(exc).__name__])[0]
        if eps is not None and not math.isfinite(eps):
            eps, error = None, f"Opacus's {name} accountant returned {eps}"
        text = comparison(batching, lower, upper, eps, rate) if eps is not None else error
        out.append(OpacusFigure(name, eps, text, error))
    return tuple(out)


def comparison(
    batching: Batching, lower: float, upper: float, epsilon: float, rate: float | None
) -> str:
    """How one of Opacus's figures relates to the certified bracket of what ran."""
    at = f"q={rate:.4g}" if rate is not None else "Opacus's rate"
    if batching.kind != POISSON:
        head = f"for Poisson sampling at {at}, which did not run"
        if batching.kind in SAMPLED:
            head += " (batches were drawn by a weighted sampler)"
        if epsilon < lower:
            head += (
                f"; below the certified lower bound {fmt_down(lower)}: it under-states this "
                "run's privacy loss"
            )
        return head
    if epsilon < lower:
        return (
            f"below the certified lower bound {fmt_down(lower)}: it under-states this run's "
            "privacy loss"
        )
    if abs(epsilon - upper) <= AGREEMENT * upper:
        gap = 100 * abs(epsilon - upper) / upper
        return f"agrees with the certified upper bound {fmt_up(upper)} within {gap:.1f}%"
    if epsilon > upper:
        return (
            f"{100 * (epsilon / upper - 1):.1f}% above the certified upper bound "
            f"{fmt_up(upper)} (looser)"
        )
    return "inside the certified bracket"


def difference(figures: Sequence[OpacusFigure]) -> str:
    """Why Opacus's prv and rdp figures differ on the same history ('' unless both exist)."""
    eps = {f.accountant: f.epsilon for f in figures}
    prv, rdp = eps.get("prv"), eps.get("rdp")
    if prv is None or rdp is None:
        return ""
    if abs(rdp - prv) <= 1e-3 * max(prv, rdp):
        return "Opacus's prv and rdp figures agree within 0.1% on the same history"
    if rdp > prv:
        return (
            f"Opacus's rdp figure is {100 * (rdp / prv - 1):.1f}% above its prv figure on the "
            "same history: RDP bounds the privacy loss through Rényi divergences and converts "
            "them to (ε, δ) with a loss, where PRV composes the privacy-loss distribution "
            "numerically"
        )
    return (
        f"Opacus's rdp figure is {100 * (1 - rdp / prv):.1f}% below its prv figure on the "
        "same history: the prv figure is the upper end of a numerical estimate (Opacus's "
        "eps_error 0.01), which can lie above a Rényi bound"
    )


def _weighted_status(rate: str, brackets: str) -> tuple[str, str]:
    status = (
        f"accounts Poisson sampling at {rate}, not the sampler's per-record rates: no "
        "theorem covers this run as Opacus accounts it"
    )
    return status, (
        "Opacus accounts Poisson sampling, but batches were drawn by a weighted sampler: "
        f"the certified bound for what ran is {brackets}."
    )


def explain(
    batching: Batching,
    upper: float,
    lower: float,
    opacus: float | None,
    accountant: str,
    opacus_rate: float | None,
) -> tuple[str, str]:
    """(what Opacus's figure is, the one-line explanation of any mismatch)."""
    brackets = f"[{fmt_down(lower)}, {fmt_up(upper)}]"
    rate = f"q={opacus_rate:.4g}" if opacus_rate is not None else "its rate"
    if batching.kind in SAMPLED and batching.kind != POISSON:
        return _weighted_status(rate, brackets)
    if batching.kind != POISSON:
        status = (
            f"accounts Poisson sampling at {rate}, which did not run: no theorem covers this run"
        )
        how = "shuffled" if batching.kind == SHUFFLED else "taken in a fixed order"
        line = (
            f"Opacus accounts Poisson sampling, but batches were {how}: the certified bound "
            f"for what ran is {brackets}."
        )
        if opacus is not None and opacus < lower:
            line += (
                f" Opacus's {opacus:.6g} is below the certified lower bound: it "
                "under-states this run's privacy loss."
            )
        return status, line
    status = KINDS.get(accountant, f"Opacus's {accountant} figure for Poisson sampling")
    status += " (as ran; not certified by dpledger)"
    if opacus is None:
        return status, f"Poisson sampling ran; the certified bound is {brackets}."
    if opacus < lower:
        line = (
            f"Opacus's {opacus:.6g} is below the certified lower bound {fmt_down(lower)}: "
            "it under-states this run's privacy loss"
        )
    elif abs(opacus - upper) <= AGREEMENT * upper:
        line = (
            f"Poisson sampling ran, as Opacus accounts it: Opacus's figure agrees with the "
            f"certified upper bound within {100 * abs(opacus - upper) / upper:.1f}%"
        )
    elif opacus > upper:
        line = (
            f"Poisson sampling ran, as Opacus accounts it: Opacus's figure is "
            f"{100 * (opacus / upper - 1):.1f}% above the certified upper bound (looser)"
        )
    else:
        line = (
            "Poisson sampling ran, as Opacus accounts it: Opacus's figure lies inside the "
            "certified bracket"
        )
    return status, f"{line}; certified bracket {brackets}."

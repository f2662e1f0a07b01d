"""Lowering plugin mechanism events onto core events the accountants characterise.

A mechanism's ``to_core`` mapping is used when it has one; then a discrete dominating pair
becomes its exact curve tabulated at its own losses (:func:`pair_to_core`); then a privacy
profile becomes its profile tabulated on a grid (:func:`profile_to_core`). The PLD accountant
composes either table as a privacy-loss distribution. A mechanism with only a Renyi-DP curve
becomes its curve tabulated at the RDP accountant's orders (:func:`rdp_to_core`), which only
the RDP accountant composes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import numpy as np

from dpledger.accountant.conversions import U
from dpledger.accountant.rdp_orders import default_orders
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    InvalidParameterError,
    PluginError,
    UnsupportedEventError,
)
from dpledger.core.events import (
    PROFILE_DELTA,
    Event,
    TabulatedProfileEvent,
    TabulatedRDPEvent,
    map_children,
    rdp_curve_problem,
    short_repr,
)
from dpledger.core.specs import (
    MechanismSpec,
)
from dpledger.core.validation import is_number
from dpledger.runtime import integrity

#: epsilons at which a mechanism characterised only by its privacy profile is tabulated
PROFILE_EPSILONS: tuple[float, ...] = tuple(
    float(x) for x in np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 400)])
)


def profile_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's privacy profile: the profile tabulated on
    :data:`PROFILE_EPSILONS` (up to the first epsilon where it is 0) under ``adjacency``'s
    relation.

    Every tabulated value is a certified ``delta(eps)`` bound of one instance; chords between
    them are too (the curve is convex in ``e^eps``), so the PLD accountant composes the table
    as a privacy-loss distribution and the other accountants use its (eps, delta) coarsening.
    """
    assert spec.privacy_profile is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
    epsilons: list[float] = []
    deltas: list[float] = []
    for eps in PROFILE_EPSILONS:
        try:
            delta = float(spec.privacy_profile(event, adjacency, eps))
        except Exception as exc:  # a plugin's failure must not become a number
            raise PluginError(
                f"mechanism {spec.name!r} (plugin {owner}): privacy_profile raised {exc!r}"
            ) from None
        if not (0.0 <= delta <= 1.0):
            raise PluginError(
                f"mechanism {spec.name!r} (plugin {owner}): privacy_profile({eps:g}) returned "
                f"{delta!r}, not a probability"
            )
        epsilons.append(eps)
        deltas.append(delta)
        if delta == 0.0:
            break
    if min(deltas) > PROFILE_DELTA:
        raise UnsupportedEventError(
            f"{event.kind} (plugin {owner}): its privacy profile stays above {PROFILE_DELTA:g} "
            f"up to epsilon {PROFILE_EPSILONS[-1]:g}; give the mechanism a to_core mapping"
        )
    return TabulatedProfileEvent(
        tuple(epsilons), tuple(deltas), relation=adjacency.relation, name=spec.name
    )


#: most atoms of a plugin's dominating pair (each becomes a table point)
MAX_PAIR_ATOMS = 10_000


def pair_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's discrete dominating pair: the pair's exact curve
    tabulated at 0 and at its positive losses.

    Between consecutive losses a discrete pair's curve ``inf + sum_{l > eps} p_l (1 - e^{eps-l})``
    is linear in ``e^eps``, so the chord interpolation of the table is the curve itself (each
    value rounded up); beyond the largest loss it is the mass at infinity. The pair dominates
    both orders of neighbouring outputs, so one table serves both directions.
    """
    assert spec.dominating_pair is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
    try:
        losses, masses, inf_mass = spec.dominating_pair(event, adjacency)
        ls = np.asarray(losses, dtype=float)
        ps = np.asarray(masses, dtype=float)
        inf = float(inf_mass)
    except Exception as exc:  # a plugin's failure must not become a number
        raise PluginError(
            f"mechanism {spec.name!r} (plugin {owner}): dominating_pair raised {exc!r}"
        ) from None
    problem = _pair_problem(ls, ps, inf)
    if problem is not None:
        raise PluginError(
            f"mechanism {spec.name!r} (plugin {owner}): dominating_pair returned {problem}"
        )
    points = np.unique(np.concatenate([[0.0], ls[ls > 0]]))
    deltas = [_pair_delta(ls, ps, inf, float(eps)) for eps in points]
    if min(deltas) > PROFILE_DELTA:
        raise UnsupportedEventError(
            f"{event.kind} (plugin {owner}): its dominating pair keeps delta above "
            f"{PROFILE_DELTA:g} at every epsilon; give the mechanism a to_core mapping"
        )
    table = TabulatedProfileEvent(
        tuple(float(e) for e in points),
        tuple(deltas),
        relation=adjacency.relation,
        name=spec.name,
    )
    return _claimed_tight(spec, table, (ls, ps, inf)) if spec.pair_is_tight else table


def _claimed_tight(
    spec: MechanismSpec, table: TabulatedProfileEvent, pair: tuple[np.ndarray, np.ndarray, float]
) -> TabulatedProfileEvent:
    """``table`` with the pair its spec claims is tight (``pair_is_tight``), which must be a
    pair of probability laws; the claim names the mechanism, its plugin and its proof."""
    prov = spec.provenance
    owner = f"plugin {prov.plugin}, tier {prov.tier}" if prov else "plugin ?"
    claim = (
        f"mechanism {spec.name!r} ({owner}) declares its dominating pair tight "
        f"(proof: {spec.proof.citation})"
    )
    losses, masses, inf = pair
    try:
        return attrs.evolve(
            table,
            tight_losses=tuple(losses.tolist()),
            tight_masses=tuple(masses.tolist()),
            tight_inf_mass=inf,
            tight_claim=claim,
        )
    except InvalidParameterError as exc:
        raise PluginError(
            f"mechanism {spec.name!r} ({owner}): its pair is declared tight but {exc.problem}"
        ) from None


def _pair_problem(losses: np.ndarray, masses: np.ndarray, inf: float) -> str | None:
    """Why arrays are not a discrete pair of (sub-)probability laws; None if they are."""
    if losses.ndim != 1 or losses.shape != masses.shape or losses.size > MAX_PAIR_ATOMS:
        return f"losses and masses of different shapes or more than {MAX_PAIR_ATOMS} atoms"
    if not (np.all(np.isfinite(losses)) and np.all(np.isfinite(masses))):
        return "a loss or mass that is not finite"
    if np.any(masses < 0) or not 0.0 <= inf <= 1.0:
        return "a negative mass or a mass at infinity outside [0, 1]"
    if math.fsum(masses.tolist()) + inf > 1.0 + 1e-12:
        return "P-masses summing above 1"
    if math.fsum((masses * np.exp(-losses)).tolist()) > 1.0 + 1e-12:
        return "Q-masses (p e^-loss) summing above 1"
    return None


def _pair_delta(losses: np.ndarray, masses: np.ndarray, inf: float, eps: float) -> float:
    """The pair's curve at ``eps``, rounded up (a probability)."""
    above = (losses > eps) & (masses > 0)
    if inf == 0.0 and not above.any():
        return 0.0  # no mass above eps: exactly 0
    terms = masses[above] * -np.expm1(eps - losses[above])
    value = (inf + math.fsum(terms.tolist())) * (1 + 1e-12) + 1e-300
    return min(1.0, value)


def rdp_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's Renyi-DP curve: the curve evaluated at the RDP
    accountant's orders (:func:`~dpledger.accountant.rdp_orders.default_orders`) only, each
    value rounded up by four units in the last place, under ``adjacency``'s relation.

    Every value must be a real number (not a bool or a string), not NaN and non-negative
    (+inf: no bound at that order), and the curve non-decreasing in the order; otherwise the
    plugin is at fault and nothing is accounted.
    """
    assert spec.rdp_curve is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
    where = f"mechanism {spec.name!r} (plugin {owner}): rdp_curve"
    orders = tuple(float(a) for a in default_orders())
    values: list[float] = []
    for alpha in orders:
        try:
            raw = spec.rdp_curve(event, adjacency, alpha)
            value = float(raw) if is_number(raw) else None
        except Exception as exc:  # a plugin's failure must not become a number
            raise PluginError(f"{where} raised {exc!r}") from None
        if value is None:
            raise PluginError(f"{where}({alpha:g}) returned {short_repr(raw)}, not a number")
        values.append(value)
    problem = rdp_curve_problem(orders, tuple(values))
    if problem is not None:
        raise PluginError(f"{where}: {problem}")
    rounded = tuple(v * (1 + 8 * U) for v in values)  # monotone: still non-decreasing
    return TabulatedRDPEvent(orders, rounded, relation=adjacency.relation, name=spec.name)


def _tabulated(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core table of a mechanism without a ``to_core`` mapping: its dominating pair, else
    its privacy profile, else its Renyi-DP curve."""
    if spec.dominating_pair is not None:
        return pair_to_core(spec, event, adjacency)
    if spec.privacy_profile is not None:
        return profile_to_core(spec, event, adjacency)
    return rdp_to_core(spec, event, adjacency)


def lower_event(
    event: Event,
    by_class: Mapping[type[Event], MechanismSpec],
    depth: int,
    adjacency: Adjacency | None = None,
) -> Event:
    adjacency = adjacency or Adjacency()
    if depth > 32:
        raise PluginError("mechanism mappings nest more than 32 levels deep (a cycle?)")
    spec = by_class.get(type(event))
    if spec is not None:
        if spec.to_core is None:
            # a third-party curve is evaluated many times: its integrity is checked once, after
            with integrity.deferred_checks():
                return _tabulated(spec, event, adjacency)
        mapped = spec.to_core(event)
        if not isinstance(mapped, Event):
            raise PluginError(f"mechanism {spec.name!r}: to_core returned {mapped!r}")
        return lower_event(mapped, by_class, depth + 1, adjacency)
    return map_children(event, lambda sub: lower_event(sub, by_class, depth, adjacency))

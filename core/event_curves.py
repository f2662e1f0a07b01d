"""Tabulated privacy curves: the checks of a tabulated privacy profile or Renyi-DP curve (the
fields of :class:`~dpledger.core.events.TabulatedProfileEvent` and
:class:`~dpledger.core.events.TabulatedRDPEvent`) and the curve of a discrete pair."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.core.event_parser import short_repr
from dpledger.core.validation import is_number

if TYPE_CHECKING:
    from dpledger.core.events import TabulatedProfileEvent

__all__ = [
    "MAX_PROFILE_POINTS",
    "MAX_TIGHT_LOSS",
    "PROFILE_DELTA",
    "check_number_table",
    "float_tuple",
    "optional_numbers",
    "pair_curve",
    "profile_table_validator",
    "rdp_curve_problem",
    "rdp_table_validator",
    "tight_pair_problem",
]

#: most points of a tabulated profile
MAX_PROFILE_POINTS = 10_000
#: the delta a tabulated profile is charged per instance where it is coarsened to (eps, delta)
PROFILE_DELTA = 1e-10


def float_tuple(value: Any) -> Any:
    """attrs converter: a list of numbers becomes a tuple of floats (others left to the
    validator, which names the field)."""
    if isinstance(value, list | tuple) and all(is_number(v) for v in value):
        try:
            return tuple(float(v) for v in value)
        except (OverflowError, ValueError, TypeError):
            return value
    return value


def check_number_table(name: str, value: Any) -> None:
    """A non-empty tuple of plain floats, at most MAX_PROFILE_POINTS long (a tabulated curve)."""
    if not isinstance(value, tuple) or not value or not all(isinstance(v, float) for v in value):
        raise InvalidParameterError(
            name,
            f"expected a number at every entry of a non-empty list, got {short_repr(value)}",
            "write a list of plain numbers (no quotes, not true/false)",
        )
    if len(value) > MAX_PROFILE_POINTS:
        raise InvalidParameterError(
            name, f"has {len(value)} points", f"tabulate at most {MAX_PROFILE_POINTS}"
        )


def profile_table_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator of the epsilons, deltas and deltas_add of a tabulated profile."""
    if value is None and attribute.name == "deltas_add":
        return
    name = attribute.name
    check_number_table(name, value)
    if name == "epsilons":
        if not all(math.isfinite(v) for v in value) or any(
            b <= a for a, b in itertools.pairwise(value)
        ):
            raise InvalidParameterError(
                name, "must be finite and strictly increasing", "sort the epsilons"
            )
        return
    if not all(0.0 <= v <= 1.0 for v in value):
        raise InvalidParameterError(name, "must lie in [0, 1]", "tabulate deltas in [0, 1]")
    # 1 - e^eps is negative above epsilon 0 (and e^eps overflows beyond ~709.8)
    pairs = zip(instance.epsilons, value, strict=False)
    floor = [(e, d) for e, d in pairs if e < 0.0 and d < -math.expm1(e)]
    if floor:
        raise InvalidParameterError(
            name,
            f"delta({floor[0][0]:g}) = {floor[0][1]:g} is below 1 - e^eps, which no pair has",
            "tabulate certified upper bounds of a hockey-stick curve",
        )
    if len(value) != len(instance.epsilons):
        raise InvalidParameterError(
            name,
            f"has {len(value)} values for {len(instance.epsilons)} epsilons",
            "give one delta per epsilon",
        )


def optional_numbers(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: None, or at most MAX_PROFILE_POINTS finite floats."""
    if value is None:
        return
    if not isinstance(value, tuple) or not all(isinstance(v, float) for v in value):
        raise InvalidParameterError(
            attribute.name,
            f"expected a list of numbers, got {short_repr(value)}",
            "write a list of plain numbers (no quotes, not true/false)",
        )
    if len(value) > MAX_PROFILE_POINTS or not all(math.isfinite(v) for v in value):
        raise InvalidParameterError(
            attribute.name,
            f"must hold at most {MAX_PROFILE_POINTS} finite numbers",
            "give finite losses and masses",
        )


#: largest privacy loss (in absolute value) of a claimed tight pair
MAX_TIGHT_LOSS = 500.0


def tight_pair_problem(table: TabulatedProfileEvent) -> str | None:
    """Why ``table``'s claimed tight pair is no pair of probability laws under the table;
    None if it is one (or if none is claimed)."""
    losses, masses = table.tight_losses, table.tight_masses
    if losses is None:
        if masses is not None or table.tight_inf_mass != 0.0 or table.tight_claim:
            return "tight_masses, tight_inf_mass and tight_claim need tight_losses"
        return None
    if masses is None or len(masses) != len(losses):
        return "needs tight_masses, one per loss"
    if not table.tight_claim.strip():
        return "a tight pair needs tight_claim, naming who claims it and on what proof"
    if any(abs(x) > MAX_TIGHT_LOSS for x in losses) or any(m < 0 for m in masses):
        return f"needs losses within +-{MAX_TIGHT_LOSS:g} and non-negative masses"
    if abs(math.fsum(masses) + table.tight_inf_mass - 1.0) > 1e-9:
        return "P-masses and the mass at infinity must sum to 1 (a pair of probability laws)"
    if math.fsum(m * math.exp(-x) for x, m in zip(losses, masses, strict=True)) > 1.0 + 1e-12:
        return "Q-masses (p e^-loss) sum above 1"
    bounds = table.deltas if table.deltas_add is None else map(min, table.deltas, table.deltas_add)
    curve = pair_curve(losses, masses, table.tight_inf_mass, table.epsilons)
    for eps, bound, exact in zip(table.epsilons, bounds, curve, strict=True):
        if eps >= 0 and exact > bound * (1 + 1e-9) + 1e-15:
            return f"its curve at epsilon {eps:g} ({exact:.6g}) lies above the table ({bound:.6g})"
    return None


def pair_curve(
    losses: tuple[float, ...],
    masses: tuple[float, ...],
    inf_mass: float,
    epsilons: tuple[float, ...],
) -> list[float]:
    """The curve ``inf + sum_{l > eps} p_l (1 - e^(eps - l))`` of a discrete pair at increasing
    ``epsilons``, to within a few units of roundoff times the total mass (running sums over
    the losses from the top, so that a large pair and a large table cost n + m, not n m)."""
    atoms = sorted(zip(losses, masses, strict=True), reverse=True)
    values: list[float] = []
    i, mass, weighted = 0, 0.0, 0.0
    for eps in reversed(epsilons):
        while i < len(atoms) and atoms[i][0] > eps:
            mass += atoms[i][1]
            weighted += atoms[i][1] * math.exp(-atoms[i][0])
            i += 1
        values.append(inf_mass + max(0.0, mass - math.exp(eps) * weighted) if i else inf_mass)
    return values[::-1]


def rdp_table_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator of the orders and values of a tabulated Renyi-DP curve."""
    name = attribute.name
    check_number_table(name, value)
    if name == "orders":
        if not all(math.isfinite(v) and v > 1.0 for v in value) or any(
            b <= a for a, b in itertools.pairwise(value)
        ):
            raise InvalidParameterError(
                name, "must be finite, above 1 and strictly increasing", "sort the orders"
            )
        return
    if len(value) != len(instance.orders):
        raise InvalidParameterError(
            name,
            f"has {len(value)} values for {len(instance.orders)} orders",
            "give one value per order",
        )
    problem = rdp_curve_problem(instance.orders, value)
    if problem is not None:
        raise InvalidParameterError(name, problem, "tabulate an RDP curve of the mechanism")


def rdp_curve_problem(orders: tuple[float, ...], values: tuple[float, ...]) -> str | None:
    """Why ``values`` at ``orders`` (increasing) is no Renyi-DP curve; None if it is one.

    A curve is not NaN, non-negative (+inf: no bound at that order) and non-decreasing in the
    order (Renyi divergences grow with the order: van Erven & Harremoes 2014, Thm 3)."""
    for order, value in zip(orders, values, strict=True):
        if math.isnan(value) or value < 0.0:
            return f"value {value!r} at order {order:g} is not a non-negative number"
    for (a, x), (b, y) in itertools.pairwise(zip(orders, values, strict=True)):
        if y < x:
            return (
                f"decreases from {x!r} at order {a:g} to {y!r} at order {b:g} (an RDP curve is "
                "non-decreasing in the order)"
            )
    return None

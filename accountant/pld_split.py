"""Composition split by heavy-tail steps: delta at small levels carried by one large loss.

In a Poisson-subsampled Gaussian at small q, a tiny delta is reached mostly by a single step
whose loss is far above the others. No exponential tilt suits both that step and the rest: the
tilt that reaches delta puts nearly all tilted mass at the top of the loss range, so the FFT's
round-off, bounded relative to the tilted mass, swamps the masses where delta is read.

Here each component's discrete PLD ``F_i`` is split into a body ``B_i`` and a tail ``T_i`` (its
masses above a loss threshold, of total ``p_i``). The composition expands binomially,
``prod_i (B_i + T_i)^{k_i}``; the terms with no tail step and with exactly one are composed
separately, each at its own tilt (so each part's round-off is relative to its own mass), and
summed. The terms with two or more tail steps have total mass at most ``(sum_i k_i p_i)^2 / 2``
(the second factorial moment of the number of tail steps): it is charged to upper bounds and
dropped from lower bounds, both sound because every term adds a non-negative amount to
``delta(eps) = sum_l p_l (1 - e^{eps - l})_+``. See proofs_checks/pld_tail_split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from dpledger.accountant.pld_engine import (
    TINY_MASS,
    ComposedPLD,
    DiscretePLD,
    U,
    compose,
    infinite_mass,
)
from dpledger.accountant.pld_fft import log_keep_of

#: the dropped terms' mass, relative to the delta of interest
SPLIT_REMAINDER = 1e-3
#: most components with a tail (each costs one more composition)
MAX_SPLIT_COMPONENTS = 4

Components = Sequence[tuple[DiscretePLD, int]]


def split_budget(delta: float) -> float:
    """Largest total expected number of tail steps, sum_i k_i p_i, for a remainder of at most
    SPLIT_REMAINDER * delta."""
    return math.sqrt(2.0 * SPLIT_REMAINDER * delta)


def _tail_start(pld: DiscretePLD, budget: float) -> int:
    """Index of the lowest mass of the top suffix whose total is at most ``budget``."""
    suffix = np.cumsum(pld.masses[::-1])[::-1] * (1 + 4 * U * pld.masses.size)
    inside = np.nonzero(suffix <= budget)[0]
    return int(inside[0]) if inside.size else pld.masses.size


def _cuttable(pld: DiscretePLD, start: int) -> bool:
    """Whether both sides of a cut at ``start`` hold a mass that composition keeps."""
    if not 0 < start < pld.masses.size:
        return False
    return bool(pld.masses[:start].max() >= TINY_MASS and pld.masses[start:].max() >= TINY_MASS)


def split_at(pld: DiscretePLD, start: int, scale: float) -> tuple[DiscretePLD, DiscretePLD, float]:
    """(body, tail times ``scale``, tail mass rounded up) of a PLD cut at index ``start``; the
    mass at infinity stays with neither."""
    body = attrs.evolve(pld, masses=pld.masses[:start], inf_mass=0.0)
    tail_masses = pld.masses[start:]
    tail = attrs.evolve(
        pld,
        offset=pld.offset + start,
        masses=tail_masses * scale,
        inf_mass=0.0,
        slack=pld.slack * scale * (1 + 4 * U),
    )
    mass = math.fsum(tail_masses.tolist()) * (1 + 4 * U)
    return body, tail, mass


def _loss_cut(pld: DiscretePLD, loss: float) -> int:
    """Index of the first mass of ``pld`` at or above ``loss`` (clamped to the array)."""
    return min(max(math.ceil(loss / pld.h - 1e-9) - pld.offset, 0), pld.masses.size)


def cuts_tails(plds: Components, delta: float) -> bool:
    """Whether :func:`compose_split` would cut ``plds`` for ``delta`` (some component, and at
    most MAX_SPLIT_COMPONENTS, has a tail to cut); on a coarse grid, an estimate of it."""
    per_component = split_budget(delta) / MAX_SPLIT_COMPONENTS
    cut = [pld for pld, count in plds if _cuttable(pld, _tail_start(pld, per_component / count))]
    return 0 < len(cut) <= MAX_SPLIT_COMPONENTS


def compose_split(
    plds: Components,
    window: tuple[float, float],
    tilt_for: Callable[[Components], float],
    coarse: Components,
    delta: float,
    *,
    upper: bool,
) -> ComposedPLD | None:
    """The composition of ``plds`` as the sum of its parts with at most one tail step, on
    ``window``; ``tilt_for`` picks each part's tilt from its coarse guide (``coarse``: the same
    components on a coarser grid, cut at the same losses). None when no component has a tail
    to cut, or too many have one."""
    per_component = split_budget(delta) / MAX_SPLIT_COMPONENTS
    starts = [_tail_start(pld, per_component / count) for pld, count in plds]
    cut = [i for i, (pld, _) in enumerate(plds) if _cuttable(pld, starts[i])]
    if not cut or len(cut) > MAX_SPLIT_COMPONENTS:
        return None
    # scaling the tails by their counts rounds: to the safe side of the bound being computed
    rounding = 1 + 4 * U if upper else 1 - 4 * U
    fine: list[tuple[DiscretePLD, DiscretePLD | None, float]] = []
    guide: list[tuple[DiscretePLD, DiscretePLD | None]] = []
    for i, ((pld, count), (rough, _)) in enumerate(zip(plds, coarse, strict=True)):
        if i not in cut:
            fine.append((pld, None, 0.0))
            guide.append((rough, None))
            continue
        body, tail, mass = split_at(pld, starts[i], count * rounding)
        fine.append((body, tail, mass))
        loss = float(pld.losses[starts[i]])
        g_body, g_tail, _ = split_at(rough, _loss_cut(rough, loss), float(count))
        guide.append((g_body, g_tail if g_tail.masses.size else tail))
    counts = [count for _, count in plds]
    parts = []
    for tail_of in [None, *cut]:
        comps, guides = _part(fine, guide, counts, tail_of)
        if comps:
            parts.append(compose(comps, window, tilt_for(guides), guides))
    expected = math.fsum(counts[i] * fine[i][2] for i in cut) * (1 + 8 * U * len(cut))
    remainder = 0.5 * expected * expected * (1 + 4 * U)
    return _summed(parts, plds, remainder)


def _part(
    fine: Sequence[tuple[DiscretePLD, DiscretePLD | None, float]],
    guide: Sequence[tuple[DiscretePLD, DiscretePLD | None]],
    counts: Sequence[int],
    tail_of: int | None,
) -> tuple[list[tuple[DiscretePLD, int]], list[tuple[DiscretePLD, int]]]:
    """(components, guides) of the part with no tail step (``tail_of`` None) or with one tail
    step of component ``tail_of`` (its tail already carries the factor of its count)."""
    comps: list[tuple[DiscretePLD, int]] = []
    guides: list[tuple[DiscretePLD, int]] = []
    for i, ((body, tail, _), (g_body, g_tail)) in enumerate(zip(fine, guide, strict=True)):
        count = counts[i]
        if i == tail_of:
            assert tail is not None and g_tail is not None
            comps.append((tail, 1))
            guides.append((g_tail, 1))
            count -= 1
        if count:
            comps.append((body, count))
            guides.append((g_body, count))
    return comps, guides


def _summed(parts: Sequence[ComposedPLD], plds: Components, remainder: float) -> ComposedPLD:
    """One composition holding the sum of ``parts`` (on one window), the mass at infinity of
    ``plds`` and the dropped ``remainder`` (charged to upper bounds only)."""
    first = parts[0]
    m = len(parts)
    log_keep = math.fsum(count * log_keep_of(pld.inf_mass) for pld, count in plds)
    return attrs.evolve(
        first,
        upper=np.minimum(np.sum([p.upper for p in parts], axis=0) * (1 + 2 * U * m), 1.0),
        lower=np.sum([p.lower for p in parts], axis=0) * (1 - 2 * U * m),
        inf_mass=infinite_mass(log_keep, len(plds)),
        upper_tail=math.fsum(p.upper_tail for p in parts) * (1 + 4 * U * m),
        lower_tail=min(1.0, math.fsum(p.lower_tail for p in parts) * (1 + 4 * U * m)),
        dropped=math.fsum(p.dropped for p in parts) * (1 + 4 * U * m) + remainder,
        wrap_thetas=(),
        tilted_error=max(p.tilted_error for p in parts),
        dominated=all(p.dominated for p in parts),
        parts=tuple(parts),
        chord_slack=math.fsum(p.chord_slack for p in parts) * (1 + 4 * U * m),
    )

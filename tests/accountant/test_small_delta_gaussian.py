"""Gaussian-type components at very small delta: their loss ranges widen with the query
(:meth:`~dpledger.accountant.profiles_base.Profile.reaching`), so that the mass their
discretisations charge at +infinity stays far below the delta asked, and the PLD brackets
stay finite and tight down to delta = 1e-30 (references: 60-digit mpmath integrals)."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from dpledger.accountant import pld_prepared
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.profiles import (
    GAUSS_SPAN,
    DirectedProfiles,
    Profile,
    gauss_span,
    gaussian_profile,
    poisson_add,
    poisson_remove,
    replace_one_profiles,
    self_dual,
)
from dpledger.accountant.random_allocation import allocation_profiles
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
)

#: whether the compositions widen the components' ranges for the delta they are made for
REACHES = hasattr(pld_prepared, "reach_tails")
needs_reach = pytest.mark.xfail(
    not REACHES,
    reason="the compositions do not yet widen the components' ranges for the delta queried",
    strict=True,
)

GAUSS_LAPLACE = ComposedEvent([GaussianEvent(1.0), LaplaceEvent(1.0)])
SAMPLED_MIXED = ComposedEvent([PoissonSampledEvent(0.2, GaussianEvent(1.0)), GaussianEvent(2.0)])
SAMPLED_LONG = SelfComposedEvent(PoissonSampledEvent(1e-3, GaussianEvent(0.6)), 1000)


def _mp_gauss(eps: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    """The Gaussian mechanism's curve at 60 digits."""
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def _gauss_laplace_delta(eps: float) -> mpmath.mpf:
    """Exact curve of N(1, 1) vs N(0, 1) composed with Laplace of scale 1 (symmetric): the
    Laplace loss is 1 with P-mass 1/2, -1 with 1/(2e), and 2x - 1 at density e^{x-1}/2 on
    (0, 1)."""
    with mpmath.workdps(60):
        e, one = mpmath.mpf(eps), mpmath.mpf(1)
        atoms = _mp_gauss(e - 1, one) / 2 + mpmath.exp(-1) * _mp_gauss(e + 1, one) / 2
        body = mpmath.quad(
            lambda x: mpmath.exp(x - 1) / 2 * _mp_gauss(e - (2 * x - 1), one), [0, 1]
        )
        return atoms + body


def _sampled_mixed_delta(eps: float) -> mpmath.mpf:
    """Exact curve (the worse direction) of Poisson sampling at 0.2 of N(1, 1) composed with a
    Gaussian of multiplier 2, under add/remove, as 60-digit integrals over the sampled output."""
    with mpmath.workdps(60):
        e, q, mu = mpmath.mpf(eps), mpmath.mpf("0.2"), mpmath.mpf("0.5")
        cuts = [-40, -20, -10, -5, 0, 1, 5, 10, 15, 20, 30, 40]

        def loss(x: mpmath.mpf) -> mpmath.mpf:
            return mpmath.log(1 - q + q * mpmath.exp(x - mpmath.mpf("0.5")))

        remove = mpmath.quad(
            lambda x: (
                ((1 - q) * mpmath.npdf(x) + q * mpmath.npdf(x - 1)) * _mp_gauss(e - loss(x), mu)
            ),
            cuts,
        )
        add = mpmath.quad(lambda x: mpmath.npdf(x) * _mp_gauss(e + loss(x), mu), cuts)
        return max(remove, add)


# -- the widened ranges (no composition) ------------------------------------------------------


@pytest.mark.parametrize("level", [1e-20, 1e-24, 1e-30, 1e-40, 1e-100, 1e-300])
def test_gauss_span_tail_is_below_half_the_level_at_60_digits(level: float) -> None:
    z = gauss_span(level)
    assert z >= GAUSS_SPAN
    with mpmath.workdps(60):
        tail = mpmath.ncdf(-mpmath.mpf(z))
        assert tail <= mpmath.mpf(level) / 2
        if z > GAUSS_SPAN:  # and not much wider than that needs
            assert mpmath.ncdf(-mpmath.mpf(z) + mpmath.mpf("1e-3")) > mpmath.mpf(level) / 2


def test_gauss_span_keeps_the_default_span_where_its_tail_is_small_enough() -> None:
    assert gauss_span(1e-15) == GAUSS_SPAN
    assert gauss_span(2.0 * float(mpmath.ncdf(-10)) * 1.001) == GAUSS_SPAN


def _profiles() -> list[tuple[str, Profile]]:
    g = gaussian_profile(1 / 0.6)
    out = [
        ("gaussian 0.1", gaussian_profile(0.1)),
        ("gaussian 1", gaussian_profile(1.0)),
        ("gaussian 3", gaussian_profile(3.0)),
        ("remove", poisson_remove(g, 1e-3)),
        ("remove lower", poisson_remove(g, 1e-3, -1.0)),
        ("add", poisson_add(g, 1e-3)),
        ("add q=0.5", poisson_add(gaussian_profile(1.0), 0.5)),
        ("self-dual remove", self_dual(poisson_remove(gaussian_profile(0.5), 0.01), exact=False)),
    ]
    for a in (0.2, 1.5):
        pair = replace_one_profiles(a, 0.01)
        out += [(f"replace-one {a}", pair.remove), (f"replace-one lower {a}", pair.lower_remove)]
    alloc = allocation_profiles(RandomAllocationEvent(2, GaussianEvent(1.0)), Adjacency())
    out += [("allocation remove", alloc.remove), ("allocation add", alloc.add)]
    return out


@pytest.mark.parametrize("level", [1e-33, 1e-45])
def test_widened_curve_is_the_same_curve_with_at_most_level_beyond_its_top(level: float) -> None:
    widened = 0
    for name, p in _profiles():
        wide = p.reaching(level)
        if _top_value(p) <= level:  # the add curve of a small rate ends near -log(1 - q)
            assert wide is p, name
            continue
        widened += 1
        assert wide.loss_hi > p.loss_hi and wide.loss_lo <= p.loss_lo, name
        assert _top_value(wide) <= level, name
        eps = np.linspace(max(p.loss_lo, -50.0), p.loss_hi, 257)
        assert np.array_equal(wide(eps), p(eps)), name
        assert wide.dual is not None or p.dual is None, name
    assert widened >= 10


def _top_value(p: Profile) -> float:
    return float(p(np.array([min(p.loss_hi, p.accurate_hi)]))[0])


def test_reaching_leaves_a_curve_whose_top_is_already_below_the_level() -> None:
    for name, p in _profiles():
        assert p.reaching(2.0 * _top_value(p) + 1e-300) is p, name
    pure = allocation_profiles(RandomAllocationEvent(4, GaussianEvent(1.0)), Adjacency()).lower_add
    assert pure.reaching(1e-40) is pure  # a lower curve of a finite pair: no widening


def _widened_epsilon(event: Event, delta: float, level: float) -> tuple[float, float]:
    """The PLD bracket with every component's range widened for ``level`` by hand."""
    acc = PLDAccountant()
    acc.compose(event)
    prep = acc._prepared()
    assert prep is not None

    def wide(comps: list[tuple[DirectedProfiles, int]]) -> list[tuple[DirectedProfiles, int]]:
        return [
            (
                DirectedProfiles(
                    *(p.reaching(level) for p in (d.remove, d.add, d.lower_remove, d.lower_add))
                ),
                k,
            )
            for d, k in comps
        ]

    acc._prep = pld_prepared.prepare(
        wide(prep.comps), wide(prep.lower_comps), acc._upper_events, acc.adjacency
    )
    bound = acc.get_epsilon(delta)
    return bound.epsilon_lower, bound.epsilon


def test_widened_components_compose_to_a_tight_bracket_at_1e_30() -> None:
    lower, upper = _widened_epsilon(GAUSS_LAPLACE, 1e-30, 1e-36)
    assert math.isfinite(upper) and upper - lower <= 0.01 * upper
    assert _gauss_laplace_delta(upper) <= 1e-30 <= _gauss_laplace_delta(lower)


# -- the default call ---------------------------------------------------------------------------


def _bracket(event: Event, delta: float) -> tuple[float, float]:
    bound = account(event, delta=delta, backends=["pld"]).bound
    assert isinstance(bound.epsilon, float)
    return bound.epsilon_lower, bound.epsilon  # type: ignore[union-attr]


@needs_reach
@pytest.mark.parametrize("delta", [pytest.param(1e-25, marks=pytest.mark.slow), 1e-30])
def test_gaussian_beside_laplace_is_tight_against_the_exact_curve(delta: float) -> None:
    lower, upper = _bracket(GAUSS_LAPLACE, delta)
    assert math.isfinite(upper) and upper - lower <= 0.01 * upper
    assert _gauss_laplace_delta(upper) <= delta <= _gauss_laplace_delta(lower)


@pytest.mark.slow
@needs_reach
@pytest.mark.parametrize("delta", [1e-25, 1e-30])
def test_sampled_gaussian_beside_a_gaussian_is_tight_against_the_exact_curve(delta: float) -> None:
    lower, upper = _bracket(SAMPLED_MIXED, delta)
    assert math.isfinite(upper) and upper - lower <= 0.01 * upper
    assert _sampled_mixed_delta(upper) <= delta <= _sampled_mixed_delta(lower)


@needs_reach
def test_long_sampled_gaussian_at_1e_30_is_finite_tight_and_below_rdp() -> None:
    lower, upper = _bracket(SAMPLED_LONG, 1e-30)
    assert math.isfinite(upper) and upper - lower <= 0.01 * upper
    rdp = account(SAMPLED_LONG, delta=1e-30, backends=["rdp"]).bound
    assert upper <= rdp.epsilon  # type: ignore[union-attr]
    assert lower >= _bracket(SAMPLED_LONG, 1e-20)[1]  # monotone in delta


@pytest.mark.slow
@needs_reach
def test_monotone_in_delta() -> None:
    for event in (GAUSS_LAPLACE, SAMPLED_MIXED):
        brackets = [_bracket(event, d) for d in (1e-20, 1e-25, 1e-30)]
        for (_, up_big), (low_small, _) in itertools.pairwise(brackets):
            assert low_small >= up_big


@needs_reach
@pytest.mark.parametrize("delta", [1e-10, 1e-15])
def test_nothing_widens_where_the_default_tails_are_negligible(delta: float) -> None:
    for event in (GAUSS_LAPLACE, SAMPLED_MIXED, SAMPLED_LONG):
        acc = PLDAccountant()
        acc.compose(event)
        prep = acc._prepared()
        assert prep is not None
        assert pld_prepared.reach_tails(prep, delta, delta * 1e-5) is None


@pytest.mark.slow
@needs_reach
@pytest.mark.parametrize("delta", [1e-25, 1e-30])
def test_k_of_t_allocation_is_finite_at_small_delta(delta: float) -> None:
    event = RandomAllocationEvent(3, GaussianEvent(1.0), 2)
    lower, upper = _bracket(event, delta)
    assert math.isfinite(upper) and lower <= upper
    # never above the two Gaussian releases it is dominated by
    assert upper <= _bracket(SelfComposedEvent(GaussianEvent(1.0), 2), delta)[1]


@pytest.mark.slow
@needs_reach
@pytest.mark.parametrize("delta", [1e-26, 1e-34, 1e-40])
def test_wider_sweep_against_the_exact_curves(delta: float) -> None:
    for event, exact in (
        (GAUSS_LAPLACE, _gauss_laplace_delta),
        (SAMPLED_MIXED, _sampled_mixed_delta),
    ):
        lower, upper = _bracket(event, delta)
        assert math.isfinite(upper) and upper - lower <= 0.01 * upper
        assert exact(upper) <= delta <= exact(lower)

"""Basic composition: the one function that sums epsilons, and the backends that use it."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.pld import _exact_pure_cap
from dpledger.accountant.rdp import RDPAccountant
from dpledger.core.adjacency import Adjacency
from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import ComposedEvent, LaplaceEvent, PureDPEvent, SelfComposedEvent


def test_the_sum_is_exact_and_rounded_up() -> None:
    terms = [(3, 0.1), (1, 0.7)]
    value = basic_composition_epsilon(terms)
    exact = 3 * Fraction(0.1) + Fraction(0.7)
    assert Fraction(value) >= exact
    assert math.nextafter(value, -math.inf) < exact
    assert basic_composition_epsilon([(2, Fraction(1, 3))]) >= 2 / 3


def test_many_distinct_floats_of_every_scale_sum_exactly() -> None:
    """Float epsilons are summed as integers per power-of-two denominator: the same exact sum
    (against Fractions), with Fractions, huge counts and subnormals mixed in."""
    rng = random.Random(11)
    for _ in range(200):
        terms: list[tuple[int, float | Fraction]] = [
            (
                rng.choice([0, 1, 3, 10**6, 10**20]),
                rng.choice(
                    [rng.random(), rng.random() * 1e-200, 5e-324, 1e-310, Fraction(1, 7), 0.0]
                ),
            )
            for _ in range(rng.randint(1, 60))
        ]
        exact = sum((c * Fraction(e) for c, e in terms), Fraction(0))
        value = basic_composition_epsilon(terms)
        assert Fraction(value) >= exact
        assert value == 0.0 or Fraction(math.nextafter(value, -math.inf)) < exact
    assert basic_composition_epsilon([(1, 1e-3 * (1 + i * 1e-4)) for i in range(10_000)]) == (
        14.999500000000001
    )


def test_edge_cases() -> None:
    assert basic_composition_epsilon([]) == 0.0
    assert basic_composition_epsilon([(0, math.inf), (5, 0.0)]) == 0.0
    assert basic_composition_epsilon([(1, math.inf)]) == math.inf
    assert basic_composition_epsilon([(10**300, 1e300)]) == math.inf
    with pytest.raises(InvalidParameterError, match="count"):
        basic_composition_epsilon([(-1, 1.0)])
    with pytest.raises(InvalidParameterError, match="epsilon"):
        basic_composition_epsilon([(1, math.nan)])


@pytest.mark.parametrize("accountant", [ClosedFormAccountant, RDPAccountant])
def test_pure_ledgers_are_capped_by_basic_composition(accountant: type) -> None:
    event = ComposedEvent((SelfComposedEvent(PureDPEvent(0.1), 3), LaplaceEvent(2.0)))
    basic = basic_composition_epsilon([(3, 0.1), (1, Fraction(1, 2))])
    acc = accountant(Adjacency())
    acc.compose(event)
    assert acc.get_epsilon(1e-12).epsilon <= basic


def test_the_pld_pure_cap_is_basic_composition() -> None:
    events = {PureDPEvent(0.1): 3, LaplaceEvent(2.0): 1}
    cap = _exact_pure_cap(events, Adjacency())  # type: ignore[arg-type]
    assert cap == basic_composition_epsilon([(3, 0.1), (1, Fraction(1, 2))])


def test_pure_epsilon_never_rounds_down() -> None:
    """The kernel's pure epsilon goes through the same exact sum: never below the rational."""
    from dpledger.core.events import PoissonSampledEvent, pure_epsilon

    composed = ComposedEvent([PureDPEvent(0.1)] * 3 + [LaplaceEvent(3.0)])
    assert Fraction(pure_epsilon(composed)) >= 3 * Fraction(0.1) + 1 / Fraction(3.0)
    assert Fraction(pure_epsilon(LaplaceEvent(3.0))) >= 1 / Fraction(3.0)
    repeated = SelfComposedEvent(PureDPEvent(0.1), 7)
    assert Fraction(pure_epsilon(repeated)) >= 7 * Fraction(0.1)
    sampled = pure_epsilon(PoissonSampledEvent(0.01, PureDPEvent(1.0)))
    assert sampled >= math.log1p(0.01 * math.expm1(1.0))
    assert sampled <= math.log1p(0.01 * math.expm1(1.0)) * (1 + 1e-14)


def test_many_distinct_rational_terms_are_rounded_up_one_by_one() -> None:
    """Reciprocals of distinct noise scales: beyond EXACT_RATIONAL_TERMS each term is rounded up
    to a float before the exact sum; never below the exact rational sum, within a few ulps per
    term above it (and the same value as the exact path for few terms)."""
    from dpledger.core.basic_composition import EXACT_RATIONAL_TERMS

    rng = random.Random(5)
    scales = [rng.uniform(500.0, 1000.0) for _ in range(2000)]
    terms: list[tuple[int, float | Fraction]] = [
        (rng.choice([1, 7, 10**9]), 1 / Fraction(b)) for b in scales
    ]
    terms += [(3, 0.25), (2, rng.random())]
    exact = sum((c * Fraction(e) for c, e in terms), Fraction(0))
    value = basic_composition_epsilon(terms)
    assert len(terms) > EXACT_RATIONAL_TERMS
    assert Fraction(value) >= exact
    assert Fraction(value) <= exact * (1 + Fraction(4 * len(terms), 2**52))
    few = terms[: EXACT_RATIONAL_TERMS - 2]
    exact_few = sum((c * Fraction(e) for c, e in few), Fraction(0))
    value_few = basic_composition_epsilon(few)
    assert Fraction(value_few) >= exact_few > Fraction(math.nextafter(value_few, 0.0))
    assert basic_composition_epsilon([(10**308, 1 / Fraction(0.5 + i)) for i in range(100)]) == (
        math.inf
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**12),
            st.one_of(
                st.fractions(min_value=0, max_value=10**6, max_denominator=10**20),
                st.floats(0, 1e6, allow_nan=False),
            ),
        ),
        min_size=1,
        max_size=150,
    )
)
def test_the_sum_is_never_below_the_exact_one_on_either_path(
    terms: list[tuple[int, float | Fraction]],
) -> None:
    """Either side of EXACT_RATIONAL_TERMS distinct rationals: at or above the exact sum, and
    within an ulp per term (plus the final rounding) of it."""
    exact = sum((c * Fraction(e) for c, e in terms), Fraction(0))
    value = basic_composition_epsilon(terms)
    assert Fraction(value) >= exact
    assert Fraction(value) <= exact * (1 + Fraction(2 * (len(terms) + 1), 2**52)) + Fraction(
        2 * (len(terms) + 1), 2**1074
    )

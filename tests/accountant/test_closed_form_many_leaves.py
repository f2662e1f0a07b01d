"""The closed form on many distinct leaves: the same brackets as before its KOV profiles kept
their epsilon-independent arrays and summed only the terms that matter (golden numbers), and
one flattening of the tree per accounting call.

The golden numbers were made by the code before that change (commit ad7ee80), with
``account(make(), Adjacency(), delta=d, backends=["closed_form"])`` for each composition below
at d = 1e-5 and 1e-10, then ``epsilon=`` its epsilon upper bound at three significant digits
(1.0 where it is infinite), and ``kov_delta_bracket(eps, eps0, k)`` for the KOV table; the
``*_1000`` / ``rr_10000`` rows are the closed form's candidates in the default call of the
benchmark cases (``benchmarks/accountant_cases.py``) at delta = 1e-5 and their delta queries.
Every float is compared for equality.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from dpledger.accountant.conversions import KOVProfile, kov_delta_bracket
from dpledger.accountant.select import account
from dpledger.core import event_trees
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

CASES: dict[str, Callable[[], Event]] = {
    "rr_300": lambda: ComposedEvent(
        [RandomizedResponseEvent(1e-2 * (1 + i * 1e-3)) for i in range(300)]
    ),
    "rr_2000": lambda: ComposedEvent(
        [RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(2000)]
    ),
    "pure_mixed_400": lambda: ComposedEvent(
        [PureDPEvent(0.02 + 0.001 * (i % 37)) for i in range(400)]
        + [SelfComposedEvent(PureDPEvent(0.05), 30)]
    ),
    "approx_300": lambda: ComposedEvent(
        [ApproxDPEvent(0.01 * (1 + i / 300), 1e-9) for i in range(300)]
    ),
    "em_200": lambda: ComposedEvent(
        [ExponentialMechanismEvent(0.01 * (1 + i / 200)) for i in range(200)]
    ),
    "mixed_kinds": lambda: ComposedEvent(
        [RandomizedResponseEvent(0.05 + 0.001 * i) for i in range(50)]
        + [LaplaceEvent(20.0 + i) for i in range(40)]
        + [ApproxDPEvent(0.03 + 0.0005 * i, 1e-8) for i in range(60)]
        + [RandomizedResponseEvent(0.1, 4), ExponentialMechanismEvent(0.07)]
    ),
    # beyond KOV_MAX_COUNT: Hoeffding's upper bound, lower bounds from sub-compositions
    "rr_12000_hoeffding": lambda: ComposedEvent(
        [RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(12000)]
    ),
    "rr_10000": lambda: ComposedEvent(
        [RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(10_000)]
    ),
    "approx_1000": lambda: ComposedEvent(
        [ApproxDPEvent(0.01 * (1 + i / 1000), 1e-9) for i in range(1000)]
    ),
    "em_1000": lambda: ComposedEvent(
        [ExponentialMechanismEvent(0.01 * (1 + i / 1000)) for i in range(1000)]
    ),
}

EPSILON_GOLDEN = {
    ("rr_300", 1e-05): (0.6175566688146361, 0.8225587926935987),
    ("rr_300", 1e-10): (1.007408434107769, 1.3222745862742613),
    ("rr_2000", 1e-05): (0.14162551688956043, 0.17276852804445753),
    ("rr_2000", 1e-10): (0.249459301533707, 0.3012148401070931),
    ("pure_mixed_400", 1e-05): (2.2735024316637427, 5.187097833010739),
    ("pure_mixed_400", 1e-10): (3.47262697419775, 7.648881783682555),
    ("approx_300", 1e-05): (0.6785134405229494, 1.3194435560101283),
    ("approx_300", 1e-10): (math.inf, math.inf),
    ("em_200", 1e-05): (0.3692264154844478, 1.0521338962266213),
    ("em_200", 1e-10): (0.6181068803958181, 1.6676684192499351),
    ("mixed_kinds", 1e-05): (1.5761015299237806, 5.538452377788872),
    ("mixed_kinds", 1e-10): (math.inf, math.inf),
    ("rr_12000_hoeffding", 1e-05): (0.4352032855236416, 0.8765830490040497),
    ("rr_12000_hoeffding", 1e-10): (0.7254531656604968, 1.2330154817499424),
    ("rr_10000", 1e-05): (0.3736499321438862, 0.7254115786627722),
    ("approx_1000", 1e-05): (1.3231808116374055, 2.6044338857352614),
    ("em_1000", 1e-05): (0.8912197041105976, 2.5891705936894596),
}
DELTA_GOLDEN = {
    ("rr_300", 0.823): (4.339105363651823e-08, 9.915353103178537e-06),
    ("rr_300", 1.32): (1.7296054566562102e-16, 1.084863537698994e-10),
    ("rr_2000", 0.173): (6.138360143326298e-07, 9.850394072187131e-06),
    ("rr_2000", 0.301): (5.750008173408552e-14, 1.0237695520358782e-10),
    ("pure_mixed_400", 5.19): (1.7202218104276942e-22, 9.90220156001674e-06),
    ("pure_mixed_400", 7.65): (5.708762320514115e-50, 9.947234600465315e-11),
    ("approx_300", 1.32): (2.9999997621406593e-07, 9.947998149377298e-06),
    ("approx_300", 1.0): (3.0220971337593823e-07, 0.00030420572926951803),
    ("em_200", 1.05): (3.82383367044528e-25, 1.0282871677738353e-05),
    ("em_200", 1.67): (2.865487125522239e-61, 9.325280786320787e-11),
    ("mixed_kinds", 5.54): (5.999998229999999e-07, 9.9401422516079e-06),
    ("mixed_kinds", 1.0): (0.0015225919387631764, 0.2132371669207356),
    ("rr_12000_hoeffding", 0.877): (3.235264992268752e-14, 9.889023260446635e-06),
    ("rr_12000_hoeffding", 1.23): (9.393957755210157e-25, 1.1207201302866183e-10),
    ("rr_10000", 0.542): (8.478231781597441e-09, 0.0002676952430532325),
    ("approx_1000", 1.93): (1.0013509529770836e-06, 0.0004997921382053854),
    ("em_1000", 0.975): (2.3311365238049782e-06, 0.026391470848240034),
}
KOV_GOLDEN = {
    (0.5, 0.002, 10000): (0.0005121904750968691, 0.0005121904751487002),
    (0.542, 0.0019999, 10000): (0.0002676952430261319, 0.0002676952430532253),
    (1.0, 0.01, 1000): (0.00010831170545078196, 0.00010831170545209614),
    (0.0, 0.01, 1000): (0.1256015358347601, 0.12560153583626527),
    (3.0, 0.1, 500): (0.2709963380264156, 0.2709963380284268),
    (0.2, 0.05, 50): (0.06835818706026138, 0.06835818706043427),
    (-0.1, 0.03, 100): (0.16754027184334505, 0.16754027184385067),
    (25.0, 0.5, 3000): (0.9999999999754804, 1.0),
    (0.001, 0.0001, 10000): (0.003510992408566014, 0.0035109924089196357),
    (0.3, 0.001, 6667): (2.729518601249537e-06, 2.7295186014359047e-06),
}


def _closed_form(event: Event, **query: float) -> tuple[float, float]:
    bound = account(event, Adjacency(), backends=["closed_form"], **query).bound
    if "delta" in query:
        return bound.epsilon_lower, bound.epsilon  # type: ignore[union-attr]
    return bound.delta_lower, bound.delta  # type: ignore[union-attr]


@pytest.mark.parametrize(("name", "delta"), sorted(EPSILON_GOLDEN))
def test_epsilon_brackets_are_the_golden_numbers(name: str, delta: float) -> None:
    assert _closed_form(CASES[name](), delta=delta) == EPSILON_GOLDEN[name, delta]


@pytest.mark.parametrize(("name", "epsilon"), sorted(DELTA_GOLDEN))
def test_delta_brackets_are_the_golden_numbers(name: str, epsilon: float) -> None:
    assert _closed_form(CASES[name](), epsilon=epsilon) == DELTA_GOLDEN[name, epsilon]


def test_kov_brackets_are_the_golden_numbers() -> None:
    for (eps, eps0, k), golden in KOV_GOLDEN.items():
        assert kov_delta_bracket(eps, eps0, k) == golden
        assert KOVProfile(eps0, k).bracket(eps) == golden


def test_kov_upper_bound_is_positive_where_the_terms_underflow() -> None:
    """2000-fold 0.002-DP at eps = 3.8: the exact delta is about 1.25e-505, below the double
    range; the upper bound is the smallest positive double, never 0."""
    lo, hi = kov_delta_bracket(3.8, 0.002, 2000)
    assert lo == 0.0 and hi == 5e-324
    assert kov_delta_bracket(4.0 + 1e-9, 0.002, 2000) == (0.0, 0.0)  # every term is 0


def test_one_flattening_per_account_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every backend, the cross-check screen and the lower-bound reading flatten the tree: within
    one call the tree is walked once (each sub-event object at most once)."""
    walks: list[int] = []
    walk = event_trees._flatten

    def counted(event: Event) -> list[tuple[Event, int]]:
        walks.append(id(event))
        return walk(event)

    monkeypatch.setattr(event_trees, "_flatten", counted)
    event = ComposedEvent([RandomizedResponseEvent(0.01 * (1 + i / 70)) for i in range(70)])
    for query in ({"delta": 1e-5}, {"epsilon": 0.5}):
        walks.clear()
        selection = account(event, Adjacency(), **query)  # type: ignore[arg-type]
        assert len(selection.candidates) >= 2  # the closed form and PLD both ran
        assert walks.count(id(event)) == 1
        assert len(walks) == len(set(walks))
    walks.clear()
    assert event_trees.flatten(event) == event_trees.flatten(event)
    assert walks.count(id(event)) == 2  # outside an account call nothing is remembered


def test_flatten_memo_returns_fresh_equal_lists_and_ends_with_its_block() -> None:
    leaf = PureDPEvent(0.5)
    event = ComposedEvent([leaf, SelfComposedEvent(leaf, 3)])
    with event_trees.flatten_memo():
        first = event_trees.flatten(event)
        first.append((leaf, 99))  # a caller changing its list changes no later answer
        with event_trees.flatten_memo():  # nested: the outer memo is shared
            assert event_trees.flatten(event) == [(leaf, 4)]
        assert event_trees._FLATTENED.get() is not None
    assert event_trees._FLATTENED.get() is None
    assert event_trees.flatten(event) == [(leaf, 4)]

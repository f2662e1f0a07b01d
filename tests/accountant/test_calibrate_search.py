"""The calibration's root search: few evaluations, a certified end kept, the tolerance met."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dpledger.accountant.calibrate as calibrate
from dpledger.accountant.calibrate_search import GAP_CAP, Search, gap
from dpledger.core.events import GaussianEvent, SelfComposedEvent


def _search(epsilon: Callable[[float], float], target: float, rtol: float) -> tuple[Search, int]:
    """The search over (1e-2, 1e3) as the calibration runs it, on a synthetic curve."""
    search = Search(1e-2, 1e3, rtol)
    calls = 0

    def evaluate(sigma: float) -> float:
        nonlocal calls
        calls += 1
        value = epsilon(sigma)
        search.add(sigma, gap(value, target))
        return value

    if evaluate(math.sqrt(1e-2 * 1e3)) > target:
        assert evaluate(1e3) <= target
    while not search.done():
        evaluate(search.candidate())
        assert calls < 80
    return search, calls


@settings(max_examples=60, deadline=None)
@given(
    power=st.floats(0.5, 4.0),
    scale=st.floats(1e-2, 1e2),
    bend=st.floats(0.0, 3.0),
    target=st.floats(0.05, 20.0),
)
def test_the_search_brackets_the_crossing_to_the_tolerance(
    power: float, scale: float, bend: float, target: float
) -> None:
    # epsilon falls as a power of sigma, faster at little noise (as a sampled Gaussian's)
    def epsilon(sigma: float) -> float:
        return scale * sigma**-power * math.exp(min(bend / sigma**2, 400.0))  # monotone, finite

    assume(epsilon(1e3) <= target)  # some noise in the bracket meets the target
    search, calls = _search(epsilon, target, 1e-4)
    assert search.hi / search.lo - 1 <= 1e-4
    assert epsilon(search.hi) <= target
    if search.lo_known:
        assert epsilon(search.lo) > target
    assert calls <= 30


def test_a_smooth_crossing_takes_few_evaluations() -> None:
    search, calls = _search(lambda s: 3.0 / s**1.5, 1.0, 1e-4)
    assert epsilon_root_within(search, (3.0) ** (1 / 1.5))
    assert calls <= 10


def epsilon_root_within(search: Search, root: float) -> bool:
    return search.lo <= root <= search.hi


def test_gap_is_finite_at_zero_and_infinity() -> None:
    assert gap(0.0, 1.0) == -GAP_CAP and gap(math.inf, 1.0) == GAP_CAP
    assert gap(math.e, 1.0) == pytest.approx(1.0)


def test_calibration_of_a_gaussian_composition_takes_few_accountant_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []
    original = calibrate._account

    def counted(*args: object) -> object:
        calls.append(args)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(calibrate, "_account", counted)
    found = calibrate.calibrate_noise_multiplier(
        lambda s: SelfComposedEvent(GaussianEvent(s), 10), None, 1.0, 1e-5
    )
    assert found.epsilon <= 1.0
    assert len(calls) <= 10

"""Calibration: never overshoots the target, inverts the accountant, refuses bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant import calibrate, calibrate_estimate
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.calibrate import (
    analytic_gaussian_sigma,
    calibrate_noise_multiplier,
    calibrate_on_grid,
    calibrate_steps,
    grid_neighbours,
)
from dpledger.accountant.conversions import gaussian_delta_bracket
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
)

BACKENDS = ("closed_form", "rdp")


def _dpsgd(q: float, steps: int):
    return lambda s: SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(s)), steps)


@settings(max_examples=6, deadline=None)
@given(
    eps=st.floats(1.0, 10.0),
    steps=st.integers(10, 100),
    q=st.sampled_from([1e-3, 0.01, 0.1]),
    delta=st.sampled_from([1e-4, 1e-5, 1e-6]),
)
def test_noise_calibration_never_overshoots(eps: float, steps: int, q: float, delta: float) -> None:
    res = calibrate_noise_multiplier(
        _dpsgd(q, steps), None, eps, delta, bracket=(0.05, 50.0), rtol=1e-3, backends=BACKENDS
    )
    assert res.epsilon <= eps
    check = account(_dpsgd(q, steps)(res.noise_multiplier), delta=delta, backends=BACKENDS)
    assert check.bound.epsilon <= eps
    # tight: 0.1 % less noise already exceeds the target
    if res.noise_multiplier > 0.05:
        less = account(
            _dpsgd(q, steps)(res.noise_multiplier / 1.002), delta=delta, backends=BACKENDS
        )
        assert less.bound.epsilon > eps


def test_gaussian_calibration_inverts_closed_form() -> None:
    res = calibrate_noise_multiplier(
        lambda s: SelfComposedEvent(GaussianEvent(s), 10),
        None,
        2.0,
        1e-5,
        rtol=1e-9,
        backends=BACKENDS,
    )
    assert res.method == "closed_form" and res.epsilon <= 2.0
    mu = math.sqrt(10) / res.noise_multiplier
    assert gaussian_delta_bracket(2.0, mu)[0] == pytest.approx(1e-5, rel=1e-3)


def test_replace_one_needs_twice_the_noise() -> None:
    make = lambda s: GaussianEvent(s)  # noqa: E731
    add = calibrate_noise_multiplier(make, None, 1.0, 1e-5, rtol=1e-8, backends=BACKENDS)
    rep = calibrate_noise_multiplier(
        make, Adjacency("replace_one"), 1.0, 1e-5, rtol=1e-8, backends=BACKENDS
    )
    assert rep.noise_multiplier == pytest.approx(2 * add.noise_multiplier, rel=1e-6)


def test_laplace_calibration() -> None:
    res = calibrate_noise_multiplier(LaplaceEvent, None, 0.5, 1e-9, rtol=1e-6, backends=BACKENDS)
    # one Laplace: delta(eps) = 1 - exp((eps - 1/b)/2) <= 1e-9 needs 1/b <= 0.5 + 2e-9
    assert res.epsilon <= 0.5
    assert 1 / res.noise_multiplier == pytest.approx(0.5, rel=1e-5)


def test_bracket_too_small_and_lower_end() -> None:
    with pytest.raises(InvalidParameterError, match="bracket"):
        calibrate_noise_multiplier(
            GaussianEvent, None, 0.1, 1e-5, bracket=(0.1, 1.0), backends=BACKENDS
        )
    res = calibrate_noise_multiplier(
        GaussianEvent, None, 50.0, 1e-5, bracket=(1.0, 2.0), backends=BACKENDS
    )
    assert res.noise_multiplier == 1.0


def test_steps_calibration() -> None:
    make = lambda n: SelfComposedEvent(GaussianEvent(10.0), n)  # noqa: E731
    res = calibrate_steps(make, None, 1.0, 1e-5, backends=BACKENDS)
    assert res.epsilon <= 1.0
    assert account(make(res.count + 1), delta=1e-5, backends=BACKENDS).bound.epsilon > 1.0
    # closed form: K Gaussians of sigma=10 is mu = sqrt(K)/10; largest K with eps(1e-5) <= 1
    sigma_1 = analytic_gaussian_sigma(1.0, 1e-5)
    assert res.count == math.floor((10.0 / sigma_1) ** 2)
    none = calibrate_steps(
        lambda n: SelfComposedEvent(GaussianEvent(0.1), n), None, 0.5, 1e-5, backends=BACKENDS
    )
    assert none.count == 0
    capped = calibrate_steps(make, None, 1000.0, 1e-5, max_count=37, backends=BACKENDS)
    assert capped.count == 37


def test_analytic_gaussian_sigma() -> None:
    sigma = analytic_gaussian_sigma(1.0, 1e-5)
    assert sigma == pytest.approx(3.7307, abs=1e-3)
    lo, hi = gaussian_delta_bracket(1.0, 1 / sigma)
    assert hi <= 1e-5 and lo >= 1e-5 * (1 - 1e-6)
    # classical calibration fails at eps >= ~10 (SEED_NOTES 1.3.4); analytic is always valid
    assert gaussian_delta_bracket(10.0, 1 / analytic_gaussian_sigma(10.0, 5e-6))[1] <= 5e-6
    assert analytic_gaussian_sigma(1.0, 1e-5, sensitivity=3.0) == pytest.approx(
        3 * sigma, rel=1e-12
    )


@pytest.mark.parametrize(
    ("eps", "delta", "field"),
    [
        (0.0, 1e-5, "target_epsilon"),
        (math.inf, 1e-5, "target_epsilon"),
        (-1.0, 1e-5, "target_epsilon"),
        (1.0, 0.0, "target_delta"),
        (1.0, 1.0, "target_delta"),
        (1.0, math.nan, "target_delta"),
        ("1", 1e-5, "target_epsilon"),
    ],
)
def test_bad_targets(eps, delta, field: str) -> None:
    with pytest.raises(InvalidParameterError, match=field):
        calibrate_noise_multiplier(GaussianEvent, None, eps, delta, backends=BACKENDS)
    with pytest.raises(InvalidParameterError, match=field):
        calibrate_steps(lambda n: SelfComposedEvent(GaussianEvent(1.0), n), None, eps, delta)


def test_bad_options() -> None:
    with pytest.raises(InvalidParameterError, match="bracket"):
        calibrate_noise_multiplier(GaussianEvent, None, 1.0, 1e-5, bracket=(2.0, 1.0))
    with pytest.raises(InvalidParameterError, match="max_count"):
        calibrate_steps(lambda n: GaussianEvent(1.0), None, 1.0, 1e-5, max_count=0)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        analytic_gaussian_sigma(1.0, 1e-5, sensitivity=0.0)
    with pytest.raises(InvalidParameterError, match="target_epsilon"):
        analytic_gaussian_sigma(-1.0, 1e-5)


# -- calibration on a grid of significant digits -------------------------------------------------


@pytest.mark.parametrize(
    ("sigma", "below", "top"),
    [
        (22.41433, 22.4, 22.5),
        (22.5, 22.4, 22.5),
        (5.45359, 5.45, 5.46),
        (0.0501, 0.05, 0.0501),
        (100.0, 99.9, 100.0),  # a decade's first point: the one below has the finer step
        (99.95, 99.9, 100.0),
        (999.2, 999.0, 1000.0),
    ],
)
def test_grid_neighbours(sigma: float, below: float, top: float) -> None:
    assert grid_neighbours(sigma) == (below, top)


@given(st.floats(min_value=1e-3, max_value=1e6), st.integers(min_value=1, max_value=6))
def test_grid_neighbours_bracket_sigma_on_its_grid(sigma: float, digits: int) -> None:
    below, top = grid_neighbours(sigma, digits)
    # a sigma within 1e-9 (relative) of a grid point counts as on it (float noise)
    assert below < sigma * (1 + 1e-9) and sigma * (1 - 1e-9) <= top
    assert top < sigma * (1 + 10.0 ** (1 - digits)) * (1 + 1e-9)
    for point in (below, top):  # both have `digits` significant digits
        scale = 10.0 ** (digits - 1 - math.floor(math.log10(point)))
        assert point * scale == pytest.approx(round(point * scale), rel=1e-12)
    # and nothing of the grid lies strictly between them
    step = 10.0 ** (math.floor(math.log10(top * (1 - 1e-12))) - digits + 1)
    assert top - below <= step * 1.000001


def test_grid_calibration_is_the_ceiling_of_the_exact_gaussian_noise() -> None:
    exact = analytic_gaussian_sigma(1.0, 1e-5)  # 3.7305...
    res = calibrate_on_grid(GaussianEvent, None, 1.0, 1e-5, backends=("closed_form",))
    assert res.noise_multiplier == math.ceil(exact * 100) / 100 == 3.74
    assert res.epsilon <= 1.0
    # two significant digits: 3.8
    two = calibrate_on_grid(GaussianEvent, None, 1.0, 1e-5, digits=2, backends=("closed_form",))
    assert two.noise_multiplier == 3.8


@pytest.mark.parametrize("digits", [2, 3, 4])
def test_grid_calibration_is_the_least_certified_grid_point(digits: int) -> None:
    make = _dpsgd(0.01, 200)
    res = calibrate_on_grid(make, None, 1.0, 1e-5, digits=digits, backends=BACKENDS)
    below, top = grid_neighbours(res.noise_multiplier, digits)
    assert top == res.noise_multiplier
    assert account(make(top), delta=1e-5, backends=BACKENDS).bound.epsilon <= 1.0
    assert account(make(below), delta=1e-5, backends=BACKENDS).bound.epsilon > 1.0
    # within one grid step of the unrounded calibration
    free = calibrate_noise_multiplier(make, None, 1.0, 1e-5, rtol=1e-6, backends=BACKENDS)
    step = 10.0 ** (1 - digits)
    assert free.noise_multiplier <= top * (1 + 1e-9) < free.noise_multiplier * (1 + step)


def test_grid_calibration_stays_put_when_the_target_moves_slightly() -> None:
    # a tiny change of the certified bounds moves an unrounded calibration, not the grid point
    make = _dpsgd(0.01, 200)
    results = [
        calibrate_on_grid(make, None, eps, 1e-5, backends=BACKENDS).noise_multiplier
        for eps in (1.0, 1.0 * (1 - 1e-7), 1.0 * (1 + 1e-7))
    ]
    assert len(set(results)) == 1
    free = [
        calibrate_noise_multiplier(make, None, eps, 1e-5, rtol=1e-9, backends=BACKENDS)
        for eps in (1.0, 1.0 * (1 - 1e-7))
    ]
    assert free[0].noise_multiplier != free[1].noise_multiplier


@pytest.mark.parametrize("digits", [0, 13, True, 2.0])
def test_grid_calibration_refuses_bad_digits(digits: object) -> None:
    with pytest.raises(InvalidParameterError) as err:
        calibrate_on_grid(GaussianEvent, None, 1.0, 1e-5, digits=digits)  # type: ignore[arg-type]
    assert err.value.field == "digits"


def test_steps_calibration_is_certified_by_the_full_query() -> None:
    """The count is one whose printed bound (``account`` as it runs by default, PLD with its
    adaptive passes) meets the target, and one more step's does not."""
    make = _dpsgd(0.1, 1)

    def steps(n: int) -> SelfComposedEvent:
        return SelfComposedEvent(make(1.0).event, n)

    res = calibrate_steps(steps, None, 2.0, 1e-5)
    assert res.count > 1 and res.method == "pld"
    assert account(steps(res.count), delta=1e-5).bound.epsilon <= 2.0
    assert account(steps(res.count + 1), delta=1e-5).bound.epsilon > 2.0


def _old_neighbours(sigma: float, digits: int) -> tuple[float, float]:
    """The grid neighbours as first written (valid up to 6 digits: its 1e-9 snapping is
    absolute in the count)."""
    exponent = math.floor(math.log10(sigma)) - (digits - 1)
    unit = 1 / 10.0**-exponent if exponent < 0 else 10.0**exponent
    count = math.ceil(round(sigma / unit, 9))

    def on_grid(c: int, e: int) -> float:
        return c / 10.0**-e if e < 0 else c * 10.0**e

    if count == 10 ** (digits - 1):
        return on_grid(10**digits - 1, exponent - 1), on_grid(count, exponent)
    return on_grid(count - 1, exponent), on_grid(count, exponent)


@given(st.floats(min_value=1e-3, max_value=1e6), st.integers(min_value=1, max_value=6))
def test_grid_positions_are_the_grid_neighbours(sigma: float, digits: int) -> None:
    below, top = _old_neighbours(sigma, digits)
    assert grid_neighbours(sigma, digits) == (below, top)
    index = calibrate._grid_index(sigma, digits)
    assert calibrate._grid_value(index, digits) == top
    assert calibrate._grid_value(index - 1, digits) == below
    assert calibrate._grid_value(index + 1, digits) > top
    floor = calibrate._grid_index(sigma, digits, ceiling=False)
    assert floor in (index, index - 1)
    assert calibrate._grid_value(floor, digits) <= sigma * (1 + 1e-9)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """The events of the full queries a calibration makes, in order."""
    queried: list[Event] = []
    full = calibrate._account

    def counting(event: Event, *args: object) -> EpsilonBound:
        queried.append(event)
        return full(event, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(calibrate, "_account", counting)
    return queried


def _noise(event: Event) -> float:
    return float(event.event.event.noise_multiplier)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("q", "steps", "target", "digits"),
    [(0.01, 200, 1.0, 2), (0.01, 200, 1.0, 4), (256 / 60000, 1404, 2.0, 3), (1e-3, 2000, 0.3, 3)],
)
def test_grid_search_finds_the_grid_point_of_the_unrounded_calibration(
    monkeypatch: pytest.MonkeyPatch, q: float, steps: int, target: float, digits: int
) -> None:
    make = _dpsgd(q, steps)
    queried = _counted(monkeypatch)
    searched = calibrate_on_grid(make, None, target, 1e-5, digits=digits)
    searched_queries = len(queried)
    monkeypatch.setattr(calibrate, "MAX_GRID_QUERIES", 0)  # the unrounded calibration first
    unrounded = calibrate_on_grid(make, None, target, 1e-5, digits=digits)
    assert searched == unrounded
    # the point below is certified to fail, the point itself to meet
    below, top = grid_neighbours(searched.noise_multiplier, digits)
    assert top == searched.noise_multiplier and searched.epsilon <= target
    assert account(make(below), delta=1e-5).bound.epsilon > target
    assert searched_queries < len(queried) - searched_queries


def test_grid_search_from_a_precise_estimate_makes_two_full_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queried = _counted(monkeypatch)
    found = calibrate_on_grid(_dpsgd(0.01, 200), None, 1.0, 1e-5)
    assert found.noise_multiplier == 0.968 and len(queried) == 2
    assert [_noise(e) for e in queried] == [0.968, 0.967]


@pytest.mark.parametrize("far", [0.5, 2.0, 50.0])
def test_grid_search_from_a_wrong_estimate_gives_the_same_point(
    monkeypatch: pytest.MonkeyPatch, far: float
) -> None:
    make = _dpsgd(0.01, 200)
    estimate = calibrate_estimate.estimate_crossing(make, None, 1.0, 1e-5, (1e-2, 1e3))
    assert estimate is not None
    wrong = calibrate_estimate.Estimate(estimate.sigma * far, estimate.slope, True)
    monkeypatch.setattr(calibrate, "estimate_crossing", lambda *args: wrong)
    assert calibrate_on_grid(make, None, 1.0, 1e-5).noise_multiplier == 0.968


def test_grid_search_at_the_bracket_ends() -> None:
    make = _dpsgd(0.01, 200)
    # every grid point in the bracket meets: its lowest one
    low = calibrate_on_grid(make, None, 50.0, 1e-5, bracket=(0.7012, 10.0))
    assert low.noise_multiplier == 0.702
    # none meets: the bracket is named
    with pytest.raises(InvalidParameterError) as err:
        calibrate_on_grid(make, None, 1.0, 1e-5, bracket=(0.1, 0.5))
    assert err.value.field == "bracket"


@pytest.mark.parametrize(
    ("sigma", "target", "delta"),
    [
        (10.0, 1.0, 1e-5),
        (30.0, 0.5, 1e-6),
        (100.0, 2.0, 1e-10),
        (3.0, 8.0, 1e-5),
        (500.0, 0.1, 1e-5),
    ],
)
def test_steps_calibration_interpolates_to_the_closed_form_count(
    monkeypatch: pytest.MonkeyPatch, sigma: float, target: float, delta: float
) -> None:
    # K Gaussians of noise sigma compose to mu = sqrt(K) / sigma: the largest K meeting the
    # target is floor((sigma / sigma_1)^2), sigma_1 the noise of one Gaussian at the target
    queried = _counted(monkeypatch)
    make = lambda n: SelfComposedEvent(GaussianEvent(sigma), n)  # noqa: E731
    res = calibrate_steps(make, None, target, delta, backends=("closed_form",))
    expected = math.floor((sigma / analytic_gaussian_sigma(target, delta)) ** 2)
    assert res.count == expected
    assert res.epsilon <= target
    assert (
        account(make(res.count + 1), delta=delta, backends=("closed_form",)).bound.epsilon > target
    )
    # an interpolated search: a handful of full queries (doubling then bisecting took about
    # 2 log2(count): 20 for 1092 steps)
    assert len(queried) <= 6


@pytest.mark.parametrize(
    ("digits", "bracket", "expected"),
    [
        (3, (0.97 + 1e-13, 10.0), 0.971),  # a lower end a hair above a grid point
        (7, (0.9693, 10.0), 0.9693),  # an on-grid lower end that meets, many digits
        (11, (0.9693, 10.0), 0.9693),
    ],
)
def test_grid_search_stays_inside_the_bracket_and_keeps_an_on_grid_end(
    digits: int, bracket: tuple[float, float], expected: float
) -> None:
    # every grid point from 0.968 up meets (test above), so the least one in the bracket
    found = calibrate_on_grid(_dpsgd(0.01, 200), None, 1.0, 1e-5, digits=digits, bracket=bracket)
    assert found.noise_multiplier == expected and found.noise_multiplier >= bracket[0]


@given(st.floats(min_value=1e-3, max_value=1e6), st.integers(min_value=1, max_value=12))
def test_grid_positions_round_trip_at_any_number_of_digits(sigma: float, digits: int) -> None:
    index = calibrate._grid_index(sigma, digits)
    point = calibrate._grid_value(index, digits)
    assert calibrate._grid_index(point, digits) == index
    assert calibrate._grid_index(point, digits, ceiling=False) == index
    assert (
        calibrate._grid_value(index + 1, digits) > point > calibrate._grid_value(index - 1, digits)
    )


@pytest.mark.parametrize(
    ("make", "expected", "most"),
    [
        # epsilon jumps past the target after 1000 steps: interpolation alone would creep
        (lambda n: PureDPEvent(0.5 if n <= 1000 else 2.0), 1000, 40),
        # flat just under the target for a million steps
        (lambda n: PureDPEvent(0.999 if n <= 10**6 else 2.0), 10**6, 100),
    ],
)
def test_steps_calibration_ends_where_epsilon_jumps(
    monkeypatch: pytest.MonkeyPatch, make: object, expected: int, most: int
) -> None:
    queried = _counted(monkeypatch)
    res = calibrate_steps(make, None, 1.0, 1e-5, backends=("closed_form",))  # type: ignore[arg-type]
    assert res.count == expected and len(queried) <= most


def test_a_bracket_holding_no_grid_point_gives_the_unrounded_calibration_inside_it() -> None:
    found = calibrate_on_grid(_dpsgd(0.01, 200), None, 1.0, 1e-5, bracket=(0.9701, 0.9709))
    assert found.noise_multiplier == 0.9701  # the bracket's low end meets; no grid point inside

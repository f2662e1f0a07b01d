"""The calibration's cheap start: the estimated crossing, and a search from it that returns the
noise the full query certifies, also when the estimate is wrong."""

from __future__ import annotations

import math

import pytest

import dpledger.accountant.calibrate as calibrate
import dpledger.accountant.calibrate_estimate as calibrate_estimate
from dpledger.accountant.calibrate import calibrate_noise_multiplier
from dpledger.accountant.calibrate_estimate import Estimate, estimate_crossing
from dpledger.accountant.calibrate_search import Search, gap
from dpledger.accountant.select import account
from dpledger.core.errors import BoundUnavailable
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent

TARGET, DELTA = 1.0, 1e-5


def _dpsgd(sigma: float) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(sigma)), 1000)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    calls: list[float] = []
    original = calibrate._account

    def counted(event, adjacency, delta, backends):  # type: ignore[no-untyped-def]
        calls.append(event.event.event.noise_multiplier)
        return original(event, adjacency, delta, backends)

    monkeypatch.setattr(calibrate, "_account", counted)
    return calls


def _check_certified_and_least(sigma: float, rtol: float) -> None:
    """The full query meets the target at ``sigma`` and not a little below it."""
    assert account(_dpsgd(sigma), delta=DELTA).bound.epsilon <= TARGET
    assert account(_dpsgd(sigma / (1 + 2 * rtol)), delta=DELTA).bound.epsilon > TARGET


def test_the_estimate_lies_near_the_full_querys_crossing() -> None:
    found = estimate_crossing(_dpsgd, None, TARGET, DELTA, (1e-2, 1e3))
    assert found is not None and found.slope < 0
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA)
    assert abs(math.log(found.sigma / result.noise_multiplier)) < 0.05


def test_calibration_from_the_estimate_is_certified_by_the_full_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counted(monkeypatch)
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA)
    assert result.epsilon <= TARGET
    _check_certified_and_least(result.noise_multiplier, 1e-4)
    assert len(calls) <= 6  # the full query, from the estimate; the old search made ~10


@pytest.mark.parametrize("wrong", [Estimate(0.3, -0.5), Estimate(40.0, -20.0), Estimate(1e4, -1.0)])
def test_a_wrong_estimate_costs_calls_not_correctness(
    monkeypatch: pytest.MonkeyPatch, wrong: Estimate
) -> None:
    monkeypatch.setattr(calibrate, "estimate_crossing", lambda *args: wrong)
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA, rtol=1e-3)
    _check_certified_and_least(result.noise_multiplier, 1e-3)


def test_no_estimate_without_a_pld_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("estimated")

    monkeypatch.setattr(calibrate, "estimate_crossing", refuse)
    made = calibrate_noise_multiplier(GaussianEvent, None, 1.0, 1e-5, backends=("closed_form",))
    assert made.epsilon <= 1.0


def test_a_slope_prior_sets_the_step_from_one_evaluation() -> None:
    # epsilon = 2 / sigma^4 crosses 1 at 2^(1/4); from sigma = 1 with the true slope
    search = Search(1e-2, 1e3, 1e-4, slope=-4.0)
    search.add(1.0, gap(2.0, 1.0))
    assert search.candidate() == pytest.approx(2**0.25, rel=1e-3)


def test_the_plain_stage_reads_the_full_querys_upper_bound() -> None:
    # one pass of the full query: its upper bound is the plain tilted composition's
    event = _dpsgd(1.4148)
    full = account(event, delta=DELTA, backends=("closed_form", "pld")).bound.epsilon
    assert calibrate_estimate._plain(event, None, DELTA) == full


def test_a_precise_estimate_leaves_two_full_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    found = estimate_crossing(_dpsgd, None, TARGET, DELTA, (1e-2, 1e3))
    assert found is not None and found.precise
    calls = _counted(monkeypatch)
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA)
    assert len(calls) == 2  # one each side of the crossing, within the tolerance
    assert calls[0] == result.noise_multiplier <= calls[1] * (1 + 1e-4)
    _check_certified_and_least(result.noise_multiplier, 1e-4)


def test_an_imprecise_estimate_is_evaluated_where_it_lies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "estimate_crossing", lambda *args: Estimate(1.4, -7.0))
    calls = _counted(monkeypatch)
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA)
    assert calls[0] == 1.4
    _check_certified_and_least(result.noise_multiplier, 1e-4)


def test_a_failing_stage_leaves_the_estimate_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> float:
        raise BoundUnavailable("pld", "refused")

    monkeypatch.setitem(calibrate_estimate._STAGES, "plain", refuse)
    found = estimate_crossing(_dpsgd, None, TARGET, DELTA, (1e-2, 1e3))
    assert found is not None and not found.precise  # the coarse grid's crossing
    result = calibrate_noise_multiplier(_dpsgd, None, TARGET, DELTA)
    _check_certified_and_least(result.noise_multiplier, 1e-4)

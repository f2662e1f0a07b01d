"""The standard battery: the reported epsilon is never below the truth and within 1% (+0.01).

"Truth" is known exactly for Gaussians (closed form). Elsewhere it lies inside the certified
bracket [best lower bound over all backends, reported upper bound]; the upper bound must be
within 1% (+0.01) of the lower end of that bracket, or, where our lower bound is loose, of an
independent tight accountant's estimate (dp-accounting's PLD, whose pessimistic estimate is
itself an upper bound, so the truth is at most that).
"""

from __future__ import annotations

import math

import pytest
from scipy import optimize, special

from dpledger.accountant.select import Selection, account
from dpledger.core.adjacency import ROW_REPLACE_ONE, Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)


def _gaussian_delta(mu: float, eps: float) -> float:
    a = -eps / mu + mu / 2
    return float(math.exp(special.log_ndtr(a)) - math.exp(eps + special.log_ndtr(a - mu)))


def exact_gaussian_epsilon(sigma: float, k: int, delta: float) -> float:
    mu = math.sqrt(k) / sigma
    if _gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    return float(optimize.brentq(lambda e: _gaussian_delta(mu, e) - delta, 0.0, 1e7, xtol=1e-13))


def _check(selection: Selection, truth_at_most: float | None = None) -> None:
    bound = selection.bound
    upper = bound.epsilon
    assert math.isfinite(upper) and not math.isnan(upper)
    lower = max(c.epsilon_lower for c in selection.candidates)  # type: ignore[union-attr]
    assert lower <= upper
    anchor = lower if truth_at_most is None else max(lower, min(truth_at_most, upper))
    assert upper <= anchor * 1.01 + 0.01, (
        f"reported {upper} is not within 1% of the certified/independent anchor {anchor} "
        f"(lower {lower}, reference {truth_at_most})"
    )


@pytest.mark.parametrize("sigma", [0.3, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("k", [1, 100, 10_000])
@pytest.mark.parametrize("delta", [1e-3, 1e-10])
def test_gaussian_battery_exact(sigma: float, k: int, delta: float) -> None:
    sel = account(SelfComposedEvent(GaussianEvent(sigma), k), delta=delta)
    truth = exact_gaussian_epsilon(sigma, k, delta)
    assert sel.bound.epsilon >= truth - 1e-9
    assert sel.bound.epsilon <= truth * 1.01 + 0.01


def _dp_accounting_pld(event: Event, delta: float, replace_one: bool = False) -> float | None:
    """dp-accounting's PLD estimate (pessimistic), or None when it is not installed."""
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant
    except ImportError:
        return None
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if replace_one
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    acc = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=1e-4)
    dpa_event = _to_dpa(event)
    if not acc.supports(dpa_event):
        return None
    acc.compose(dpa_event)
    return float(acc.get_epsilon(delta))


def _to_dpa(event: Event):  # type: ignore[no-untyped-def]
    import dp_accounting

    if isinstance(event, GaussianEvent):
        return dp_accounting.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return dp_accounting.LaplaceDpEvent(event.noise_multiplier)
    if isinstance(event, PoissonSampledEvent):
        return dp_accounting.PoissonSampledDpEvent(
            event.sampling_probability, _to_dpa(event.event)
        )
    if isinstance(event, SampledWithoutReplacementEvent):
        return dp_accounting.SampledWithoutReplacementDpEvent(
            event.source_size, event.sample_size, _to_dpa(event.event)
        )
    if isinstance(event, SelfComposedEvent):
        return dp_accounting.SelfComposedDpEvent(_to_dpa(event.event), event.count)
    if isinstance(event, ComposedEvent):
        return dp_accounting.ComposedDpEvent([_to_dpa(e) for e in event.events])
    raise TypeError(event)


SUBSAMPLED = [
    (0.5, 0.1, 10, 1e-5),
    (0.8, 0.05, 100, 1e-3),
    (1.0, 0.01, 1000, 1e-5),
    (1.1, 256 / 60000, 1000, 1e-10),
    (2.0, 1e-3, 10_000, 1e-5),
    (5.0, 1e-4, 1000, 1e-6),
]


@pytest.mark.parametrize(("sigma", "q", "steps", "delta"), SUBSAMPLED)
def test_poisson_subsampled_gaussian_battery(
    sigma: float, q: float, steps: int, delta: float
) -> None:
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    sel = account(event, delta=delta)
    _check(sel, _dp_accounting_pld(event, delta))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sigma", "q", "steps", "delta"), [(3.0, 1e-3, 100_000, 1e-5), (0.5, 1e-4, 100_000, 1e-8)]
)
def test_poisson_subsampled_gaussian_battery_long(
    sigma: float, q: float, steps: int, delta: float
) -> None:
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    _check(account(event, delta=delta), _dp_accounting_pld(event, delta))


@pytest.mark.parametrize(("b", "k"), [(0.5, 1), (2.0, 10), (10.0, 100)])
@pytest.mark.parametrize("delta", [1e-3, 1e-8])
def test_laplace_battery(b: float, k: int, delta: float) -> None:
    event = SelfComposedEvent(LaplaceEvent(b), k)
    _check(account(event, delta=delta), _dp_accounting_pld(event, delta))


@pytest.mark.parametrize(("eps0", "k"), [(0.05, 10), (1.0, 10), (0.1, 100), (4.0, 20)])
def test_pure_dp_battery(eps0: float, k: int) -> None:
    sel = account(SelfComposedEvent(PureDPEvent(eps0), k), delta=1e-6)
    _check(sel)
    assert sel.bound.epsilon <= k * eps0


def test_heterogeneous_mix_battery() -> None:
    event = ComposedEvent(
        (
            GaussianEvent(5.0),
            SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000),
            LaplaceEvent(10.0),
        )
    )
    _check(account(event, delta=1e-5), _dp_accounting_pld(event, 1e-5))


def test_replace_one_without_replacement_battery() -> None:
    """No tight reference exists for sampling without replacement: the profile is a bound
    (Balle et al. 2018, Thm. 10), so the bracket is wider than 1%. It must stay certified,
    beat dp-accounting's RDP analysis of the same event, and stay within 5% of our lower bound."""
    event = SelfComposedEvent(SampledWithoutReplacementEvent(60_000, 256, GaussianEvent(1.1)), 500)
    sel = account(event, ROW_REPLACE_ONE, delta=1e-5)
    lower = max(c.epsilon_lower for c in sel.candidates)  # type: ignore[union-attr]
    assert lower <= sel.bound.epsilon <= lower * 1.05
    try:
        import dp_accounting
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        return
    rdp = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    # dp-accounting states the noise relative to the replace-one sensitivity (2C): halve it
    halved = SelfComposedEvent(
        SampledWithoutReplacementEvent(60_000, 256, GaussianEvent(0.55)), 500
    )
    rdp.compose(_to_dpa(halved))
    assert sel.bound.epsilon <= rdp.get_epsilon(1e-5)


def test_replace_one_gaussian_doubles_sensitivity() -> None:
    sel = account(SelfComposedEvent(GaussianEvent(2.0), 10), ROW_REPLACE_ONE, delta=1e-6)
    truth = exact_gaussian_epsilon(1.0, 10, 1e-6)  # sensitivity 2: multiplier halves
    assert truth - 1e-9 <= sel.bound.epsilon <= truth * 1.01 + 0.01


@pytest.mark.parametrize("epsilon_scale", [0.05, 80.0])
def test_epsilon_extremes(epsilon_scale: float) -> None:
    # a Gaussian whose epsilon at delta = 1e-6 is about epsilon_scale
    sigma = optimize.brentq(
        lambda s: exact_gaussian_epsilon(s, 1, 1e-6) - epsilon_scale, 0.02, 500.0, xtol=1e-12
    )
    sel = account(GaussianEvent(sigma), Adjacency(), delta=1e-6)
    assert epsilon_scale - 1e-6 <= sel.bound.epsilon <= epsilon_scale * 1.01 + 0.01

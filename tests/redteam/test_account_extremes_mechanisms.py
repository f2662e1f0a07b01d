"""The bracket :func:`~dpledger.accountant.select.account` certifies for approximate DP, the
exponential mechanism and report-noisy-max at extreme but valid parameters, against 50-digit
references of the true (or attained) curves (``extreme_references.py``; the promise checked is
stated in ``extreme_checks.py``), and answers without foreign exceptions nor NaN wherever the
code claims support.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE, Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

from .extreme_checks import FLOOR, REL, delta_bound, epsilon_bound, sweep
from .extreme_references import (
    approx_dp_delta,
    bounded_range_attained_delta,
    bounded_range_delta,
    rr_composed_delta,
)

# -- 4. approximate DP, exponential mechanism, report-noisy-max ---------------------------------


@pytest.mark.parametrize(
    ("eps", "d", "count"),
    [
        (1e-3, 1e-300, 1),
        (1.0, 1e-12, 1),
        (20.0, 0.5, 1),
        (0.0, 0.1, 1),
        (1.0, 1e-5, 10),
        (1e-3, 1e-12, 1000),
        (5.0, 0.1, 2),
        # answered only since approximate DP composes in closed form (failure, then randomized
        # response): before, inf below delta 1.1e-16, inf for tiny eps, no backend above 500
        (0.0, 1e-300, 2),
        (1e-12, 1e-5, 2),
        (700.0, 1e-5, 1),
        (600.0, 1e-8, 3),
    ],
)
def test_approx_dp(eps: float, d: float, count: int) -> None:
    event: Event = ApproxDPEvent(eps, d)
    if count > 1:
        event = SelfComposedEvent(event, count)
    top = count * eps
    limit = float(approx_dp_delta(eps, d, count, 1e9))  # the mass at +infinity
    deltas = [x for x in (1e-300, 1e-12, 1e-5, 0.3) if x > limit * (1 + 1e-6)]
    sweep(
        event,
        ROW_ADD_REMOVE,
        lambda e: approx_dp_delta(eps, d, count, e),
        deltas,
        [0.0, eps, top, math.nextafter(top, 0.0), -eps, 3.0],
    )


@pytest.mark.parametrize("kind", [ExponentialMechanismEvent, ReportNoisyMaxEvent])
@pytest.mark.parametrize(
    ("eps", "count"),
    [(1e-12, 1), pytest.param(1.0, 1, marks=pytest.mark.slow), (700.0, 1), (0.5, 20)],
)
def test_claimed_curve_of_exponential_and_noisy_max(
    kind: type[ExponentialMechanismEvent | ReportNoisyMaxEvent], eps: float, count: int
) -> None:
    """Upper bounds above curves the mechanisms attain: report-noisy-max (which may use
    Laplace noise) against RR(eps), which it can attain; the exponential mechanism, whose
    losses span at most eps, against the composition of its two-point worst pairs (every one
    is attained by a two-candidate mechanism), the largest over a grid of their positions."""
    event: Event = kind(eps)
    if count > 1:
        event = SelfComposedEvent(event, count)

    def attained(e: float) -> mp.mpf:
        if kind is ReportNoisyMaxEvent:
            return rr_composed_delta(eps, count, e)
        return bounded_range_attained_delta(eps, count, e)

    problems = []
    for d in (1e-300, 1e-5, 0.3):
        up = epsilon_bound(event, ROW_ADD_REMOVE, d).epsilon
        if attained(up) > d * (1 + REL) + FLOOR:
            problems.append(f"delta {d}: epsilon {up}")
    for e in (0.0, eps, -eps):
        c = delta_bound(event, ROW_ADD_REMOVE, e)
        if attained(e) > c.delta * (1 + REL) + FLOOR:
            problems.append(f"epsilon {e}: delta {c.delta}")
    assert not problems, problems


@pytest.mark.parametrize("kind", [ExponentialMechanismEvent, ReportNoisyMaxEvent])
@pytest.mark.parametrize("eps", [1.0, 10.0])
def test_exponential_mechanism_lower_bound(kind: type[Event], eps: float) -> None:
    """The booked mechanism is eps-bounded-range, whose worst curve is
    (e^{eps/2} - e^{e/2})^2 / (e^eps - 1) (tanh(eps/4) at e = 0), below randomized response at
    eps (tanh(eps/2)): the certified lower bounds must stay below it (they were randomized
    response's, up to twice the truth)."""
    sweep(
        kind(eps),  # type: ignore[call-arg]
        ROW_ADD_REMOVE,
        lambda e: bounded_range_delta(eps, e),
        [1e-5, 0.1],
        [0.0, eps / 2, -eps / 2],
    )


# -- 5. answers where the code claims support ----------------------------------------------------


@pytest.mark.parametrize(
    ("event", "adjacency"),
    [
        (PoissonSampledEvent(1e-6, LaplaceEvent(1e-2)), ROW_ADD_REMOVE),
        (SelfComposedEvent(PoissonSampledEvent(0.5, LaplaceEvent(1e-2)), 50), ROW_ADD_REMOVE),
        (PoissonSampledEvent(0.5, GaussianEvent(0.02)), ROW_REPLACE_ONE),
        (SelfComposedEvent(PoissonSampledEvent(1e-6, GaussianEvent(1e3)), 20), ROW_REPLACE_ONE),
        (SampledWithoutReplacementEvent(10**6, 1, GaussianEvent(0.02)), ROW_REPLACE_ONE),
        (SampledWithoutReplacementEvent(10**6, 1, LaplaceEvent(0.01)), ROW_REPLACE_ONE),
        (SelfComposedEvent(ApproxDPEvent(1e-12, 1e-300), 1000), ROW_ADD_REMOVE),
        (SelfComposedEvent(ExponentialMechanismEvent(700.0), 1000), ROW_REPLACE_ONE),
    ],
    ids=[
        "plap-tiny-q",
        "plap-50",
        "ro-small-sigma",
        "ro-20",
        "swor-gauss",
        "swor-laplace",
        "approx-1000",
        "em-1000",
    ],
)
def test_no_foreign_exception_nor_nan(event: Event, adjacency: Adjacency) -> None:
    for delta, eps in ((1e-300, None), (0.5, None), (None, -700.0), (None, 0.0), (None, 1e4)):
        try:
            b = account(event, adjacency, delta=delta, epsilon=eps).bound
        except DPLedgerError:
            continue
        values = [b.epsilon, b.delta, getattr(b, "epsilon_lower", 0.0)]
        values.append(getattr(b, "delta_lower", 0.0))
        assert not any(math.isnan(v) for v in values), (delta, eps, b)

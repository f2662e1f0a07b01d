"""Private partition selection and contribution bounds in the kernel: the thresholds against
their closed forms and an independent normal law, the truncated geometric rule against the
paper's closed form (exact arithmetic), the event's checks and its dominating events."""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpledger.core.errors import InvalidParameterError
from dpledger.core.event_trees import canonical
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PartitionSelectionEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    event_from_dict,
)
from dpledger.core.partition_events import dominating_event, partitioned_noise_event
from dpledger.core.partition_selection import (
    contribution_sensitivity,
    key_budget,
    per_key_budget,
    release_probability,
    selection_parameters,
)


def _split(share: float, k: int) -> float:
    """``1 - (1 - share (1 - 1e-6))^(1/k)`` in 40-digit arithmetic."""
    mpmath.mp.dps = 40
    one = mpmath.mpf(1)
    return float(one - (one - mpmath.mpf(share) * (one - mpmath.mpf("1e-6"))) ** (one / k))


CASES = [(1.0, 1e-5, 1), (1.0, 1e-5, 3), (0.5, 1e-8, 10), (3.0, 1e-3, 2), (0.1, 1e-6, 5)]


@pytest.mark.parametrize(("eps", "delta", "k"), CASES)
def test_laplace_threshold_is_the_closed_form(eps: float, delta: float, k: int) -> None:
    b, t = selection_parameters("laplace", eps, delta, k)
    d_k = _split(delta, k)
    assert b == pytest.approx(k / eps, rel=1e-15)
    assert t == pytest.approx(1 + (k / eps) * math.log(1 / (2 * d_k)), rel=1e-9)
    # a key held by one user is released with probability d_k: 1 + Lap(b) >= t
    assert release_probability("laplace", eps, delta, k, 1) == pytest.approx(d_k, rel=1e-9)
    assert 1 - (1 - d_k) ** k <= delta


@pytest.mark.parametrize(("eps", "delta", "k"), CASES)
def test_gaussian_noise_and_threshold_split_delta_in_half(eps: float, delta: float, k: int) -> None:
    sigma, t = selection_parameters("gaussian", eps, delta, k)
    mu = math.sqrt(k) / sigma  # k keys of sensitivity 1: L2 sensitivity sqrt(k)
    exact = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert exact <= delta / 2
    assert exact == pytest.approx(delta / 2, rel=2e-6)  # one part in 1e6 inside
    d_k = _split(delta / 2, k)
    assert norm.sf((t - 1) / sigma) == pytest.approx(d_k, rel=1e-8)


def _paper_pi(eps: float, delta: float, n: int) -> list[mpmath.mpf]:
    """Desfontaines et al. 2022, Thm. 1, in exact arithmetic: the geometric phase up to n*,
    then the complementary phase toward its fixed point."""
    e, d = mpmath.mpf(eps), mpmath.mpf(delta)
    grow = mpmath.e**e
    pi = [mpmath.mpf(0)]
    while len(pi) <= n:
        m = len(pi)
        first = (grow**m - 1) / (grow - 1) * d
        if first <= 1 - (1 - pi[-1] - d) / grow:
            pi.append(first)
            continue
        star = m - 1
        fixed = d / (grow - 1)
        while len(pi) <= n:
            j = len(pi) - star
            pi.append(min(mpmath.mpf(1), 1 + fixed - (1 - pi[star] + fixed) / grow**j))
    return pi


@pytest.mark.parametrize(("eps", "delta", "k"), CASES[:4])
def test_truncated_geometric_is_the_papers_rule_and_stays_in_budget(
    eps: float, delta: float, k: int
) -> None:
    mpmath.mp.dps = 40
    e, d = key_budget("truncated_geometric", eps, delta, k)
    _, n_max = selection_parameters("truncated_geometric", eps, delta, k)
    probs = [
        release_probability("truncated_geometric", eps, delta, k, n) for n in range(int(n_max) + 3)
    ]
    assert probs[0] == 0.0 and probs[-1] == 1.0
    rule = _paper_pi(e, d - 4e-15 * (1 + math.exp(e)), len(probs))
    for n in range(1, len(probs)):
        assert float(rule[n]) == pytest.approx(probs[n], rel=1e-9, abs=1e-15)
        # the executed floats satisfy both DP constraints at (e, d), exactly
        a, b = mpmath.mpf(probs[n]), mpmath.mpf(probs[n - 1])
        assert a <= mpmath.e ** mpmath.mpf(e) * b + mpmath.mpf(d)
        assert 1 - b <= mpmath.e ** mpmath.mpf(e) * (1 - a) + mpmath.mpf(d)
    assert int(n_max) == len(probs) - 3 and probs[int(n_max) - 1] < 1.0


def test_per_key_budget_composes_to_the_budget() -> None:
    e, d = per_key_budget(1.0, 1e-5, 4)
    assert e == 0.25
    assert 1 - (1 - d) ** 4 == pytest.approx(1e-5, rel=1e-12)
    assert per_key_budget(0.7, 0.01, 1) == (0.7, 0.01)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["laplace", "gaussian", "truncated_geometric"]),
    st.floats(0.05, 5.0),
    st.floats(1e-9, 0.1),
    st.integers(1, 20),
)
def test_release_probability_rises_with_the_count_from_zero(
    mechanism: str, eps: float, delta: float, k: int
) -> None:
    probs = [release_probability(mechanism, eps, delta, k, n) for n in range(0, 60, 3)]
    assert probs[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(probs))
    _, d = key_budget(mechanism, eps, delta, k)
    assert release_probability(mechanism, eps, delta, k, 1) <= d * (1 + 1e-9)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mechanism": "exponential", "epsilon": 1.0, "delta": 1e-5}, "mechanism"),
        ({"mechanism": "laplace", "epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"mechanism": "laplace", "epsilon": 0.0, "delta": 1e-5}, "epsilon"),
        (
            {"mechanism": "laplace", "epsilon": 1.0, "delta": 1e-5, "max_partitions": 0},
            "max_partitions",
        ),
    ],
)
def test_bad_parameters_name_their_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        PartitionSelectionEvent(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_the_event_reads_back_from_its_table() -> None:
    event = PartitionSelectionEvent("gaussian", 1.0, 1e-6, 4)
    assert event_from_dict(event.to_dict()) == event
    table = {
        "kind": "partition_selection",
        "mechanism": "laplace",
        "epsilon": 1,
        "delta": 1e-5,
        "max_partitions": 3.0,
    }
    assert event_from_dict(table) == PartitionSelectionEvent("laplace", 1.0, 1e-5, 3)


def test_canonical_states_the_dominating_events_everywhere_in_a_tree() -> None:
    sel = PartitionSelectionEvent("laplace", 1.0, 1e-5, 3)
    tree = ComposedEvent((GaussianEvent(2.0), SelfComposedEvent(sel, 2)))
    out = canonical(tree)
    assert isinstance(out, ComposedEvent)
    assert out.events[0] == GaussianEvent(2.0)
    inner = out.events[1]
    assert isinstance(inner, SelfComposedEvent) and inner.count == 2
    assert inner.event == dominating_event(sel)
    noise, one_user = inner.event.children()
    assert noise == SelfComposedEvent(LaplaceEvent(3.0), 3)
    assert isinstance(one_user, TabulatedProfileEvent) and one_user.epsilons == (0.0,)
    p = release_probability("laplace", 1.0, 1e-5, 3, 1)
    assert one_user.deltas[0] == pytest.approx(1 - (1 - p) ** 3, rel=1e-9)
    assert one_user.deltas[0] >= 1 - (1 - p) ** 3
    assert canonical(GaussianEvent(1.0)) == GaussianEvent(1.0)


def test_truncated_geometric_is_dominated_by_k_approximate_dp_pairs() -> None:
    event = dominating_event(PartitionSelectionEvent("truncated_geometric", 2.0, 1e-6, 4))
    assert isinstance(event, SelfComposedEvent) and event.count == 4
    table = event.event
    assert isinstance(table, TabulatedProfileEvent)
    e, d = key_budget("truncated_geometric", 2.0, 1e-6, 4)
    assert table.epsilons == (-e, e)
    assert table.deltas[0] >= -math.expm1(-e) and table.deltas[1] >= d


def test_contribution_sensitivity_is_sqrt_l0_or_l0_times_linf_c() -> None:
    assert contribution_sensitivity(4, 2, 1.5, "l2") == pytest.approx(2 * 2 * 1.5, rel=1e-15)
    assert contribution_sensitivity(4, 2, 1.5, "l2") >= math.sqrt(4) * 2 * 1.5
    assert contribution_sensitivity(5, 3, 0.5, "l1") >= 5 * 3 * 0.5
    assert contribution_sensitivity(5, 3, 0.5, "l1") == pytest.approx(7.5, rel=1e-15)
    with pytest.raises(InvalidParameterError, match="norm"):
        contribution_sensitivity(1, 1, 1.0, "linf")
    with pytest.raises(InvalidParameterError) as info:
        contribution_sensitivity(0, 1, 1.0, "l2")
    assert info.value.field == "max_partitions"


def test_partitioned_noise_event_is_l0_releases_of_the_per_key_sensitivity() -> None:
    event = partitioned_noise_event("laplace", 6.0, 5, 2, 1.5)
    assert isinstance(event, SelfComposedEvent) and event.count == 5
    assert isinstance(event.event, LaplaceEvent)
    assert event.event.noise_multiplier == pytest.approx(2.0, rel=1e-15)
    assert event.event.noise_multiplier <= 2.0
    gauss = partitioned_noise_event("gaussian", 3.0, 4, 1, 1.0)
    assert isinstance(gauss, SelfComposedEvent) and gauss.count == 4
    assert isinstance(gauss.event, GaussianEvent)
    assert 3.0 * (1 - 1e-15) <= gauss.event.noise_multiplier < 3.0
    with pytest.raises(InvalidParameterError) as info:
        partitioned_noise_event("gaussian", -1.0, 4, 1, 1.0)
    assert info.value.field == "noise_scale"

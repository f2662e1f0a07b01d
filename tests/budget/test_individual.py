"""Per-record accounting (the individual Rényi filter, an extension) against its theorem."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.budget import rules
from dpledger.budget.individual import IndividualRenyiFilter, gaussian_costs
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent

ORDERS = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
EPS, DELTA = 1.0, 1e-6


def _budgets() -> list[float]:
    return [EPS - math.log(len(ORDERS) / DELTA) / (a - 1) for a in ORDERS]


def test_each_record_takes_the_steps_its_own_norm_allows() -> None:
    """Constant norms g_i: record i takes n_i steps, the largest n with
    n a g_i^2 / (2 s^2) <= B(a) at some order (solved here in closed form)."""
    norms, s = np.array([1.0, 0.5, 0.25, 0.0]), 30.0
    filt = IndividualRenyiFilter(4, EPS, DELTA, ORDERS)
    for _ in range(20000):
        if not filt.step(gaussian_costs(norms, s, ORDERS))[:3].any():
            break
    for i, g in enumerate(norms[:3]):
        expected = max(
            math.floor(b / (a * g * g / (2 * s * s)))
            for a, b in zip(ORDERS, _budgets(), strict=True)
        )
        assert filt.steps[i] == expected
    assert not filt.halted[3] and filt.spent(3) == 0.0


def test_records_at_the_clipping_bound_halt_with_the_stores_renyi_filter() -> None:
    """All norms at the bound C: the same count as the store's rule for a Gaussian of noise
    multiplier s / C."""
    s, c = 30.0, 1.0
    params = {"orders": ORDERS}
    state = rules.initial_state("renyi", params)
    cost = rules.charge("renyi", params, GaussianEvent(s / c), "add_remove")
    while (decision := rules.decide("renyi", (EPS, DELTA), params, state, cost)).fits:
        state = decision.state
    filt = IndividualRenyiFilter(3, EPS, DELTA, ORDERS)
    while filt.step(gaussian_costs([c, c, c], s, ORDERS)).any():
        pass
    assert list(filt.steps) == [state["count"]] * 3


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_no_record_ever_passes_its_budget_whatever_the_norms(data: st.DataObject) -> None:
    """Norms chosen adaptively (larger for records that spent little): every record's charged
    sums keep some order within B(a); a halted record is never charged again; its certified
    loss so far stays within the total and never decreases."""
    n = 5
    filt = IndividualRenyiFilter(n, EPS, DELTA, ORDERS)
    before = np.zeros(n)
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        spent = np.array([filt.spent(i) for i in range(n)])
        assert np.all(spent >= before) and np.all(spent <= EPS)
        before = spent
        norms = [data.draw(st.floats(0.0, 3.0 if x < 0.3 else 0.5), label="g") for x in spent]
        halted = filt.halted.copy()
        rdp = filt.rdp.copy()
        mask = filt.step(gaussian_costs(norms, 10.0, ORDERS))
        assert not np.any(mask & halted)
        assert np.array_equal(filt.rdp[~mask], rdp[~mask])
        assert np.all(np.any(filt.rdp <= np.asarray(_budgets()) + 1e-12, axis=1))


def test_bad_input_is_refused() -> None:
    with pytest.raises(InvalidParameterError):
        IndividualRenyiFilter(0, EPS, DELTA)
    with pytest.raises(InvalidParameterError):
        IndividualRenyiFilter(2, EPS, 2.0)
    filt = IndividualRenyiFilter(2, EPS, DELTA, ORDERS)
    with pytest.raises(InvalidParameterError):
        filt.step(np.zeros((3, len(ORDERS))))
    with pytest.raises(InvalidParameterError):
        gaussian_costs([-1.0], 1.0, ORDERS)

"""The lower curves of leaf events are curves their mechanisms attain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE, Adjacency
from dpledger.core.events import (
    Event,
    ExponentialMechanismEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)


@pytest.mark.parametrize("kind", [ExponentialMechanismEvent, ReportNoisyMaxEvent])
@pytest.mark.parametrize("adjacency", [ROW_ADD_REMOVE, ROW_REPLACE_ONE])
def test_exponential_mechanism_lower_curve_is_randomized_response_at_half(
    kind: type[Event], adjacency: Adjacency
) -> None:
    # two candidates scored (s/2, -s/2) and (-s/2, s/2): losses +-eps/2, so delta(0) is
    # tanh(eps/4), the most an eps-bounded-range mechanism reaches (not tanh(eps/2))
    d = leaf_profiles(kind(1.0), adjacency)  # type: ignore[call-arg]
    at = np.array([0.0, 0.25, 0.5])
    assert d.lower_remove(at)[0] == pytest.approx(math.tanh(0.25), rel=1e-9)
    half = -math.expm1(0.25 - 0.5) / (1 + math.exp(-0.5))  # RR(1/2) at eps = 1/4
    assert d.lower_add(at)[1] == pytest.approx(half, rel=1e-9)
    assert d.lower_remove(at)[2] == 0.0
    # the upper curve stays randomized response at eps
    assert d.remove(at)[0] == pytest.approx(math.tanh(0.5), rel=1e-9)


def test_sampled_exponential_mechanism_lower_curves_start_from_the_attained_base() -> None:
    em = leaf_profiles(PoissonSampledEvent(0.1, ExponentialMechanismEvent(1.0)), ROW_ADD_REMOVE)
    rr = leaf_profiles(PoissonSampledEvent(0.1, PureDPEvent(0.5)), ROW_ADD_REMOVE)
    at = np.linspace(-0.05, 0.2, 11)
    np.testing.assert_allclose(em.lower_remove(at), rr.lower_remove(at), rtol=1e-9)
    np.testing.assert_allclose(em.lower_add(at), rr.lower_add(at), rtol=1e-9)
    wor = leaf_profiles(
        SampledWithoutReplacementEvent(100, 10, ExponentialMechanismEvent(1.0)), ROW_REPLACE_ONE
    )
    assert float(wor.lower_remove(np.array([0.0]))[0]) == pytest.approx(
        0.1 * math.tanh(0.25), rel=1e-9
    )


@pytest.mark.parametrize("event", [PureDPEvent(1.0), LaplaceEvent(2.0)])
def test_attained_bases_share_the_upper_curve(event: Event) -> None:
    d = leaf_profiles(event, ROW_ADD_REMOVE)
    assert d.lower_remove is d.remove and d.lower_add is d.add

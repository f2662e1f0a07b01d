"""Declared pure-DP events, metadata and the run function."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import PureDPEvent, SelfComposedEvent
from dpledger.plugins.shk import declare_shk_release, run_shk, shk_release_metadata

PARAMS = {"t": 7.0, "beta": 5.0, "sensitivity": 0.04, "assumption": "A1_prime", "loss_range": 2.0}


def test_declared_epsilon_is_theorem3() -> None:
    ev = declare_shk_release(PARAMS)
    assert isinstance(ev, PureDPEvent)
    # B = β·loss_range = 10 for a uniform ρ_0; Δ_osc = β·(4/n) with n = 100
    assert ev.epsilon == pytest.approx(0.2 + 20.0 * math.exp(-7.0), rel=1e-14)
    assert ev.epsilon >= 0.2 + 20.0 * math.exp(-7.0)
    a1 = declare_shk_release({**PARAMS, "assumption": "A1", "sensitivity": 0.02})
    assert a1.epsilon == pytest.approx(ev.epsilon, rel=1e-14)
    vm = declare_shk_release({**PARAMS, "rho0_kappa": 0.5})
    assert vm.epsilon == pytest.approx(0.2 + 22.0 * math.exp(-7.0), rel=1e-14)  # paper's 0.2201
    assert round(vm.epsilon, 4) == 0.2201


def test_metadata() -> None:
    md = shk_release_metadata(PARAMS)
    assert md["tier"].startswith("exact-flow theorem")
    assert md["B"] == 10.0
    assert md["epsilon_floor"] == pytest.approx(0.2)
    assert any("A1′" in a for a in md["assumptions"])


def test_run_shk_samples_and_event() -> None:
    data = list(0.25 + 0.1 * np.linspace(-1, 1, 50))
    params = {**PARAMS, "sensitivity": 0.08, "data": data, "n_cells": 64, "n_samples": 4000}
    out = run_shk(params, np.random.default_rng(3))
    assert out.samples.shape == (4000,)
    assert np.all((out.samples >= -math.pi) & (out.samples < math.pi))
    assert abs(np.angle(np.mean(np.exp(1j * out.samples))) - 0.25) < 0.05
    assert isinstance(out.event, SelfComposedEvent) and out.event.count == 4000
    again = run_shk(params, np.random.default_rng(3))
    assert np.array_equal(out.samples, again.samples)


def test_invalid_params() -> None:
    with pytest.raises(InvalidParameterError, match=r"^beta:"):
        declare_shk_release({**PARAMS, "beta": -1.0})
    with pytest.raises(InvalidParameterError, match=r"^t:"):
        declare_shk_release({**PARAMS, "t": -0.1})
    with pytest.raises(InvalidParameterError, match=r"^assumption:"):
        declare_shk_release({**PARAMS, "assumption": "A2"})
    with pytest.raises(InvalidParameterError, match=r"^sensitivity:"):
        declare_shk_release({k: v for k, v in PARAMS.items() if k != "sensitivity"})
    with pytest.raises(InvalidParameterError, match=r"^data:"):
        run_shk({**PARAMS, "data": [0.1, float("inf")]}, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match=r"^params:"):
        declare_shk_release({**PARAMS, "bogus": 1})

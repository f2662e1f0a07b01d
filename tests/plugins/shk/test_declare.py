"""Parameter validation and the public certificate summary."""

from __future__ import annotations

import math

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.shk import certificate_summary, declare_shk_release

PARAMS = {"t": 7.0, "beta": 5.0, "n": 100}


def test_summary_terms_and_tier() -> None:
    md = certificate_summary(PARAMS)
    assert md["tier"] == (
        "exact-flow theorem; released sample from the finite-volume grid solver (approximation)"
    )
    assert md["B"] == pytest.approx(10.0, rel=1e-14)  # uniform ρ_0: B = β·loss_range
    assert md["epsilon_floor"] == pytest.approx(0.2, rel=1e-14)  # Δ_osc = 2β·2/n
    assert md["delta_pot"] == pytest.approx(0.1, rel=1e-14)
    assert md["pure_epsilon"] >= 0.2 + 20.0 * math.exp(-7.0)
    assert md["certificate"] == "pure" and "kl" not in md
    assert any("A1′" in a for a in md["assumptions"])
    assert md["epsilon"] == md["pure_epsilon"]
    assert any("semi-discrete flow" in a for a in md["assumptions"])
    particles = certificate_summary({**PARAMS, "solver": "particles"})
    assert particles["certificate"] == "none" and particles["epsilon"] == math.inf
    assert particles["tier"].startswith("no privacy guarantee; ")
    assert "pure_epsilon" not in particles  # no theorem number is shown for an uncovered law


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"beta": -1.0}, "beta"),
        ({"beta": math.nan}, "beta"),
        ({"t": -0.1}, "t"),
        ({"t": "7"}, "t"),
        ({"n": 2.5}, "n"),
        ({"rho0_kappa": -1.0}, "rho0_kappa"),
        ({"certificate": "tighter", "approx_epsilon": 0.1}, "target_delta"),
        ({"certificate": "kl"}, "approx_epsilon"),
        (
            {"loss": "grid", "loss_range": 1.0, "certificate": "kl", "approx_epsilon": 0.1},
            "grad_sensitivity",
        ),
        ({"bogus": 1}, "shk.bogus"),
        ({"target_delta": 1.5}, "target_delta"),
    ],
)
def test_invalid_params_name_the_field(override: dict, field: str) -> None:
    with pytest.raises(InvalidParameterError, match=rf"^{field}:"):
        declare_shk_release({**PARAMS, **override})


def test_missing_required_key() -> None:
    with pytest.raises(InvalidParameterError, match=r"^n:.*missing"):
        declare_shk_release({"t": 1.0, "beta": 1.0})


def test_explicit_sensitivity_params_match_the_method_params() -> None:
    from dpledger.plugins.shk.declare import SHKParams, release_epsilon
    from dpledger.plugins.shk.events import TimeProfiledPureDPEvent

    explicit = SHKParams(t=7.0, beta=5.0, sensitivity=0.04, rho0_kappa=0.5)
    ev = declare_shk_release(explicit)
    assert isinstance(ev, TimeProfiledPureDPEvent)
    other = declare_shk_release({**PARAMS, "rho0_kappa": 0.5})  # 4/n = 0.04, B = 11
    assert isinstance(other, TimeProfiledPureDPEvent)
    assert ev.floor_epsilon == pytest.approx(other.floor_epsilon, rel=1e-15)
    assert ev.transient_epsilon == pytest.approx(other.transient_epsilon, rel=1e-15)
    assert release_epsilon(explicit) == ev.epsilon
    a1 = SHKParams(t=3.0, beta=2.0, sensitivity=0.1, assumption="A1", loss_range=1.0)
    assert release_epsilon(a1) == pytest.approx(0.4 + 4.0 * math.exp(-3.0), rel=1e-14)
    with pytest.raises(InvalidParameterError, match=r"^assumption:"):
        SHKParams(t=1.0, beta=1.0, sensitivity=0.1, assumption="A2")
    with pytest.raises(InvalidParameterError, match=r"^t:"):
        SHKParams(t=-1.0, beta=1.0, sensitivity=0.1)

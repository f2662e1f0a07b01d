"""Components whose privacy loss passes e^eps's double range (one step's loss above ~700).

Tiny noise makes a single subsampled step lose hundreds or thousands of nats. The PLD grid reaches
such losses in extended precision, and the curves are evaluated in log space there; every bracket
is checked against 60-digit arithmetic (one release) or an importance-sampling estimate of
delta at both of its ends (compositions).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.pld_engine import EXTENDED_ABOVE, DiscretePLD, discretise
from dpledger.accountant.profiles import (
    Profile,
    discrete_delta,
    gaussian_profile,
    poisson_remove,
)
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE, Adjacency
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.proofs_checks.poisson_subsampling.check_poisson_code import replace_one_mpmath

from .importance_reference import heavy_step_mean, remove_direction_delta

DELTA = 1e-5


def _remove_mpmath(a: float, q: float, eps: float) -> float:
    """delta(eps) of (1 - q) N(0) + q N(a) against N(0), in 60-digit arithmetic (the loss
    log(1 - q + q e^{a x - a^2/2}) is increasing in x, so the optimal event is x > x*)."""
    with mp.workdps(60):
        am, qm, em = mp.mpf(a), mp.mpf(q), mp.mpf(eps)
        x = (mp.log((mp.e**em - (1 - qm)) / qm) + am * am / 2) / am
        tail = lambda z: mp.ncdf(-z)  # noqa: E731
        return float((1 - qm) * tail(x) + qm * tail(x - am) - mp.e**em * tail(x))


def _bracket(event: Event, adjacency: Adjacency) -> tuple[float, float, str]:
    bound = account(event, delta=DELTA, adjacency=adjacency).bound
    return bound.epsilon_lower, bound.epsilon, bound.method  # type: ignore[union-attr]


def _one_step(sigma: float, q: float) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), 1)


@pytest.mark.parametrize(("sigma", "q"), [(0.04, 0.5), (0.02, 0.1), (0.045, 0.2)])
def test_replace_one_single_step_bracket_holds_the_exact_root(sigma: float, q: float) -> None:
    """sigma = 0.04, q = 0.5 used to be reported at 355.59 against the true 414.26: the curve
    returned 0 for 354 < eps < 700 (b^2 overflowed)."""
    lo, up, method = _bracket(_one_step(sigma, q), ROW_REPLACE_ONE)
    assert method == "pld"
    assert replace_one_mpmath(1 / sigma, q, lo) >= DELTA * (1 - 1e-9)
    assert replace_one_mpmath(1 / sigma, q, up) <= DELTA * (1 + 1e-9)
    assert up <= lo * 1.001


@pytest.mark.parametrize(
    ("sigma", "q", "truth"), [(0.02, 0.1, 1432.683792558), (0.01, 0.5, 5409.074840046)]
)
def test_add_remove_single_step_beyond_double_range(sigma: float, q: float, truth: float) -> None:
    """The remove direction's loss reaches a^2/2 + 10 a (1750 and 6000 here); RDP, the only
    finite answer before, was 1459 and 5462."""
    lo, up, method = _bracket(_one_step(sigma, q), ROW_ADD_REMOVE)
    assert method == "pld"
    assert _remove_mpmath(1 / sigma, q, lo) >= DELTA * (1 - 1e-9)
    assert _remove_mpmath(1 / sigma, q, up) <= DELTA * (1 + 1e-9)
    assert lo <= truth <= up <= lo * 1.001


def test_ten_heavy_steps_against_importance_sampling() -> None:
    """sigma = 0.02, q = 0.1, 10 steps: every hit loses ~1250 nats. The bracket's ends are
    checked against an unbiased importance-sampling estimate of delta (6 standard errors)."""
    sigma, q, steps = 0.02, 0.1, 10
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    lo, up, method = _bracket(event, ROW_ADD_REMOVE)
    assert method == "pld"
    assert up <= lo * 1.01
    (d_lo, se_lo), (d_up, se_up) = remove_direction_delta(
        sigma,
        q,
        steps,
        [lo, up],
        heavy_mean=heavy_step_mean(sigma, q, 1300.0),
        heavy_rate=0.65,
        samples=400_000,
        seed=3,
    )
    assert d_lo + 6 * se_lo >= DELTA
    assert d_up - 6 * se_up <= DELTA
    rdp = RDPAccountant().compose(event).get_epsilon(DELTA).epsilon
    assert up < 0.75 * rdp  # RDP: 11445


def test_replace_one_composition_is_finite_and_narrow() -> None:
    """Five replace-one steps at sigma = 0.03, q = 0.01: the bracket is certified on both sides
    (it was [0, 14444], a pure cap from a curve that underflowed at its top loss)."""
    event = SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(0.03)), 5)
    lo, up, method = _bracket(event, ROW_REPLACE_ONE)
    assert method == "pld"
    single = _bracket(_one_step(0.03, 0.01), ROW_REPLACE_ONE)
    assert single[1] < lo  # five releases lose more than one
    assert up <= lo * 1.01


@pytest.mark.parametrize("h", [0.5, 2.0])
def test_extended_chord_dominates_the_curve_beyond_700(h: float) -> None:
    """The chord built in extended precision lies above the curve at and between grid points
    past e^eps's double range."""
    profile = poisson_remove(gaussian_profile(50.0), 0.1)
    pld = discretise(profile, h)
    assert float(pld.losses[-1]) > EXTENDED_ABOVE
    assert np.all(np.isfinite(pld.masses))
    eps = np.linspace(EXTENDED_ABOVE, profile.loss_hi, 97)
    chord = discrete_delta(pld.losses, pld.masses, pld.inf_mass)(eps)
    assert np.all(chord >= profile(eps))
    # and not far above it: second order in h
    at = np.array([1400.0])
    assert chord_at(pld, at) <= float(profile(at)[0]) * (1 + h * h)


def chord_at(pld: DiscretePLD, eps: np.ndarray) -> float:
    return float(discrete_delta(pld.losses, pld.masses, pld.inf_mass)(eps)[0])


def test_curves_not_audited_beyond_700_are_lumped_there() -> None:
    """A curve that does not declare an accurate range past 700 is read only up to 700; the
    mass above goes to +infinity (its value at 700)."""
    gauss = gaussian_profile(50.0)
    unaudited = Profile(gauss.delta, gauss.loss_lo, gauss.loss_hi, True, "plain", gauss.dual)
    pld = discretise(unaudited, 1.0)
    assert float(pld.losses[-1]) <= 700.0
    assert pld.inf_mass >= float(gauss(np.array([700.0]))[0])
    assert discretise(gauss, 1.0).losses[-1] >= gauss.loss_hi

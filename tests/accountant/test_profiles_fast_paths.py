"""The fast evaluation paths of the Gaussian and Poisson-subsampled curves and of the direct
log-MGF: each point's value is the one it has alone (bit for bit), within the error the code
claims of 60-digit mpmath values, and on the claimed side."""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant import pld_discrete
from dpledger.accountant.pld_discrete import DiscretePLD
from dpledger.accountant.pld_tilt import THETAS, _log_mgf_direct
from dpledger.accountant.profiles_base import REL_MARGIN, Array, Profile
from dpledger.accountant.profiles_noise import (
    approx_dp_profile,
    gaussian_delta,
    gaussian_profile,
    laplace_delta,
    randomized_response_profile,
)
from dpledger.accountant.profiles_sampled import _zero_top, poisson_add, poisson_remove

DPS = 60
U = 2.0**-53

mus = st.floats(1e-3, 30.0)
qs = st.floats(1e-6, 0.9)
unit = st.floats(-1.0, 1.0)


def _exact_gaussian(eps: float, mu: float) -> mp.mpf:
    with mp.workdps(DPS):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)


def _exact_remove(eps: float, mu: float, q: float) -> mp.mpf:
    """(1 - q) N(0, 1) + q N(mu, 1) vs N(0, 1): the loss exceeds eps beyond x*."""
    with mp.workdps(DPS):
        e, m, p = mp.mpf(eps), mp.mpf(mu), mp.mpf(q)
        if mp.exp(e) <= 1 - p:
            return -mp.expm1(e)
        x = (mp.log((mp.exp(e) - 1 + p) / p) + m * m / 2) / m
        return (1 - p - mp.exp(e)) * mp.ncdf(-x) + p * mp.ncdf(m - x)


def _exact_add(eps: float, mu: float, q: float) -> mp.mpf:
    """N(0, 1) vs (1 - q) N(0, 1) + q N(mu, 1): the loss exceeds eps below x*."""
    with mp.workdps(DPS):
        e, m, p = mp.mpf(eps), mp.mpf(mu), mp.mpf(q)
        if mp.exp(-e) <= 1 - p:
            return mp.mpf(0)
        x = (mp.log((mp.exp(-e) - 1 + p) / p) + m * m / 2) / m
        return mp.ncdf(x) - mp.exp(e) * ((1 - p) * mp.ncdf(x) + p * mp.ncdf(x - m))


def _alone(curve: Callable[[Array], Array], eps: Array) -> Array:
    return np.array([curve(np.array([e]))[0] for e in eps])


@settings(max_examples=25, deadline=None)
@given(mu=mus, lo=st.floats(-3.0, 3.0), width=st.floats(0.01, 40.0))
def test_gaussian_grid_is_pointwise_and_within_its_margin(
    mu: float, lo: float, width: float
) -> None:
    """On a grid (the deep points one slice) each value is the one-point value, an upper bound
    within REL_MARGIN of the 60-digit curve once the profile's margin is added."""
    eps = np.linspace(lo * mu, lo * mu + width * mu, 41)
    raw = gaussian_delta(mu)(eps)
    assert np.array_equal(raw, _alone(gaussian_delta(mu), eps))
    assert np.array_equal(raw[::-1], gaussian_delta(mu)(eps[::-1].copy()))  # deep points first
    mixed = np.random.default_rng(0).permutation(eps.size)
    assert np.array_equal(raw[mixed], gaussian_delta(mu)(eps[mixed]))  # masked path
    curve = gaussian_profile(mu)(eps)
    for e, r, c in zip(eps, raw, curve, strict=True):
        truth = _exact_gaussian(float(e), mu)
        if truth < 1e-290:  # near the subnormal range: the value may underflow
            assert c <= 1e-280
            continue
        assert c >= truth
        assert abs(mp.mpf(float(r)) - truth) <= REL_MARGIN * truth


@settings(max_examples=25, deadline=None)
@given(mu=mus, q=qs, lo=unit, width=st.floats(0.01, 1.0))
def test_sampled_gaussian_curves_bracket_the_exact_curve(
    mu: float, q: float, lo: float, width: float
) -> None:
    """The remove and add curves (upper: side 1, lower: side -1) on a grid across their loss
    range: the upper profiles at or above the 60-digit curve, the lower curves at most
    REL_MARGIN above it (the discretisation of lower bounds deflates by more), both close;
    below 1e-290 (near the subnormal range) within 1e-300 of it."""
    base = gaussian_profile(mu)
    for make, exact in ((poisson_remove, _exact_remove), (poisson_add, _exact_add)):
        upper, lower = make(base, q), make(base, q, -1.0)
        top = upper.loss_hi
        eps = np.linspace(lo * top, lo * top + width * 2 * top, 21)
        up, low = upper(eps), lower.delta(eps)
        assert np.array_equal(upper.delta(eps), _alone(upper.delta, eps))
        assert np.array_equal(low, _alone(lower.delta, eps))
        for e, u, w in zip(eps, up, low, strict=True):
            truth = exact(float(e), mu, q)
            if truth < 1e-290:  # near the subnormal range: relative precision is lost
                assert abs(w - truth) <= 1e-300
                # the upper curve may keep a tiny value between the exact top of the loss
                # range and that top rounded up (an upper bound of it)
                near_top = u >= truth and abs(float(e) - top) <= 1e-14 * top
                assert abs(u - truth) <= 1e-300 or near_top
                continue
            assert u >= truth
            assert w <= truth * (1 + REL_MARGIN) + 1e-300
            if truth > 1e-250:
                assert u <= truth * (1 + 1e-8) and w >= truth * (1 - 1e-8)


def _sequential_zero_top(delta: Callable[[Array], Array], hi: float) -> float:
    """The raise of the top loss one candidate at a time (as it was written first)."""
    if float(delta(np.array([hi]))[0]) == 0.0:
        return hi
    step = max(abs(hi), 1e-300) * 2.0**-50
    for _ in range(30):
        if float(delta(np.array([hi + step]))[0]) == 0.0:
            return hi + step
        step *= 2.0
    return hi


def _base(kind: str, eps0: float) -> Profile:
    if kind == "gauss":
        return gaussian_profile(eps0)
    if kind == "laplace":
        d = laplace_delta(eps0)
        return Profile(d, -eps0, eps0, True, "laplace", d)
    if kind == "pure":
        return approx_dp_profile(eps0, 0.0)
    return randomized_response_profile(eps0, 3)


@settings(max_examples=30, deadline=None)
@given(q=qs, eps0=st.floats(0.01, 5.0), kind=st.sampled_from(["laplace", "pure", "rr", "gauss"]))
def test_zero_top_evaluates_its_candidates_at_once(q: float, eps0: float, kind: str) -> None:
    """The top loss of the sampled upper curves is the one the candidates give one by one."""
    for make in (poisson_remove, poisson_add):
        profile = make(_base(kind, eps0), q)
        for hi in (profile.loss_hi, profile.loss_hi * (1 - 1e-9), profile.loss_hi * 0.999):
            assert _zero_top(profile.delta, hi, True) == _sequential_zero_top(profile.delta, hi)


def _out_of_place(pld: DiscretePLD, lam: Array) -> Array:
    """The direct log-MGF with fresh temporaries (the arithmetic it must keep)."""
    pos = pld.masses > 0
    logp = np.log(pld.masses[pos])
    x = logp[None, :] + lam[:, None] * pld.losses[pos][None, :]
    top = x.max(axis=1)
    return np.asarray(top + np.log(np.exp(x - top[:, None]).sum(axis=1)), dtype=np.float64)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 600),
    offset=st.integers(-400, 100),
    h=st.floats(1e-4, 0.5),
    seed=st.integers(0, 2**32 - 1),
    shift=st.floats(-3.0, 3.0),
)
def test_direct_log_mgf_is_the_same_sum_and_exact_to_its_claim(
    n: int, offset: int, h: float, seed: int, shift: float
) -> None:
    """In place, the direct log-MGF is bit for bit the out-of-place sum; against 60-digit
    log-sum-exp its error is far below the 1e-9 (1 + |K|) that Chernoff bounds add."""
    rng = np.random.default_rng(seed)
    masses = rng.exponential(size=n) * np.exp(-rng.uniform(0.0, 50.0, n))
    masses[rng.uniform(size=n) < 0.1] = 0.0
    masses[0] = max(masses[0], 1e-3)
    pld = DiscretePLD(offset, masses / masses.sum(), 0.0, h)
    lam = np.concatenate([THETAS[::7], shift - THETAS[::9], [0.0, shift]])
    got = _log_mgf_direct(pld, lam)
    assert np.array_equal(got, _out_of_place(pld, lam))
    losses, pos = pld.losses, pld.masses > 0
    with mp.workdps(DPS):
        terms = [
            (mp.log(mp.mpf(float(p))), mp.mpf(float(x)))
            for p, x in zip(pld.masses[pos], losses[pos], strict=True)
        ]
        for t, k in zip(lam, got, strict=True):
            exact = mp.log(mp.fsum(mp.exp(lp + mp.mpf(float(t)) * x) for lp, x in terms))
            # each exponent rounds by u (|log p| + 2 |lam l|), each term and the sum by n u
            scale = max(abs(float(lp)) + 2 * abs(float(t) * float(x)) for lp, x in terms)
            err = abs(mp.mpf(float(k)) - exact)
            assert err <= 4 * U * (scale + n + 16)
            assert err <= 1e-11 * (1 + abs(exact))
    assert math.isfinite(float(got[0]))


@settings(max_examples=12, deadline=None)
@given(mu=st.floats(0.05, 5.0), q=st.floats(1e-4, 0.5), h=st.floats(1e-3, 0.05))
def test_discretise_reads_the_curve_only_where_the_chord_does(
    mu: float, q: float, h: float
) -> None:
    """The masses are those of the chord through the curve at every grid point."""
    base = gaussian_profile(mu)
    for profile in (base, poisson_remove(base, q), poisson_add(base, q)):
        got = pld_discrete.discretise(profile, h)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pld_discrete, "_curve_read", lambda p, eps: p(eps))
            whole = pld_discrete.discretise(profile, h)
        assert (got.offset, got.inf_mass) == (whole.offset, whole.inf_mass)
        assert np.array_equal(got.masses, whole.masses)

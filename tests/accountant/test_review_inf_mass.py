"""Adversarial checks of lower bounds that keep the mass at +infinity of approximate-DP leaves
(``InfinitySplit``, ``infinity_lower``, the epsilon blocks' curve evaluation): every certified
lower bound at most, every certified upper bound at least, the exact value (60-digit
enumeration of compositions of approximate DP, pure DP, binary randomized response and
Gaussians), with large deltas, masses at +infinity near the queried delta, extreme epsilons,
both adjacencies, and the blocks' path forced."""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger.accountant import epsilon_cells
from dpledger.accountant import pld as pld_module
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.epsilon_cells import cell_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_discrete import DiscretePLD
from dpledger.accountant.pld_dominated import InfinitySplit, discretise_lower
from dpledger.accountant.pld_fft import infinite_mass
from dpledger.accountant.pld_read import infinity_lower
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

Leaves = dict[Event, int]
ADJACENCIES = (Adjacency(), Adjacency(relation="replace_one"))


# -- exact references ----------------------------------------------------------------------------


def _lattice(eps: float, m: int) -> list[tuple[mp.mpf, mp.mpf]]:
    """(loss, P-mass) of ``m`` copies of binary randomized response at ``eps``."""
    e = mp.mpf(eps)
    a = 1 / (1 + mp.exp(-e))
    return [((2 * k - m) * e, mp.binomial(m, k) * a**k * (1 - a) ** (m - k)) for k in range(m + 1)]


def _finite_atoms(leaves: Leaves) -> tuple[list[tuple[mp.mpf, mp.mpf]], mp.mpf, mp.mpf]:
    """(atoms of the finite part, probability of no infinite loss, Gaussian mu)."""
    keep, precision = mp.mpf(1), mp.mpf(0)
    atoms: dict[mp.mpf, mp.mpf] = {mp.mpf(0): mp.mpf(1)}
    for leaf, m in leaves.items():
        if isinstance(leaf, GaussianEvent):
            precision += m / mp.mpf(leaf.noise_multiplier) ** 2
            continue
        assert isinstance(leaf, ApproxDPEvent | PureDPEvent | RandomizedResponseEvent)
        assert not isinstance(leaf, RandomizedResponseEvent) or leaf.num_buckets == 2
        if isinstance(leaf, ApproxDPEvent):
            keep *= (1 - mp.mpf(leaf.delta)) ** m
        merged: dict[mp.mpf, mp.mpf] = {}
        for l2, p2 in _lattice(leaf.epsilon, m):
            for l1, p1 in atoms.items():
                merged[l1 + l2] = merged.get(l1 + l2, mp.mpf(0)) + p1 * p2
        atoms = merged
    return list(atoms.items()), keep, mp.sqrt(precision)


def exact_delta(leaves: Leaves, eps: float, dps: int = 60) -> mp.mpf:
    """delta(eps) of the composition (the same pair under both adjacencies: every leaf here is
    a symmetric pair of its own parameters)."""
    with mp.workdps(dps):
        atoms, keep, mu = _finite_atoms(leaves)
        x = mp.mpf(eps)

        def finite(t: mp.mpf) -> mp.mpf:
            if mu == 0:
                return -mp.expm1(t) if t < 0 else mp.mpf(0)
            return mp.ncdf(-t / mu + mu / 2) - mp.exp(t) * mp.ncdf(-t / mu - mu / 2)

        body = mp.fsum(p * finite(x - loss) for loss, p in atoms)
        return +(1 - keep + keep * body)


def _accountant(leaves: Leaves, adjacency: Adjacency) -> PLDAccountant:
    acc = PLDAccountant(adjacency)
    for leaf, m in leaves.items():
        acc.compose(leaf, m)
    return acc


def _check_delta(acc: PLDAccountant, leaves: Leaves, eps: float) -> tuple[float, float, float]:
    bound = acc.get_delta(eps)
    exact = exact_delta(leaves, eps)
    # the reference errs by a few units of its 60 digits (1 + 1.6e-61 where the truth is 1)
    with mp.workdps(60):
        slack = mp.mpf(10) ** -50
        assert mp.mpf(bound.delta_lower) <= exact * (1 + slack), (eps, bound.delta_lower, exact)
        assert exact <= mp.mpf(bound.delta) * (1 + slack), (eps, bound.delta, float(exact))
    return bound.delta_lower, float(exact), bound.delta


def _check_epsilon(acc: PLDAccountant, leaves: Leaves, delta: float) -> tuple[float, float]:
    """The lower epsilon below the truth (delta(lower) >= delta, delta(.) being continuous),
    the upper one above it (delta(upper) <= delta)."""
    bound = acc.get_epsilon(delta)
    lower, upper = bound.epsilon_lower, bound.epsilon
    assert 0.0 <= lower <= upper
    with mp.workdps(60):
        slack = mp.mpf(10) ** -50
        if lower > 0.0:
            assert exact_delta(leaves, lower) * (1 + slack) >= mp.mpf(delta), (delta, lower)
        if math.isfinite(upper):
            assert exact_delta(leaves, upper) <= mp.mpf(delta) * (1 + slack), (delta, upper)
    return lower, upper


def _run(
    leaves: Leaves,
    adjacency: Adjacency,
    epsilons: Sequence[float],
    deltas: Sequence[float],
    blocks: bool,
    patch: pytest.MonkeyPatch,
) -> None:
    if blocks:
        patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
    acc = _accountant(leaves, adjacency)
    for eps in epsilons:
        _check_delta(acc, leaves, eps)
    for delta in deltas:
        _check_epsilon(acc, leaves, delta)


def _inf(leaves: Leaves) -> float:
    return float(1 - _finite_atoms(leaves)[1])


# -- the rounding of the composed mass at +infinity ----------------------------------------------


_INF_CASES = [
    [(5e-324, 1), (1e-300, 10**30), (0.5, 3)],
    [(1e-17, 10**15), (1e-16, 7), (3e-9, 123456789)],
    [(0.5, 1), (0.5, 2), (0.4999999999999999, 1)],
    [(1e-300, 1)] * 50 + [(2.5e-7, 10**6)],
    [(1.0 - 2.0**-52, 1), (1e-3, 1)],
    [(1e-12, 1)] * 300,
    [(0.3, 10**18)],
    [(6e-17, 1)] * 5 + [(1e-20, 10**20)],
]


@pytest.mark.parametrize("parts", _INF_CASES)
@pytest.mark.parametrize("order", ["running", "fsum"])
def test_infinity_lower_is_below_the_composed_mass(parts: list[tuple[float, int]], order: str):
    """``infinity_lower`` of the mass at +infinity accumulated as the FFT composition
    (a running sum) or the split composition (fsum) does: at most 1 - prod (1 - m_i)^c_i,
    and ``inf_mass`` (charged to upper bounds) at least that."""
    terms = [count * math.log1p(-m) for m, count in parts]
    if order == "running":
        log_keep = 0.0
        for t in terms:
            log_keep += t
    else:
        log_keep = math.fsum(terms)
    inf_mass = infinite_mass(log_keep, len(parts))
    total = sum(c for _, c in parts)
    pld = types.SimpleNamespace(dominated=True, inf_mass=inf_mass, total_count=total)
    with mp.workdps(80):
        log_exact = mp.fsum(c * mp.log1p(-mp.mpf(m)) for m, c in parts)
        exact = -mp.expm1(log_exact)
    assert mp.mpf(infinity_lower(pld)) <= exact  # type: ignore[arg-type]
    assert mp.mpf(inf_mass) >= exact
    chord = types.SimpleNamespace(dominated=False, inf_mass=inf_mass, total_count=total)
    assert infinity_lower(chord) == 0.0  # type: ignore[arg-type]


# -- the blocks' dominated pairs and curve evaluation --------------------------------------------


def _block_exact(eps: float, delta: float, m: int, x: float) -> mp.mpf:
    return exact_delta({ApproxDPEvent(eps, delta): m}, x, 40)


def _pair_curve(pair: DiscretePLD, x: float) -> mp.mpf:
    """The curve of a discrete pair at ``x``, exactly from its stored masses."""
    with mp.workdps(40):
        xs = mp.mpf(x)
        total = mp.mpf(pair.inf_mass)
        for j, p in enumerate(pair.masses.tolist()):
            loss = mp.mpf((pair.offset + j) * pair.h)
            if p > 0 and loss > xs:
                total += mp.mpf(p) * -mp.expm1(xs - loss)
        return total


_SPLITS = [
    (0.5, 0.5, 1, 0.01),
    (0.5, 0.5, 20, 0.05),
    pytest.param(1e-3, 0.9, 128, 1e-4, marks=pytest.mark.slow),
    (2.0, 1e-12, 3, 0.01),
    (5.5, 0.3, 1, 0.1),
    (1e-300, 0.25, 4, 1e-3),
    (250.0, 0.1, 1, 1.0),
]


@pytest.mark.parametrize(("eps", "delta", "m", "h"), _SPLITS)
def test_split_dominated_pair_below_the_block(eps: float, delta: float, m: int, h: float):
    """The dominated pair of a block's split lower curve (mass at +infinity kept, the finite
    masses scaled by its complement) is below the exact m-fold curve everywhere read."""
    lower = cell_profiles(ApproxDPEvent(eps, delta), m)
    assert lower is not None
    split = lower.lower_remove
    assert isinstance(split, InfinitySplit)
    assert 0.0 < split.inf_lower <= float(_block_exact(eps, delta, m, 1e6))
    pair = discretise_lower(split, h)
    if pair is None:  # declined (a subnormal epsilon on a grid of 1e-3): nothing certified
        assert eps < 1e-100
        return
    assert pair.dominated
    assert pair.inf_mass == split.inf_lower
    top = (pair.offset + pair.masses.size) * h
    bottom = pair.offset * h
    xs = sorted({*np.linspace(bottom - 2 * h, top + 2 * h, 23).tolist(), 0.0, eps, m * eps})
    for x in xs:
        assert _pair_curve(pair, x) <= _block_exact(eps, delta, m, x), x


_CURVES = [
    (0.5, 0.5, 20),
    pytest.param(0.01, 0.3, 128, marks=pytest.mark.slow),
    (299.0, 0.2, 1),
    (5.0, 1e-9, 2),
    (1e-310, 0.5, 9),
]


def _curve_points(losses: np.ndarray) -> list[float]:
    """The atoms, one unit beside each, the midpoints between them and points far outside."""
    points = [*losses.tolist(), -50.0, -1e3, 0.0, float(losses[-1]) + 1.0]
    points += np.nextafter(losses, -math.inf).tolist() + np.nextafter(losses, math.inf).tolist()
    return points + ((losses[1:] + losses[:-1]) / 2).tolist()


def _stored_sum(curve: Any, x: float) -> mp.mpf:
    """The exact curve of the evaluator's own stored atoms and mass at +infinity."""
    xs = mp.mpf(x)
    return mp.mpf(curve.inf_mass) + mp.fsum(
        mp.mpf(p) * -mp.expm1(xs - mp.mpf(loss))
        for loss, p in zip(curve.losses.tolist(), curve.masses.tolist(), strict=True)
        if mp.mpf(loss) > xs
    )


@pytest.mark.parametrize(("eps", "delta", "m"), _CURVES)
def test_block_curves_bracket_the_exact_block(eps: float, delta: float, m: int):
    """(1 - e^x) S_k + e^x W_k with its charge: the lower curve at most, the upper at least,
    the exact m-fold curve, at the atoms, one unit beside them, between them and far
    outside."""
    found = cell_profiles(ApproxDPEvent(eps, delta), m)
    assert found is not None
    for profile, up in ((found.remove, True), (found.lower_remove, False)):
        points = _curve_points(profile.delta.losses)  # type: ignore[attr-defined]
        values = profile.delta(np.array(points))
        for x, value in zip(points, values.tolist(), strict=True):
            exact = _block_exact(eps, delta, m, x)
            assert (mp.mpf(value) >= exact) if up else (mp.mpf(value) <= exact), (x, value)


_STORED = [(5.0, 1e-9, 2), (0.5, 0.5, 20), (2.0, 1e-12, 3), (299.0, 0.2, 1), (1e-310, 0.5, 9)]


@pytest.mark.parametrize(("eps", "delta", "m"), _STORED)
def test_block_curve_evaluation_brackets_its_stored_atoms(eps: float, delta: float, m: int):
    """The evaluation against the exact sum over its own stored atoms (proof step 5: the
    mass at +infinity is added rounded up for the upper curve, down for the lower one)."""
    found = cell_profiles(ApproxDPEvent(eps, delta), m)
    assert found is not None
    with mp.workdps(50):
        for profile, up in ((found.remove, True), (found.lower_remove, False)):
            points = _curve_points(profile.delta.losses)  # type: ignore[attr-defined]
            values = profile.delta(np.array(points))
            for x, value in zip(points, values.tolist(), strict=True):
                exact = _stored_sum(profile.delta, x)
                assert (mp.mpf(value) >= exact) if up else (mp.mpf(value) <= exact), (x, value)


@settings(max_examples=300, deadline=None)
@given(
    a=st.floats(0.0, 1.0),
    b=st.one_of(st.floats(0.0, 1.0), st.floats(0.0, 1e-300), st.just(0.0)),
    up=st.booleans(),
)
def test_mass_at_infinity_added_to_the_safe_side(a: float, b: float, up: bool):
    """The evaluator's last addition (the mass at +infinity): at least (upper) or at most
    (lower) the exact sum, and within one unit of it."""
    got = float(epsilon_cells._Evaluator.add_directed(a, np.array([b]), up)[0])
    exact = Fraction(a) + Fraction(b)
    assert (Fraction(got) >= exact) if up else (Fraction(got) <= exact)
    assert abs(Fraction(got) - exact) <= Fraction(math.ulp(got))


# -- compositions against 60-digit references ----------------------------------------------------


HEAVY: Leaves = {ApproxDPEvent(0.5, 0.5): 20, ApproxDPEvent(1.0, 0.3): 3}


@pytest.mark.parametrize("blocks", [pytest.param(False, marks=pytest.mark.slow), True])
def test_mass_at_infinity_near_one(blocks: bool, monkeypatch: pytest.MonkeyPatch):
    """Composed mass at +infinity 1 - 2^-20 0.7^3: delta brackets at and far above every finite
    loss, epsilon brackets at levels above it (finite) and below it (infinite)."""
    _run(HEAVY, Adjacency(), [0.0, 2.0, 40.0], [0.9999999, 0.5, 1e-10], blocks, monkeypatch)


STRADDLE: Leaves = {ApproxDPEvent(0.2, 1e-6): 50, RandomizedResponseEvent(0.3): 4}


@pytest.mark.parametrize("blocks", [False, True])
def test_mass_at_infinity_straddles_the_level(blocks: bool, monkeypatch: pytest.MonkeyPatch):
    """Levels a relative 1e-3 above and below the composed mass at +infinity (5.0e-5)."""
    inf = _inf(STRADDLE)
    _run(STRADDLE, Adjacency(), [8.0, 15.0], [inf * 1.001, inf * 0.999], blocks, monkeypatch)


# -- the wide battery ----------------------------------------------------------------------------


_WIDE = [
    {ApproxDPEvent(0.5, 0.5): 20, ApproxDPEvent(1.0, 0.3): 3, GaussianEvent(1.5): 2},
    {ApproxDPEvent(0.1, 0.05): 300, GaussianEvent(4.0): 1},
    {ApproxDPEvent(0.05, 1e-20): 400, PureDPEvent(0.3): 2},
    {ApproxDPEvent(0.2, 1e-6): 130, RandomizedResponseEvent(0.3): 4, GaussianEvent(2.0): 5},
    {ApproxDPEvent(6.0, 0.01): 5, ApproxDPEvent(0.01, 1e-4): 129},
    {ApproxDPEvent(1e-300, 0.1): 3, ApproxDPEvent(0.3, 1e-15): 10},
    {ApproxDPEvent(299.0, 0.2): 1, ApproxDPEvent(0.7, 1e-30): 6},
    {ApproxDPEvent(0.4, 1e-25): 40, GaussianEvent(0.8): 1},
]
_WIDE_DELTAS = [1e-1, 1e-3, 1e-5, 1e-10, 1e-15, 1e-20, 1e-25, 1e-30]


@pytest.mark.slow
@pytest.mark.parametrize("adjacency", ADJACENCIES, ids=["add_remove", "replace_one"])
@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("leaves", _WIDE, ids=[f"mix{i}" for i in range(len(_WIDE))])
def test_wide_battery(
    leaves: Leaves, blocks: bool, adjacency: Adjacency, monkeypatch: pytest.MonkeyPatch
):
    """Many approximate-DP blocks, large and tiny deltas, extreme epsilons, with Gaussians,
    pure DP and randomized response: delta and epsilon brackets from 1e-1 to 1e-30 and at the
    composed mass at +infinity."""
    if adjacency.relation == "replace_one" and any(isinstance(e, GaussianEvent) for e in leaves):
        pytest.skip("the reference is the add/remove Gaussian")
    inf = _inf(leaves)
    deltas = [*_WIDE_DELTAS, *(x for x in (inf * (1 + 1e-6), inf * (1 - 1e-6)) if 0 < x < 1)]
    epsilons = [0.0, 0.5, 3.0, 12.0, 60.0]
    _run(leaves, adjacency, epsilons, deltas, blocks, monkeypatch)


_LEAF = st.one_of(
    st.builds(
        ApproxDPEvent,
        st.floats(0.01, 3.0).map(lambda x: round(x, 3)),
        st.sampled_from([1e-30, 1e-12, 1e-6, 1e-3, 0.05, 0.2, 0.5]),
    ),
    st.builds(RandomizedResponseEvent, st.floats(0.05, 2.0).map(lambda x: round(x, 3))),
    st.builds(PureDPEvent, st.floats(0.05, 2.0).map(lambda x: round(x, 3))),
    st.builds(GaussianEvent, st.floats(0.5, 8.0).map(lambda x: round(x, 2))),
)


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    leaves=st.dictionaries(_LEAF, st.integers(1, 40), min_size=2, max_size=3),
    eps=st.floats(0.0, 20.0),
    level=st.sampled_from([1e-1, 1e-3, 1e-6, 1e-10, 1e-20, 1e-30]),
    blocks=st.booleans(),
)
def test_random_heavy_mixes(
    leaves: Leaves, eps: float, level: float, blocks: bool, monkeypatch: pytest.MonkeyPatch
):
    """Random mixes with large deltas: the delta bracket at ``eps`` and the epsilon bracket at
    ``level`` and at the composed mass at +infinity hold the exact values."""
    with monkeypatch.context() as patch:
        inf = _inf(leaves)
        deltas = [level, *([inf * (1 + 1e-9)] if 0 < inf < 0.9 else [])]
        _run(leaves, Adjacency(), [eps], deltas, blocks, patch)


# -- mixtures with mechanisms without a closed form: delta = D + (1 - D) delta_pure ------------


def _purified(leaves: Leaves) -> tuple[Leaves, float]:
    """(the leaves with every approximate-DP leaf replaced by pure DP at its epsilon, the
    composed mass at +infinity D): the composition's curve is D + (1 - D) that of the pure one
    (each approximate-DP leaf is its randomized response except, with probability delta, an
    outcome that names the secret)."""
    pure: Leaves = {}
    with mp.workdps(60):
        keep = mp.mpf(1)
        for leaf, m in leaves.items():
            if isinstance(leaf, ApproxDPEvent):
                keep *= (1 - mp.mpf(leaf.delta)) ** m
                leaf = PureDPEvent(leaf.epsilon)
            pure[leaf] = pure.get(leaf, 0) + m
        return pure, float(1 - keep)


def _check_against_pure(
    leaves: Leaves,
    adjacency: Adjacency,
    epsilons: Sequence[float],
    deltas: Sequence[float],
    patch: pytest.MonkeyPatch,
) -> None:
    """Each bracket of the composition consistent with the certified bracket of its pure
    counterpart mapped through delta = D + (1 - D) delta_pure: the lower bound at most the
    mapped upper bound, the upper at least the mapped lower one (the truth lies in both)."""
    pure, d = _purified(leaves)
    with patch.context() as p:
        p.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
        acc = _accountant(leaves, adjacency)
        for eps in epsilons:
            mixed = acc.get_delta(eps)
            ref = _accountant(pure, adjacency).get_delta(eps)
            assert mixed.delta_lower <= (d + (1 - d) * ref.delta) * (1 + 1e-12), eps
            assert mixed.delta >= (d + (1 - d) * ref.delta_lower) * (1 - 1e-12), eps
        for delta in deltas:
            mixed_e = acc.get_epsilon(delta)
            if delta <= d * (1 + 1e-9):  # the truth is infinite
                assert mixed_e.epsilon == math.inf, delta
                continue
            ref_e = _accountant(pure, adjacency).get_epsilon((delta - d) / (1 - d) * (1 - 1e-9))
            assert mixed_e.epsilon_lower <= ref_e.epsilon, delta
            ref_e = _accountant(pure, adjacency).get_epsilon((delta - d) / (1 - d) * (1 + 1e-9))
            assert mixed_e.epsilon >= ref_e.epsilon_lower, delta


def test_poisson_gaussian_beside_approximate_dp_blocks(monkeypatch: pytest.MonkeyPatch):
    """Poisson-sampled Gaussians beside approximate-DP blocks (mass at +infinity 1.3e-4)."""
    leaves: Leaves = {
        ApproxDPEvent(0.1, 1e-6): 130,
        ApproxDPEvent(0.2, 1e-7): 2,
        PoissonSampledEvent(0.01, GaussianEvent(1.0)): 100,
    }
    _check_against_pure(leaves, Adjacency(), [1.0], [1e-4], monkeypatch)


_OTHERS: list[Leaves] = [
    {PoissonSampledEvent(0.05, GaussianEvent(0.9)): 500, LaplaceEvent(20.0): 3},
    {LaplaceEvent(2.0): 4, LaplaceEvent(3.0): 2},
    {RandomAllocationEvent(10, GaussianEvent(0.8)): 2},
    {SampledWithoutReplacementEvent(1000, 10, GaussianEvent(1.0)): 200},
]
_APPROX: list[Leaves] = [
    {ApproxDPEvent(0.05, 1e-3): 200, ApproxDPEvent(0.3, 0.05): 3},
    {ApproxDPEvent(0.5, 1e-12): 129, ApproxDPEvent(7.0, 1e-9): 2},
    {ApproxDPEvent(0.2, 0.3): 5, ApproxDPEvent(1e-3, 1e-20): 1000},
]


@pytest.mark.slow
@pytest.mark.parametrize("adjacency", ADJACENCIES, ids=["add_remove", "replace_one"])
@pytest.mark.parametrize("approx", range(len(_APPROX)))
@pytest.mark.parametrize("others", range(len(_OTHERS)))
def test_mixtures_against_pure_counterparts(
    others: int, approx: int, adjacency: Adjacency, monkeypatch: pytest.MonkeyPatch
):
    """Approximate-DP blocks with large deltas beside sampled Gaussians, Laplace, random
    allocation and sampling without replacement, both adjacencies, delta and epsilon brackets
    from 1e-1 to 1e-30 and at the mass at +infinity."""
    leaves = {**_OTHERS[others], **_APPROX[approx]}
    if adjacency.relation == "replace_one" and others == 2:
        pytest.skip("random allocation is refused under replace-one")
    if adjacency.relation == "add_remove" and others == 3:
        pytest.skip("sampling without replacement is analysed under replace-one only")
    d = _purified(leaves)[1]
    deltas = [x for x in (1e-1, 1e-3, 1e-5, 1e-10, 1e-20, 1e-30) if x < 1]
    deltas += [d * (1 - 1e-6), d * (1 + 1e-3)] if d < 0.5 else []
    _check_against_pure(leaves, adjacency, [0.5, 3.0, 20.0], deltas, monkeypatch)


@pytest.mark.parametrize(
    "leaves",
    [
        {ApproxDPEvent(1e-3, 0.5): 128, PureDPEvent(1.0): 1},
        {ApproxDPEvent(0.1, 0.2): 129, GaussianEvent(1.0): 3},
        {ApproxDPEvent(1e-300, 0.2): 128, PureDPEvent(5.6): 5},
    ],
    ids=["log1p", "log1p-gaussian", "empty-max"],
)
def test_blocks_whose_mass_at_infinity_rounds_to_one(
    leaves: Leaves, monkeypatch: pytest.MonkeyPatch
):
    """The blocks' path composes a cell whose upper mass at +infinity is 1 (the chord raises
    it to one, or it rounds there): the upper delta is 1 at every epsilon and the upper epsilon
    infinite (the truth: the mass at +infinity is 1 - 0.8^m or 1 - 2^-128), the lower bounds
    below the exact values, the split compositions of small levels included."""
    monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
    acc = _accountant(leaves, Adjacency())
    assert _check_delta(acc, leaves, 2.0)[2] == 1.0
    for delta in (1e-3, 1e-30):
        assert _check_epsilon(acc, leaves, delta)[1] == math.inf


def test_leaves_whose_mass_at_infinity_rounds_to_one():
    """Leaves composed one by one (no blocks) whose chords' mass at +infinity the raise makes
    one (delta = 1 - 1e-10): the upper delta 1, the bounds around the exact values."""
    leaves: Leaves = {ApproxDPEvent(1e-3, 1 - 1e-10): 3, PureDPEvent(1.0): 2}
    acc = _accountant(leaves, Adjacency())
    assert _check_delta(acc, leaves, 2.0)[2] == 1.0
    assert _check_epsilon(acc, leaves, 1e-3)[1] == math.inf


def test_almost_certain_block_beside_many_distinct_leaves():
    """100 approximate-DP (1e-3, 0.5) releases beside 257 distinct pure-DP leaves (the blocks'
    path, unpatched): the block's mass at +infinity is 1 - 2^-100, 1.0 in floating point. The
    exact delta(eps) = 1 - 2^-100 (1 - delta_rest(eps)) lies in [1 - 2^-100, 1]: PLD's upper
    bound is 1, its certified lower bound at most 1 - 2^-100 and within 1e-11 of it, and the
    bracket meets the closed form's."""
    leaves: list[Event] = [SelfComposedEvent(ApproxDPEvent(1e-3, 0.5), 100)]
    leaves += [PureDPEvent(0.001 + 0.0001 * i) for i in range(257)]
    acc, closed = PLDAccountant(Adjacency()), ClosedFormAccountant(Adjacency())
    for leaf in leaves:
        acc.compose(leaf)
        closed.compose(leaf)
    floor = 1 - Fraction(1, 2**100)
    for eps in (0.0, 2.0):
        bound, reference = acc.get_delta(eps), closed.get_delta(eps)
        assert bound.method == "pld"
        assert bound.delta == 1.0
        assert bound.delta_lower >= 1 - 1e-11 and Fraction(bound.delta_lower) <= floor
        assert bound.delta_lower <= reference.delta and reference.delta_lower <= bound.delta
    assert acc.get_epsilon(1e-6).epsilon == math.inf  # delta(eps) > 1e-6 at every epsilon

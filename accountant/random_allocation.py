"""Random allocation (balls-in-bins) of the Gaussian mechanism: certified privacy profiles.

Each record is allocated to one of ``t`` steps uniformly at random and a Gaussian release of
noise multiplier ``sigma`` runs at every step. Under add/remove adjacency the pair
``P = (1/t) sum_i N(mu e_i, I_t)`` vs ``Q = N(0, I_t)`` (``mu = 1 / sigma``) dominates the epoch
for the remove direction and the swapped pair for the add direction, also when the queries of
later steps depend on earlier outputs (Chua et al., "Balls-and-bins sampling for DP-SGD",
AISTATS 2025, the tightly dominating pair of ABLQ_B; Feldman & Shenfeld, "Privacy amplification
by random allocation", 2025, arXiv 2502.08202, whose remove-direction pair for random
allocation of a Gaussian step is the same mixture).

Under ``Q`` the likelihood ratio is ``S / t`` with ``S = L_1 + ... + L_t`` a sum of iid
lognormals ``L = exp(mu Z - mu^2 / 2)`` of mean 1, so

    delta_remove(eps) = E[(S / t - e^eps)_+],    delta_add(eps) = E[(1 - e^eps S / t)_+].

Both are expectations of convex functions of ``S``; :func:`allocation_tables` bounds them from
above (proofs_checks/random_allocation/proof.md):

- a record's lognormal is split at ``B``: at most one of the ``t`` exceeds ``B`` except with
  probability ``P(Bin(t, p_B) >= 2)``, which is charged; the term with exactly one is a
  closed-form lognormal partial expectation, integrated against the law of the other ``t - 1``;
- ``L`` restricted to ``[0, B]`` is put on the grid ``k h`` by a *mean-preserving split* of
  each cell (its mass goes to the two ends of the cell with the cell's mean kept): the grid
  variable is a mean-preserving spread of ``L``, so by Jensen every convex function of the sum
  has a larger expectation. The split fraction is moved by its rounding-error bound towards
  the upper end for the remove direction (increasing convex hinge) and towards the lower end
  for the add direction (decreasing convex hinge);
- the laws of the sums of ``t - 1`` and ``t`` grid variables are exact convolutions of
  nonnegative arrays (direct summation, relative rounding error bounded), on a window whose
  overflow mass is charged with the largest value the hinge can take there.
- independently, the law of ``S`` on a geometric grid (:mod:`allocation_geometric`: constant
  relative resolution, for the heavy right tail and the mass near 0 that set the curves at small
  ``t`` and ``sigma``), every cell and every sum split with its mean kept; the smaller of the two
  certified values is kept.

The tables are taken pointwise no larger than the Gaussian profile of one release (the record
is in one step: no amplification is a valid bound), continued by that profile's points down to
``TAIL_FLOOR``, replaced by it where they cannot be computed (a nearly noiseless step, an epoch
of about 1e12 steps or more), and composed by the PLD accountant as a
:class:`~dpledger.core.events.TabulatedProfileEvent` (connect-the-dots). A certified *lower*
curve comes from the max-of-step-outputs statistic of the same pair (the remove pair is
achieved by a query that is 1 on the differing record and 0 elsewhere), as for shuffled
batches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.allocation_geometric import geometric_tables
from dpledger.accountant.allocation_ratio import allocation_sum_pair
from dpledger.accountant.conversions import NDTR_REL
from dpledger.accountant.nonnegative_convolution import nonnegative_convolve
from dpledger.accountant.profiles import (
    DirectedProfiles,
    Profile,
    gauss_span,
    gaussian_attack_profiles,
    gaussian_profile,
    identical_profile,
    larger_profile,
    lower_pair_profiles,
    max_of_batches_pair,
    tabulated_profiles,
)
from dpledger.accountant.threads import one_blas_thread
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ALLOCATION_NEEDS_ADD_REMOVE,
    Event,
    GaussianEvent,
    RandomAllocationEvent,
    TabulatedProfileEvent,
    flatten,
)

Array = NDArray[np.float64]

#: unit roundoff of IEEE double
_U = 2.0**-53
#: the probability that one of the t lognormals exceeds B is at most this (sets B)
BIG_MASS = 1e-7
#: grid step of L, in standard deviations of L
STEP_PER_SD = 1.0 / 16.0
#: most grid points of the window of the sum (each convolution is direct, O(points^2))
MAX_POINTS = 1 << 14
#: epsilons of the table: 0 to the Gaussian's epsilon at TABLE_FLOOR, at most this many points
TABLE_POINTS = 600
#: the table stops where the one-release Gaussian profile is below this
TABLE_FLOOR = 1e-16
#: past TABLE_FLOOR the table goes on with the one-release Gaussian's points (the record is in
#: one step: they bound an epoch too), every TAIL_STRIDE-th table step, down to TAIL_FLOOR
TAIL_FLOOR = 1e-30
TAIL_STRIDE = 1
#: a table reaching epsilons beyond this (e^eps would overflow), or whose computation
#: overflows, is the one-release Gaussian's (no amplification claimed)
EXP_LIMIT = 700.0
#: epochs of more steps than this are not tabulated (their computation loses its range near
#: 1e12): the one-release Gaussian's table
MAX_TABLE_STEPS = 10**9
#: for k of t steps with k / t at least 1 / SUM_POWER_SHARE, the lower bound also sums the
#: step outputs' likelihood ratios raised to these powers (each a valid statistic, the larger
#: curve is kept); otherwise to the power 1 only
SUM_POWERS = (1.0, 0.7)
SUM_POWER_SHARE = 16
#: the method the accountant names
METHOD = (
    "random allocation of a Gaussian step: the dominating pair of Chua et al. (AISTATS 2025) / "
    "Feldman & Shenfeld (arXiv 2502.08202), certified numerically (mean-preserving grid, "
    "closed-form lognormal tails, exact convolution)"
)


def _tail(z: Array | float) -> Array:
    """P(Z > z) for standard normal Z (elementwise)."""
    return np.asarray(special.ndtr(-np.asarray(z, dtype=float)), dtype=float)


@attrs.frozen
class AllocationTables:
    """Certified upper bounds of delta(eps) for the remove and add directions on ``epsilons``,
    with the parameters and charges of the computation (for the proof record)."""

    epsilons: Array
    remove: Array
    add: Array
    #: the same before the pointwise minimum with the one-release Gaussian profile
    remove_raw: Array
    add_raw: Array
    big: float
    step: float
    points: int
    charges: dict[str, float]


def _z(x: Array, mu: float) -> Array:
    """z with L > x  <=>  Z > z, for L = exp(mu Z - mu^2 / 2) and x > 0."""
    return np.asarray((np.log(x) + 0.5 * mu * mu) / mu, dtype=float)


def _cell_masses(mu: float, big: float, h: float) -> tuple[Array, Array, Array, float]:
    """(mass, first moment about the cell's left end, error bound of the latter, relative
    error bound of the masses) of L on the cells [k h, (k + 1) h] of [0, big]."""
    n = math.ceil(big / h)
    edges = np.minimum(np.arange(n + 1) * h, big)
    edges[-1] = big
    z = np.full(n + 1, -np.inf)
    z[1:] = _z(edges[1:], mu)
    # masses and first moments of L on each cell: differences of the survival functions of Z
    # (and of Z - mu), taken on the side where they do not cancel
    sf = _tail(z)
    cdf = special.ndtr(z)
    sf_m = _tail(z - mu)
    cdf_m = special.ndtr(z - mu)
    use_cdf = z[1:] <= 0
    mass = np.where(use_cdf, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    moment = np.where(use_cdf, cdf_m[1:] - cdf_m[:-1], sf_m[:-1] - sf_m[1:])
    scale = np.where(use_cdf, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:])
    scale_m = np.where(use_cdf, cdf_m[1:] + cdf_m[:-1], sf_m[:-1] + sf_m[1:])
    err_mass = NDTR_REL * scale + 4 * _U * mass
    err_moment = NDTR_REL * scale_m + 4 * _U * moment
    mass = np.maximum(mass, 0.0)
    moment = np.maximum(moment, 0.0)
    left = edges[:-1]
    # first moment about the left end: E[L - a; cell] (cancels for far cells; bounded below)
    about = moment - left * mass
    err_about = err_moment + left * err_mass + 4 * _U * (moment + left * mass)
    keep = mass > 0
    rel = float(np.max(err_mass[keep] / mass[keep])) if keep.any() else 0.0
    return mass, about, err_about, rel


def _grid_law(mu: float, big: float, h: float, direction: str) -> tuple[Array, float]:
    """Masses on 0, h, 2h, ... of the mean-preserving split of L restricted to [0, big] (total
    P(L <= big)), its split fractions moved towards the safe end for ``direction``; and the
    relative error bound of every mass against that law."""
    mass, about, err_about, rel = _cell_masses(mu, big, h)
    n = mass.size
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(mass > 0, about / (h * mass), 0.0)
        slack = np.where(mass > 0, err_about / (h * mass) + rel + 8 * _U, 0.0)
    up = direction == "remove"
    frac = np.minimum(frac + slack, 1.0) if up else np.maximum(frac - slack, 0.0)
    law = np.zeros(n + 1)
    law[:-1] += mass * (1.0 - frac)
    law[1:] += mass * frac
    return law, rel + 4 * _U


def _convolve(a: Array, b: Array, width: int) -> tuple[Array, float, float]:
    """(a * b on indices < width, the mass beyond, the relative error bound of each entry)."""
    full, rel = nonnegative_convolve(a, b)
    over = float(full[width:].sum()) * (1 + _U * full.size) if full.size > width else 0.0
    return full[:width].copy(), over, rel


def _sum_law(law: Array, count: int, reach: Callable[[int], int]) -> tuple[Array, float, float]:
    """(law^{*count} on its window, overflow mass, log of the relative error factor), by
    binary powering; the sum of ``n`` copies is cut at ``reach(n)`` points and the mass beyond
    is counted as overflow (a cut partial sum stays beyond every later cut: the terms are
    nonnegative)."""
    result: Array | None = None
    n_result = 0
    over = 0.0
    log_err = 0.0
    base = law[: reach(1)].copy()
    base_over = float(law[reach(1) :].sum())
    n_base = 1
    base_err = 0.0
    k = count
    while True:
        if k & 1:
            if result is None:
                result, over, log_err, n_result = base.copy(), base_over, base_err, n_base
            else:
                n_result += n_base
                result, o, e = _convolve(result, base, reach(n_result))
                over += o + base_over
                log_err += base_err + math.log1p(e)
        k >>= 1
        if not k:
            break
        n_base *= 2
        base, o, e = _convolve(base, base, reach(n_base))
        base_over = 2 * base_over + o
        base_err = 2 * base_err + math.log1p(e)
    assert result is not None
    return result, min(over, 1.0), log_err


def _padded(w: Array, width: int) -> Array:
    out = np.zeros(width)
    out[: min(width, w.size)] = w[:width]
    return out


def _epsilons(mu: float) -> Array:
    """The table's epsilons: 0 up to where one Gaussian release has delta TABLE_FLOOR."""
    # delta of N(mu, 1) vs N(0, 1) at eps is below Phi(mu / 2 - eps / mu)
    top = mu * (mu / 2 + float(-special.ndtri(TABLE_FLOOR)))
    top = max(top, 1e-3)
    step = max(top / TABLE_POINTS, 1e-3)
    return np.arange(0.0, top + step, step)


def allocation_tables(sigma: float, num_steps: int) -> AllocationTables:
    """Certified upper bounds of delta(eps), both directions, of one epoch of 1-of-``num_steps``
    random allocation of a Gaussian release of multiplier ``sigma`` (add/remove)."""
    with one_blas_thread():
        return _tables(float(sigma), int(num_steps))


@functools.lru_cache(maxsize=32)
def _tables(sigma: float, t: int) -> AllocationTables:
    mu = 1.0 / sigma
    eps = _epsilons(mu)
    gauss = np.asarray(gaussian_profile(mu)(eps), dtype=float)
    one_release = AllocationTables(eps, gauss, gauss, gauss, gauss, math.inf, 0.0, 0, {})
    if t == 1 or t > MAX_TABLE_STEPS or eps[-1] > EXP_LIMIT:
        return one_release
    # two certified grids, the smaller value kept: the uniform one is the tighter where the
    # body of L matters (large t, large sigma), the geometric one where its tails do
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            geo = geometric_tables(sigma, t, eps)
            uni = _uniform(mu, t, eps)
    except OverflowError:  # a range the grids were not made for
        return one_release
    raw_r, raw_a = np.minimum(geo.remove, uni.remove), np.minimum(geo.add, uni.add)
    if not (np.all(np.isfinite(raw_r)) and np.all(np.isfinite(raw_a))):
        return one_release  # a computation that lost its range certifies nothing
    charges = uni.charges | {f"geometric_{k}": v for k, v in geo.charges.items()}
    remove = np.minimum.accumulate(np.minimum(raw_r, gauss))
    add = np.minimum.accumulate(np.minimum(raw_a, gauss))
    return AllocationTables(eps, remove, add, raw_r, raw_a, uni.big, uni.step, uni.points, charges)


def _uniform_window(mu: float, t: int) -> tuple[float, float, float, float]:
    """(z_B, B, sd of L, reach of the window of the sum) of the uniform grid."""
    z_big = float(-special.ndtri(BIG_MASS / t))
    big = math.exp(mu * z_big - 0.5 * mu * mu)
    sd = math.sqrt(math.expm1(mu * mu))
    return z_big, big, sd, t * (1.0 + 14.0 * sd / math.sqrt(t)) + 1.5 * big


def _uniform(mu: float, t: int, eps: Array) -> AllocationTables:
    """Both directions' upper bounds on the uniform grid of L (the split at B, the closed-form
    term of one value above B, the charges)."""
    c = np.exp(eps)
    # B: P(L > B) = BIG_MASS / t
    z_big, big, sd, reach = _uniform_window(mu, t)
    p_big = float(_tail(z_big)) * (1 + NDTR_REL)
    m_big = float(_tail(z_big - mu)) * (1 + NDTR_REL)  # E[L; L > B]
    h = max(STEP_PER_SD * min(sd, 1.0), reach / MAX_POINTS)
    width = math.ceil(reach / h) + 1

    def points(n: int) -> int:  # the window of a sum of n copies (its bulk and one big value)
        return min(width, math.ceil((n + 14.0 * sd * math.sqrt(n) + 1.5 * big) / h) + 2)

    s: Array = np.asarray(np.arange(width) * h, dtype=float)  # the grid values of the sum
    # P(at least two above B) and the mass they carry (remove: E[S / t; J >= 2])
    p_one_more = -math.expm1((t - 1) * math.log1p(-p_big))
    p_two = float(special.bdtrc(1, t, p_big)) * (1 + NDTR_REL) + 1e-300
    p_two_rest = float(special.bdtrc(1, t - 1, p_big)) * (1 + NDTR_REL) + 1e-300
    charge_two = {"remove": m_big * p_one_more + p_two_rest, "add": p_two}
    out: dict[str, Array] = {}
    charges: dict[str, float] = {"p_two": p_two}
    for direction in ("remove", "add"):
        law, rel = _grid_law(mu, big, h, direction)
        rest, over_rest, err_rest = _sum_law(law, t - 1, points)
        full, over_o, err_o = _convolve(rest, law, width)
        rest, full = _padded(rest, width), _padded(full, width)
        over_full = over_rest + over_o
        err_full = err_rest + math.log1p(err_o)
        factor_rest = math.exp(err_rest + (t - 1) * math.log1p(rel)) * (1 + 1e-12)
        factor_full = math.exp(err_full + t * math.log1p(rel)) * (1 + 1e-12)
        if direction == "remove":
            # no record above B: E[(S / t - c)_+] from suffix sums of the window
            part0 = _hinge_up(full, s, t, c) * factor_full
            # exactly one above B: t * E_rest[E[((s + L) / t - c)_+; L > B]]
            part1 = _one_big_remove(rest, s, t, c, mu, big, z_big, p_big, m_big) * factor_rest
            over = over_full * (big + h) + over_rest * (t * (big + h) * p_big + m_big)
            val = part0 + part1 + over * factor_full + charge_two["remove"]
        else:
            part0 = _hinge_down(full, s, t, c) * factor_full
            # exactly one above B: the hinge is decreasing, so L > B counts as B
            part1 = t * p_big * _hinge_down(rest, s + big, t, c) * factor_rest
            val = part0 + part1 + charge_two["add"]
        charges[f"overflow_{direction}"] = over_full
        out[direction] = np.minimum(val * (1 + 1e-12), 1.0)
    charges["charge_two_remove"] = charge_two["remove"]
    r, a = out["remove"], out["add"]
    return AllocationTables(eps, r, a, r, a, big, h, width, charges)


def _hinge_up(w: Array, s: Array, t: int, c: Array) -> Array:
    """sum_i w_i (s_i / t - c)_+ for every c (suffix sums, summed in the safe direction)."""
    ws = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    wx = np.concatenate([np.cumsum((w * s)[::-1])[::-1], [0.0]])
    idx = np.searchsorted(s, c * t, side="right")
    val = wx[idx] / t - c * ws[idx]
    # each suffix sum of n nonnegative terms errs by at most n u of itself; the difference is
    # raised by both errors
    n = w.size
    slack = 2 * n * _U * (wx[idx] / t + c * ws[idx])
    return np.asarray(np.maximum(val, 0.0) + slack, dtype=float)


def _hinge_down(w: Array, s: Array, t: int, c: Array) -> Array:
    """sum_i w_i (1 - c s_i / t)_+ for every c (prefix sums)."""
    ws = np.concatenate([[0.0], np.cumsum(w)])
    wx = np.concatenate([[0.0], np.cumsum(w * s)])
    idx = np.searchsorted(s, t / c, side="left")  # entries with s_i < t / c
    val = ws[idx] - c * wx[idx] / t
    n = w.size
    slack = 2 * n * _U * (ws[idx] + c * wx[idx] / t)
    return np.asarray(np.maximum(val, 0.0) + slack, dtype=float)


#: ratio of the geometric grid on which the excess function of one big lognormal is tabulated
EXCESS_RATIO = 1.0 + 2.0**-10


def _one_big_remove(
    rest: Array,
    s: Array,
    t: int,
    c: Array,
    mu: float,
    big: float,
    z_big: float,
    p_big: float,
    m_big: float,
) -> Array:
    """sum_s rest(s) E[(s + L - c t)_+; L > B] for every c: the term of exactly one record
    above B, t E[((S_rest + L) / t - c)_+; L > B] (the factors t and 1 / t cancel).

    With x = c t - s: for x <= B the expectation is E[L; L > B] - x P(L > B), linear in x
    (suffix sums); for x > B it is V(x) = E[L; L > x] - x P(L > x), non-increasing, bounded
    by its value at the geometric grid point below x."""
    grid: Array = np.asarray(
        big
        * EXCESS_RATIO
        ** np.arange(
            math.ceil(math.log(max(c[-1] * t, big * 2) / big) / math.log(EXCESS_RATIO)) + 2
        ),
        dtype=float,
    )
    zg = _z(grid, mu)
    t1 = _tail(zg - mu)
    t2 = grid * _tail(zg)
    excess = np.maximum(t1 - t2, 0.0) + NDTR_REL * (t1 + t2) + 1e-300
    ws = np.concatenate([np.cumsum(rest[::-1])[::-1], [0.0]])
    wx = np.concatenate([np.cumsum((rest * s)[::-1])[::-1], [0.0]])
    n = rest.size
    out = np.empty(c.size)
    for i, ci in enumerate(c):
        ct = ci * t
        j = int(np.searchsorted(s, ct - big, side="left"))  # s_j >= ct - B: x <= B
        # linear part: sum_{s >= ct - B} w (m_B - (ct - s) p_B), evaluated term by term bounds
        lin = (m_big - ct * p_big) * ws[j] + p_big * wx[j]
        lin_err = NDTR_REL * (m_big * ws[j] + p_big * (ct * ws[j] + wx[j])) + 4 * n * _U * (
            m_big * ws[j] + p_big * (ct * ws[j] + wx[j])
        )
        value = max(lin, 0.0) + lin_err
        if j > 0:
            x = ct - s[:j]
            k = np.searchsorted(grid, x, side="right") - 1  # grid[k] <= x
            value += float(np.dot(rest[:j], excess[k])) * (1 + 2 * j * _U)
        out[i] = value
    return out


def allocation_base(event: RandomAllocationEvent) -> float:
    """The noise multiplier of one step's releases merged into one Gaussian (rounded down);
    refuses other mechanisms."""
    leaves = flatten(event.event)
    if leaves and all(isinstance(e, GaussianEvent) for e, _ in leaves):
        precision = math.fsum(k / e.noise_multiplier**2 for e, k in leaves)  # type: ignore[attr-defined]
        return math.nextafter(1.0 / math.sqrt(precision) * (1 - 1e-12), 0.0)
    raise UnsupportedEventError(
        f"{event.describe()}: random allocation is analysed for Gaussian releases at each step "
        "(the dominating pair is proven for them); run a GaussianEvent per step"
    )


def allocation_parts(event: RandomAllocationEvent) -> tuple[tuple[RandomAllocationEvent, int], ...]:
    """The k-of-t reduction: one epoch of ``k``-of-``t`` allocation is dominated by the
    composition of ``k - r`` epochs of 1-of-``m`` and ``r`` epochs of 1-of-``(m + 1)``
    allocation, ``m = t // k``, ``r = t - k m`` (Feldman & Shenfeld, arXiv 2502.08202, Lemma
    3.2 with its Theorem 3.1; proof record ``proofs_checks/random_allocation``). For ``k = 1``
    the event itself."""
    k, t = event.num_selected, event.num_steps
    if k == 1:
        return ((event, 1),)
    m, r = divmod(t, k)
    parts = [(RandomAllocationEvent(m, event.event), k - r)]
    if r:
        parts.append((RandomAllocationEvent(m + 1, event.event), r))
    return tuple(parts)


def allocation_table_event(
    event: RandomAllocationEvent, adjacency: Adjacency, span: float | None = None
) -> Event:
    """The certified curve of one epoch as a tabulated profile (add/remove only). For ``k > 1``
    steps per record it is the curve of ``k`` Gaussian releases (no amplification); the PLD
    accountant composes the tighter :func:`allocation_parts` instead, which is never above it.
    Its tail goes on to ``span`` standard deviations (:func:`_gaussian_tail`) when given."""
    sigma = _table_sigma(event, adjacency)
    if event.num_selected > 1:
        tables = allocation_tables(sigma, 1)
        name = f"random_allocation(k={event.num_selected} of t={event.num_steps}, no amplification)"
    else:
        tables = allocation_tables(sigma, event.num_steps)
        name = (
            f"random_allocation(t={event.num_steps}, sigma={sigma:.6g}): balls-in-bins pair "
            "(Chua et al. 2025; Feldman & Shenfeld 2025), certified grid"
        )
    eps, remove, add = _gaussian_tail(tables, sigma, span)
    return TabulatedProfileEvent(
        tuple(float(e) for e in eps),
        tuple(float(d) for d in remove),
        tuple(float(d) for d in add),
        relation="add_remove",
        name=name,
    )


def _table_sigma(event: RandomAllocationEvent, adjacency: Adjacency) -> float:
    """The noise multiplier the epoch's table is made for: the step's merged multiplier, and
    for ``k > 1`` steps per record that of ``k`` such releases (rounded down)."""
    if adjacency.relation != "add_remove":
        raise UnsupportedEventError(ALLOCATION_NEEDS_ADD_REMOVE)
    sigma = allocation_base(event)
    if event.num_selected > 1:
        sigma = math.nextafter(sigma / math.sqrt(event.num_selected) * (1 - 1e-12), 0.0)
    return sigma


def _upper_profiles(event: RandomAllocationEvent, adjacency: Adjacency) -> DirectedProfiles:
    """The epoch's certified upper curves: its table, or, where a table would reach beyond
    EXP_LIMIT (a nearly noiseless step), the one-release Gaussian profile itself."""
    mu = 1.0 / _table_sigma(event, adjacency)
    if _epsilons(mu)[-1] > EXP_LIMIT:
        one = gaussian_profile(mu)
        return DirectedProfiles(one, one, one, one)
    table = allocation_table_event(event, adjacency)
    assert isinstance(table, TabulatedProfileEvent)
    up = tabulated_profiles(table, adjacency)

    def widened(level: float) -> DirectedProfiles:
        # the table's tail on to where the one-release Gaussian's curve is below the level
        wide = allocation_table_event(event, adjacency, gauss_span(level))
        assert isinstance(wide, TabulatedProfileEvent)
        return tabulated_profiles(wide, adjacency)

    remove = attrs.evolve(up.remove, widen=lambda level: widened(level).remove)
    add = attrs.evolve(up.add, widen=lambda level: widened(level).add)
    return DirectedProfiles(remove, add, remove, add)


def _gaussian_tail(
    tables: AllocationTables, sigma: float, span: float | None = None
) -> tuple[Array, Array, Array]:
    """The tables continued past their last epsilon by the one-release Gaussian profile down to
    TAIL_FLOOR, or to ``span`` standard deviations beyond its mean loss when given (each point
    no larger than the table's last value, which it implies), so a small delta reads a finite
    epsilon."""
    mu = 1.0 / sigma
    eps = tables.epsilons
    step = float(eps[1] - eps[0]) * TAIL_STRIDE
    z = float(-special.ndtri(TAIL_FLOOR)) if span is None else span
    end = mu * (mu / 2 + z)
    if end > EXP_LIMIT or end <= eps[-1]:
        return eps, tables.remove, tables.add
    tail = eps[-1] + step * np.arange(1, math.ceil((end - eps[-1]) / step) + 1)
    gauss = np.asarray(gaussian_profile(mu)(tail), dtype=float)
    return (
        np.concatenate([eps, tail]),
        np.concatenate([tables.remove, np.minimum(gauss, tables.remove[-1])]),
        np.concatenate([tables.add, np.minimum(gauss, tables.add[-1])]),
    )


def allocation_lower_pair(sigma: float, num_steps: int, num_selected: int = 1):  # type: ignore[no-untyped-def]
    """The binned max of the t step outputs under P (the differing record's k steps at 1) and
    Q (all at 0): a post-processing of the remove pair, hence a certified lower bound (made
    once per parameters: a query asks for an epoch's curves several times)."""
    return _lower_pair(float(sigma), int(num_steps), int(num_selected))


@functools.lru_cache(maxsize=32)
def _lower_pair(sigma: float, num_steps: int, num_selected: int):  # type: ignore[no-untyped-def]
    pair = max_of_batches_pair(num_steps, sigma, 1.0, 0.0, "gaussian", shifted=num_selected)
    for masses in (pair.p_lower, pair.p_upper, pair.q_lower, pair.q_upper):
        masses.setflags(write=False)  # shared by every caller
    return pair


def allocation_profiles(event: RandomAllocationEvent, adjacency: Adjacency):  # type: ignore[no-untyped-def]
    """Directed profiles of one epoch: the certified tables above, and the max-of-step-outputs
    lower curves (the record's k steps shifted); one BLAS thread for all of it, also when an
    accountant is called without :func:`~dpledger.accountant.select.account`."""
    with one_blas_thread():
        up = _upper_profiles(event, adjacency)
        forward, backward = _lower_curves(event)
        return DirectedProfiles(up.remove, up.add, forward, backward)


def allocation_side_profiles(
    event: RandomAllocationEvent, adjacency: Adjacency, upper: bool
) -> DirectedProfiles:
    """One side of :func:`allocation_profiles`, the other side trivially certified and cheap:
    the upper curves with the identical pair's curve as lower bounds (below every curve), or
    the lower curves with the curve of the epoch's k Gaussian releases without amplification
    as upper bounds (above the epoch's: it is their post-processing). For a component that
    only one bound composes (an allocation cell's representative)."""
    with one_blas_thread():
        if upper:
            up = _upper_profiles(event, adjacency)
            same = identical_profile()
            return DirectedProfiles(up.remove, up.add, same, same)
        one = gaussian_profile(1.0 / _table_sigma(event, adjacency))
        forward, backward = _lower_curves(event)
        return DirectedProfiles(one, one, forward, backward)


def _lower_curves(event: RandomAllocationEvent) -> tuple[Profile, Profile]:
    """The epoch's certified lower curves (remove, add)."""
    # the lower curve uses the merged multiplier rounded up (the upper one rounds it down)
    sigma = math.nextafter(allocation_base(event) * (1 + 3e-12), math.inf)
    k = event.num_selected
    pair = allocation_lower_pair(sigma, event.num_steps, k)
    name = f"allocation_max(k={k} of t={event.num_steps}, gaussian scale={sigma:g})"
    mu = math.nextafter(1.0 / sigma, 0.0)  # of the remove pair, 1 / sigma rounded down
    if k == 1:  # and the likelihood ratio of the remove pair
        return gaussian_attack_profiles(pair, mu, event.num_steps, name, one_top=True)
    # and the lattice sums of the step outputs' likelihood ratios (to SUM_POWERS)
    forward, backward = lower_pair_profiles(pair, name)
    for power in SUM_POWERS if k * SUM_POWER_SHARE >= event.num_steps else (1.0,):
        sum_pair = allocation_sum_pair(mu, event.num_steps, k, power)
        sum_f, sum_b = lower_pair_profiles(sum_pair, name)
        forward = larger_profile(forward, sum_f, f"lower({name}, max and sums)")
        backward = larger_profile(backward, sum_b, f"lower_swapped({name}, max and sums)")
    return forward, backward

"""Parameters of the trajectory method and the privacy events it declares.

Neighbouring relation: one person = one point at one time (event level); optionally one person
= one point at each of up to ``max_contributions`` times (user level). Per time marginal ``i``
the run releases

* a warm start: a private mean (one :class:`GaussianEvent`, multiplier relative to the
  contribution ``R / N_i`` of a point in the public ball of radius ``R`` to the mean), or a
  private mixture (noisy histogram on a public grid + noisy per-cell sums: two Gaussian events);
* ``K`` noisy particle steps, each the Poisson-subsampled Gaussian sum of per-datum clipped
  contributions: ``SelfComposedEvent(PoissonSampledEvent(rho, GaussianEvent(tau)), K)``
  (one such block per annealing phase).

Transport plans and potentials are functions of the released particles only (post-processing).
This module imports neither torch nor POT.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from scipy import special

from dpledger.plugin import (
    Adjacency,
    ComposedEvent,
    Event,
    GaussianEvent,
    InvalidParameterError,
    NoOpEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    positive_finite,
    positive_int,
)

WARM_START_KINDS: tuple[str, ...] = ("none", "mean", "mixture")
PUBLIC_INITS: tuple[str, ...] = ("uniform", "gaussian")


def _optional_positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        positive_finite(instance, attribute, value)


def _rate(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    positive_finite(instance, attribute, value)
    if value > 1.0:
        raise InvalidParameterError(
            attribute.name, f"must lie in (0, 1], got {value!r}", "pass a Poisson rate, e.g. 20/N"
        )


def _to_float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _to_warm_start(value: Any) -> Any:
    """A :class:`WarmStart`, or a plain mapping of its fields (config files)."""
    if isinstance(value, Mapping):
        try:
            return WarmStart(**value)
        except TypeError as exc:
            raise InvalidParameterError(
                "warm_start", str(exc), "use the fields of WarmStart (kind, epsilon, delta, ...)"
            ) from None
    return value


def _to_schedule(value: Any) -> tuple[Any, ...]:
    """A tuple of :class:`Phase`; plain mappings (config files) are converted."""
    if isinstance(value, Mapping | str | bytes):
        raise InvalidParameterError("schedule", "must be a list of phases", "e.g. [Phase(...)]")
    out = []
    for i, ph in enumerate(value):
        if isinstance(ph, Mapping):
            try:
                ph = Phase(**ph)
            except TypeError as exc:
                raise InvalidParameterError(
                    f"schedule[{i}]", str(exc), "give iterations, eta, tau (and diffusivity)"
                ) from None
        out.append(ph)
    return tuple(out)


def _optional_positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        positive_int(instance, attribute, value)


@attrs.frozen
class Phase:
    """One regime of an annealing schedule: ``iterations`` steps at step size ``eta`` and noise
    multiplier ``tau`` (diffusivity defaults to ``tau``, the paper's identification)."""

    iterations: int = attrs.field(validator=positive_int)
    eta: float = attrs.field(validator=positive_finite, converter=float)
    tau: float = attrs.field(validator=positive_finite, converter=float)
    diffusivity: float | None = attrs.field(
        default=None, validator=_optional_positive, converter=_to_float_or_none
    )

    @property
    def temperature(self) -> float:
        return self.tau if self.diffusivity is None else self.diffusivity


@attrs.frozen
class WarmStart:
    """Initialisation of the particles.

    ``kind``: ``"none"`` (public initialisation ``public_init``: uniform on the box around the
    public ball, or ``N(public_mean, public_std^2 I)``), ``"mean"`` (private mean per marginal,
    Prop. 4.1 with the analytic Gaussian calibration) or ``"mixture"`` (noisy histogram on a
    public ``grid`` x ``grid`` lattice, the ``components`` cells with the largest noisy counts,
    noisy mean per selected cell; particles spread inside each cell). Privacy is either
    ``(epsilon, delta)`` per marginal or a ``noise_multiplier`` relative to the per-point
    contribution (``R/N`` for the mean; for the mixture this multiplier is that of the combined
    count+sum release, each part getting ``sqrt(2)`` times it).
    """

    kind: str = "none"
    epsilon: float | None = attrs.field(default=None, converter=_to_float_or_none)
    delta: float | None = attrs.field(default=None, converter=_to_float_or_none)
    noise_multiplier: float | None = attrs.field(
        default=None, validator=_optional_positive, converter=_to_float_or_none
    )
    spread: float = attrs.field(default=0.0, converter=float)
    grid: int = attrs.field(default=8, validator=positive_int)
    components: int = attrs.field(default=3, validator=positive_int)
    public_init: str = "uniform"
    public_mean: tuple[float, ...] | None = None
    public_std: float = attrs.field(default=0.2, validator=positive_finite, converter=float)

    def __attrs_post_init__(self) -> None:
        if self.kind not in WARM_START_KINDS:
            raise InvalidParameterError(
                "warm_start.kind", f"unknown kind {self.kind!r}", f"use one of {WARM_START_KINDS}"
            )
        if self.public_init not in PUBLIC_INITS:
            raise InvalidParameterError(
                "warm_start.public_init", f"unknown {self.public_init!r}", f"use {PUBLIC_INITS}"
            )
        if not (self.spread >= 0 and math.isfinite(self.spread)):
            raise InvalidParameterError(
                "warm_start.spread", f"got {self.spread!r}", "pass a public spread >= 0"
            )
        if self.kind == "none":
            return
        by_budget = self.epsilon is not None or self.delta is not None
        if by_budget == (self.noise_multiplier is not None):
            raise InvalidParameterError(
                "warm_start",
                "give exactly one of (epsilon, delta) or noise_multiplier",
                "e.g. WarmStart('mean', epsilon=1.0, delta=5e-4)",
            )
        if by_budget:
            if self.epsilon is None or not (self.epsilon > 0 and math.isfinite(self.epsilon)):
                raise InvalidParameterError(
                    "warm_start.epsilon", f"got {self.epsilon!r}", "pass epsilon > 0"
                )
            if self.delta is None or not (0 < self.delta < 1):
                raise InvalidParameterError(
                    "warm_start.delta", f"got {self.delta!r}", "pass delta in (0, 1)"
                )


def _float_tuple_or_none(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(x) for x in value)


def _int_tuple_or_none(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(x) for x in value)


@attrs.frozen
class TrajectoryParams:
    """Everything public that determines a run and its privacy cost.

    ``tau`` is the DP noise multiplier (Gaussian std ``tau*C`` on the clipped sum), ``C`` the
    per-datum clipping bound of the whole ``m x d`` contribution block, ``rho`` the Poisson
    rate, ``eta`` the step size, ``lambda_``/``sigma`` the data-fit weight and bandwidth.
    ``diffusivity`` is the reference-process diffusivity (entropic OT regularisation
    ``diffusivity*dt`` and Langevin temperature); ``None`` means ``tau`` as in the paper.
    ``schedule`` (annealing phases) replaces ``(K, eta, tau, diffusivity)`` when non-empty.
    ``time_subset`` restricts the run to those time indices (a public choice; see
    :func:`subsample_times`); untouched marginals release nothing. ``times_per_iteration`` (``z``)
    turns on subsampled time (Sec. 4.2): the end marginals keep their private warm start and each
    iteration updates ``z`` random interior marginals (see :func:`time_epochs`).
    """

    m: int = attrs.field(default=50, validator=positive_int)
    K: int = attrs.field(default=20, validator=positive_int)
    tau: float = attrs.field(default=1.0, validator=positive_finite, converter=float)
    C: float = attrs.field(default=1.0, validator=positive_finite, converter=float)
    rho: float = attrs.field(default=0.05, validator=_rate, converter=float)
    eta: float = attrs.field(default=1e-3, validator=positive_finite, converter=float)
    lambda_: float = attrs.field(default=1.0, validator=positive_finite, converter=float)
    sigma: float = attrs.field(default=0.1, validator=positive_finite, converter=float)
    diffusivity: float | None = attrs.field(
        default=None, validator=_optional_positive, converter=_to_float_or_none
    )
    schedule: tuple[Phase, ...] = attrs.field(default=(), converter=_to_schedule)
    warm_start: WarmStart = attrs.field(factory=WarmStart, converter=_to_warm_start)
    radius: float = attrs.field(default=1.0, validator=positive_finite, converter=float)
    center: tuple[float, ...] | None = attrs.field(default=None, converter=_float_tuple_or_none)
    time_subset: tuple[int, ...] | None = attrs.field(default=None, converter=_int_tuple_or_none)
    times_per_iteration: int | None = attrs.field(default=None, validator=_optional_positive_int)
    sinkhorn_iters: int = attrs.field(default=2000, validator=positive_int)
    sinkhorn_tol: float = attrs.field(default=1e-9, validator=positive_finite, converter=float)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.warm_start, WarmStart):
            raise InvalidParameterError(
                "warm_start",
                f"expected a WarmStart, got {type(self.warm_start).__name__}",
                "pass WarmStart(...) or a table of its fields",
            )
        if self.times_per_iteration is not None and self.warm_start.kind == "none":
            raise InvalidParameterError(
                "times_per_iteration",
                "time subsampling holds the two end marginals at their private warm start",
                "set warm_start.kind to 'mean' or 'mixture' (privatised endpoints, Sec. 4.2)",
            )
        for i, ph in enumerate(self.schedule):
            if not isinstance(ph, Phase):
                raise InvalidParameterError(
                    f"schedule[{i}]",
                    f"expected a Phase, got {type(ph).__name__}",
                    "pass Phase(iterations, eta, tau)",
                )
        if self.time_subset is not None:
            ts = self.time_subset
            if len(ts) < 2 or len(set(ts)) != len(ts) or list(ts) != sorted(ts) or ts[0] < 0:
                raise InvalidParameterError(
                    "time_subset",
                    f"must be >= 2 increasing distinct indices, got {ts}",
                    "e.g. subsample_times(T, z, seed)",
                )

    def phases(self) -> tuple[Phase, ...]:
        """The effective annealing schedule (a single phase when ``schedule`` is empty)."""
        if self.schedule:
            return self.schedule
        return (Phase(self.K, self.eta, self.tau, self.diffusivity),)

    @property
    def total_iterations(self) -> int:
        return sum(ph.iterations for ph in self.phases())


def subsample_times(T: int, z: int, seed: int = 0) -> tuple[int, ...]:
    """Endpoints plus ``z`` interior time indices drawn uniformly without replacement.

    The choice is public (it does not look at the data). No privacy amplification is claimed
    for it: :func:`declare` accounts each selected marginal in full.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 2:
        raise InvalidParameterError("T", f"got {T!r}", "pass T >= 2")
    if isinstance(z, bool) or not isinstance(z, int) or not 0 <= z <= T - 2:
        raise InvalidParameterError("z", f"must lie in [0, {T - 2}], got {z!r}", "lower z")
    rng = np.random.default_rng(seed)
    inner = sorted(int(i) for i in rng.choice(np.arange(1, T - 1), size=z, replace=False))
    return (0, *inner, T - 1)


# --------------------------------------------------------------------------------------------
# Gaussian calibration and the paper's GDP statement


def _gauss_delta(s: float, epsilon: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism, noise multiplier ``s``, sensitivity 1."""
    a = 0.5 / s - epsilon * s
    b = -0.5 / s - epsilon * s
    return float(np.exp(special.log_ndtr(a)) - np.exp(epsilon + special.log_ndtr(b)))


def analytic_gaussian_multiplier(epsilon: float, delta: float) -> float:
    """Smallest noise multiplier (std / L2 sensitivity) giving (epsilon, delta)-DP.

    Exact Gaussian privacy profile (Balle & Wang 2018); bisection returns the upper end of the
    final bracket, so the result is never too small. Replaces Prop. 4.1's ``sqrt(2 log(1/delta))
    / epsilon``, which is not a valid calibration for all (epsilon, delta).
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InvalidParameterError("epsilon", f"got {epsilon!r}", "pass epsilon > 0")
    if not (0 < delta < 1):
        raise InvalidParameterError("delta", f"got {delta!r}", "pass delta in (0, 1)")
    lo, hi = 1e-6, 1.0
    while _gauss_delta(hi, epsilon) > delta:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise InvalidParameterError("delta", "is too small to calibrate", "raise delta")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _gauss_delta(mid, epsilon) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def paper_gdp_mu(rho: float, K: int, tau: float) -> float:
    """Lemma 3.1 (CLT of Bu et al.): ``mu = rho * sqrt(K (exp(1/tau^2) - 1))``.

    Asymptotic (K -> infinity): not an upper bound, printed only beside the certified one.
    """
    return float(rho * math.sqrt(K * math.expm1(1.0 / tau**2)))


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP (Dong, Roth & Su, Cor. 2.13)."""
    return _gauss_delta(1.0 / mu, epsilon)


def gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon(delta) of mu-GDP by bisection (upper end of the bracket)."""
    lo, hi = 0.0, 1.0
    while gdp_delta(mu, hi) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gdp_delta(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


# --------------------------------------------------------------------------------------------
# Declaration


def warm_start_multipliers(ws: WarmStart, adjacency: Adjacency) -> tuple[float, ...]:
    """Noise multipliers of the warm-start release(s) of one marginal (relative to the add/remove
    contribution; the adjacency's replace-one factor is folded in when calibrating to (eps, delta)).
    """
    if ws.kind == "none":
        return ()
    if ws.noise_multiplier is not None:
        total = ws.noise_multiplier
    else:
        assert ws.epsilon is not None and ws.delta is not None
        total = adjacency.sensitivity_factor * analytic_gaussian_multiplier(ws.epsilon, ws.delta)
    if ws.kind == "mean":
        return (total,)
    # count and sum: two Gaussians whose composition is exactly a Gaussian of multiplier `total`
    return (total * math.sqrt(2.0), total * math.sqrt(2.0))


def time_epochs(n_interior: int, z: int) -> int:
    """Iterations per epoch of subsampled time: ``ceil(n_interior / z)``.

    Each epoch shuffles the interior marginals (public randomness) and updates them ``z`` at a
    time, so every interior marginal is updated exactly once per complete epoch.
    """
    if isinstance(n_interior, bool) or not isinstance(n_interior, int) or n_interior < 1:
        raise InvalidParameterError(
            "times_per_iteration",
            f"needs at least one interior time, got {n_interior!r}",
            "use T >= 3 used times, or drop times_per_iteration",
        )
    if isinstance(z, bool) or not isinstance(z, int) or not 1 <= z <= n_interior:
        raise InvalidParameterError(
            "times_per_iteration",
            f"must lie in [1, {n_interior}], got {z!r}",
            f"choose at most the {n_interior} interior times",
        )
    return -(-n_interior // z)


def steps_per_phase(params: TrajectoryParams, n_used: int) -> tuple[int, ...]:
    """Private particle steps each (interior) marginal takes in every phase.

    Without subsampled time: the phase's iterations. With ``z`` of ``n`` interior times per
    iteration: one step per (possibly partial) epoch, ``ceil(iterations / ceil(n / z))``.
    """
    phases = params.phases()
    if params.times_per_iteration is None:
        return tuple(ph.iterations for ph in phases)
    E = time_epochs(n_used - 2, params.times_per_iteration)
    return tuple(-(-ph.iterations // E) for ph in phases)


def marginal_event(
    params: TrajectoryParams, adjacency: Adjacency, steps: Sequence[int] | None = None
) -> Event:
    """Everything one used marginal releases: warm start, then every phase's particle steps.

    ``steps`` overrides the number of private steps per phase (``0`` for an end marginal under
    subsampled time, which keeps its warm start).
    """
    parts: list[Event] = [
        GaussianEvent(s) for s in warm_start_multipliers(params.warm_start, adjacency)
    ]
    counts = [ph.iterations for ph in params.phases()] if steps is None else list(steps)
    for ph, count in zip(params.phases(), counts, strict=True):
        if count > 0:
            step = PoissonSampledEvent(params.rho, GaussianEvent(ph.tau))
            parts.append(SelfComposedEvent(step, count))
    if not parts:
        return NoOpEvent()
    return parts[0] if len(parts) == 1 else ComposedEvent(parts)


@attrs.frozen
class Declaration:
    """The declared releases per marginal and how they combine.

    ``parallel`` is True at event level: marginals hold disjoint people, so the guarantee is the
    worst per-marginal one (parallel composition). ``event`` is a single event that upper-bounds
    the whole run and must be accounted under ``account_adjacency`` (the row-level relation; a
    user-level composition over time points is already inside ``event``).
    """

    per_marginal: tuple[Event, ...]
    parallel: bool
    event: Event
    account_adjacency: Adjacency
    notes: str


def _n_list(n_per_time: int | Sequence[int], T: int) -> list[int]:
    if isinstance(T, bool) or not isinstance(T, int) or T < 2:
        raise InvalidParameterError("T", f"must be an integer >= 2, got {T!r}", "pass T >= 2")
    ns = [n_per_time] * T if isinstance(n_per_time, int | np.integer) else list(n_per_time)
    if len(ns) != T:
        raise InvalidParameterError(
            "n_per_time", f"has {len(ns)} entries for T={T}", "give one count per time"
        )
    for i, n in enumerate(ns):
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise InvalidParameterError(
                f"n_per_time[{i}]", f"must be an integer >= 1, got {n!r}", "pass positive counts"
            )
    return [int(n) for n in ns]


def declare_marginals(
    params: TrajectoryParams, adjacency: Adjacency, n_per_time: int | Sequence[int], T: int
) -> Declaration:
    """Per-marginal events, the parallel flag and one event bounding the whole run."""
    _n_list(n_per_time, T)
    used = set(range(T)) if params.time_subset is None else set(params.time_subset)
    if max(used) >= T:
        raise InvalidParameterError(
            "time_subset", f"index {max(used)} is out of range for T={T}", "use indices < T"
        )
    ev = marginal_event(params, adjacency, steps_per_phase(params, len(used)))
    ends = {min(used), max(used)} if params.times_per_iteration is not None else set()
    end_ev = marginal_event(params, adjacency, [0] * len(params.phases()))
    per = tuple((end_ev if i in ends else ev) if i in used else NoOpEvent() for i in range(T))
    n_used = len(used)
    if adjacency.unit == "row":
        return Declaration(
            per,
            True,
            ev,
            adjacency.row_level,
            "event level: each person is one point at one time; marginals are disjoint, so "
            "the per-marginal events compose in parallel (the guarantee is that of one marginal)",
        )
    if adjacency.contribution != "time_points":
        raise InvalidParameterError(
            "adjacency.contribution",
            "user-level adjacency must bound the number of time points per user",
            "use Adjacency(unit='user', unit_key=..., contribution='time_points', "
            "max_contributions=k) with at most one point per user per time",
        )
    k = min(adjacency.max_contributions, n_used)
    event = ev if k == 1 else SelfComposedEvent(ev, k)
    return Declaration(
        per,
        False,
        event,
        adjacency.row_level,
        f"user level: a person contributes to up to {k} of the {n_used} used marginals, whose "
        "releases compose sequentially; account the event under the row-level relation",
    )


def declare(
    params: TrajectoryParams, adjacency: Adjacency, n_per_time: int | Sequence[int], T: int
) -> Event:
    """One event upper-bounding the run (see :func:`declare_marginals` for the structure)."""
    return declare_marginals(params, adjacency, n_per_time, T).event


def run_event(
    params: TrajectoryParams, adjacency: Adjacency, n_per_time: int | Sequence[int], T: int
) -> Event:
    """The event a run under one runtime ledger executes (what the method spec declares).

    Event level: the run releases all marginals' steps *jointly* (one noisy release of the
    stacked per-marginal sums per step; a person sits in one marginal, so the stacked query's
    sensitivity is that of one marginal), which is exactly :func:`declare`'s per-marginal event.
    User level: one release per marginal, composed sequentially over every used marginal (a
    single ledger cannot verify that a person sits in at most ``k`` of them; the ``k``-fold
    bound of :func:`declare_marginals` is the tighter accounting-only statement).
    """
    dec = declare_marginals(params, adjacency, n_per_time, T)
    if dec.parallel:
        return dec.event
    used = [e for e in dec.per_marginal if not isinstance(e, NoOpEvent)]
    return used[0] if len(used) == 1 else ComposedEvent(used)

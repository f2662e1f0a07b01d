"""The trajectory method as a dpledger method plugin (``dpledger run trajectories``).

``declare`` imports neither torch nor POT (it reuses :mod:`.declare`); ``run`` imports the
dynamics lazily and draws every bit of privacy noise and every Poisson sample through the
runtime ledger (:class:`~dpledger.plugins.trajectories.noise.LedgerNoise`).

Config for ``dpledger run trajectories --config FILE --out DIR`` (TOML)::

    data = "marginals.npz"     # arrays 'marginals' [T, N, d] or 'marginal_0', 'marginal_1', ...
                               # (ragged sizes), optional 'times' [T]
    delta = 1e-3
    [params]
    n_per_time = [674, 674, ...]   # public marginal sizes (or one integer and T = ...)
    m = 50
    K = 20
    tau = 0.87
    rho = 0.0297
    radius = 0.7072
    center = [0.5, 0.5]
    [params.warm_start]
    kind = "mean"
    epsilon = 1.0
    delta = 5e-4
    [adjacency]                # optional; default add/remove of one row (event level)
    relation = "add_remove"

Data passed to ``run`` directly (e.g. through :func:`~dpledger.runtime.runner.run_verified`) may
be a mapping with an optional ``progress`` entry: a callable ``progress(k)`` called after every
private iteration with the number of iterations done so far (``1 .. total_iterations``). It
receives only that count (public), never particles or data; ``None`` or absent: no calls.

Outputs: ``particles`` [U, m, d], ``init_particles``, ``times``, ``time_index``, ``plans``
[U-1, m, m] (entropic plans between consecutive used times; post-processing), ``paths``
[n_paths, U, d] when ``n_paths`` > 0 (synthetic paths along the plans; post-processing), the
effective Langevin temperature per phase, the private steps per time, and the trajectory paper's
asymptotic GDP parameter ``paper_gdp_mu`` per phase (Lemma 3.1; *not* a bound -- the
certified bound is the ledger's ``privacy`` entry, and the report section
``trajectories_gdp_check`` prints both side by side).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Declaration,
    Event,
    InvalidParameterError,
    Ledger,
    MethodSpec,
    ProofRef,
    ReportSectionSpec,
    ball_marginals,
    hookimpl,
)
from dpledger.plugins.trajectories.data import validate_marginals
from dpledger.plugins.trajectories.declare import (
    TrajectoryParams,
    paper_gdp_mu,
    run_event,
    steps_per_phase,
)
from dpledger.plugins.trajectories.example import make_example
from dpledger.plugins.trajectories.report import render_gdp_check


def _sizes(value: Any) -> int | tuple[int, ...]:
    if isinstance(value, bool):
        raise InvalidParameterError("n_per_time", f"got {value!r}", "pass marginal sizes")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise InvalidParameterError(
            "n_per_time", f"got {value!r}", "pass one public size per time, e.g. [674, 674]"
        )
    out = []
    for i, n in enumerate(value):
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise InvalidParameterError(f"n_per_time[{i}]", f"got {n!r}", "pass sizes >= 1")
        out.append(int(n))
    return tuple(out)


def _optional_times(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(t) for t in value)


@attrs.frozen
class TrajectoriesParams(TrajectoryParams):
    """:class:`TrajectoryParams` plus what ``declare`` needs without the data.

    ``n_per_time``: public marginal sizes (a list, or one integer with ``T``), used for means
    and batch rates in place of the data's sizes, which are private (add/remove changes them).
    ``times``: observation times (default ``(i-1)/(T-1)``; the data file's ``times``
    otherwise). ``device``: torch device of the run. ``n_paths``: synthetic paths to sample
    from the released particles and plans (post-processing; ``0``: none).
    """

    n_per_time: int | tuple[int, ...] = attrs.field(kw_only=True, converter=_sizes)
    T: int | None = attrs.field(default=None, kw_only=True)
    times: tuple[float, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_optional_times
    )
    device: str = attrs.field(default="cpu", kw_only=True)
    n_paths: int = attrs.field(default=0, kw_only=True)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if isinstance(self.n_per_time, int):
            if isinstance(self.T, bool) or not isinstance(self.T, int) or self.T < 2:
                raise InvalidParameterError(
                    "T",
                    f"must be an integer >= 2 with a single n_per_time, got {self.T!r}",
                    "give T (the number of times) or one size per time in n_per_time",
                )
        else:
            if len(self.n_per_time) < 2:
                raise InvalidParameterError(
                    "n_per_time",
                    f"needs >= 2 times, got {len(self.n_per_time)}",
                    "pass one size per observation time (T >= 2)",
                )
            if self.T is not None and len(self.n_per_time) != self.T:
                raise InvalidParameterError(
                    "T",
                    f"{self.T} != len(n_per_time) = {len(self.n_per_time)}",
                    "drop T or make them agree",
                )
        if self.times is not None and len(self.times) != self.num_times:
            raise InvalidParameterError(
                "times",
                f"has {len(self.times)} entries for T = {self.num_times}",
                "give one time per marginal",
            )
        used = self.num_times if self.time_subset is None else len(self.time_subset)
        if self.time_subset is not None and max(self.time_subset) >= self.num_times:
            raise InvalidParameterError(
                "time_subset",
                f"index {max(self.time_subset)} >= T = {self.num_times}",
                "use indices < T",
            )
        steps_per_phase(self, used)  # validates times_per_iteration
        if not isinstance(self.device, str) or not self.device:
            raise InvalidParameterError("device", f"got {self.device!r}", "use 'cpu' or 'cuda'")
        if isinstance(self.n_paths, bool) or not isinstance(self.n_paths, int) or self.n_paths < 0:
            raise InvalidParameterError(
                "n_paths", f"must be an integer >= 0, got {self.n_paths!r}", "pass e.g. 300 or 0"
            )

    @property
    def num_times(self) -> int:
        if isinstance(self.n_per_time, int):
            assert self.T is not None
            return self.T
        return len(self.n_per_time)

    @property
    def sizes(self) -> tuple[int, ...]:
        if isinstance(self.n_per_time, int):
            return (self.n_per_time,) * self.num_times
        return self.n_per_time


def declare(params: TrajectoriesParams, adjacency: Adjacency) -> Event | Declaration:
    """The event the run spends (see :func:`.declare.run_event`); stated per user at user
    level, where the run keeps at most one point per user and time (``ledger.bound_units``)."""
    event = run_event(params, adjacency, list(params.sizes), params.num_times)
    return Declaration(event, "user") if adjacency.unit == "user" else event


def one_point_per_user(marginals: list[np.ndarray], ledger: Ledger) -> list[np.ndarray]:
    """Each marginal with at most one point per user (the first), enforced by the ledger by the
    user ids it read from the data (``ids`` [T, N], or ``ids_0``, ``ids_1``, ...)."""
    units = ledger.units
    if units is None or units.num_parts != len(marginals):
        raise InvalidParameterError(
            "data.ids",
            "user-level runs need the user id of every point at every time",
            "store 'ids' [T, N] (or 'ids_0', 'ids_1', ...) beside the marginals, or run at "
            "event level",
        )
    out = []
    for t, points in enumerate(marginals):
        if units.rows_in(t) != len(points):
            raise InvalidParameterError(
                f"data.ids[{t}]",
                f"has {units.rows_in(t)} ids for {len(points)} points",
                "give one user id per point",
            )
        out.append(np.asarray(points)[ledger.bound_units(1, part=t, step=f"units[{t}]")])
    return out


def read_data(data: Any) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Marginals and optional times from a mapping (``marginals`` or ``marginal_0``, ...,
    optional ``times``), an object with ``marginals``/``times`` attributes, or a sequence."""
    if data is None:
        raise InvalidParameterError(
            "data",
            "the trajectory method needs the time marginals",
            "set data = 'marginals.npz' in the config (or pass --data)",
        )
    times = None
    if isinstance(data, Mapping):
        times = data.get("times")
        if "marginals" in data:
            marg = data["marginals"]
        else:
            keys = sorted(
                (k for k in data if str(k).startswith("marginal_")),
                key=lambda k: (
                    int(str(k).split("_", 1)[1]) if str(k).split("_", 1)[1].isdigit() else -1
                ),
            )
            if not keys:
                raise InvalidParameterError(
                    "data",
                    f"has no marginals (keys: {sorted(map(str, data))})",
                    "store 'marginals' [T, N, d] or 'marginal_0', 'marginal_1', ...",
                )
            bad = [k for k in keys if not str(k).split("_", 1)[1].isdigit()]
            if bad or [int(str(k).split("_", 1)[1]) for k in keys] != list(range(len(keys))):
                raise InvalidParameterError(
                    "data",
                    f"marginal keys {keys} are not marginal_0 ... marginal_{{T-1}}",
                    "number the marginals consecutively from 0",
                )
            marg = [data[k] for k in keys]
    elif hasattr(data, "marginals"):
        marg, times = data.marginals, getattr(data, "times", None)
    else:
        marg = data
    return marg, None if times is None else np.asarray(times, dtype=np.float64)


def read_progress(data: Any) -> Callable[[int], Any] | None:
    """The optional ``progress`` callable of a data mapping (``None`` when absent)."""
    progress = data.get("progress") if isinstance(data, Mapping) else None
    if progress is not None and not callable(progress):
        raise InvalidParameterError(
            "data.progress",
            f"got {type(progress).__name__}, not a callable",
            "pass a function progress(k) of the number of iterations done, or leave it out",
        )
    return progress


def run(
    params: TrajectoriesParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """Run the private dynamics under ``ledger``; ``rng`` drives public randomness only."""
    from dpledger.plugin import torch_device
    from dpledger.plugins.trajectories import mfld
    from dpledger.plugins.trajectories.noise import LedgerNoise

    torch_device(params.device)  # an unavailable device fails before any noise is drawn
    marg, file_times = read_data(data)
    if ledger.adjacency.unit == "user":
        marg = one_point_per_user([np.asarray(m) for m in marg], ledger)
    marginals = validate_marginals(marg, params.radius, params.center)
    if len(marginals) != params.num_times:
        raise InvalidParameterError(
            "n_per_time",
            f"gives {params.num_times} times but the data has {len(marginals)} marginals",
            "give one public size per marginal of the data",
        )
    # the true sizes are private (add/remove changes them): means and batch rates use the
    # public ones, and a mismatch is a private diagnostic, never a refusal
    ledger.private_log.append({"step": "marginal_sizes", "sizes": [len(x) for x in marginals]})
    index = range(params.num_times) if params.time_subset is None else params.time_subset
    n_public = [params.sizes[i] for i in index]
    times = params.times if params.times is not None else file_times
    progress = read_progress(data)
    noise = LedgerNoise(ledger, rng)
    res = mfld.run(
        marginals,
        params,
        adjacency=ledger.adjacency,
        times=times,
        noise=noise,
        device=params.device,
        n_public=n_public,
        joint=ledger.adjacency.unit == "row",
        schedule_rng=rng,
        callback=None if progress is None else lambda k, _x: progress(k),
    )
    U = len(res.time_index)
    steps = steps_per_phase(params, U)
    return {
        **_synthetic_paths(res, params, rng),
        "particles": res.particles,
        "init_particles": res.init_particles,
        "times": res.times,
        "time_index": np.asarray(res.time_index, dtype=np.int64),
        "plans": np.stack(res.plans) if res.plans else np.zeros((0, params.m, params.m)),
        "temperatures": [float(t) for t in res.temperatures],
        "private_steps": {str(k): int(v) for k, v in res.private_steps.items()},
        "sinkhorn_unconverged": int(res.sinkhorn_unconverged),
        "paper_gdp_mu": [
            paper_gdp_mu(params.rho, n, ph.tau)
            for ph, n in zip(params.phases(), steps, strict=True)
        ],
        "paper_gdp_note": "Lemma 3.1 (asymptotic CLT, K >> 1): not an upper bound; the "
        "certified bound is the ledger's privacy entry",
    }


def _synthetic_paths(
    res: Any, params: TrajectoriesParams, rng: np.random.Generator
) -> dict[str, Any]:
    """``paths`` [n_paths, U, d] drawn along the released plans through the released particles
    with public randomness (post-processing); nothing when ``params.n_paths`` is 0."""
    if params.n_paths == 0:
        return {}
    from dpledger.plugins.trajectories.trajectories import sample_paths

    D = params.phases()[-1].temperature
    paths = sample_paths(res.particles, list(res.plans), res.times, params.n_paths, D, rng)
    return {"paths": paths.points}


SPEC = MethodSpec(
    name="trajectories",
    params=TrajectoriesParams,
    declare=declare,
    run=run,
    description="private continuous-time trajectories by noisy mean-field Langevin dynamics "
    "(clipped per-datum blocks, Poisson-subsampled Gaussian particle steps, "
    "optional private warm start and subsampled time)",
    proof=ProofRef(
        "Gu, Chien & Greenewald, private continuous-time synthetic trajectories via mean-field "
        "Langevin dynamics: Algorithm 1 is DP-SGD on the clipped data-fit blocks (Lemma 3.1); "
        "warm start by the Gaussian mechanism (Prop. 4.1); parallel composition over disjoint "
        "marginals (Lemma A.3); plans and paths are post-processing",
        "docs/methods/trajectories.md",
    ),
    example=make_example,
    neighbours=ball_marginals,
)

GDP_SECTION = ReportSectionSpec(
    name="trajectories_gdp_check",
    title="Poisson-subsampled Gaussian steps: paper's asymptotic GDP vs certified bound",
    render=render_gdp_check,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)


@hookimpl
def dpledger_register_report_sections(register: Any) -> None:
    register(GDP_SECTION)

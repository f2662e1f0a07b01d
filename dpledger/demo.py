"""The end-to-end demo: account a pipeline, run the private trajectory method, report.

The demo reaches the method only through the plugin host, as ``dpledger run`` does, and uses
only what the method registers (steps all on data made up here, nothing downloaded):

1. find the method ``trajectories`` through the plugin host and ask it for its worked example
   (``MethodSpec.example``: the multimodal trajectory data of the trajectory paper, three
   branches, and the public facts of that data: sizes and domain);
2. build its parameters, declare once, write the pipeline that the declaration corresponds to
   (``pipeline.toml``: one partition by time, a private mixture warm start and ``K``
   Poisson-subsampled Gaussian particle steps per marginal; checked equal to the method's
   declared event) and account it, refusing to run if no accountant can bound it;
3. run the method with :func:`~dpledger.runtime.runner.run_verified`: every private draw goes
   through one runtime :class:`~dpledger.runtime.ledger.PrivacyLedger`, verified against the
   declaration before anything is written; the method's outputs include synthetic paths
   sampled from the released particles and plans (post-processing);
4. write the synthetic trajectories (``synthetic.npz``, ``synthetic_paths.csv``) and the run
   record (``ledger.json``), and, in the private directory beside the output directory
   (``OUT.private``, never inside it), the private diagnostics the example computes against its
   raw data (``PRIVATE-diagnostics.json``, ``PRIVATE-trajectories.png``: never published);
5. write the privacy report (Markdown with PNG figures, self-contained HTML, JSON).
"""

from __future__ import annotations

import contextlib
import math
import tomllib
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.core.specs import Example, MethodSpec
from dpledger.runtime.coverage import canonical_multiset
from dpledger.runtime.record_seal import write_seal

if TYPE_CHECKING:  # the run session loads the accountant: imported when the demo runs
    from dpledger.runtime.runner import RunResult
    from dpledger.runtime.session import RunPlan

#: the registered method the demo runs
METHOD = "trajectories"
#: the pipeline the run declares, written beside its record
PIPELINE_FILE = "pipeline.toml"


@attrs.frozen
class DemoConfig:
    """Sizes and parameters of the demo (the defaults run in well under three minutes)."""

    N: int = 400  # points per time marginal (each from a different person)
    T: int = 6  # observation times
    m: int = 60  # particles per marginal
    K: int = 30  # private particle steps
    rho: float = 0.05  # Poisson rate (expected batch rho * N)
    tau: float = 1.0  # noise multiplier of every particle step
    C: float = 50.0  # clipping bound of a datum's whole contribution block
    eta: float = 0.005
    lambda_: float = 0.3
    sigma: float = 0.1
    diffusivity: float = 0.005
    warm_epsilon: float = 1.0  # per-marginal (epsilon, delta) of the private mixture warm start
    warm_delta: float = 5e-4
    grid: int = 6
    components: int = 3
    delta: float = 1e-5  # the report's delta
    n_paths: int = 300
    sinkhorn_iters: int = 400
    seed: int = 0


#: a configuration small enough for a smoke test (a few seconds)
TINY = DemoConfig(N=60, T=3, m=12, K=3, rho=0.2, n_paths=20, sinkhorn_iters=100)


@attrs.frozen
class DemoResult:
    out: Path
    files: tuple[Path, ...]
    epsilon: float
    delta: float
    method: str
    w2_init: float
    w2_final: float


# -- the pipeline file -------------------------------------------------------------------------
def _f(x: float) -> str:
    return repr(float(x))


def pipeline_toml(config: DemoConfig, warm: tuple[float, ...], delta: float) -> str:
    """The pipeline the run declares (one cell per time marginal, composed in parallel)."""
    gaussians = ", ".join(f'{{ kind = "gaussian", noise_multiplier = {_f(s)} }}' for s in warm)
    step = (
        f'{{ kind = "poisson_sampled", sampling_probability = {_f(config.rho)}, '
        f'event = {{ kind = "gaussian", noise_multiplier = {_f(config.tau)} }} }}'
    )
    return f"""# The demo's private trajectory run, event level: every point of every time marginal
# belongs to a different person, so the T marginals are disjoint and compose in parallel.
name = "demo-private-trajectories"
delta = {_f(delta)}

[[sources]]
name = "observations"
description = "{config.T} time marginals of {config.N} two-dimensional points each"
adjacency = {{ relation = "add_remove", unit = "row" }}

[[transforms]]
id = "by_time"
kind = "partition"
input = "observations"
key = "time"
cells = {config.T}
public_key = true

[[releases]]
id = "warm_start"
input = "by_time"
method = "private_mixture_warm_start"
description = "noisy counts on a public {config.grid}x{config.grid} grid, noisy sums of the \
{config.components} heaviest cells"
event = {{ kind = "composed", events = [{gaussians}] }}

[[releases]]
id = "particle_steps"
input = "by_time"
after = ["warm_start"]
count = {config.K}
method = "noisy_particle_gd"
description = "noisy mean-field Langevin steps: clipped data-fit blocks summed over a \
Poisson sample, plus Gaussian noise"
event = {step}

[[postprocess]]
id = "trajectories"
description = "entropic transport plans between released particles; synthetic paths \
sampled from them"
inputs = ["particle_steps"]
"""


# -- progress ------------------------------------------------------------------------------------
@contextlib.contextmanager
def progress_bar(total: int, desc: str, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A tqdm bar when tqdm is installed and not ``quiet``; otherwise a no-op."""
    bar: Any = None
    if not quiet:
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)
        except ImportError:
            bar = None

    def update(n: int = 1) -> None:
        if bar is not None:
            bar.update(n)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


# -- the demo ------------------------------------------------------------------------------------
def _check_out(out: Path) -> None:
    """``out`` and its private directory (``OUT.private``) must be new or empty."""
    from dpledger.runtime.run_record import check_run_dirs_free

    check_run_dirs_free(out)


def demo_example(spec: MethodSpec, config: DemoConfig) -> Example:
    """The method's own worked example (its data and public facts) at the demo's sizes."""
    if spec.example is None:
        raise InvalidParameterError(
            "demo", f"method {spec.name!r} has no example", "run a method that registers one"
        )
    return spec.example({"N": config.N, "T": config.T, "seed": config.seed})


def demo_params(spec: MethodSpec, config: DemoConfig, public: Mapping[str, Any]) -> Any:
    """The method's parameters for ``config`` (built by the spec, as from a config file);
    ``public`` holds the values the example's data fixes publicly (sizes, domain)."""
    return spec.make_params(
        {
            "m": config.m,
            "K": config.K,
            "tau": config.tau,
            "C": config.C,
            "rho": config.rho,
            "eta": config.eta,
            "lambda_": config.lambda_,
            "sigma": config.sigma,
            "diffusivity": config.diffusivity,
            "sinkhorn_iters": config.sinkhorn_iters,
            "sinkhorn_tol": 1e-6,
            "n_paths": config.n_paths,
            "warm_start": {
                "kind": "mixture",
                "epsilon": config.warm_epsilon,
                "delta": config.warm_delta,
                "grid": config.grid,
                "components": config.components,
            },
            **public,
        }
    )


def pipeline_event(config: DemoConfig, warm: tuple[float, ...]) -> Event:
    """One marginal's event as ``pipeline.toml`` states it (warm start, then ``K`` steps)."""
    step = PoissonSampledEvent(config.rho, GaussianEvent(config.tau))
    return ComposedEvent(
        [ComposedEvent([GaussianEvent(s) for s in warm]), SelfComposedEvent(step, config.K)]
    )


def declared_warm_start(declared: Event) -> tuple[float, ...]:
    """Noise multipliers of the plain Gaussian releases of a declaration (its warm start): the
    Gaussian events of its composition that are not inside a sampled or repeated step."""
    if isinstance(declared, GaussianEvent):
        return (declared.noise_multiplier,)
    if isinstance(declared, ComposedEvent):
        return tuple(s for e in declared.events for s in declared_warm_start(e))
    return ()


def _check_declaration(pipeline: Event, declared: Event, method: str) -> None:
    """The accounted pipeline must state exactly the event the method declares."""
    if canonical_multiset(pipeline) != canonical_multiset(declared):
        raise LedgerViolationError(
            f"pipeline.toml states {pipeline.describe()} but method {method!r} declares "
            f"{declared.describe()}. Fix: write the pipeline from the method's parameters"
        )


def _require_libraries() -> None:
    """The trajectory method needs torch and POT; say how to install them if they are missing."""
    try:
        import ot  # noqa: F401  (POT: path sampling and the metrics use it)
        import torch  # noqa: F401
    except ImportError as exc:
        raise InvalidParameterError(
            "demo",
            f"the trajectory method needs torch and POT ({exc})",
            "pip install 'dpledger[trajectories,reports]'",
        ) from None


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """torch limited to one thread for the block (restored after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_demo(
    out: Path,
    config: DemoConfig = DemoConfig(),
    *,
    quiet: bool = False,
    say: Callable[[str], None] = print,
    confirm: Callable[[Path, bool], None] | None = None,
) -> DemoResult:
    """Run every step and write the outputs into ``out`` (new or empty directory);
    ``confirm(out, quiet)`` confirms the written run (by default a clean room verifies it)."""
    from dpledger.report.numbers import fmt_up
    from dpledger.runtime.plugin_manager import PluginHost

    host = PluginHost.create(builtin_only=True)  # builtin code only: no third-party plugin
    spec = host.method(METHOD)
    _require_libraries()
    _check_out(out)
    log = (lambda _msg: None) if quiet else say
    with _one_torch_thread():
        example = demo_example(spec, config)
        params = demo_params(spec, config, example.params)
        plan, pipeline, account = _plan_and_account(host, spec, params, config)
        bound = account.bound
        log(
            f"accounted {PIPELINE_FILE}: epsilon <= {fmt_up(bound.epsilon)} at delta = "
            f"{config.delta:g} ({bound.method}, {account.adjacency_description()})"
        )
        run, notes = _run_verified(plan, example, config, quiet)
        log(
            f"ran {params.total_iterations} private particle steps of method {spec.name!r} on "
            f"{config.T} marginals; ledger verified ({len(run.ledger.log)} steps, executed = "
            "declared)"
        )
        utility = _write_run(out, plan, run, pipeline, example, config)
        extra = [*_clt_notes(run.outputs, config), *notes]
        built, files = _write_report(out, host, extra, quiet)
    write_seal(out)
    (confirm or _confirm_in_clean_room)(out, quiet)
    files = [*_written(out), *files, out / "seal.json"]
    report = built.report
    _log_utility(log, utility)
    log(report.statement)
    return DemoResult(
        out,
        tuple(files),
        float(report.bound["epsilon"]),
        config.delta,
        report.accounting_method,
        float(utility.get("w2_warm_start", math.nan)),
        float(utility.get("w2_final", math.nan)),
    )


def _confirm_in_clean_room(out: Path, quiet: bool) -> None:
    """Have a clean room recompute the sealed run's bound (from ``pipeline.toml``), its
    declaration and the coverage of its executed steps."""
    from dpledger.cleanroom.launch import run_in_clean_room

    options = {"targets": [str(out)], "quiet": quiet, "plugins_allow": None, "plugins_block": None}
    if run_in_clean_room("verify", options) != 0:
        raise LedgerViolationError(
            f"the clean room did not confirm the run written to {out} (the mismatches are "
            "above). Fix: rerun the demo into a new directory, and report the mismatch"
        )


def _plan_and_account(
    host: Any, spec: MethodSpec, params: Any, config: DemoConfig
) -> tuple[RunPlan, str, Any]:
    """Declare once (the run session's plan), write the pipeline the declaration states
    (checked equal to it) and account that pipeline, before any noise is drawn."""
    from dpledger.accountant.graph_account import account_graph
    from dpledger.runtime.pipeline import parse_pipeline
    from dpledger.runtime.session import plan

    planned = plan(spec, params, Adjacency(), host.lower, delta=config.delta)
    declared = planned.declared.core
    warm = declared_warm_start(declared)
    _check_declaration(pipeline_event(config, warm), declared, spec.name)
    text = pipeline_toml(config, warm, config.delta)
    pipeline = parse_pipeline(tomllib.loads(text), origin=PIPELINE_FILE)
    return planned, text, account_graph(pipeline.graph, delta=config.delta)


def _run_verified(
    plan: RunPlan, example: Example, config: DemoConfig, quiet: bool
) -> tuple[RunResult, list[str]]:
    """The registered method run under one verified runtime ledger (executed = declared), and
    the notes on the warnings it raised."""
    from dpledger.runtime.session import execute

    params = plan.declared.params
    with (
        progress_bar(params.total_iterations, "private particle steps", quiet) as tick,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        data = {**example.data, "progress": lambda _k: tick(1)}
        run = execute(plan.declared, data, seed=config.seed)
    ledger = run.ledger
    if not ledger.matches_exactly():
        raise LedgerViolationError(
            f"method {plan.spec.name!r} spent less than it declared "
            f"({ledger.executed_event().describe()} within {run.declared.describe()}). Fix: "
            "account what the run executes"
        )
    return run, _sinkhorn_notes(caught)


def _clt_notes(outputs: Mapping[str, Any], config: DemoConfig) -> list[str]:
    """The paper's asymptotic GDP statement (a released output) beside the certified bound."""
    from dpledger.accountant.conversions import gaussian_delta_bracket, smallest_eps_with

    mu = float(outputs["paper_gdp_mu"][0])
    clt = smallest_eps_with(lambda e: gaussian_delta_bracket(e, mu)[1] <= config.delta)
    return [
        f"the trajectory paper's central-limit formula (Lemma 3.1, μ = ρ·√(K(e^(1/τ²) − 1)) "
        f"= {mu:.4g}-GDP) gives ε ≈ {clt:.4g} at δ = {config.delta:g} for the particle "
        "steps alone; it is asymptotic (K → ∞), not an upper bound, and is not used here",
        "the warm start is calibrated with the exact analytic Gaussian mechanism (the paper's "
        "√(2 ln(1/δ))/ε calibration is not valid for every (ε, δ))",
    ]


def _write_report(out: Path, host: Any, extra: list[str], quiet: bool) -> tuple[Any, list[Path]]:
    """The privacy report of the run directory (Markdown with figures, HTML, JSON)."""
    from dpledger.report import report_run_dir, write_report
    from dpledger.report.figures import CAPTIONS, make_figures

    built = report_run_dir(out, host=host, extra_warnings=extra)
    with progress_bar(len(CAPTIONS), "report figures", quiet) as tick:
        figures = make_figures(built, progress=lambda _k: tick(1))
    files: list[Path] = []
    for fmt in ("md", "html", "json"):
        files += write_report(built, fmt, out / f"report.{fmt}", figures=figures)
    return built, files


def _written(out: Path) -> list[Path]:
    """The run's files: the public ones, then the private files (beside ``out``)."""
    from dpledger.runtime.run_record import private_dir

    return sorted(out.iterdir()) + sorted(private_dir(out).glob("PRIVATE-*"))


def _log_utility(log: Callable[[str], None], utility: Mapping[str, Any]) -> None:
    """Print the example's private diagnostics, labelled as such."""
    if {"w2_warm_start", "w2_final"} <= set(utility):
        log(
            f"private diagnostic (uses the raw data; not for publication): W2 to the true "
            f"marginals, warm start {utility['w2_warm_start']:.4f}, final particles "
            f"{utility['w2_final']:.4f}"
        )


def _write_run(
    out: Path,
    plan: RunPlan,
    run: RunResult,
    pipeline: str,
    example: Example,
    config: DemoConfig,
) -> Mapping[str, Any]:
    """The run directory, written by the run session's writer: the outputs and the record
    (``ledger.json``), the pipeline it states, the synthetic paths (post-processing); in the
    private directory beside ``out``, the seed and the example's private diagnostics (which
    are returned)."""
    from dpledger.runtime.run_dir import write_run_dir
    from dpledger.runtime.session import record

    outputs = run.outputs
    utility: dict[str, Any] = {}

    def published(where: Path) -> None:
        (where / PIPELINE_FILE).write_text(pipeline, encoding="utf-8")
        np.savez(
            where / "synthetic.npz",
            particles=outputs["particles"],
            times=outputs["times"],
            paths=outputs["paths"],
            init_particles=outputs["init_particles"],
        )
        _write_csv(where / "synthetic_paths.csv", outputs["paths"], outputs["times"])

    def diagnostics(secret: Path) -> Mapping[str, Any]:
        # the diagnostics are functions of the raw data: private, beside the published files
        utility.update(example.diagnose(outputs, secret) if example.diagnose else {})
        return {"utility": dict(utility)}

    write_run_dir(
        out,
        outputs,
        record(plan, run, pipeline=PIPELINE_FILE),
        {"seed": config.seed, **run.ledger.private_dict()},
        extra=published,
        private_extra=diagnostics,
    )
    return utility


def _sinkhorn_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    msgs = sorted({str(w.message) for w in caught})
    return [f"utility, not privacy: {m}" for m in msgs]


def _write_csv(path: Path, points: np.ndarray, times: np.ndarray) -> None:
    n, U, d = points.shape
    cols = ",".join(f"x{j}" for j in range(d))
    lines = [f"path,time,{cols}"]
    for p in range(n):
        for u in range(U):
            coords = ",".join(f"{v:.8g}" for v in points[p, u])
            lines.append(f"{p},{times[u]:.8g},{coords}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

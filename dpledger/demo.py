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
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
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

#: the registered method the demo runs
METHOD = "trajectories"


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
) -> DemoResult:
    """Run every step and write the outputs into ``out`` (new or empty directory)."""
    from dpledger.report.numbers import fmt_up
    from dpledger.runtime.plugin_manager import PluginHost

    host = PluginHost.create(builtin_only=True)  # builtin code only: no third-party plugin
    spec = host.method(METHOD)
    _require_libraries()
    _check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    log = (lambda _msg: None) if quiet else say
    with _one_torch_thread():
        example = demo_example(spec, config)
        params = demo_params(spec, config, example.params)
        pipeline_path, account, declaration = _declare_and_account(out, host, spec, params, config)
        bound = account.bound
        log(
            f"accounted {pipeline_path.name}: epsilon <= {fmt_up(bound.epsilon)} at delta = "
            f"{config.delta:g} ({bound.method}, {account.adjacency_description()})"
        )
        run, notes = _run_verified(spec, params, example, declaration, config, quiet)
        log(
            f"ran {params.total_iterations} private particle steps of method {spec.name!r} on "
            f"{config.T} marginals; ledger verified ({len(run.ledger.log)} steps, executed = "
            "declared)"
        )
        _write_synthetic(out, run.outputs)
        secret = _private_dir(out)
        utility = dict(example.diagnose(run.outputs, secret)) if example.diagnose else {}
        _write_records(out, host, spec, params, run, pipeline_path.name, bound, config, utility)
        extra = [*_clt_notes(run.outputs, config), *notes]
        built, files = _write_report(out, host, extra, quiet)
    _confirm_in_clean_room(out, quiet)
    files = [pipeline_path, *_written(out), *files, out / "seal.json"]
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
    """Seal the published files, then have the clean room recompute the run's bound (from
    ``pipeline.toml``), its declaration and the coverage of its executed steps."""
    from dpledger.cleanroom.launch import run_in_clean_room
    from dpledger.runtime.record_seal import write_seal

    write_seal(out)
    options = {"targets": [str(out)], "quiet": quiet, "plugins_allow": None, "plugins_block": None}
    if run_in_clean_room("verify", options) != 0:
        raise LedgerViolationError(
            f"the clean room did not confirm the run written to {out} (the mismatches are "
            "above). Fix: rerun the demo into a new directory, and report the mismatch"
        )


def _declare_and_account(
    out: Path, host: Any, spec: MethodSpec, params: Any, config: DemoConfig
) -> tuple[Path, Any, Declaration]:
    """Declare once, write ``pipeline.toml`` (checked equal to the declaration) and account it
    before any noise is drawn."""
    from dpledger.accountant.graph_account import account_graph
    from dpledger.runtime.pipeline import load_pipeline
    from dpledger.runtime.runner import declare_checked

    declaration = declare_checked(spec, params, Adjacency())
    declared = host.lower(declaration.event)
    warm = declared_warm_start(declared)
    _check_declaration(pipeline_event(config, warm), declared, spec.name)
    pipeline_path = out / "pipeline.toml"
    pipeline_path.write_text(pipeline_toml(config, warm, config.delta), encoding="utf-8")
    account = account_graph(load_pipeline(pipeline_path).graph, delta=config.delta)
    return pipeline_path, account, declaration


def _run_verified(
    spec: MethodSpec,
    params: Any,
    example: Example,
    declaration: Declaration,
    config: DemoConfig,
    quiet: bool,
) -> tuple[Any, list[str]]:
    """The registered method run under one verified runtime ledger (executed = declared), and
    the notes on the warnings it raised."""
    from dpledger.runtime.runner import run_verified

    with (
        progress_bar(params.total_iterations, "private particle steps", quiet) as tick,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        run = run_verified(
            spec,
            params,
            {**example.data, "progress": lambda _k: tick(1)},
            adjacency=Adjacency(),
            seed=config.seed,
            declaration=declaration,
        )
    ledger = run.ledger
    if not ledger.matches_exactly():
        raise LedgerViolationError(
            f"method {spec.name!r} spent less than it declared "
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


def _private_dir(out: Path) -> Path:
    """The private directory beside ``out`` (``OUT.private``), created (checked new or empty)."""
    from dpledger.runtime.run_record import private_dir

    secret = private_dir(out)
    secret.mkdir(parents=True, exist_ok=True)
    return secret


def _written(out: Path) -> list[Path]:
    """The run's files: the public record and outputs, then the private files (beside ``out``)."""
    from dpledger.runtime.run_record import RECORD_FILE, private_dir

    public = [out / RECORD_FILE, out / "synthetic.npz", out / "synthetic_paths.csv"]
    return public + sorted(private_dir(out).glob("PRIVATE-*"))


def _log_utility(log: Callable[[str], None], utility: Mapping[str, Any]) -> None:
    """Print the example's private diagnostics, labelled as such."""
    if {"w2_warm_start", "w2_final"} <= set(utility):
        log(
            f"private diagnostic (uses the raw data; not for publication): W2 to the true "
            f"marginals, warm start {utility['w2_warm_start']:.4f}, final particles "
            f"{utility['w2_final']:.4f}"
        )


def _write_synthetic(out: Path, outputs: Mapping[str, Any]) -> None:
    """The synthetic paths the run sampled from its released particles and plans
    (post-processing), as ``synthetic.npz`` and ``synthetic_paths.csv``."""
    np.savez(
        out / "synthetic.npz",
        particles=outputs["particles"],
        times=outputs["times"],
        paths=outputs["paths"],
        init_particles=outputs["init_particles"],
    )
    _write_csv(out / "synthetic_paths.csv", outputs["paths"], outputs["times"])


def _write_records(
    out: Path,
    host: Any,
    spec: MethodSpec,
    params: Any,
    run: Any,
    pipeline_name: str,
    bound: Any,
    config: DemoConfig,
    utility: Mapping[str, Any],
) -> None:
    """The public run record and, in the private directory beside ``out``, the private
    diagnostics (seed, the example's diagnostics)."""
    from dpledger.runtime.run_record import PRIVATE_FILE, RECORD_FILE, RunRecord, private_dir

    ledger = run.ledger
    record = RunRecord(
        method=spec.name,
        provenance=spec.provenance.to_dict() if spec.provenance else None,
        params=attrs.asdict(params),
        ledger={**ledger.to_dict(), "executed": _grouped(ledger.public_executed_event()).to_dict()},
        declared_core=host.lower(run.declared).to_dict(),
        privacy=bound.to_dict(),
        pipeline=pipeline_name,
        exact_match=ledger.public_matches_exactly(),
    ).with_outputs(
        {"synthetic": "synthetic.npz", "paths": "synthetic_paths.csv"},
        {k: v for k, v in run.outputs.items() if not isinstance(v, np.ndarray)},
    )
    _write_json(out / RECORD_FILE, record.to_json())
    # the seed undoes the noise and the diagnostics are functions of the data: both are
    # private, kept out of the public run record
    _write_json(
        private_dir(out) / PRIVATE_FILE,
        {
            "warning": "PRIVATE: the noise seed and data-dependent values of this run. Never "
            "publish this file with the outputs.",
            "seed": config.seed,
            "utility": dict(utility),
            **ledger.private_dict(),
        },
    )


def _grouped(event: Event) -> Event:
    """``event`` with runs of equal consecutive steps folded into ``SelfComposedEvent``
    (the same composition, written compactly; ``ledger.json`` keeps every step in ``steps``)."""
    if not isinstance(event, ComposedEvent):
        return event
    parts: list[Event] = []
    counts: list[int] = []
    for e in event.events:
        if parts and parts[-1] == e:
            counts[-1] += 1
        else:
            parts.append(e)
            counts.append(1)
    grouped = [e if n == 1 else SelfComposedEvent(e, n) for e, n in zip(parts, counts, strict=True)]
    return grouped[0] if len(grouped) == 1 else ComposedEvent(grouped)


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


def _write_json(path: Path, value: Any) -> None:
    import json

    from dpledger.report.model import json_safe

    path.write_text(json.dumps(json_safe(value), indent=2, sort_keys=True) + "\n", encoding="utf-8")

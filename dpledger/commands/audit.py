"""``dpledger audit``: an empirical epsilon lower bound against the accountant's claimed epsilon.

Two modes: ``dpledger audit --mechanism ...`` audits a core mechanism on its canonical
worst-case pair; ``dpledger audit METHOD --config FILE`` runs an installed method on
neighbouring datasets built from the config's data (:mod:`dpledger.audit.method_audit`);
``dpledger audit --opacus SCRIPT.py --one-run`` audits an Opacus training run in one run
(:mod:`dpledger.commands._audit_opacus`).

Exit status: 0 when no violation is found, 1 when the empirical lower bound exceeds the claimed
epsilon at some delta, 2 on bad input (including "no accountant can bound this event").
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from dpledger.audit.auditor import VIOLATION, AuditResult, audit_event
from dpledger.audit.method_audit import MIN_RUNS, MethodAuditResult, audit_method
from dpledger.commands._inputs import load_data, read_config
from dpledger.commands._shared import add_plugin_options, host_from_args
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

MECHANISMS = ("gaussian", "laplace", "randomized_response")
#: config keys that are not method parameters (as in ``dpledger run``)
CONFIG_KEYS = frozenset({"params", "data", "adjacency", "delta"})
#: options of the mechanism mode and their defaults (a method audit must leave them unset)
MECHANISM_OPTIONS = {
    "noise_multiplier": None,
    "epsilon": None,
    "buckets": 2,
    "adjacency": "add_remove",
    "sampling_rate": None,
    "count": 1,
    "samples": 1_000_000,
    "search_samples": None,
    "black_box": False,
}
METHOD_OPTIONS = {
    "config": None,
    "data": None,
    "relation": None,
    "runs": None,
    "one_run": False,
    "canaries": None,
    "mode": None,
    "score": None,
}
#: the options of a one-run audit (given without --one-run, each is refused)
ONE_RUN_OPTIONS = {"canaries": None, "mode": None, "score": None}


def _add_method_audit_options(p: Any) -> None:
    """The options of auditing an installed method (its run config, data, relation, runs)."""
    m = p.add_argument_group("method audit")
    m.add_argument(
        "--config",
        type=Path,
        help="TOML or JSON run config: [params], "
        "data = 'file', [adjacency] (as for `dpledger run`)",
    )
    m.add_argument("--data", type=Path, help="data file (overrides the config)")
    m.add_argument(
        "--relation",
        choices=("add_remove", "replace_one", "both"),
        default=None,
        help="neighbouring relation (default: the config's adjacency relation)",
    )
    m.add_argument(
        "--runs",
        default=None,
        metavar="N",
        help=f"method runs per dataset (default 2000, at least {MIN_RUNS})",
    )
    o = p.add_argument_group("one-run audit (--one-run)")
    o.add_argument(
        "--one-run",
        action="store_true",
        help="one run with canaries, each included with probability 1/2 (Steinke et al. 2023)",
    )
    o.add_argument("--canaries", default=None, metavar="M", help="number of canaries (1000)")
    o.add_argument(
        "--opacus",
        default=None,
        metavar="SCRIPT.py[:FUNCTION]",
        help="audit an Opacus training run: the script's FUNCTION (default opacus_training) "
        "returns (model, optimizer, data_loader, train) after PrivacyEngine.make_private "
        "(docs/auditing.md)",
    )
    o.add_argument(
        "--mode",
        choices=("white-box", "black-box"),
        default=None,
        help="white-box: gradient canaries seen at every noisy step (default); black-box: "
        "canary records scored on the released linear model",
    )
    o.add_argument(
        "--score",
        choices=("llr", "sum"),
        default=None,
        help="white-box score: per-step likelihood ratio (default) or sum of noisy coordinates",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit",
        help="empirical epsilon lower bound vs the accountant's certified epsilon",
        description=(
            "Sample a mechanism's worst-case neighbouring pair (--mechanism), or run an installed "
            "METHOD on neighbouring datasets built from its config's data (a canary record "
            "added or swapped in); find the most revealing event on one split and bound epsilon "
            "from below on a fresh split (one-sided Clopper-Pearson, Bonferroni over deltas "
            "and relations). A lower bound above the claim is a violation (exit 1); 'no "
            "violation found' is NOT a verification."
        ),
    )
    p.add_argument(
        "method",
        metavar="METHOD",
        nargs="?",
        default=None,
        help="installed method to audit (see `dpledger plugins`); needs --config",
    )
    p.add_argument(
        "--mechanism",
        choices=MECHANISMS,
        default=None,
        help="core mechanism to audit on its canonical pair",
    )
    _add_method_audit_options(p)
    add_plugin_options(p)
    p.add_argument("--noise-multiplier", type=float, help="noise std (or Laplace scale) / C")
    p.add_argument("--epsilon", type=float, help="epsilon of randomized response")
    p.add_argument("--buckets", type=int, default=2, help="randomized-response buckets")
    p.add_argument("--adjacency", choices=("add_remove", "replace_one"), default="add_remove")
    p.add_argument("--sampling-rate", type=float, help="Poisson sampling probability q")
    p.add_argument("--count", type=int, default=1, help="number of composed repetitions")
    p.add_argument("--delta", type=float, nargs="+", default=[1e-3], help="deltas to audit")
    p.add_argument(
        "--claimed-epsilon", type=float, help="audit this claim instead of the accountant's"
    )
    p.add_argument("--samples", type=int, default=1_000_000, help="test samples per side")
    p.add_argument("--search-samples", type=int, help="search samples per side (default samples/5)")
    p.add_argument("--alpha", type=float, default=0.05, help="1 - confidence")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--black-box", action="store_true", help="threshold raw outputs, not the LLR")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def build_event(args: argparse.Namespace) -> Event:
    """The core event described by the command-line arguments."""
    event: Event
    if args.mechanism == "randomized_response":
        if args.epsilon is None:
            raise InvalidParameterError("--epsilon", "is required", "pass --epsilon 1.0")
        event = RandomizedResponseEvent(epsilon=args.epsilon, num_buckets=args.buckets)
    else:
        if args.noise_multiplier is None:
            raise InvalidParameterError(
                "--noise-multiplier", "is required", "pass --noise-multiplier 1.0"
            )
        cls = GaussianEvent if args.mechanism == "gaussian" else LaplaceEvent
        event = cls(noise_multiplier=args.noise_multiplier)
    if args.sampling_rate is not None:
        event = PoissonSampledEvent(sampling_probability=args.sampling_rate, event=event)
    if args.count != 1:
        event = SelfComposedEvent(event=event, count=args.count)
    return event


def _fmt(x: float | None, spec: str = ".4f") -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else format(x, spec)


def format_result(result: AuditResult) -> str:
    """Human-readable table of an audit."""
    lines = [
        f"audit: {result.description}",
        f"score: {result.score_mode}; {result.n_search} search + {result.n_test} test samples per"
        f" side; confidence {1 - result.alpha:.0%} jointly over {len(result.audits)} delta(s)",
        f"claim: {result.claim_source}",
        f"{'delta':>9}  {'eps_lower':>9}  {'claimed':>9}  {'verdict':<18}  {'ceiling':>7}  "
        f"{'resol.':>7}  witness",
    ]
    for a in result.audits:
        w = a.witness
        op = ">=" if w.tail == "upper" else "<="
        lines.append(
            f"{a.delta:>9.2g}  {a.epsilon_lower:>9.4f}  {_fmt(a.claimed_epsilon):>9}  "
            f"{a.verdict:<18}  {_fmt(a.ceiling, '.3f'):>7}  {_fmt(a.resolution, '.3f'):>7}  "
            f"{w.direction} S={{score {op} {w.threshold:.4g}}} "
            f"hits {w.hits_first}/{w.n_first} vs {w.hits_second}/{w.n_second}"
        )
    lines += [
        f"no power at delta {a.delta:.2g}: the test event was hit on neither side "
        f"(0/{a.witness.n_first} vs 0/{a.witness.n_second}), so eps_lower is 0 whatever the "
        "true epsilon and this audit could not have found a violation"
        for a in result.audits
        if a.no_power
    ]
    lines.append(
        "note: eps_lower can only falsify the claim; 'no violation found' is not 'verified'. "
        "Violations smaller than the resolution, or above the ceiling, go unseen."
    )
    return "\n".join(lines)


def power_advice(option: str, count: int, params: Any = None) -> str:
    """What would give an audit without power some: ten times ``count`` (the ``--runs`` or
    ``--samples`` it had; the search then picks its event among ten times as many outputs
    and the test counts it on ten times as many), or, for a method with a
    ``noise_multiplier``, less noise in a copy of the config audited instead."""
    advice = (
        f"for power, rerun with {option} {10 * count} (ten times as many, and ten times the "
        "time: the event is then chosen and counted on ten times as many outputs)"
    )
    if getattr(params, "noise_multiplier", None) is not None:
        advice += (
            ", or audit a copy of the config with a smaller noise_multiplier (for the audit "
            "only: the claim is recomputed for it, and a violation there is one of the same code)"
        )
    return advice


def _check_mode(args: argparse.Namespace) -> None:
    if args.method is not None and args.mechanism is not None:
        raise InvalidParameterError(
            "METHOD",
            "and --mechanism were both given",
            "audit either a method or a mechanism, not both",
        )
    if args.method is None and args.mechanism is None:
        raise InvalidParameterError(
            "METHOD", "is missing", "name a method (with --config) or pass --mechanism gaussian"
        )
    mode, others, other_name = (
        ("METHOD", MECHANISM_OPTIONS, "--mechanism")
        if args.method is not None
        else ("--mechanism", METHOD_OPTIONS, "METHOD")
    )
    for name, default in others.items():
        if getattr(args, name) != default:
            flag = "--" + name.replace("_", "-")
            raise InvalidParameterError(
                flag, f"does not apply to a {mode} audit", f"drop it, or audit a {other_name}"
            )


def run(args: argparse.Namespace) -> int:
    if args.opacus is not None:
        from dpledger.commands._audit_opacus import run_opacus

        return run_opacus(args, _confirm_claims)
    _check_mode(args)
    if args.method is not None:
        return run_method(args)
    event = build_event(args)
    adjacency = Adjacency(relation=args.adjacency)
    if args.samples < 10:
        raise InvalidParameterError("--samples", "must be >= 10", "pass e.g. 1000000")
    n_search = args.search_samples or max(10, args.samples // 5)
    try:
        result = audit_event(
            event,
            adjacency,
            claimed_epsilon=args.claimed_epsilon,
            deltas=tuple(args.delta),
            alpha=args.alpha,
            n_search=n_search,
            n_test=args.samples,
            rng=args.seed,
            white_box=not args.black_box,
        )
    except UnsupportedEventError as exc:
        raise UnsupportedEventError(
            f"{exc}; pass --claimed-epsilon to audit a claim of your own"
        ) from None
    advice = power_advice("--samples", args.samples) if result.no_power else None
    if args.json:
        out = result.to_dict()
        out["event"] = event.to_dict()
        out["adjacency"] = adjacency.to_dict()
        out["power_advice"] = advice
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(format_result(result) + (f"\n{advice}" if advice else ""))
    return 1 if result.verdict == VIOLATION else 0


def _runs(raw: str | None) -> int:
    if raw is None:
        return 2000
    try:
        return int(raw)
    except ValueError:
        raise InvalidParameterError(
            "--runs", f"must be an integer >= {MIN_RUNS}, got {raw!r}", "pass e.g. --runs 2000"
        ) from None


def _method_setup(args: argparse.Namespace) -> tuple[Any, Any, Any, Adjacency]:
    """The config's method parameters, data and adjacency (as ``dpledger run`` reads them)."""
    if args.config is None:
        raise InvalidParameterError(
            "--config",
            "is required to audit a method",
            "pass --config run.toml ([params], data = 'file')",
        )
    config = read_config(args.config)
    host = host_from_args(args, on_demand=True)  # a third-party method loads its distribution
    spec = host.method(args.method)
    table = config.get("params", {k: v for k, v in config.items() if k not in CONFIG_KEYS})
    if not isinstance(table, dict):
        raise InvalidParameterError("params", "must be a table", "write [params] key = value")
    params = spec.make_params(table)
    adj_table = config.get("adjacency", {})
    if not isinstance(adj_table, dict):
        raise InvalidParameterError("adjacency", "must be a table", "write [adjacency]")
    try:
        adjacency = Adjacency(**adj_table)
    except TypeError as exc:
        raise InvalidParameterError(
            "adjacency", str(exc), "use relation, unit, max_contributions, unit_key"
        ) from None
    data_path = args.data or (args.config.parent / config["data"] if "data" in config else None)
    data = load_data(data_path) if data_path is not None else None
    return host, spec, (params, data), adjacency


def format_method_result(result: MethodAuditResult, advice: str | None = None) -> str:
    """Human-readable tables, one per audited relation (and ``advice`` for an audit that had
    no power)."""
    lines = [
        f"method audit of {result.method!r}: {result.runs} runs per dataset, seed "
        f"{result.seed}, confidence {1 - result.alpha:.0%} jointly over "
        f"{len(result.relations)} relation(s)"
    ]
    for rel in result.relations:
        lines += ["", f"relation: {rel.relation}", format_result(rel.result)]
    for rel_name, reason in result.skipped:
        lines.append(f"relation {rel_name}: not audited ({reason})")
    if advice:
        lines.append(advice)
    lines.append(f"verdict: {result.verdict}")
    return "\n".join(lines)


def _method_claims(result: MethodAuditResult) -> dict[str, list[tuple[float, float]]]:
    """relation -> the finite (delta, claimed epsilon) pairs a method audit used."""
    return {
        rel.relation: [
            (a.delta, a.claimed_epsilon)
            for a in rel.result.audits
            if a.claimed_epsilon is not None and math.isfinite(a.claimed_epsilon)
        ]
        for rel in result.relations
    }


def _confirm_claims(
    args: argparse.Namespace,
    method: str,
    params: Any,
    adjacency: Adjacency,
    claims: dict[str, list[tuple[float, float]]],
) -> int:
    """The clean room recomputes every claim (relation -> (delta, epsilon) pairs) the audit
    used (0 when they all hold)."""
    import attrs

    from dpledger.cleanroom.launch import run_for
    from dpledger.runtime.jsonform import json_safe

    relations = [
        {"relation": relation, "claims": [[d, e] for d, e in pairs]}
        for relation, pairs in claims.items()
    ]
    options = {
        "method": method,
        "params": json_safe(attrs.asdict(params)),
        "adjacency": adjacency.to_dict(),
        "relations": relations,
    }
    return run_for(args, "audit_claims", options)


def run_method(args: argparse.Namespace) -> int:
    if args.one_run:
        from dpledger.commands._audit_one_run import run_one_run

        return run_one_run(args, _method_setup, _confirm_claims)
    for name in ONE_RUN_OPTIONS:
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            raise InvalidParameterError(flag, "applies to a one-run audit", "add --one-run")
    runs = _runs(args.runs)
    host, spec, (params, data), adjacency = _method_setup(args)
    result = audit_method(
        spec,
        params,
        data,
        adjacency=adjacency,
        relation=args.relation,
        runs=runs,
        deltas=tuple(args.delta),
        alpha=args.alpha,
        seed=args.seed,
        claimed_epsilon=args.claimed_epsilon,
        lower=host.lower,
    )
    claims = _method_claims(result)
    if args.claimed_epsilon is None and (
        code := _confirm_claims(args, result.method, params, adjacency, claims)
    ):
        return code
    advice = power_advice("--runs", runs, params) if result.no_power else None
    if args.json:
        print(json.dumps({**result.to_dict(), "power_advice": advice}, indent=2, allow_nan=False))
    else:
        print(format_method_result(result, advice))
    return 1 if result.verdict == VIOLATION else 0

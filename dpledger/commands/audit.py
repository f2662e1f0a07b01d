"""``dpledger audit``: an empirical epsilon lower bound against the accountant's claimed epsilon.

Exit status: 0 when no violation is found, 1 when the empirical lower bound exceeds the claimed
epsilon at some delta, 2 on bad input (including "no accountant can bound this event").
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from dpledger.core.adjacency import Adjacency
from dpledger.core.audit.auditor import VIOLATION, AuditResult, audit_event
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


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit",
        help="empirical epsilon lower bound vs the accountant's certified epsilon",
        description=(
            "Sample the mechanism's worst-case neighbouring pair, find the most revealing event on "
            "one split and bound epsilon from below on a fresh split (one-sided Clopper-Pearson, "
            "Bonferroni over deltas). A lower bound above the claim is a violation; 'no "
            "violation found' is NOT a verification."
        ),
    )
    p.add_argument("--mechanism", choices=MECHANISMS, default="gaussian")
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
    lines.append(
        "note: eps_lower can only falsify the claim; 'no violation found' is not 'verified'. "
        "Violations smaller than the resolution, or above the ceiling, go unseen."
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
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
    if args.json:
        out = result.to_dict()
        out["event"] = event.to_dict()
        out["adjacency"] = adjacency.to_dict()
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(format_result(result))
    return 1 if result.verdict == VIOLATION else 0

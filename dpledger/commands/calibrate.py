"""``dpledger calibrate``: the smallest noise multiplier that meets an (ε, δ) target."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from dpledger.commands._shared import one_line_errors, parse_number
from dpledger.core.adjacency import RELATIONS, Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="smallest Gaussian noise multiplier meeting an (epsilon, delta) target",
        description="Find the smallest noise multiplier sigma such that `steps` Poisson-"
        "subsampled Gaussian steps (rate q) are certified (epsilon, delta)-DP.",
    )
    parser.add_argument("--epsilon", required=True, help="target epsilon (> 0)")
    parser.add_argument("--delta", required=True, help="target delta in (0, 1)")
    parser.add_argument("--sampling-rate", default="1.0", help="Poisson rate q in [0, 1]")
    parser.add_argument("--steps", default="1", help="number of steps (integer >= 1)")
    parser.add_argument(
        "--adjacency", default="add_remove", help=f"neighbouring relation: {', '.join(RELATIONS)}"
    )
    parser.add_argument(
        "--min-sigma", default="0.05", help="lower end of the search range (default 0.05)"
    )
    parser.add_argument(
        "--max-sigma", default="1000", help="upper end of the search range (default 1000)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)
    one_line_errors(parser)


def _inputs(args: argparse.Namespace) -> tuple[float, float, float, int, Adjacency]:
    eps = parse_number(args.epsilon, "--epsilon", "--epsilon 8")
    if not (eps > 0 and math.isfinite(eps)):
        raise InvalidParameterError(
            "--epsilon", f"must be > 0 and finite, got {args.epsilon}", "pass e.g. --epsilon 8"
        )
    delta = parse_number(args.delta, "--delta", "--delta 1e-5")
    if not 0 < delta < 1:
        raise InvalidParameterError(
            "--delta", f"must lie in (0, 1), got {args.delta}", "pass e.g. --delta 1e-5"
        )
    q = parse_number(args.sampling_rate, "--sampling-rate", "--sampling-rate 0.004")
    if not 0 <= q <= 1:
        raise InvalidParameterError(
            "--sampling-rate",
            f"must lie in [0, 1], got {args.sampling_rate}",
            "pass batch size / dataset size, e.g. --sampling-rate 0.004",
        )
    try:
        steps = int(args.steps)
    except ValueError:
        steps = 0
    if steps < 1:
        raise InvalidParameterError(
            "--steps", f"must be an integer >= 1, got {args.steps!r}", "pass e.g. --steps 1000"
        )
    if args.adjacency not in RELATIONS:
        raise InvalidParameterError(
            "--adjacency", f"unknown adjacency {args.adjacency!r}", f"use one of {list(RELATIONS)}"
        )
    return eps, delta, q, steps, Adjacency(relation=args.adjacency)


def _bracket(args: argparse.Namespace) -> tuple[float, float]:
    lo = parse_number(args.min_sigma, "--min-sigma", "--min-sigma 0.05")
    hi = parse_number(args.max_sigma, "--max-sigma", "--max-sigma 1000")
    if not (0 < lo < hi and math.isfinite(hi)):
        raise InvalidParameterError(
            "--min-sigma", f"need 0 < min {lo:g} < max {hi:g} < inf", "pass e.g. --min-sigma 0.05"
        )
    return lo, hi


def make_event_factory(q: float, steps: int) -> Any:
    """sigma -> the composed event of ``steps`` Poisson(q)-subsampled Gaussian steps."""

    def make_event(sigma: float) -> Event:
        step: Event = GaussianEvent(sigma)
        if q < 1.0:
            step = PoissonSampledEvent(q, step)
        return step if steps == 1 else SelfComposedEvent(step, steps)

    return make_event


#: the options the clean room receives
ROOM_OPTIONS = (
    "epsilon",
    "delta",
    "sampling_rate",
    "steps",
    "adjacency",
    "min_sigma",
    "max_sigma",
    "json",
)


def run(args: argparse.Namespace) -> int:
    """Calibrate in the clean room: this process computes and prints nothing itself."""
    from dpledger.cleanroom.launch import run_in_clean_room

    return run_in_clean_room("calibrate", {k: getattr(args, k) for k in ROOM_OPTIONS})


def certify(args: argparse.Namespace) -> int:
    """Search, re-account and print the noise multiplier (run inside the clean room)."""
    eps, delta, q, steps, adjacency = _inputs(args)
    bracket = _bracket(args)
    if q == 0:
        raise InvalidParameterError(
            "--sampling-rate",
            "is 0, so no data is touched and no noise is needed",
            "pass the real rate (batch size / dataset size)",
        )
    try:
        from dpledger.accountant.calibrate import calibrate_noise_multiplier
    except ImportError as exc:
        raise DPLedgerError(
            f"calibration is unavailable ({exc}). Fix: install dpledger with its accountants"
        ) from None
    from dpledger.accountant.base import EpsilonBound
    from dpledger.accountant.select import account

    make_event = make_event_factory(q, steps)
    # the search uses the tight backends; the chosen sigma is re-accounted by every backend below
    result = calibrate_noise_multiplier(make_event, adjacency, eps, delta, bracket=bracket)
    sigma = float(result.noise_multiplier)
    check = account(make_event(sigma), adjacency, delta=delta).bound
    assert isinstance(check, EpsilonBound)
    if check.epsilon > eps:
        raise DPLedgerError(
            f"calibrated sigma {sigma:.6g} gives certified epsilon {check.epsilon:.6g} above the "
            f"target {eps:g}. Fix: report this as a bug; do not use this sigma"
        )
    out = {
        "noise_multiplier": sigma,
        "target_epsilon": eps,
        "epsilon": check.epsilon,
        "epsilon_lower": check.epsilon_lower,
        "delta": delta,
        "sampling_rate": q,
        "steps": steps,
        "adjacency": adjacency.relation,
        "method": check.method,
        "at_min_sigma": sigma <= bracket[0],
    }
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(
            f"noise multiplier: {sigma:.6g}\n"
            f"certified epsilon at this sigma: {check.epsilon:.6g} <= target {eps:g} "
            f"(delta = {delta:g}, method {check.method})\n"
            f"mechanism: {steps} Poisson-subsampled Gaussian steps, q = {q:g}, "
            f"adjacency {adjacency.describe()}\n"
        )
        if sigma <= bracket[0]:
            sys.stdout.write(
                f"note: the target is already met at --min-sigma {bracket[0]:g}; lower it to "
                "search for less noise\n"
            )
    return 0

"""``dpledger calibrate``: the smallest noise multiplier that meets an (ε, δ) target."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import attrs

from dpledger.commands._shared import one_line_errors, parse_number
from dpledger.core.adjacency import RELATIONS, Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

#: the batchings ``--batching`` names, and the relation each is analysed under (None: either)
BATCHINGS: dict[str, str | None] = {
    "poisson": None,
    "shuffled": "replace_one",
    "random-allocation": "add_remove",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="smallest Gaussian noise multiplier meeting an (epsilon, delta) target",
        description="Find the smallest noise multiplier sigma such that `steps` Poisson-"
        "subsampled Gaussian steps (rate q) are certified (epsilon, delta)-DP; with --batching, "
        "`epochs` of shuffled batches or of random allocation of Gaussian steps instead.",
    )
    parser.add_argument("--epsilon", required=True, help="target epsilon (> 0)")
    parser.add_argument("--delta", required=True, help="target delta in (0, 1)")
    parser.add_argument(
        "--batching",
        default="poisson",
        help="how batches are drawn: poisson (rate q), shuffled (shuffled fixed-size batches, "
        "replace-one), random-allocation (each record in K of T steps, add/remove)",
    )
    parser.add_argument(
        "--sampling-rate", default=None, help="Poisson rate q in [0, 1] (default: 1.0)"
    )
    parser.add_argument(
        "--steps",
        default=None,
        help="number of Poisson steps (integer >= 1) (default: 1); with --batching "
        "random-allocation: steps per epoch, required",
    )
    parser.add_argument(
        "--dataset-size", default=None, help="shuffled: number of records N, required"
    )
    parser.add_argument("--batch-size", default=None, help="shuffled: batch size B, required")
    parser.add_argument(
        "--epochs",
        default=None,
        help="shuffled: number of epochs, required; random-allocation: default 1",
    )
    parser.add_argument(
        "--allocations",
        default=None,
        help="random-allocation: steps K each record joins per epoch, default 1",
    )
    parser.add_argument(
        "--adjacency",
        default=None,
        help=f"neighbouring relation: {', '.join(RELATIONS)} (default: add_remove); shuffled "
        "batches are analysed under replace_one only (their default), random allocation "
        "under add_remove only",
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


def _targets(args: argparse.Namespace) -> tuple[float, float]:
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
    return eps, delta


def _option(args: argparse.Namespace, key: str) -> Any:
    """An option's value, None when not given (or when an older request lacks it)."""
    return getattr(args, key, None)


def _count(text: Any, option: str, example: str) -> int:
    """An integer >= 1 from the command line, or an error naming the option."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidParameterError(
            option, f"must be an integer >= 1, got {text!r}", f"pass e.g. {example}"
        )
    return value


def _relation(args: argparse.Namespace, batching: str) -> Adjacency:
    """The neighbouring relation: the one the batching is analysed under, if it has one."""
    required = BATCHINGS[batching]
    relation = _option(args, "adjacency") or required or "add_remove"
    if relation not in RELATIONS:
        raise InvalidParameterError(
            "--adjacency", f"unknown adjacency {relation!r}", f"use one of {list(RELATIONS)}"
        )
    if required is not None and relation != required:
        raise InvalidParameterError(
            "--adjacency",
            f"is {relation}, but {_NAMES[batching]} are analysed under {required} adjacency only",
            f"pass --adjacency {required} or leave it out",
        )
    return Adjacency(relation=relation)


@attrs.frozen
class Mechanism:
    """What a calibration is for: sigma -> its event, its JSON keys and its description."""

    make_event: Callable[[float], Event]
    fields: dict[str, Any]
    text: str
    #: its certified bound is that of this many Gaussian releases under replace-one (no
    #: amplification), so it needs at least their noise; None: amplified
    releases: int | None = None


#: the options of each batching (by attribute), and how the command line spells them
_ACCEPTS = {
    "poisson": ("sampling_rate", "steps"),
    "shuffled": ("dataset_size", "batch_size", "epochs"),
    "random-allocation": ("steps", "allocations", "epochs"),
}
_NAMES = {
    "poisson": "Poisson samples",
    "shuffled": "shuffled batches",
    "random-allocation": "random allocations",
}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _check_options(args: argparse.Namespace, batching: str) -> None:
    """Refuse an option of another batching, naming it and the batchings that take it."""
    for key in ("sampling_rate", "steps", "dataset_size", "batch_size", "epochs", "allocations"):
        if key in _ACCEPTS[batching] or _option(args, key) is None:
            continue
        takes = ", ".join(_flag(k) for k in _ACCEPTS[batching])
        users = " or ".join(b for b, keys in _ACCEPTS.items() if key in keys)
        raise InvalidParameterError(
            _flag(key),
            f"does not apply to --batching {batching} (it takes {takes})",
            f"remove {_flag(key)}, or pass --batching {users}",
        )


def _required(args: argparse.Namespace, key: str, batching: str, example: str) -> int:
    value = _option(args, key)
    if value is None:
        raise InvalidParameterError(
            _flag(key), f"is required with --batching {batching}", f"pass e.g. {example}"
        )
    return _count(value, _flag(key), example)


def _epochs(epoch: Callable[[float], Event], epochs: int) -> Callable[[float], Event]:
    """sigma -> ``epochs`` independent epochs of ``epoch(sigma)``."""
    if epochs == 1:
        return epoch
    return lambda sigma: SelfComposedEvent(epoch(sigma), epochs)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _poisson(args: argparse.Namespace) -> Mechanism:
    text = _option(args, "sampling_rate")
    text = "1.0" if text is None else text
    q = parse_number(text, "--sampling-rate", "--sampling-rate 0.004")
    if not 0 <= q <= 1:
        raise InvalidParameterError(
            "--sampling-rate",
            f"must lie in [0, 1], got {text}",
            "pass batch size / dataset size, e.g. --sampling-rate 0.004",
        )
    steps_text = _option(args, "steps")
    steps = _count("1" if steps_text is None else steps_text, "--steps", "--steps 1000")
    return Mechanism(
        make_event_factory(q, steps),
        {"sampling_rate": q, "steps": steps},
        f"{steps} Poisson-subsampled Gaussian steps, q = {q:g}",
    )


def _shuffled(args: argparse.Namespace) -> Mechanism:
    n = _required(args, "dataset_size", "shuffled", "--dataset-size 60000")
    b = _required(args, "batch_size", "shuffled", "--batch-size 256")
    if b > n:
        raise InvalidParameterError(
            "--batch-size", f"{b} exceeds --dataset-size {n}", "use a batch no larger than the data"
        )
    epochs = _required(args, "epochs", "shuffled", "--epochs 10")
    batches = -(-n // b)
    return Mechanism(
        _epochs(lambda sigma: ShuffledBatchesEvent(n, b, GaussianEvent(sigma)), epochs),
        {
            "batching": "shuffled",
            "dataset_size": n,
            "batch_size": b,
            "batches_per_epoch": batches,
            "epochs": epochs,
        },
        f"{_plural(epochs, 'epoch')} of shuffled batches of {b} of {n} records "
        f"({batches} Gaussian steps per epoch)",
        releases=epochs,
    )


def _allocation(args: argparse.Namespace) -> Mechanism:
    t = _required(args, "steps", "random-allocation", "--steps 100")
    given = _option(args, "allocations")
    k = _count("1" if given is None else given, "--allocations", "--allocations 1")
    if k > t:
        raise InvalidParameterError(
            "--allocations", f"{k} exceeds --steps {t}", "pass --allocations no larger than --steps"
        )
    given = _option(args, "epochs")
    epochs = _count("1" if given is None else given, "--epochs", "--epochs 10")
    return Mechanism(
        _epochs(lambda sigma: RandomAllocationEvent(t, GaussianEvent(sigma), k), epochs),
        {"batching": "random-allocation", "steps": t, "allocations": k, "epochs": epochs},
        f"{_plural(epochs, 'epoch')} of random allocation, each record in {k} of {t} "
        "Gaussian steps",
    )


def _mechanism(args: argparse.Namespace) -> tuple[Mechanism, Adjacency]:
    """The mechanism the options describe and its relation; bad combinations are refused."""
    batching = _option(args, "batching") or "poisson"
    if batching not in BATCHINGS:
        raise InvalidParameterError(
            "--batching", f"unknown batching {batching!r}", f"use one of {', '.join(BATCHINGS)}"
        )
    _check_options(args, batching)
    build = {"poisson": _poisson, "shuffled": _shuffled, "random-allocation": _allocation}
    mechanism = build[batching](args)
    return mechanism, _relation(args, batching)


def _bracket(args: argparse.Namespace) -> tuple[float, float]:
    lo = parse_number(args.min_sigma, "--min-sigma", "--min-sigma 0.05")
    hi = parse_number(args.max_sigma, "--max-sigma", "--max-sigma 1000")
    if not (0 < lo < hi and math.isfinite(hi)):
        raise InvalidParameterError(
            "--min-sigma", f"need 0 < min {lo:g} < max {hi:g} < inf", "pass e.g. --min-sigma 0.05"
        )
    return lo, hi


def _search_bracket(
    mechanism: Mechanism, eps: float, delta: float, bracket: tuple[float, float]
) -> tuple[float, float]:
    """The bracket the search runs on: for a mechanism certified with no amplification, from
    the noise its releases need exactly (less noise cannot meet the target; the accountant's
    lower bounds are not computed for the far smaller multipliers below it)."""
    if mechanism.releases is None:
        return bracket
    from dpledger.accountant.calibrate import analytic_gaussian_sigma

    # replace-one doubles the sensitivity; E releases compose to sqrt(E) times one
    exact = analytic_gaussian_sigma(eps, delta, sensitivity=2.0 * math.sqrt(mechanism.releases))
    floor = exact * (1.0 - 1e-6)
    if bracket[0] < floor < bracket[1]:
        return floor, bracket[1]
    return bracket


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
    "batching",
    "sampling_rate",
    "steps",
    "dataset_size",
    "batch_size",
    "epochs",
    "allocations",
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
    eps, delta = _targets(args)
    mechanism, adjacency = _mechanism(args)
    bracket = _bracket(args)
    if mechanism.fields.get("sampling_rate") == 0:
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

    make_event = mechanism.make_event
    # the search uses the tight backends; the chosen sigma is re-accounted by every backend below
    search = _search_bracket(mechanism, eps, delta, bracket)
    result = calibrate_noise_multiplier(make_event, adjacency, eps, delta, bracket=search)
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
        **mechanism.fields,
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
            f"mechanism: {mechanism.text}, adjacency {adjacency.describe()}\n"
        )
        if sigma <= bracket[0]:
            sys.stdout.write(
                f"note: the target is already met at --min-sigma {bracket[0]:g}; lower it to "
                "search for less noise\n"
            )
    return 0

"""``dpledger audit METHOD --config FILE --one-run``: one run with canaries, audited.

The method runs once with ``--canaries`` canaries, each included with probability 1/2
(:mod:`dpledger.audit.canaries`); each estimator's epsilon lower bound is printed beside the
certified bracket of the method's declaration, with its confidence. The clean room recomputes
every certified upper bound printed before the verdict is. Exit status: 1 when a lower bound of
Steinke et al. exceeds the certified upper bound or the f-DP test rejects the certified curve,
0 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any

from dpledger.core.errors import InvalidParameterError

DEFAULT_CANARIES = 1000


def _canaries(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_CANARIES
    try:
        return int(raw)
    except ValueError:
        raise InvalidParameterError(
            "--canaries", f"must be an integer, got {raw!r}", "pass e.g. --canaries 1000"
        ) from None


def _check_options(args: argparse.Namespace) -> None:
    if args.runs is not None:
        raise InvalidParameterError(
            "--runs", "does not apply to a one-run audit", "drop it, or drop --one-run"
        )
    if args.relation not in (None, "add_remove"):
        raise InvalidParameterError(
            "--relation",
            "a one-run audit includes or leaves out each canary: add/remove only",
            "drop --relation",
        )
    if args.claimed_epsilon is not None:
        raise InvalidParameterError(
            "--claimed-epsilon",
            "does not apply to a one-run audit (its claim is the certified bracket)",
            "drop it, or drop --one-run",
        )
    if args.score is not None and args.mode == "black-box":
        raise InvalidParameterError(
            "--score", "applies to white-box canaries", "drop it, or use --mode white-box"
        )


def _ratio(lower: float, upper: float) -> str:
    return f"{lower / upper:.0%}" if upper > 0 and math.isfinite(upper) else "-"


def format_one_run(result: Any) -> str:
    """The table of a one-run audit: per delta, the bracket and each estimator beside it."""
    lines = [
        f"one-run audit of {result.method!r} ({result.mode}"
        + (f", {result.score} scores" if result.mode == "white-box" else "")
        + f"): {result.canaries} canaries, {result.included} included, one run, "
        f"seed {result.seed}",
        f"confidence {1 - result.alpha:.0%} for each estimator, jointly over "
        f"{len(result.rows)} delta(s) and the numbers of guesses tried",
    ]
    for row in result.rows:
        lines += [
            "",
            f"delta {row.delta:g}: certified bracket [{row.certified_lower:.4f}, "
            f"{row.certified_upper:.4f}] ({row.method})",
            f"  {'estimator (not certified)':<66} {'eps_lower':>9} {'of upper':>8} "
            f"{'guesses':>7} {'correct':>7}",
        ]
        for e in row.estimates:
            g = "-" if e.guesses is None else str(e.guesses)
            c = "-" if e.correct is None else str(e.correct)
            lines.append(
                f"  {e.estimator:<66} {e.epsilon_lower:>9.4f} "
                f"{_ratio(e.epsilon_lower, row.certified_upper):>8} {g:>7} {c:>7}"
            )
        lines.append(
            "  the certified trade-off curve is "
            + ("REJECTED" if row.curve_rejected else "not rejected")
            + " by the f-DP test"
        )
    lines += [
        f"verdict: {result.verdict} (a violation is called when the first estimator exceeds "
        f"the certified upper bound or the f-DP test rejects the curve: false-alarm "
        f"probability at most {1.5 * result.alpha:.3g}, the estimator's level plus half of it "
        "for the curve test)",
        "note: empirical lower bounds can falsify the certificate, never verify it; a one-run "
        "bound cannot exceed what its canaries can show (about ln of the guesses made)",
    ]
    return "\n".join(lines)


def run_one_run(
    args: argparse.Namespace,
    setup: Callable[[argparse.Namespace], tuple[Any, Any, Any, Any]],
    confirm: Callable[[argparse.Namespace, str, Any, Any, dict[str, Any]], int],
) -> int:
    """Run the one-run audit the arguments describe (``setup`` reads the config, ``confirm``
    has the clean room recompute the certified upper bounds printed)."""
    from dpledger.audit.canaries import audit_one_run

    _check_options(args)
    canaries = _canaries(args.canaries)
    host, spec, (params, data), adjacency = setup(args)
    result = audit_one_run(
        spec,
        params,
        data,
        adjacency=adjacency,
        canaries=canaries,
        mode=args.mode or "white-box",
        score=args.score or "llr",
        deltas=tuple(args.delta),
        alpha=args.alpha,
        seed=args.seed,
        lower=host.lower,
    )
    pairs = [(row.delta, row.certified_upper) for row in result.rows]
    if code := confirm(args, result.method, params, adjacency, {adjacency.relation: pairs}):
        return code
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        print(format_one_run(result))
    return 1 if result.verdict == "violation" else 0

"""The default ``select.account`` beside dp-accounting, prv-accountant and Opacus, in one run.

Run:  python benchmarks/accountant_default.py [--table] [--only TEXT] [--no-anchors]
                                              [--anchor-timeout S]

Every case of ``benchmarks/accountant_cases.py`` (DP-SGD sizes, many distinct leaves, heavy
single hits, random allocation, exact-lower cases, heterogeneous compositions of 1e4 and 1e5
components) is accounted by the default call in a fresh forked child (time of the call, peak
RSS of the child, which includes the resident set it was forked with), then by each anchor
that can express it, each in a child of its own stopped after ``--anchor-timeout`` seconds:
dp-accounting's PLD at h = 1e-4 and h = 1e-3, prv-accountant (Poisson-subsampled Gaussian
compositions) and Opacus's RDP (the same). It prints a Markdown table, the median time ratio to
dp-accounting at h = 1e-4, the cases slower than it, the longest query, the largest peak
memory, the brackets wider than 1 %, and the calibration time of DP-SGD at delta = 1e-10.
Each case whose epsilon bracket is finite is then queried the other way, delta at epsilon =
its epsilon upper bound rounded up to three significant digits (a second table: time and
delta bracket). ``--table`` writes all of it into ``docs/accountants.md`` (between its
benchmark markers).
Timings depend on the machine's load: the table states the load average it ran under.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import math
import multiprocessing as mp
import os
import pathlib
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from accountant_cases import CALIBRATION, Case, cases, dp_sgd

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.calibrate import calibrate_noise_multiplier
from dpledger.accountant.select import account
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "accountants.md"
START = "<!-- benchmark table: python benchmarks/accountant_default.py --table -->"
END = "<!-- end of benchmark table -->"
#: the default call of one case is stopped after this many seconds
OURS_TIMEOUT = 600.0
ANCHORS = ("dpa h=1e-4", "dpa h=1e-3", "prv", "Opacus RDP")
#: the finer grids dp-accounting is tried at, coarsest first, where at h = 1e-4 it is looser
#: than dpledger's upper bound (its time at equal or better tightness)
FINER_GRIDS = (3e-5, 1e-5, 3e-6, 1e-6)


# -- running in a child ----------------------------------------------------------------------


def _child(fn: Callable[[], Any], out: Any) -> None:
    try:
        start = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out.send(("ok", value, elapsed, peak))
    except BaseException as exc:  # report any failure of the child as a row
        out.send(("error", f"{type(exc).__name__}: {str(exc)[:80]}", 0.0, 0))


def in_child(fn: Callable[[], Any], timeout: float) -> tuple[str, Any, float, int]:
    """(status, value, seconds, peak RSS bytes) of ``fn()`` in a forked child; status is "ok",
    "error" (value: the message) or "timeout"."""
    ctx = mp.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, writer), daemon=True)
    proc.start()
    writer.close()
    if not reader.poll(timeout):
        proc.kill()
        proc.join()
        return ("timeout", None, timeout, 0)
    try:
        result = reader.recv()
    except EOFError:
        result = ("error", "the child stopped without a result", 0.0, 0)
    proc.join()
    return result  # type: ignore[no-any-return]


# -- the anchors -----------------------------------------------------------------------------


def dp_accounting_event(event: Event) -> Any:
    """The dp-accounting event of ``event``, or None where it has none (the exponential
    mechanism, random allocation, pure and approximate DP pairs, ...)."""
    import dp_accounting

    from dpledger.integrations.dp_accounting import to_dp_event

    if isinstance(event, GaussianEvent):
        return dp_accounting.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return dp_accounting.LaplaceDpEvent(event.noise_multiplier)
    if isinstance(event, RandomizedResponseEvent):
        return to_dp_event(event)
    if isinstance(event, PureDPEvent | ApproxDPEvent):
        return None  # dp-accounting has no event for a pure or approximate DP pair
    if isinstance(event, PoissonSampledEvent | SampledWithoutReplacementEvent | SelfComposedEvent):
        inner = dp_accounting_event(event.event)
        if inner is None:
            return None
        if isinstance(event, PoissonSampledEvent):
            return dp_accounting.PoissonSampledDpEvent(event.sampling_probability, inner)
        if isinstance(event, SampledWithoutReplacementEvent):
            return dp_accounting.SampledWithoutReplacementDpEvent(
                event.source_size, event.sample_size, inner
            )
        return dp_accounting.SelfComposedDpEvent(inner, event.count)
    if isinstance(event, ComposedEvent):
        parts = [dp_accounting_event(e) for e in event.events]
        return None if any(p is None for p in parts) else dp_accounting.ComposedDpEvent(parts)
    return None


def dp_accounting_pld(case: Case, h: float) -> float | None:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    dp_event = dp_accounting_event(case.make())
    if dp_event is None:
        return None
    relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if case.adjacency.relation == "replace_one":
        relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    acc = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=h)
    acc.compose(dp_event)
    return float(acc.get_epsilon(case.delta))


def _sampled_gaussian(case: Case) -> tuple[float, float, int] | None:
    """(q, sigma, steps) of a case that is T steps of one Poisson-subsampled Gaussian under
    add/remove, else None (what prv-accountant and Opacus are given)."""
    event, steps = case.make(), 1
    if isinstance(event, SelfComposedEvent):
        event, steps = event.event, event.count
    if case.adjacency.relation != "add_remove" or not isinstance(event, PoissonSampledEvent):
        return None
    if not isinstance(event.event, GaussianEvent) or steps > 10**12:
        return None
    return event.sampling_probability, event.event.noise_multiplier, steps


def prv_epsilon(case: Case) -> float | None:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    found = _sampled_gaussian(case)
    if found is None:
        return None
    q, sigma, steps = found
    prv = PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)
    acc = PRVAccountant(
        prvs=[prv], max_self_compositions=[steps], eps_error=0.01, delta_error=case.delta / 1000
    )
    return float(acc.compute_epsilon(delta=case.delta, num_self_compositions=[steps])[2])


def opacus_rdp(case: Case) -> float | None:
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    found = _sampled_gaussian(case)
    if found is None:
        return None
    q, sigma, steps = found
    orders = RDPAccountant.DEFAULT_ALPHAS
    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    return float(get_privacy_spent(orders=orders, rdp=rdp, delta=case.delta)[0])


def dpa_at_tightness(
    case: Case, upper: float, at_coarse: tuple[str, Any, float, int], timeout: float
) -> tuple[str, float, float | None, float] | None:
    """dp-accounting at equal or better tightness than ``upper``: (status, h, its epsilon,
    seconds) at the coarsest grid whose epsilon is at most ``upper`` ("ok"), else of the
    last grid tried ("looser", "timeout" or "error"); None where dp-accounting at h = 1e-4
    did not run. Each grid is one call in a child of its own, as a user who knew it would
    make."""
    status, value, seconds, _ = at_coarse
    if status != "ok" or value is None:
        return None
    if value <= upper:
        return ("ok", 1e-4, value, seconds)
    found: tuple[str, float, float | None, float] = ("looser", 1e-4, value, seconds)
    for h in FINER_GRIDS:
        status, value, seconds, _ = in_child(functools.partial(dp_accounting_pld, case, h), timeout)
        if status != "ok":
            return (status, h, None, seconds)
        found = ("ok" if value <= upper else "looser", h, value, seconds)
        if found[0] == "ok":
            break
    return found


def _tightness_cell(found: tuple[str, float, float | None, float] | None) -> str:
    if found is None:
        return "-"
    status, h, value, seconds = found
    if status == "ok":
        return f"h={h:g}: {value:.6g} ({seconds:.2f} s)"
    if status == "looser":
        return f"not at h={h:g}: {value:.6g} ({seconds:.2f} s)"
    return f"h={h:g}: > {seconds:.0f} s" if status == "timeout" else f"h={h:g}: error"


def _anchor(name: str, case: Case) -> Callable[[], float | None]:
    if name == "dpa h=1e-4":
        return lambda: dp_accounting_pld(case, 1e-4)
    if name == "dpa h=1e-3":
        return lambda: dp_accounting_pld(case, 1e-3)
    if name == "prv":
        return lambda: prv_epsilon(case)
    return lambda: opacus_rdp(case)


# -- ours ------------------------------------------------------------------------------------


def _ours(case: Case) -> tuple[float, float, str]:
    bound = account(case.make(), case.adjacency, delta=case.delta).bound
    assert isinstance(bound, EpsilonBound)
    return bound.epsilon_lower, bound.epsilon, bound.method


def _ours_delta(case: Case, epsilon: float) -> tuple[float, float, str]:
    bound = account(case.make(), case.adjacency, epsilon=epsilon).bound
    assert isinstance(bound, DeltaBound)
    return bound.delta_lower, bound.delta, bound.method


def delta_epsilon(upper: float) -> float | None:
    """The epsilon a case's delta query is made at: its epsilon upper bound rounded up to
    three significant digits, never below it (None when the bound is 0 or infinite)."""
    if not (upper > 0 and math.isfinite(upper)):
        return None
    step = 10.0 ** (math.floor(math.log10(upper)) - 2)
    rounded = float(f"{math.ceil(upper / step) * step:.3g}")
    return rounded if rounded >= upper else float(f"{(math.ceil(upper / step) + 1) * step:.3g}")


def _calibrate() -> tuple[float, float]:
    q, steps, target, delta = CALIBRATION
    made = calibrate_noise_multiplier(lambda s: dp_sgd(s, q, steps), None, target, delta)
    return made.noise_multiplier, made.epsilon


# -- rows ------------------------------------------------------------------------------------


def _cell(result: tuple[str, Any, float, int]) -> str:
    status, value, seconds, _ = result
    if status == "timeout":
        return f"> {seconds:.0f} s"
    if status == "error":
        return "error"
    if value is None:
        return "-"
    return f"{value:.6g} ({seconds:.2f} s)"


def _width(lower: float, upper: float) -> float:
    return (upper - lower) / upper if upper > 0 and math.isfinite(upper) else math.inf


def run_case(case: Case, anchors: bool, anchor_timeout: float) -> dict[str, Any]:
    """The default call and the anchors of one case (each in a child)."""
    row: dict[str, Any] = {"case": case, "ours": in_child(lambda: _ours(case), OURS_TIMEOUT)}
    for name in ANCHORS:
        row[name] = in_child(_anchor(name, case), anchor_timeout) if anchors else None
    status, value, _, _ = row["ours"]
    row["dpa tight"] = None
    if anchors and status == "ok":
        row["dpa tight"] = dpa_at_tightness(case, value[1], row["dpa h=1e-4"], anchor_timeout)
    epsilon = delta_epsilon(value[1]) if status == "ok" else None
    row["delta query"] = None
    if epsilon is not None:
        row["delta query"] = (epsilon, in_child(lambda: _ours_delta(case, epsilon), OURS_TIMEOUT))
    return row


def markdown(rows: list[dict[str, Any]], anchors: bool) -> list[str]:
    head = "| case | δ | dpledger bracket | width | time (s) | peak (MB) |"
    rule = "|---|---|---|---|---|---|"
    if anchors:
        head += "".join(f" {name}: ε (time) |" for name in ANCHORS)
        head += " dpa at dpledger's tightness |"
        rule += "---|" * (len(ANCHORS) + 1)
    lines = [head + " stated reference |", rule + "---|"]
    for row in rows:
        case: Case = row["case"]
        status, value, seconds, peak = row["ours"]
        if status == "ok":
            lower, upper, method = value
            bracket = f"[{lower:.6g}, {upper:.6g}] ({method})"
            width = f"{_width(lower, upper):.2%}"
            cells = f"{bracket} | {width} | {seconds:.2f} | {peak / 2**20:.0f} |"
        else:
            cells = f"{_cell(row['ours'])} | - | - | - |"
        line = f"| {case.name} | {case.delta:g} | {cells}"
        if anchors:
            line += "".join(f" {_cell(row[name])} |" for name in ANCHORS)
            line += f" {_tightness_cell(row['dpa tight'])} |"
        lines.append(line + f" {case.reference or '-'} |")
    return lines


def delta_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The delta queries' table: delta at the epsilon each case's row states."""
    lines = [
        "| case | δ of the ε row | ε queried | dpledger δ bracket | width | time (s) | peak (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        case: Case = row["case"]
        if row["delta query"] is None:
            continue
        epsilon, result = row["delta query"]
        status, value, seconds, peak = result
        if status == "ok":
            lower, upper, method = value
            width = f"{_width(lower, upper):.2%}" if upper > 0 else "-"
            cells = f"[{lower:.6g}, {upper:.6g}] ({method}) | {width} | {seconds:.2f} | "
            cells += f"{peak / 2**20:.0f} |"
        else:
            cells = f"{_cell(result)} | - | - | - |"
        lines.append(f"| {case.name} | {case.delta:g} | {epsilon:g} | {cells}")
    return lines


def delta_summary(rows: list[dict[str, Any]]) -> list[str]:
    """The longest delta query, the delta brackets wider than 1 %, the failed ones."""
    made = [r for r in rows if r["delta query"] is not None]
    ok = [r for r in made if r["delta query"][1][0] == "ok"]
    out = []
    if ok:
        longest = max(ok, key=lambda r: r["delta query"][1][2])
        wide = [
            f"{r['case'].name} (ε={r['delta query'][0]:g})"
            for r in ok
            if _width(*r["delta query"][1][1][:2]) > 0.01 and r["delta query"][1][1][1] > 0
        ]
        out.append(
            f"- longest delta query: {longest['delta query'][1][2]:.2f} s "
            f"({longest['case'].name}, ε={longest['delta query'][0]:g}); delta brackets wider "
            f"than 1 %: {', '.join(wide) or 'none'}"
        )
    failed = [r["case"].name for r in made if r["delta query"][1][0] != "ok"]
    if failed:
        out.append(f"- no delta bracket (error or timeout): {', '.join(failed)}")
    return out


def summary(rows: list[dict[str, Any]], anchors: bool) -> list[str]:
    """The Must-show figures: median ratio to dp-accounting (h = 1e-4), the cases slower than
    it, the longest query, the largest peak, the brackets wider than 1 %."""
    ok = [r for r in rows if r["ours"][0] == "ok"]
    out = []
    if anchors:
        pairs = [
            (r["case"], r["ours"][2], r["dpa h=1e-4"][2])
            for r in ok
            if r["dpa h=1e-4"][0] == "ok" and r["dpa h=1e-4"][1] is not None
        ]
        if pairs:
            ratios = [ours / max(theirs, 1e-9) for _, ours, theirs in pairs]
            slower = [f"{c.name} (δ={c.delta:g})" for c, a, b in pairs if a > b]
            out.append(
                f"- median time ratio to dp-accounting (h = 1e-4), over the {len(pairs)} cases "
                f"it expresses: {statistics.median(ratios):.2f}; slower than it: "
                f"{', '.join(slower) or 'none'}"
            )
        out.extend(_tightness_summary(ok))
    failed = [r["case"].name for r in rows if r["ours"][0] != "ok"]
    if ok:
        longest = max(ok, key=lambda r: r["ours"][2])
        peak = max(r["ours"][3] for r in ok)
        wide = [
            f"{r['case'].name} (δ={r['case'].delta:g})"
            for r in ok
            if _width(r["ours"][1][0], r["ours"][1][1]) > 0.01
        ]
        out.append(
            f"- longest query: {longest['ours'][2]:.2f} s ({longest['case'].name}, "
            f"δ={longest['case'].delta:g}); largest peak RSS: {peak / 2**30:.2f} GB"
        )
        out.append(f"- brackets wider than 1 %: {', '.join(wide) or 'none'}")
    if failed:
        out.append(f"- no bracket (error or timeout): {', '.join(failed)}")
    return out


def _tightness_summary(ok: list[dict[str, Any]]) -> list[str]:
    """The time ratio to dp-accounting at equal or better tightness (its coarsest grid whose
    epsilon is at most dpledger's upper bound), and the cases where no grid tried got there."""
    tried = [r for r in ok if r["dpa tight"] is not None]
    if not tried:
        return []
    met = [
        (r, r["ours"][2] / max(r["dpa tight"][3], 1e-9)) for r in tried if r["dpa tight"][0] == "ok"
    ]
    slower = [f"{r['case'].name} (δ={r['case'].delta:g})" for r, ratio in met if ratio > 1]
    never = [
        f"{r['case'].name} (δ={r['case'].delta:g})" for r in tried if r["dpa tight"][0] != "ok"
    ]
    grids = ", ".join(f"{h:g}" for h in (1e-4, *FINER_GRIDS))
    median = f"{statistics.median(ratio for _, ratio in met):.2f}" if met else "-"
    return [
        f"- at equal or better tightness (dp-accounting at the coarsest of h = {grids} whose ε "
        f"is at most dpledger's upper bound): median time ratio {median} over the {len(met)} "
        f"cases it reaches; slower than it: {', '.join(slower) or 'none'}; not reached at any "
        f"of these grids (looser, infinite or over the timeout): {', '.join(never) or 'none'}"
    ]


def calibration_line() -> str:
    q, steps, target, delta = CALIBRATION
    status, value, seconds, _ = in_child(_calibrate, OURS_TIMEOUT)
    found = status
    if status == "ok":
        found = f"sigma {value[0]:.6g} (certified ε {value[1]:.6g})"
    return (
        f"- calibration (q = {q:g}, {steps} steps, ε = {target:g}, δ = {delta:g}): {found} in "
        f"{seconds:.2f} s"
    )


def write_table(lines: list[str]) -> None:
    """Replace the text between the benchmark markers of docs/accountants.md by ``lines``."""
    text = DOCS.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{DOCS.name} has no benchmark markers ({START!r} ... {END!r})")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    DOCS.write_text(before + START + "\n" + "\n".join(lines) + "\n" + END + after, "utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", action="store_true", help="write the table into the docs")
    parser.add_argument("--only", default="", help="only the cases whose name contains this")
    parser.add_argument("--no-anchors", action="store_true", help="dpledger alone")
    parser.add_argument("--anchor-timeout", type=float, default=120.0, help="seconds per anchor")
    args = parser.parse_args()
    anchors = not args.no_anchors
    # lazy imports and first-call set-up happen here, once; the forked children inherit them
    # (as they do the anchors' modules): a query's time is not an import's
    account(dp_sgd(1.0, 0.01, 10), delta=1e-5)

    if anchors:
        import dp_accounting  # noqa: F401
        import opacus.accountants  # noqa: F401
        import prv_accountant  # noqa: F401
    chosen = [c for c in cases() if args.only in c.name]
    rows = []
    for case in chosen:
        rows.append(run_case(case, anchors, args.anchor_timeout))
        print(markdown(rows[-1:], anchors)[-1], flush=True)
        print("  delta query:", *delta_markdown(rows[-1:])[2:], flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    lines = [
        f"Measured {when} on {os.cpu_count()} cores, load average at the end {load} (timings "
        "under load are slower than idle; each call in a fresh child, one thread). "
        "Anchors: dp-accounting's PLD, prv-accountant (upper estimate) and Opacus's RDP, "
        "where they express the case.",
        "",
        *markdown(rows, anchors),
        "",
        *summary(rows, anchors),
        calibration_line(),
        "",
        "Delta at epsilon: each case's epsilon upper bound above, rounded up to three "
        "significant digits, queried the other way (same run).",
        "",
        *delta_markdown(rows),
        "",
        *delta_summary(rows),
    ]
    print("\n".join(lines[2:]))
    if args.table:
        write_table(lines)


if __name__ == "__main__":
    main()

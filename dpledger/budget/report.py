"""The budget store's report: remaining budget per source and unit, the rule and theorem that
composed the bookings, the runs that spent it, and the spend over time as a plot (when
matplotlib is installed; the report says so when it is not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dpledger.budget import rules
from dpledger.budget.odometer import odometer
from dpledger.budget.store import Declared, declared, entries, open_store
from dpledger.core.event_parser import event_from_dict
from dpledger.core.events import Event
from dpledger.core.printed_numbers import fmt_down, fmt_up

__all__ = ["spend_series", "status_lines", "write_report"]


Series = dict[str, list[tuple[str, float]]]


def spend_series(location: str, certified: bool = False) -> Series:
    """Per ``source/unit``: (booking time, the rule's statistic after it), in booking order;
    with ``certified``, the odometer's epsilon (:mod:`dpledger.budget.odometer`) instead."""
    return _both_series(location)[1 if certified else 0]


def _both_series(location: str) -> tuple[Series, Series]:
    """The statistic's and the odometer's series, from one replay of the entries."""
    conn = open_store(location)
    try:
        budgets = declared(conn)
        history = entries(conn)
    finally:
        conn.close()
    statistic: Series = {}
    certified: Series = {}
    for b in budgets:
        points = _series(b, history)
        statistic[f"{b.source}/{b.unit}"] = [(t, s) for t, s, _ in points]
        certified[f"{b.source}/{b.unit}"] = [(t, c) for t, _, c in points]
    return statistic, certified


def _series(budget: Declared, history: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    state = rules.initial_state(budget.rule, budget.params)
    events: list[Event] = []
    out = []
    for entry in history:
        if entry["kind"] != "book" or (entry["source"], entry["unit"]) != (
            budget.source,
            budget.unit,
        ):
            continue
        events.append(event_from_dict(json.loads(entry["event"])))
        state = rules.decide(
            budget.rule,
            budget.total,
            budget.params,
            state,
            json.loads(entry["charge"]),
            lambda: list(events),
            budget.relation,
        ).state
        spent = rules.spent(budget.rule, budget.total, budget.params, state)["epsilon"]
        certified = odometer(budget.rule, budget.total, budget.params, state)["epsilon"]
        out.append((str(entry["booked_at"]), float(spent), float(certified)))
    return out


def status_lines(report: dict[str, Any]) -> list[str]:
    """The text of ``dpledger budget status``."""
    chain = report["chain"]
    lines = [
        f"store {report['store']}: "
        + (
            f"chain intact ({chain['entries']} entries, head {chain['head'][:16]})"
            if chain["ok"]
            else f"CHAIN BROKEN at entry {chain['broken_at']}: {chain['problem']}"
        )
    ]
    for b in report["budgets"]:
        spent = b["spent"]
        label = "certified" if spent["certified"] else "filter statistic, not certified: the "
        label += "" if spent["certified"] else "filter certifies the total"
        lines.append(
            f"{b['source']} / {b['unit']} ({b['relation']}): total epsilon={b['total']['epsilon']}"
            f" delta={b['total']['delta']}; rule {b['rule']}: {b['theorem']}"
        )
        lines.append(
            f"  {b['bookings']} bookings; spent epsilon <= {fmt_up(spent['epsilon'])} ({label}); "
            f"remaining >= {fmt_down(b['remaining_epsilon'])}"
        )
        if not spent["certified"] and "odometer" in b:
            lines.append(_odometer_line(b["odometer"]))
        for run in b["runs"][-5:]:
            lines.append(f"  entry {run['seq']}: run {run['run_id']} at {run['booked_at']}")
    return lines


def _odometer_line(odo: dict[str, Any]) -> str:
    return (
        f"  certified spend so far: epsilon <= {fmt_up(odo['epsilon'])} at delta = "
        f"{odo['delta']:.3g} ({odo['theorem']})"
    )


def write_report(report: dict[str, Any], location: str, out: Path) -> list[Path]:
    """Write ``budget.md``, ``budget.json`` and (with matplotlib) ``spend.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "budget.json", out / "budget.md"]
    written[0].write_text(json.dumps(report, indent=2, sort_keys=True))
    text = ["# Privacy budget", "", *(f"    {line}" for line in status_lines(report)), ""]
    text += _runs_tables(report)
    totals = {f"{b['source']}/{b['unit']}": b["total"]["epsilon"] for b in report["budgets"]}
    plot = _plot(_both_series(location), totals, out / "spend.png")
    text.append("![spend over time](spend.png)" if plot else "(no plot: matplotlib missing)")
    written[1].write_text("\n".join(text) + "\n")
    return written + ([plot] if plot else [])


def _runs_tables(report: dict[str, Any]) -> list[str]:
    """Every run that spent each budget, in booking order."""
    out = []
    for b in report["budgets"]:
        out += [f"## Runs booked against {b['source']} / {b['unit']} ({b['rule']})", ""]
        out += ["| entry | run | booked at | method |", "|---|---|---|---|"]
        for run in b["runs"]:
            method = run["parameters"].get("method", run["parameters"].get("integration", ""))
            out.append(f"| {run['seq']} | {run['run_id']} | {run['booked_at']} | {method} |")
        out.append("")
    return out


def _plot(series: tuple[Series, Series], totals: dict[str, float], path: Path) -> Path | None:
    """The certified odometer (solid), the rule's statistic (dotted) and the total (dashed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    import datetime as dt

    fig, ax = plt.subplots(figsize=(7, 4))
    statistic, certified = series
    for name, points in certified.items():
        times = np.array(  # UTC times, as numpy datetimes matplotlib draws as dates
            [dt.datetime.fromisoformat(p[0]).replace(tzinfo=None) for p in points],
            dtype="datetime64[us]",
        )
        line = ax.step(times, [p[1] for p in points], where="post", label=name, marker=".")
        color = line[0].get_color()
        ax.step(times, [p[1] for p in statistic[name]], where="post", color=color, linestyle=":")
        ax.axhline(totals[name], color=color, linestyle="--", linewidth=0.8)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("time of booking (UTC)")
    fig.autofmt_xdate()
    ax.set_ylabel("epsilon spent (certified odometer); dotted: statistic; dashed: total")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path

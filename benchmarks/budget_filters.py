"""Side-by-side benchmark: 10,000 bookings under a privacy filter, dpledger's budget store
(Gaussian-DP filter, a SQLite file, one transaction per booking) against OpenDP's
``make_privacy_filter`` over ``make_fully_adaptive_composition`` (zero-concentrated DP, in
memory), on the same sequence of Gaussian steps.

Run:  python benchmarks/budget_filters.py [--count 10000] [--opendp-seconds 300]
      python benchmarks/budget_filters.py --each-rule 3000   # every rule of the store alone

``--each-rule N`` books the first N steps of the same sequence in a store of each rule
(``pld``, ``renyi``, ``approx``, ``gdp``; totals large enough for all N) and prints the time
per booking in blocks of 1,000 for each: constant in the count for every rule (the filters
keep running sums; ``pld`` keeps its bookings grouped into identical events with counts and
recomposes the distinct ones only).

Needs ``opendp==0.16.0`` (``pip install opendp==0.16.0``; a benchmark dependency only, not in
dpledger's extras). Both filters get the same total: mu^2 = 2 rho, so they admit the same
steps (a Gaussian of noise sigma is (1/sigma)-GDP and 1/(2 sigma^2)-zCDP). Printed: the time
per booking in blocks of 1,000 bookings (constant for dpledger: it keeps a running sum;
OpenDP recomposes its history at every query), and the epsilon spent at the end at the same
delta, dpledger's from the Gaussian trade-off, OpenDP's from its zCDP conversion. OpenDP stops
at ``--opendp-seconds`` (its time per query grows with the count).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from dpledger.budget import rules, store
from dpledger.core.events import GaussianEvent

BLOCK = 1000
DELTA = 1e-6


def _sequence(count: int) -> list[float]:
    """The noise of each step: varied (an adaptive analyst's choices), all Gaussian."""
    return [2000.0 + 500.0 * ((7 * i) % 5) for i in range(count)]


def _total_mu(sigmas: list[float]) -> float:
    """A total that the whole sequence fits, with a little to spare."""
    return math.sqrt(math.fsum(1 / s**2 for s in sigmas)) * 1.02


def run_dpledger(sigmas: list[float], mu: float, folder: Path) -> tuple[list[float], float, float]:
    """Seconds per booking per block, the filter's statistic and the certified odometer at
    the end."""
    location = str(folder / "bench.db")
    store.init(location)
    epsilon = rules.gdp_epsilon(mu, DELTA)  # the total whose Gaussian-DP mu is about mu
    store.declare(location, "s", epsilon=epsilon, delta=DELTA, rule="gdp")
    blocks, start, entry = [], time.perf_counter(), None
    for i, sigma in enumerate(sigmas, 1):
        entry = store.book(location, "s", GaussianEvent(sigma), run_id=str(i))
        if i % BLOCK == 0:
            now = time.perf_counter()
            blocks.append((now - start) / BLOCK)
            start = now
    assert entry is not None
    statistic = rules.gdp_epsilon(math.sqrt(entry["state"]["sum_mu2"]), DELTA)
    return blocks, statistic, float(entry["odometer"]["epsilon"])


#: per rule: a total (epsilon, delta) that the whole sequence fits
RULE_TOTALS = {
    "pld": (10.0, DELTA),
    "renyi": (10.0, DELTA),
    "approx": (50.0, DELTA),
    "gdp": (10.0, DELTA),
}


def run_rule(rule: str, sigmas: list[float], folder: Path) -> list[float]:
    """Seconds per booking, per block of 1,000, of the sequence in a store of ``rule``."""
    location = str(folder / f"{rule}.db")
    store.init(location)
    epsilon, delta = RULE_TOTALS[rule]
    store.declare(location, "s", epsilon=epsilon, delta=delta, rule=rule)
    blocks, start = [], time.perf_counter()
    for i, sigma in enumerate(sigmas, 1):
        store.book(location, "s", GaussianEvent(sigma), run_id=str(i))
        if i % BLOCK == 0:
            now = time.perf_counter()
            blocks.append((now - start) / BLOCK)
            start = now
    return blocks


def each_rule(count: int) -> None:
    sigmas = _sequence(count)
    print(f"{count} Gaussian bookings per rule; ms per booking in blocks of {BLOCK}")
    table = {}
    with tempfile.TemporaryDirectory() as folder:
        for rule in rules.RULES:
            table[rule] = run_rule(rule, sigmas, Path(folder))
    print("block   " + "".join(f"{rule:>10}" for rule in table))
    for k in range(count // BLOCK):
        row = "".join(f"{table[rule][k] * 1e3:10.2f}" for rule in table)
        print(f"{(k + 1) * BLOCK:>6}  {row}")


def run_opendp(sigmas: list[float], mu: float, seconds: float) -> tuple[list[float], float, int]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain, metric = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    odometer = dp.c.make_fully_adaptive_composition(
        domain, metric, dp.zero_concentrated_divergence()
    )
    queryable = dp.c.make_privacy_filter(odometer, d_in=1.0, d_out=mu * mu / 2)(0.5)
    measures = {s: dp.m.make_gaussian(domain, metric, scale=s) for s in set(sigmas)}
    blocks, start, begin, done = [], time.perf_counter(), time.perf_counter(), 0
    for i, sigma in enumerate(sigmas, 1):
        queryable(measures[sigma])
        done = i
        if i % BLOCK == 0:
            now = time.perf_counter()
            blocks.append((now - start) / BLOCK)
            start = now
            if now - begin > seconds:
                break
    rho = float(queryable.privacy_loss(1.0))
    eps = rho + 2 * math.sqrt(rho * math.log(1 / DELTA))  # zCDP -> (eps, delta), Bun & Steinke
    return blocks, eps, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--opendp-seconds", type=float, default=300.0)
    parser.add_argument("--each-rule", type=int, default=None, metavar="N")
    args = parser.parse_args()
    if args.each_rule is not None:
        each_rule(args.each_rule)
        return
    sigmas = _sequence(args.count)
    mu = _total_mu(sigmas)
    with tempfile.TemporaryDirectory() as folder:
        ours, our_eps, our_odometer = run_dpledger(sigmas, mu, Path(folder))
    theirs, their_eps, done = run_opendp(sigmas, mu, args.opendp_seconds)
    print(
        f"{args.count} Gaussian bookings, total mu={mu:.6g} (rho={mu * mu / 2:.6g}), delta={DELTA}"
    )
    print("block      dpledger ms/booking   OpenDP ms/booking")
    for k in range(len(ours)):
        other = f"{theirs[k] * 1e3:10.3f}" if k < len(theirs) else "  (stopped)"
        print(f"{(k + 1) * BLOCK:>6}     {ours[k] * 1e3:10.3f}            {other}")
    print(f"dpledger: {args.count} bookings, spent epsilon {our_eps:.6g} (Gaussian-DP filter)")
    print(f"          certified spend so far (odometer, every time at once): {our_odometer:.6g}")
    ours_then = rules.gdp_epsilon(math.sqrt(math.fsum(1 / s**2 for s in sigmas[:done])), DELTA)
    print(
        f"OpenDP:   {done} bookings, spent epsilon {their_eps:.6g} (zCDP filter); dpledger "
        f"after the same {done}: {ours_then:.6g}"
    )


if __name__ == "__main__":
    main()

"""Side-by-side benchmark of the aggregate method: dpledger on Dask, PipelineDP's local backend
and plain pandas, on the same Parquet table.

Run:  python benchmarks/aggregate_engines.py [--rows 100000 1000000 10000000]
          [--skip-pipeline-dp] [--pipeline-dp-max-rows N] [--row-group-rows N]
          [--schedulers threads processes]

The table has ``rows`` rows, ``rows / 10`` users and 1,000 partitions, written in row groups of
``--row-group-rows`` rows (the same at every size, so that only the number of rows changes);
each contender computes a user-level count and mean per partition with L0 = 5 and L∞ = 2
(plain pandas: the exact count and mean, no bounding, no noise). Each (size, contender) runs in
a fresh process, which reports the time its imports took, the time of the work itself and its
peak resident memory. dpledger runs on Dask's threaded scheduler, the default of
``pip install 'dpledger[dask]'``: its threads run in the driver's process, so the driver's peak
memory is the whole process's (``--schedulers processes`` adds a run on Dask's processes
scheduler: the driver's peak and the largest worker's apart; a worker's is its ``ru_maxrss``,
which counts the driver's memory when the worker started). A peak is the process's own
``VmHWM`` (``ru_maxrss`` would count the parent's memory at the fork: :func:`peak_mb`). The
script prints rows per second of the work (imports excluded; end to end beside it), the
ratios to pandas and to PipelineDP, the driver's peak memory against the smallest size, and
seconds per million rows (is the cost linear in rows?).
Machines are noisy: read the ratios, measured in the same run.

Measured on the shared 2-core development machine under heavy load from other work (one run
each, indicative only): see ``docs/methods/aggregate.md``, section Benchmark.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

PARTITIONS = 1000
L0, LINF = 5, 2
#: rows per Parquet row group of the generated table (pyarrow writes 1,048,576 by default)
ROW_GROUP_ROWS = 2**17
#: Dask's schedulers the benchmark runs dpledger on (``--schedulers``)
SCHEDULERS = ("threads", "processes")


def make_table(path: Path, rows: int, seed: int = 0, row_group_rows: int = ROW_GROUP_ROWS) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    users = rng.integers(0, max(rows // 10, 1), rows)
    pd.DataFrame(
        {
            "user": users,
            "partition": rng.integers(0, PARTITIONS, rows),
            "value": rng.uniform(0.0, 100.0, rows),
        }
    ).to_parquet(path, row_group_size=row_group_rows)


def import_dpledger(scheduler: str) -> None:
    import dask
    import pandas  # noqa: F401  (pyarrow imports it when it converts to numpy)
    import pyarrow.parquet  # noqa: F401

    import dpledger.runtime.engines
    import dpledger.runtime.engines.dask_engine
    import dpledger.runtime.ledger  # noqa: F401

    dask.config.set(scheduler=scheduler)


def run_dpledger(path: Path) -> None:
    from dpledger.runtime.engines import aggregate_table, aggregation_events, aggregation_request
    from dpledger.runtime.ledger import PrivacyLedger

    params = dict(
        partition_column="partition",
        value_column="value",
        unit_column="user",
        max_partitions_per_unit=L0,
        max_rows_per_partition=LINF,
        lower=0.0,
        upper=100.0,
        metrics=["count", "mean"],
        noise_multiplier=5.0,
        public_partitions=list(range(PARTITIONS)),
        engine="dask",
    )
    request = aggregation_request(params)
    ledger = PrivacyLedger(aggregation_events(request), rng=0)
    aggregate_table(request, str(path), ledger)
    ledger.verify()


def import_pipeline_dp() -> None:
    import pandas  # noqa: F401
    import pipeline_dp  # noqa: F401


def run_pipeline_dp(path: Path) -> None:
    import pandas as pd
    import pipeline_dp

    frame = pd.read_parquet(path)
    columns = (frame["user"].tolist(), frame["partition"].tolist(), frame["value"].tolist())
    rows = list(zip(*columns, strict=True))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=L0,
        max_contributions_per_partition=LINF,
        min_value=0.0,
        max_value=100.0,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=lambda r: r[2],
    )
    result = engine.aggregate(rows, params, extractors, list(range(PARTITIONS)))
    accountant.compute_budgets()
    list(result)


def import_pandas() -> None:
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401


def run_pandas(path: Path) -> None:
    import pandas as pd

    frame = pd.read_parquet(path)
    frame.groupby("partition")["value"].agg(["count", "mean"])


CONTENDERS: dict[str, tuple[Callable[[], None], Callable[[Path], None]]] = {
    "dpledger-dask": (functools.partial(import_dpledger, "threads"), run_dpledger),
    "dpledger-dask-processes": (functools.partial(import_dpledger, "processes"), run_dpledger),
    "pipeline-dp-local": (import_pipeline_dp, run_pipeline_dp),
    "pandas": (import_pandas, run_pandas),
}


def peak_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` (Linux). ``ru_maxrss`` is no measure of
    a child: it keeps the peak of the parent's memory the child was forked from, through
    ``exec`` (a parent that wrote a 1e7-row table makes every child look 600 MB large)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(name: str, path: str) -> None:
    """Run one contender in this (fresh) process; print its times and peak memory as JSON."""
    load, run = CONTENDERS[name]
    start = time.perf_counter()
    load()
    loaded = time.perf_counter()
    run(Path(path))
    done = time.perf_counter()
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "imports": loaded - start,
                "seconds": done - loaded,
                "peak_mb": peak_mb(),
                "workers_mb": workers_mb,
            }
        )
    )


def measure(name: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _report(rows: int, results: dict[str, dict[str, Any]]) -> None:
    for name, r in results.items():
        rate, total = rows / r["seconds"], rows / (r["seconds"] + r["imports"])
        workers = f"{r['workers_mb']:>10.0f}" if name.endswith("processes") else f"{'-':>10}"
        print(
            f"{rows:>10} {name:>23} {r['imports']:>8.2f} {r['seconds']:>9.2f} {rate:>12,.0f} "
            f"{total:>12,.0f} {r['peak_mb']:>9.0f} {workers}"
        )
    for ours in (n for n in results if n.startswith("dpledger")):
        for name, r in results.items():
            if name.startswith("dpledger"):
                continue
            work = r["seconds"] / results[ours]["seconds"]
            whole = (r["seconds"] + r["imports"]) / (
                results[ours]["seconds"] + results[ours]["imports"]
            )
            print(
                f"{rows:>10}   {ours} / {name}: {work:.2f}x the rows per second "
                f"(end to end {whole:.2f}x)"
            )


def _summary(ours: dict[str, dict[int, dict[str, Any]]]) -> None:
    for name, runs in ours.items():
        smallest = min(runs)
        print(f"\n{name} (driver peak memory against the {smallest}-row run; work per rows):")
        for rows, r in sorted(runs.items()):
            memory = r["peak_mb"] / runs[smallest]["peak_mb"]
            per_million = r["seconds"] / rows * 1e6
            print(
                f"{rows:>10} rows: driver peak {r['peak_mb']:.0f} MB ({memory:.2f}x), "
                f"{per_million:.2f} s per million rows"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--skip-pipeline-dp", action="store_true")
    parser.add_argument("--pipeline-dp-max-rows", type=int, default=None)
    parser.add_argument("--row-group-rows", type=int, default=ROW_GROUP_ROWS)
    parser.add_argument("--schedulers", nargs="+", choices=SCHEDULERS, default=["threads"])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(
        f"row groups of {args.row_group_rows} rows; dpledger-dask: Dask's threaded scheduler "
        "(threads in the driver's process: its peak is the whole process's); "
        "dpledger-dask-processes: Dask's processes scheduler (2 worker processes; driver peak "
        "and the largest worker's peak apart)"
    )
    print(
        f"{'rows':>10} {'contender':>23} {'import s':>8} {'work s':>9} {'rows/s':>12} "
        f"{'end-to-end':>12} {'peak MB':>9} {'worker MB':>10}"
    )
    wanted = {"dpledger-dask": "threads", "dpledger-dask-processes": "processes"}
    ours: dict[str, dict[int, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"t{rows}.parquet"
            make_table(path, rows, row_group_rows=args.row_group_rows)
            skip = args.skip_pipeline_dp or (
                args.pipeline_dp_max_rows is not None and rows > args.pipeline_dp_max_rows
            )
            names = [
                n
                for n in CONTENDERS
                if not (skip and n == "pipeline-dp-local")
                and (n not in wanted or wanted[n] in args.schedulers)
            ]
            results = {name: measure(name, path) for name in names}
            for name in wanted:
                if name in results:
                    ours.setdefault(name, {})[rows] = results[name]
            _report(rows, results)
            path.unlink()
    _summary(ours)


if __name__ == "__main__":
    main()

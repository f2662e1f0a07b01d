"""Side-by-side benchmark of the aggregate method: dpledger on Dask, PipelineDP's local backend
and plain pandas, on the same Parquet table.

Run:  python benchmarks/aggregate_engines.py [--rows 100000 1000000 10000000] [--skip-pipeline-dp]

The table has ``rows`` rows, ``rows / 10`` users and 1,000 partitions; each contender computes a
user-level count and mean per partition with L0 = 5 and L∞ = 2 (plain pandas: the exact count
and mean, no bounding, no noise). Each (size, contender) runs in a fresh process, which reports
its wall time and its peak resident memory (the driver's; Dask runs its threads in it). It
prints rows per second, the ratios to PipelineDP and to pandas, and memory per size.
Machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PARTITIONS = 1000
L0, LINF = 5, 2


def make_table(path: Path, rows: int, seed: int = 0) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    users = rng.integers(0, max(rows // 10, 1), rows)
    pd.DataFrame(
        {
            "user": users,
            "partition": rng.integers(0, PARTITIONS, rows),
            "value": rng.uniform(0.0, 100.0, rows),
        }
    ).to_parquet(path, row_group_size=1_000_000)


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


def run_pandas(path: Path) -> None:
    import pandas as pd

    frame = pd.read_parquet(path)
    frame.groupby("partition")["value"].agg(["count", "mean"])


CONTENDERS = {
    "dpledger-dask": run_dpledger,
    "pipeline-dp-local": run_pipeline_dp,
    "pandas": run_pandas,
}


def child(name: str, path: str) -> None:
    """Run one contender in this (fresh) process; print its time and peak memory as JSON."""
    start = time.perf_counter()
    CONTENDERS[name](Path(path))
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb}))


def measure(name: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--skip-pipeline-dp", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    names = [n for n in CONTENDERS if not (args.skip_pipeline_dp and n == "pipeline-dp-local")]
    print(f"{'rows':>10} {'contender':>18} {'seconds':>9} {'rows/s':>12} {'peak MB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"t{rows}.parquet"
            make_table(path, rows)
            results = {name: measure(name, path) for name in names}
            for name, r in results.items():
                rate = rows / r["seconds"]
                print(
                    f"{rows:>10} {name:>18} {r['seconds']:>9.2f} {rate:>12.0f} {r['peak_mb']:>9.0f}"
                )
            ours = results["dpledger-dask"]["seconds"]
            for name in names[1:]:
                ratio = results[name]["seconds"] / ours
                print(f"{rows:>10} {'dpledger / ' + name:>30}: {ratio:.2f}x the rows per second")


if __name__ == "__main__":
    main()

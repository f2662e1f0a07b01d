from __future__ import annotations

from pathlib import Path

from dpledger.report import report_pipeline_file
from dpledger.report.figures import profile_data, step_counts, steps_data


def test_profile_passes_through_the_reported_point(pipeline_file: Path, empty_host: object) -> None:
    built = report_pipeline_file(pipeline_file, host=empty_host, brackets=False)
    eps, delta = built.report.upper, built.report.bound["delta"]
    grid, deltas, exact = profile_data(built, points=12)
    assert exact
    assert (deltas[:-1] >= deltas[1:]).all()  # delta(eps) is non-increasing
    # certified profile: delta(eps) <= target delta at the reported eps, above it just below
    below = grid[grid < 0.95 * eps]
    assert below.size and all(d > delta for d in deltas[: below.size])


def test_steps_curve_ends_at_the_reported_bound(pipeline_file: Path, empty_host: object) -> None:
    built = report_pipeline_file(pipeline_file, host=empty_host, brackets=False)
    node, counts, values = steps_data(built, points=4)
    assert node == "sgd" and counts[-1] == 20 and counts[0] == 1
    assert values == sorted(values)  # more steps never cost less
    assert values[-1] == built.report.upper
    assert step_counts(1000, 6) == [1, 4, 16, 63, 251, 1000]

"""Every example pipeline through `dpledger account --json`, checked against real values."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

pytest.importorskip("dpledger.accountant.pld")

from dpledger.accountant.select import account

EXAMPLES = Path(__file__).parents[1] / "examples" / "pipelines"
ROW = Adjacency()


def run(name: str, capfd: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["account", str(EXAMPLES / name), "--json", *extra]) == 0
    out: dict[str, Any] = json.loads(capfd.readouterr().out)
    assert out["epsilon_lower"] <= out["epsilon"]
    assert out["sources"]
    return out


def eps(event: Event, delta: float, adjacency: Adjacency = ROW) -> float:
    return float(account(event, adjacency, delta=delta).bound.epsilon)


def test_dpsgd_matches_dp_accounting(capfd: pytest.CaptureFixture[str]) -> None:
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    out = run("dpsgd.toml", capfd)
    assert out["delta"] == 1e-5
    assert out["method"] in {"pld", "prv", "rdp"}
    ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    ref.compose(
        dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(256 / 60000, dpa.GaussianDpEvent(1.1)), 14040
        )
    )
    expected = ref.get_epsilon(1e-5)
    assert out["epsilon"] == pytest.approx(expected, rel=0.01)
    assert out["releases"][0]["count"] == 14040


def test_heterogeneous_is_between_its_parts_and_their_sum(
    capfd: pytest.CaptureFixture[str],
) -> None:
    out = run("heterogeneous.toml", capfd)
    parts = [
        GaussianEvent(5.0),
        SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000),
        LaplaceEvent(10.0),
    ]
    alone = [eps(p, 1e-5) for p in parts]
    assert out["epsilon"] >= max(alone)
    # basic composition at delta/3 each is a valid (looser) bound
    assert out["epsilon"] <= sum(eps(p, 1e-5 / 3) for p in parts)
    assert out["epsilon"] == pytest.approx(eps(ComposedEvent(parts), 1e-5), rel=1e-9)


def test_without_replacement_is_finite_and_below_the_rdp_wor_bound(
    capfd: pytest.CaptureFixture[str],
) -> None:
    out = run("without_replacement.toml", capfd)
    assert out["adjacency"]["relation"] == "replace_one"
    # ACCOUNTANT_PITFALLS W03: RDP (Wang-Balle-Kasiviswanathan) gives 12.113 for these settings;
    # Poisson replace-one PLD gives 1.112, and fixed-size batches cannot cost less than that.
    assert math.isfinite(out["epsilon"]), "no backend bounds sampling without replacement"
    assert 1.0 < out["epsilon"] <= 12.113 * (1 + 1e-3)


def test_user_level_lift_costs_more_than_row_level(capfd: pytest.CaptureFixture[str]) -> None:
    out = run("user_level.toml", capfd)
    row = ComposedEvent((GaussianEvent(20.0), LaplaceEvent(25.0), ExponentialMechanismEvent(0.05)))
    user = ComposedEvent((GaussianEvent(4.0), LaplaceEvent(5.0), ExponentialMechanismEvent(0.25)))
    assert out["epsilon"] == pytest.approx(eps(user, 1e-6), rel=1e-9)
    assert out["epsilon"] > eps(row, 1e-6)
    rules = {r["id"]: r["lift_rules"] for r in out["releases"]}
    assert rules == {
        "sum_ratings": ["gaussian_l2_sensitivity_xk"],
        "count_rows": ["laplace_l1_sensitivity_xk"],
        "top_genre": ["exponential_mechanism_sensitivity_xk"],
    }


def test_partitions_take_the_worst_region(capfd: pytest.CaptureFixture[str]) -> None:
    out = run("partitions.toml", capfd)
    glob = GaussianEvent(8.0)
    north = ComposedEvent((glob, SelfComposedEvent(GaussianEvent(4.0), 4), LaplaceEvent(2.0)))
    south = ComposedEvent((glob, SelfComposedEvent(GaussianEvent(3.0), 2)))
    everything = ComposedEvent((north, SelfComposedEvent(GaussianEvent(3.0), 2)))
    assert out["epsilon"] == pytest.approx(max(eps(north, 1e-5), eps(south, 1e-5)), rel=1e-9)
    assert out["epsilon"] < eps(everything, 1e-5)
    assert len(out["sources"][0]["alternatives"]) == 2


def test_paper_a_event_level_is_cheaper_than_user_level(
    capfd: pytest.CaptureFixture[str],
) -> None:
    event_level = run("paper_a.toml", capfd)
    user_level = run("paper_a_user_level.toml", capfd)
    step = PoissonSampledEvent(0.0074183976261127596, GaussianEvent(1.0))
    one_marginal = ComposedEvent((GaussianEvent(7.8), SelfComposedEvent(step, 200)))
    all_marginals = ComposedEvent(
        (SelfComposedEvent(GaussianEvent(7.8), 10), SelfComposedEvent(step, 2000))
    )
    assert event_level["epsilon"] == pytest.approx(eps(one_marginal, 1e-4), rel=1e-9)
    assert user_level["epsilon"] == pytest.approx(eps(all_marginals, 1e-4), rel=1e-9)
    assert event_level["epsilon"] < user_level["epsilon"]
    assert user_level["adjacency"]["unit"] == "user"


def test_paper_c_composes_training_and_selection(capfd: pytest.CaptureFixture[str]) -> None:
    out = run("paper_c.toml", capfd)
    train = SelfComposedEvent(PoissonSampledEvent(0.0128, GaussianEvent(1.0)), 782)
    select = GaussianEvent(6.82)
    assert out["epsilon"] == pytest.approx(eps(ComposedEvent((train, select)), 2.5e-9), rel=1e-9)
    assert out["epsilon"] > max(eps(train, 2.5e-9), eps(select, 2.5e-9))
    assert {r["declared_unit"] for r in out["releases"]} == {"user"}
    # the selection alone at (1, 1e-10) by the classical calibration it was built with
    assert eps(select, 1e-10) <= 1.0


def test_partitioned_histogram_costs_one_gaussian_release_per_metric_vector(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The histogram over every day's bins is one Gaussian release at the count's sensitivity
    sqrt(L0)·L∞ (the aggregate method's own declaration, read from the file alone)."""
    out = run("partitioned_histogram.toml", capfd)
    both = ComposedEvent((GaussianEvent(6.0), GaussianEvent(6.0)))
    assert out["epsilon"] == pytest.approx(eps(both, 1e-6), rel=1e-9)
    assert out["releases"][0]["method"] == "aggregate"

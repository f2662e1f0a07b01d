"""A user-level source never gets a row-level number: method declarations state their unit.

Each case is a way the unit of privacy used to slip: a registered method named in a pipeline
file on a user-level source, per-example DP-SGD at user level, a user-level run without user
ids, and a plugin that claims a user-level event without enforcing the unit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import LedgerViolationError, LiftingError, PluginError
from dpledger.core.events import GaussianEvent, LaplaceEvent
from dpledger.core.specs import MethodSpec
from dpledger.core.validation import positive_finite
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.runner import run_verified
from dpledger.runtime.units import DataUnits

USER8 = Adjacency(unit="user", unit_key="user_id", max_contributions=8)


def _pipeline(tmp_path: Path, release: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        "delta = 1e-6\n"
        '[[sources]]\nname = "visits"\n'
        'adjacency = {relation = "add_remove", unit = "user", unit_key = "user_id", '
        "max_contributions = 8}\n"
        f'[[releases]]\nid = "count"\ninput = "visits"\n{release}\n'
    )
    return path


def _account(capfd: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    assert main(["account", str(path), "--json"]) == 0
    out: dict[str, Any] = json.loads(capfd.readouterr().out)
    return out


def _laplace_exact(eps0: float, delta: float) -> float:
    """Exact epsilon(delta) of one Laplace release with pure epsilon ``eps0`` (closed form)."""
    bound = ClosedFormAccountant(Adjacency()).compose(LaplaceEvent(1.0 / eps0)).get_epsilon(delta)
    return float(bound.epsilon)


def test_registered_method_on_user_source_is_lifted_like_the_event(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    by_method = _account(
        capfd,
        _pipeline(
            tmp_path,
            'method = "laplace_mechanism"\nparams = {sensitivity = 1.0, noise_multiplier = 10.0}',
        ),
    )
    by_event = _account(
        capfd, _pipeline(tmp_path, 'event = {kind = "laplace", noise_multiplier = 10.0}')
    )
    eps_method, eps_event = by_method["epsilon"], by_event["epsilon"]
    # row level the count is 0.1-DP; eight rows per user make it 0.8-DP (group privacy by the
    # L1 sensitivity x 8): the exact Laplace profile at eps0 = 0.8, not 0.1
    exact = _laplace_exact(0.8, 1e-6)
    assert 0.79 < exact <= 0.8
    assert exact - 1e-9 <= eps_method <= 0.8 + 1e-9
    assert eps_method == pytest.approx(eps_event, rel=1e-12)
    # the report of the same file resolves the method and states the same lifted bound
    path = _pipeline(
        tmp_path,
        'method = "laplace_mechanism"\nparams = {sensitivity = 1.0, noise_multiplier = 10.0}',
    )
    assert (
        main(
            [
                "report",
                str(path),
                "--format",
                "json",
                "--no-figures",
                "--out",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bound"]["epsilon"] == pytest.approx(eps_method, rel=1e-12)


def test_per_example_dp_sgd_is_refused_at_user_level(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    path = _pipeline(
        tmp_path,
        'method = "dp_sgd_logistic"\nparams = {steps = 10, '
        "sampling_probability = 0.01, noise_multiplier = 1.0, clip_norm = 1.0, "
        "expected_batch_size = 10.0}",
    )
    assert main(["account", str(path)]) == 2
    err = capfd.readouterr().err
    assert "poisson_sampled samples rows" in err and "Fix:" in err


def _run_config(tmp_path: Path, name: str, params: str, data: dict[str, Any]) -> Path:
    np.savez(tmp_path / f"{name}.npz", **data)
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'data = "{name}.npz"\ndelta = 1e-6\n[params]\n{params}\n'
        '[adjacency]\nunit = "user"\nunit_key = "user_id"\nmax_contributions = 3\n'
    )
    return config


def test_dpledger_run_refuses_row_level_dp_sgd_for_users(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    config = _run_config(
        tmp_path,
        "sgd",
        "steps = 3\nsampling_probability = 0.5\nnoise_multiplier = 1.0\nclip_norm = 1.0\n"
        "expected_batch_size = 5.0",
        {
            "user_id": np.repeat(np.arange(5), 2),
            "x": rng.normal(size=(10, 2)),
            "y": (rng.random(10) < 0.5).astype(float),
        },
    )
    out = tmp_path / "out"
    assert main(["run", "dp_sgd_logistic", "--config", str(config), "--out", str(out)]) == 2
    assert "no proven lift" in capfd.readouterr().err
    assert not out.exists()


def test_dpledger_run_needs_the_unit_key_column(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    config = _run_config(
        tmp_path, "mean", "radius = 1.0\nnoise_multiplier = 2.0\nn = 10", {"rows": np.ones((10, 2))}
    )
    out = tmp_path / "out"
    assert main(["run", "private_mean", "--config", str(config), "--out", str(out)]) == 2
    err = capfd.readouterr().err
    assert "data.user_id: is missing" in err and "Fix:" in err
    assert not out.exists()


def test_dpledger_run_lifts_and_enforces_the_contribution_bound(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    # user 0 has 20 rows at the far corner; at most 3 of them may count
    rows = np.vstack([np.full((20, 2), 100.0), np.zeros((6, 2))])
    users = np.r_[np.zeros(20, dtype=np.int64), np.arange(1, 7)]
    config = _run_config(
        tmp_path,
        "mean",
        "radius = 1.0\nnoise_multiplier = 6.0\nn = 9",
        {"user_id": users, "rows": rows},
    )
    out = tmp_path / "out"
    assert (
        main(["run", "private_mean", "--config", str(config), "--out", str(out), "--seed", "3"])
        == 0
    )
    record = json.loads((out / "ledger.json").read_text())
    # three rows per user: sensitivity 3 R, i.e. the Gaussian at noise multiplier 6 / 3 = 2
    assert record["accounted"]["lift_rules"] == ["gaussian_l2_sensitivity_xk"]
    assert record["accounted"]["event"] == {"kind": "gaussian", "noise_multiplier": 2.0}
    exact = ClosedFormAccountant(Adjacency()).compose(GaussianEvent(2.0)).get_epsilon(1e-6)
    row = ClosedFormAccountant(Adjacency()).compose(GaussianEvent(6.0)).get_epsilon(1e-6)
    assert record["privacy"]["epsilon"] == pytest.approx(exact.epsilon, rel=1e-9)
    assert record["privacy"]["epsilon"] > 2.5 * row.epsilon
    # the clipped sum saw 3 of user 0's rows: (3 * 1/sqrt(2) * (1, 1)) plus noise of std 6
    noisy_sum = np.load(out / "noisy_sum.npy")
    assert np.all(np.abs(noisy_sum - 3 / math.sqrt(2)) < 6 * 6)
    assert record["declared_unit"] == "row"
    # the report of the run states the same lifted bound
    assert main(["report", str(out), "--format", "json", "--out", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bound"]["epsilon"] == pytest.approx(exact.epsilon, rel=1e-9)


@attrs.frozen
class _P:
    noise_multiplier: float = attrs.field(validator=positive_finite)
    enforce: bool = False


def _user_claiming_run(
    params: _P, data: Any, ledger: PrivacyLedger, rng: np.random.Generator
) -> dict[str, Any]:
    rows = np.asarray(data["rows"], dtype=float)
    if params.enforce:
        return {
            "sum": ledger.clipped_sum_gaussian(
                rows, 1.0, params.noise_multiplier, step="sum", per_unit=True
            )
        }
    return {"sum": ledger.clipped_sum_gaussian(rows, 1.0, params.noise_multiplier, step="sum")}


USER_CLAIM = MethodSpec(
    name="user_claim",
    params=_P,
    declare=lambda p, a: Declaration(
        GaussianEvent(p.noise_multiplier), "user" if a.unit == "user" else "row"
    ),
    run=_user_claiming_run,
    description="per-user clipped sum",
    proof="test",
)


def _user_data() -> dict[str, Any]:
    return {"rows": np.ones(12), "user_id": np.repeat(np.arange(4), 3)}


def test_user_level_claim_without_enforcement_is_refused() -> None:
    # the row-level sum is refused as it runs: no contribution bound is in force
    with pytest.raises(LedgerViolationError, match="no contribution bound is in force"):
        run_verified(USER_CLAIM, _P(2.0), _user_data(), adjacency=USER8, seed=0)


def test_user_level_claim_that_enforces_nothing_is_refused_at_verification() -> None:
    def run(params: _P, data: Any, ledger: PrivacyLedger, rng: np.random.Generator) -> Any:
        return {}

    spec = attrs.evolve(USER_CLAIM, run=run)
    with pytest.raises(LedgerViolationError, match="never enforced the unit"):
        run_verified(spec, _P(2.0), _user_data(), adjacency=USER8, seed=0)


def _bounded_rows_run(k: int, declared_sigma: float) -> MethodSpec:
    """Keeps ``k`` rows per user, clips each row to 1 and adds N(0, 2^2): one user moves the
    sum by up to k, so the user-level noise multiplier is 2 / k."""

    def run(params: _P, data: Any, ledger: PrivacyLedger, rng: np.random.Generator) -> Any:
        keep = ledger.bound_units(k)
        rows = np.asarray(data["rows"], dtype=float)[keep]
        return {"sum": ledger.clipped_sum_gaussian(rows, 1.0, 2.0, step="sum")}

    return attrs.evolve(
        USER_CLAIM,
        name=f"bounded_rows_{k}",
        declare=lambda p, a: Declaration(GaussianEvent(declared_sigma), "user"),
        run=run,
    )


@pytest.mark.parametrize("k", [2, 3, 1000])
def test_k_rows_per_user_are_booked_at_k_times_the_row_sensitivity(k: int) -> None:
    # declaring the row-level noise at user level is refused (it used to verify for any k) ...
    with pytest.raises(LedgerViolationError, match="not covered"):
        run_verified(_bounded_rows_run(k, 2.0), _P(2.0), _user_data(), adjacency=USER8, seed=0)
    # ... and the user-level noise multiplier 2 / k is what is booked
    result = run_verified(
        _bounded_rows_run(k, 2.0 / k), _P(2.0), _user_data(), adjacency=USER8, seed=0
    )
    booked = [e for e in result.ledger.log if e["step"] == "sum"]
    assert booked[0]["event"]["noise_multiplier"] == pytest.approx(2.0 / k, rel=1e-12)
    assert f"up to {k} rows" in booked[0]["note"]


def test_one_row_per_user_is_booked_at_the_row_sensitivity() -> None:
    result = run_verified(_bounded_rows_run(1, 2.0), _P(2.0), _user_data(), adjacency=USER8, seed=0)
    assert result.ledger.log[-1]["event"]["noise_multiplier"] == 2.0


def test_a_user_level_sample_of_several_rows_per_user_is_refused() -> None:
    ledger = PrivacyLedger(
        Declaration(GaussianEvent(1.0), "user"),
        adjacency=USER8,
        rng=np.random.default_rng(0),
        units=DataUnits("data.user_id", [np.repeat(np.arange(4), 3)]),
    )
    ledger.bound_units(3)
    with pytest.raises(LedgerViolationError, match="drawn as a whole"):
        ledger.poisson_sample(12, 0.1, step="batch")


@pytest.mark.parametrize("per_unit", [False, True], ids=["rows", "units"])
def test_a_sample_credits_only_the_sampled_records(per_unit: bool) -> None:
    """A careless method sums every row inside a Poisson sample (directly, or grouped by a
    unit key per row): refused, naming the step."""
    from dpledger.core.events import PoissonSampledEvent

    ledger = PrivacyLedger(
        Declaration(PoissonSampledEvent(0.001, GaussianEvent(1.0)), "row"),
        rng=np.random.default_rng(0),
        units=DataUnits("data.user_id", [np.arange(1000)]),
    )
    x = np.ones(1000)
    what = "units" if per_unit else "rows"
    with (
        pytest.raises(LedgerViolationError, match=f"1000 {what}, but the open sample 'batch'"),
        ledger.poisson_sample(x.size, 0.001, step="batch") as batch,
    ):
        ledger.clipped_sum_gaussian(x, 1.0, 1.0, step="sum", per_unit=per_unit)
    assert len(batch) < 1000


def test_user_level_claim_with_per_user_clipping_runs() -> None:
    result = run_verified(USER_CLAIM, _P(2.0, enforce=True), _user_data(), adjacency=USER8, seed=0)
    assert result.declaration.unit == "user"
    assert result.ledger.unit_steps == ["sum"]
    # four users, each clipped to norm 1 as a whole: the sum is 4 plus N(0, 2^2)
    assert abs(float(result.outputs["sum"]) - 4.0) < 2.0 * 6


def test_user_level_claim_on_a_row_source_is_a_plugin_error() -> None:
    spec = attrs.evolve(USER_CLAIM, declare=lambda p, a: Declaration(GaussianEvent(1.0), "user"))
    with pytest.raises(PluginError, match="protects rows"):
        run_verified(spec, _P(2.0), _user_data(), adjacency=Adjacency(), seed=0)


def test_row_sampled_declaration_cannot_be_lifted() -> None:
    from dpledger.core.declaration import stated_for_unit
    from dpledger.core.events import PoissonSampledEvent

    with pytest.raises(LiftingError, match="Fix:"):
        stated_for_unit(PoissonSampledEvent(0.1, GaussianEvent(1.0)), "row", USER8, release="r")

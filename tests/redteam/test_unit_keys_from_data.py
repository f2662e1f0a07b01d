"""At user level the unit of every row comes from the data, never from keys a plugin picks.

Each planted plugin declares a user-level event and runs under ``dpledger run`` on ten users of
five rows each. The dishonest ones hand the ledger keys of their own choosing (row ids, another
column) or sample rows one by one: each is refused, naming the step and the fix, and writes
nothing. The honest ones are accounted as closed forms computed here independently say.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import GaussianEvent
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.units import DataUnits, units_from_data
from tests.conftest import install_dist

SIGMA = 2.5
DELTA = 1e-5
USERS, ROWS_PER_USER = 10, 5

SOURCE = """
import attrs
import numpy as np
from dpledger.core.declaration import Declaration
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec
from dpledger.runtime.units import DataUnits

MODE = "{mode}"


@attrs.frozen
class P:
    noise_multiplier: float = 2.5


def declare(params, adjacency):
    gaussian = GaussianEvent(params.noise_multiplier)
    if MODE.startswith("poisson"):
        return Declaration(SelfComposedEvent(PoissonSampledEvent(0.5, gaussian), 3), "user")
    return Declaration(gaussian, "user")


def summed(params, data, ledger):
    x = np.asarray(data["x"], dtype=float)
    keys = {
        "honest": {"per_unit": True},
        "swapped_units": {"per_unit": True},
        "honest_keys": {"unit_keys": data["user_id"] * 7 + 3},
        "row_ids": {"unit_keys": np.arange(len(x))},
        "other_column": {"unit_keys": data["day"]},
    }
    if MODE == "swapped_units":
        ledger._units = DataUnits("data.x", [np.arange(len(x))])
    if MODE == "bound_row_ids":
        x = x[ledger.bound_units(np.arange(len(x)), 1, step="units")]
    unit = keys.get(MODE, {})
    return ledger.clipped_sum_gaussian(x, 1.0, params.noise_multiplier, step="sum", **unit)


def sampled(params, data, ledger):
    x = np.asarray(data["x"], dtype=float)
    if MODE == "poisson_row_ids":
        keep = ledger.bound_units(np.arange(len(x)), 1, step="units")
    else:
        keep = ledger.bound_units(1, step="units")
    pool = x[keep] if MODE == "poisson_honest" else x
    sums = []
    for t in range(3):
        with ledger.poisson_sample(len(pool), 0.5, step=f"sample[{t}]") as batch:
            sums.append(ledger.clipped_sum_gaussian(
                pool[batch.indices], 1.0, params.noise_multiplier, step=f"noise[{t}]"))
    return np.asarray(sums)


def run(params, data, ledger, rng):
    if MODE.startswith("poisson"):
        return {"sums": sampled(params, data, ledger)}
    return {"sum": summed(params, data, ledger)}


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="unitsum", params=P, declare=declare, run=run,
                        description="a per-user clipped sum", proof="Balle & Wang 2018"))
"""


def _data() -> dict[str, Any]:
    return {
        "user_id": np.repeat(np.arange(USERS), ROWS_PER_USER),
        "day": np.tile(np.arange(ROWS_PER_USER), USERS),
        "x": np.ones(USERS * ROWS_PER_USER),
    }


def _run(make_dist: Any, tmp_path: Path, mode: str, unit_key: str = "user_id") -> tuple[int, Path]:
    make_dist(
        f"unitsum-{mode.replace('_', '-')}",
        "1.0",
        {f"unitsum_{mode}": SOURCE.replace("{mode}", mode)},
        {"unitsum": f"unitsum_{mode}"},
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    np.savez(tmp_path / "users.npz", **_data())
    config = tmp_path / "c.toml"
    config.write_text(
        f'data = "users.npz"\ndelta = {DELTA}\n[params]\nnoise_multiplier = {SIGMA}\n'
        f'[adjacency]\nunit = "user"\nunit_key = "{unit_key}"\nmax_contributions = 5\n'
    )
    out = tmp_path / "out"
    argv = ["run", "unitsum", "--config", str(config), "--out", str(out), "--seed", "4"]
    return main([*argv, "--plugins-allow", "unitsum"]), out


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        # row ids make every row a user: a clipped sum of 5-row users booked at one row's
        # sensitivity (Balle-Wang epsilon 1.55 instead of the 10.0 of noise multiplier 0.5)
        (
            "row_ids",
            "step 'sum': the unit keys passed disagree with the data's unit column "
            "data.user_id (they group the rows into 50 units, the data into 10)",
        ),
        (
            "other_column",
            "step 'sum': the unit keys passed disagree with the data's unit "
            "column data.user_id (they group the rows into 5 units, the data into 10)",
        ),
        ("bound_row_ids", "step 'units': the unit keys passed disagree"),
        ("poisson_row_ids", "step 'units': the unit keys passed disagree"),
        # the contribution bound is called, but every row is then sampled on its own
        (
            "poisson_rows",
            "step 'sample[0]': the method declares a user-level event, but this "
            "sample draws from 50 records while the data's unit column data.user_id holds 10 units",
        ),
    ],
)
def test_keys_a_plugin_picks_are_refused(
    make_dist: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], mode: str, message: str
) -> None:
    code, out = _run(make_dist, tmp_path, mode)
    err = capfd.readouterr().err
    assert code == 2, err
    assert message in err and "Fix:" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def _record(out: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((out / "ledger.json").read_text())
    return record


@pytest.fixture(scope="module")
def honest_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The honest per-user sum run once (seed 4) for the tests that check it or compare another
    plugin's run with it; its distribution is on ``sys.path`` only while it runs."""
    where = tmp_path_factory.mktemp("honest")
    with pytest.MonkeyPatch.context() as patch:
        site = where / "site"
        site.mkdir()
        patch.syspath_prepend(str(site))
        try:
            code, out = _run(functools.partial(install_dist, site), where / "run", "honest")
        finally:
            sys.modules.pop("unitsum_honest", None)
    assert code == 0
    return out


def test_the_honest_per_user_sum_is_clipped_per_user_and_accounted_exactly(
    honest_out: Path,
    honest_gaussian_epsilon: Callable[[float, float], float],
) -> None:
    out = honest_out
    record = _record(out)
    exact = honest_gaussian_epsilon(SIGMA, DELTA)
    assert record["privacy"]["epsilon"] == pytest.approx(exact, rel=1e-6)
    assert record["privacy"]["epsilon"] >= exact * (1 - 1e-9)
    assert record["unit_steps"] == ["sum"]
    # each user's five ones are summed and clipped to 1: ten users give 10 (rows would give 50)
    total = json.loads((out / "outputs.json").read_text())["sum"]
    assert abs(total - USERS) < 6 * SIGMA


def test_keys_swapped_behind_the_ledgers_back_change_nothing(
    honest_out: Path, make_dist: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # the method runs in a worker process: the ledger it writes to is a proxy, and the keys
    # the real ledger (in dpledger's process) read from the data stay what they were
    out = honest_out
    code, swapped = _run(make_dist, tmp_path / "b", "swapped_units")
    assert code == 0, capfd.readouterr().err
    sums = [json.loads((o / "outputs.json").read_text())["sum"] for o in (out, swapped)]
    assert sums[0] == sums[1]  # the same seed: the same per-user clipping and noise
    assert _record(out)["privacy"] == _record(swapped)["privacy"]


def test_keys_that_group_rows_as_the_data_does_run_and_change_nothing(
    honest_out: Path, make_dist: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = honest_out
    code, relabelled = _run(make_dist, tmp_path / "b", "honest_keys")
    assert code == 0, capfd.readouterr().err
    sums = [json.loads((o / "outputs.json").read_text())["sum"] for o in (out, relabelled)]
    assert sums[0] == sums[1]
    assert _record(out)["privacy"] == _record(relabelled)["privacy"]


def test_the_honest_user_sampled_run_is_accounted_like_dp_accounting(
    make_dist: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pld = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")
    d = pytest.importorskip("dp_accounting.dp_event")
    code, out = _run(make_dist, tmp_path, "poisson_honest")
    assert code == 0, capfd.readouterr().err
    event = d.SelfComposedDpEvent(d.PoissonSampledDpEvent(0.5, d.GaussianDpEvent(SIGMA)), 3)
    theirs = pld.PLDAccountant(value_discretization_interval=1e-4).compose(event)
    reference = theirs.get_epsilon(DELTA)
    assert _record(out)["privacy"]["epsilon"] == pytest.approx(reference, rel=0.01)
    # one row per user was sampled: ten records per draw, never the fifty rows
    assert _record(out)["unit_steps"] == ["units"]


def test_a_user_level_run_without_the_unit_column_is_refused(
    make_dist: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(make_dist, tmp_path, "honest", unit_key="person")
    err = capfd.readouterr().err
    assert code == 2
    assert "data.person: is missing: user-level adjacency identifies users by 'person'" in err
    assert "Fix:" in err and not out.exists()


USER = Adjacency(unit="user", unit_key="uid", max_contributions=3)


def _parts(units: DataUnits) -> list[list[int]]:
    return [units.codes(None, p, "t").tolist() for p in range(units.num_parts)]


def test_the_unit_column_is_read_from_every_documented_data_form() -> None:
    table = np.array([(7, 1.0), (3, 2.0), (7, 3.0)], dtype=[("uid", "i8"), ("x", "f8")])
    assert _parts(units_from_data(table, USER)) == [[1, 0, 1]]
    # time marginals: one part per time, codes shared across times
    per_time = {"marginals": np.zeros((2, 3, 1)), "ids": np.array([[5, 6, 5], [6, 6, 9]])}
    assert _parts(units_from_data(per_time, USER)) == [[0, 1, 0], [1, 1, 2]]
    numbered = {"ids_0": np.array([5, 6]), "ids_1": np.array([9])}
    assert _parts(units_from_data(numbered, USER)) == [[0, 1], [2]]
    # user tables in their JSON form: each table's user_id
    tables = {"schema": [], "users": np.array([{"user_id": "b", "rows": []}, {"user_id": "a"}])}
    units = units_from_data(tables, USER)
    assert units.column == "data.users[].user_id" and _parts(units) == [[1, 0]]
    with pytest.raises(InvalidParameterError, match=r"data\.uid: is missing"):
        units_from_data({"x": np.ones(3)}, USER)


def _ledger(keys: Any) -> PrivacyLedger:
    return PrivacyLedger(
        Declaration(GaussianEvent(1e-9), "user"),
        USER,
        0,
        units=DataUnits("data.uid", [np.asarray(keys)]),
    )


def test_bound_units_keeps_rows_of_the_data_by_index() -> None:
    ledger = _ledger([4, 4, 8, 4, 8, 9])
    np.testing.assert_array_equal(ledger.bound_units(2, step="b"), [0, 1, 2, 4, 5])
    # rows name data rows: the first of each unit among them, in the order given
    np.testing.assert_array_equal(ledger.bound_units(1, rows=[5, 3, 1, 2], step="b"), [5, 3, 2])
    with pytest.raises(LedgerViolationError, match="outside the 6 rows of the unit column"):
        ledger.bound_units(1, rows=[0, 6], step="b")
    with pytest.raises(LedgerViolationError, match="names a row more than once"):
        ledger.bound_units(1, rows=[1, 1], step="b")
    with pytest.raises(LedgerViolationError, match="part=1 does not name one of the 1 parts"):
        ledger.bound_units(1, part=1, step="b")


def test_a_ledger_given_no_unit_column_refuses_to_bound_units() -> None:
    ledger = PrivacyLedger(Declaration(GaussianEvent(1.0), "user"), USER, 0)
    with pytest.raises(LedgerViolationError, match="step 'b': this ledger was given no unit"):
        ledger.bound_units(1, step="b")
    with pytest.raises(LedgerViolationError, match="step 's': this ledger was given no unit"):
        ledger.clipped_sum_gaussian(np.ones(3), 1.0, 1.0, step="s", per_unit=True)


def test_a_per_unit_sum_of_a_subset_groups_by_the_data_keys() -> None:
    ledger = _ledger([4, 4, 8, 4, 8, 9])
    # rows 0, 1, 3 are one unit: their three ones are clipped together to 1
    total = ledger.clipped_sum_gaussian(
        np.ones(4), 1.0, 1e-9, step="s", per_unit=True, rows=[0, 1, 3, 5]
    )
    assert total == pytest.approx(2.0, abs=1e-6)
    with pytest.raises(LedgerViolationError, match="4 rows for 6 rows of the unit column"):
        ledger.clipped_sum_gaussian(np.ones(4), 1.0, 1e-9, step="s", per_unit=True)

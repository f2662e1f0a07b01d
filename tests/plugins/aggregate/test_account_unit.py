"""``dpledger account`` of a pipeline with an aggregation names the unit the method bounds
itself (as ``dpledger run`` does), says what was accounted, and keeps the bound and the
accounted adjacency as they were."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from dpledger.cleanroom.resolver import RoomResolver, builtin_host
from dpledger.cli import main
from dpledger.commands.account import ROOM_OPTIONS, _load, certify

EXAMPLE = Path(__file__).parents[3] / "examples" / "pipelines" / "partitioned_histogram.toml"
UNIT = "add/remove of one unit: every row of one value of column 'user'"
ROW = "add/remove of one row (event level)"


@pytest.fixture(scope="module")
def host() -> Any:
    return builtin_host(None, None)


def _account(capsys: pytest.CaptureFixture[str], host: Any, path: Path, *extra: str) -> str:
    """What ``dpledger account`` prints, certified in this process (as in the clean room)."""
    args = argparse.Namespace(**{k: None for k in ROOM_OPTIONS})
    args.file, args.json, args.per_release, args.crosscheck = str(path), "--json" in extra, 0, 0
    resolver = RoomResolver(host, [])
    assert certify(args, _load(str(path), resolver), resolver.rests_on, resolver.host) == 0
    return capsys.readouterr().out


def _pipeline(
    tmp_path: Path, unit_column: str | None, other_release: bool = False, cells: bool = False
) -> Path:
    unit = f'unit_column = "{unit_column}"\nmax_partitions_per_unit = 2\n' if unit_column else ""
    text = (
        'name = "p"\ndelta = 1e-6\n[[sources]]\nname = "s"\n'
        'adjacency = { relation = "add_remove", unit = "row" }\n'
        + (
            '[[transforms]]\nid = "c"\nkind = "partition"\ninput = "s"\nkey = "k"\ncells = 3\n'
            if cells
            else ""
        )
        + f'[[releases]]\nid = "agg"\ninput = "{"c" if cells else "s"}"\nmethod = "aggregate"\n'
        "[releases.params]\n"
        f'partition_column = "day"\n{unit}noise_multiplier = 4.0\n'
        'public_partitions = ["mon", "tue"]\n'
    )
    if other_release:
        text += (
            '[[releases]]\nid = "plain"\ninput = "s"\n'
            'event = { kind = "gaussian", noise_multiplier = 8.0 }\n'
        )
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_text_names_the_unit_and_what_was_accounted(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["account", str(EXAMPLE)]) == 0  # through the clean room
    out = capfd.readouterr().out
    lines = out.splitlines()
    adjacency = next(line for line in lines if line.startswith("adjacency: "))
    assert adjacency.startswith(f"adjacency: {UNIT}")  # was the source's one row
    assert "(at most 3 partitions and 2 rows in each kept per unit" in adjacency
    assert (
        f"accounted: the method's events, stated for that unit, composed under the "
        f"source's adjacency ({ROW})" in lines
    )
    assert f"    unit: {adjacency.removeprefix('adjacency: ')}" in lines
    assert lines[1].startswith("epsilon <= 0.995438 at delta = 1e-06")  # the bound unchanged


def test_the_json_names_the_unit_and_keeps_the_accounted_adjacency(
    capsys: pytest.CaptureFixture[str], host: Any
) -> None:
    out = json.loads(_account(capsys, host, EXAMPLE, "--json"))
    assert out["adjacency_description"].startswith(UNIT)
    assert out["accounted_adjacency_description"] == ROW
    assert out["adjacency"]["unit"] == "row"  # the accounted graph's adjacency, as before
    (source,) = out["sources"]
    assert source["adjacency_description"] == out["adjacency_description"]
    assert source["accounted_adjacency_description"] == ROW
    (release,) = out["releases"]
    assert release["protects"] == out["adjacency_description"]


def test_a_row_level_aggregation_states_one_row(
    capsys: pytest.CaptureFixture[str], host: Any, tmp_path: Path
) -> None:
    path = _pipeline(tmp_path, None)
    text = _account(capsys, host, path)
    assert f"adjacency: {ROW}" in text.splitlines() and "unit:" not in text
    out = json.loads(_account(capsys, host, path, "--json"))
    assert out["adjacency_description"] == ROW and "protects" not in out["releases"][0]


def test_a_source_with_a_release_that_bounds_no_unit_is_stated_for_one_row(
    capsys: pytest.CaptureFixture[str], host: Any, tmp_path: Path
) -> None:
    """The composition holds for one row only: the plain release protects no more."""
    path = _pipeline(tmp_path, "user", other_release=True)
    lines = _account(capsys, host, path).splitlines()
    assert f"adjacency: {ROW}" in lines
    (unit,) = [line for line in lines if line.startswith("    unit: ")]
    assert unit.startswith(f"    unit: {UNIT}")
    assert "this release's events alone hold for that unit" in unit
    out = json.loads(_account(capsys, host, path, "--json"))
    assert out["adjacency_description"] == ROW
    assert "accounted_adjacency_description" not in out["sources"][0]
    assert out["releases"][0]["protects"].startswith(UNIT)
    assert "protects" not in out["releases"][1]


def test_an_aggregation_in_partition_cells_is_stated_for_one_row(
    capsys: pytest.CaptureFixture[str], host: Any, tmp_path: Path
) -> None:
    """A row is in one cell and pays once; a unit's rows can be in every cell: the method's
    unit is not what the parallel composition certifies, so it is not named."""
    path = _pipeline(tmp_path, "user", cells=True)
    text = _account(capsys, host, path)
    assert f"adjacency: {ROW}" in text.splitlines() and "unit:" not in text
    out = json.loads(_account(capsys, host, path, "--json"))
    assert out["adjacency_description"] == ROW and "protects" not in out["releases"][0]

"""``dpledger run aggregate``: a Parquet table on the in-memory (and, slow, the Dask) engine in
the clean room, its public record and report; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.plugins.aggregate.explain import explain_section
from dpledger.plugins.aggregate.plugin import SPEC
from dpledger.runtime.engines import aggregation_events, aggregation_request
from tests.plugins.aggregate.conftest import DAYS, config_text, heavy_table


@pytest.mark.parametrize("engine", ["memory", pytest.param("dask", marks=pytest.mark.slow)])
def test_a_run_from_parquet_is_recorded_and_reported(
    engine: str,
    heavy_files: dict[str, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if engine == "dask":
        pytest.importorskip("dask.dataframe")
    if "parquet" not in heavy_files:
        pytest.skip("pandas and pyarrow write the Parquet table")
    cfg = tmp_path / "run.toml"
    cfg.write_text(config_text("t.parquet", None, engine=engine, metrics=["count", "mean"]))
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # the table is named relative to the working directory
    code = main(["run", "aggregate", "--config", str(cfg), "--out", str(out), "--seed", "3"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    (line,) = [x for x in captured.out.splitlines() if x.startswith("aggregate: verified")]
    assert "add/remove of one unit: every row of one value of column 'user' (at most 1 " in line
    assert "one row" not in line
    outputs = json.loads((out / "outputs.json").read_text())
    assert outputs["partitions"] == sorted(str(d) for d in DAYS)
    plan = outputs["plan"]
    assert plan["engine"] == engine and plan["partitions"]["kind"] == "public"
    assert [r["metric"] for r in plan["releases"]] == ["count", "mean"]
    assert np.load(out / "count.npy").shape == (DAYS.size,)
    record = json.loads((out / "ledger.json").read_text())
    notes = [s.get("note", "") for s in record["steps"]]
    assert all("L0=1" in n and f"{engine} engine" in n for n in notes) and len(notes) == 2
    assert main(["report", str(out)]) == 0
    report = capfd.readouterr().out
    assert "Aggregation: how the computation runs" in report
    assert "Laplace mechanism" in report
    # the clean room's report states the unit the run protected, as the run line does
    assert (
        "differentially private with respect to add/remove of one unit: every row of one "
        "value of column 'user' (at most 1 " in report
    )


def test_a_table_with_nan_is_one_line_exit_2_and_nothing_is_written(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    table = heavy_table()
    table["spend"][4] = np.nan
    np.savez(tmp_path / "t.npz", **table)
    cfg = tmp_path / "run.toml"
    cfg.write_text(config_text(None, "t.npz"))
    out = tmp_path / "out"
    code = main(["run", "aggregate", "--config", str(cfg), "--out", str(out), "--seed", "3"])
    err = capfd.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "spend: holds NaN or infinite values" in err and "Fix:" in err
    assert not out.exists() and not Path(f"{out}.private").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"value_column": "amount", "metrics": ["sum"]}, "amount: is not a column"),
        ({"engine": "beam"}, "engine: must be one of"),
        ({"public_partitions": None}, "public_partitions: is missing"),
    ],
)
def test_bad_configs_are_one_line_exit_2_and_nothing_is_written(
    changes: dict[str, object],
    words: str,
    heavy_files: dict[str, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text(config_text(None, heavy_files["npz"].name, **changes))
    out = tmp_path / "out"
    code = main(["run", "aggregate", "--config", str(cfg), "--out", str(out)])
    err = capfd.readouterr().err.strip()
    assert code == 2 and "\n" not in err and words in err, err
    assert not out.exists() and not Path(f"{out}.private").exists()


def test_the_declaration_is_known_before_any_data_is_read() -> None:
    params = SPEC.make_params(
        dict(
            partition_column="day",
            noise_multiplier=3.0,
            metrics=["count", "sum", "mean"],
            value_column="spend",
            unit_column="user",
            max_partitions_per_unit=4,
            max_rows_per_partition=2,
            public_partitions=["a"],
            table="nowhere.parquet",
        )
    )
    from dpledger.core.adjacency import Adjacency

    declaration = SPEC.declare(params, Adjacency())
    assert declaration.event.to_dict()["kind"] == "composed"
    assert [e["noise_multiplier"] for e in declaration.event.to_dict()["events"]] == [3.0] * 3
    with pytest.raises(Exception, match=r"adjacency\.unit: is user"):
        SPEC.declare(params, Adjacency(unit="user", unit_key="user"))


def test_the_section_explains_each_release_in_explain_computation_words() -> None:
    params = {
        "partition_column": "day",
        "noise_multiplier": 2.0,
        "public_partitions": ["a"],
        "metrics": ["count", "sum"],
        "value_column": "v",
    }
    event = aggregation_events(aggregation_request(params)).to_dict()
    context = {
        "releases": [{"node": "agg", "method": "aggregate"}],
        "release_events": {"agg": event},
    }
    text = explain_section(context)
    assert "Per-partition contribution bounding" in text and "Adding noise" in text
    assert text.count("Gaussian mechanism, noise standard deviation = 2.0") == 2
    assert explain_section({"releases": [{"node": "x", "method": "other"}]}) == ""


def test_the_run_line_names_the_unit_column_or_one_row() -> None:
    from dpledger.core.adjacency import Adjacency
    from dpledger.plugins.aggregate.plugin import protects

    params = SPEC.make_params({"partition_column": "day", "noise_multiplier": 1.0})
    assert SPEC.protects is protects and protects(params, Adjacency()) is None  # row level
    unit = SPEC.make_params(
        {"partition_column": "day", "noise_multiplier": 1.0, "unit_column": "uid"}
    )
    assert protects(unit, Adjacency(relation="replace_one")).startswith(
        "replace-one of one unit: every row of one value of column 'uid' (at most 1 partitions"
    )

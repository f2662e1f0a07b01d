"""Pipeline files with per-user cell bounds (``max_cells_per_unit``) and a private partition
selection: the example accounted as the events it states, the cells a unit pays for under each
relation, and one-line refusals naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import PipelineFileError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PartitionSelectionEvent,
    SelfComposedEvent,
)
from dpledger.runtime.pipeline import load_pipeline, parse_pipeline
from dpledger.runtime.reduction import reduce

EXAMPLE = Path(__file__).parents[2] / "examples" / "pipelines" / "partitioned_counts.toml"
USER = Adjacency(unit="user", unit_key="user_id", max_contributions=1000)


def test_the_example_is_the_selection_and_five_cells_of_two_releases(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert main(["account", str(EXAMPLE), "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    # 2 visits per user and store lift sigma = 20 to 10; 5 stores, 2 releases each
    cells = SelfComposedEvent(GaussianEvent(10.0), 5)
    selection = PartitionSelectionEvent("truncated_geometric", 0.5, 5e-6, 5)
    expected = account(ComposedEvent((cells, selection, cells)), USER, delta=1e-5).bound
    assert out["epsilon"] == pytest.approx(expected.epsilon, rel=1e-9)
    assert out["epsilon_lower"] == 0.0  # the selection is bounded from above only
    # every store instead of five: strictly more
    alone = account(SelfComposedEvent(GaussianEvent(10.0), 2 * 6), USER, delta=1e-5).bound
    assert out["epsilon"] < alone.epsilon + expected.epsilon
    note = out["sources"][0]["notes"][0]
    assert "at most 5 cells (max_cells_per_unit)" in note


def _doc(partition: dict[str, object], relation: str = "add_remove", unit: str = "user") -> dict:  # type: ignore[type-arg]
    adjacency: dict[str, object] = {"relation": relation, "unit": unit}
    if unit == "user":
        adjacency.update(unit_key="user_id", max_contributions=3)
    return {
        "sources": [{"name": "s", "adjacency": adjacency}],
        "transforms": [{"id": "p", "kind": "partition", "input": "s", "key": "k", **partition}],
        "releases": [
            {"id": "r", "input": "p", "event": {"kind": "gaussian", "noise_multiplier": 4.0}}
        ],
    }


def _count(doc: dict) -> int:  # type: ignore[type-arg]
    (source,) = reduce(parse_pipeline(doc).graph).values()
    (alternative,) = source.multisets
    return dict(alternative)["r"]


@pytest.mark.parametrize(
    ("partition", "relation", "unit", "cells"),
    [
        ({"max_cells_per_unit": 4}, "add_remove", "user", 4),
        ({"max_cells_per_unit": 4, "cells": 3}, "add_remove", "user", 3),
        ({"max_cells_per_unit": 4, "cells": 100}, "add_remove", "user", 4),
        # left cells and entered ones
        ({"max_cells_per_unit": 4, "cells": 100}, "replace_one", "user", 8),
        ({"max_cells_per_unit": 4, "cells": 100, "public_key": True}, "replace_one", "row", 1),
        ({"max_cells_per_unit": 4}, "add_remove", "row", 1),  # a row is in one cell
        ({"cells": 6}, "add_remove", "user", 6),  # without the bound: every cell
    ],
)
def test_a_unit_pays_for_the_cells_it_can_be_in(
    partition: dict[str, object], relation: str, unit: str, cells: int
) -> None:
    doc = _doc(partition, relation, unit)
    if "cells" not in partition and "max_cells_per_unit" in partition:  # keys found in the data
        unit_of = {"declared_unit": "user"} if unit == "user" else {}
        doc["releases"].append({**_selection(max_partitions=4), **unit_of})
    assert _count(doc) == cells


def test_keys_found_in_the_data_need_a_selection_for_as_many_keys() -> None:
    """A partition whose keys are found in the data publishes which keys exist: without a
    partition selection on its source the file is refused, and a selection for fewer keys per
    unit than the partition keeps would be charged too little."""
    _fails(_doc({"max_cells_per_unit": 4}), "transforms[0]", "add a partition_selection")
    doc = _doc({"max_cells_per_unit": 4})
    doc["releases"].append({**_selection(max_partitions=1), "declared_unit": "user"})
    _fails(doc, "releases[1]", "set max_partitions = 4")
    doc["releases"][1]["event"]["max_partitions"] = 4
    assert _count(doc) == 4


def _fails(doc: dict, field: str, fix: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(PipelineFileError) as info:
        parse_pipeline(doc)
    message = str(info.value)
    assert "\n" not in message
    assert f": {field}: " in message, message
    assert fix in message.split("Fix: ")[1]


def _selection(**extra: object) -> dict[str, object]:
    event = {"kind": "partition_selection", "mechanism": "laplace", "epsilon": 1.0}
    return {"id": "keys", "input": "s", "event": {**event, "delta": 1e-6, **extra}}


def test_bad_cell_bounds_name_the_field() -> None:
    _fails(_doc({"max_cells_per_unit": 0}), "transforms[0].max_cells_per_unit", "")
    doc = _doc({})
    doc["transforms"].append(
        {
            "id": "c",
            "kind": "contribution_bound",
            "input": "p",
            "max_contributions": 1,
            "max_cells_per_unit": 2,
        }
    )
    _fails(doc, "transforms[1].max_cells_per_unit", "remove it")
    named = _doc({"max_cells_per_unit": 2})
    named["transforms"].append({"id": "c", "kind": "cell", "input": "p"})
    named["releases"][0]["input"] = "c"
    _fails(named, "transforms[1]", "drop max_cells_per_unit")


def test_a_selection_is_per_user_add_remove_and_above_the_partition() -> None:
    doc = _doc({"max_cells_per_unit": 2})
    doc["releases"].append(_selection(max_partitions=2))
    _fails(doc, "releases[1].declared_unit", 'declare declared_unit = "user"')
    doc["releases"][1]["declared_unit"] = "user"
    assert _count(doc) == 2  # accepted once stated per user
    replaced = _doc({"max_cells_per_unit": 2}, relation="replace_one")
    replaced["releases"].append({**_selection(), "declared_unit": "user"})
    _fails(replaced, "releases[1].event", 'declare relation = "add_remove"')
    below = _doc({"max_cells_per_unit": 2})
    below["releases"].append({**_selection(), "input": "p", "declared_unit": "user"})
    _fails(below, "releases[1]", "connect it to the partition's input")


def test_a_bad_selection_is_one_line_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    text = EXAMPLE.read_text(encoding="utf-8")
    path.write_text(text.replace("delta = 5e-6", "delta = 0.0"))
    with pytest.raises(PipelineFileError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: releases[0].event.delta: ")
    assert "Fix: " in message
    assert load_pipeline(EXAMPLE).graph.g.nodes["by_store"]["max_cells_per_unit"] == 5

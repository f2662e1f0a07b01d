"""Pipeline files of shuffled batches and random allocation: `dpledger account` gives the Python
API's bracket exactly, and a relation the batching is not analysed under is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import PipelineFileError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)
from dpledger.runtime.pipeline import load_pipeline

pytest.importorskip("dpledger.accountant.pld")

from dpledger.accountant.select import account

EXAMPLES = Path(__file__).parents[2] / "examples" / "pipelines"

CASES = [
    (
        "shuffled_batches.toml",
        SelfComposedEvent(ShuffledBatchesEvent(60000, 256, GaussianEvent(1.0)), 10),
        Adjacency(relation="replace_one"),
    ),
    (
        "random_allocation.toml",
        SelfComposedEvent(RandomAllocationEvent(100, GaussianEvent(2.0), 1), 5),
        Adjacency(relation="add_remove"),
    ),
]


@pytest.mark.parametrize(("name", "event", "adjacency"), CASES, ids=["shuffled", "allocation"])
def test_the_file_gives_the_api_bracket(
    name: str, event: Event, adjacency: Adjacency, capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["account", str(EXAMPLES / name), "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    bound = account(event, adjacency, delta=1e-5).bound
    assert out["delta"] == 1e-5
    assert out["adjacency"]["relation"] == adjacency.relation
    assert (out["epsilon"], out["epsilon_lower"]) == (bound.epsilon, bound.epsilon_lower)
    assert out["method"] == bound.method
    assert 0 < out["epsilon_lower"] <= out["epsilon"] < float("inf")


@pytest.mark.parametrize(
    ("name", "wrong", "right"),
    [
        ("shuffled_batches.toml", "add_remove", "replace_one"),
        ("random_allocation.toml", "replace_one", "add_remove"),
    ],
    ids=["shuffled", "allocation"],
)
def test_a_wrong_relation_names_the_field_and_the_fix(
    name: str, wrong: str, right: str, tmp_path: Path
) -> None:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    assert f'relation = "{right}"' in text
    path = tmp_path / name
    path.write_text(text.replace(f'relation = "{right}"', f'relation = "{wrong}"'))
    with pytest.raises(PipelineFileError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: releases[0].event: holds ")
    assert f"source's relation is {wrong}. Fix: " in message
    assert f'declare relation = "{right}" in the source\'s adjacency' in message


def test_a_wrong_relation_exits_2_with_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    text = (EXAMPLES / "shuffled_batches.toml").read_text(encoding="utf-8")
    path.write_text(text.replace('relation = "replace_one"', 'relation = "add_remove"'))
    assert main(["account", str(path)]) == 2
    captured = capfd.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"dpledger account: error: {path}: releases[0].event: ")
    assert 'Fix: declare relation = "replace_one"' in lines[0]

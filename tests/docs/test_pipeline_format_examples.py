"""The TOML examples of docs/pipeline-format.md that name a registered method account as shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dpledger.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipeline-format.md"
HEAD = (
    'delta = 1e-5\n[[sources]]\nname = "rows"\n'
    'adjacency = { relation = "add_remove", unit = "row" }\n'
)


def _method_examples() -> list[str]:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.S)
    return [b for b in blocks if "params = " in b and "[[releases]]" in b]


def test_the_method_example_exists_and_accounts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    examples = _method_examples()
    assert examples, "docs/pipeline-format.md shows a release that names a method"
    for i, block in enumerate(examples):
        path = tmp_path / f"example{i}.toml"
        path.write_text(HEAD + block)
        assert main(["account", str(path), "--json"]) == 0, capfd.readouterr().err
        out = json.loads(capfd.readouterr().out)
        assert 0 < out["epsilon"] < float("inf")

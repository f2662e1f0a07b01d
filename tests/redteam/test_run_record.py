"""The public run record holds data-independent facts only.

An honest DP-SGD run on a one-row and a two-row dataset (neighbours under add/remove) with the
same seed must write byte-identical ``ledger.json`` files: the realised Poisson batch sizes and
row counts (which alone separated the two datasets at epsilon >= 2.04 against a certified 0.28)
and the seed (which undoes the noise) go to the private diagnostics file only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dpledger.cli import main

CONFIG = """data = "data.npz"
delta = 1e-5
[params]
steps = 40
sampling_probability = 0.5
noise_multiplier = 1.0
clip_norm = 1.0
expected_batch_size = 1.0
"""


def _run(tmp_path: Path, name: str, rows: int) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    x = np.array([[1.0, 0.0], [0.0, 1.0]])[:rows]
    y = np.array([1.0, 0.0])[:rows]
    np.savez(folder / "data.npz", x=x, y=y)
    (folder / "c.toml").write_text(CONFIG)
    out = folder / "out"
    assert (
        main(
            [
                "run",
                "dp_sgd_logistic",
                "--config",
                str(folder / "c.toml"),
                "--out",
                str(out),
                "--seed",
                "11",
            ]
        )
        == 0
    )
    return out


def test_neighbouring_runs_write_identical_public_records(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    one, two = _run(tmp_path, "one", 1), _run(tmp_path, "two", 2)
    capsys.readouterr()
    assert (one / "ledger.json").read_bytes() == (two / "ledger.json").read_bytes()
    record = json.loads((one / "ledger.json").read_text())
    assert "seed" not in record
    assert record["steps"] and not any({"size", "rows"} & set(s) for s in record["steps"])
    # the private diagnostics do differ: that is where the realised sizes live
    assert not list(one.glob("PRIVATE-*")) and not list(two.glob("PRIVATE-*"))
    p1 = json.loads((one.parent / "out.private" / "PRIVATE-diagnostics.json").read_text())
    p2 = json.loads((two.parent / "out.private" / "PRIVATE-diagnostics.json").read_text())
    sizes1 = [s["size"] for s in p1["steps"] if "size" in s]
    sizes2 = [s["size"] for s in p2["steps"] if "size" in s]
    assert len(sizes1) == len(sizes2) == 40
    assert max(sizes1) <= 1 < max(sizes2)
    assert p1["seed"] == 11

"""The private diagnostics of a run go beside its published directory (``OUT.private``), never
into it; both directories are moved into place together, and neither is left on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.runtime import run_record
from dpledger.runtime.run_dir import write_run_dir
from dpledger.runtime.run_record import PRIVATE_FILE, RECORD_FILE, RunRecord, private_dir

RECORD = RunRecord(method="m", ledger={}, declared_core={}, privacy={})


def test_private_dir_is_a_sibling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert private_dir(Path("runs/a")) == Path("runs/a.private")
    assert private_dir("runs/a/") == Path("runs/a.private")
    monkeypatch.chdir(tmp_path)
    assert private_dir(Path(".")) == tmp_path.with_name(f"{tmp_path.name}.private")


def test_public_and_private_files_are_written_apart(tmp_path: Path) -> None:
    out = tmp_path / "run"
    write_run_dir(out, {"release": np.zeros(2), "n": 3}, RECORD, {"seed": 5})
    assert sorted(p.name for p in out.iterdir()) == [RECORD_FILE, "outputs.json", "release.npy"]
    private = json.loads((tmp_path / "run.private" / PRIVATE_FILE).read_text())
    assert private["seed"] == 5 and "never publish" in private["warning"].lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run.private"]


def test_a_failed_move_leaves_neither_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    real = os.replace

    def fail_second(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(run_record.os, "replace", fail_second)
    out = tmp_path / "run"
    with pytest.raises(OSError, match="No space"):
        write_run_dir(out, {"release": np.zeros(2)}, RECORD, {"seed": 5})
    assert [Path(c).name for c in calls] == ["run.private", "run"]  # the private one first
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no temporary left


def test_run_refuses_a_used_private_directory(tmp_path: Path, capfd: Any) -> None:
    np.save(tmp_path / "data.npy", np.arange(3.0))
    config = tmp_path / "c.toml"
    config.write_text('data = "data.npy"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n')
    (tmp_path / "out.private").mkdir()
    (tmp_path / "out.private" / PRIVATE_FILE).write_text("{}")
    args = ["run", "laplace_mechanism", "--config", str(config), "--out", str(tmp_path / "out")]
    assert main(args) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.count("--out") == 1 and "out.private" in err and "move" in err
    assert not (tmp_path / "out").exists()
    assert (tmp_path / "out.private" / PRIVATE_FILE).read_text() == "{}"  # left as it was

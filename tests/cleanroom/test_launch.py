"""One clean room per command: a room that needs third-party declarations waits for them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dpledger.cleanroom import launch
from dpledger.cli import main

PIPELINE = """delta = 1e-6
[[sources]]
name = "rows"
[[releases]]
id = "sum"
input = "rows"
method = "clipped_sum"
params = { clip = 1.0, noise_multiplier = 2.0 }
count = 10
"""


def test_a_third_party_release_is_accounted_by_one_room_and_one_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The room asks for the template's declaration and goes on in the same interpreter: one
    room started, one declaring worker, and the certified bound is the one of the same
    Gaussian releases declared by event."""
    pytest.importorskip("dpledger_plugin_template")
    started: list[str] = []
    real_popen = subprocess.Popen

    def popen(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        started.append("room" if "-I" in cmd else "worker" if "worker" in cmd[-1] else "other")
        return real_popen(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    file = tmp_path / "template.toml"
    file.write_text(PIPELINE)
    assert main(["account", str(file), "--json"]) == 0
    assert sorted(started) == ["room", "worker"]
    by_method = capfd.readouterr().out
    event = tmp_path / "event.toml"
    event.write_text(
        PIPELINE.replace(
            'method = "clipped_sum"\nparams = { clip = 1.0, noise_multiplier = 2.0 }',
            'event = { kind = "gaussian", noise_multiplier = 2.0 }',
        )
    )
    assert main(["account", str(event), "--json"]) == 0
    by_event = capfd.readouterr().out

    assert json.loads(by_method)["epsilon"] == json.loads(by_event)["epsilon"]


def test_a_room_whose_question_is_not_answered_exits_asking(tmp_path: Path) -> None:
    """When the parent has no answer the room stops: it neither waits forever nor goes on
    without the declarations it needs."""
    pytest.importorskip("dpledger_plugin_template")
    from dpledger.cleanroom.room import NEEDS_DECLARATIONS
    from dpledger.cleanroom.tree import clean_path

    file = tmp_path / "template.toml"
    file.write_text(PIPELINE)
    options = {
        "file": str(file),
        "delta": None,
        "epsilon": None,
        "json": True,
        "backends": None,
        "per_release": False,
        "crosscheck": False,
        "plugins_allow": None,
        "plugins_block": None,
    }
    request = {
        "command": "account",
        "options": options,
        "declarations": [],
        "needs_file": str(tmp_path / "needs.json"),
        "extra_packages": [],
    }
    with clean_path(()) as tree:
        code = launch._launch(tree, request, lambda: None)
    assert code == NEEDS_DECLARATIONS
    assert "clipped_sum" in (tmp_path / "needs.json").read_text()


def test_verify_prints_each_target_once_when_a_later_one_needs_a_declaration(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The first target is checked before the room learns that the second needs the
    template's declaration; the room then runs the command again, and the first target's
    result is printed once."""
    pytest.importorskip("dpledger_plugin_template")
    import numpy as np

    np.save(tmp_path / "column.npy", np.linspace(0.0, 1.0, 11))
    np.save(tmp_path / "rows.npy", np.linspace(0.0, 1.0, 22).reshape(11, 2))
    (tmp_path / "g.toml").write_text(
        'data = "column.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'
    )
    (tmp_path / "t.toml").write_text(
        'data = "rows.npy"\ndelta = 1e-5\n[params]\nclip = 1.0\nnoise_multiplier = 2.0\n'
    )
    first, second = tmp_path / "builtin", tmp_path / "template"
    assert (
        main(
            [
                "run",
                "gaussian_mechanism",
                "--config",
                str(tmp_path / "g.toml"),
                "--out",
                str(first),
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                "clipped_sum",
                "--config",
                str(tmp_path / "t.toml"),
                "--out",
                str(second),
                "--seed",
                "1",
            ]
        )
        == 0
    )
    capfd.readouterr()
    assert main(["verify", str(first), str(second)]) == 0
    out = capfd.readouterr().out
    assert out.count(f"verified: {first}: ") == 1, out
    assert out.count(f"verified: {second}: ") == 1, out
    assert out.index(f"verified: {first}: ") < out.index(f"verified: {second}: ")

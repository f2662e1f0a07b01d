"""``dpledger plugins``: the extra a builtin method needs, and whether it is installed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from dpledger.cli import main
from dpledger.commands import plugins as plugins_cmd

ALLOW = ["--plugins-allow", "trajectories,primitives.gaussian"]


def _listed(capfd: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["plugins", "--json", *ALLOW]) == 0
    return {p["name"]: p for p in json.loads(capfd.readouterr().out)["plugins"]}


def test_a_missing_extra_is_named_in_the_json_and_the_table(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plugins_cmd, "distribution_installed", lambda dist: False)
    listed = _listed(capfd)
    assert listed["trajectories"]["needs"] == "trajectories"
    assert listed["trajectories"]["installed"] is False
    assert listed["primitives.gaussian"]["needs"] is None  # numpy only
    assert listed["primitives.gaussian"]["installed"] is True
    assert main(["plugins", *ALLOW]) == 0
    out = capfd.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("trajectories "))
    assert row.endswith("dpledger[trajectories] (not installed)")
    assert "pip install 'dpledger[trajectories]'" in out
    assert main(["plugins", "trajectories", *ALLOW]) == 0
    out = capfd.readouterr().out
    assert "needs: dpledger[trajectories] (not installed); install it: pip install" in out


def test_an_installed_extra_says_so(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plugins_cmd, "distribution_installed", lambda dist: True)
    listed = _listed(capfd)
    assert (listed["trajectories"]["needs"], listed["trajectories"]["installed"]) == (
        "trajectories",
        True,
    )
    assert main(["plugins", *ALLOW]) == 0
    assert "pip install" not in capfd.readouterr().out


def test_the_extra_comes_from_the_plugin_package() -> None:
    assert "torch" in plugins_cmd.extra_distributions("trajectories")
    assert plugins_cmd.extra_distributions("primitives") == ()
    assert plugins_cmd.extra_distributions("no_such_extra") == ()


def test_installed_is_a_lookup_on_the_import_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plugins_cmd.distribution_installed("numpy")
    assert not plugins_cmd.distribution_installed("no-such-distribution-here")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert not plugins_cmd.distribution_installed("numpy")

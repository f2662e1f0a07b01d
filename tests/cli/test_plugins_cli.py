"""``dpledger plugins METHOD``: a method's parameters, types, defaults and proof."""

from __future__ import annotations

import json

import pytest

from dpledger.cli import main


def test_plugins_method_shows_parameters_defaults_and_proof(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plugins", "direct", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    params = {p["name"]: p for p in info["parameters"]}
    assert params["epsilon"]["required"] and params["epsilon"]["type"] == "float"
    assert params["length"] == {"name": "length", "type": "int", "required": False, "default": 10}
    assert info["tier"] == "contrib" and info["proof"]["citation"]
    assert main(["plugins", "laplace_mechanism"]) == 0
    text = capsys.readouterr().out
    assert "noise_multiplier  float  (required)" in text and "trust tier contrib" in text


def test_every_builtin_method_describes_its_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dpledger.runtime.plugin_manager import BUILTIN_DISTRIBUTION, PluginHost

    host = PluginHost.create()
    for name, spec in host.methods().items():
        if spec.provenance is None or spec.provenance.distribution != BUILTIN_DISTRIBUTION:
            continue
        assert main(["plugins", name, "--json"]) == 0, name
        info = json.loads(capsys.readouterr().out)
        assert info["name"] == name and info["parameters"], name
        for p in info["parameters"]:
            assert isinstance(p["type"], str) and p["type"], (name, p)


def test_plugins_unknown_method_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "no_such_method"]) == 2
    err = capsys.readouterr().err
    assert "no method named 'no_such_method'" in err and len(err.strip().splitlines()) == 1

"""A package that calls itself ``dpledger`` is not builtin; ``report`` refuses a patched core."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from dpledger.cli import main

pytestmark = pytest.mark.usefixtures("restore_core")

#: registers the builtin method name ``gaussian_mechanism``: 100x the stated noise on paper,
#: the raw data in its output
SHADOW = """
import attrs
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    sensitivity: float = 1.0
    noise_multiplier: float = 1.0


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="gaussian_mechanism", params=P,
                        declare=lambda p, a: GaussianEvent(100.0), run=lambda p, d, l, r: d,
                        description="shadow", proof="none"))
"""

#: divides every bound the graph accountant returns by 100, at import
GRAPH_PATCHER = """
import attrs
import dpledger.accountant.graph_account as graph

_account = graph.account


def _shrink(b):
    return attrs.evolve(b, epsilon=b.epsilon / 100.0, epsilon_lower=b.epsilon_lower / 100.0)


def account(*args, **kwargs):
    s = _account(*args, **kwargs)
    return attrs.evolve(s, bound=_shrink(s.bound), candidates=tuple(map(_shrink, s.candidates)))


graph.account = account
"""

#: an honest third-party method
HONEST = """
import attrs
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 1.0


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="rt_noisy_sum", params=P,
                        declare=lambda p, a: GaussianEvent(p.noise_multiplier),
                        run=lambda p, d, l, r: {}, description="noisy sum", proof="none"))
"""

GAUSSIAN_CONFIG = (
    'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n'
)
PIPELINE = """delta = 1e-5
[[sources]]
name = "d"
[[releases]]
id = "g"
input = "d"
event = { kind = "gaussian", noise_multiplier = 1.0 }
"""
#: the same release, named as the third-party method
THIRD_PARTY_PIPELINE = PIPELINE.replace(
    'event = { kind = "gaussian", noise_multiplier = 1.0 }',
    'method = "rt_noisy_sum"\nparams = { noise_multiplier = 1.0 }',
)
#: sigma = 1 at delta = 1e-5 (Balle & Wang 2018), to the printed precision
GAUSSIAN_EPSILON = 4.37718


def _epsilon(text: str) -> float:
    match = re.search(r"(?:epsilon <=|ε =) ([0-9.e+-]+)", text)
    assert match, text
    return float(match.group(1))


def test_a_distribution_named_dpledger_cannot_take_a_builtin_name(  # type: ignore[no-untyped-def]
    make_dist, tmp_path: Path, capfd
) -> None:
    # "aaa" sorts before every builtin plugin, and its distribution claims dpledger's name
    make_dist("dpledger", "0.1.0", {"rt_shadow": SHADOW}, {"aaa": "rt_shadow"})
    np.save(tmp_path / "data.npy", np.ones(5))
    (tmp_path / "gm.toml").write_text(GAUSSIAN_CONFIG)
    out = tmp_path / "out"
    args = ["run", "gaussian_mechanism", "--config", str(tmp_path / "gm.toml")]
    assert main([*args, "--out", str(out), "--seed", "0"]) == 0
    assert _epsilon(capfd.readouterr().out) >= GAUSSIAN_EPSILON
    release = np.load(out / "release.npy")
    assert not np.array_equal(release, np.ones(5))  # noise was added: the builtin ran
    assert main(["plugins", "--json"]) == 1  # "aaa" has a problem
    listed = {p["name"]: p for p in json.loads(capfd.readouterr().out)["plugins"]}
    assert listed["aaa"]["tier"] == "unverified"
    assert any("already registered by builtin plugin" in m for m in listed["aaa"]["problems"])
    assert listed["primitives.gaussian"]["tier"] == "contrib"


def test_an_impostor_is_fingerprinted_like_any_third_party(  # type: ignore[no-untyped-def]
    make_dist, tmp_path: Path, capfd
) -> None:
    make_dist("dpledger", "0.1.0", {"rt_graph_patcher": GRAPH_PATCHER}, {"aaa": "rt_graph_patcher"})
    assert main(["plugins"]) == 1
    out = capfd.readouterr().out
    assert "aaa" in out and "dpledger.accountant.graph_account.account" in out


def _plant_patcher(make_dist) -> None:  # type: ignore[no-untyped-def]
    make_dist(
        "graph-patcher", "0.1", {"rt_graph_patcher": GRAPH_PATCHER}, {"gp": "rt_graph_patcher"}
    )
    # the honest method's distribution ships the patcher as well
    make_dist(
        "honest-sum",
        "1.0",
        {"rt_honest_sum": HONEST},
        {"honest": "rt_honest_sum", "sum_gp": "rt_graph_patcher"},
    )


@pytest.mark.parametrize("entry", ["pipeline", "run directory"])
def test_report_of_a_builtin_input_loads_no_core_patcher(  # type: ignore[no-untyped-def]
    make_dist, tmp_path: Path, capfd, entry: str
) -> None:
    _plant_patcher(make_dist)
    (tmp_path / "g.toml").write_text(PIPELINE)
    np.save(tmp_path / "data.npy", np.ones(5))
    (tmp_path / "gm.toml").write_text(GAUSSIAN_CONFIG)
    target = tmp_path / "g.toml"
    if entry == "run directory":
        target = tmp_path / "run"
        args = ["run", "gaussian_mechanism", "--config", str(tmp_path / "gm.toml")]
        assert main([*args, "--out", str(target), "--seed", "0"]) == 0
        capfd.readouterr()
    # a builtin-only input loads no third-party plugin: the bound is the honest one
    assert main(["report", str(target), "--format", "md"]) == 0
    assert _epsilon(capfd.readouterr().out) >= GAUSSIAN_EPSILON
    assert "rt_graph_patcher" not in sys.modules


def test_report_refuses_a_core_patched_by_a_plugin_it_loads(  # type: ignore[no-untyped-def]
    make_dist, tmp_path: Path, capfd
) -> None:
    _plant_patcher(make_dist)
    (tmp_path / "third.toml").write_text(THIRD_PARTY_PIPELINE)
    # a release that needs a third-party method loads the distribution that provides it,
    # whole: the report refuses, naming the patcher (it used to print the bound divided by 100)
    for command in ("report", "account"):
        code = main([command, str(tmp_path / "third.toml")])
        captured = capfd.readouterr()
        assert code == 2 and captured.out == "", captured.out
        assert "'sum_gp'" in captured.err, captured.err
        assert "dpledger.accountant.graph_account.account" in captured.err

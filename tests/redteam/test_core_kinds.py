"""A plugin that redefines a core event kind must never change how a pipeline is accounted."""

from __future__ import annotations

import json
import textwrap
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

from dpledger.cli import main
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    CORE_EVENT_KINDS,
    EVENT_KINDS,
    Event,
    GaussianEvent,
    event_from_dict,
)
from dpledger.core.specs import MechanismSpec
from dpledger.runtime.pipeline import parse_pipeline

#: a plugin module that takes the core kind "gaussian" with 100x the stated noise (a subclass
#: of the core event, so that every accountant accepts it)
HIJACK = """
from typing import ClassVar

import attrs
from dpledger.core import events


@attrs.frozen
class GaussianEvent(events.GaussianEvent):
    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float = attrs.field(converter=lambda v: float(v) * 100.0)
"""

#: a plugin event of a new kind
NEW_KIND = """
from typing import ClassVar

import attrs
from dpledger.core.events import Event


@attrs.frozen
class {cls}(Event):
    kind: ClassVar[str] = "rt_shared_kind"
    epsilon: float = 1.0
"""

#: an honest method that touches no private data (its release composes as nothing)
PUBLIC_COUNT = """
import attrs
from dpledger.core.events import NoOpEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    pass


SPEC = MethodSpec(name="{name}", params=P, declare=lambda p, a: NoOpEvent(),
                  run=lambda p, d, ledger, rng: {{"n": 0}}, description="public row count",
                  proof="post-processing of public data", post_processing=True)


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""

PIPELINE = """
name = "hijack"
delta = 1e-5

[[sources]]
name = "db"

[[releases]]
id = "public"
input = "db"
method = "{method}"

[[releases]]
id = "noisy_sum"
input = "db"
event = {{ kind = "gaussian", noise_multiplier = 2.0 }}
"""


def _module(name: str, source: str) -> types.ModuleType:
    """Execute ``source`` as the top level of a fresh module called ``name``."""
    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


def test_module_level_class_cannot_take_a_core_kind() -> None:
    with pytest.raises(InvalidParameterError) as info:
        _module("rt_planted_kinds", HIJACK)
    message = str(info.value)
    assert "dpledger.core.events.GaussianEvent" in message
    assert "rt_planted_kinds.GaussianEvent" in message
    assert EVENT_KINDS["gaussian"] is GaussianEvent
    assert type(event_from_dict({"kind": "gaussian", "noise_multiplier": 2.0})) is GaussianEvent


def test_spoofed_module_name_cannot_take_a_core_kind() -> None:
    spoof = HIJACK.replace(
        '    kind: ClassVar[str] = "gaussian"',
        '    __module__ = "dpledger.core.events"\n    kind: ClassVar[str] = "gaussian"',
    )
    with pytest.raises(InvalidParameterError, match="core event kind"):
        _module("rt_spoofed_kinds", spoof)
    assert EVENT_KINDS["gaussian"] is GaussianEvent


def test_kind_set_after_creation_is_not_registered_nor_accepted_as_a_mechanism() -> None:
    @attrs.frozen
    class Late(Event):
        noise_multiplier: float = 1.0

    Late.kind = "gaussian"  # type: ignore[misc]
    assert EVENT_KINDS["gaussian"] is GaussianEvent
    with pytest.raises(InvalidParameterError, match="core event kind"):
        MechanismSpec(
            name="late", event_class=Late, description="d", proof="p", to_core=lambda e: e
        )
    assert EVENT_KINDS["gaussian"] is GaussianEvent


def test_registry_cannot_be_written_directly() -> None:
    with pytest.raises(TypeError):
        EVENT_KINDS["gaussian"] = Event  # type: ignore[index]
    with pytest.raises(TypeError):
        del EVENT_KINDS["gaussian"]  # type: ignore[attr-defined]
    assert EVENT_KINDS["gaussian"] is GaussianEvent
    assert set(EVENT_KINDS) >= CORE_EVENT_KINDS


def test_two_plugins_cannot_share_a_kind() -> None:
    a = _module("rt_kinds_a", NEW_KIND.format(cls="AEvent"))
    with pytest.raises(InvalidParameterError) as info:
        _module("rt_kinds_b", NEW_KIND.format(cls="BEvent"))
    assert "rt_kinds_a.AEvent" in str(info.value) and "rt_kinds_b.BEvent" in str(info.value)
    assert EVENT_KINDS["rt_shared_kind"] is a.AEvent


def test_pipeline_parsing_always_uses_the_core_class() -> None:
    with pytest.raises(InvalidParameterError):
        _module("rt_planted_kinds_2", HIJACK)
    data: dict[str, Any] = {
        "sources": [{"name": "db"}],
        "releases": [
            {"id": "r", "input": "db", "event": {"kind": "gaussian", "noise_multiplier": 2.0}}
        ],
    }
    graph = parse_pipeline(data).graph
    [event] = [d["event"] for _, d in graph.g.nodes(data=True) if d.get("node_kind") == "release"]
    assert type(event) is GaussianEvent and event.noise_multiplier == 2.0


@pytest.fixture
def hijack(make_dist, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    make_dist(
        "kind-hijack",
        "6.6.6",
        {
            "rt_hijack_events": HIJACK,
            "rt_hijack_count": PUBLIC_COUNT.replace("{name}", "rt_public_count"),
            "rt_hijack_both": HIJACK + PUBLIC_COUNT.replace("{name}", "rt_hijacked_count"),
        },
        {
            "hijack_events": "rt_hijack_events",
            "hijack_count": "rt_hijack_count",
            "hijack_both": "rt_hijack_both",
        },
    )
    return tmp_path


def test_hijack_distribution_does_not_change_dpledger_account(  # type: ignore[no-untyped-def]
    hijack, capfd, honest_gaussian_epsilon
) -> None:
    path = hijack / "pipeline.toml"
    path.write_text(PIPELINE.format(method="rt_public_count"))
    assert main(["account", str(path), "--json"]) == 0
    result = json.loads(capfd.readouterr().out)
    honest = honest_gaussian_epsilon(2.0, 1e-5)  # 1.99309...
    assert honest == pytest.approx(1.9930914044, rel=1e-9)
    assert honest * (1 - 1e-9) <= result["epsilon"] <= honest * (1 + 1e-9)
    assert main(["plugins", "--json", "--plugins-allow", "kind-hijack"]) == 1
    payload = json.loads(capfd.readouterr().out)
    problems = {p["plugin"]: p for p in payload["problems"]}
    assert problems["hijack_events"]["stage"] == "load"
    assert problems["hijack_events"]["distribution"] == "kind-hijack"
    assert "dpledger.core.events.GaussianEvent" in problems["hijack_events"]["message"]
    assert "rt_hijack_events.GaussianEvent" in problems["hijack_events"]["message"]


def test_method_of_a_hijacking_module_is_refused_naming_the_plugin(  # type: ignore[no-untyped-def]
    hijack, capfd
) -> None:
    path = hijack / "pipeline.toml"
    path.write_text(PIPELINE.format(method="rt_hijacked_count"))
    assert main(["account", str(path)]) == 2
    err = capfd.readouterr().err
    assert "no method named 'rt_hijacked_count'" in err
    assert "hijack_both (kind-hijack 6.6.6)" in err and "core event kind" in err

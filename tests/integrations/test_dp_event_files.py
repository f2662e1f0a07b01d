"""DpEvent files as users write them (both JSON forms), and pipelines exported as DpEvents."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import attr
import pytest

from dpledger.cli import main
from dpledger.commands.account import certify
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import Event
from dpledger.integrations.dp_accounting import (
    DP_EVENT_FIELDS,
    MODULE,
    SUPPORTED,
    dp_event_from_json,
    from_dp_event,
    is_dp_event_json,
    load_pipeline_or_dp_event,
    named_tuple_json,
    pipeline_dp_events,
)
from dpledger.runtime.pipeline import Pipeline, load_pipeline

d = pytest.importorskip("dp_accounting.dp_event")

#: five events users account (fast settings): leaves, sampling, self- and mixed composition
EVENTS = {
    "gaussian": d.GaussianDpEvent(1.0),
    "laplace": d.LaplaceDpEvent(2.0),
    "poisson_gaussian": d.PoissonSampledDpEvent(0.01, d.GaussianDpEvent(1.0)),
    "self_composed": d.SelfComposedDpEvent(
        d.PoissonSampledDpEvent(0.02, d.GaussianDpEvent(1.2)), 50
    ),
    "composed_mixed": d.ComposedDpEvent(
        [
            d.GaussianDpEvent(3.0),
            d.SelfComposedDpEvent(d.LaplaceDpEvent(20.0), 3),
            d.PoissonSampledDpEvent(0.05, d.GaussianDpEvent(2.0)),
            d.RandomizedResponseDpEvent(0.9, 4),
            d.NoOpDpEvent(),
        ]
    ),
}


def _array_form(event: Any) -> Any:
    """What ``json.dump(event.to_named_tuple(), f)`` writes, read back."""
    return json.loads(json.dumps(event.to_named_tuple()))


def _object_form(event: Any) -> Any:
    return json.loads(json.dumps(named_tuple_json(event)))


def _certified(pipeline: Pipeline) -> dict[str, Any]:
    """What ``dpledger account FILE --json`` prints for ``pipeline`` (the clean room's call)."""
    args = argparse.Namespace(
        delta=None,
        epsilon=None,
        json=True,
        backends=None,
        per_release=False,
        crosscheck=False,
        to_dp_event=False,
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert certify(args, pipeline, []) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def _bracket(result: dict[str, Any]) -> tuple[float, float, str]:
    return result["epsilon_lower"], result["epsilon"], result["method"]


def _event_pipeline(tmp_path: Path, event: Event) -> Pipeline:
    """The dpledger event itself, as a one-release pipeline file under add/remove of a row."""
    path = tmp_path / "event_pipeline.json"
    path.write_text(
        json.dumps(
            {
                "sources": [{"name": "data", "adjacency": {"relation": "add_remove"}}],
                "releases": [{"id": "r", "input": "data", "event": event.to_dict()}],
            }
        )
    )
    return load_pipeline(path)


def test_the_field_table_is_dp_accountings_field_order() -> None:
    assert tuple(DP_EVENT_FIELDS) == SUPPORTED
    for name, fields in DP_EVENT_FIELDS.items():
        cls = getattr(d, name)
        assert tuple(a.name for a in attr.fields(cls)) == fields, name
        assert cls.__module__ == MODULE
    instance = EVENTS["composed_mixed"].to_named_tuple()
    assert instance._fields == ("module_name", "class_name", *DP_EVENT_FIELDS["ComposedDpEvent"])


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_both_json_forms_give_the_dpledger_event_and_its_bracket(name: str, tmp_path: Path) -> None:
    event = EVENTS[name]
    ours = from_dp_event(event)
    brackets = set()
    for form in (_array_form(event), _object_form(event)):
        assert is_dp_event_json(form)
        assert from_dp_event(form) == ours
        assert named_tuple_json(form) == _object_form(event)
        assert dp_event_from_json(form) == event
        path = tmp_path / "event.json"
        path.write_text(json.dumps(form))
        pipeline = load_pipeline_or_dp_event(path)
        assert pipeline.name == type(event).__name__
        brackets.add(_bracket(_certified(pipeline)))
    brackets.add(_bracket(_certified(_event_pipeline(tmp_path, ours))))
    assert len(brackets) == 1, brackets


def test_sampling_without_replacement_reads_in_both_forms() -> None:
    # accounted under replace-one only, so not as a DpEvent file (read under add/remove)
    event = d.SelfComposedDpEvent(
        d.SampledWithoutReplacementDpEvent(1000, 10, d.GaussianDpEvent(1.5)), 20
    )
    ours = from_dp_event(event)
    for form in (_array_form(event), _object_form(event)):
        assert from_dp_event(form) == ours
        assert dp_event_from_json(form) == event


BAD = [
    ([MODULE, "GaussianDpEvent"], InvalidParameterError, r"^event: GaussianDpEvent .*noise_mul"),
    (
        [MODULE, "ComposedDpEvent", [[MODULE, "GaussianDpEvent", "1.0"]]],
        InvalidParameterError,
        r"^event\.events\[0\]\.noise_multiplier: expected a number",
    ),
    (
        [MODULE, "SelfComposedDpEvent", [MODULE, "LaplaceDpEvent"], 3],
        InvalidParameterError,
        r"^event\.event: LaplaceDpEvent in its array form has 1 field",
    ),
    (
        [MODULE, "ComposedDpEvent", [[MODULE, "ZCDpEvent", 0.1, 0.0]]],
        UnsupportedEventError,
        r"^event\.events\[0\]: dp-accounting event 'ZCDpEvent'",
    ),
    ([MODULE, 3], InvalidParameterError, r"^event\[1\]: expected the DpEvent's class name"),
    ([1, 2], InvalidParameterError, r"^event: is not a DpEvent"),
]


@pytest.mark.parametrize(("data", "error", "message"), BAD)
def test_malformed_arrays_name_the_field_and_the_fix(
    data: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        from_dp_event(data)
    assert "\n" not in str(info.value) and "Fix:" in str(info.value)
    assert is_dp_event_json(data)


def test_the_cli_refuses_a_malformed_array_in_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "event.json"
    path.write_text(json.dumps([MODULE, "GaussianDpEvent"]))
    assert main(["account", str(path)]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "GaussianDpEvent" in err and "noise_multiplier" in err


PIPELINE = """
name = "two sources"
disjoint_sources = true
delta = 1e-5
[[sources]]
name = "rows"
adjacency = { relation = "add_remove", unit = "row" }
[[sources]]
name = "users"
adjacency = { relation = "replace_one", unit = "user", unit_key = "uid", max_contributions = 2 }
[[releases]]
id = "count"
input = "rows"
event = { kind = "gaussian", noise_multiplier = 4.0 }
[[releases]]
id = "train"
input = "rows"
count = 200
[releases.event]
kind = "poisson_sampled"
sampling_probability = 0.01
event = { kind = "gaussian", noise_multiplier = 1.0 }
[[releases]]
id = "histogram"
input = "rows"
event = { kind = "laplace", noise_multiplier = 10.0 }
[[releases]]
id = "sum"
input = "users"
event = { kind = "gaussian", noise_multiplier = 12.0 }
[[releases]]
id = "mean"
input = "users"
count = 3
event = { kind = "gaussian", noise_multiplier = 8.0 }
"""


def test_an_exported_pipeline_accounted_by_dp_accounting_lies_in_the_bracket(
    tmp_path: Path,
) -> None:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE)
    pipeline = load_pipeline(path)
    exported = json.loads(json.dumps(pipeline_dp_events(pipeline)))
    result = _certified(pipeline)
    per_source = {s["source"]: s for s in result["sources"]}
    assert [s["source"] for s in exported] == ["rows", "users"]
    assert [s["neighboring_relation"] for s in exported] == ["ADD_OR_REMOVE_ONE", "REPLACE_ONE"]
    for entry in exported:
        event = dp_event_from_json(entry["dp_event"])
        accountant = pld_privacy_accountant.PLDAccountant(
            dp_accounting.NeighboringRelation[entry["neighboring_relation"]],
            value_discretization_interval=1e-3,
        )
        theirs = accountant.compose(event).get_epsilon(1e-5)
        ours = per_source[entry["source"]]
        # dp-accounting's PLD is pessimistic by its discretisation: a loose tolerance
        assert ours["epsilon_lower"] * 0.98 <= theirs <= ours["epsilon"] * 1.02, (entry, ours)


def test_the_cli_refuses_to_export_an_event_without_a_dp_event(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        PIPELINE
        + '[[releases]]\nid = "pick"\ninput = "users"\n'
        + 'event = { kind = "exponential_mechanism", epsilon = 0.5 }\n'
    )
    assert main(["account", str(path), "--to-dp-event"]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "release 'pick' of source 'users'" in err and "exponential_mechanism" in err
    # (the export's output through the command: tests/docs/test_dp_accounting_examples.py)
    assert main(["account", str(path), "--to-dp-event", "--delta", "1e-6"]) == 2
    assert "--delta" in capfd.readouterr().err


def test_parallel_cells_export_the_dominating_event_and_the_alternatives(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cells.toml"
    path.write_text(
        '[[sources]]\nname = "rows"\n'
        '[[transforms]]\nid = "by_region"\nkind = "partition"\ninput = "rows"\nkey = "region"\n'
        '[[releases]]\nid = "north"\ninput = "by_region"\n'
        'event = { kind = "gaussian", noise_multiplier = 2.0 }\n'
        '[[releases]]\nid = "south"\ninput = "by_region"\n'
        'event = { kind = "laplace", noise_multiplier = 3.0 }\n'
    )
    (entry,) = pipeline_dp_events(load_pipeline(path))
    assert len(entry["alternatives"]) == 2 and "parallel" in entry["note"]
    assert entry["dp_event"]["class_name"] == "ComposedDpEvent"

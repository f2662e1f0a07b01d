"""The report as data: a deterministic JSON form whose keys only change with the schema."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest

from dpledger.report.build import build_report
from dpledger.report.model import (
    NO_GUARANTEE,
    SCHEMA_VERSION,
    Bracket,
    ExtraSection,
    PrivacyReport,
    no_guarantee,
)
from dpledger.report.render_json import render_json

from .cases import DELTA, gaussian_report, graph, minimal_report

#: the keys of each schema version; a key renamed or removed needs a new version (the rule in
#: dpledger.report.model), a key added keeps it
SCHEMA_KEYS: dict[int, dict[str, frozenset[str]]] = {
    1: {
        "": frozenset(
            {
                "schema_version",
                "dpledger_version",
                "title",
                "input",
                "query",
                "setting",
                "data_accesses",
                "released",
                "unit_of_privacy",
                "adjacency",
                "accounting",
                "statement",
                "bound",
                "releases",
                "brackets",
                "unavailable",
                "audit",
                "runtime",
                "warnings",
                "sections",
                "account",
            }
        ),
        "input": frozenset({"kind", "name"}),
        "accounting": frozenset({"method", "combined", "assumptions"}),
        "bound": frozenset({"epsilon", "epsilon_lower", "delta", "method"}),
        "data_accesses": frozenset(
            {"source", "adjacency", "relation", "unit", "releases", "notes"}
        ),
        "released": frozenset({"node", "kind", "inputs", "description"}),
        "releases": frozenset(
            {
                "node",
                "source",
                "method",
                "plugin",
                "distribution",
                "version",
                "event",
                "count",
                "declared_unit",
                "lifted_event",
                "lift_rules",
                "tier",
                "proof",
                "proof_location",
                "bound",
            }
        ),
        "brackets": frozenset({"backend", "bound", "reason"}),
        "unavailable": frozenset({"backend", "reason"}),
        "sections": frozenset({"name", "title", "markdown", "plugin"}),
    }
}


def _keys(data: dict[str, Any], part: str) -> set[str]:
    if part == "":
        return set(data)
    value = data[part]
    return set(value[0]) if isinstance(value, list) else set(value)


def _built_without_brackets() -> PrivacyReport:
    return build_report(
        graph(), title="t", input_kind="pipeline", input_name="g.json", delta=DELTA, brackets=False
    ).report


def test_the_same_input_gives_the_same_bytes() -> None:
    a, b = _built_without_brackets(), _built_without_brackets()
    assert a is not b
    assert render_json(a) == render_json(b)
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    assert render_json(a) == render_json(a)  # rendering changes nothing


def test_every_key_of_the_schema_version_is_present() -> None:
    keys = SCHEMA_KEYS[SCHEMA_VERSION]  # a new version must list its keys here
    report = minimal_report(
        unavailable=(("prv", "skipped"),), sections=(ExtraSection("s", "S", "text", "p"),)
    )
    for data in (report.to_dict(), gaussian_report().report.to_dict()):
        assert data["schema_version"] == SCHEMA_VERSION == 1
        for part, expected in keys.items():
            if part in ("unavailable", "sections") and not data[part]:
                continue
            assert expected <= _keys(data, part), part


def test_the_dict_holds_the_fields_in_json_form() -> None:
    data = minimal_report().to_dict()
    assert data["query"] == {"delta": 1e-5}
    assert data["input"] == {"kind": "pipeline", "name": "hand.json"}
    assert data["accounting"] == {
        "method": "pld",
        "combined": "single source",
        "assumptions": ["an assumption"],
    }
    assert data["data_accesses"][0]["releases"] == ["q"]  # tuples become lists
    assert data["releases"][0]["lift_rules"] == ["unchanged_k1"]
    assert data["brackets"][1] == {"backend": "rdp", "bound": None, "reason": "not installed: x"}
    assert data["audit"] is None and data["runtime"] is None and data["sections"] == []
    assert json.loads(json.dumps(data)) == data


def test_an_infinite_bound_is_the_string_inf() -> None:
    bound = {"epsilon": math.inf, "epsilon_lower": 0.0, "delta": 1e-5, "method": "closed_form"}
    report = minimal_report(bound=bound, brackets=(Bracket("closed_form", bound),))
    data = report.to_dict()
    assert data["bound"]["epsilon"] == "inf"
    assert data["brackets"][0]["bound"]["epsilon"] == "inf"
    assert "Infinity" not in render_json(report) and '"inf"' in render_json(report)
    assert report.upper == math.inf and not report.guaranteed


def test_query_direction_and_upper_bound() -> None:
    eps = minimal_report()
    assert eps.reports_epsilon and eps.upper == 1.5 and eps.guaranteed
    bound = {"epsilon": 1.0, "delta": 3e-7, "delta_lower": 1e-7, "method": "pld"}
    delta = minimal_report(query=("epsilon", 1.0), bound=bound)
    assert not delta.reports_epsilon and delta.upper == 3e-7 and delta.guaranteed
    assert delta.to_dict()["query"] == {"epsilon": 1.0}


@pytest.mark.parametrize(
    ("bound", "eps_query", "expected"),
    [
        ({"epsilon": math.inf, "delta": 1e-5}, True, True),
        ({"epsilon": "inf", "delta": 1e-5}, True, True),  # as read back from JSON
        ({"epsilon": 1e300, "delta": 1e-5}, True, False),
        ({"epsilon": 0.0, "delta": 1e-5}, True, False),
        ({"epsilon": 1.0, "delta": 1.0}, False, True),
        ({"epsilon": 1.0, "delta": 1.5}, False, True),
        ({"epsilon": 1.0, "delta": 0.999999}, False, False),
        ({"epsilon": math.inf, "delta": 0.5}, False, False),  # a δ query looks at δ only
        ({"epsilon": 2.0, "delta": 1.0}, True, False),  # an ε query looks at ε only
    ],
)
def test_no_guarantee(bound: dict[str, Any], eps_query: bool, expected: bool) -> None:
    assert no_guarantee(bound, eps_query) is expected


def test_guaranteed_follows_no_guarantee_for_a_delta_query() -> None:
    bound = {"epsilon": 0.5, "delta": 1.0, "delta_lower": 1.0, "method": "closed_form"}
    report = minimal_report(query=("epsilon", 0.5), bound=bound)
    assert not report.guaranteed and report.upper == 1.0
    assert NO_GUARANTEE == "no privacy guarantee"


def test_reports_are_frozen() -> None:
    report = minimal_report()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        report.title = "changed"  # type: ignore[misc]
    assert attrs.evolve(report, title="changed").to_dict()["title"] == "changed"

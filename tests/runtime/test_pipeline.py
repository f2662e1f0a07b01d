"""Pipeline files: every example loads and matches the schema; every error names its field."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dpledger.core.errors import PipelineFileError
from dpledger.core.events import (
    CORE_EVENT_KINDS,
    MAX_NESTING,
    GaussianEvent,
    PoissonSampledEvent,
    nesting_depth,
)
from dpledger.runtime.pipeline import load_pipeline, load_schema, parse_pipeline

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "pipelines").glob("*.toml"))

BASE: dict[str, Any] = {
    "delta": 1e-5,
    "sources": [{"name": "db", "adjacency": {"relation": "add_remove", "unit": "row"}}],
    "releases": [
        {"id": "init", "input": "db", "event": {"kind": "laplace", "noise_multiplier": 2.0}},
        {"id": "count", "input": "db", "event": {"kind": "gaussian", "noise_multiplier": 3.0}},
        {
            "id": "train",
            "input": "db",
            "count": 10,
            "event": {
                "kind": "poisson_sampled",
                "sampling_probability": 0.01,
                "event": {"kind": "gaussian", "noise_multiplier": 1.0},
            },
        },
    ],
}


def _doc(**changes: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(BASE))
    for path, value in changes.items():
        target = doc
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
    return doc


_DELETE = object()


def test_examples_exist() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "dpsgd.toml",
        "heterogeneous.toml",
        "without_replacement.toml",
        "user_level.toml",
        "partitions.toml",
        "paper_a.toml",
        "paper_a_user_level.toml",
        "paper_c.toml",
    } <= names


def _method_resolver(data: dict[str, Any]) -> Any:
    """The builtin plugins' resolver for a file whose releases name a method (else None)."""
    if not any("method" in r for r in data.get("releases", [])):
        return None
    from dpledger.runtime.plugin_manager import PluginHost

    return PluginHost.create(builtin_only=True).resolve_method


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load_and_match_the_schema(path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(data, load_schema())
    pipeline = load_pipeline(path, _method_resolver(data))
    assert pipeline.delta is not None and 0 < pipeline.delta < 1
    assert pipeline.graph.reduce()


def test_schema_is_valid_and_covers_every_event_kind() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    kinds = {
        d["properties"]["kind"]["const"]
        for k, d in schema["$defs"].items()
        if k.startswith("event_")
    }
    assert kinds == set(CORE_EVENT_KINDS)


def test_json_and_toml_give_the_same_graph(tmp_path: Path) -> None:
    src = EXAMPLES[0]
    data = tomllib.loads(src.read_text(encoding="utf-8"))
    as_json = tmp_path / "same.json"
    as_json.write_text(json.dumps(data), encoding="utf-8")
    a = load_pipeline(src).graph.reduce()
    b = load_pipeline(as_json).graph.reduce()
    assert {k: v.alternatives for k, v in a.items()} == {k: v.alternatives for k, v in b.items()}


def test_parse_builds_the_declared_events() -> None:
    pipeline = parse_pipeline(BASE, "inline")
    red = pipeline.graph.reduce()["db"]
    by_id = {r.release_id: r for r in red.releases}
    assert by_id["train"].event == PoissonSampledEvent(0.01, GaussianEvent(1.0))
    assert by_id["train"].count == 10
    assert pipeline.delta == 1e-5
    assert pipeline.node_fields["train"] == "releases[2]"
    as_float = _doc(releases__2__count=10.0)
    red2 = parse_pipeline(as_float, "inline").graph.reduce()["db"]
    assert {r.release_id: r.count for r in red2.releases}["train"] == 10


BAD = [
    (
        _doc(releases__2__event__event__noise_multiplier=-1.0),
        "releases[2].event.event.noise_multiplier: must be > 0",
    ),
    (
        _doc(releases__1__event__noise_multiplier=0),
        "releases[1].event.noise_multiplier: must be > 0",
    ),
    (
        _doc(releases__0__event__kind="gausian"),
        "releases[0].event.kind: unknown mechanism 'gausian'",
    ),
    (_doc(releases__0__event__sigma=1.0), "releases[0].event.sigma: is not a parameter of laplace"),
    (
        _doc(releases__0__event__noise_multiplier=_DELETE),
        "releases[0].event.noise_multiplier: is missing",
    ),
    (
        _doc(releases__2__event__sampling_probability=1.5),
        "releases[2].event.sampling_probability: must lie in [0, 1]",
    ),
    (_doc(releases__2__count=10.5), "releases[2].count: must be an integer >= 0"),
    (_doc(releases__2__count=-1), "releases[2].count: must be an integer >= 0"),
    (_doc(releases__0__input=_DELETE), "releases[0].input: is missing"),
    (_doc(releases__1__id="init"), "releases[1].id: id 'init' is already used by releases[0]"),
    (_doc(releases__1__declared_unit="person"), "releases[1].declared_unit: unknown unit"),
    (_doc(sources__0__adjacency__unit="person"), "sources[0].adjacency.unit: unknown privacy unit"),
    (
        _doc(sources__0__adjacency__relation="swap"),
        "sources[0].adjacency.relation: unknown adjacency 'swap'",
    ),
    (
        _doc(sources__0__adjacency={"unit": "user"}),
        "sources[0].adjacency.unit_key: user-level adjacency needs",
    ),
    (_doc(delta=2.0), "delta: must lie in (0, 1)"),
    (_doc(delta=0.0), "delta: must lie in (0, 1)"),
    (_doc(sources=[]), "sources: no source is declared"),
    (_doc(budget=1), "budget: is not a known field"),
    (_doc(releases__0__input="nowhere"), "releases[0]: node 'nowhere': is referenced by an edge"),
    (
        _doc(releases__1__input=["db"]),
        "releases[1].input: must be a non-empty string",
    ),
    # strict types: a string or a bool is never a number, a number never a name
    (
        _doc(releases__2__event__sampling_probability="0.5"),
        "releases[2].event.sampling_probability: expected a number, got str '0.5'",
    ),
    (
        _doc(releases__1__event__noise_multiplier=True),
        "releases[1].event.noise_multiplier: expected a number, got bool True",
    ),
    (
        _doc(releases__1__event__noise_multiplier="one"),
        "releases[1].event.noise_multiplier: expected a number, got str 'one'",
    ),
    (
        _doc(sources__0__adjacency={"unit": "user", "unit_key": 7, "max_contributions": 2}),
        "sources[0].adjacency.unit_key: must be a non-empty string, got 7",
    ),
    (
        _doc(sources__0__adjacency={"unit": "user", "unit_key": "u", "max_contributions": True}),
        "sources[0].adjacency.max_contributions: must be an integer >= 1, got True",
    ),
    (
        _doc(releases__2__count="10"),
        "releases[2].count: must be an integer >= 0, got '10'",
    ),
    (
        _doc(releases__1__event__noise_multiplier=10**400),
        "releases[1].event.noise_multiplier: an integer of 401 digits does not fit a double",
    ),
    (_doc(epsilon=10**400, delta=_DELETE), "epsilon: must be a finite number"),
    (
        _doc(releases__2__event__event={"kind": "gaussian", "noise_multiplier": [1.0]}),
        "releases[2].event.event.noise_multiplier: expected a number, got list [1.0]",
    ),
]


@pytest.mark.parametrize(("doc", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_errors_name_the_field_and_the_fix(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(PipelineFileError) as info:
        parse_pipeline(doc, "bad.toml")
    text = str(info.value)
    assert text.startswith("bad.toml: ")
    assert message in text
    assert "Fix: " in text
    assert "\n" not in text


#: dangling references and unique ids are graph properties that a JSON Schema cannot express,
#: and neither is "fits a double"
_NOT_IN_SCHEMA = ("already used", "referenced by", "does not fit a double", "finite number")
SCHEMA_BAD = [(d, m) for d, m in BAD if not any(x in m for x in _NOT_IN_SCHEMA)]


@pytest.mark.parametrize(
    ("doc", "message"), SCHEMA_BAD, ids=[m.split(":")[0] for _, m in SCHEMA_BAD]
)
def test_schema_rejects_the_same_documents(doc: dict[str, Any], message: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, load_schema())


def _nested(depth: int) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "gaussian", "noise_multiplier": 1.0}
    for _ in range(depth):
        event = {"kind": "composed", "events": [event]}
    return event


def test_nesting_is_bounded_with_a_clear_error(tmp_path: Path) -> None:
    ok = _doc(releases=[{"id": "r", "input": "db", "event": _nested(MAX_NESTING)}])
    red = parse_pipeline(ok, "ok.json").graph.reduce()["db"]
    assert nesting_depth(red.releases[0].event) == MAX_NESTING
    deep = _doc(releases=[{"id": "r", "input": "db", "event": _nested(MAX_NESTING + 1)}])
    where = r"releases\[0\]\.event(\.events\[0\])+: events are"
    with pytest.raises(PipelineFileError, match=where):
        parse_pipeline(deep, "deep.json")
    # files nested far beyond what the parsers can read fail as files, not with a traceback
    very = tmp_path / "very.json"
    very.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    with pytest.raises(PipelineFileError, match=r"nested too deeply.*Fix: "):
        load_pipeline(very)
    very_toml = tmp_path / "very.toml"
    very_toml.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(PipelineFileError, match=r"nested too deeply.*Fix: "):
        load_pipeline(very_toml)


def test_huge_integers_in_files_are_errors_not_tracebacks(tmp_path: Path) -> None:
    doc = _doc(releases__1__event__noise_multiplier=_DELETE)
    text = json.dumps(doc).replace(
        '"kind": "gaussian"', '"kind": "gaussian", "noise_multiplier": ' + "9" * 400, 1
    )
    path = tmp_path / "big.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        PipelineFileError,
        match=r"releases\[1\]\.event\.noise_multiplier: an "
        "integer of 400 digits does not fit a double",
    ):
        load_pipeline(path)
    path.write_text(text.replace("9" * 400, "9" * 5000), encoding="utf-8")
    with pytest.raises(PipelineFileError, match=r"not valid JSON .*Fix: "):
        load_pipeline(path)
    # a count beyond the double range is a valid (if absurd) count
    big = parse_pipeline(_doc(releases__2__count=10**400), "big").graph.reduce()["db"]
    assert {r.release_id: r.count for r in big.releases}["train"] == 10**400


def test_graph_errors_point_at_the_file_entry() -> None:
    doc = _doc(
        transforms=[
            {"id": "a", "kind": "partition", "input": "b", "key": "x"},
            {"id": "b", "kind": "partition", "input": "a", "key": "y"},
        ]
    )
    with pytest.raises(PipelineFileError, match=r"transforms\[[01]\]: node '[ab]': is on a cycle"):
        parse_pipeline(doc, "cyclic.toml")
    doc = _doc(sources=[{"name": "db"}, {"name": "other"}])
    doc["releases"][0]["after"] = ["other"]
    with pytest.raises(PipelineFileError, match=r"releases\[0\]: node 'init': .*ambiguous"):
        parse_pipeline(doc, "ambiguous.toml")
    doc = _doc(transforms=[{"id": "t", "kind": "contribution_bound", "input": "db"}])
    with pytest.raises(PipelineFileError, match=r"transforms\[0\].max_contributions: is missing"):
        parse_pipeline(doc, "x.toml")


def test_file_level_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[[sources]\nname = 1\n", encoding="utf-8")
    with pytest.raises(PipelineFileError, match=r"broken.toml: not valid TOML .* Fix: correct"):
        load_pipeline(broken)
    with pytest.raises(PipelineFileError, match="cannot read the file"):
        load_pipeline(tmp_path / "missing.toml")
    yaml = tmp_path / "p.yaml"
    yaml.write_text("x: 1\n", encoding="utf-8")
    with pytest.raises(PipelineFileError, match=r"unknown file type '\.yaml'"):
        load_pipeline(yaml)
    bad_json = tmp_path / "p.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(PipelineFileError, match="not valid JSON"):
        load_pipeline(bad_json)


def test_a_method_release_keeps_the_params_it_was_declared_with() -> None:
    """What ``account`` states about a method's unit reads these, not the file a second time."""
    seen: list[dict[str, Any]] = []

    def resolve(method: str, params: Any, adjacency: Any) -> tuple[Any, str | None, str]:
        seen.append(dict(params))
        return GaussianEvent(2.0), None, "row"

    data = {
        "sources": [{"name": "d", "adjacency": {"relation": "add_remove"}}],
        "releases": [
            {"id": "m", "input": "d", "method": "some_method", "params": {"k": 3}},
            {"id": "e", "input": "d", "event": {"kind": "gaussian", "noise_multiplier": 1.0}},
        ],
    }
    pipeline = parse_pipeline(data, "<test>", resolve)
    assert pipeline.method_params == {"m": {"k": 3}} and seen == [{"k": 3}]

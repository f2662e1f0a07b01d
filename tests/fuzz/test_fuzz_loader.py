"""Fuzzing the pipeline loader: any TOML/JSON-like tree gives a pipeline or one dpledger error.

Random trees (every JSON type in every field, integers beyond the double range, NaN and
infinities, deep nesting) are parsed by :func:`parse_pipeline`; random file contents by
:func:`load_pipeline`. The only acceptable failure is a :class:`DPLedgerError` of one line
that names a field and a fix.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpledger.core.errors import DPLedgerError
from dpledger.core.events import CORE_EVENT_KINDS
from dpledger.runtime.pipeline import (
    ADJACENCY_KEYS,
    RELEASE_KEYS,
    SOURCE_KEYS,
    TOP_KEYS,
    TRANSFORM_KEYS,
    load_pipeline,
    parse_pipeline,
)

# huge integers make long example reprs; that is expected here
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ = settings(
    max_examples=100,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**309, -(10**309), 2**1100, 10**400]),
    st.integers(min_value=-3, max_value=20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([0, 1, 0.5, 1e-5, 1e300, 1e-300, -1.0, 2**53 + 1]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.text(max_size=12),
    st.sampled_from(["0.5", "one", "db", "row", "user", "add_remove", "replace_one", ""]),
)
json_trees = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)
EVENT_FIELDS = (
    "noise_multiplier",
    "epsilon",
    "delta",
    "num_buckets",
    "sampling_probability",
    "source_size",
    "sample_size",
    "count",
    "floor_epsilon",
    "transient_epsilon",
    "time",
    "decay_rate",
)


def _table(keys: tuple[str, ...], values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


events = st.recursive(
    st.fixed_dictionaries(
        {"kind": st.one_of(st.sampled_from(sorted(CORE_EVENT_KINDS)), scalars)},
        optional={f: st.one_of(numbers, scalars) for f in EVENT_FIELDS},
    ),
    lambda inner: st.one_of(
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(
                    ["poisson_sampled", "self_composed", "sampled_without_replacement"]
                ),
                "event": inner,
            },
            optional={
                f: numbers for f in ("sampling_probability", "count", "source_size", "sample_size")
            },
        ),
        st.fixed_dictionaries({"kind": st.just("composed"), "events": st.lists(inner, max_size=3)}),
    ),
    max_leaves=8,
)
sources = st.lists(
    st.one_of(
        _table(SOURCE_KEYS, scalars),
        st.fixed_dictionaries(
            {"name": st.sampled_from(["db", "other"])},
            optional={"adjacency": st.one_of(_table(ADJACENCY_KEYS, scalars), json_trees)},
        ),
    ),
    max_size=2,
)
releases = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.one_of(st.sampled_from(["r1", "r2", "db"]), scalars),
            "input": st.one_of(st.just("db"), scalars),
        },
        optional={
            "event": st.one_of(events, json_trees),
            "count": st.one_of(numbers, scalars),
            "declared_unit": scalars,
            "after": st.one_of(st.lists(st.text(max_size=3), max_size=2), scalars),
            "description": scalars,
        },
    ),
    max_size=3,
)
documents = st.one_of(
    json_trees,
    st.fixed_dictionaries(
        {"sources": st.one_of(sources, json_trees)},
        optional={
            "releases": st.one_of(releases, json_trees),
            "transforms": st.lists(_table(TRANSFORM_KEYS, scalars), max_size=2),
            "delta": st.one_of(numbers, scalars),
            "epsilon": st.one_of(numbers, scalars),
            "name": scalars,
            "disjoint_sources": scalars,
            "postprocess": json_trees,
        },
    ),
    _table(TOP_KEYS, json_trees),
    _table(RELEASE_KEYS, json_trees),
)


def _check_error(exc: DPLedgerError) -> None:
    text = str(exc)
    assert "\n" not in text and "Fix: " in text, text
    assert len(text) < 2000


@FUZZ
@given(documents)
@example({"\n": None})
@example({"sources": [{"name": "db", "adjacency": {"unit": "user", "unit_key": 7}}]})
@example({"sources": [{"name": "db"}], "epsilon": 10**400})
@example(
    {
        "sources": [{"name": "db"}],
        "releases": [
            {
                "id": "r",
                "input": "db",
                "event": {
                    "kind": "poisson_sampled",
                    "sampling_probability": "0.5",
                    "event": {"kind": "gaussian", "noise_multiplier": True},
                },
            }
        ],
    }
)
def test_parse_pipeline_gives_a_pipeline_or_a_dpledger_error(doc: Any) -> None:
    try:
        pipeline = parse_pipeline(doc, "fuzz.json")
    except DPLedgerError as exc:
        _check_error(exc)
        return
    for value in (pipeline.delta, pipeline.epsilon):
        assert value is None or (isinstance(value, float) and math.isfinite(value))


def _deep(depth: int) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "gaussian", "noise_multiplier": 1.0}
    for _ in range(depth):
        event = {"kind": "self_composed", "count": 2, "event": event}
    return event


@settings(max_examples=20, deadline=5000)
@given(st.integers(min_value=0, max_value=3000))
def test_any_nesting_depth(depth: int) -> None:
    doc = {
        "sources": [{"name": "db"}],
        "releases": [{"id": "r", "input": "db", "event": _deep(depth)}],
    }
    try:
        parse_pipeline(doc, "deep.json")
    except DPLedgerError as exc:
        _check_error(exc)
        assert depth > 100


@settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(documents.map(lambda d: json.dumps(d, allow_nan=True)), st.text(max_size=200)),
    st.sampled_from([".json", ".toml"]),
)
def test_load_pipeline_reads_any_file(tmp_path_factory: Any, text: str, suffix: str) -> None:
    path = Path(tmp_path_factory.mktemp("fuzz")) / f"p{suffix}"
    path.write_text(text, encoding="utf-8")
    try:
        load_pipeline(path)
    except DPLedgerError as exc:
        _check_error(exc)

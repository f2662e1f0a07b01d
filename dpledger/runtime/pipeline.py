"""Load a pipeline file (TOML or JSON, same structure) into a :class:`CompositionGraph`.

The format is documented in ``docs/pipeline-format.md`` and described by the JSON Schema
``pipeline_schema.json`` next to this module. The loader does not need ``jsonschema``: it checks
everything itself, and every error is a :class:`PipelineFileError` whose message names the field
path (e.g. ``releases[2].event.noise_multiplier``) and the fix.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    DPLedgerError,
    GraphError,
    IntegrityError,
    InvalidParameterError,
    PipelineFileError,
)
from dpledger.core.events import (
    MAX_NESTING,
    Event,
    event_from_dict,
)
from dpledger.core.events import short_repr as _short
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.graph_kinds import TRANSFORM_KINDS
from dpledger.runtime.pipeline_checks import (
    check_relation,
    check_selection_release,
    source_adjacency,
)

SCHEMA_PATH = Path(__file__).with_name("pipeline_schema.json")

TOP_KEYS = (
    "name",
    "description",
    "delta",
    "epsilon",
    "disjoint_sources",
    "sources",
    "transforms",
    "releases",
    "postprocess",
)
SOURCE_KEYS = ("name", "description", "adjacency")
ADJACENCY_KEYS = ("relation", "unit", "unit_key", "max_contributions", "contribution")
TRANSFORM_KEYS = (
    "id",
    "description",
    "kind",
    "input",
    "key",
    "cells",
    "public_key",
    "max_cells_per_unit",
    "max_contributions",
)
RELEASE_KEYS = (
    "id",
    "description",
    "input",
    "after",
    "event",
    "count",
    "declared_unit",
    "method",
    "plugin",
    "params",
)
POSTPROCESS_KEYS = ("id", "description", "inputs")


#: ``resolve(method, params, adjacency) -> (core event, plugin name, unit)``: a registered
#: method's declaration for one run, mapped onto core events, and the unit that event protects
#: (``"row"``: lifted to the source's unit by the graph; see ``PluginHost.resolve_method``)
MethodResolver = Callable[[str, Mapping[str, Any], Adjacency], tuple[Event, str | None, str]]


@attrs.frozen(eq=False)
class Pipeline:
    """A loaded pipeline: its graph and the defaults stated in the file."""

    graph: CompositionGraph
    name: str | None = None
    delta: float | None = None
    epsilon: float | None = None
    origin: str = "<pipeline>"
    node_fields: Mapping[str, str] = attrs.field(factory=dict)
    #: per release that names a registered method: the ``params`` it was declared with
    method_params: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)


class _Ctx:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        #: per method release: the params it was declared with (``Pipeline.method_params``)
        self.method_params: dict[str, Mapping[str, Any]] = {}

    def fail(self, field: str, problem: str, fix: str) -> PipelineFileError:
        return PipelineFileError(f"{self.origin}: {field}: {problem}. Fix: {fix}")


def _keys(ctx: _Ctx, data: Any, path: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ctx.fail(path, f"expected a table, got {type(data).__name__}", "write a table {...}")
    for key in data:
        if not isinstance(key, str) or key not in allowed:
            name = key[:60] if isinstance(key, str) and key.isprintable() else _short(key)
            raise ctx.fail(
                f"{path}.{name}" if path else name,
                "is not a known field",
                f"use one of {list(allowed)}",
            )
    return data


def _string(
    ctx: _Ctx, data: Mapping[str, Any], key: str, path: str, *, required: bool = True
) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ctx.fail(f"{path}.{key}", "is missing", f'add {key} = "..."')
        return None
    if not isinstance(value, str) or not value:
        raise ctx.fail(
            f"{path}.{key}",
            f"must be a non-empty string, got {_short(value)}",
            f'write {key} = "..."',
        )
    return value


def _integral(value: Any) -> Any:
    """JSON Schema counts 10.0 as an integer; accept it as 10 (anything else is unchanged)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int(ctx: _Ctx, value: Any, field: str, minimum: int) -> int:
    value = _integral(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ctx.fail(
            field,
            f"must be an integer >= {minimum}, got {_short(value)}",
            f"write a whole number >= {minimum} (no decimal point)",
        )
    return value


def _as_float(value: int | float) -> float:
    """``float(value)``, or infinity for an integer beyond the double range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _probability_query(ctx: _Ctx, value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ctx.fail(field, f"must lie in (0, 1), got {_short(value)}", "write e.g. delta = 1e-5")
    return float(value)


def _list(ctx: _Ctx, data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ctx.fail(
            key,
            f"must be a list of tables, got {type(value).__name__}",
            f"write [[{key}]] entries (TOML) or a JSON array",
        )
    return value


def parse_event(ctx: _Ctx, data: Any, path: str) -> Event:
    """Build an event from its table, naming the exact field path on any error."""
    try:
        return event_from_dict(data, path=path)
    except InvalidParameterError as exc:
        raise ctx.fail(exc.field, exc.problem, exc.fix) from None


def _adjacency(ctx: _Ctx, data: Any, path: str) -> Adjacency:
    if data is None:
        return Adjacency()
    table = _keys(ctx, data, path, ADJACENCY_KEYS)
    for key in ("relation", "unit", "unit_key", "contribution"):
        if key in table:
            _string(ctx, table, key, path)
    if "max_contributions" in table:
        _int(ctx, table["max_contributions"], f"{path}.max_contributions", 1)
    try:
        return Adjacency(**table)
    except InvalidParameterError as exc:
        raise ctx.fail(f"{path}.{exc.field}", exc.problem, exc.fix) from None


def _query(ctx: _Ctx, top: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The file's ``delta`` and ``epsilon`` (at most one of them), checked."""
    delta = top.get("delta")
    epsilon = top.get("epsilon")
    if delta is not None:
        delta = _probability_query(ctx, delta, "delta")
    if epsilon is not None:
        if (
            isinstance(epsilon, bool)
            or not isinstance(epsilon, int | float)
            or not math.isfinite(_as_float(epsilon))
        ):
            raise ctx.fail(
                "epsilon",
                f"must be a finite number, got {_short(epsilon)}",
                "write e.g. epsilon = 1.0",
            )
        epsilon = float(epsilon)
    if delta is not None and epsilon is not None:
        raise ctx.fail(
            "epsilon",
            "give at most one of delta and epsilon",
            "remove epsilon to report epsilon at the file's delta",
        )
    return delta, epsilon


def parse_pipeline(
    data: Any, origin: str = "<pipeline>", resolve_method: MethodResolver | None = None
) -> Pipeline:
    """Build a :class:`Pipeline` from parsed TOML/JSON data.

    A release may name a registered method with ``params`` instead of giving an ``event``;
    ``resolve_method`` then supplies the method's declared event (w.r.t. the source's unit).
    """
    ctx = _Ctx(origin)
    top = _keys(ctx, data, "", TOP_KEYS)
    delta, epsilon = _query(ctx, top)
    disjoint = top.get("disjoint_sources", False)
    if not isinstance(disjoint, bool):
        raise ctx.fail(
            "disjoint_sources",
            f"must be true or false, got {disjoint!r}",
            "write disjoint_sources = true",
        )
    name = _string(ctx, top, "name", "", required=False) if "name" in top else None
    graph = CompositionGraph(disjoint_sources=disjoint)
    fields: dict[str, str] = {}
    sources = _list(ctx, top, "sources")
    if not sources:
        raise ctx.fail(
            "sources", "no source is declared", "add a [[sources]] entry with name and adjacency"
        )

    def register(node: str, path: str) -> None:
        if node in fields:
            raise ctx.fail(
                f"{path}.id",
                f"id {node!r} is already used by {fields[node]}",
                "give every source, transform, release and step a unique id",
            )
        fields[node] = path

    for i, entry in enumerate(sources):
        path = f"sources[{i}]"
        table = _keys(ctx, entry, path, SOURCE_KEYS)
        node = _string(ctx, table, "name", path)
        assert node is not None
        register(node, path)
        graph.add_source(node, _adjacency(ctx, table.get("adjacency"), f"{path}.adjacency"))
    for i, entry in enumerate(_list(ctx, top, "transforms")):
        path = f"transforms[{i}]"
        _transform(ctx, graph, _keys(ctx, entry, path, TRANSFORM_KEYS), path, register)
    for i, entry in enumerate(_list(ctx, top, "releases")):
        path = f"releases[{i}]"
        _release(ctx, graph, _keys(ctx, entry, path, RELEASE_KEYS), path, register, resolve_method)
    for i, entry in enumerate(_list(ctx, top, "postprocess")):
        path = f"postprocess[{i}]"
        table = _keys(ctx, entry, path, POSTPROCESS_KEYS)
        node = _string(ctx, table, "id", path)
        assert node is not None
        register(node, path)
        graph.add_postprocess(node, _id_list(ctx, table, "inputs", path, fields))
    _validate(ctx, graph, fields)
    return Pipeline(graph, name, delta, epsilon, origin, fields, ctx.method_params)


def _id_list(
    ctx: _Ctx, table: Mapping[str, Any], key: str, path: str, fields: Mapping[str, str]
) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ctx.fail(
            f"{path}.{key}", f"must be a list of ids, got {value!r}", f'write {key} = ["id", ...]'
        )
    return list(value)


def _transform(
    ctx: _Ctx, graph: CompositionGraph, table: Mapping[str, Any], path: str, register: Any
) -> None:
    node = _string(ctx, table, "id", path)
    assert node is not None
    register(node, path)
    kind = _string(ctx, table, "kind", path)
    if kind not in TRANSFORM_KINDS:
        raise ctx.fail(
            f"{path}.kind", f"unknown transform {kind!r}", f"use one of {list(TRANSFORM_KINDS)}"
        )
    source = _string(ctx, table, "input", path)
    fields: dict[str, Any] = {"key": None, "cells": None, "public_key": False}
    if kind == "partition":
        fields = _partition_fields(ctx, table, path)
    elif kind == "cell":
        for extra in ("cells", "public_key", "max_cells_per_unit", "max_contributions"):
            if extra in table:
                raise ctx.fail(
                    f"{path}.{extra}", "is not a field of a cell", "remove it from the cell"
                )
        fields["key"] = _string(ctx, table, "key", path, required=False)
    else:
        if "max_contributions" not in table:
            raise ctx.fail(
                f"{path}.max_contributions",
                "is missing",
                "add max_contributions = 1 (rows kept per user)",
            )
        k = _int(ctx, table["max_contributions"], f"{path}.max_contributions", 1)
        for extra in ("cells", "public_key", "max_cells_per_unit"):
            if extra in table:
                raise ctx.fail(
                    f"{path}.{extra}",
                    "is a field of partitions only",
                    "remove it from the contribution_bound",
                )
        fields["key"] = _string(ctx, table, "key", path, required=False)
        fields["max_contributions"] = k
    graph.add_transform(node, kind, source, **fields)


def _partition_fields(ctx: _Ctx, table: Mapping[str, Any], path: str) -> dict[str, Any]:
    """``key``, ``cells``, ``public_key`` and ``max_cells_per_unit`` of a partition."""
    cells = None
    if table.get("cells") is not None:
        cells = _int(ctx, table["cells"], f"{path}.cells", 1)
    public_key = table.get("public_key", False)
    if not isinstance(public_key, bool):
        raise ctx.fail(
            f"{path}.public_key",
            f"must be true or false, got {public_key!r}",
            "write public_key = true",
        )
    if "max_contributions" in table:
        raise ctx.fail(
            f"{path}.max_contributions",
            "is not a field of a partition",
            "use a separate contribution_bound transform",
        )
    per_unit = None
    if "max_cells_per_unit" in table:
        per_unit = _int(ctx, table["max_cells_per_unit"], f"{path}.max_cells_per_unit", 1)
    return {
        "key": _string(ctx, table, "key", path),
        "cells": cells,
        "public_key": public_key,
        "max_cells_per_unit": per_unit,
    }


def _method_event(
    ctx: _Ctx,
    graph: CompositionGraph,
    table: Mapping[str, Any],
    path: str,
    source: str,
    resolve_method: MethodResolver | None,
) -> tuple[Event, str | None, str]:
    method = _string(ctx, table, "method", path, required=False)
    if method is None:
        raise ctx.fail(
            f"{path}.event",
            "is missing",
            'add event = {kind = "gaussian", noise_multiplier = 1.0}, or name a registered '
            "method with method = ... and params = {...}",
        )
    params = table.get("params", {})
    if not isinstance(params, Mapping):
        raise ctx.fail(f"{path}.params", "must be a table", "write params = {name = value}")
    if resolve_method is None:
        raise ctx.fail(
            f"{path}.event",
            f"is missing, and method {method!r} cannot be looked up here",
            "give the release's event, or account the file with `dpledger account`",
        )
    adjacency = source_adjacency(graph, source)
    if adjacency is None:
        raise ctx.fail(
            f"{path}.input",
            f"{source!r} does not lead to a source",
            "read from a source or from a transform of one",
        )
    try:
        event, plugin, unit = resolve_method(method, params, adjacency)
    except InvalidParameterError as exc:
        if exc.field == "method":
            raise ctx.fail(f"{path}.method", exc.problem, exc.fix) from None
        raise ctx.fail(f"{path}.params.{exc.field.split('.')[-1]}", exc.problem, exc.fix) from None
    except IntegrityError:
        raise  # names the plugin and its own fix
    except DPLedgerError as exc:
        problem, _, fix = str(exc).partition(". Fix: ")
        raise ctx.fail(
            f"{path}.method", problem, fix or "name a method listed by `dpledger plugins`"
        ) from None
    return event, plugin, unit


def _release(
    ctx: _Ctx,
    graph: CompositionGraph,
    table: Mapping[str, Any],
    path: str,
    register: Any,
    resolve_method: MethodResolver | None = None,
) -> None:
    node = _string(ctx, table, "id", path)
    assert node is not None
    register(node, path)
    source = _string(ctx, table, "input", path)
    plugin = _string(ctx, table, "plugin", path, required=False)
    default_unit = "row"
    if "event" in table:
        if "params" in table:
            raise ctx.fail(
                f"{path}.params",
                "is given together with event",
                "give either event (a mechanism) or method + params (a registered method)",
            )
        event = parse_event(ctx, table["event"], f"{path}.event")
        adjacency = source_adjacency(graph, str(source))
        check_relation(ctx.fail, event, adjacency, f"{path}.event")
    else:
        event, resolved_plugin, declared_unit = _method_event(
            ctx, graph, table, path, str(source), resolve_method
        )
        plugin = plugin or resolved_plugin
        ctx.method_params[node] = dict(table.get("params", {}))
        # the method's declaration names the unit its event protects; a row-level event is
        # lifted to the source's unit by the graph, exactly as a release written as an event
        if "declared_unit" in table and table["declared_unit"] != declared_unit:
            raise ctx.fail(
                f"{path}.declared_unit",
                f"is {table['declared_unit']!r}, but method declares a {declared_unit}-level event",
                "remove declared_unit: a registered method states its own unit",
            )
        default_unit = declared_unit
    count = _int(ctx, table.get("count", 1), f"{path}.count", 0)
    unit = table.get("declared_unit", default_unit)
    if unit not in ("row", "user"):
        raise ctx.fail(
            f"{path}.declared_unit",
            f"unknown unit {unit!r}",
            "use 'row' (event w.r.t. one row) or 'user' (already per user)",
        )
    check_selection_release(ctx.fail, event, source_adjacency(graph, str(source)), unit, path)
    method = _string(ctx, table, "method", path, required=False)
    after = _id_list(ctx, table, "after", path, {})
    graph.add_release(
        node,
        event,
        [str(source), *after],
        count=count,
        declared_unit=unit,
        method=method,
        plugin=plugin,
    )


def _validate(ctx: _Ctx, graph: CompositionGraph, fields: Mapping[str, str]) -> None:
    try:
        graph.validate()
    except GraphError as exc:
        node = getattr(exc, "node", None)
        where = "graph"
        if isinstance(node, str) and node in fields:
            where = fields[node]
        elif isinstance(node, str) and graph.g.has_node(node):
            refs = sorted(set(graph.g.successors(node)) | set(graph.g.predecessors(node)))
            known = [fields[r] for r in refs if r in fields]
            if known:
                where = known[0]
        raise PipelineFileError(f"{ctx.origin}: {where}: {exc}") from None


def load_pipeline(path: str | Path, resolve_method: MethodResolver | None = None) -> Pipeline:
    """Read a ``.toml`` or ``.json`` pipeline file."""
    p = Path(path)
    origin = str(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise PipelineFileError(
            f"{origin}: cannot read the file ({exc.strerror}). Fix: pass an existing file"
        ) from None
    suffix = p.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(raw.decode("utf-8"))
        elif suffix == ".toml":
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            raise PipelineFileError(
                f"{origin}: unknown file type {suffix!r}. Fix: use a .toml or .json file"
            )
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        msg = str(exc).splitlines()[0]
        raise PipelineFileError(
            f"{origin}: not valid {suffix[1:].upper()} ({msg}). Fix: correct the syntax"
        ) from None
    except RecursionError:
        raise PipelineFileError(
            f"{origin}: tables or lists are nested too deeply to read. Fix: nest events at most "
            f"{MAX_NESTING} levels deep (use a composed event with a list, or a count)"
        ) from None
    except ValueError as exc:  # e.g. an integer literal with too many digits
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PipelineFileError(
            f"{origin}: not valid {suffix[1:].upper()} ({msg[:120]}). Fix: correct the value"
        ) from None
    return parse_pipeline(data, origin, resolve_method)


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the pipeline format."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema

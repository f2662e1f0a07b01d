"""What a method run reads: its config file, its data file, parameters, adjacency and δ.

Shared by the commands that run a method (``run``, ``audit METHOD``); a bad value is one
:class:`InvalidParameterError` naming the field and the fix.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.validation import DEFAULT_DELTA

__all__ = [
    "data_path_of",
    "load_data",
    "params_table",
    "parse_adjacency",
    "query_delta",
    "read_config",
]

#: the keys of a run config that are not method parameters
RESERVED = frozenset({"params", "data", "adjacency", "delta"})


def read_config(path: Path) -> dict[str, Any]:
    """A TOML (``.toml``) or JSON config file as a dict."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise InvalidParameterError(
            "--config", f"cannot read {path}: {exc.strerror}", "pass an existing file"
        ) from None
    try:
        if path.suffix.lower() == ".toml":
            config = tomllib.loads(text.decode("utf-8"))
        else:
            config = json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(
            "--config", f"{path} is not valid: {exc}", "use TOML (.toml) or JSON"
        ) from None
    if not isinstance(config, dict):
        raise InvalidParameterError("--config", "must hold a table", "use key = value pairs")
    return config


def _array(value: Any, field: str) -> Any:
    """``value`` as a numpy array; ragged nested lists are refused naming the first short row."""
    try:
        return np.asarray(value)
    except ValueError:
        pass
    if isinstance(value, list):
        lengths = [len(v) if isinstance(v, list) else None for v in value]
        for i, n in enumerate(lengths):
            if n != lengths[0]:
                raise InvalidParameterError(
                    f"{field}[{i}]",
                    f"has {n if n is not None else 'a scalar, not'} values "
                    f"where {field}[0] has {lengths[0]}",
                    "give every row the same number of values",
                ) from None
    raise InvalidParameterError(
        field, "is not a regular array", "give every row the same number of values"
    )


def _has_header(path: Path) -> bool:
    """Whether the CSV file's first row (blank and ``#`` comment lines skipped, as
    :func:`numpy.loadtxt` does) holds a cell that is neither empty nor a (quoted) number."""
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                row = line.split("#", 1)[0].strip()
                if row:
                    break
            else:
                return False
    except OSError:
        return False
    for cell in row.split(","):
        value = cell.strip().strip("'\"")
        try:
            float(value)
        except ValueError:
            if value:
                return True
    return False


def load_data(path: Path) -> Any:
    """``.npy`` (array), ``.npz`` (mapping of arrays), ``.csv`` (numeric) or ``.json``."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise InvalidParameterError("data", f"{path} does not exist", "pass an existing file")
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    if suffix == ".csv":
        try:
            return np.loadtxt(path, delimiter=",", ndmin=1)
        except ValueError as exc:
            if _has_header(path):
                raise InvalidParameterError(
                    "data",
                    f"{path.name}: the first row looks like a header",
                    "remove it (dpledger reads numeric CSV without a header)",
                ) from None
            reason = str(exc).splitlines()[0].split(";")[0] if str(exc) else "unreadable"
            raise InvalidParameterError(
                "data",
                f"{path.name} is not a numeric CSV table ({reason})",
                "give every row the same number of comma-separated numbers",
            ) from None
    if suffix == ".json":
        try:
            value = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidParameterError(
                "data", f"{path.name} is not valid JSON: {exc}", "write the data as JSON"
            ) from None
        if isinstance(value, dict):
            return {k: _array(v, f"data[{k!r}]") for k, v in value.items()}
        return _array(value, "data")
    raise InvalidParameterError(
        "data", f"unknown data format {suffix!r}", "use .npy, .npz, .csv or .json"
    )


def parse_adjacency(config: Mapping[str, Any]) -> Adjacency:
    table = config.get("adjacency", {})
    if not isinstance(table, dict):
        raise InvalidParameterError("adjacency", "must be a table", "write [adjacency]")
    unknown = sorted(set(table) - {f.name for f in attrs.fields(Adjacency)})
    if unknown:
        raise InvalidParameterError(
            f"adjacency.{unknown[0]}",
            "is not a field of the adjacency",
            f"use {[f.name for f in attrs.fields(Adjacency)]}",
        )
    try:
        return Adjacency(**table)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"adjacency.{exc.field}", exc.problem, exc.fix) from None


def params_table(config: Mapping[str, Any]) -> dict[str, Any]:
    """The method's parameters: the config's ``[params]``, else its other top-level keys."""
    table = config.get("params", {k: v for k, v in config.items() if k not in RESERVED})
    if not isinstance(table, dict):
        raise InvalidParameterError("params", "must be a table", "write [params] key = value")
    return table


def query_delta(args: argparse.Namespace, config: Mapping[str, Any], method_delta: Any) -> float:
    """The query delta: --delta, else the file's, else the method's own target delta, else
    1e-5."""
    fallback = method_delta if isinstance(method_delta, float) and 0 < method_delta < 1 else None
    if args.delta is not None:
        return float(args.delta)
    if "delta" not in config:
        return fallback if fallback is not None else DEFAULT_DELTA
    delta = config["delta"]
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise InvalidParameterError(
            "delta", f"must be a number in (0, 1), got {delta!r}", "write e.g. delta = 1e-5"
        )
    return float(delta)


def data_path_of(args: argparse.Namespace, config: Mapping[str, Any]) -> Path | None:
    """The data file: --data, else the config's ``data`` (relative to the config)."""
    if args.data is not None or "data" not in config:
        return args.data  # type: ignore[no-any-return]
    if not isinstance(config["data"], str) or not config["data"]:
        raise InvalidParameterError(
            "data",
            f"must be the path of a data file, got {config['data']!r}",
            'write e.g. data = "data.npy" (relative to the config file)',
        )
    path: Path = args.config.parent / config["data"]
    return path

"""``dpledger run METHOD --config FILE --out DIR``: run a method under a verified privacy ledger.

The method's executed steps are checked against its declaration; the declaration is accounted
with :func:`dpledger.accountant.select.account`. Outputs and ``ledger.json`` are written to a
temporary directory beside ``--out`` and moved into place only when everything has passed, so
a failed run leaves nothing behind. The private diagnostics (the seed, realised sizes) go to
the directory ``OUT.private`` beside ``--out``, never into it.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpledger.accountant import select
from dpledger.commands.plugins import add_plugin_options, host_from_args
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, stated_for_unit, unit_adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError, PluginError
from dpledger.core.events import Event
from dpledger.report.model import json_safe
from dpledger.report.numbers import fmt_up
from dpledger.runtime.run_record import (
    PRIVATE_FILE,
    RECORD_FILE,
    RunRecord,
    check_run_dirs_free,
    move_into_place,
    private_dir,
)
from dpledger.runtime.runner import declare_checked, run_verified

DEFAULT_DELTA = 1e-5
_RESERVED = {"params", "data", "adjacency", "delta"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a method under a verified privacy ledger",
        description="Run METHOD on data, verify its ledger, account it and write the outputs.",
    )
    parser.add_argument("method", metavar="METHOD", help="method name (see `dpledger plugins`)")
    parser.add_argument(
        "--config",
        required=True,
        type=Path,
        help="TOML or JSON file: [params], data = 'file', [adjacency], delta",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="output directory (must not exist or be empty)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the noise generator")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="seed from the OS CSPRNG (no replay; floating-point caveats remain)",
    )
    parser.add_argument("--data", type=Path, default=None, help="data file (overrides the config)")
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta at which epsilon is reported (default: the config's "
        f"delta, else the method's own delta parameter, else {DEFAULT_DELTA})",
    )
    add_plugin_options(parser)
    parser.set_defaults(func=main)


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


def _prepare_out(out: Path) -> None:
    """``out`` and its private directory (``OUT.private``) must be new or empty."""
    check_run_dirs_free(out)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    to_json = getattr(value, "to_json", None)
    if callable(to_json):  # outputs that know their own JSON form (e.g. synthetic tables)
        return _jsonable(to_json())
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


#: the run record: data-independent facts only, safe to publish beside the outputs


def _dumps(value: Any) -> str:
    """Strict JSON (an unbounded loss is the string "inf", as in reports and `account`)."""
    return json.dumps(json_safe(value), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_atomically(
    out: Path,
    outputs: Mapping[str, Any],
    record: RunRecord,
    private: Mapping[str, Any] | None = None,
    *,
    certify: Callable[[Path], None] | None = None,
) -> None:
    """Write everything into temporary siblings of ``out``, then rename them into place.

    ``record`` is the public run record (``ledger.json``; its outputs are filled in here);
    ``private`` (data-dependent values useful for debugging, and the seed, which would let
    anyone subtract the noise) goes to ``PRIVATE-diagnostics.json`` in the private directory
    beside ``out`` (:func:`~dpledger.runtime.run_record.private_dir`: ``OUT.private``), never
    into ``out``, which holds only what may be published. ``certify`` sees the staged public
    directory before anything is moved into place. On any failure neither is left.
    """
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        public = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        staged.append((public, out))
        _write_public(public, outputs, record)
        if certify is not None:
            certify(public)
        if private is not None:
            secret = private_dir(out)
            tmp = Path(tempfile.mkdtemp(prefix=f".{secret.name}.", dir=secret.resolve().parent))
            staged.insert(0, (tmp, secret))
            _write_private(tmp, private)
        move_into_place(staged)
    except BaseException:
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_public(where: Path, outputs: Mapping[str, Any], record: RunRecord) -> None:
    """The outputs (arrays as ``.npy``, the rest in ``outputs.json``) and ``ledger.json``."""
    scalars: dict[str, Any] = {}
    files: dict[str, str] = {}
    for name, value in outputs.items():
        if isinstance(value, np.ndarray):
            fname = f"{name}.npy"
            np.save(where / fname, value, allow_pickle=False)
            files[name] = fname
        else:
            scalars[name] = _jsonable(value)
    record = record.with_outputs(files, scalars)
    (where / "outputs.json").write_text(_dumps(scalars))
    (where / RECORD_FILE).write_text(_dumps(record.to_json()))


def _write_private(where: Path, private: Mapping[str, Any]) -> None:
    note = (
        "PRIVATE: data-dependent values and the noise seed of this run. Anyone who has this "
        "file can undo the noise. Never publish it with the outputs."
    )
    (where / PRIVATE_FILE).write_text(_dumps({"warning": note, **_jsonable(dict(private))}))


def account_declaration(
    host: Any, declaration: Declaration, adjacency: Adjacency, *, method: str, delta: float
) -> tuple[Event, tuple[str, ...], select.Selection]:
    """The declaration stated per privacy unit (lifted by the core if it is row level), the
    lifting rules used, and its certified bound."""
    core_event = host.lower(declaration.event, adjacency)
    per_unit, rules = stated_for_unit(core_event, declaration.unit, adjacency, release=method)
    return per_unit, rules, select.account(per_unit, unit_adjacency(adjacency), delta=delta)


def _adjacency(config: Mapping[str, Any]) -> Adjacency:
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


def main(args: argparse.Namespace) -> int:
    _prepare_out(args.out)
    config = read_config(args.config)
    host = host_from_args(args, on_demand=True)
    if args.method not in host.methods():  # third-party: its run() executes in its own process
        from dpledger.cleanroom.third_party_run import run_third_party

        return run_third_party(args, config, host)
    spec = host.method(args.method)
    params = spec.make_params(params_table(config))
    adjacency = _adjacency(config)
    delta = query_delta(args, config, getattr(params, "delta", None))
    data_path = data_path_of(args, config)
    data = load_data(data_path) if data_path is not None else None
    # one frozen declaration, accounted before any noise is drawn, enforced by the ledger and
    # written to the run record: declare() is called exactly once
    declaration = declare_checked(spec, params, adjacency)
    per_unit, rules, selection = account_declaration(
        host, declaration, adjacency, method=spec.name, delta=delta
    )
    try:
        result = run_verified(
            spec,
            params,
            data,
            adjacency=adjacency,
            seed=args.seed,
            secure=args.secure,
            declaration=declaration,
        )
    except (DPLedgerError, MemoryError, RecursionError):
        raise
    except Exception as exc:  # the method's own failure: name it and its plugin
        raise method_failed(spec, exc) from exc
    record = build_record(spec, params, result, host.lower(declaration.event, adjacency))
    return publish(args, record, result, per_unit, rules, selection)


def params_table(config: Mapping[str, Any]) -> dict[str, Any]:
    """The method's parameters: the config's ``[params]``, else its other top-level keys."""
    table = config.get("params", {k: v for k, v in config.items() if k not in _RESERVED})
    if not isinstance(table, dict):
        raise InvalidParameterError("params", "must be a table", "write [params] key = value")
    return table


def method_failed(spec: Any, exc: Exception) -> PluginError:
    """A method's ``run()`` raised: one line naming the method and its plugin."""
    who = f"plugin {spec.provenance.plugin!r}" if spec.provenance else "its plugin"
    hint = ""
    if isinstance(exc, attrs.exceptions.FrozenInstanceError):
        hint = " (its parameters are frozen: make a changed copy with attrs.evolve)"
    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "no message"
    return PluginError(
        f"method {spec.name!r} ({who}) failed in run(): {type(exc).__name__}: {message}{hint}. "
        "Fix: report it to the plugin's author, with the config"
    )


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


def publish(
    args: argparse.Namespace,
    record: RunRecord,
    result: Any,
    per_unit: Event,
    rules: tuple[str, ...],
    selection: select.Selection,
    *,
    replies: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Write a verified run's outputs and record, once the clean room has confirmed them
    (``replies``: third-party declarations already made by a worker, handed to it)."""
    record = attrs.evolve(
        record,
        accounted={"event": per_unit.to_dict(), "lift_rules": list(rules)},
        privacy=privacy_record(selection),
    )
    private = {"seed": args.seed, **result.ledger.private_dict()}
    try:
        write_atomically(
            args.out,
            result.outputs,
            record,
            private,
            certify=clean_room_certifier(
                args.out, args.plugins_allow, args.plugins_block, args.plugins_timeout, replies
            ),
        )
    except RunRefused as refused:
        return refused.code
    return 0


class RunRefused(Exception):
    """The clean room did not confirm a staged run (it has said why); nothing is published."""

    def __init__(self, code: int) -> None:
        super().__init__(f"refused with exit code {code}")
        self.code = code


def clean_room_certifier(
    out: Path,
    allow: str | None,
    block: str | None,
    timeout: str | None,
    replies: Sequence[Mapping[str, Any]] = (),
) -> Callable[[Path], None]:
    """The clean room's confirmation of a run staged for ``out``: it makes the declaration
    again, recomputes the bound, writes the record's privacy section and seal, and prints the
    run's line; :class:`RunRefused` if it does not confirm the run."""
    from dpledger.cleanroom.launch import run_in_clean_room

    def certify(staged: Path) -> None:
        options = {
            "staged": str(staged),
            "out": str(out),
            "plugins_allow": allow,
            "plugins_block": block,
        }
        code = run_in_clean_room(
            "certify_run", options, allow=allow, block=block, timeout=timeout, given=replies
        )
        if code != 0:
            raise RunRefused(code)

    return certify


def build_record(spec: Any, params: Any, result: Any, declared_core: Event) -> RunRecord:
    """The public record of a finished run, before its bound is filled in."""
    return RunRecord(
        method=spec.name,
        provenance=spec.provenance.to_dict() if spec.provenance else None,
        params=_jsonable(attrs.asdict(params)),
        ledger=result.ledger.to_dict(),
        declared_core=declared_core.to_dict(),
        privacy={},
    )


def privacy_record(selection: select.Selection) -> dict[str, Any]:
    """The bound a run record keeps: the reported one, every backend's, and the unavailable."""
    return {
        **selection.bound.to_dict(),
        "candidates": [c.to_dict() for c in selection.candidates],
        "unavailable": [{"backend": n, "reason": r} for n, r in selection.unavailable],
    }


def headline(
    method: str, bound: Mapping[str, Any], delta: float, adjacency: Adjacency, out: Path
) -> str:
    """The one line ``dpledger run`` prints: the certified bound, or that there is none."""
    eps = bound.get("epsilon")
    where = f"{bound.get('method')}, {adjacency.describe()}"
    if not isinstance(eps, int | float) or not math.isfinite(eps):
        return (
            f"{method}: verified; NO privacy guarantee (epsilon unbounded at "
            f"delta={delta}; {where}); wrote {out} (private diagnostics: {private_dir(out)})"
        )
    return (
        f"{method}: verified; epsilon <= {fmt_up(float(eps))} at delta={delta} ({where}); "
        f"wrote {out} (private diagnostics, never to publish: {private_dir(out)})"
    )

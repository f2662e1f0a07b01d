"""The public record of one verified run (``ledger.json``): one type, written and read.

``dpledger run`` and ``dpledger demo`` write it; ``dpledger report`` reads it. It holds
data-independent facts only (what was declared, executed, accounted, and which outputs exist);
the seed and realised sizes go to the private diagnostics file, never here. That file goes to
the private directory beside the run's directory (:func:`private_dir`: ``runs/a.private`` for
``runs/a``), never into the directory meant for publication.

The JSON form is flat (the ledger's own facts at top level) and names its schema; a record
without ``schema`` is read as the first version, which had the same fields.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger import __version__
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import Event, event_from_dict

SCHEMA = "dpledger.run/1"
RECORD_FILE = "ledger.json"
#: data-dependent diagnostics (seed, realised sample sizes, row counts): never publish
PRIVATE_FILE = "PRIVATE-diagnostics.json"
#: the suffix of the directory, beside a run's directory, that holds its private files
PRIVATE_DIR_SUFFIX = ".private"
#: the keys :meth:`PrivacyLedger.to_dict` writes, kept at the top level of the record
LEDGER_KEYS = (
    "declared",
    "declared_unit",
    "unit_steps",
    "executed",
    "adjacency",
    "secure_seed",
    "steps",
)


@attrs.frozen
class RunRecord:
    """What a verified run publishes about itself."""

    method: str
    #: :meth:`PrivacyLedger.to_dict`: declared event and unit, executed event, adjacency, steps
    ledger: Mapping[str, Any]
    #: the declaration mapped onto core events (what the accountant reads)
    declared_core: Mapping[str, Any]
    #: the certified bound at run time: ``EpsilonBound.to_dict`` (+ candidates, unavailable)
    privacy: Mapping[str, Any]
    params: Mapping[str, Any] = attrs.field(factory=dict)
    provenance: Mapping[str, Any] | None = None
    #: the declaration stated per privacy unit and the lifting rules used
    accounted: Mapping[str, Any] | None = None
    verified: bool = True
    #: output names: ``files`` (name -> file) and ``values`` (name -> JSON value)
    outputs: Mapping[str, Any] = attrs.field(factory=lambda: {"files": {}, "values": {}})
    #: the pipeline file beside the record (the demo), accounted by reports instead
    pipeline: str | None = None
    #: whether the executed steps equal the declaration (not only are covered by it)
    exact_match: bool | None = None
    #: the run's booking in a privacy budget store (store id, entry, run id, source, rule)
    budget: Mapping[str, Any] | None = None
    dpledger_version: str = __version__
    schema: str = SCHEMA

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The flat JSON form written to ``ledger.json``."""
        out: dict[str, Any] = {
            "schema": self.schema,
            "dpledger_version": self.dpledger_version,
            "method": self.method,
            "provenance": None if self.provenance is None else dict(self.provenance),
            "params": dict(self.params),
            **{k: self.ledger[k] for k in LEDGER_KEYS if k in self.ledger},
            "declared_core": dict(self.declared_core),
            "verified": self.verified,
            "privacy": dict(self.privacy),
            "outputs": dict(self.outputs),
        }
        for key in ("accounted", "pipeline", "exact_match", "budget"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: Any, *, where: str = RECORD_FILE) -> RunRecord:
        """Read a record; a missing or malformed field is an error naming it."""
        if not isinstance(data, Mapping):
            raise InvalidParameterError(where, "is not a table", "pass a run directory")
        schema = data.get("schema", SCHEMA)
        if schema != SCHEMA:
            raise InvalidParameterError(
                f"{where}: schema",
                f"unknown run record {schema!r}",
                f"this dpledger reads {SCHEMA}",
            )
        for key in ("method", "adjacency", "declared_core"):
            if key not in data:
                raise InvalidParameterError(
                    f"{where}: {key}", "is missing", "pass a run directory written by dpledger"
                )
        for key in ("declared_core", "adjacency"):
            if not isinstance(data[key], Mapping):
                raise InvalidParameterError(
                    f"{where}: {key}", "is not a table", "pass a run directory written by dpledger"
                )
        privacy = data.get("privacy") or {}
        outputs = data.get("outputs") or {"files": {}, "values": {}}
        provenance = data.get("provenance")
        return cls(
            method=str(data["method"]),
            ledger={k: data[k] for k in LEDGER_KEYS if k in data},
            declared_core=data["declared_core"],
            privacy=privacy if isinstance(privacy, Mapping) else {},
            params=data.get("params") or {},
            provenance=provenance if isinstance(provenance, Mapping) else None,
            accounted=data.get("accounted"),
            verified=bool(data.get("verified", False)),
            outputs=outputs if isinstance(outputs, Mapping) else {"files": {}, "values": {}},
            pipeline=data["pipeline"] if isinstance(data.get("pipeline"), str) else None,
            exact_match=data.get("exact_match"),
            budget=data["budget"] if isinstance(data.get("budget"), Mapping) else None,
            dpledger_version=str(data.get("dpledger_version", "")),
            schema=schema,
        )

    # -- views -----------------------------------------------------------------------------
    @property
    def adjacency(self) -> Adjacency:
        try:
            return Adjacency(**self.ledger["adjacency"])
        except (TypeError, DPLedgerError) as exc:
            raise InvalidParameterError(
                f"{RECORD_FILE}: adjacency",
                f"is invalid ({exc})",
                "pass a run directory written by dpledger",
            ) from None

    @property
    def declared_unit(self) -> str:
        return str(self.ledger.get("declared_unit", "row"))

    def core_event(self) -> Event:
        """The declaration as core events."""
        return event_from_dict(self.declared_core)

    def with_outputs(self, files: Mapping[str, str], values: Mapping[str, Any]) -> RunRecord:
        return attrs.evolve(self, outputs={"files": dict(files), "values": dict(values)})


def private_dir(out: str | Path) -> Path:
    """The directory for the private files of the run written to ``out``: ``OUT.private``
    beside it (``runs/a`` -> ``runs/a.private``), never inside what is published."""
    path = Path(out)
    if path.name in ("", ".", ".."):
        path = path.resolve()
    return path.with_name(path.name + PRIVATE_DIR_SUFFIX)


def check_run_dirs_free(out: Path) -> None:
    """Refuse ``out`` unless it and its private directory are new or empty directories."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidParameterError(
            "--out", f"{out} exists and is not an empty directory", "choose a new output directory"
        )
    secret = private_dir(out)
    if secret.exists() and (not secret.is_dir() or any(secret.iterdir())):
        raise InvalidParameterError(
            "--out",
            f"{secret} (where the private diagnostics of {out} go) exists and is not an empty "
            "directory",
            f"choose a new output directory, or move {secret} away",
        )


def move_into_place(staged: Sequence[tuple[Path, Path]]) -> None:
    """Rename each staged directory onto its target (new, or checked empty), in order. If one
    rename fails, the ones already in place are removed again: all are in place, or none."""
    placed: list[Path] = []
    try:
        for tmp, target in staged:
            if target.exists():
                target.rmdir()  # checked empty before the run
            os.replace(tmp, target)
            placed.append(target)
    except BaseException:
        for target in placed:
            shutil.rmtree(target, ignore_errors=True)
        raise

"""The run directory of a tracked Opacus run: its public record, read by ``dpledger report``.

See :mod:`dpledger.integrations.opacus`; public facts only (no seed, no private directory).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpledger.core.errors import InvalidParameterError
from dpledger.integrations.opacus_events import POISSON
from dpledger.runtime.run_dir import write_run_dir
from dpledger.runtime.run_record import RECORD_FILE, RunRecord
from dpledger.runtime.session import privacy_section, record_fields

if TYPE_CHECKING:
    from dpledger.integrations.opacus import OpacusResult

__all__ = ["METHOD", "check_out", "read_result", "run_record", "write_run"]

#: the method name a run record of a tracked Opacus run carries
METHOD = "opacus_dp_sgd"


def run_record(result: OpacusResult, *, secure: bool = False) -> RunRecord:
    """The public record of a tracked run: its event, adjacency, steps and the bracket."""
    b = result.batching
    log: list[dict[str, Any]] = []
    if b.kind == POISSON:
        log.append({"step": "batches", "poisson_sample": b.sample_rate})
    else:
        log.append({"step": "batches", f"{b.kind}_batches": [b.batch_size, b.dataset_size]})
    event = result.event.to_dict()
    ledger = {
        "declared": event,
        "declared_unit": "row",
        "unit_steps": [],
        "executed": event,
        "adjacency": result.adjacency.to_dict(),
        "secure_seed": secure,
        "steps": log,
    }
    privacy = {**privacy_section(result.selection), "epsilon_lower": result.epsilon_lower}
    params = {
        "noise_multipliers": list(result.noise_multipliers),
        "max_grad_norms": [list(c) if isinstance(c, tuple) else c for c in result.max_grad_norms],
        "steps": result.steps,
        "epochs": result.epochs,
        "complete_epochs": result.complete_epochs,
        "batching": b.to_dict(),
        "opacus": {
            "accountant": result.opacus_accountant,
            "epsilon": result.opacus_epsilon,
            "history": [list(h) for h in result.opacus_history],
            "status": result.opacus_status,
            # Opacus's prv and rdp accountants on the same history, whichever the engine used
            "accountants": [f.to_dict() for f in result.opacus_figures],
            "difference": result.opacus_difference,
        },
        "poisson_same_relation": result.poisson_same_relation,
        "lower_event": None if result.lower_event is None else result.lower_event.to_dict(),
        "explanation": result.explanation,
        # the report prints the notes: the checks' findings go with them
        "notes": [*result.notes, *_finding_notes(result)],
        "findings": [f.to_dict() for f in result.findings],
        "covered": result.covered,
    }
    return record_fields(
        method=METHOD,
        provenance=None,
        params=params,
        ledger=ledger,
        declared_core=result.event,
        per_unit=result.event,
        lift_rules=(),
        privacy=privacy,
        exact_match=True,
    )


def _finding_notes(result: OpacusResult) -> list[str]:
    from dpledger.integrations.opacus_checks import finding_lines

    head = (
        []
        if result.covered
        else ["NOT COVERED: a flagged departure breaks an assumption of the bound"]
    )
    return [*head, *finding_lines(result.findings)]


def check_out(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidParameterError(
            "out", f"{path} exists and is not an empty directory", "choose a new run directory"
        )


def write_run(out: str | os.PathLike[str], result: OpacusResult, *, secure: bool = False) -> Path:
    """Write the run's record into ``out`` (new or empty), through a temporary sibling."""
    path = Path(out)
    check_out(path)
    write_run_dir(path, {}, run_record(result, secure=secure))
    return path


def read_result(run_dir: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The Opacus comparison stored in a run directory written by :func:`write_run`."""
    data = json.loads((Path(run_dir) / RECORD_FILE).read_text(encoding="utf-8"))
    record = RunRecord.from_json(data)
    return record.params

"""Writing a run directory: all of it or nothing, the private part beside it, never in it.

:func:`write_run_dir` is the one writer of a run's files, for ``dpledger run``, the demo and
the Opacus integration: everything is written into temporary siblings of the target and moved
into place only when all of it is written (and, if asked, confirmed), so a failure leaves
nothing behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpledger.runtime.jsonform import jsonable, strict_json
from dpledger.runtime.run_record import (
    PRIVATE_FILE,
    RECORD_FILE,
    RunRecord,
    move_into_place,
    private_dir,
)

__all__ = ["OUTPUTS_FILE", "PRIVATE_NOTE", "write_run_dir"]

#: the outputs that are not arrays (arrays are ``NAME.npy`` files)
OUTPUTS_FILE = "outputs.json"
#: the first field of the private diagnostics
PRIVATE_NOTE = (
    "PRIVATE: data-dependent values and the noise seed of this run. Anyone who has this "
    "file can undo the noise. Never publish it with the outputs."
)


def write_run_dir(
    out: Path,
    outputs: Mapping[str, Any],
    record: RunRecord,
    private: Mapping[str, Any] | None = None,
    *,
    extra: Callable[[Path], None] | None = None,
    private_extra: Callable[[Path], Mapping[str, Any]] | None = None,
    certify: Callable[[Path], None] | None = None,
) -> RunRecord:
    """Write a run into ``out`` (new or empty) through temporary siblings; the record written.

    ``record`` is the public run record (``ledger.json``; its outputs are filled in here);
    ``extra`` writes further published files (post-processing of the outputs) into the staged
    directory; ``private`` (the seed, data-dependent diagnostics) goes to
    ``PRIVATE-diagnostics.json`` in the private directory beside ``out``
    (:func:`~dpledger.runtime.run_record.private_dir`: ``OUT.private``), never into ``out``;
    ``private_extra`` writes further private files there and returns further private entries.
    ``certify`` sees the staged public directory before anything is moved into place. On any
    failure neither directory is left.
    """
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        public = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        staged.append((public, out))
        written = _write_public(public, outputs, record)
        if extra is not None:
            extra(public)
        if certify is not None:
            certify(public)
        if private is not None:
            secret = private_dir(out)
            secret.resolve().parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{secret.name}.", dir=secret.resolve().parent))
            staged.insert(0, (tmp, secret))
            more = dict(private_extra(tmp)) if private_extra is not None else {}
            (tmp / PRIVATE_FILE).write_text(
                strict_json({"warning": PRIVATE_NOTE, **jsonable({**private, **more})})
            )
        move_into_place(staged)
    except BaseException:
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _write_public(where: Path, outputs: Mapping[str, Any], record: RunRecord) -> RunRecord:
    """The outputs (arrays as ``.npy``, the rest in ``outputs.json``) and ``ledger.json``."""
    scalars: dict[str, Any] = {}
    files: dict[str, str] = {}
    for name, value in outputs.items():
        if isinstance(value, np.ndarray):
            fname = f"{name}.npy"
            np.save(where / fname, value, allow_pickle=False)
            files[name] = fname
        else:
            scalars[name] = jsonable(value)
    record = record.with_outputs(files, scalars)
    (where / OUTPUTS_FILE).write_text(strict_json(scalars))
    (where / RECORD_FILE).write_text(strict_json(record.to_json()))
    return record

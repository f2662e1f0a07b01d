"""A third-party method's ``declare``, run in a worker process and returned as data.

The worker is an ordinary interpreter (installed plugins load as usual) that never certifies
anything: it loads the plugins on demand, calls the method's ``declare`` with the request's
canonical inputs (the same under ``account``, ``report``, ``run`` and ``verify``: method name,
parameters and adjacency, nothing else), lowers the result to core events and writes it as JSON.
A plugin that exits, hangs past the time limit or raises is reported by the parent, by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dpledger.cleanroom.declarations import (
    DeclarationReply,
    DeclarationRequest,
    reply_from_dict,
)
from dpledger.core.errors import DPLedgerError, InvalidParameterError, PluginError

#: the worker's limit in units of the loading limit, and seconds for its own start
WORKER_FACTOR = 4.0
WORKER_START = 5.0


def plugin_timeout(option: str | float | None = None) -> float:
    """The worker's time limit (loading the plugins and one ``declare``): four times the
    per-distribution loading limit (``DPLEDGER_PLUGINS_TIMEOUT``, see
    :mod:`dpledger.runtime.plugin_probe`) plus its own start, so that a plugin that hangs at
    import is named by the loader first."""
    from dpledger.runtime.plugin_probe import timeout_from

    return WORKER_FACTOR * timeout_from(option, "--plugins-timeout") + WORKER_START


def _answer(
    request: DeclarationRequest, allow: Any, block: Any, timeout: Any, who_file: Path
) -> DeclarationReply:
    from dpledger.runtime.plugin_manager import PluginHost

    host = PluginHost.on_demand(allow=allow, block=block, timeout=timeout)

    def named(provenance: Any) -> None:  # named if declare then exits or hangs
        who_file.write_text(
            f"plugin {provenance.plugin!r} ({provenance.distribution or '-'} "
            f"{provenance.version or ''})".rstrip(),
            encoding="utf-8",
        )

    return declare_with(host, request, named)


def declare_with(
    host: Any, request: DeclarationRequest, named: Callable[[Any], None]
) -> DeclarationReply:
    """``request`` answered by the plugin ``host`` loads on demand: the lowered declaration,
    or the error the method (or its loading) raised, as data. ``named`` gets the method's
    provenance before its ``declare`` is called."""
    from dpledger.core.adjacency import Adjacency

    try:
        spec = host.method(request.method)
        provenance = spec.provenance
        if provenance is not None:
            named(provenance)
        adjacency = Adjacency(**request.adjacency)
        event, plugin, unit = host.resolve_method(request.method, request.params, adjacency)
    except InvalidParameterError as exc:
        error = {"field": exc.field, "problem": exc.problem, "fix": exc.fix}
        return DeclarationReply(request, error=error)
    except DPLedgerError as exc:
        problem, _, fix = str(exc).partition(". Fix: ")
        error = {"field": "method", "problem": problem, "fix": fix or "see `dpledger plugins`"}
        return DeclarationReply(request, error=error)
    provenance = spec.provenance
    return DeclarationReply(
        request,
        event=event.to_dict(),
        unit=unit,
        plugin=plugin,
        distribution=provenance.distribution if provenance else None,
        version=provenance.version if provenance else None,
        post_processing=spec.post_processing,
    )


def main() -> int:
    """Worker entry: the job on stdin (a declaration, or report sections to draw), the reply
    written to the file it names."""
    job = json.loads(sys.stdin.read())
    reply_file = Path(job["reply_file"])
    if job.get("kind") == "sections":
        from dpledger.cleanroom.sections_worker import draw

        answer = draw(job, reply_file.with_suffix(".who"))
    else:
        request = DeclarationRequest.from_dict(job["request"])
        who = reply_file.with_suffix(".who")
        answer = _answer(request, job["allow"], job["block"], job.get("timeout"), who).to_dict()
    reply_file.write_text(json.dumps(answer), encoding="utf-8")
    return 0


def _child_env() -> dict[str, str]:
    """The parent's environment, with its import path (the worker sees what the parent sees)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def run_job(job: dict[str, Any], what: str, timeout: str | float | None) -> Any:
    """Run a worker on ``job`` (its ``reply_file`` is set here); its JSON answer. A plugin
    that exits, hangs or crashes is a :class:`PluginError` naming ``what`` and the plugin."""
    limit = plugin_timeout(timeout)
    fix = "block the plugin with --plugins-block NAME, or ask its author to fix it"
    with tempfile.TemporaryDirectory(prefix="dpledger-worker-") as tmp:
        reply_file = Path(tmp) / "reply.json"
        code = "from dpledger.cleanroom.worker import main; raise SystemExit(main())"
        sys.stdout.flush()
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                input=json.dumps({**job, "reply_file": str(reply_file)}),
                text=True,
                capture_output=True,  # a plugin's own output and tracebacks stay here
                timeout=limit,
                env=_child_env(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PluginError(
                f"{what}{_who(reply_file)} did not answer within {limit:g} s. Fix: {fix}"
            ) from None
        if done.returncode != 0 or not reply_file.exists():
            last = _last_line(done.stderr)
            raise PluginError(
                f"{what}{_who(reply_file)} exited with code {done.returncode} before answering"
                f"{f' ({last})' if last else ''}. Fix: {fix}"
            )
        return json.loads(reply_file.read_text(encoding="utf-8"))


def declare_in_worker(
    request: DeclarationRequest,
    *,
    allow: Sequence[str] | None,
    block: Sequence[str] | None,
    timeout: str | float | None = None,
) -> DeclarationReply:
    """Run ``request`` in a worker process; a plugin that exits, hangs or crashes is an error
    naming the method."""
    job = {
        "request": request.to_dict(),
        "allow": None if allow is None else list(allow),
        "block": None if block is None else list(block),
        "timeout": timeout,
    }
    what = f"the declaration of method {request.method!r} (third-party plugin process)"
    return reply_from_dict(run_job(job, what, timeout))


def _who(reply_file: Path) -> str:
    """The plugin the worker was calling when it stopped, if it got that far."""
    who = reply_file.with_suffix(".who")
    return f", {who.read_text(encoding='utf-8')}," if who.exists() else ""


def _last_line(text: str | None) -> str:
    """The last non-empty line a failed plugin process wrote (e.g. its exception)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""

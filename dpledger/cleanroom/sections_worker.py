"""Third-party report sections, drawn in a worker process from the report's data.

The clean room writes the report and runs no third-party code; it hands the report's data
(the JSON context every section receives) to a worker, which loads the plugins of the methods
the report uses, calls the sections of those plugins (a plugin's sections, for releases of its
own methods only), and returns the text. The room includes it labelled as the plugin's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpledger.core.errors import DPLedgerError


def _sections_of(host: Any, methods: Sequence[str]) -> list[tuple[str, Any]]:
    """The third-party section specs a host holds, by name, of the plugins that registered
    one of ``methods`` (a plugin's section is drawn only for releases of its own methods)."""
    from dpledger.runtime.plugin_loading import BUILTIN_TIER

    table = host.methods()
    released = [table[m] for m in dict.fromkeys(methods) if m in table]
    return [
        (name, spec)
        for name, spec in sorted(host.report_sections().items())
        if (spec.provenance is None or spec.provenance.tier != BUILTIN_TIER)
        and any(spec.concerns(method) for method in released)
    ]


def _who(spec: Any) -> str:
    prov = spec.provenance
    if prov is None:
        return "unknown plugin"
    dist = " ".join(p for p in (prov.distribution, prov.version) if p) or "-"
    return f"{prov.plugin} ({dist})"


def draw(job: Mapping[str, Any], who_file: Path) -> dict[str, Any]:
    """The sections and the problems of the plugins providing ``job["methods"]``."""
    from dpledger.runtime.plugin_manager import PluginHost

    host = PluginHost.on_demand(allow=job["allow"], block=job["block"], timeout=job["timeout"])
    for method in job["methods"]:
        try:
            host.method(method)  # loads the distribution that provides it
        except DPLedgerError:
            continue
    sections: list[dict[str, str]] = []
    problems: list[str] = []
    for name, spec in _sections_of(host, job["methods"]):
        who_file.write_text(f"report section {name!r} of plugin {_who(spec)}", encoding="utf-8")
        try:
            text = spec.render(dict(job["context"]))
        except Exception as exc:  # a plugin's section never breaks the report
            problems.append(f"report section {name!r} of plugin {_who(spec)} failed: {exc}")
            continue
        if not isinstance(text, str):
            problems.append(f"report section {name!r} of plugin {_who(spec)} returned no text")
        elif text.strip():
            sections.append({"name": name, "title": spec.title, "text": text, "who": _who(spec)})
    return {"sections": sections, "problems": problems}


def sections_in_worker(
    methods: Sequence[str],
    context: Mapping[str, Any],
    *,
    allow: Sequence[str] | None,
    block: Sequence[str] | None,
    timeout: str | float | None = None,
) -> dict[str, Any]:
    """Draw the third-party sections in a worker process (see :func:`draw`)."""
    from dpledger.cleanroom.worker import run_job

    job = {
        "kind": "sections",
        "methods": list(methods),
        "context": dict(context),
        "allow": None if allow is None else list(allow),
        "block": None if block is None else list(block),
        "timeout": timeout,
    }
    answer = run_job(job, "the report sections of third-party plugins", timeout)
    if not isinstance(answer, dict):
        return {"sections": [], "problems": ["the report sections' worker answered no table"]}
    return answer

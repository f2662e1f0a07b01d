"""Checking third-party plugins in a short-lived subprocess before dpledger imports them.

A third-party plugin's module runs arbitrary code when it is imported, and so do its
registration hooks: it may end the process (``sys.exit``, ``os._exit``), raise
``KeyboardInterrupt`` or another ``BaseException``, or never return. :func:`probe` imports each
plugin, registers it and calls its registration hooks in a child interpreter (one per
distribution), with a time limit, and reports per plugin either ``ok`` with the method names,
mechanism names and event kinds it registers, or the stage (``load``, ``register``, ``hook``)
and what went wrong there. The host imports a plugin in its own process only after it passed,
and it uses the reported names to import only the distributions that provide a name it needs.

The interface is narrow JSON. The child reads ``{"group": ..., "plugins": [{"name", "value",
"distribution", "version"}, ...]}`` on stdin and writes one JSON object per line: ``{"ready":
true}`` once it runs, ``{"index": i, "stage": ..., "hook": ...}`` before each step of plugin
``i``, and ``{"index": i, "result": {"ok": true, "methods": [...], "mechanisms": [...],
"kinds": [...]}}`` or ``{"index": i, "result": {"ok": false, "stage": ..., "problem": ...}}``.
A child that ends or exceeds the limit before a result is reported names the plugin and the
step it was in; the plugins after it are checked in a new child. The child imports only
pluggy, the hook specifications and the plugin itself (no numerical library of its own).

Environment: ``DPLEDGER_PLUGINS_TIMEOUT`` (seconds per distribution, default 30; also
``--plugins-timeout``).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError

ENV_TIMEOUT = "DPLEDGER_PLUGINS_TIMEOUT"
#: seconds a child may take to import and register one distribution's plugins
DEFAULT_TIMEOUT = 30.0
#: the hook-registration steps of a plugin, in order
STAGES = ("load", "register", "hook")
_BOOT = "from dpledger.runtime.plugin_probe import main; main()"
_TAIL = 300


@attrs.frozen
class ProbeTarget:
    """One entry point to check: its name, ``module[:attr]`` target and distribution."""

    name: str
    value: str
    distribution: str | None
    version: str | None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class ProbeResult:
    """What the child found for one plugin: ``ok`` and the names it registers, or the stage
    (``load``, ``register`` or ``hook``) and the problem met there."""

    plugin: str
    distribution: str | None
    version: str | None
    ok: bool
    stage: str | None = None
    problem: str | None = None
    methods: tuple[str, ...] = ()
    mechanisms: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    def provides(self, methods: Iterable[str] = (), kinds: Iterable[str] = ()) -> bool:
        """Whether the plugin registers one of these method names or event kinds."""
        return self.ok and bool(set(methods) & set(self.methods) or set(kinds) & set(self.kinds))

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self).items()}


def timeout_from(raw: str | float | None, field: str = ENV_TIMEOUT) -> float:
    """The time limit in seconds: ``raw`` (an option or the environment variable ``field``
    names), the environment variable when None, else :data:`DEFAULT_TIMEOUT`."""
    if raw is None:
        raw = os.environ.get(ENV_TIMEOUT)
        field = ENV_TIMEOUT
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(
            field,
            f"must be a positive number of seconds, got {raw!r}",
            f"set {field} to e.g. 30",
        )
    return value


def probe(targets: Sequence[ProbeTarget], *, timeout: float) -> list[ProbeResult]:
    """Check every target in a child interpreter, one child per distribution; results in the
    order of ``targets``."""
    groups: dict[str | None, list[ProbeTarget]] = {}
    for target in targets:
        groups.setdefault(target.distribution, []).append(target)
    found: dict[ProbeTarget, ProbeResult] = {}
    for group in groups.values():
        found.update(_probe_group(group, timeout))
    return [found[t] for t in targets]


def _probe_group(group: list[ProbeTarget], timeout: float) -> dict[ProbeTarget, ProbeResult]:
    found: dict[ProbeTarget, ProbeResult] = {}
    remaining = list(group)
    while remaining:
        found.update(_run_child(remaining, timeout))
        remaining = [t for t in remaining if t not in found]
    return found


@attrs.define
class _Outcome:
    """What one child wrote and how it ended."""

    lines: list[dict[str, Any]]
    returncode: int | None
    timed_out: bool
    stderr: str


def _child_env() -> dict[str, str]:
    """The environment with the parent's ``sys.path``, so the child finds the same plugins."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
    return env


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if os.name == "posix":
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it started
        except (ProcessLookupError, PermissionError):
            proc.kill()
    else:  # pragma: no cover - no process groups
        proc.kill()


def _start(targets: list[ProbeTarget]) -> tuple[subprocess.Popen[bytes], bytes]:
    from dpledger.core.hookspecs import PROJECT_NAME

    request = {"group": PROJECT_NAME, "plugins": [t.to_dict() for t in targets]}
    proc = subprocess.Popen(
        [sys.executable, "-c", _BOOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_child_env(),
        start_new_session=os.name == "posix",
    )
    return proc, json.dumps(request).encode()


def _communicate(targets: list[ProbeTarget], timeout: float) -> _Outcome:
    proc, request = _start(targets)
    timed_out = False
    try:
        out, err = proc.communicate(request, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a grandchild keeps the pipes
            out, err = b"", b""
    lines = []
    for raw in out.decode("utf-8", "replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return _Outcome(lines, proc.returncode, timed_out, err.decode("utf-8", "replace"))


def _run_child(targets: list[ProbeTarget], timeout: float) -> dict[ProbeTarget, ProbeResult]:
    """Results for the targets this child reported on, and for the one it was checking when
    it ended or ran out of time (at least one target gets a result)."""
    outcome = _communicate(targets, timeout)
    found: dict[ProbeTarget, ProbeResult] = {}
    step: tuple[int, dict[str, Any]] | None = None
    for line in outcome.lines:
        index = line.get("index")
        if not isinstance(index, int) or not 0 <= index < len(targets):
            continue
        if isinstance(line.get("result"), dict):
            found[targets[index]] = _result(targets[index], line["result"])
            step = None
        else:
            step = (index, line)
    if len(found) < len(targets):
        index, line = step or (next(i for i, t in enumerate(targets) if t not in found), {})
        if not any(ln.get("ready") for ln in outcome.lines):
            line = {"stage": "load", "unstarted": True}
        found[targets[index]] = _failure(targets[index], line, outcome, timeout)
    return found


def _result(target: ProbeTarget, raw: dict[str, Any]) -> ProbeResult:
    def names(key: str) -> tuple[str, ...]:
        value = raw.get(key) or []
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    ok = raw.get("ok") is True
    return ProbeResult(
        plugin=target.name,
        distribution=target.distribution,
        version=target.version,
        ok=ok,
        stage=None if ok else str(raw.get("stage") or "load"),
        problem=None if ok else str(raw.get("problem") or "unknown problem"),
        methods=names("methods"),
        mechanisms=names("mechanisms"),
        kinds=names("kinds"),
    )


def _doing(target: ProbeTarget, step: dict[str, Any]) -> str:
    stage = step.get("stage")
    if stage == "hook":
        return f"running its registration hook {step.get('hook') or '?'}"
    if stage == "register":
        return "registering it"
    return f"importing {target.value}"


def _failure(
    target: ProbeTarget, step: dict[str, Any], outcome: _Outcome, timeout: float
) -> ProbeResult:
    tail = " ".join(outcome.stderr.strip().splitlines()[-1:])[-_TAIL:]
    note = f" (last output: {tail})" if tail else ""
    if outcome.timed_out:
        problem = (
            f"did not finish within {timeout:g} s while {_doing(target, step)}; allow longer "
            f"with --plugins-timeout SECONDS (or {ENV_TIMEOUT})"
        )
    elif step.get("unstarted"):
        problem = f"the plugin check could not start (exit code {outcome.returncode}){note}"
    else:
        code = outcome.returncode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        problem = f"ended the process ({how}) while {_doing(target, step)}{note}"
    stage = str(step.get("stage") or "load")
    return ProbeResult(target.name, target.distribution, target.version, False, stage, problem)


# -- the child ----------------------------------------------------------------------------


def describe_exception(exc: BaseException) -> str:
    """``Type: message``, or ``Type`` alone when the message is empty."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _channel() -> Callable[[dict[str, Any]], None]:
    """A writer on the original stdout; the plugin's own prints go to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(message) + "\n").encode())

    return send


def _collector(hook_name: str, names: dict[str, list[str]]) -> Callable[[Any], None]:
    def register(spec: Any) -> None:
        name = getattr(spec, "name", None)
        if not isinstance(name, str):
            return  # the host reports a spec of the wrong type when it loads the plugin
        if hook_name == "dpledger_register_methods":
            names["methods"].append(name)
        elif hook_name == "dpledger_register_mechanisms":
            names["mechanisms"].append(name)
            kind = getattr(getattr(spec, "event_class", None), "kind", None)
            if isinstance(kind, str):
                names["kinds"].append(kind)

    return register


def _check_one(
    send: Callable[[dict[str, Any]], None], index: int, target: dict[str, Any], group: str
) -> dict[str, Any]:
    from importlib import metadata

    import pluggy

    from dpledger.core import hookspecs

    send({"index": index, "stage": "load"})
    try:
        plugin = metadata.EntryPoint(target["name"], target["value"], group).load()
    except BaseException as exc:
        return {"ok": False, "stage": "load", "problem": _importing(target, exc)}
    send({"index": index, "stage": "register"})
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(plugin, name=target["name"])
    except BaseException as exc:
        return {"ok": False, "stage": "register", "problem": describe_exception(exc)}
    names: dict[str, list[str]] = {"methods": [], "mechanisms": [], "kinds": []}
    for hook_name in hookspecs.HOOK_NAMES:
        caller = getattr(pm.hook, hook_name)
        if not caller.get_hookimpls():
            continue
        send({"index": index, "stage": "hook", "hook": hook_name})
        try:
            caller(register=_collector(hook_name, names))
        except BaseException as exc:
            return {
                "ok": False,
                "stage": "hook",
                "problem": f"{hook_name} raised {describe_exception(exc)}",
            }
    return {"ok": True, **names}


def _importing(target: dict[str, Any], exc: BaseException) -> str:
    return f"importing {target['value']} failed: {describe_exception(exc)}"


def main() -> None:
    """The child: check the plugins named on stdin, report on the original stdout, and end
    without running any exit handler a plugin installed."""
    send = _channel()
    request = json.loads(sys.stdin.read())
    send({"ready": True})
    for index, target in enumerate(request["plugins"]):
        result = _check_one(send, index, target, request["group"])
        send({"index": index, "result": result})
    sys.stderr.flush()
    os._exit(0)

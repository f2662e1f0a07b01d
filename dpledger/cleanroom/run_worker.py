"""A third-party method's ``run``, executed in a worker process of its own.

The worker is an ordinary interpreter (installed plugins load as usual, through
:meth:`~dpledger.runtime.plugin_manager.PluginHost.on_demand`). It talks to dpledger's process
over two pipes (:mod:`dpledger.cleanroom.wire`; never its standard streams, which go to a file
whose last line names what went wrong):

1. the worker says ``hello``; dpledger sends the declaration's canonical request (method,
   parameters table, adjacency: what ``dpledger account`` asks a worker) and the
   plugin-loading options;
2. the worker loads the plugin (says ``loaded`` with the plugin's name before it calls
   ``declare``), makes the declaration as a declaration worker makes it
   (:func:`~dpledger.cleanroom.worker.declare_with`, in a child forked for it, so that what
   ``declare`` keeps or changes is not in the process that runs the method) and the
   parameters, and answers ``ready`` with both as data (the parameters as the run record
   states them), or ``failed``;
3. at row level dpledger then names the data file, which the worker reads as ``dpledger run``
   reads it while dpledger accounts the declaration;
4. dpledger sends ``run`` with the state of the method's non-private generator (never the
   ledger's) and, at user level, the data (loaded and bounded per user by dpledger, whose
   ledger holds the unit keys); the worker calls
   ``run(params, data, ledger, rng)`` with a :class:`~dpledger.cleanroom.ledger_channel.LedgerProxy`
   whose every call dpledger's process serves with the real ledger, and ends with ``done`` and
   the outputs as data, or ``failed`` and the error.

A worker that exits, or does not answer within the limit (:data:`RUN_TIMEOUT_ENV` for the run;
the plugin-loading limit of :func:`~dpledger.cleanroom.worker.plugin_timeout` before it), is
named in one line; it is stopped with everything it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

try:
    import fcntl
except ImportError:  # not a POSIX system: pipes keep their default size
    fcntl = None  # type: ignore[assignment]

from dpledger.cleanroom.declarations import DeclarationReply, DeclarationRequest, reply_from_dict
from dpledger.cleanroom.ledger_channel import DEFERRED, LedgerProxy, LedgerServer
from dpledger.cleanroom.wire import Link, WireError, shared_regions
from dpledger.core.errors import InvalidParameterError, PluginError

__all__ = ["BOOTSTRAP", "PIPE_SIZE", "RUN_TIMEOUT_ENV", "RunWorker", "plain_output", "run_timeout"]

#: seconds a third-party method's run may take in its worker (unset: no limit)
RUN_TIMEOUT_ENV = "DPLEDGER_RUN_TIMEOUT"
#: the program of the worker (the two descriptors of its pipes are its arguments)
BOOTSTRAP = (
    "import os, sys; from dpledger.cleanroom.run_worker import main; code = main(); "
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(code)"
)
_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def run_timeout(raw: str | None) -> float | None:
    """The run's time limit in seconds from :data:`RUN_TIMEOUT_ENV` (None: no limit)."""
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise InvalidParameterError(
            RUN_TIMEOUT_ENV, f"is {raw!r}", "set a number of seconds, e.g. 3600, or unset it"
        )
    return value


# ---------------------------------------------------------------------------------------------
# the worker's side
# ---------------------------------------------------------------------------------------------
def _failure(exc: BaseException) -> dict[str, Any]:
    text = " ".join(str(exc).split())
    out: dict[str, Any] = {"op": "failed", "type": type(exc).__name__, "message": text[:500]}
    if isinstance(exc, InvalidParameterError):
        out.update(field=exc.field, problem=exc.problem, fix=exc.fix)
    key = getattr(exc, "channel_key", None)
    if isinstance(key, int):
        out["key"] = key
    return out


def _load(link: Link, start: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The method's spec and parameters, once its declaration and parameters are sent as
    ``ready``; None if the declaration was refused (the reply says why)."""
    from dpledger.runtime.plugin_manager import PluginHost

    host = PluginHost.on_demand(
        allow=start.get("allow"), block=start.get("block"), timeout=start.get("timeout")
    )
    request = DeclarationRequest.from_dict(start["request"])

    def named(provenance: Any) -> None:  # named if declare then exits or hangs
        dist = " ".join(p for p in (provenance.distribution, provenance.version) if p)
        link.send({"op": "loaded", "who": f"{provenance.plugin} ({dist or 'unknown'})"})

    answer = _declare_apart(host, request, named)
    if "op" in answer:  # declare raised: reported by name
        link.send(answer)
        return None
    reply = reply_from_dict(answer)
    if reply.error is not None:
        link.send({"op": "ready", "declaration": reply.to_dict(), "params": None})
        return None
    spec = host.method(request.method)
    params = spec.make_params(dict(request.params))
    plain = plain_output(attrs.asdict(params), "params")
    link.send({"op": "ready", "declaration": reply.to_dict(), "params": plain})
    return spec, params


def _declare_apart(host: Any, request: DeclarationRequest, named: Any) -> dict[str, Any]:
    """The declaration's reply as data, made in a child of this process (forked once the
    plugin is loaded and named), so that nothing ``declare`` keeps or changes is in the
    process that runs the method; a ``failed`` message if ``declare`` raised."""
    from dpledger.cleanroom.worker import declare_with

    fork = getattr(os, "fork", None)
    try:
        spec = host.method(request.method)
    except Exception:  # refused as a declaration worker refuses it
        fork = None
    if fork is None:  # no fork on this system: declared here
        return declare_with(host, request, named).to_dict()
    if spec.provenance is not None:
        named(spec.provenance)
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork()
    if pid == 0:  # the child: declare, write the reply, end
        os.close(read)
        try:
            answer = declare_with(host, request, lambda provenance: None).to_dict()
        except BaseException as exc:  # reported by name
            answer = _failure(exc)
        with os.fdopen(write, "w", encoding="utf-8") as out:
            out.write(json.dumps(answer))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as given:
        text = given.read()
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if not text:
        raise PluginError(f"its declare ended the process that made it (exit code {code})")
    found = json.loads(text)
    if not isinstance(found, dict):
        raise PluginError("its declaration could not be read back")
    return found


def _generator(state: Mapping[str, Any]) -> np.random.Generator:
    """The method's non-private generator, in the state dpledger's process gave it."""
    name = state.get("bit_generator")
    if name not in _GENERATORS:
        raise PluginError(f"unknown bit generator {name!r}")
    bits = getattr(np.random, str(name))()
    bits.state = dict(state)
    return np.random.Generator(bits)


def plain_output(value: Any, where: str) -> Any:
    """An output as it crosses back: arrays as arrays, the rest as JSON values."""
    if isinstance(value, np.ndarray) or value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float | np.generic):
        return value.item() if isinstance(value, np.generic) else value
    to_json = getattr(value, "to_json", None)
    if callable(to_json):  # outputs that know their own JSON form
        return plain_output(to_json(), where)
    if isinstance(value, Mapping):
        return {str(k): plain_output(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_output(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise PluginError(
        f"output {where} is a {type(value).__name__}. Fix: return arrays, numbers, strings, "
        "lists or tables"
    )


def _run(proxy: LedgerProxy, spec: Any, params: Any, data: Any, rng: Any) -> dict[str, Any]:
    outputs = spec.run(params, data, proxy, _generator(rng))
    if not isinstance(outputs, Mapping) or not all(isinstance(k, str) for k in outputs):
        raise PluginError(f"method {spec.name!r}: run() must return a mapping of named outputs")
    return {"op": "done", "outputs": {k: plain_output(v, repr(k)) for k, v in outputs.items()}}


def _read_data(path: Any) -> tuple[Any, dict[str, Any] | None]:
    """The method's data read from its file as ``dpledger run`` reads it (nothing without a
    file), or why it could not be read (reported when the run is due)."""
    if not isinstance(path, str):
        return None, None
    from dpledger.commands._inputs import load_data

    try:
        return load_data(Path(path)), None
    except Exception as exc:  # the file's problem, named by dpledger's process
        return None, {**_failure(exc), "stage": "data"}


def main() -> int:
    """Worker entry: the descriptors of its two pipes (and of the shared regions it reads and
    writes, if any) are its arguments."""
    fds = [int(a) for a in sys.argv[1:5]]
    link = Link(fds[0], fds[1], (fds[2], fds[3]) if len(fds) == 4 else None)
    link.send({"op": "hello"})
    start = link.receive()
    try:
        loaded = _load(link, start)
    except BaseException as exc:  # reported to dpledger's process by name
        link.send(_failure(exc))
        return 0
    if loaded is None:
        return 0
    try:
        job = link.receive()
        data, unread = (None, None) if job.get("op") != "data" else _read_data(job.get("file"))
        if job.get("op") == "data":  # read while dpledger's process accounts the declaration
            data, job = data, link.receive()
    except EOFError:  # dpledger's process stopped before the run
        return 0
    if job.get("op") != "run":
        return 0
    if unread is not None:
        link.send(unread)
        return 0
    spec, params = loaded
    proxy = LedgerProxy(link, spec.name)
    try:
        reply = _run(proxy, spec, params, job.get("data", data), job["rng"])
    except BaseException as exc:  # the plugin's error, reported by name
        reply = _failure(exc)
    link.send({**reply, "queued": proxy.queued()})
    return 0


# ---------------------------------------------------------------------------------------------
# dpledger's side
# ---------------------------------------------------------------------------------------------
class RunWorker:
    """One worker process for one run (a context manager that always stops it)."""

    def __init__(self, method: str, load_limit: float, run_limit: float | None) -> None:
        self.method = method
        self.load_limit = load_limit
        self.run_limit = run_limit
        #: the plugin, as its declaration named it (set once known)
        self.who = "a third-party plugin"
        self._tmp = tempfile.TemporaryDirectory(prefix="dpledger-run-")
        self._log = Path(self._tmp.name) / "worker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._link: Link | None = None
        #: whether the worker was told to read the method's data from its file
        self._data_sent = False

    def __enter__(self) -> RunWorker:
        from dpledger.cleanroom.worker import _child_env

        down_r, down_w = _pipe()
        up_r, up_w = _pipe()
        regions = shared_regions()  # (this side writes, the worker writes)
        fds = (down_r, up_w, *(regions or ()))
        sys.stdout.flush()
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", BOOTSTRAP, *map(str, fds)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=fds,
                env=_child_env(),
                start_new_session=True,  # stopped with everything it starts
            )
        os.close(down_r)
        os.close(up_w)
        self._link = Link(up_r, down_w, (regions[1], regions[0]) if regions else None)
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if self._link is not None:
            self._link.close_outbox()  # a worker still waiting for work ends
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5 if exc[0] is None else 0)
        self._stop()
        if self._link is not None:
            self._link.close()
        self._tmp.cleanup()

    # -- the protocol ----------------------------------------------------------------------
    def load(
        self, request: DeclarationRequest, options: Mapping[str, Any], data_file: str | None
    ) -> tuple[DeclarationReply, dict[str, Any] | None]:
        """Have the worker load the method, make its declaration for ``request`` and its
        parameters (``options``: the plugin-loading options), and then read ``data_file``
        (the data the method runs on, if the run sends none); the declaration (for this
        request) and the parameters as the run record states them (None if the declaration
        was refused: its reply says why)."""
        deadline = time.monotonic() + self.load_limit
        self._expect("hello", self._receive(deadline, "start"))
        self._send({**options, "request": request.to_dict()})
        message = self._receive(deadline, "loading")
        if message.get("op") == "loaded":  # the plugin, named if its declare exits or hangs
            self.who = str(message.get("who"))[:200]
            message = self._receive(deadline, "declaration")
        ready = self._expect("ready", message)
        found = ready.get("declaration")
        if not isinstance(found, dict):
            raise self._broken("sent a declaration that is not a table")
        reply = attrs.evolve(reply_from_dict(found), request=request)
        params = ready.get("params")
        if reply.error is not None:
            return reply, None
        if not isinstance(params, dict):
            raise self._broken("sent parameters that are not a table")
        if data_file is not None:  # only once the declaration is made
            self.send_data(data_file)
        return reply, params

    def send_data(self, data_file: str) -> None:
        """Have the loaded worker read ``data_file`` (once its declaration is accounted)."""
        self._send({"op": "data", "file": data_file})
        self._data_sent = True

    def run(self, server: LedgerServer, data: Any, rng_state: Mapping[str, Any]) -> dict[str, Any]:
        """Run the method, serving its ledger requests; its outputs."""
        deadline = None if self.run_limit is None else time.monotonic() + self.run_limit
        job = {"op": "run", "rng": dict(rng_state)}
        self._send(job if data is None and self._data_sent else {**job, "data": data})
        while True:
            message = self._receive(deadline, "run")
            for queued in message.get("queued") or []:  # samples entered and left before it
                if isinstance(queued, dict) and queued.get("op") in DEFERRED:
                    server.answer(queued)
            if message.get("op") in ("call", "get"):
                answer = server.answer(message)
                if answer is not None:
                    self._send(answer)
                continue
            outputs = self._expect("done", message, server).get("outputs")
            unanswered = server.unanswered()
            if unanswered is not None:
                raise unanswered
            if not isinstance(outputs, dict):
                raise self._broken("sent outputs that are not a table")
            return outputs

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self._link is not None
        try:
            self._link.send(message)
        except (OSError, WireError) as exc:
            raise self._ended(f"could not be sent its work ({exc})") from None

    def _receive(self, deadline: float | None, stage: str) -> dict[str, Any]:
        assert self._link is not None
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if left is not None and not self._link.poll(left):
            limit = self.load_limit if stage != "run" else self.run_limit
            fix = f"raise {RUN_TIMEOUT_ENV}" if stage == "run" else "raise --plugins-timeout"
            raise self._error(f"did not finish its {stage} within {limit:g} s", fix)
        try:
            return self._link.receive()
        except EOFError:
            raise self._ended(f"ended during its {stage}") from None
        except (OSError, WireError) as exc:
            raise self._broken(f"sent a malformed message ({exc})") from None

    def _expect(
        self, op: str, message: Mapping[str, Any], server: LedgerServer | None = None
    ) -> Mapping[str, Any]:
        if message.get("op") == op:
            return message
        if message.get("op") != "failed":
            raise self._broken(f"sent {message.get('op')!r} where {op!r} was due")
        if message.get("stage") == "data" and op == "done":  # its data file could not be read
            raise _data_error(message)
        key = message.get("key")
        if server is not None and isinstance(key, int) and key in server.errors:
            raise server.errors[key]  # the ledger's own error, raised here as in dpledger
        if message.get("type") == "InvalidParameterError" and op == "ready":
            raise InvalidParameterError(
                str(message.get("field")), str(message.get("problem")), str(message.get("fix"))
            )
        text = f"{message.get('type')}: {message.get('message')}"
        fix = "" if ". Fix: " in text else "fix the method's data or parameters, or its plugin"
        raise self._error(f"failed with {text}", fix)

    # -- errors naming the method and its plugin ----------------------------------------------
    def _error(self, what: str, fix: str) -> PluginError:
        self._stop()
        where = f"the run of method {self.method!r} (third-party plugin {self.who}, own process)"
        tail = f". Fix: {fix}" if fix else ""
        return PluginError(f"{where} {what}{tail}")

    def _ended(self, what: str) -> PluginError:
        proc = self._proc
        try:
            code = proc.wait(timeout=5) if proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        last = _last_line(self._log)
        detail = f" ({last})" if last else ""
        fix = "block the plugin with --plugins-block NAME, or ask its author to fix it"
        return self._error(f"{what}: it exited with code {code}{detail}", fix)

    def _broken(self, what: str) -> PluginError:
        return self._error(what, "block the plugin with --plugins-block NAME")

    def _stop(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _data_error(message: Mapping[str, Any]) -> InvalidParameterError:
    """The data file's problem, as ``dpledger run`` names it when it reads the file itself."""
    if "field" in message:
        return InvalidParameterError(
            str(message["field"]), str(message.get("problem")), str(message.get("fix"))
        )
    return InvalidParameterError(
        "data",
        f"could not be read ({message.get('type')}: {message.get('message')})",
        "pass a .npy, .npz, .csv or .json file",
    )


#: bytes a pipe of the channel holds (where the system allows): an array crosses in few writes
PIPE_SIZE = 1 << 20


def _pipe() -> tuple[int, int]:
    """A pipe whose buffer is as large as the system allows, up to :data:`PIPE_SIZE`."""
    read, write = os.pipe()
    grow = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if grow is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(write, grow, PIPE_SIZE)
    return read, write


def _last_line(path: Path) -> str:
    """The last non-empty line the worker wrote (e.g. its exception)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""

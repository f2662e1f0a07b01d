"""Starting the clean room from an ordinary process, and answering what it asks for.

:func:`run_in_clean_room` builds the clean room's path (:mod:`dpledger.cleanroom.tree`),
starts ``python -I -S`` on :func:`dpledger.cleanroom.room.main` with the request on stdin, and
lets it write to this process's standard output and error file descriptors directly. When the
room needs third-party declarations it says so on a pipe and waits; each is computed in a
worker process (:func:`~dpledger.cleanroom.worker.declare_in_worker`) and the room's command
runs once more, in the same interpreter, on a request that carries them (the room checks them
as any: an answer is evidence it weighs, never a number it takes).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dpledger.cleanroom.declarations import DeclarationRequest
from dpledger.cleanroom.tree import CleanRoomError, clean_path
from dpledger.cleanroom.worker import declare_in_worker

#: the program the isolated interpreter runs (the path directory is its only argument)
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from dpledger.cleanroom.room import main; raise SystemExit(main())"
)


#: gives the request that answers the room's question, or None
NextRequest = Callable[[], "dict[str, Any] | None"]


def clean_room_command(tree: Path) -> list[str]:
    """The command line of the clean room: no site, no user site, no environment paths."""
    return [sys.executable, "-I", "-S", "-c", BOOTSTRAP, str(tree)]


def _fd_or_none(stream: Any) -> int | None:
    """The stream's file descriptor, flushed; None when it has none (then the room's goes
    to this process's own descriptor)."""
    try:
        stream.flush()
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _launch(tree: Path, request: Mapping[str, Any], next_request: NextRequest) -> int:
    """Run the room on ``request`` and answer its questions in the same interpreter: each time
    it asks for declarations, ``next_request()`` gives the request that carries them (None: no
    answer, the room then exits asking). Its exit code."""
    asks_read, asks_write = os.pipe()
    answers_read, answers_write = os.pipe()
    fds = (asks_write, answers_read)
    try:
        room = subprocess.Popen(
            clean_room_command(tree),
            stdin=subprocess.PIPE,
            text=True,
            stdout=_fd_or_none(sys.stdout),
            stderr=_fd_or_none(sys.stderr),
            pass_fds=fds,
        )
    finally:
        for fd in fds:
            os.close(fd)
    with (
        os.fdopen(asks_read, encoding="utf-8") as asks,
        os.fdopen(answers_write, "w", encoding="utf-8") as answers,
    ):
        try:
            _send(room, {**request, "conversation_fds": list(fds)})
            for _question in asks:
                following = next_request()
                if following is None:
                    break
                try:
                    answers.write(json.dumps(following) + "\n")
                    answers.flush()
                except BrokenPipeError:  # the room has gone: its exit code says why
                    break
        except BaseException:
            room.kill()
            room.wait()
            raise
    return room.wait()


def _send(room: subprocess.Popen[str], request: Mapping[str, Any]) -> None:
    """Write the first request on the room's standard input and close it."""
    assert room.stdin is not None
    # a room that refuses before it reads (not isolated) has said why: its exit code stands
    with contextlib.suppress(BrokenPipeError), room.stdin as stdin:
        stdin.write(json.dumps(request))


def run_in_clean_room(
    command: str,
    options: Mapping[str, Any],
    *,
    allow: str | None = None,
    block: str | None = None,
    timeout: str | None = None,
    extra: tuple[str, ...] = (),
    given: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Run ``command`` with ``options`` in the clean room; its exit code. ``allow``, ``block``
    and ``timeout`` are the plugin-loading options of the workers that declare third-party
    methods. ``extra`` names top-level packages the command needs beyond the accounting ones
    (the report's drawing libraries), linked into the room's path where installed;
    ``given`` are declarations workers have already made (the room checks them as any)."""
    from dpledger.cleanroom.resolver import names

    replies: list[dict[str, Any]] = [dict(r) for r in given]
    answered: list[dict[str, Any]] = [dict(r["request"]) for r in replies]
    sections: dict[str, Any] | None = None
    with clean_path(extra) as tree, tempfile.TemporaryDirectory(prefix="dpledger-room-") as tmp:
        needs_file = Path(tmp) / "needs.json"

        def request() -> dict[str, Any]:
            return {
                "command": command,
                "options": dict(options),
                "declarations": replies,
                "needs_file": str(needs_file),
                "extra_packages": list(extra),
                **({} if sections is None else {"sections": sections}),
            }

        def answer() -> dict[str, Any]:
            nonlocal sections
            needs = json.loads(needs_file.read_text(encoding="utf-8"))
            if not needs or any(need in answered for need in needs):
                raise CleanRoomError(
                    "the clean room asked again for declarations it was given. Fix: rerun "
                    "with DPLEDGER_TRACEBACK=1 and report the input"
                )
            answered.extend(needs)
            plugins = (names(allow), names(block), timeout)
            replies.extend(_answer([n for n in needs if "sections" not in n], *plugins))
            for need in needs:
                if "sections" in need:
                    sections = _sections(need["sections"], *plugins)
            return request()

        return _launch(tree, request(), answer)


def _sections(
    need: Mapping[str, Any], allow: list[str] | None, block: list[str] | None, timeout: Any
) -> dict[str, Any]:
    from dpledger.cleanroom.sections_worker import sections_in_worker

    return sections_in_worker(
        need["methods"], need["context"], allow=allow, block=block, timeout=timeout
    )


def run_for(
    args: Any, command: str, options: Mapping[str, Any], *, extra: tuple[str, ...] = ()
) -> int:
    """:func:`run_in_clean_room` with the plugin-loading options of a command's ``args``
    (``--plugins-allow``, ``--plugins-block``, ``--plugins-timeout``), which also reach the
    room."""
    allow, block = args.plugins_allow, args.plugins_block
    return run_in_clean_room(
        command,
        {**options, "plugins_allow": allow, "plugins_block": block},
        allow=allow,
        block=block,
        timeout=getattr(args, "plugins_timeout", None),
        extra=extra,
    )


def _answer(
    needs: Sequence[Mapping[str, Any]],
    allow: list[str] | None,
    block: list[str] | None,
    timeout: str | None,
) -> list[dict[str, Any]]:
    out = []
    for need in needs:
        request = DeclarationRequest.from_dict(need)
        reply = declare_in_worker(request, allow=allow, block=block, timeout=timeout)
        out.append(reply.to_dict())
    return out

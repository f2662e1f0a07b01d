"""The Dask engine's spill directories: one per bounding, named for the process and host that
made it, and removed when the bounding ends.

A run killed while bounding (SIGKILL, a power cut) cannot remove its directory, and its spill
files hold rows of the private table. So each new directory first sweeps the directories left
by processes of the same host that no longer exist; a directory of another host (a shared
temporary directory) or of a live process is never touched, and one holding anything but spill
files is left as it is.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

__all__ = ["PREFIX", "make_spill_dir", "remove_spill_dir", "sweep_orphans"]

#: every spill directory's name starts with this, then ``<pid>@<host>-``
PREFIX = "dpledger-buckets-"


def _host() -> str:
    """This host's name, safe in a file name (no separator, no ``@``)."""
    name = socket.gethostname() or "host"
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)


def make_spill_dir(parent: str | None) -> str:
    """A new spill directory under ``parent`` (the system's temporary directory if None),
    after sweeping the orphans there."""
    base = parent or tempfile.gettempdir()
    sweep_orphans(base)
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}@{_host()}-", dir=base)


def remove_spill_dir(where: str | Path) -> None:
    """Remove a spill directory and its spill files (OSError if it holds anything else)."""
    for path in Path(where).glob("spill-*.bin"):
        path.unlink(missing_ok=True)
    Path(where).rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a live process of another user
        return True
    return True


def sweep_orphans(parent: str | Path) -> list[Path]:
    """Remove the spill directories under ``parent`` made on this host by processes that no
    longer run; the directories removed."""
    removed: list[Path] = []
    marker = f"@{_host()}-"
    for path in Path(parent).glob(f"{PREFIX}*{marker}*"):
        pid_text = path.name[len(PREFIX) :].split("@", 1)[0]
        if not pid_text.isdigit() or not path.is_dir() or _alive(int(pid_text)):
            continue
        try:
            remove_spill_dir(path)
        except OSError:  # not only spill files, or removed meanwhile: leave it
            continue
        removed.append(path)
    return removed

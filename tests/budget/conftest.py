"""Budget-store fixtures: a SQLite store per test and one real PostgreSQL server per session.

The server is Debian's ``postgresql`` (``initdb`` and ``pg_ctl`` on the PATH or under
``/usr/lib/postgresql/*/bin``), started in a temporary directory on a free port with a Unix
socket there. PostgreSQL refuses to run as root, so as root it runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[tuple[str, int]]:
    """(socket directory, port) of a fresh PostgreSQL server, stopped at the end."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    pytest.importorskip("psycopg")
    root = Path(tempfile.mkdtemp(prefix="dpledger-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        root.chmod(0o755)
    port = _free_port()
    subprocess.run(
        _as_server_user([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses='' -c fsync=off"
    subprocess.run(
        _as_server_user(
            [pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield str(root), port
    finally:
        subprocess.run(
            _as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_store(postgres_server: tuple[str, int]) -> str:
    """The URL of a new, empty database on the session's server."""
    import psycopg

    host, port = postgres_server
    name = "budget_" + uuid.uuid4().hex[:12]
    base = f"postgresql://postgres@/postgres?host={host}&port={port}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"postgresql://postgres@/{name}?host={host}&port={port}"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> str:
    """The path of a new SQLite store (tables created, nothing declared)."""
    from dpledger.budget.store import init

    path = str(tmp_path / "budget.db")
    init(path)
    return path

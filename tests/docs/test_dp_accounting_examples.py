"""The worked examples of docs/dp-accounting.md run as written and print what the page shows.

The page's code blocks run in order in one directory: a ``python`` block is executed, a
``toml`` block whose first line is ``# NAME.toml`` is written to that file, and a ``bash``
block's ``dpledger`` command runs (its ``> FILE`` redirect honoured). A ``text`` or ``json``
block right after a block that ran is what it printed (or wrote to its redirect).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from dpledger.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "dp-accounting.md"
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)


def _run_command(body: str, capfd: pytest.CaptureFixture[str]) -> str:
    """Run the block's one ``dpledger`` command; its output (stdout, or the redirect's file)."""
    (line,) = [x for x in body.splitlines() if x.strip()]
    command, _, target = line.partition(" > ")
    argv = shlex.split(command)
    assert argv[0] == "dpledger"
    capfd.readouterr()
    assert main(argv[1:]) == 0, capfd.readouterr().err
    out = capfd.readouterr().out
    if target:
        Path(target.strip()).write_text(out)
    return out


def _run_python(body: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(body, str(DOC), "exec"), {"__name__": "__docs__"})
    return out.getvalue()


def _same(shown_lang: str, shown: str, printed: str) -> None:
    if shown_lang == "json":
        assert json.loads(printed) == json.loads(shown)
    else:
        assert printed.rstrip("\n") == shown.rstrip("\n")


def test_the_page_runs_and_prints_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("dp_accounting")
    monkeypatch.chdir(tmp_path)
    printed: str | None = None
    ran = checked = 0
    for lang, body in BLOCKS:
        if lang in ("text", "json") and printed is not None:
            _same(lang, body, printed)
            checked += 1
        printed = None
        if lang == "python":
            printed = _run_python(body)
        elif lang == "bash":
            printed = _run_command(body, capfd)
        elif lang == "toml":
            name = re.fullmatch(r"# (\S+\.toml)", body.splitlines()[0])
            assert name, "a toml block names its file on its first line"
            Path(name.group(1)).write_text(body)
        ran += lang in ("python", "bash")
    assert (ran, checked) == (5, 4)

"""What the experiment commands share: one-line refusals of bad input, and the regeneration
commands' sections (lists of commands run from the repository root into a new directory)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]


class OneLineParser(argparse.ArgumentParser):
    """Bad input ends the command with one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def section_parser(description: str, sections: Sequence[str]) -> OneLineParser:
    """``--out DIR`` (new or empty), ``--only SECTION ...`` and ``--list``."""
    ap = OneLineParser(description=description)
    ap.add_argument("--out", type=Path, default=None, help="a new or empty directory")
    ap.add_argument("--only", nargs="+", choices=list(sections), default=list(sections))
    ap.add_argument("--list", action="store_true", help="print the commands without running")
    return ap


def run_sections(
    argv: Sequence[str] | None,
    ap: OneLineParser,
    commands: Callable[[str, Path, argparse.Namespace], list[list[str]]],
) -> int:
    """Parse ``argv``; list the sections' commands, or run them in order into ``--out``: each
    command's output is printed and kept in ``DIR/SECTION.txt``, its errors go to stderr."""
    args = ap.parse_args(argv)
    if args.list:
        for section in args.only:
            for cmd in commands(section, args.out or Path("DIR"), args):
                print(section, "python", *cmd)
        return 0
    if args.out is None:
        ap.error("--out: give a new directory for the runs, e.g. --out regenerated")
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"--out: {args.out} is not empty; give a new or empty directory")
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for section in args.only:
        printed = []
        for cmd in commands(section, args.out, args):
            print(f"# {section}: python {' '.join(cmd)}", flush=True)
            done = subprocess.run(
                [sys.executable, *cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
            )
            print(done.stdout, flush=True)
            printed.append(done.stdout)
            if done.returncode != 0:
                sys.stderr.write(f"{ap.prog}: {section}: {cmd[0]} exited with {done.returncode}\n")
                return 1
        (args.out / f"{section}.txt").write_text("\n".join(printed))
    return 0

"""Regenerate the sliced-Wasserstein flows results (paper B) from scratch: every command of
``docs/methods/swflow.md``, in order, each writing its result file into ``DIR``.

Usage::

    python experiments/swflow/regenerate.py --out DIR [--only SECTION ...]
    python experiments/swflow/regenerate.py --list

Sections: ``toy`` (``toy.md``, three readings over 3 seeds, about 15 CPU-minutes),
``digits`` (``digits.md``, three methods at five ε over 3 seeds, about 7 CPU-minutes) and
``paper_claims`` (``paper_claims.md``, seconds). Compare ``DIR`` with
``experiments/swflow/results``; every command runs with one thread.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = "experiments/swflow"
SECTIONS = ("toy", "digits", "paper_claims")
#: the arguments each section's script was run with for the stored results
ARGUMENTS = {
    "toy": ["--seeds", "3", "--readings", "absolute,sensitivity,fixed-release"],
    "digits": [],
    "paper_claims": [],
}


def command(section: str, out: Path) -> list[str]:
    """The argument list (script first) of a section."""
    if section not in ARGUMENTS:
        raise ValueError(f"unknown section {section!r}")
    return [f"{HERE}/{section}.py", *ARGUMENTS[section], "--out", str(out)]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="a new or empty directory")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--list", action="store_true", help="print the commands without running")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        for section in args.only:
            print(section, "python", *command(section, args.out or Path("DIR")))
        return 0
    if args.out is None:
        print("--out: give a directory for the result files (e.g. --out /path/to/new/dir)")
        return 2
    if args.out.exists() and any(args.out.iterdir()):
        print(f"--out: {args.out} is not empty; give a new or empty directory")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for section in args.only:
        argv_ = command(section, args.out)
        print(f"# {section}: python {' '.join(argv_)}", flush=True)
        subprocess.run([sys.executable, *argv_], cwd=ROOT, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the trajectories method page (paper A) from scratch: every command the page and
its result files name, in order, writing into ``DIR``, each printing its tables.

Usage::

    python experiments/trajectories/regenerate.py --out DIR [--data PATH] [--only SECTION ...]
    python experiments/trajectories/regenerate.py --list

Sections (``docs/methods/trajectories.md`` unless said):

* ``table1``: Table 1 with its non-private baseline and Fig. 1's paths (seed 0, six digits);
* ``seeds``: each digit over seeds 0, 1, 2, private and non-private;
* ``replace_one``: the privacy columns alone, add/remove and replace-one (no flow is run);
* ``table2``: Table 2 and Fig. 1 re-accounted;
* ``w2_floor``: the W2 floor at the paper's step size (``W2_FLOOR.md``);
* ``resolution``: the time-resolution control of digit 6 (``RESOLUTION_CONTROL.md``);
* ``fig3``: Fig. 3, seeds 0, 1, 2 (reduced annealing and the paper's full one), then its table.

The data path defaults as in ``table1.py`` (``../shared/data/mnist_strokes/...`` beside the
repository root, or ``$DPLEDGER_MNIST_STROKES``). Every command runs with one thread.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = "experiments/trajectories"
SEEDS = ("0", "1", "2")
DIGITS = ("1", "2", "3", "6", "7", "9")
SECTIONS = ("table1", "seeds", "replace_one", "table2", "w2_floor", "resolution", "fig3")


def commands(section: str, out: Path, data: Path | None) -> list[list[str]]:
    """The argument lists (script first) a section runs, in order."""
    d = ["--data", str(data)] if data is not None else []
    table1 = [f"{HERE}/table1.py", *d]
    fig3 = f"{HERE}/fig3.py"
    if section == "table1":
        return [[*table1, "--non-private", "--figure-dir", str(out / "fig1")]]
    if section == "seeds":
        return [[*table1, "--digits", g, "--seeds", *SEEDS, "--non-private"] for g in DIGITS]
    if section == "replace_one":
        return [[*table1, "--privacy-only"]]
    if section == "table2":
        return [[f"{HERE}/table2.py"]]
    if section == "w2_floor":
        return [[f"{HERE}/w2_floor.py", *d, "--clouds", "--digit", "2", "--sweep"]]
    if section == "resolution":
        return [[f"{HERE}/resolution_control.py", *d]]
    if section == "fig3":
        reduced = [[fig3, "--seeds", s, "--out", str(out / f"fig3_seed{s}.json")] for s in SEEDS]
        annealed = [fig3, "--kinds", "annealed", "--scale", "1"]
        full = [
            [*annealed, "--seeds", s, "--out", str(out / f"fig3_full_seed{s}.json")] for s in SEEDS
        ]
        files = [str(out / f"fig3_seed{s}.json") for s in SEEDS]
        files += [str(out / f"fig3_full_seed{s}.json") for s in SEEDS]
        return [*reduced, *full, [fig3, "--summarize", *files]]
    raise ValueError(f"unknown section {section!r}")


def run_section(section: str, out: Path, data: Path | None) -> str:
    """Run a section's commands from the repository root; their output, also in DIR."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    printed = []
    for argv in commands(section, out, data):
        print(f"# {section}: {' '.join(argv)}", flush=True)
        done = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        print(done.stdout, flush=True)
        printed.append(done.stdout)
    text = "\n".join(printed)
    (out / f"{section}.txt").write_text(text)
    return text


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="a new or empty directory")
    ap.add_argument("--data", type=Path, default=None, help="mnist_strokes_subset.npz")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--list", action="store_true", help="print the commands without running")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = args.out if args.out is not None else Path("DIR")
    if args.list:
        for section in args.only:
            for cmd in commands(section, out, args.data):
                print(section, "python", *cmd)
        return 0
    if args.out is None:
        print("--out: give a directory for the runs (e.g. --out /path/to/new/dir)")
        return 2
    if args.out.exists() and any(args.out.iterdir()):
        print(f"--out: {args.out} is not empty; give a new or empty directory")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for section in args.only:
        run_section(section, args.out, args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

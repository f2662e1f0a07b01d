"""Regenerate the trajectories method page (paper A) from scratch: every command the page and
its result files name, in order, writing into ``DIR``, each printing its tables.

Usage::

    python experiments/trajectories/regenerate.py --out DIR [--data PATH] [--only SECTION ...]
    python experiments/trajectories/regenerate.py --list

Sections (``docs/methods/trajectories.md`` unless said):

* ``table1``: Table 1 with its non-private baseline, the paper's eq. (10) noise convention
  (D = τ/2) beside the default D = τ, and Fig. 1's paths (seed 0, six digits);
* ``seeds``: each digit over seeds 0, 1, 2, private and non-private;
* ``replace_one``: the privacy columns alone, add/remove and replace-one (no flow is run);
* ``table2``: Table 2 and Fig. 1 re-accounted;
* ``w2_floor``: the W2 floor at the paper's step size (``W2_FLOOR.md``);
* ``resolution``: the time-resolution control of digit 6, its 10-seed check and the binning
  variant (``RESOLUTION_CONTROL.md``);
* ``fig3``: Fig. 3, seeds 0, 1, 2 (reduced annealing and the paper's full one), then its table.

The data path defaults as in ``table1.py`` (``../shared/data/mnist_strokes/...`` beside the
repository root, or ``$DPLEDGER_MNIST_STROKES``). Every command runs with one thread.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared module is beside the folders
    sys.path.insert(0, str(ROOT))

from experiments.sections import run_sections, section_parser  # noqa: E402

HERE = "experiments/trajectories"
SEEDS = ("0", "1", "2")
DIGITS = ("1", "2", "3", "6", "7", "9")
#: the time-resolution check at 10 seeds (the binned variant has its own commands)
VARIANTS_10_SEEDS = ("all", "single-stroke", "random-subset")
SECTIONS = ("table1", "seeds", "replace_one", "table2", "w2_floor", "resolution", "fig3")


def commands(section: str, out: Path, args: argparse.Namespace) -> list[list[str]]:
    """The argument lists (script first) a section runs, in order."""
    d = ["--data", str(args.data)] if args.data is not None else []
    table1 = [f"{HERE}/table1.py", *d]
    fig3 = f"{HERE}/fig3.py"
    if section == "table1":
        return [[*table1, "--non-private", "--eq10", "--figure-dir", str(out / "fig1")]]
    if section == "seeds":
        return [[*table1, "--digits", g, "--seeds", *SEEDS, "--non-private"] for g in DIGITS]
    if section == "replace_one":
        return [[*table1, "--privacy-only"]]
    if section == "table2":
        return [[f"{HERE}/table2.py"]]
    if section == "w2_floor":
        return [[f"{HERE}/w2_floor.py", *d, "--clouds", "--digit", "2", "--sweep"]]
    if section == "resolution":
        control = [f"{HERE}/resolution_control.py", *d]
        return [
            control,
            [*control, "--seeds", *map(str, range(10)), "--variants", *VARIANTS_10_SEEDS],
            [*control, "--digits", *DIGITS, "--T", "10", "--variants", "all", "binned"],
            [*control, "--T", "10", "--variants", "binned", "--bin-seed", "7"],
        ]
    if section == "fig3":
        reduced = [[fig3, "--seeds", s, "--out", str(out / f"fig3_seed{s}.json")] for s in SEEDS]
        annealed = [fig3, "--kinds", "annealed", "--scale", "1"]
        full_files = [str(out / f"fig3_full_seed{s}.json") for s in SEEDS]
        full = [
            [*annealed, "--seeds", s, "--out", f] for s, f in zip(SEEDS, full_files, strict=True)
        ]
        files = [str(out / f"fig3_seed{s}.json") for s in SEEDS] + full_files
        return [*reduced, *full, [fig3, "--summarize", *files]]
    raise ValueError(f"unknown section {section!r}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = section_parser((__doc__ or "").splitlines()[0], SECTIONS)
    ap.add_argument("--data", type=Path, default=None, help="mnist_strokes_subset.npz")
    return run_sections(argv, ap, commands)


if __name__ == "__main__":
    sys.exit(main())

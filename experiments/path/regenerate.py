"""Regenerate the PATH results page (paper C) from scratch: every stored run, then its tables.

Usage::

    python -m experiments.path.regenerate --out DIR [--cell FILE[:METHOD[:KEY]] ...]

Without ``--cell`` every stored cell of the page is run again from scratch, with the settings
its JSON file records (``args``), each cell writing a fresh JSON file into ``DIR``:

* ``table2_*.json``: one ``table2`` process per stored file, with the file's arguments, the
  methods and epsilons of its rows (``table2_baselines.json`` records a run that listed more
  methods than it finished), and the pre-trained model ``DIR/PRE`` made once by the page's
  pre-training (``table2`` defaults: 1000 public tables, seed 100003, 1200 steps, model seed 0).
  ``table2_path_public_check.json`` is a second run of the cell of ``table2_path_public.json``
  (the check of a re-made PRE) and is not run again.
* ``sweep_*.json``: one ``sweep`` run per stored (method, cell, seed) row, with the file's
  arguments; the pre-trained models of the grid are made once, in ``DIR/sweep_models``.

Then it prints what the page shows, as ``table2 --summarize`` and ``sweep --summarize`` print
it for the regenerated files: the PATH rows per seed (``--only path path_nonprivate``), the rows
of AIM, Direct, their non-private versions and REAL per seed, the public-only control, the
side-by-side table (as ``table2 --side-by-side`` prints it for the regenerated files) and the
sweep's table. The seed-0 rows are the main table's numbers. ``--cell`` re-runs only the named
cells (a stored file name in ``experiments/path``, optionally a method and an epsilon for
``table2`` files or a grid cell such as ``small-250`` or ``-`` for ``sweep`` files) and prints
the tables of those; ``--list`` prints the cells without running them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import reproducible, sweep, table2

FOLDER = Path(__file__).parent
#: a repeat of table2_path_public.json's cell (the check of a re-made PRE), not run again
REPEATS = ("table2_path_public_check.json",)
#: the summaries of the page: (title, file patterns, --only methods)
TABLE2_SUMMARIES: tuple[tuple[str, tuple[str, ...], tuple[str, ...] | None], ...] = (
    (
        "PATH per seed (section on the paper's split)",
        ("table2_path_eps*.json", "table2_path_nonprivate_*.json"),
        ("path", "path_nonprivate"),
    ),
    (
        "AIM, Direct, their non-private versions and REAL per seed",
        (
            "table2_aim*.json",
            "table2_baselines*.json",
            "table2_direct_across*.json",
            "table2_nonprivate_baselines_s*.json",
        ),
        None,
    ),
    ("PATH, public pre-training only", ("table2_path_public.json",), ("path_public",)),
)
#: the runs of the page's side-by-side table (as its command lists them)
SIDE_BY_SIDE_TITLE = "Paper, ours and without privacy, side by side"
SIDE_BY_SIDE_FILES = (
    "table2_aim*.json",
    "table2_baselines*.json",
    "table2_direct_across*.json",
    "table2_nonprivate_baselines_s*.json",
    "table2_path_eps2*.json",
    "table2_path_eps10_share0.1_s*.json",
    "table2_path_nonprivate_s*.json",
)


class CellError(ValueError):
    """A ``--cell`` that names no stored cell."""


def _key_of(row: dict[str, Any], sweep_file: bool) -> str:
    if sweep_file:
        return str(row["cell"])
    eps = float(row["epsilon"])
    return "inf" if math.isinf(eps) else f"{eps:g}"


def stored_cells(folder: Path = FOLDER) -> list[tuple[str, str, str, int]]:
    """Every stored cell of the page: (file name, method, key, seed), key the epsilon of a
    ``table2`` row or the grid cell of a ``sweep`` row; each sweep cell once (as ``sweep
    --summarize`` reads them, first file first)."""
    cells: list[tuple[str, str, str, int]] = []
    seen: set[tuple[str, str, int]] = set()
    for path in sorted(folder.glob("table2_*.json")) + sorted(folder.glob("sweep_*.json")):
        if path.name in REPEATS:
            continue
        stored = json.loads(path.read_text())
        is_sweep = path.name.startswith("sweep_")
        for r in stored["rows"]:
            seed = int(r["seed"]) if is_sweep else int(stored["args"]["seed"])
            cell = (path.name, str(r["method"]), _key_of(r, is_sweep), seed)
            if is_sweep:
                if cell[1:] in seen:
                    continue
                seen.add(cell[1:])
            cells.append(cell)
    return cells


def select(cells: list[tuple[str, str, str, int]], specs: Sequence[str] | None) -> list[Any]:
    """The cells named by ``specs`` (``FILE[:METHOD[:KEY]]``), all without specs."""
    if not specs:
        return cells
    chosen = []
    for spec in specs:
        parts = spec.split(":")
        if len(parts) > 3 or not parts[0]:
            raise CellError(f"--cell {spec!r}: expected FILE[:METHOD[:KEY]]")
        hits = [c for c in cells if all(p == str(v) for p, v in zip(parts, c, strict=False))]
        if parts[2:] and not hits:  # an epsilon may be written as 2, 2.0 or 2e0
            try:
                key = f"{float(parts[2]):g}"
            except ValueError:
                key = parts[2]
            hits = [c for c in cells if c[:2] == tuple(parts[:2]) and c[2] == key]
        if not hits:
            raise CellError(f"--cell {spec!r} names no stored cell; --list prints them")
        chosen.extend(c for c in hits if c not in chosen)
    return chosen


def _table2_args(stored: dict[str, Any], methods: list[str], epsilons: list[float]) -> Any:
    """``table2`` arguments of a stored run: the defaults, then what the file records."""
    args = table2.parser().parse_args([])
    known = vars(args)
    for k, v in stored.items():
        if k in known and k not in (
            "summarize",
            "only",
            "side_by_side",
            "pretrain_only",
            "out",
            "model_dir",
        ):
            setattr(args, k, v)
    args.methods = methods
    if epsilons:
        args.epsilons = epsilons
    return args


def run_table2_file(name: str, cells: list[Any], out: Path, threads: int) -> Path:
    stored = json.loads((FOLDER / name).read_text())["args"]
    methods = list(dict.fromkeys(c[1] for c in cells))
    epsilons = sorted({float(c[2]) for c in cells if c[2] not in ("inf", "0")})
    args = _table2_args(stored, methods, epsilons)
    args.threads = threads
    args.out = str(out / name)
    if {"path", "path_nonprivate", "path_public"} & set(methods):
        pre = out / "PRE"
        if not (pre / "config.json").exists():
            defaults = table2.parser().parse_args([])
            defaults.threads = threads
            print(json.dumps({"pretrain": table2.pretrain(defaults, pre)}), flush=True)
        args.model_dir = str(pre)
    print(f"# regenerating {name}: {' '.join(methods)} (epsilons {epsilons})", flush=True)
    table2.run(args)
    return out / name


def run_sweep_cell(name: str, cell: Any, out: Path) -> Path:
    stored = json.loads((FOLDER / name).read_text())["args"]
    a = sweep.parser().parse_args([])
    known = vars(a)
    for k, v in stored.items():
        if k in known and k not in ("summarize", "pretrain_only", "out", "model_root"):
            setattr(a, k, v)
    _, method, key, seed = cell
    if key != "-":
        size, steps = key.rsplit("-", 1)
        a.sizes, a.pretrain_steps = [size], [int(steps)]
    else:  # real and AIM: no model (the first stored cell's model is made, as the run did)
        a.sizes, a.pretrain_steps = a.sizes[:1], a.pretrain_steps[:1]
    a.methods, a.seeds = [method], [seed]
    a.model_root = str(out / "sweep_models")
    target = out / f"{Path(name).stem}__{method}_{key}_s{seed}.json"
    a.out = str(target)
    print(f"# regenerating {name}: {method} {key} seed {seed}", flush=True)
    sweep.run(a)
    return target


def print_tables(files: list[Path]) -> None:
    """The page's tables for ``files``, as the summarize commands print them."""
    names = [f for f in files if f.name.startswith("table2_")]
    for title, patterns, only in TABLE2_SUMMARIES:
        group = [str(f) for f in names if any(f.match(p) for p in patterns)]
        if group:
            print(f"## {title}", flush=True)
            table2.summarize(*sorted(group), only=list(only) if only else None)
    side = [str(f) for f in names if any(f.match(p) for p in SIDE_BY_SIDE_FILES)]
    if side:
        print(f"## {SIDE_BY_SIDE_TITLE}", flush=True)
        table2.side_by_side(*sorted(side))
    sweeps = sorted(str(f) for f in files if f.name.startswith("sweep_"))
    if sweeps:
        print("## sweep", flush=True)
        sweep.summarize(*sweeps)


def parser() -> argparse.ArgumentParser:
    ap = table2.OneLineParser(description="Regenerate the PATH results page from scratch.")
    ap.add_argument("--out", type=Path, help="directory for the regenerated JSON files")
    ap.add_argument(
        "--cell",
        nargs="+",
        default=None,
        help="re-run only these stored cells: FILE[:METHOD[:KEY]] (KEY: epsilon or grid cell)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--list", action="store_true", help="print the stored cells and stop")
    return ap


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser()
    a = ap.parse_args(argv)
    try:
        cells = select(stored_cells(), a.cell)
    except CellError as e:
        ap.error(str(e))
    if a.list:
        for c in cells:
            print(" ".join(map(str, c)))
        return
    if a.out is None:
        ap.error("--out DIR is required (the regenerated JSON files go there)")
    if a.threads < 1:
        ap.error("--threads must be >= 1")
    a.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in dict.fromkeys(c[0] for c in cells):
        mine = [c for c in cells if c[0] == name]
        if name.startswith("table2_"):
            written.append(run_table2_file(name, mine, a.out, a.threads))
        else:
            written.extend(run_sweep_cell(name, c, a.out) for c in mine)
    print("# regenerated tables", flush=True)
    print_tables(written)


if __name__ == "__main__":
    reproducible.fix_hash_seed()
    main(sys.argv[1:])

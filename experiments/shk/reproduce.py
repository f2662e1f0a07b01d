"""Re-run the SHK stability paper's experiments and print reproduced vs reported numbers.

Usage: ``python experiments/shk/reproduce.py [--cells 192] [--markdown]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from dpledger.plugins.shk import paper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cells", type=int, default=paper.N_CELLS, help="grid cells (default 192)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    n = args.cells
    runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("table1", lambda: paper.pointwise_table("table1", n_cells=n)),
        ("table2", lambda: paper.pointwise_table("table2", n_cells=n)),
        ("table3", lambda: paper.renyi_table(n_cells=n)),
        ("table4", lambda: paper.c_tradeoff(n_cells=n)),
        ("exp3", lambda: paper.experiment3(n_cells=n)),
        ("exp4", lambda: paper.experiment4(n_cells=n)),
    ]
    if args.markdown:
        print("| experiment | quantity | paper | reproduced | rel. diff |")
        print("|---|---|---|---|---|")
    for name, run in runs:
        t0 = time.perf_counter()
        out = run()
        if not args.markdown:
            print(f"== {name} ({time.perf_counter() - t0:.1f} s)")
        for key, theirs in paper.PAPER[name].items():
            ours = float(out[key])
            rel = (ours - theirs) / theirs
            if args.markdown:
                print(f"| {name} | {key} | {theirs:.6g} | {ours:.6g} | {rel:+.2%} |")
            else:
                print(f"  {key:14s} paper {theirs:<12.6g} ours {ours:<12.6g} ({rel:+.2%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

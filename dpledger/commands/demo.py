"""``dpledger demo [--out DIR] [--quiet]``: account, run the private trajectory method, report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dpledger.commands._shared import one_line_errors

DEFAULT_OUT = Path("dpledger-demo")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="end-to-end demo: account a pipeline, run private trajectories, write a report",
        description="Generate multimodal trajectory data, account the declared pipeline, run "
        "the registered private trajectory method (plugin 'trajectories') under a verified "
        "runtime ledger, write synthetic trajectories, figures and a privacy report (md, html, "
        "json).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output directory, new or empty (default: {DEFAULT_OUT}, or "
        f"{DEFAULT_OUT}-2, -3, ... when it is already used)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars or messages")
    parser.add_argument("--tiny", action="store_true", help="a very small run (seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed of data and noise")
    parser.set_defaults(func=run)
    one_line_errors(parser)


def run(args: argparse.Namespace) -> int:
    """The demo, run whole in the clean room (see :mod:`dpledger.cleanroom.demo_room`)."""
    from dpledger.cleanroom.demo_room import DEMO_EXTRAS
    from dpledger.cleanroom.launch import run_in_clean_room
    from dpledger.cleanroom.tree import extras_closure

    out = args.out if args.out is not None else fresh_directory(Path(DEFAULT_OUT))
    options = {"out": str(out), "quiet": args.quiet, "tiny": args.tiny, "seed": args.seed}
    return run_in_clean_room("demo", options, extra=extras_closure(DEMO_EXTRAS))


def run_here(args: argparse.Namespace, confirm: Any = None) -> int:
    """The demo in this process; ``confirm(out, quiet)`` confirms the written run (by default
    in a clean room)."""
    import attrs

    from dpledger.demo import TINY, DemoConfig, run_demo

    config = attrs.evolve(TINY if args.tiny else DemoConfig(), seed=args.seed)
    result = run_demo(args.out, config, quiet=args.quiet, confirm=confirm)
    if not args.quiet:
        print(f"wrote {len(result.files)} files to {result.out}:")
        for path in result.files:
            print(f"  {path}")
        print(f"open {result.out / 'report.html'} for the privacy report")
    return 0


def fresh_directory(base: Path) -> Path:
    """``base`` if it and its private directory (``base.private``) are new or empty, else the
    first such ``base-2``, ``base-3``, ... (earlier output is never overwritten)."""
    from dpledger.runtime.run_record import private_dir

    candidate, n = base, 1
    while _used(candidate) or _used(private_dir(candidate)):
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _used(path: Path) -> bool:
    return path.exists() and (not path.is_dir() or any(path.iterdir()))

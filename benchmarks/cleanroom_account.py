"""What the clean room adds to ``dpledger account``: side by side in one run.

Run:  python benchmarks/cleanroom_account.py [--repeats N] [FILE]

Times, alternating, N runs of each (fresh processes, wall clock):

* ``dpledger account FILE``: the command as shipped (its certified numbers computed in the clean
  room, an isolated interpreter started by the command);
* the same accounting without the clean room: one ordinary process that reads the file with
  the builtin plugins, accounts it and prints the same text (what the command did before).

Prints the medians and the difference (target: the clean room adds at most 0.4 s) and their
ratio. Machines are noisy: compare within one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT / "examples" / "pipelines" / "dpsgd.toml"

#: the former in-process path: the builtin host resolves methods, the accountant runs here
IN_PROCESS = """
import argparse, sys
from dpledger.cleanroom.resolver import RoomResolver, builtin_host
from dpledger.commands.account import _load, certify
args = argparse.Namespace(file=sys.argv[1], delta=None, epsilon=None, json=False,
                          backends=None, per_release=False, crosscheck=False)
resolver = RoomResolver(builtin_host(None, None), [])
raise SystemExit(certify(args, _load(args.file, resolver), resolver.rests_on))
"""


def _time(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    clean_cmd = [sys.executable, "-m", "dpledger", "account", args.file]
    plain_cmd = [sys.executable, "-c", IN_PROCESS, args.file]
    clean, plain = [], []
    for _ in range(args.repeats):
        t_clean, out_clean = _time(clean_cmd)
        t_plain, out_plain = _time(plain_cmd)
        assert out_clean == out_plain, "the two paths must print the same text"
        clean.append(t_clean)
        plain.append(t_plain)
    c, p = statistics.median(clean), statistics.median(plain)
    print(f"file: {args.file} ({args.repeats} runs each, alternating)")
    print(f"dpledger account (clean room): median {c:.3f} s")
    print(f"same accounting in one process:  median {p:.3f} s")
    print(f"added by the clean room: {c - p:+.3f} s (target <= 0.4 s); ratio {c / p:.2f}")


if __name__ == "__main__":
    main()

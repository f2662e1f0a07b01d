"""Paper C: does PATH's temporal gap to AIM close with a larger model or longer training?

A small grid at reduced data size: two model sizes x two public pre-training lengths, each cell
run with PATH at one privacy level and with the same PATH without noise (the non-private
baseline: same clipping, steps, sampling and selection, noise multipliers 0.01), against AIM
and fresh real tables on the same data, for several seeds.

Usage (writes the JSON as it goes; ``--summarize`` prints the tables of a written file)::

    python -m experiments.path.sweep --out experiments/path/sweep.json
    python -m experiments.path.sweep --summarize experiments/path/sweep.json

Reduced size (stated on the results page): ``--n-users`` tables (80/20 split) whose lengths are
uniform on 6..``--max-length`` instead of 6..20, so a table is at most about 1,300 bytes;
AIM flattens the first ``--length`` rows (every user has at least 6). The seed changes the private
draw, the split, the DP noise, generation and selection; the public pre-training (on an
independent public draw) is done once per cell.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpledger.plugins.path import metrics
from dpledger.plugins.path.data import HMMParams, default_hmm_params, hmm_dataset

from . import reproducible, table2

#: model sizes of the grid: (n_layer, n_head, n_embd)
SIZES = {"small": (2, 2, 64), "large": (4, 4, 96)}
#: the noise multipliers of the non-private baseline (epsilon of order 1e5: no privacy); the
#: baseline is table2's ``path_nonprivate``
NON_PRIVATE_SIGMA = table2.NON_PRIVATE_SIGMA
METRICS = ["hmm_loglik_w1", "state_frobenius", "tdcr_jsd", "marginal_w1", "mauve"]


def short_params(max_length: int) -> HMMParams:
    """The default HMM with table lengths uniform on 6..max_length."""
    lengths = np.arange(6, max_length + 1)
    return attrs.evolve(
        default_hmm_params(),
        lengths=lengths,
        length_probs=np.full(lengths.size, 1.0 / lengths.size),
    )


def length_pmf(hmm: HMMParams, max_rows: int) -> list[float]:
    pmf = np.zeros(max_rows)
    for t, pr in zip(hmm.lengths, hmm.length_probs, strict=True):
        pmf[min(int(t), max_rows) - 1] += pr
    return (pmf / pmf.sum()).tolist()


def table2_args(a: argparse.Namespace, size: str, pretrain_steps: int, seed: int) -> Any:
    n_layer, n_head, n_embd = SIZES[size]
    args = table2.parser().parse_args([])
    args.seed = seed
    args.length = a.length
    args.n_layer, args.n_head, args.n_embd = n_layer, n_head, n_embd
    args.pretrain_steps = pretrain_steps
    args.public_users = a.public_users
    args.max_tokens = a.max_tokens
    args.max_rows = a.max_length
    args.steps = a.steps
    args.overgeneration = a.overgeneration
    args.embedder = a.embedder
    args.generation_batch = a.generation_batch
    args.rounds = a.rounds
    return args


def pretrain_cell(a: argparse.Namespace, size: str, steps: int, out_dir: Path) -> float:
    """Public pre-training of one cell's model (public draw of the short-table HMM)."""
    import torch

    from dpledger.plugins.path import model, train

    torch.set_num_threads(1)
    n_layer, n_head, n_embd = SIZES[size]
    public, _ = hmm_dataset(a.public_users, seed=a.public_seed, params=short_params(a.max_length))
    lm, codec = model.load(
        None,
        seed=0,
        default_kwargs={
            "n_layer": n_layer,
            "n_head": n_head,
            "n_embd": n_embd,
            "n_positions": a.max_tokens,
        },
    )
    t0 = time.time()
    train.pretrain_public(
        lm,
        codec,
        public,
        steps=steps,
        batch_size=1,
        learning_rate=1e-3,
        max_tokens=a.max_tokens,
        seed=a.public_seed,
    )
    model.save(lm, codec, out_dir)
    return time.time() - t0


def run(a: argparse.Namespace) -> None:
    hmm = short_params(a.max_length)
    rows: list[dict[str, Any]] = []
    # the settings of the run, without where it read and wrote (paths of the machine)
    settings = {k: v for k, v in vars(a).items() if k not in ("summarize", "out", "model_root")}
    meta = {"args": settings, "sizes": SIZES, "non_private_sigma": NON_PRIVATE_SIGMA}
    tmp = tempfile.TemporaryDirectory()
    root = Path(a.model_root or tmp.name)
    model_dirs: dict[tuple[str, int], Path] = {}
    pretrain_seconds: dict[str, float] = {}
    for size in a.sizes:
        for steps in a.pretrain_steps:
            d = root / f"{size}-{steps}"
            if not (d / "config.json").exists():
                pretrain_seconds[f"{size}-{steps}"] = pretrain_cell(a, size, steps, d)
                print(json.dumps({"pretrained": f"{size}-{steps}"}), flush=True)
            model_dirs[(size, steps)] = d
    meta["pretrain_seconds"] = pretrain_seconds
    if a.pretrain_only:
        return

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(a.out, "w") as fh:
            json.dump({**meta, "rows": rows}, fh, indent=1)

    for seed in a.seeds:
        data, _ = hmm_dataset(a.n_users, seed=seed, params=hmm)
        perm = np.random.default_rng(seed).permutation(len(data))
        n_test = len(data) // 5
        test, train = data.subset(perm[:n_test]), data.subset(perm[n_test:])
        delta = 1.0 / len(train) ** 2
        n_syn = min(a.n_synthetic, n_test)
        base = {"seed": seed, "epsilon": a.epsilon, "delta": delta}
        if "real" in a.methods:
            real, _ = hmm_dataset(n_test, seed=seed + table2.REAL_SEED_OFFSET, params=hmm)
            scores = metrics.evaluate(real, train, test, hmm, seed=seed)
            emit({**base, "method": "real", "cell": "-", **scores})
        if "aim" in a.methods:
            args = table2_args(a, a.sizes[0], a.pretrain_steps[0], seed)
            t0 = time.time()
            syn, certified, _, _ = table2.run_method(
                "aim", a.epsilon, delta, train, n_test, None, args
            )
            emit(
                {
                    **base,
                    "method": "aim",
                    "cell": "-",
                    "epsilon_certified": certified,
                    "seconds": time.time() - t0,
                    **metrics.evaluate(syn, train, test, hmm, seed=seed),
                }
            )
        for size in a.sizes:
            for steps in a.pretrain_steps:
                args = table2_args(a, size, steps, seed)
                for method, extra in (
                    ("path", {}),
                    ("path_nonprivate", table2.NON_PRIVATE_OVERRIDES),
                ):
                    if method not in a.methods:
                        continue
                    args.path_params = json.dumps(
                        {"n_synthetic": n_syn, "length_pmf": length_pmf(hmm, a.max_length), **extra}
                    )
                    t0 = time.time()
                    syn, certified, _, info = table2.run_method(
                        "path", a.epsilon, delta, train, n_test, model_dirs[(size, steps)], args
                    )
                    emit(
                        {
                            **base,
                            "method": method,
                            "cell": f"{size}-{steps}",
                            "epsilon_certified": certified,
                            "seconds": time.time() - t0,
                            "n_valid_candidates": info.get("n_valid_candidates"),
                            **metrics.evaluate(syn, train, test, hmm, seed=seed),
                        }
                    )
    tmp.cleanup()
    summarize(a.out)


def summarize(*paths: str) -> list[dict[str, Any]]:
    """Mean and sample sd over seeds per (method, cell), and the PATH - AIM gap per seed."""
    rows, seen = [], set()
    for p in paths:
        for r in json.loads(Path(p).read_text())["rows"]:
            key = (r["method"], r["cell"], r["seed"])
            if key not in seen:  # one row per (method, cell, seed) across files
                seen.add(key)
                rows.append(r)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["cell"]), []).append(r)
    aim = {r["seed"]: r for r in rows if r["method"] == "aim"}
    out = []
    print("method | cell | seeds | " + " | ".join(METRICS) + " | HMM gap to AIM | state gap")
    for (method, cell), rs in sorted(groups.items()):
        line: dict[str, Any] = {"method": method, "cell": cell, "n": len(rs)}
        cells = []
        for m in [*METRICS, "gap_hmm", "gap_state"]:
            if m.startswith("gap"):
                key = "hmm_loglik_w1" if m == "gap_hmm" else "state_frobenius"
                vals = np.array([r[key] - aim[r["seed"]][key] for r in rs if r["seed"] in aim])
            else:
                vals = np.array([r[m] for r in rs])
            mean = float(vals.mean()) if vals.size else float("nan")
            sd = float(vals.std(ddof=1)) if vals.size > 1 else float("nan")
            line[m] = (mean, sd)
            digits = (
                3
                if m in ("state_frobenius", "tdcr_jsd", "marginal_w1", "mauve", "gap_state")
                else 1
            )
            spread = f" ± {sd:.{digits}f}" if vals.size > 1 else " (one seed)"
            cells.append(f"{mean:.{digits}f}{spread}")
        out.append(line)
        print(f"{method} | {cell} | {len(rs)} | " + " | ".join(cells), flush=True)
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--summarize", nargs="+", default=None, help="print the tables of JSON files")
    ap.add_argument("--model-root", default=None, help="pre-trained models (made when missing)")
    ap.add_argument("--pretrain-only", action="store_true")
    ap.add_argument("--out", default="sweep.json")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--sizes", nargs="+", default=["small", "large"], choices=sorted(SIZES))
    ap.add_argument("--pretrain-steps", nargs="+", type=int, default=[250, 1000])
    ap.add_argument("--methods", nargs="+", default=["real", "aim", "path", "path_nonprivate"])
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--n-users", type=int, default=250)
    ap.add_argument("--max-length", type=int, default=10)
    ap.add_argument("--length", type=int, default=6, help="rows AIM flattens")
    ap.add_argument("--rounds", type=int, default=20, help="AIM rounds")
    ap.add_argument("--public-users", type=int, default=500)
    ap.add_argument("--public-seed", type=int, default=100_003)
    ap.add_argument("--max-tokens", type=int, default=1536)
    ap.add_argument("--steps", type=int, default=20, help="DP-SGD steps")
    ap.add_argument("--n-synthetic", type=int, default=30)
    ap.add_argument("--overgeneration", type=float, default=2.0)
    ap.add_argument("--embedder", default="summary")
    ap.add_argument("--generation-batch", type=int, default=100)
    return ap


def main() -> None:
    a = parser().parse_args()
    if a.summarize:
        summarize(*a.summarize)
    else:
        run(a)


if __name__ == "__main__":
    reproducible.fix_hash_seed()
    main()

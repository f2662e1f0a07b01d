"""Paper C, Table 2 layout on the HMM data: PATH, AIM, Direct (Markov, Across) and real data.

Usage::

    python -m experiments.path.table2 --methods real direct_markov direct_across aim \
        path_public path [--n-users 1000] [--epsilons 2 10] [--out table2.json]

Data: ``--n-users`` tables from the HMM generator (seed ``--seed``), split 80/20 into private
training tables and held-out tables. ``real`` is the reference: as many fresh real tables as
held-out ones, drawn from the generator with another seed (not in the training set).
``delta = 1/n^2`` with ``n`` the number of training users.
Every private method runs through the ledger (``run_verified``), which checks executed <=
declared; the certified epsilon of each row is the accountant's bound on the declared event
(``accountant.select.account``), never a hand sum.

PATH (method ``path``) starts from a model pre-trained non-privately on a *public* draw of the
HMM generator: ``--public-users`` tables drawn with seed ``--public-seed``, independent of the
private draw. Pre-training touches no private table. ``path_public`` is the control row: the
pre-trained model generates directly (no private data, epsilon = 0, no selection), which shows
how much of PATH's score comes from the public pre-training. ``path_nonprivate`` is PATH without
privacy, the same run (clipping, sampling, steps, generation, selection) with both noise
multipliers fixed at ``NON_PRIVATE_SIGMA`` = 0.01 (the sweep's non-private baseline); its
certified epsilon is of order 1e5 and its epsilon column is infinity.
``--pretrain-only`` writes the pre-trained model to ``--model-dir`` and stops;
``--summarize FILE... [--only METHOD...]`` prints the rows of stored runs (PATH, the flattened
baselines, their non-private versions, REAL), per seed and as mean ± sample sd.
``--side-by-side FILE...`` prints, per epsilon, private method and metric, the paper's number
(``PAPER_TABLE2``), ours as mean ± sample sd over the stored seeds and the same method's
non-private baseline.
``direct_markov_nonprivate`` and ``direct_across_nonprivate`` are the Direct baselines without
privacy: the same flattening, cliques and Private-PGM fit with the measurements calibrated to
epsilon 1e5 (noise multiplier 0.0023 on counts); their epsilon column is infinity.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.plugins.path import metrics
from dpledger.plugins.path.baselines_plugin import AIM_SPEC, DIRECT_SPEC
from dpledger.plugins.path.data import hmm_dataset
from dpledger.plugins.path.schema import UserTable, UserTables
from dpledger.runtime.runner import run_verified

from ..sections import OneLineParser
from . import reproducible
from .table2_summary import (
    COLUMNS,
    NO_NUMBER,
    NON_PRIVATE_OF,
    PAPER_SELECTION_EPSILON,
    PAPER_TABLE2,
    SIDE_BY_SIDE_METRICS,
    SIDE_BY_SIDE_SEEDS,
    SUMMARY_DIGITS,
    SUMMARY_LABELS,
    mean_sd_cell,
    paper_cell,
    seeds_cell,
    selection_epsilon_cell,
    side_by_side,
    stored_runs,
    summarize,
)

#: the command's pieces, and the summary tables' (in ``table2_summary``, re-exported here)
__all__ = [
    "COLUMNS",
    "FLAT_ADJACENCY",
    "METHODS",
    "NON_PRIVATE_AIM_EPSILON",
    "NON_PRIVATE_DIRECT",
    "NON_PRIVATE_DIRECT_EPSILON",
    "NON_PRIVATE_OF",
    "NON_PRIVATE_OVERRIDES",
    "NON_PRIVATE_SIGMA",
    "NO_NUMBER",
    "PAPER_SELECTION_EPSILON",
    "PAPER_TABLE2",
    "REAL_SEED_OFFSET",
    "SIDE_BY_SIDE_METRICS",
    "SIDE_BY_SIDE_SEEDS",
    "SUMMARY_DIGITS",
    "SUMMARY_LABELS",
    "USER_ADJACENCY",
    "epsilons_of",
    "length_pmf",
    "main",
    "mean_sd_cell",
    "method_params",
    "nonprivate_aim_sigma0",
    "paper_cell",
    "parser",
    "path_params",
    "path_public",
    "pretrain",
    "run",
    "run_method",
    "seeds_cell",
    "selection_epsilon_cell",
    "side_by_side",
    "stored_runs",
    "summarize",
]

#: flat records are users (one record per user), so row adjacency on them is user adjacency
FLAT_ADJACENCY = Adjacency()
USER_ADJACENCY = Adjacency(unit="user", unit_key="subject_id")
#: seed offset of the independent real reference draw
REAL_SEED_OFFSET = 7_919
#: the noise multipliers of the non-private PATH baseline (epsilon of order 1e5: no privacy)
NON_PRIVATE_SIGMA = 0.01
#: PathParams overrides of the non-private PATH baseline: same clipping, sampling, steps,
#: generation and selection as PATH, with both noise multipliers fixed at NON_PRIVATE_SIGMA
NON_PRIVATE_OVERRIDES: dict[str, Any] = {
    "target_epsilon": None,
    "selection_epsilon": None,
    "noise_multiplier": NON_PRIVATE_SIGMA,
    "selection_noise_multiplier": NON_PRIVATE_SIGMA,
}

#: the Direct baselines without privacy: the same flattening, cliques and Private-PGM fit, with
#: the measurements calibrated to epsilon 1e5 (noise multiplier 0.0023 on counts of sensitivity
#: 1, i.e. exact marginals up to rounding)
NON_PRIVATE_DIRECT_EPSILON = 1e5
NON_PRIVATE_DIRECT = ("direct_markov_nonprivate", "direct_across_nonprivate")
#: AIM without privacy: the same flattening, workload, rounds, annealing and Private-PGM fits at
#: epsilon 1e5. AIM's own calibration certifies with PLD only, and PLD cannot bound AIM's
#: declared event at the sigma_0 that epsilon 1e5 needs (the losses leave its grid), so it stops
#: at the least sigma_0 PLD bounds, far short of 1e5 (L = 10, 16 bins, 40 rounds: sigma_0 0.286,
#: certified epsilon 710, i.e. count noise 0.29 and selections at epsilon 2.3, still private).
#: ``aim_nonprivate`` instead fixes sigma_0 at the least value RDP certifies at epsilon 1e5, on
#: the same three-digit grid (0.0198 at L = 10, 16 bins, 40 rounds)
NON_PRIVATE_AIM_EPSILON = 1e5
#: every method ``--methods`` accepts
METHODS = (
    "real",
    "direct_markov",
    "direct_across",
    "aim",
    *NON_PRIVATE_DIRECT,
    "aim_nonprivate",
    "path_public",
    "path",
    "path_nonprivate",
)


def pretrain(args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    """Non-private pre-training of the built-in model on a public HMM draw; saved to out_dir."""
    import torch

    from dpledger.plugins.path import model, train

    torch.set_num_threads(args.threads)
    public, _ = hmm_dataset(args.public_users, seed=args.public_seed)
    lm, codec = model.load(
        None,
        seed=args.seed,
        default_kwargs={
            "n_layer": args.n_layer,
            "n_head": args.n_head,
            "n_embd": args.n_embd,
            "n_positions": args.max_tokens,
        },
    )
    t0 = time.time()
    train.pretrain_public(
        lm,
        codec,
        public,
        steps=args.pretrain_steps,
        batch_size=args.pretrain_batch,
        learning_rate=args.pretrain_lr,
        max_tokens=args.max_tokens,
        seed=args.public_seed,
    )
    model.save(lm, codec, out_dir)
    return {
        "public_users": args.public_users,
        "public_seed": args.public_seed,
        "steps": args.pretrain_steps,
        "batch": args.pretrain_batch,
        "learning_rate": args.pretrain_lr,
        "seconds": time.time() - t0,
    }


def length_pmf(max_rows: int) -> list[float]:
    """The public length distribution (known from the generator's parameters, not the data)."""
    from dpledger.plugins.path.data import default_hmm_params

    p = default_hmm_params()
    pmf = np.zeros(max_rows)
    for t, pr in zip(p.lengths, p.length_probs, strict=True):
        pmf[min(int(t), max_rows) - 1] += pr
    return [float(v) for v in pmf / pmf.sum()]


def path_params(
    eps: float, delta: float, n_train: int, n_test: int, model_dir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    return {
        "target_epsilon": eps,
        "delta": delta,
        "public_n_users": n_train,
        "selection_epsilon": args.selection_share * eps,
        "model_dir": str(model_dir),
        "lora_rank": args.lora_rank,
        "max_tokens": args.max_tokens,
        "max_rows": args.max_rows,
        "sampling_probability": args.q,
        "steps": args.steps,
        "learning_rate": args.lr,
        "clip_norm": args.clip,
        "physical_batch": 1,
        "n_synthetic": n_test,
        "overgeneration": args.overgeneration,
        "embedder": args.embedder,
        "generation_batch": args.generation_batch,
        "torch_threads": args.threads,
        "length_pmf": length_pmf(args.max_rows),
        **json.loads(args.path_params),
    }


def path_public(model_dir: Path, schema: Any, n: int, args: argparse.Namespace) -> UserTables:
    """The control: tables generated by the publicly pre-trained model (no private data)."""
    import torch

    from dpledger.plugins.path import generate, model
    from dpledger.plugins.path.plugin import clip_to_bounds

    torch.set_num_threads(args.threads)
    lm, codec = model.load(str(model_dir))
    cfg = generate.GenerationConfig(
        n_tables=n,
        max_rows=args.max_rows,
        max_tokens=args.max_tokens,
        guided=True,
        batch_size=args.generation_batch,
    )
    rows = generate.generate_tables(lm, codec, schema, cfg, np.random.default_rng(args.seed))
    users = tuple(
        UserTable(f"public-{j}", tuple(clip_to_bounds(schema, r))) for j, r in enumerate(rows) if r
    )
    return UserTables(schema, users)


def method_params(
    name: str,
    eps: float,
    delta: float,
    n_train: int,
    n_test: int,
    model_dir: Path | None,
    args: argparse.Namespace,
) -> tuple[Any, Any, Adjacency]:
    """(method spec, parameters, adjacency) of one private method's run, as ``run_method`` makes
    it (the calibrated noise is ``spec.declare(params, adjacency)``'s)."""
    common = {"epsilon": eps, "delta": delta, "length": args.length, "bins": args.bins}
    if name.startswith("direct"):
        variant = "across" if "across" in name else "markov"
        if name in NON_PRIVATE_DIRECT:
            common["epsilon"] = NON_PRIVATE_DIRECT_EPSILON
        values = {**common, "variant": variant, "iters": args.iters, "n_across": args.n_across}
        return DIRECT_SPEC, DIRECT_SPEC.make_params(values), FLAT_ADJACENCY
    if name in ("aim", "aim_nonprivate"):
        values = {**common, "rounds": args.rounds, "iters": args.aim_iters}
        if name == "aim_nonprivate":
            values["epsilon"] = NON_PRIVATE_AIM_EPSILON
            values["noise_multiplier"] = nonprivate_aim_sigma0(AIM_SPEC.make_params(values))
        return AIM_SPEC, AIM_SPEC.make_params(values), FLAT_ADJACENCY
    if name in ("path", "path_nonprivate"):
        from dpledger.plugins.path.plugin import SPEC  # the language-model method

        assert model_dir is not None
        values = path_params(eps, delta, n_train, n_test, model_dir, args)
        if name == "path_nonprivate":
            values.update(NON_PRIVATE_OVERRIDES)
        return SPEC, SPEC.make_params(values), USER_ADJACENCY
    raise SystemExit(f"unknown method {name!r}")


def run_method(
    name: str,
    eps: float,
    delta: float,
    train: UserTables,
    n_test: int,
    model_dir: Path | None,
    args: argparse.Namespace,
) -> tuple[UserTables, float, str, dict[str, Any]]:
    """(synthetic tables, certified epsilon, accountant, info) of one private method."""
    spec, p, adjacency = method_params(name, eps, delta, len(train), n_test, model_dir, args)
    if name in ("path", "path_nonprivate"):
        res = run_verified(spec, p, train, adjacency=adjacency, seed=args.seed)
        syn = res.outputs["synthetic"]
        if syn is None:
            raise SystemExit("PATH generated no valid table")
    else:
        res = run_verified(spec, p, train, seed=args.seed)
        syn = res.outputs["tables"]
    bound = account(res.declared, adjacency, delta=delta).bound
    info = dict(res.outputs.get("info", {}))
    return syn, float(bound.epsilon), bound.method, info


def nonprivate_aim_sigma0(params: Any) -> float:
    """AIM's sigma_0 at ``params.epsilon`` (1e5) and delta, certified by RDP: the least value in
    (1e-3, 1e4) with three significant digits whose declared event RDP bounds within the target
    (as AIM's own calibration, on the same grid)."""
    from dpledger.accountant.calibrate import calibrate_on_grid
    from dpledger.plugins.path import aim

    res = calibrate_on_grid(
        lambda s: aim.budget(params, s).event(),
        FLAT_ADJACENCY,
        params.epsilon,
        params.delta,
        bracket=(1e-3, 1e4),
        backends=("rdp",),
    )
    return float(res.noise_multiplier)


def epsilons_of(name: str, epsilons: list[float]) -> list[float]:
    """The epsilon column of a method's rows: one row per epsilon for the private methods."""
    if name in ("real", "path_nonprivate", "aim_nonprivate") or name in NON_PRIVATE_DIRECT:
        # no privacy (noise multipliers 0.01, or epsilon 1e5 for Direct and AIM)
        return [float("inf")]
    if name == "path_public":
        return [0.0]  # no private data
    return epsilons


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser()
    ap.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=["real", "direct_markov", "direct_across", "aim"],
    )
    ap.add_argument("--epsilons", nargs="+", type=float, default=[2.0, 10.0])
    ap.add_argument("--n-users", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="table2.json")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    # flattened baselines
    ap.add_argument("--length", type=int, default=10)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument(
        "--n-across",
        type=int,
        default=10,
        help="same-time pairs of direct_across (at 16 bins and L = 10 the junction "
        "tree needs 14.7 GB for 80 pairs, 176 MB for 20, 0.9 MB for 10)",
    )
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--aim-iters", type=int, default=250)
    # PATH: public pre-training
    ap.add_argument(
        "--model-dir",
        default=None,
        help="reuse a pre-trained model directory instead of pre-training",
    )
    ap.add_argument(
        "--pretrain-only",
        action="store_true",
        help="only pre-train the model into --model-dir (with path or path_public in --methods)",
    )
    ap.add_argument("--public-users", type=int, default=1000)
    ap.add_argument("--public-seed", type=int, default=100_003)
    ap.add_argument("--pretrain-steps", type=int, default=1200)
    ap.add_argument("--pretrain-batch", type=int, default=1)
    ap.add_argument("--pretrain-lr", type=float, default=1e-3)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    # PATH: private fine-tuning, generation, selection
    ap.add_argument("--max-tokens", type=int, default=3072)
    ap.add_argument("--max-rows", type=int, default=20)
    ap.add_argument("--lora-rank", type=int, default=8)
    ap.add_argument("--q", type=float, default=0.125)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument(
        "--selection-share",
        type=float,
        default=0.25,
        help="selection_epsilon = share * epsilon (the rest goes to training)",
    )
    ap.add_argument("--overgeneration", type=float, default=2.0)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--generation-batch", type=int, default=100)
    ap.add_argument("--path-params", default="{}", help="JSON overrides of PathParams")
    ap.add_argument(
        "--summarize", nargs="+", default=None, help="print the rows of stored JSON files"
    )
    ap.add_argument(
        "--only",
        nargs="+",
        choices=sorted(SUMMARY_LABELS),
        default=None,
        help="with --summarize: print only these methods",
    )
    ap.add_argument(
        "--side-by-side",
        nargs="+",
        default=None,
        metavar="FILE",
        help="print, per epsilon, private method and metric, the paper's number, ours (mean ± sd "
        "over the stored seeds) and the method's non-private baseline",
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    if args.summarize:
        missing = [f for f in args.summarize if not Path(f).is_file()]
        if missing:
            ap.error(f"--summarize: no such file {missing[0]}")
        summarize(*args.summarize, only=args.only)
        return
    if args.side_by_side:
        missing = [f for f in args.side_by_side if not Path(f).is_file()]
        if missing:
            ap.error(f"--side-by-side: no such file {missing[0]}")
        side_by_side(*args.side_by_side)
        return
    run(args)


def run(args: argparse.Namespace) -> None:
    """Run ``args.methods`` on one seed's data and write ``args.out`` as each row finishes."""
    data, hmm = hmm_dataset(args.n_users, seed=args.seed)
    perm = np.random.default_rng(args.seed).permutation(len(data))
    n_test = len(data) // 5
    test, train = data.subset(perm[:n_test]), data.subset(perm[n_test:])
    delta = 1.0 / len(train) ** 2
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "n_users": args.n_users,
        "n_train": len(train),
        "n_test": n_test,
        "delta": delta,
        "args": vars(args),
    }
    model_dir: Path | None = None
    tmp = tempfile.TemporaryDirectory()
    if {"path", "path_nonprivate", "path_public"} & set(args.methods):
        if args.model_dir and (Path(args.model_dir) / "config.json").exists():
            model_dir = Path(args.model_dir)
        else:
            model_dir = Path(args.model_dir or tmp.name)
            meta["pretrain"] = pretrain(args, model_dir)
            print(json.dumps({"pretrain": meta["pretrain"]}), flush=True)
    if args.pretrain_only:
        return
    for name in args.methods:
        for eps in epsilons_of(name, args.epsilons):
            t0 = time.time()
            certified, accountant = (float("inf") if name == "real" else 0.0), "-"
            info: dict[str, Any] = {}
            if name == "real":
                # fresh real tables outside the training set: a training subsample would sit at
                # distance 0 from the training set and make its TDCR trivially 1
                syn, _ = hmm_dataset(n_test, seed=args.seed + REAL_SEED_OFFSET)
            elif name == "path_public":
                assert model_dir is not None
                n_syn = int(json.loads(args.path_params).get("n_synthetic", n_test))
                syn = path_public(model_dir, train.schema, n_syn, args)
            else:
                syn, certified, accountant, info = run_method(
                    name, eps, delta, train, n_test, model_dir, args
                )
            seconds = time.time() - t0
            scores = metrics.evaluate(syn, train, test, params=hmm, seed=args.seed)
            rows.append(
                {
                    "method": name,
                    "epsilon": eps,
                    "epsilon_certified": certified,
                    "accountant": accountant,
                    "delta": delta,
                    "n_synthetic": len(syn),
                    "seconds": seconds,
                    **scores,
                    "info": {k: v for k, v in info.items() if isinstance(v, int | float | str)},
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            with open(args.out, "w") as fh:
                json.dump({**meta, "rows": rows}, fh, indent=1)
    tmp.cleanup()
    print("eps | method | certified eps | " + " | ".join(COLUMNS))
    for r in rows:
        print(
            f"{r['epsilon']} | {r['method']} | {r['epsilon_certified']:.4f} | "
            + " | ".join(f"{r[c]:.4f}" for c in COLUMNS)
        )


if __name__ == "__main__":
    reproducible.fix_hash_seed()
    main()

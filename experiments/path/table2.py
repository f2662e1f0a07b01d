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
import math
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

#: flat records are users (one record per user), so row adjacency on them is user adjacency
FLAT_ADJACENCY = Adjacency()
USER_ADJACENCY = Adjacency(unit="user", unit_key="subject_id")
#: seed offset of the independent real reference draw
REAL_SEED_OFFSET = 7_919
COLUMNS = ["mauve", "hmm_loglik_w1", "tdcr_jsd", "marginal_w1", "state_frobenius"]
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


#: the rows ``--summarize`` prints (PATH, the flattened baselines, their non-private versions
#: and the real reference), and the columns with their decimals
SUMMARY_LABELS = {
    "aim": "AIM",
    "aim_nonprivate": "AIM non-private (ε = 1e5)",
    "direct_across": "DIRECT (Acr.)",
    "direct_across_nonprivate": "DIRECT (Acr.) non-private (ε = 1e5)",
    "direct_markov": "DIRECT (Markov = Indep)",
    "direct_markov_nonprivate": "DIRECT (Markov = Indep) non-private (ε = 1e5)",
    "path": "PATH (GPT-2 tiny)",
    "path_public": "PATH, public pre-training only",
    "path_nonprivate": "PATH non-private (σ = 0.01)",
    "real": "REAL (200 fresh tables)",
}
SUMMARY_DIGITS = {
    "epsilon_certified": 4,
    "mauve": 3,
    "hmm_loglik_w1": 2,
    "tdcr_jsd": 4,
    "marginal_w1": 4,
    "state_frobenius": 4,
    "classifier_auc": 3,
}


def selection_epsilon_cell(method: str, eps: float, share: float) -> str:
    """The selection budget of a PATH row (none for the non-private baseline: sigma 0.01, nor
    for the methods without a selection step)."""
    return f"{share * eps:g}" if method == "path" else "–"


def stored_runs(
    *paths: str, only: list[str] | None = None
) -> dict[tuple[str, float, str], list[tuple[int, dict[str, Any]]]]:
    """The rows stored in ``paths`` (methods of ``SUMMARY_LABELS``, ``only`` keeps these),
    grouped by configuration (method, epsilon, selection budget), each group's runs as
    (seed, row) in seed order. A configuration stored twice for one seed is an error."""
    groups: dict[tuple[str, float, str], list[tuple[int, dict[str, Any]]]] = {}
    for path in paths:
        stored = json.loads(Path(path).read_text())
        seed, share = stored["args"]["seed"], stored["args"]["selection_share"]
        for r in stored["rows"]:
            if r["method"] in SUMMARY_LABELS and (only is None or r["method"] in only):
                sel = selection_epsilon_cell(r["method"], r["epsilon"], share)
                runs = groups.setdefault((r["method"], r["epsilon"], sel), [])
                if any(seed == other for other, _ in runs):
                    raise SystemExit(
                        f"{path}: {r['method']} at ε = {r['epsilon']} seed {seed} twice"
                    )
                runs.append((seed, r))
    for runs in groups.values():
        runs.sort(key=lambda run: run[0])
    return groups


def mean_sd_cell(values: np.ndarray, digits: int) -> str:
    """Mean ± sample sd (ddof 1) of one metric over seeds, at ``digits`` decimals; "–" where
    every value is infinite (no certified epsilon)."""
    if np.isinf(values).all():
        return "–"
    return f"{values.mean():.{digits}f} ± {values.std(ddof=1):.{digits}f}"


def summarize(*paths: str, only: list[str] | None = None) -> list[str]:
    """Table rows of the runs stored in ``paths`` (methods of ``SUMMARY_LABELS``): one per
    seed, and for a configuration (method, epsilon, selection budget) run with two seeds or
    more, mean ± sample sd. ``only`` keeps these methods. A configuration stored twice for one
    seed is an error."""
    lines = []
    for (method, eps, sel), runs in sorted(stored_runs(*paths, only=only).items()):
        head = f"{'∞' if math.isinf(eps) else f'{eps:g}'} | {SUMMARY_LABELS[method]} | {sel}"
        for seed, r in runs:
            cells = (
                "–" if math.isinf(r[k]) else f"{r[k]:.{d}f}" for k, d in SUMMARY_DIGITS.items()
            )
            lines.append(f"{head} | {seed} | " + " | ".join(cells))
        if len(runs) >= 2:
            cells = (
                mean_sd_cell(np.array([r[k] for _, r in runs]), d)
                for k, d in SUMMARY_DIGITS.items()
            )
            seeds = ", ".join(str(seed) for seed, _ in runs)
            lines.append(f"{head} | mean ± sd ({seeds}) | " + " | ".join(cells))
    print("ε | method | ε_select | seed | certified ε | " + " | ".join(list(SUMMARY_DIGITS)[1:]))
    for line in lines:
        print(line)
    return lines


#: the paper's Table 2 (HMM data), as the page's main table quotes it: per (method, epsilon)
#: and model (PATH: Gemma 3 4B and 1B; "" for the other methods), MAUVE / HMM likelihood W1 /
#: TDCR JSD / marginal W1 / state Frobenius, with the paper's digits. The paper's "DIRECT
#: (Indep)" is our ``direct_markov``. The paper has no classifier AUC.
PAPER_TABLE2: dict[tuple[str, float], dict[str, tuple[str, str, str, str, str]]] = {
    ("aim", 2.0): {"": ("0.655", "374.47", "0.6352", "0.4260", "0.5204")},
    ("direct_across", 2.0): {"": ("0.763", "696.55", "0.7384", "1.5437", "0.6014")},
    ("direct_markov", 2.0): {"": ("0.701", "754.96", "0.8059", "1.8809", "0.5953")},
    ("path", 2.0): {
        "4B": ("0.612", "57.97", "0.4150", "0.9494", "0.4363"),
        "1B": ("0.307", "334.46", "0.8073", "3.0628", "1.0329"),
    },
    ("aim", 10.0): {"": ("0.705", "319.43", "0.5367", "0.2757", "0.4791")},
    ("direct_across", 10.0): {"": ("0.704", "409.11", "0.6560", "0.6496", "0.5331")},
    ("direct_markov", 10.0): {"": ("0.710", "653.24", "0.6748", "0.9022", "0.4558")},
    ("path", 10.0): {
        "4B": ("0.690", "50.99", "0.3966", "0.8250", "0.4217"),
        "1B": ("0.359", "184.90", "0.5402", "2.5169", "0.7138"),
    },
}
#: PATH's selection budget in the paper at each total epsilon (the paper's split)
PAPER_SELECTION_EPSILON = {2.0: "0.5", 10.0: "1"}
#: each private method's non-private baseline at the same settings
NON_PRIVATE_OF = {
    "aim": "aim_nonprivate",
    "direct_across": "direct_across_nonprivate",
    "direct_markov": "direct_markov_nonprivate",
    "path": "path_nonprivate",
}
#: the side-by-side table's metrics: the paper's five (as implemented here), then classifier
#: AUC, which is ours only
SIDE_BY_SIDE_METRICS = {
    "mauve": "MAUVE ↑",
    "hmm_loglik_w1": "HMM lik. W1 ↓",
    "tdcr_jsd": "TDCR JSD ↓",
    "marginal_w1": "marginal W1 ↓",
    "state_frobenius": "state Frob. ↓",
    "classifier_auc": "classifier AUC → 0.5 (ours only)",
}
#: seeds a side-by-side cell is meant to have; a cell with fewer says its n
SIDE_BY_SIDE_SEEDS = 3
#: a cell without a number: the paper reports none, or no run is stored
NO_NUMBER = "—"


def paper_cell(method: str, eps: float, sel: str, metric: str) -> str:
    """The paper's number of one (method, epsilon, metric), "—" where it has none (classifier
    AUC, or PATH at a selection budget other than the paper's)."""
    models = PAPER_TABLE2.get((method, eps))
    if models is None or metric not in COLUMNS:
        return NO_NUMBER
    if method == "path" and sel != PAPER_SELECTION_EPSILON.get(eps):
        return NO_NUMBER
    i = COLUMNS.index(metric)
    return "; ".join(f"{model} {v[i]}".strip() for model, v in models.items())


def seeds_cell(runs: list[tuple[int, dict[str, Any]]], metric: str) -> str:
    """Mean ± sample sd of one metric over a configuration's seeds (``mean_sd_cell``), with
    its n when there are fewer than ``SIDE_BY_SIDE_SEEDS`` seeds."""
    if not runs:
        return NO_NUMBER
    digits = SUMMARY_DIGITS[metric]
    values = np.array([r[metric] for _, r in runs])
    cell = f"{values[0]:.{digits}f}" if len(runs) == 1 else mean_sd_cell(values, digits)
    return cell if len(runs) >= SIDE_BY_SIDE_SEEDS else f"{cell} (n = {len(runs)})"


def side_by_side(*paths: str) -> list[str]:
    """One row per (epsilon, private method, metric) of the runs stored in ``paths``: the
    paper's number, ours as mean ± sample sd over the stored seeds and the same method's
    non-private baseline (the same runs at every epsilon), with the seeds of both."""
    groups = stored_runs(*paths, only=[*NON_PRIVATE_OF, *NON_PRIVATE_OF.values()])
    private = [key for key in groups if key[0] in NON_PRIVATE_OF]
    lines = []
    for method, eps, sel in sorted(private, key=lambda k: (k[1], SUMMARY_LABELS[k[0]], k[2])):
        runs = groups[(method, eps, sel)]
        baseline = groups.get((NON_PRIVATE_OF[method], math.inf, "–"), [])
        seeds = ", ".join(str(seed) for seed, _ in runs)
        base_seeds = ", ".join(str(seed) for seed, _ in baseline) or NO_NUMBER
        if base_seeds != seeds:
            seeds = f"{seeds} / {base_seeds}"
        for metric, label in SIDE_BY_SIDE_METRICS.items():
            cells = (
                f"{eps:g}",
                SUMMARY_LABELS[method],
                sel,
                label,
                paper_cell(method, eps, sel, metric),
                seeds_cell(runs, metric),
                seeds_cell(baseline, metric),
                seeds,
            )
            lines.append(" | ".join(cells))
    print(
        "ε | method | ε_select | metric | paper (Table 2) | ours: mean ± sd"
        " | without privacy: mean ± sd (same runs at every ε) | seeds"
    )
    for line in lines:
        print(line)
    return lines


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

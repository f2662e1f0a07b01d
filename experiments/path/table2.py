"""Paper C, Table 2 layout on the HMM data: flattened baselines (and PATH when available).

Usage: python -m experiments.path.table2 --methods real direct_markov direct_across aim
       [--n-users 2000] [--epsilons 2 10] [--out table2.json]

delta = 1/n^2 with n the number of training users. Methods run through the ledger, which verifies
executed <= declared before any output is used. PATH is taken from the method plugin
``dpledger.plugins.path.plugin`` (``SPEC``) when it is importable and asked for with ``path``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from dpledger.core.ledger import run_verified
from dpledger.plugins.path import metrics
from dpledger.plugins.path.baselines_plugin import AIM_SPEC, DIRECT_SPEC
from dpledger.plugins.path.data import hmm_dataset


def run_method(name: str, eps: float, delta: float, train: Any, args: argparse.Namespace
               ) -> Any:
    common = {"epsilon": eps, "delta": delta, "length": args.length, "bins": args.bins}
    if name.startswith("direct"):
        variant = "across" if name.endswith("across") else "markov"
        p = DIRECT_SPEC.make_params({**common, "variant": variant, "iters": args.iters})
        return run_verified(DIRECT_SPEC, p, train, seed=args.seed).outputs["tables"]
    if name == "aim":
        p = AIM_SPEC.make_params({**common, "rounds": args.rounds, "iters": args.aim_iters})
        return run_verified(AIM_SPEC, p, train, seed=args.seed).outputs["tables"]
    if name == "path":
        from dpledger.plugins.path.plugin import SPEC  # the language-model method

        p = SPEC.make_params({"epsilon": eps, "delta": delta, **json.loads(args.path_params)})
        return run_verified(SPEC, p, train, seed=args.seed).outputs["tables"]
    raise SystemExit(f"unknown method {name!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", nargs="+", default=["real", "direct_markov", "direct_across",
                                                      "aim"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[2.0, 10.0])
    ap.add_argument("--n-users", type=int, default=2000)
    ap.add_argument("--length", type=int, default=10)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--aim-iters", type=int, default=250)
    ap.add_argument("--path-params", default="{}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="table2.json")
    args = ap.parse_args()
    data, hmm = hmm_dataset(args.n_users, seed=args.seed)
    perm = np.random.default_rng(args.seed).permutation(len(data))
    n_test = len(data) // 5
    test, train = data.subset(perm[:n_test]), data.subset(perm[n_test:])
    delta = 1.0 / len(train) ** 2
    rows = []
    for name in args.methods:
        for eps in ([float("inf")] if name == "real" else args.epsilons):
            t0 = time.time()
            if name == "real":
                rng = np.random.default_rng(args.seed + 1)
                syn = train.subset(rng.choice(len(train), size=n_test, replace=False))
            else:
                syn = run_method(name, eps, delta, train, args)
            scores = metrics.evaluate(syn, train, test, params=hmm, seed=args.seed)
            rows.append({"method": name, "epsilon": eps, "delta": delta,
                         "seconds": time.time() - t0, **scores})
            print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "w") as fh:
        json.dump({"n_users": args.n_users, "rows": rows}, fh, indent=1)
    cols = ["mauve", "hmm_loglik_w1", "tdcr_jsd", "marginal_w1", "state_frobenius"]
    print("eps | method | " + " | ".join(cols))
    for r in rows:
        print(f"{r['epsilon']} | {r['method']} | " + " | ".join(f"{r[c]:.4f}" for c in cols))


if __name__ == "__main__":
    main()

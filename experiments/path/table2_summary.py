"""Paper C, Table 2: the tables ``table2 --summarize`` and ``table2 --side-by-side`` print from
stored runs (per seed and as mean ± sample sd; beside the paper's numbers and each method's
non-private baseline).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "COLUMNS",
    "NON_PRIVATE_OF",
    "NO_NUMBER",
    "PAPER_SELECTION_EPSILON",
    "PAPER_TABLE2",
    "SIDE_BY_SIDE_METRICS",
    "SIDE_BY_SIDE_SEEDS",
    "SUMMARY_DIGITS",
    "SUMMARY_LABELS",
    "mean_sd_cell",
    "paper_cell",
    "seeds_cell",
    "selection_epsilon_cell",
    "side_by_side",
    "stored_runs",
    "summarize",
]

#: the paper's five metrics, in its Table 2's order
COLUMNS = ["mauve", "hmm_loglik_w1", "tdcr_jsd", "marginal_w1", "state_frobenius"]

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

"""Digits pipeline: public autoencoder + classifier, the three methods on private latents.

    python experiments/swflow/digits.py [--out experiments/swflow/results] [--quick]
        [--seeds 3] [--epsilons inf,10,5,2,1] [--methods DPSWflow-r,DPSWflow,DPSWgen]

Writes ``digits.md`` (Frechet distance in the public classifier's feature space, latent SWD,
certified epsilon; mean ± std and min-max over ``--seeds`` run seeds) and sample grids (first
seed), and prints ``digits.md`` when it is done. delta = 1e-5, replace-one. The public splits,
autoencoder and classifier are fixed by ``--seed``; the run seeds are ``seed, seed + 1, ...``
(batches, directions, noise, initialisation).

With the defaults this one command regenerates the stored page ``results/digits.md`` from
scratch (every cell, about 7 to 10 CPU-minutes); ``--methods`` and ``--epsilons`` run a part of
it (the reference rows are always computed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.plugins.swflow import latent
from dpledger.plugins.swflow.metrics import sliced_wasserstein
from dpledger.plugins.swflow.plugin import DPSWFLOW, DPSWFLOW_R, DPSWGEN
from dpledger.plugins.swflow.sensitivity import record_bound, sample_projections
from dpledger.runtime.runner import run_verified

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared module is beside the folders
    sys.path.insert(0, str(ROOT))

from experiments.sections import OneLineParser  # noqa: E402
from experiments.swflow.datasets import DigitSplits, digit_splits  # noqa: E402
from experiments.swflow.evaluation import frechet_distance, sample_grid  # noqa: E402
from experiments.swflow.training import train_autoencoder, train_classifier  # noqa: E402

DELTA = 1e-5
EPSILONS = "inf,10,5,2,1"
METHODS = ("DPSWflow-r", "DPSWflow", "DPSWgen")
ADJ = Adjacency(relation="replace_one")


def configs(n: int, quick: bool) -> dict[str, tuple[object, dict[str, object]]]:
    batch = 50
    epochs = 4 if quick else 20
    steps = epochs * (n // batch)
    common = {"num_particles": 500, "delta": DELTA}
    return {
        "DPSWflow-r": (
            DPSWFLOW_R,
            {
                **common,
                "dataset_size": n,
                "batch_size": batch,
                "num_steps": steps,
                "num_projections": 70,
                "step_size": 1.0,
                "reg": 0.0,
            },
        ),
        "DPSWflow": (
            DPSWFLOW,
            {
                **common,
                "num_projections": 31,
                "num_sub_projections": 25,
                "num_steps": 150 if quick else 600,
                "step_size": 1.0,
                "reg": 0.0,
            },
        ),
        "DPSWgen": (
            DPSWGEN,
            {
                **common,
                "dataset_size": n,
                "batch_size": batch,
                "num_steps": steps,
                "num_projections": 70,
                "hidden": 256,
                "noise_dim": 16,
                "learning_rate": 1e-3,
            },
        ),
    }


def parse_epsilons(text: str) -> list[float | None]:
    """``"inf,10,5"`` -> ``[None, 10.0, 5.0]`` (``None``: the non-private run)."""
    out: list[float | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if item in ("inf", "infinity"):
            out.append(None)
        else:
            value = float(item)
            if not (value > 0 and np.isfinite(value)):
                raise argparse.ArgumentTypeError(f"epsilon must be > 0 or 'inf', got {item!r}")
            out.append(value)
    return out


def summary(values: Sequence[float], digits: int) -> str:
    """``mean ± sd (min–max)`` (sample sd, ddof = 1; one value: just the value)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 1:
        return f"{v[0]:.{digits}f}"
    sd = v.std(ddof=1)
    return f"{v.mean():.{digits}f} ± {sd:.{digits}f} ({v.min():.{digits}f}–{v.max():.{digits}f})"


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def reference_rows(cells: dict[tuple[str, str], list[float]], reference: list[float]) -> list[str]:
    """Each private FD against the no-information reference (uniform points on the latent
    sphere): the difference, whether it is within the two sample sds, and the cost-of-privacy
    ratio FD(eps) / FD(inf) beside the saturation ratio reference / FD(inf)."""
    ref, ref_sd = _mean_sd(reference)
    rows = [
        "| method | epsilon | FD | no-information reference | FD - reference | "
        "within the two sds of the reference | FD / FD(inf) | reference / FD(inf) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (name, label), fds in cells.items():
        if label == "inf" or (name, "inf") not in cells:
            continue
        fd, sd = _mean_sd(fds)
        base = _mean_sd(cells[name, "inf"])[0]
        gap = fd - ref
        where = "yes" if abs(gap) <= sd + ref_sd else ("no, above" if gap > 0 else "no, below")
        rows.append(
            f"| {name} | {label} | {fd:.2f} ± {sd:.2f} | {ref:.2f} ± {ref_sd:.2f} | {gap:+.2f} | "
            f"{where} | {fd / base:.1f}× | {ref / base:.1f}× |"
        )
    return rows


def unit_sphere(n: int, d: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed).standard_normal((n, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def projection_scale(z: np.ndarray, num_projections: int, reps: int = 20) -> tuple[float, float]:
    """Mean per-record bound ``C`` of ``num_projections`` directions, and the std of the private
    latents' projections (pooled over directions): the signal the noise ``m C`` is added to."""
    rng = np.random.default_rng(123)
    bounds, spreads = [], []
    for _ in range(reps):
        theta = sample_projections(rng, num_projections, z.shape[1])
        bounds.append(record_bound(theta, "operator_norm", 1e-9))
        spreads.append(float(np.mean(np.std(z @ theta.T, axis=0))))
    return float(np.mean(bounds)), float(np.mean(spreads))


def public_models(
    seed: int, quick: bool
) -> tuple[DigitSplits, latent.AutoEncoder, latent.Classifier]:
    """The splits and the public autoencoder (latent d = 8) and feature classifier."""
    splits = digit_splits(seed=seed)
    epochs = 15 if quick else 60
    ae = train_autoencoder(splits.public, 8, epochs=epochs, seed=seed)
    clf = train_classifier(splits.public, splits.public_labels, epochs=epochs, seed=seed)
    return splits, ae, clf


def common_options(p: argparse.ArgumentParser, epsilons: str, methods: Sequence[str]) -> None:
    """The options the digits scripts share: output folder, size, seeds, epsilons, methods."""
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--quick", action="store_true", help="few steps (smoke run)")
    p.add_argument("--seed", type=int, default=0, help="public models and the first run seed")
    p.add_argument("--seeds", type=int, default=3, help="number of run seeds per cell")
    p.add_argument("--epsilons", type=parse_epsilons, default=parse_epsilons(epsilons))
    p.add_argument("--methods", default=",".join(methods))


def checked_methods(
    ap: argparse.ArgumentParser, args: argparse.Namespace, allowed: Sequence[str]
) -> list[str]:
    """``--methods`` as a list, after checking it and ``--seeds`` (one line and exit 2 if bad)."""
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    methods = [m.strip() for m in args.methods.split(",")]
    unknown = sorted(set(methods) - set(allowed))
    if unknown:
        ap.error(f"unknown methods {unknown}; choose from {list(allowed)}")
    return methods


def cell_params(spec: Any, base: dict[str, object], eps: float | None) -> Any:
    """A method's parameters at ``eps`` (``None``: without privacy)."""
    values = dict(base) if eps is None else {**base, "target_epsilon": eps}
    return spec.make_params(values)


def run_cell(spec: Any, params: Any, z_private: np.ndarray, seed: int, private: bool) -> Any:
    """One verified run on the private latents; a private run's ledger must match its
    declaration exactly."""
    result = run_verified(spec, params, z_private, adjacency=ADJ, seed=seed)
    assert not private or result.ledger.matches_exactly()
    return result


def write_page(path: Path, lines: list[str], seconds: float, quick: bool) -> None:
    """Write ``lines`` and the total time to ``path`` and print the page."""
    total = f"Total time {seconds:.0f} s" + (" (quick run)" if quick else "")
    page = "\n".join([*lines, "", total]) + "\n"
    path.write_text(page)
    print(page, end="", flush=True)


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_options(p, EPSILONS, METHODS)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    methods = checked_methods(ap, args, METHODS)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print("training public models", flush=True)
    splits, ae, clf = public_models(args.seed, args.quick)
    z_private = latent.encode(ae, splits.private)
    z_test = latent.encode(ae, splits.test)
    feats_test = latent.features(clf, splits.test)

    def fd_of_latents(z: np.ndarray) -> float:
        return frechet_distance(feats_test, latent.features(clf, latent.decode(ae, z)))

    def swd_to_private(z: np.ndarray) -> float:
        z = z / np.linalg.norm(z, axis=1, keepdims=True)
        return sliced_wasserstein(z, z_private, num_projections=200, seed=1)

    n = z_private.shape[0]
    seeds = [args.seed + k for k in range(args.seeds)]
    sphere = [unit_sphere(500, z_private.shape[1], 10_000 + s) for s in seeds]
    sphere_fd = [fd_of_latents(z) for z in sphere]
    cells: dict[tuple[str, str], list[float]] = {}
    resample = [
        z_private[np.random.default_rng(20_000 + s).choice(n, 500, replace=True)] for s in seeds
    ]
    scale = {k: projection_scale(z_private, k) for k in (31, 70)}
    mean_c, spread = scale[70]
    rows = [
        "| method | epsilon (target) | certified epsilon | noise multiplier m (paper sigma = m/2) "
        "| noise std / projection spread | FD (features) | latent SWD | time (s) |",
        "|---|---|---|---|---|---|---|---|",
        f"| reference: private images | - | - | - | - | "
        f"{frechet_distance(feats_test, latent.features(clf, splits.private)):.3f} | - | - |",
        f"| reference: AE reconstructions of test | - | - | - | - | "
        f"{fd_of_latents(z_test):.3f} | {swd_to_private(z_test):.4f} | - |",
        f"| reference: 500-point resample of the private latents | - | - | - | - | "
        f"{summary([fd_of_latents(z) for z in resample], 3)} | "
        f"{summary([swd_to_private(z) for z in resample], 4)} | - |",
        f"| reference: uniform on the latent sphere (the flows' start) | - | - | - | - | "
        f"{summary(sphere_fd, 3)} | "
        f"{summary([swd_to_private(z) for z in sphere], 4)} | - |",
    ]
    for name, (spec, base) in configs(n, args.quick).items():
        if name not in methods:
            continue
        for eps in args.epsilons:
            params = cell_params(spec, base, eps)
            label = "inf" if eps is None else f"{eps:g}"
            fds, swds, times = [], [], []
            cert, m_txt, ratio = "inf", "-", "-"
            for seed in seeds:
                t = time.time()
                result = run_cell(spec, params, z_private, seed, private=eps is not None)
                samples = result.outputs["particles"]
                images = latent.decode(ae, samples)
                fds.append(frechet_distance(feats_test, latent.features(clf, images)))
                swds.append(swd_to_private(samples))
                times.append(time.time() - t)
                if eps is not None:
                    cert = f"{account(result.declared, ADJ, delta=DELTA).bound.epsilon:.3f}"
                    m = result.outputs["noise_multiplier"]
                    m_txt = f"{m:.3f}"
                    c_k, spread_k = scale[int(base["num_projections"])]  # type: ignore[call-overload]
                    ratio = f"{m * c_k / spread_k:.0f}"
                if seed == seeds[0]:
                    sample_grid(
                        images[:64],
                        args.out / f"digits_{name}_eps{label}.png",
                        title=f"{name}, epsilon={label}",
                    )
            cells[name, label] = fds
            rows.append(
                f"| {name} | {label} | {cert} | {m_txt} | {ratio} | {summary(fds, 2)} | "
                f"{summary(swds, 4)} | {np.mean(times):.1f} |"
            )
            print(rows[-1], flush=True)
    sample_grid(splits.test[:64], args.out / "digits_real.png", title="real (test split)")
    header = [
        "# Digits pipeline (scikit-learn 8x8 digits)",
        "",
        f"Splits: public {len(splits.public)} (autoencoder, latent d = 8, and classifier; "
        f"classifier test accuracy {latent.accuracy(clf, splits.test, splits.test_labels):.3f}), "
        f"private {n} (the flows), test {len(splits.test)} (FD reference). delta = {DELTA:g}, "
        "replace-one adjacency, batches of 50 without replacement. FD: Frechet distance between "
        "Gaussian fits of the classifier's 32-d hidden features of 500 decoded samples and of "
        "the test images (lower is better). Latent SWD: sliced W2 to the private latents. "
        f"Cells: mean ± sample sd (ddof = 1) (min–max) over {len(seeds)} run seeds "
        f"({', '.join(map(str, seeds))}); "
        "public models fixed (seed "
        f"{args.seed}); time: mean per run. Noise std / projection spread: m times the mean "
        f"per-record bound C (mean {mean_c:.2f} for 70 directions in d = 8, "
        f"{scale[31][0]:.2f} for 31) over the std {spread:.3f} of the private latents' "
        "projections on one direction.",
        "",
        "Regenerate: `python experiments/swflow/digits.py` runs every cell below from scratch "
        "(public models, references, the three methods at every epsilon and seed), writes this "
        "file and prints it; about 7 CPU-minutes on one thread (the total time at the end). The "
        "slow test `test_swflow_digits_regenerates_a_stored_cell` re-runs one cell the same way, "
        "DPSWflow-r at epsilon 10 with its 3 seeds, public models and reference rows "
        "(`--methods DPSWflow-r --epsilons 10`, about 20 s), and checks every printed digit "
        "of those rows against this file.",
        "",
    ]
    against = [
        "",
        "Each private FD against the no-information reference (uniform points on the latent "
        "sphere, the flows' start); mean ± sample sd over the seeds. 'within the two sds': "
        "|FD - reference| <= sd(FD) + sd(reference). FD / FD(inf): the cost of privacy relative "
        "to the method's own non-private run; reference / FD(inf): the same ratio for an output "
        "that carries no information about the data.",
        "",
        *reference_rows(cells, sphere_fd),
    ]
    write_page(args.out / "digits.md", [*header, *rows, *against], time.time() - t0, args.quick)


if __name__ == "__main__":
    main()

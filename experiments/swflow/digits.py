"""Digits pipeline: public autoencoder + classifier, the three methods on private latents.

    python experiments/swflow/digits.py [--out experiments/swflow/results] [--quick]

Writes ``digits.md`` (Frechet distance in the public classifier's feature space, latent SWD,
certified epsilon) and sample grids. epsilon in {inf, 10, 5}, delta = 1e-5, replace-one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.runner import run_verified
from dpledger.plugins.swflow import latent
from dpledger.plugins.swflow.data import digit_splits
from dpledger.plugins.swflow.metrics import frechet_distance, sample_grid, sliced_wasserstein
from dpledger.plugins.swflow.plugin import DPSWFLOW, DPSWFLOW_R, DPSWGEN

DELTA = 1e-5
EPSILONS: tuple[float | None, ...] = (None, 10.0, 5.0)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="few steps (smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print("training public models", flush=True)
    splits = digit_splits(seed=args.seed)
    ae = latent.train_autoencoder(splits.public, 8, epochs=15 if args.quick else 60, seed=args.seed)
    clf = latent.train_classifier(
        splits.public, splits.public_labels, epochs=15 if args.quick else 60, seed=args.seed
    )
    z_private = latent.encode(ae, splits.private)
    feats_test = latent.features(clf, splits.test)
    recon = latent.decode(ae, latent.encode(ae, splits.test))
    rows = [
        "| method | epsilon (target) | certified epsilon | noise multiplier m (paper sigma = m/2) "
        "| FD (features) | latent SWD | time (s) |",
        "|---|---|---|---|---|---|---|",
        f"| reference: private images | - | - | - | "
        f"{frechet_distance(feats_test, latent.features(clf, splits.private)):.3f} | - | - |",
        f"| reference: AE reconstructions of test | - | - | - | "
        f"{frechet_distance(feats_test, latent.features(clf, recon)):.3f} | - | - |",
    ]
    n = z_private.shape[0]
    for name, (spec, base) in configs(n, args.quick).items():
        for eps in EPSILONS:
            values = dict(base)
            if eps is not None:
                values["target_epsilon"] = eps
            params = spec.make_params(values)  # type: ignore[attr-defined]
            t = time.time()
            result = run_verified(spec, params, z_private, adjacency=ADJ, seed=args.seed)  # type: ignore[arg-type]
            assert eps is None or result.ledger.matches_exactly()
            samples = result.outputs["particles"]
            images = latent.decode(ae, samples)
            fd = frechet_distance(feats_test, latent.features(clf, images))
            swd = sliced_wasserstein(
                samples / np.linalg.norm(samples, axis=1, keepdims=True),
                z_private,
                num_projections=200,
                seed=1,
            )
            if eps is None:
                cert, m_txt = "inf", "-"
            else:
                cert = f"{account(result.declared, ADJ, delta=DELTA).bound.epsilon:.3f}"
                m_txt = f"{result.outputs['noise_multiplier']:.3f}"
            label = "inf" if eps is None else f"{eps:g}"
            rows.append(
                f"| {name} | {label} | {cert} | {m_txt} | {fd:.3f} | {swd:.4f} | "
                f"{time.time() - t:.1f} |"
            )
            sample_grid(
                images[:64],
                args.out / f"digits_{name}_eps{label}.png",
                title=f"{name}, epsilon={label}",
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
        "the test images (lower is better). Latent SWD: sliced W2 to the private latents.",
        "",
    ]
    footer = ["", f"Total time {time.time() - t0:.0f} s" + (" (quick run)" if args.quick else "")]
    (args.out / "digits.md").write_text("\n".join(header + rows + footer) + "\n")


if __name__ == "__main__":
    main()

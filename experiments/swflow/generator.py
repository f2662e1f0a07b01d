"""Which failure the generator's samples show: fidelity, diversity and class balance.

    python experiments/swflow/generator.py [--out experiments/swflow/results] [--quick]
        [--seeds 3] [--epsilons inf,1000,100,30,10,5,2,1] [--methods DPSWgen,DPSWflow-r]
        [--early-steps 40,160]

Runs the digits pipeline's DPSWgen and DPSWflow-r cells (the same public models, settings and
run seeds as ``digits.py``, and three weaker privacy levels at which the release noise comes
near the signal) and measures their 500 samples against the 808 private latents:

* precision and recall (Kynkäänniemi et al., 2019) and density and coverage (Naeem et al.,
  2020), with ``k = 5`` nearest neighbours on the latent sphere (the ``prdc`` package).
  Low precision: samples off the data; low recall or coverage: parts of the data missed;
* the classes the public classifier assigns to the decoded samples: how many digits get at
  least 2 % of them, the largest class's share, and the total-variation distance to the
  classes it assigns to the private images. Collapse onto few shapes shows as few classes and
  a large share.

The generator is also measured before training (its initialisation, with its BatchNorm
statistics taken over input noise, as training would) and after its first non-private steps
(``--early-steps``; fewer steps than the run's leave its BatchNorm running statistics behind its
weights). Writes ``generator.md`` and prints it. Cells: mean ± sample sd (ddof = 1) over the run
seeds. The
references give each measure's range: the test split's latents (held-out data) and uniform
points on the sphere (no information); a resample of the private latents has precision and
density 1 by construction (its points are private points).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from prdc import compute_prdc

from dpledger.plugins.swflow import latent
from dpledger.plugins.swflow.generator import Generator

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared modules are beside the folders
    sys.path.insert(0, str(ROOT))

from experiments.sections import OneLineParser  # noqa: E402
from experiments.swflow.digits import (  # noqa: E402
    cell_params,
    checked_methods,
    common_options,
    configs,
    projection_scale,
    public_models,
    run_cell,
    unit_sphere,
    write_page,
)

METHODS = ("DPSWgen", "DPSWflow-r")
#: the digits page's privacy levels and three weaker ones, where the noise nears the signal
EPSILONS = "inf,1000,100,30,10,5,2,1"
NEAREST_K = 5
#: a class counts as present when it receives at least this share of the samples
PRESENT = 0.02
MEASURES = (
    "precision",
    "recall",
    "density",
    "coverage",
    "classes >= 2 %",
    "largest class share",
    "TV to private classes",
)


def on_sphere(z: np.ndarray) -> np.ndarray:
    return np.asarray(z / np.linalg.norm(z, axis=1, keepdims=True), dtype=np.float64)


def class_shares(clf: latent.Classifier, images: np.ndarray) -> np.ndarray:
    """Share of the images the public classifier assigns to each of the ten digits."""
    with torch.no_grad():
        labels = clf(torch.from_numpy(images)).argmax(1).numpy()
    return np.bincount(labels, minlength=10) / len(labels)


def measures(
    z: np.ndarray, z_private: np.ndarray, shares_private: np.ndarray, ae: object, clf: object
) -> list[float]:
    """The table's measures of one sample of latents against the private latents."""
    with contextlib.redirect_stdout(io.StringIO()):  # prdc prints the sample sizes
        pr = compute_prdc(z_private, on_sphere(z), nearest_k=NEAREST_K)
    shares = class_shares(clf, latent.decode(ae, z))  # type: ignore[arg-type]
    return [
        float(pr["precision"]),
        float(pr["recall"]),
        float(pr["density"]),
        float(pr["coverage"]),
        float((shares >= PRESENT).sum()),
        float(shares.max()),
        float(0.5 * np.abs(shares - shares_private).sum()),
    ]


def untrained_samples(base: dict[str, object], out_dim: int, seed: int) -> np.ndarray:
    """500 samples of a DPSWgen generator at its initialisation. Its BatchNorm running statistics
    are first taken over 50 batches of input noise (the training batch size), in training mode
    and without gradients, so the weights are the initial ones and no data is read."""
    noise_dim, hidden, batch = (int(base[k]) for k in ("noise_dim", "hidden", "batch_size"))  # type: ignore[call-overload]
    torch.manual_seed(seed)
    model = Generator(noise_dim, out_dim, hidden, normalize_output=True).to(torch.float64)
    draws = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.train()
        for _ in range(50):
            model(torch.randn((batch, noise_dim), generator=draws, dtype=torch.float64))
        model.eval()
        out = model(torch.randn((500, noise_dim), generator=draws, dtype=torch.float64))
    return np.asarray(out.numpy())


def row(label: str, eps: str, ratio: str, runs: list[list[float]]) -> str:
    v = np.asarray(runs, dtype=np.float64)
    cells = []
    for k in range(v.shape[1]):
        digits = 1 if MEASURES[k].startswith("classes") else 3
        mean = v[:, k].mean()
        cells.append(
            f"{mean:.{digits}f}"
            if len(v) == 1
            else f"{mean:.{digits}f} ± {v[:, k].std(ddof=1):.{digits}f}"
        )
    return f"| {label} | {eps} | {ratio} | " + " | ".join(cells) + " |"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_options(p, EPSILONS, METHODS)
    p.add_argument(
        "--early-steps",
        type=parse_steps,
        default=parse_steps("40,160"),
        help="the non-private generator also after these few steps, each fewer than the run's "
        "('' for none)",
    )
    return p


def parse_steps(text: str) -> list[int]:
    """``"1,10"`` -> ``[1, 10]``; each a positive whole number."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        if not item.isdigit() or int(item) < 1:
            raise argparse.ArgumentTypeError(f"steps must be whole numbers >= 1, got {item!r}")
        out.append(int(item))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    methods = checked_methods(ap, args, METHODS)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    splits, ae, clf = public_models(args.seed, args.quick)
    z_private = latent.encode(ae, splits.private)
    z_sphere = on_sphere(z_private)
    shares_private = class_shares(clf, splits.private)
    n = z_private.shape[0]
    seeds = [args.seed + k for k in range(args.seeds)]
    scale = {k: projection_scale(z_private, k) for k in (70,)}

    def of(z: np.ndarray) -> list[float]:
        return measures(z, z_sphere, shares_private, ae, clf)

    resample = [
        z_private[np.random.default_rng(20_000 + s).choice(n, 500, replace=True)] for s in seeds
    ]
    rows = [
        "| samples | epsilon | noise std / projection spread | " + " | ".join(MEASURES) + " |",
        "|---|---|---|" + "---|" * len(MEASURES),
        row(
            "reference: 500-point resample of the private latents",
            "-",
            "-",
            [of(z) for z in resample],
        ),
        row("reference: test split's latents", "-", "-", [of(latent.encode(ae, splits.test))]),
        row(
            "reference: uniform on the latent sphere",
            "-",
            "-",
            [of(unit_sphere(500, z_private.shape[1], 10_000 + s)) for s in seeds],
        ),
    ]
    for name, (spec, base) in configs(n, args.quick).items():
        if name not in methods:
            continue
        for eps in args.epsilons:
            params = cell_params(spec, base, eps)
            runs, ratio = [], "-"
            for seed in seeds:
                result = run_cell(spec, params, z_private, seed, private=eps is not None)
                runs.append(of(result.outputs["particles"]))
                if eps is not None:
                    c, spread = scale[int(base["num_projections"])]  # type: ignore[call-overload]
                    ratio = f"{result.outputs['noise_multiplier'] * c / spread:.1f}"
            rows.append(row(name, "inf" if eps is None else f"{eps:g}", ratio, runs))
            print(rows[-1], flush=True)
    if "DPSWgen" in methods:
        spec, base = configs(n, args.quick)["DPSWgen"]
        total = int(base["num_steps"])  # type: ignore[call-overload]
        runs = [of(untrained_samples(base, z_private.shape[1], 30_000 + s)) for s in seeds]
        rows.append(row("DPSWgen, untrained (initialisation)", "-", "-", runs))
        print(rows[-1], flush=True)
        for steps in [s for s in args.early_steps if s < total]:
            params = cell_params(spec, {**base, "num_steps": steps}, None)
            runs = [
                of(run_cell(spec, params, z_private, s, private=False).outputs["particles"])
                for s in seeds
            ]
            rows.append(
                row(f"DPSWgen, non-private, after {steps} of {total} steps", "inf", "-", runs)
            )
            print(rows[-1], flush=True)
    shares = ", ".join(f"{d}: {s:.3f}" for d, s in enumerate(shares_private))
    header = [
        "# Digits pipeline: fidelity, diversity and class balance of the samples",
        "",
        f"Private latents: {n} (d = 8, on the unit sphere); samples: 500 per run. Precision, "
        f"recall, density and coverage with k = {NEAREST_K} on the sphere (`prdc`). Classes: "
        "the public classifier's labels of the decoded samples; a class is present with at "
        f"least {PRESENT:.0%} of them; TV: total-variation distance to the labels it gives the "
        f"private images ({shares}). Cells: mean ± sample sd (ddof = 1) over {len(seeds)} "
        "run seeds "
        f"({', '.join(map(str, seeds))}), the run seeds of `digits.md`; public models fixed "
        f"(seed {args.seed}). The resample of the private latents has precision and density 1 "
        "by construction (its points are private points); the test split's latents are the "
        "held-out reference. The untrained generator's BatchNorm statistics are taken over "
        "50 batches of its input noise. Noise std / projection spread: as in `digits.md`, m "
        "times the "
        "mean per-record bound C over the std of the private latents' projections. Regenerate: "
        "`python experiments/swflow/generator.py`.",
        "",
    ]
    write_page(args.out / "generator.md", [*header, *rows], time.time() - t0, args.quick)


if __name__ == "__main__":
    main()

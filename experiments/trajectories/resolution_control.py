"""Resolution control for Table 1: does the time resolution T change W2^2 on the same persons?

Table 1 of the trajectory paper uses T = 10 time points for every digit, while the stroke
subset beside the repository fixes T = 15 for digits 2, 3, 6 and 9 (the Table 2 setting), and
our digit-6 W2^2 is 2.4x below the paper's. This script runs the Table 1 pipeline of
``table1.py`` (m = 50, K = 20, eta = 0.001, C = 1, rho = 20/N, warm start, same sigma/lambda
defaults) on marginals built from the 300 *full* trajectories ``traj_d`` of a digit:

* ``T = 15`` as stored, and ``T = 10`` by re-resampling every 15-point trajectory linearly in
  the normalised point index (the rule the subset itself used on the raw strokes). Resampling
  the 15-point polyline only approximates resampling the raw strokes: raw points between two
  stored points are replaced by the chord between them.
* Marginals are formed from the *same persons* at both T: every person contributes its point
  at every time, so each marginal holds N = 300 points (``all``), or only the single-stroke
  persons (``nstrokes == 1``, variant ``single-stroke``), or a random subset of the same size
  (``random-subset``, which separates the stroke filter from the smaller N: with rho = 20/N
  the calibrated noise multiplier, and with it the Langevin diffusivity D = tau, grows as N
  shrinks). This is a utility control, not the paper's one-point-per-person setting: a person
  now sits in all T marginals, so the printed privacy guarantee is the user-level one (the
  T-fold composition of one marginal's releases), far weaker than Table 1's event-level
  (1, 5e-4) per phase.
* ``binned`` emulates the paper's "one datapoint after binning" read as: split each stroke
  sequence into ``T`` consecutive bins of its normalised position, ``[i/T, (i+1)/T]``, and take
  a uniformly random point inside bin ``i`` (not the point at the exact position ``i/(T-1)``).
  The raw strokes are not available, so the point is interpolated linearly on the stored
  polyline (stored point ``k`` of ``T0`` at normalised position ``k/(T0-1)``). The positions
  are drawn with a fixed public seed (``--bin-seed``), independently of the data; every person
  contributes at every time, as in ``all`` (same user-level guarantee).
* For reference, the event-level marginals ``marg_d`` (paper setting, stored T only) are run
  unchanged through ``table1.run_digit``.

Every configuration runs with several seeds (noise and sampling); the table gives mean +- sd
and the oracle: the mean over times of the squared W2 between a marginal and m i.i.d.
draws from it (a reference, not a lower bound: optimised m-point clouds are closer).

Usage::

    python experiments/trajectories/resolution_control.py --data PATH/mnist_strokes_subset.npz \
        [--digits 6 3] [--T 15 10] [--seeds 0 1 2] [--variants all binned] [--bin-seed 2024] \
        [--out RESOLUTION_CONTROL_table.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.data import (
    TrajectoryData,
    uniform_times,
    validate_marginals,
)
from dpledger.plugins.trajectories.declare import TrajectoryParams, WarmStart, declare_marginals
from dpledger.plugins.trajectories.metrics import w2

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared modules are beside the folders
    sys.path.insert(0, str(ROOT))

from experiments.trajectories.mnist_strokes import load_mnist_strokes  # noqa: E402


def _table1() -> ModuleType:
    """``table1.py`` beside this file (the experiments folder is not a package)."""
    path = Path(__file__).resolve().with_name("table1.py")
    spec = importlib.util.spec_from_file_location("trajectories_table1", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


table1 = _table1()
VARIANTS: tuple[str, ...] = ("event-level", "all", "single-stroke", "random-subset", "binned")
#: public seed of the person subset in the ``random-subset`` variant (data-independent)
SUBSET_SEED = 12345
#: default public seed of the within-bin positions in the ``binned`` variant (data-independent)
BIN_SEED = 2024


def _check(traj: np.ndarray, T: int) -> np.ndarray:
    """``traj`` as float64 ``[n, T0, d]`` with ``T0 >= 2``; ``T`` an integer >= 2."""
    arr = np.asarray(traj, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1] < 2:
        raise InvalidParameterError(
            "traj",
            f"must have shape [n, T0, d] with T0 >= 2, got {arr.shape}",
            "pass full trajectories [n, T0, d]",
        )
    if isinstance(T, bool) or not isinstance(T, int | np.integer) or T < 2:
        raise InvalidParameterError("T", f"must be an integer >= 2, got {T!r}", "pass T >= 2")
    return arr


def interpolate_index(arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Points of polylines ``arr [n, T0, d]`` at fractional point indices ``idx`` in [0, T0-1].

    ``idx`` is ``[T]`` (shared by all persons) or ``[n, T]``; integer indices return the stored
    points exactly. The result has shape ``[n, T, d]``.
    """
    n, T0 = arr.shape[:2]
    pos = np.broadcast_to(idx, (n, np.shape(idx)[-1]))
    lo = np.clip(np.floor(pos).astype(int), 0, T0 - 2)
    w = (pos - lo)[..., None]
    rows = np.arange(n)[:, None]
    out: np.ndarray = (1.0 - w) * arr[rows, lo] + w * arr[rows, lo + 1]
    return out


def resample_index(traj: np.ndarray, T: int) -> np.ndarray:
    """Resample trajectories ``[n, T0, d]`` to ``T`` points, linearly in the normalised index.

    Point ``i`` of the output sits at normalised index ``i / (T - 1)`` of the input polyline
    (input point ``k`` at ``k / (T0 - 1)``); the first and last points are kept exactly.
    """
    arr = _check(traj, T)
    T0 = arr.shape[1]
    pos = np.arange(int(T)) * (T0 - 1) / (int(T) - 1)  # exact where a stored point is hit
    return interpolate_index(arr, pos)


def bin_positions(n: int, T: int, seed: int) -> np.ndarray:
    """Normalised positions ``[n, T]``: entry ``(j, i)`` uniform in bin ``[i/T, (i+1)/T)``."""
    rng = np.random.default_rng(seed)
    return (np.arange(int(T))[None, :] + rng.random((n, int(T)))) / int(T)


def sample_binned(traj: np.ndarray, T: int, seed: int) -> np.ndarray:
    """One uniformly random point per bin and person: ``[n, T0, d]`` -> ``[n, T, d]``.

    Bin ``i`` covers the normalised positions ``[i/T, (i+1)/T]`` of each polyline (stored point
    ``k`` at ``k / (T0 - 1)``); the point is interpolated linearly between stored points. This
    emulates binning the raw stroke sequence into ``T`` consecutive index bins.
    """
    arr = _check(traj, T)
    return interpolate_index(arr, bin_positions(len(arr), T, seed) * (arr.shape[1] - 1))


def all_points_data(
    paths: np.ndarray, T: int, base: TrajectoryData, bin_seed: int | None = None
) -> TrajectoryData:
    """Marginals in which every person gives its point at every one of ``T`` times.

    The point is at the exact position ``i/(T-1)``, or, with ``bin_seed``, a random point of
    bin ``i`` (:func:`sample_binned`).
    """
    traj = resample_index(paths, T) if bin_seed is None else sample_binned(paths, T, bin_seed)
    marginals = validate_marginals(list(traj.transpose(1, 0, 2)), base.radius, base.center)
    return TrajectoryData(marginals, traj, uniform_times(T), base.radius, base.center)


def load_variant(
    data: Path, digit: int, variant: str, T: int, bin_seed: int = BIN_SEED
) -> TrajectoryData:
    """The marginals of one (digit, variant, T) configuration."""
    base = load_mnist_strokes(data, digit)
    if variant == "event-level":
        if len(base.marginals) != T:
            raise InvalidParameterError(
                "T",
                f"the event-level marginals of digit {digit} exist only at "
                f"T = {len(base.marginals)}, got {T}",
                "run event-level at the stored T",
            )
        return base
    if variant == "all":
        return all_points_data(base.paths, T, base)
    if variant == "binned":
        return all_points_data(base.paths, T, base, bin_seed)
    if variant in ("single-stroke", "random-subset"):
        with np.load(data) as z:
            keep = np.asarray(z[f"nstrokes_{digit}"]) == 1
        if variant == "random-subset":
            rng = np.random.default_rng(SUBSET_SEED)
            keep = np.isin(
                np.arange(len(keep)), rng.choice(len(keep), int(keep.sum()), replace=False)
            )
        return all_points_data(base.paths[keep], T, base)
    raise InvalidParameterError("variant", f"unknown {variant!r}", f"use one of {list(VARIANTS)}")


def oracle_w2sq(marginals: list[np.ndarray], m: int, seed: int, reps: int = 5) -> float:
    """Mean over times and draws of the squared W2 between a marginal and m i.i.d. draws."""
    rng = np.random.default_rng(seed)
    return float(
        np.mean(
            [
                w2(x, x[rng.choice(len(x), min(m, len(x)), replace=False)]) ** 2
                for x in marginals
                for _ in range(reps)
            ]
        )
    )


def user_level_epsilon(d: TrajectoryData, tau: float, args: argparse.Namespace) -> float:
    """Certified epsilon at delta = 2 * args.delta when every person sits in all T marginals."""
    N, T = len(d.marginals[0]), len(d.marginals)
    p = TrajectoryParams(
        m=args.m,
        K=args.K,
        tau=tau,
        C=args.C,
        rho=min(1.0, args.batch / N),
        eta=args.eta,
        lambda_=args.lambda_,
        sigma=args.sigma,
        diffusivity=args.diffusivity,
        radius=d.radius,
        center=d.center,
        warm_start=WarmStart("mean", epsilon=args.eps, delta=args.delta, spread=args.spread),
    )
    adj = Adjacency(unit="user", unit_key="person", contribution="time_points", max_contributions=T)
    dec = declare_marginals(p, adj, N, T)
    return float(account(dec.event, dec.account_adjacency, delta=2 * args.delta).bound.epsilon)


def run_config(digit: int, variant: str, T: int, args: argparse.Namespace) -> dict[str, Any]:
    """All seeds of one configuration through ``table1.run_data``; one summary row."""
    t0 = time.time()
    d = load_variant(args.data, digit, variant, T, args.bin_seed)
    rows = []
    for seed in args.seeds:
        run_args = argparse.Namespace(**{**vars(args), "seed": seed, "figure_dir": None})
        rows.append(table1.run_data(d, digit, run_args))
        print({k: round(v, 4) for k, v in rows[-1].items()}, flush=True)
    tau = rows[0]["tau"]
    eps = rows[0]["eps_total"] if variant == "event-level" else user_level_epsilon(d, tau, args)
    init = np.array([r["w2sq_init"] for r in rows])
    ours = np.array([r["w2sq"] for r in rows])
    return {
        "digit": digit,
        "variant": variant,
        "T": T,
        "N": len(d.marginals[0]),
        "tau": tau,
        "eps": eps,
        "unit": "row" if variant == "event-level" else "user",
        "init": (init.mean(), init.std(ddof=1) if len(init) > 1 else 0.0),
        "ours": (ours.mean(), ours.std(ddof=1) if len(ours) > 1 else 0.0),
        "oracle": oracle_w2sq(d.marginals, args.m, args.seeds[0]),
        "paper": table1.PAPER_W2[digit],
        "seconds": time.time() - t0,
    }


def _pm(v: tuple[float, float]) -> str:
    return f"{v[0]:.4f} ± {v[1]:.4f}"


def _ratio_rows(by: dict[tuple[int, str, int], dict[str, Any]]) -> list[str]:
    """``| digit | label | ratios |`` rows: lower T over higher T, and ``binned`` over ``all``."""
    pairs = []  # (numerator, denominator, label)
    for (digit, variant, T), r in by.items():
        pairs += [
            (r2, r, digit, f"{variant}, T {T2}/{T}")
            for (d2, v2, T2), r2 in by.items()
            if (d2, v2) == (digit, variant) and T2 < T
        ]
        if variant == "binned" and (digit, "all", T) in by:
            pairs.append((r, by[(digit, "all", T)], digit, f"binned/all, T {T}"))
    return [
        f"| {digit} | {label} | {a['ours'][0] / b['ours'][0]:.2f} | "
        f"{a['init'][0] / b['init'][0]:.2f} | {a['oracle'] / b['oracle']:.2f} |\n"
        for a, b, digit, label in pairs
    ]


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Markdown: one row per configuration, then ratios (T, and binned over all)."""
    head = (
        f"| digit | variant | T | N | tau | eps total @ delta={2 * args.delta:g} (unit) | "
        "W2^2 warm start | W2^2 ours | oracle W2^2 (m iid) | paper (T=10) | "
        "ours / paper | s |\n|" + "---|" * 12 + "\n"
    )
    body = "".join(
        f"| {r['digit']} | {r['variant']} | {r['T']} | {r['N']} | {r['tau']:.3f} | "
        f"{r['eps']:.2f} ({r['unit']}) | {_pm(r['init'])} | {_pm(r['ours'])} | "
        f"{r['oracle']:.4f} | {r['paper']} | {r['ours'][0] / r['paper']:.2f} | "
        f"{r['seconds']:.0f} |\n"
        for r in rows
    )
    ratios = _ratio_rows({(r["digit"], r["variant"], r["T"]): r for r in rows})
    ratio_text = (
        (
            "\n| digit | ratio | W2^2 ours ratio | W2^2 warm start ratio "
            "| oracle ratio |\n|---|---|---|---|---|\n" + "".join(ratios)
        )
        if ratios
        else ""
    )
    return head + body + ratio_text


def parser() -> argparse.ArgumentParser:
    ap: argparse.ArgumentParser = table1.parser()
    ap.description = (__doc__ or "").splitlines()[0]
    ap.set_defaults(digits=[6, 3], seeds=[0, 1, 2])
    ap.add_argument("--T", type=int, nargs="+", default=[15, 10], dest="T_values")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--bin-seed", type=int, default=BIN_SEED, help="within-bin positions")
    return ap


def configs(args: argparse.Namespace) -> list[tuple[int, str, int]]:
    """(digit, variant, T) to run; event-level only at the digit's stored T."""
    out = []
    for digit in args.digits:
        stored = len(load_mnist_strokes(args.data, digit).marginals)
        for variant in args.variants:
            for T in args.T_values:
                if variant != "event-level" or stored == T:
                    out.append((digit, variant, T))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    rows = [run_config(digit, variant, T, args) for digit, variant, T in configs(args)]
    hidden = ("seed", "figure_dir", "data", "out")
    settings = {k: v for k, v in vars(args).items() if k not in hidden}
    text = table(rows, args) + f"\ntotal {time.time() - t0:.0f} s; settings: {settings}\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

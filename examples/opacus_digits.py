"""DP-SGD on scikit-learn's digits with Opacus, batched two ways, and what each run spent.

The same logistic regression is trained twice with the same noise multiplier, clipping norm,
batch size and number of epochs: once with Opacus's Poisson sampling (``poisson_sampling=True``)
and once with a plain shuffled ``DataLoader`` of fixed-size batches
(``poisson_sampling=False``). Opacus reports the same epsilon for both. dpledger accounts what
each run did and writes a run directory per run, readable by ``dpledger report DIR``.

    python examples/opacus_digits.py --out runs/digits
    dpledger report runs/digits/shuffled
    dpledger audit --opacus examples/opacus_digits.py --one-run --delta 1e-5

The last line audits the Poisson run in one run with 1000 gradient canaries
(:func:`opacus_training` is the form the audit reads).

Needs torch, opacus and scikit-learn; runs on CPU in a few seconds, without network access.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

import torch
from opacus import PrivacyEngine
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpledger.integrations.opacus import OpacusTracker

# Opacus warns that its default noise generator is not cryptographically secure
warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG turned off.*")
# the inputs need no gradient; Opacus's per-sample hooks note it
warnings.filterwarnings("ignore", message="Full backward hook is firing")


def make_private(args: argparse.Namespace, *, poisson: bool) -> tuple[Any, Any, Any, Any]:
    """The model, optimizer and data loader of one DP-SGD run, and its privacy engine."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a tiny model: threads cost more than they save
    features, labels = load_digits(return_X_y=True)
    x = torch.tensor(features / 16.0, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.long)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    model = nn.Linear(x.shape[1], 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    engine = PrivacyEngine(accountant=args.accountant)
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=args.sigma,
        max_grad_norm=args.max_grad_norm,
        poisson_sampling=poisson,
    )
    # the gradient is averaged over the public batch size, not over Opacus's default
    # int(q * len(dataset)), which depends on the dataset size (private under add/remove)
    optimizer.expected_batch_size = args.batch_size
    return model, optimizer, loader, engine


def train_epochs(epochs: int) -> Any:
    """The training loop: ``epochs`` passes over the data loader."""

    def loop(model: Any, optimizer: Any, loader: Any) -> None:
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss_fn(model(xb), yb).backward()
                optimizer.step()

    return loop


def train(args: argparse.Namespace, *, poisson: bool) -> OpacusTracker:
    """One DP-SGD run; returns its tracker."""
    model, optimizer, loader, engine = make_private(args, poisson=poisson)
    tracker = OpacusTracker.attach(engine, optimizer, loader, public_normaliser=args.batch_size)
    train_epochs(args.epochs)(model, optimizer, loader)
    x, y = loader.dataset.tensors
    with torch.no_grad():
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    print(f"training accuracy ({'Poisson' if poisson else 'shuffled'}): {accuracy:.3f}")
    return tracker


def opacus_training() -> tuple[Any, Any, Any, Any]:
    """The Poisson run with the default settings, in the form ``dpledger audit --opacus
    examples/opacus_digits.py --one-run`` audits: what make_private returned, and the loop."""
    args = _parser().parse_args([])
    model, optimizer, loader, _ = make_private(args, poisson=True)
    return model, optimizer, loader, train_epochs(args.epochs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("opacus-digits-runs"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sigma", type=float, default=1.0, help="noise multiplier")
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--accountant", default="prv", choices=["prv", "rdp"])
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Any = None) -> int:
    args = _parser().parse_args(argv)
    for name, poisson in (("poisson", True), ("shuffled", False)):
        tracker = train(args, poisson=poisson)
        result = tracker.result(args.delta)
        print(result.summary())
        out = tracker.write_run(args.out / name, args.delta)
        print(f"wrote {out} (dpledger report {out})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

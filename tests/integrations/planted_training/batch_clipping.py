"""Clipping the batch's gradient instead of each sample's, in a hand-assembled DP-SGD loop.

The optimizer subclass sums the per-sample gradients and clips the sum to the norm: a record's
contribution is no longer bounded by it, though the noise is scaled as if it were.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import GradSampleModule, PrivacyEngine
from opacus.optimizers import DPOptimizer
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model, train


class BatchClippingOptimizer(DPOptimizer):
    def clip_and_accumulate(self) -> None:
        sums = [g.reshape(len(g), -1).sum(0) for g in self.grad_samples]
        total = torch.sqrt(sum(s.pow(2).sum() for s in sums))
        factor = min(1.0, self.max_grad_norm / (float(total) + 1e-6))
        for p, g in zip(self.params, self.grad_samples, strict=True):
            p.summed_grad = g.sum(0) * factor


def main() -> Any:
    net = GradSampleModule(model())
    loader = DataLoader(data(64), batch_size=16, shuffle=True)
    optimizer = BatchClippingOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.1),
        noise_multiplier=1.0,
        max_grad_norm=0.1,
        expected_batch_size=16,
    )
    engine = PrivacyEngine()
    optimizer.attach_step_hook(engine.accountant.get_optimizer_hook_fn(sample_rate=1 / len(loader)))
    tracker = OpacusTracker.attach(engine, optimizer, loader, module=net)
    train(net, optimizer, loader, limit=2)
    return tracker

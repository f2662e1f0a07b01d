"""A run booked for its naive count of noisy steps that sums several logical batches under one
noise draw from some step on (virtual steps, ``signal_skip_step``).

``main(budget, schedule, seen)`` trains on Poisson batches of q = 0.1 at multiplier 1: noisy
step i sums ``schedule[i]`` logical batches. It returns the tracker; ``seen`` gets the live
parameters (``"now"``) and their copies taken before each noisy step (``"before"``). The
budget guard raises from ``optimizer.step`` at the first step whose accounted batches the
booking does not cover.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import OpacusTracker
from tests.integrations.planted_training._common import data, model

N, BATCH = 200, 20


def main(budget: Any, schedule: Sequence[int], seen: dict[str, list[Any]]) -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    optimizer.expected_batch_size = BATCH  # a public normaliser
    tracker = OpacusTracker.attach(
        engine, optimizer, loader, budget=budget, public_normaliser=BATCH
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = iter(loader)
    seen["now"], seen["before"] = list(net.parameters()), []
    for k in schedule:
        seen["before"].append([p.detach().clone() for p in net.parameters()])
        for j in range(k):
            xb, yb = next(batches)
            optimizer.signal_skip_step(do_skip=j < k - 1)
            loss_fn(net(xb), yb).backward()
            optimizer.step()
            optimizer.zero_grad()  # keeps the gradients of a skipped step
    return tracker

"""Four logical batches under one noise draw: virtual steps across logical batches.

The loop skips the noise on three Poisson batches of four (signal_skip_step) and takes one
noisy step on the fourth: Opacus's accountant counts one step at q per noisy step, a quarter
of the batches that ran.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model

N, BATCH, ACCUMULATE, PUBLIC = 200, 20, 4, 20


def main() -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        public_normaliser=PUBLIC,
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    for i, (xb, yb) in enumerate(loader):
        optimizer.signal_skip_step(do_skip=(i + 1) % ACCUMULATE != 0)
        loss_fn(net(xb), yb).backward()
        optimizer.step()
        optimizer.zero_grad()
    return tracker

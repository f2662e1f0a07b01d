"""Ghost clipping with the plain loss: make_private's DP criterion is not used.

With grad_sample_mode="ghost", clipping happens in the second backward pass of the criterion
make_private returns; calling backward on a plain loss leaves the gradient unclipped, and the
optimizer only adds noise.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model


def main() -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, _criterion, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        criterion=torch.nn.CrossEntropyLoss(),
        data_loader=DataLoader(data(64), batch_size=16, shuffle=True),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
        grad_sample_mode="ghost",
    )
    plain = torch.nn.CrossEntropyLoss()
    for i, (xb, yb) in enumerate(loader):
        if i >= 2:
            break
        optimizer.zero_grad()
        plain(net(xb), yb).backward()
        optimizer.step()
    return tracker

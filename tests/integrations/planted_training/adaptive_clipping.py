"""Adaptive clipping (AdaClipDPOptimizer) with Poisson sampling, as make_private builds it.

Its update divides the noisy count of unclipped records by the batch's actual size, which is
private under Poisson sampling; the count itself is a second Gaussian release per step.
"""

from __future__ import annotations

from typing import Any

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader

from dpledger.integrations.opacus import make_private
from tests.integrations.planted_training._common import data, model, train

SIGMA, COUNT_STD, N, BATCH = 1.0, 2.0, 200, 20


def main(*, limit: int | None = 3) -> Any:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader, tracker = make_private(
        engine,
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=SIGMA,
        max_grad_norm=1.0,
        clipping="adaptive",
        target_unclipped_quantile=0.5,
        clipbound_learning_rate=0.2,
        max_clipbound=10.0,
        min_clipbound=0.1,
        unclipped_num_std=COUNT_STD,
        public_normaliser=BATCH,
    )
    train(net, optimizer, loader, limit=limit)
    return tracker

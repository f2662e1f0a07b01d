"""The exponential mechanism's RDP curves found together equal the one-by-one curves bit for
bit (the RDP backend finds many distinct ones at once)."""

from __future__ import annotations

import numpy as np

from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.rdp_orders import (
    bounded_range_rdp,
    bounded_range_rdp_rows,
    default_orders,
)
from dpledger.core.events import ComposedEvent, ExponentialMechanismEvent


def test_rows_equal_one_by_one_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    epsilons = [float(e) for e in 10.0 ** rng.uniform(-160, 2.5, 400)]
    epsilons += [0.0, 1e-150, 1e-145, 2.8e-145, 1e-3, 0.01, 0.0101, 1.0, 5.0, 50.0, 700.0]
    epsilons += [1e300, float("inf"), float("nan")]
    orders = default_orders()
    rows = bounded_range_rdp_rows(orders, epsilons)
    for eps, row in zip(epsilons, rows, strict=True):
        one = bounded_range_rdp(orders, eps)
        assert np.array_equal(row.view(np.int64), one.view(np.int64)), eps


def test_rows_of_other_orders() -> None:
    orders = np.array([1.0001, 1.5, 2.0, 7.0, 1e6, float("nan")])
    epsilons = [0.3, 2e-7, 30.0]
    rows = bounded_range_rdp_rows(orders, epsilons)
    for eps, row in zip(epsilons, rows, strict=True):
        assert np.array_equal(row.view(np.int64), bounded_range_rdp(orders, eps).view(np.int64))


def test_backend_curve_unchanged() -> None:
    leaves = [ExponentialMechanismEvent(0.01 * (1 + i / 50)) for i in range(50)]
    acc = RDPAccountant()
    acc.compose(ComposedEvent(leaves))
    total = np.zeros_like(acc.orders)
    for leaf in leaves:
        total = total + 1.0 * bounded_range_rdp(acc.orders, float(leaf.epsilon))
    total = total * (1 + 4 * 2.0**-53 * 50)
    assert np.array_equal(acc.rdp(), total)

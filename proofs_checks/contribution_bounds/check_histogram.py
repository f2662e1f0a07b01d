"""Numeric checks of the histogram's sensitivity and of its per-key accounting (claim 3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.runtime.engines import aggregation_request
from dpledger.runtime.engines.aggregate import release_cost

BASE = {
    "partition_column": "k",
    "value_column": "v",
    "unit_column": "u",
    "metrics": ["histogram"],
    "bin_edges": [0.0, 1.0, 2.0],
    "public_partitions": ["a"],
}


def _request(l0: int, linf: int, mechanism: str, multiplier: float) -> object:
    return aggregation_request(
        {
            **BASE,
            "max_partitions_per_unit": l0,
            "max_rows_per_partition": linf,
            "mechanism": mechanism,
            "noise_multiplier": multiplier,
        }
    )


@pytest.mark.parametrize(("l0", "linf", "bins"), [(1, 2, 3), (2, 2, 2), (2, 3, 3), (3, 1, 2)])
def test_the_worst_user_attains_the_histogram_sensitivities(l0: int, linf: int, bins: int) -> None:
    keys = l0 + 1  # one key the user may not touch
    worst_l1 = worst_l2 = 0.0
    # every user within the bounds: at most l0 keys, at most linf rows in each, any bins
    for chosen in itertools.combinations(range(keys), l0):
        for rows in itertools.product(range(-1, bins), repeat=linf * l0):  # -1: no row
            move = np.zeros((keys, bins))
            for i, key in enumerate(chosen):
                for b in rows[i * linf : (i + 1) * linf]:
                    if b >= 0:
                        move[key, b] += 1
            worst_l1 = max(worst_l1, float(np.abs(move).sum()))
            worst_l2 = max(worst_l2, float(np.linalg.norm(move)))
    query = _request(l0, linf, "gaussian", 1.0).query  # type: ignore[attr-defined]
    assert query.row_sensitivity("histogram") == 1.0
    l1, l2 = query.sensitivity("histogram", "l1"), query.sensitivity("histogram", "l2")
    assert worst_l1 <= l1 and worst_l1 == pytest.approx(l1, rel=1e-12)
    assert worst_l2 <= l2 and worst_l2 == pytest.approx(l2, rel=1e-12)


def _laplace_delta(eps: float, shift: float) -> float:
    """The one-dimensional Laplace pair's curve at unit scale (closed form)."""
    if eps >= shift:
        return 0.0
    return -math.expm1((eps - shift) / 2) if eps >= -shift else -math.expm1(eps)


def _product_delta(eps: float, a: float, c: float) -> float:
    """The curve of Lap(0)xLap(0) against Lap(a)xLap(c) at eps >= 0, by quadrature: the
    loss is a + c - 2 (t1 + t2), t_i = 0 (x_i <= 0, probability 1/2) or min(x_i, d_i)."""
    s = a + c

    def phi(t: float) -> float:
        return max(0.0, -math.expm1(eps - s + 2 * t))

    def one(d: float) -> float:  # E phi(min(E, d)), E ~ Exp(1)
        body = float(integrate.quad(lambda x: phi(x) * math.exp(-x), 0, d, limit=200)[0])
        return body + phi(d) * math.exp(-d)

    def width(t: float) -> float:  # the length of {x + y = t} in [0, a] x [0, c]
        return max(0.0, min(a, t) - max(0.0, t - c))

    cuts = sorted({min(a, c), max(a, c)})
    both = float(integrate.quad(lambda t: phi(t) * math.exp(-t) * width(t), 0, s, points=cuts)[0])
    both += math.exp(-c) * integrate.quad(lambda x: phi(x + c) * math.exp(-x), 0, a)[0]
    both += math.exp(-a) * integrate.quad(lambda y: phi(a + y) * math.exp(-y), 0, c)[0]
    both += math.exp(-s) * phi(s)
    return float(phi(0.0) + one(a) + one(c) + both) / 4


@pytest.mark.parametrize(("a", "c"), [(1.0, 1.0), (1.5, 0.5), (0.2, 1.8), (0.05, 0.3)])
def test_laplace_on_split_shifts_is_dominated_by_one_shift_of_their_sum(a: float, c: float) -> None:
    for eps in np.linspace(0.0, a + c, 9):
        assert _product_delta(float(eps), a, c) <= _laplace_delta(float(eps), a + c) + 1e-9
    # the domination is strict below the pure epsilon (the check can fail)
    assert _product_delta(0.0, a, c) < _laplace_delta(0.0, a + c) - 1e-3


@pytest.mark.parametrize("split", [(1.0, 1.0), (1.5, 0.5), (2.0, 0.0)])
def test_the_histogram_event_covers_every_split_of_a_units_rows_over_bins(
    split: tuple[float, float],
) -> None:
    """The event the method books for a Laplace histogram (the count's: L0 releases at L∞),
    against the exact curve of one key's bins moved by ``split`` (L∞ = 2 rows)."""
    multiplier, delta = 0.8, 1e-3
    event = release_cost(_request(1, 2, "laplace", multiplier), "histogram")  # type: ignore[arg-type]
    eps = account(event, Adjacency(), delta=delta).bound.epsilon
    b = multiplier * 2  # noise scale: multiplier x L0 L∞ (L1)
    a, c = split[0] / b, split[1] / b
    exact = _product_delta(eps, a, c) if c > 0 else _laplace_delta(eps, a)
    assert exact <= delta * (1 + 1e-9)
    gaussian = release_cost(_request(3, 2, "gaussian", 2.0), "histogram")  # type: ignore[arg-type]
    assert gaussian.to_dict() == {"kind": "gaussian", "noise_multiplier": 2.0}

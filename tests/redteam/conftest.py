"""Shared pieces of the red-team tests: an independent Gaussian bound and core restoration."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest
from scipy.optimize import brentq
from scipy.stats import norm


def balle_wang_epsilon(sigma: float, delta: float) -> float:
    """Exact epsilon(delta) of the Gaussian mechanism of noise multiplier ``sigma`` under
    add/remove adjacency (Balle & Wang 2018, Theorem 8), solved independently with scipy."""

    def excess(eps: float) -> float:
        return float(
            norm.cdf(0.5 / sigma - eps * sigma)
            - math.exp(eps) * norm.cdf(-0.5 / sigma - eps * sigma)
            - delta
        )

    return float(brentq(excess, 0.0, 200.0, xtol=1e-15, rtol=1e-15))


@pytest.fixture
def honest_gaussian_epsilon() -> Callable[[float, float], float]:
    return balle_wang_epsilon


@pytest.fixture
def restore_core(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put back every core attribute a planted plugin of these tests rewrites."""
    import dpledger.accountant.closed_form as closed_form
    import dpledger.accountant.graph_account as graph
    import dpledger.accountant.select as select
    import dpledger.runtime.ledger as ledger

    targets = [
        (ledger.PrivacyLedger, "gaussian"),
        (select, "account"),
        (graph, "account"),
        (select, "_check_consistency"),
        (closed_form.ClosedFormAccountant, "_epsilon"),
        (math, "exp"),
    ]
    codes = [(select._upper, select._upper.__code__)]
    for owner, name in targets:
        monkeypatch.setattr(owner, name, vars(owner)[name])
    yield
    for fn, code in codes:
        fn.__code__ = code

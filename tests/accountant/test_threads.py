"""The accountant's matrix work runs on one BLAS thread, restored afterwards."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats
from threadpoolctl import threadpool_info, threadpool_limits

from dpledger.accountant import select
from dpledger.accountant.threads import one_blas_thread
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_blas_thread_limits_and_restores() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() and set(_blas_threads()) == {2}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {2}


def test_one_blas_thread_restores_after_an_error() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(RuntimeError), one_blas_thread():
            raise RuntimeError("boom")
        assert set(_blas_threads()) == {2}


def test_account_runs_its_backends_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    real = select._run_backends

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(select, "_run_backends", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        bound = select.account(GaussianEvent(1.0), Adjacency(), delta=1e-5).bound
        assert set(_blas_threads()) == {2}
    assert seen == [[1] * len(seen[0])] and seen[0]
    # Balle-Wang's exact epsilon of the Gaussian mechanism at sigma 1, solved independently
    exact = optimize.brentq(
        lambda e: stats.norm.cdf(0.5 - e) - math.exp(e) * stats.norm.cdf(-0.5 - e) - 1e-5, 0, 20
    )
    assert bound.epsilon_lower <= exact <= bound.epsilon <= exact * (1 + 1e-9)


def test_random_allocation_runs_on_one_thread_without_account(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The allocation's tables and lower pairs pin one thread themselves: an accountant used
    directly (not through ``account``) gets them too."""
    from dpledger.accountant import random_allocation
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.core.events import RandomAllocationEvent

    seen: list[list[int]] = []
    real = random_allocation.allocation_table_event

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(random_allocation, "allocation_table_event", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        acc = PLDAccountant(Adjacency()).compose(RandomAllocationEvent(4, GaussianEvent(2.0)))
        assert acc.get_epsilon(1e-5).epsilon > 0
        assert set(_blas_threads()) == {2}
    assert seen and all(set(s) == {1} for s in seen)

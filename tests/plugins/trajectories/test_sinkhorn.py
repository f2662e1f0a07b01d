"""The entropic plan solver ``sinkhorn_plan``: marginals, references and the convergence flag."""

from __future__ import annotations

import numpy as np
import ot
import torch

from dpledger.plugins.trajectories.mfld import sinkhorn_plan


def _clouds(m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    X = torch.tensor(rng.normal(size=(m, 2)))
    Y = torch.tensor(0.8 * rng.normal(size=(m, 2)) + 0.3)
    return X, Y


def _marginal_errors(P: torch.Tensor) -> tuple[float, float]:
    m, n = P.shape
    rows = float(torch.linalg.vector_norm(P.sum(1) - 1.0 / m))
    cols = float(torch.linalg.vector_norm(P.sum(0) - 1.0 / n))
    return rows, cols


def test_marginals_within_tolerance_at_small_regularisation() -> None:
    X, Y = _clouds(40, seed=0)
    reg, iters, tol = 1e-3, 400, 1e-6
    a = torch.full((40,), 1.0 / 40, dtype=torch.float64)
    _, log = ot.sinkhorn(
        a, a, 0.5 * ot.dist(X, Y), reg, method="sinkhorn_log", numItermax=iters,
        stopThr=tol, log=True, warn=False,
    )  # fmt: skip
    assert float(log["err"][-1]) > 100 * tol  # plain log-domain Sinkhorn stalls here
    P, _, converged = sinkhorn_plan(X, Y, reg, iters, tol)
    assert converged
    rows, cols = _marginal_errors(P)
    assert rows < 1e-12 and cols < tol
    assert float(P.min()) >= 0.0


def test_plan_matches_converged_log_domain_reference() -> None:
    X, Y = _clouds(6, seed=1)
    a = torch.full((6,), 1.0 / 6, dtype=torch.float64)
    M = 0.5 * ot.dist(X, Y)
    ref, log = ot.sinkhorn(
        a, a, M, 0.1, method="sinkhorn_log", numItermax=100_000, stopThr=1e-14, log=True,
        warn=False,
    )  # fmt: skip
    assert float(log["err"][-1]) < 1e-14
    P, _, converged = sinkhorn_plan(X, Y, 0.1, 2000, 1e-13)
    assert converged
    assert torch.allclose(P, ref, rtol=0.0, atol=1e-12)


def test_plan_tends_to_the_exact_plan_as_regularisation_vanishes() -> None:
    X, Y = _clouds(6, seed=1)
    a = torch.full((6,), 1.0 / 6, dtype=torch.float64)
    exact = ot.emd(a, a, 0.5 * ot.dist(X, Y))
    P, _, converged = sinkhorn_plan(X, Y, 1e-4, 2000, 1e-10)
    assert converged
    assert torch.allclose(P, exact, rtol=0.0, atol=1e-9)


def test_warm_start_from_the_solution_converges_at_once() -> None:
    X, Y = _clouds(40, seed=2)
    P, start, converged = sinkhorn_plan(X, Y, 1e-3, 400, 1e-6)
    assert converged
    Q, _, again = sinkhorn_plan(X, Y, 1e-3, 1, 1e-6, warmstart=start)
    assert again
    assert torch.allclose(P, Q, rtol=0.0, atol=1e-8)


def test_too_few_iterations_is_reported_unconverged() -> None:
    X, Y = _clouds(40, seed=0)
    tol = 1e-6
    flags = []
    for iters in [0, 1, 5, 20, 40, 400]:
        P, _, converged = sinkhorn_plan(X, Y, 1e-3, iters, tol)
        assert converged == (_marginal_errors(P)[1] < tol)
        flags.append(converged)
    assert flags == [False] * 5 + [True]
    _, start, _ = sinkhorn_plan(X, Y, 1e-3, 400, tol)
    Z = X + 0.3 * torch.tensor(np.random.default_rng(3).normal(size=X.shape))
    assert not sinkhorn_plan(Z, Y, 1e-3, 2, tol, warmstart=start)[2]

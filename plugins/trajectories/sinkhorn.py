"""Entropic optimal transport between particle measures: the plan for the cost ``|x-y|^2/2``
(log-domain Sinkhorn with epsilon scaling and damped Newton steps on the dual) and its value."""

from __future__ import annotations

import math

import ot
import torch

__all__ = [
    "SINKHORN_EPS_DECAY",
    "SINKHORN_NEWTON_EVERY",
    "SINKHORN_STAGE_TOL",
    "entropic_ot_value",
    "sinkhorn_plan",
]

Tensor = torch.Tensor


#: epsilon scaling: each stage's regularisation is this fraction of the previous one
SINKHORN_EPS_DECAY = 0.3
#: marginal error at which an intermediate (larger-regularisation) stage stops
SINKHORN_STAGE_TOL = 1e-3
#: a damped Newton step on the dual after every this many Sinkhorn sweeps
SINKHORN_NEWTON_EVERY = 3


def sinkhorn_plan(
    Xi: Tensor,
    Xj: Tensor,
    reg: float,
    iters: int = 2000,
    tol: float = 1e-9,
    warmstart: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor], bool]:
    """Entropic plan between uniform particle measures for the cost ``M = |x-y|^2/2``.

    Log-domain Sinkhorn sweeps interleaved with damped Newton steps on the dual. Without
    ``warmstart`` the regularisation decreases geometrically from the largest cost to ``reg``
    (epsilon scaling, each stage starting from the last one's potentials). ``iters`` caps
    sweeps plus Newton steps over all stages. Converged means that at ``reg``, after a sweep
    (rows exact), the column marginal's L2 error is below ``tol``.

    Returns ``(P, (log_u, log_v), converged)`` with ``P = exp(log_u_i + log_v_j - M_ij/reg)``;
    ``warmstart`` is such a pair ``(log_u, log_v)``, at ``reg``, for these measures.
    """
    m, n = Xi.shape[0], Xj.shape[0]
    loga = torch.full((m,), -math.log(m), dtype=Xi.dtype, device=Xi.device)
    logb = torch.full((n,), -math.log(n), dtype=Xi.dtype, device=Xi.device)
    a, b = loga.exp(), logb.exp()
    M = 0.5 * ot.dist(Xi, Xj)
    if warmstart is None:
        eps = max(float(M.max()), reg)
        f, g = torch.zeros_like(loga), torch.zeros_like(logb)  # potentials in cost units
    else:
        eps = reg
        f, g = reg * (warmstart[0] - loga), reg * (warmstart[1] - logb)
    done = 0
    while True:
        K = -M / eps
        u, v = f / eps + loga, g / eps + logb
        final = eps <= reg
        stage_tol = tol if final else max(tol, SINKHORN_STAGE_TOL)
        err, sweeps = math.inf, 0
        while done < iters:
            v = logb - torch.logsumexp(K + u[:, None], 0)
            u = loga - torch.logsumexp(K + v[None, :], 1)
            done += 1
            sweeps += 1
            err = float(torch.linalg.vector_norm(torch.exp(K + u[:, None] + v[None, :]).sum(0) - b))
            if err < stage_tol:
                break
            if sweeps % SINKHORN_NEWTON_EVERY == 0 and done + 1 < iters:  # a sweep follows
                u, v = _dual_newton_step(K, u, v, a, b)
                done += 1
        if final:
            return torch.exp(K + u[:, None] + v[None, :]), (u, v), err < tol
        f, g = eps * (u - loga), eps * (v - logb)
        if done >= iters:  # out of iterations above reg: rows exact at reg, not converged
            K = -M / reg
            v = g / reg + logb
            u = loga - torch.logsumexp(K + v[None, :], 1)
            return torch.exp(K + u[:, None] + v[None, :]), (u, v), False
        eps = max(eps * SINKHORN_EPS_DECAY, reg)


def _dual_newton_step(
    K: Tensor, u: Tensor, v: Tensor, a: Tensor, b: Tensor, halvings: int = 30
) -> tuple[Tensor, Tensor]:
    """Newton ascent with Armijo backtracking on ``<a,u> + <b,v> - sum exp(K + u + v)``.

    The Hessian is singular along ``(1, -1)`` (a constant moved from ``u`` to ``v``); adding
    that direction's projector makes it invertible without changing the step. Returns the
    input when no step along the Newton direction increases the dual.
    """
    m, n = K.shape
    P = torch.exp(K + u[:, None] + v[None, :])
    r, c = P.sum(1), P.sum(0)
    H = torch.cat([torch.cat([torch.diag(r), P], 1), torch.cat([P.T, torch.diag(c)], 1)], 0)
    w = torch.cat([torch.ones_like(u), -torch.ones_like(v)]) / math.sqrt(m + n)
    H = H + torch.outer(w, w)
    grad = torch.cat([a - r, b - c])
    try:
        d = torch.linalg.solve(H, grad)
    except RuntimeError:  # singular: support split by underflow; least squares instead
        d = torch.linalg.lstsq(H, grad[:, None], driver="gelsd").solution[:, 0]
    du, dv = d[:m], d[m:]
    slope, linear, mass = float(grad @ d), float(a @ du + b @ dv), float(P.sum())
    if not slope > 0.0:  # no ascent direction (numerically singular system)
        return u, v
    t = 1.0
    for _ in range(halvings):
        un, vn = u + t * du, v + t * dv
        new_mass = float(torch.exp(torch.logsumexp((K + un[:, None] + vn[None, :]).flatten(), 0)))
        if t * linear - (new_mass - mass) >= 1e-4 * t * slope:
            return un, vn
        t *= 0.5
    return u, v


def entropic_ot_value(P: Tensor, Xi: Tensor, Xj: Tensor, reg: float) -> Tensor:
    """Primal value ``<P, |x-y|^2/2> + reg KL(P | a x b)`` (equals the dual at optimality)."""
    m, n = P.shape
    M = 0.5 * ot.dist(Xi, Xj)
    ab = 1.0 / (m * n)
    Ppos = torch.clamp(P, min=1e-300)
    value: torch.Tensor = (P * M).sum() + reg * (P * (torch.log(Ppos) - math.log(ab))).sum()
    return value

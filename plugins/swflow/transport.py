"""Vectorised sliced-Wasserstein flow steps (torch).

One step, with particles ``X`` (``n x d``), unit directions ``Theta`` (``K x d``) and the
target's (noisy) projections ``T`` (``B x K``), follows Algorithm 1 and the reference code:

* ``Zp = X Theta^T + N(0, s^2)``: smoothed particle projections (public randomness);
* ``F = F_{Zp,j}(z)``: the empirical CDF of column ``j`` of ``Zp`` at the evaluation point
  ``z`` (``evaluate_at="noisy"``: ``z = Zp`` as in the code; ``"clean"``: ``z = X Theta^T``
  as in Eq. (20)), with mid-ranks ``(#{<z} + #{<=z}) / (2n)``;
* ``q = Q_{T,j}(F)``: the target's empirical quantile at ``F`` (linear interpolation between
  order statistics at positions ``F B - 1/2``; for ``n == B`` this is the exact monotone
  1-D optimal transport map between the two empirical measures);
* ``X <- X - h (z - q) Theta / K + sqrt(2 h lambda) N(0, I)`` (Algorithm 1 line 12 with the
  missing ``x +``; the drift moves particles towards the target, as in the code).

Everything is batched over all particles and projections: one sort per column, one
``searchsorted``, one gather, and two matrix products.
"""

from __future__ import annotations

import math

import torch


def sorted_columns(values: torch.Tensor) -> torch.Tensor:
    """Each column sorted ascending, returned as ``K x B`` (contiguous rows)."""
    return torch.sort(values.T.contiguous(), dim=1).values


def empirical_cdf(sorted_rows: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Mid-rank CDF of each row of ``sorted_rows`` (``K x n``) at ``points`` (``m x K``)."""
    q = points.T.contiguous()
    left = torch.searchsorted(sorted_rows, q, side="left")
    right = torch.searchsorted(sorted_rows, q, side="right")
    n = sorted_rows.shape[1]
    return ((left + right).to(points.dtype) / (2.0 * n)).T


def quantiles(sorted_rows: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Empirical quantile of each row (``K x B``) at ``probs`` (``m x K``), linear between
    order statistics located at ``(i + 1/2) / B``; constant beyond the extreme ones."""
    b = sorted_rows.shape[1]
    pos = (probs.T * b - 0.5).clamp(0.0, b - 1.0)
    lo = pos.floor().long().clamp(max=b - 1)
    hi = (lo + 1).clamp(max=b - 1)
    frac = pos - lo.to(pos.dtype)
    v_lo = torch.gather(sorted_rows, 1, lo)
    v_hi = torch.gather(sorted_rows, 1, hi)
    return (v_lo + frac * (v_hi - v_lo)).T


def drift(
    x: torch.Tensor,
    theta: torch.Tensor,
    target_sorted: torch.Tensor,
    smoothing_std: float,
    generator: torch.Generator | None,
    evaluate_at: str = "noisy",
) -> torch.Tensor:
    """``v(x) = -(1/K) sum_j (z_j - Q_j(F_j(z_j))) theta_j`` for every particle (``n x d``)."""
    clean = x @ theta.T
    if smoothing_std > 0:
        noise = torch.randn(clean.shape, generator=generator, dtype=x.dtype, device=x.device)
        smoothed = clean + smoothing_std * noise
    else:
        smoothed = clean
    at = smoothed if evaluate_at == "noisy" else clean
    cdf = empirical_cdf(sorted_columns(smoothed), at)
    target = quantiles(target_sorted, cdf)
    return -((at - target) @ theta) / theta.shape[0]


def flow_step(
    x: torch.Tensor,
    theta: torch.Tensor,
    target_sorted: torch.Tensor,
    *,
    step_size: float,
    reg: float,
    smoothing_std: float,
    generator: torch.Generator | None,
    evaluate_at: str = "noisy",
) -> torch.Tensor:
    """One Euler-Maruyama step ``x + h v(x) + sqrt(2 h lambda) z``."""
    v = drift(x, theta, target_sorted, smoothing_std, generator, evaluate_at)
    out = x + step_size * v
    if reg > 0:
        z = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        out = out + math.sqrt(2.0 * step_size * reg) * z
    return out

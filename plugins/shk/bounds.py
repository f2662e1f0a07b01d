"""Privacy and divergence bounds for SHK flows (Theorems 1–4 of the SHK stability paper).

* Theorem 1/3: ``|log ρ_t/ρ'_t| ≤ S_tar + e^{−t}(R_0 + R'_0)``; with ``R_0, R'_0 ≤ B`` this is the
  pure-DP level ``ε(t) = S_tar + 2B e^{−t}`` where ``S_tar = 2Δ_pot`` under (A1) (sup-norm
  sensitivity) or ``S_tar = Δ_osc`` under (A1′) (oscillation sensitivity). Every Rényi divergence of
  order α > 1 obeys the same bound.
* Theorem 2: with (A2) ``‖∇V − ∇V'‖∞ ≤ Δ_grad`` and (A3) a common LSI constant ``λ``, the KL is at
  most ``∫_0^t e^{−κ(t−s)}(A_1 + A_2 e^{−s} + A_3 e^{−2s}) ds`` with ``A_1 = Δ_grad²/(4c)``,
  ``A_2 = B(S_tar/2 + 2)``, ``A_3 = B²/16``, ``κ = 2(1−c)e^{−B}λ``, any ``c ∈ (0, 1)``.
* Theorem 4: the time-``t`` release is ``(ε, H̄(t)/ε)``-DP for every ``ε > 0``.

Computed upper bounds are nudged one ulp upwards so rounding never under-reports.
Grid diagnostics (exact divergences between two cell densities) are also here.
"""

from __future__ import annotations

import math

import numpy as np

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.shk.torus import FloatArray


def _nonneg(field: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise InvalidParameterError(field, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if not (math.isfinite(v) and v >= 0):
        raise InvalidParameterError(
            field, f"must be >= 0 and finite, got {value!r}", "pass a non-negative number"
        )
    return v


def _positive(field: str, value: float) -> float:
    v = _nonneg(field, value)
    if v == 0:
        raise InvalidParameterError(field, "must be > 0", "pass a positive number")
    return v


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


def log_ratio_envelope(t: float, s_tar: float, r0: float, r0_prime: float) -> float:
    """Theorem 1 envelope ``S_tar + e^{−t}(R_0 + R'_0)`` (also bounds every D_α, α > 1)."""
    tt = _nonneg("t", t)
    return _up(
        _nonneg("s_tar", s_tar)
        + math.exp(-tt) * (_nonneg("r0", r0) + _nonneg("r0_prime", r0_prime))
    )


def epsilon_a1(t: float, delta_pot: float, b: float) -> float:
    """Theorem 3 under (A1): ``ε_1(t) = 2Δ_pot + 2B e^{−t}``."""
    return log_ratio_envelope(t, 2.0 * _nonneg("delta_pot", delta_pot), b, b)


def epsilon_a1_prime(t: float, delta_osc: float, b: float) -> float:
    """Theorem 3 under (A1′): ``ε_2(t) = Δ_osc + 2B e^{−t}``."""
    return log_ratio_envelope(t, _nonneg("delta_osc", delta_osc), b, b)


def _check_c(c: float) -> float:
    v = _nonneg("c", c)
    if not 0 < v < 1:
        raise InvalidParameterError("c", f"must lie in (0, 1), got {c!r}", "pick c = 0.5")
    return v


def _phi(rate: float, kappa: float, t: float) -> float:
    """``∫_0^t e^{−κ(t−s)} e^{−rate·s} ds`` (stable for κ ≈ rate and for long times)."""
    d = kappa - rate
    if abs(d * t) < 1e-8:
        return t * math.exp(-max(rate, kappa) * t) * (1.0 + 0.5 * abs(d) * t)
    slow, gap = (rate, d) if d > 0 else (kappa, -d)
    return math.exp(-slow * t) * (-math.expm1(-gap * t)) / gap


def kl_bound_theorem2(
    t: float, c: float, delta_grad: float, s_tar: float, b: float, lambda_gibbs: float
) -> float:
    """Theorem 2 KL bound with the uniform contraction rate ``κ = 2(1−c)e^{−B}λ``."""
    tt = _nonneg("t", t)
    cc = _check_c(c)
    bb = _nonneg("b", b)
    lam = _positive("lambda_gibbs", lambda_gibbs)
    a1 = _nonneg("delta_grad", delta_grad) ** 2 / (4.0 * cc)
    a2 = bb * (_nonneg("s_tar", s_tar) / 2.0 + 2.0)
    a3 = bb**2 / 16.0
    kappa = 2.0 * (1.0 - cc) * math.exp(-bb) * lam
    val = a1 * _phi(0.0, kappa, tt) + a2 * _phi(1.0, kappa, tt) + a3 * _phi(2.0, kappa, tt)
    return _up(val * (1.0 + 1e-12))


def kl_plateau(c: float, delta_grad: float, b: float, lambda_gibbs: float) -> float:
    """Asymptotic Theorem 2 plateau ``A_1/κ`` (Remark 7)."""
    cc = _check_c(c)
    kappa = 2.0 * (1.0 - cc) * math.exp(-_nonneg("b", b)) * _positive("lambda_gibbs", lambda_gibbs)
    return _up(_nonneg("delta_grad", delta_grad) ** 2 / (4.0 * cc) / kappa)


def hockey_stick_from_kl(kl: float, epsilon: float) -> float:
    """Theorem 4 / Lemma 17: ``E_ε(P‖Q) ≤ KL(P‖Q)/ε`` — the δ of an ``(ε, δ)`` certificate."""
    return _up(_nonneg("kl", kl) / _positive("epsilon", epsilon))


def holley_stroock_lsi(potential_osc: float, base_lsi: float = 1.0) -> float:
    """LSI constant ``e^{−osc(V)}·λ_base`` (Lemma 14); the uniform law on the circle has λ = 1."""
    return math.exp(-_nonneg("potential_osc", potential_osc)) * _positive("base_lsi", base_lsi)


# --- exact divergences between two densities on the same grid ------------------------------------


def _pair(p: FloatArray, q: FloatArray, dx: float) -> tuple[FloatArray, FloatArray]:
    a, b = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidParameterError("q", "must have the same 1-D shape as p", "use one grid")
    if np.any(a <= 0) or np.any(b <= 0) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidParameterError("p", "densities must be positive and finite", "check inputs")
    _positive("dx", dx)
    return a, b


def sup_log_ratio(p: FloatArray, q: FloatArray) -> float:
    """``max_i |log p_i − log q_i|`` (the empirical pointwise privacy loss)."""
    a, b = _pair(p, q, 1.0)
    return float(np.max(np.abs(np.log(a) - np.log(b))))


def kl_divergence(p: FloatArray, q: FloatArray, dx: float) -> float:
    """``Σ p log(p/q) Δx``."""
    a, b = _pair(p, q, dx)
    return float(np.sum(a * np.log(a / b)) * dx)


def renyi_divergence(p: FloatArray, q: FloatArray, alpha: float, dx: float) -> float:
    """``D_α(p‖q) = log(Σ p^α q^{1−α} Δx)/(α − 1)`` for α > 1 (log-sum-exp evaluation)."""
    al = _positive("alpha", alpha)
    if al <= 1:
        raise InvalidParameterError("alpha", f"must be > 1, got {alpha!r}", "pass α > 1")
    a, b = _pair(p, q, dx)
    z = al * np.log(a) + (1.0 - al) * np.log(b)
    m = float(np.max(z))
    return (m + math.log(float(np.sum(np.exp(z - m))) * dx)) / (al - 1.0)


def hockey_stick(p: FloatArray, q: FloatArray, epsilon: float, dx: float) -> float:
    """``E_ε(p‖q) = Σ (p − e^ε q)_+ Δx`` (Lemma 15)."""
    a, b = _pair(p, q, dx)
    return float(np.sum(np.maximum(a - math.exp(_nonneg("epsilon", epsilon)) * b, 0.0)) * dx)


def symmetric_hockey_stick(p: FloatArray, q: FloatArray, epsilon: float, dx: float) -> float:
    """``max(E_ε(p‖q), E_ε(q‖p))`` — the smallest δ for this pair at level ε."""
    return max(hockey_stick(p, q, epsilon, dx), hockey_stick(q, p, epsilon, dx))

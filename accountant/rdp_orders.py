"""Rényi-DP curves of single mechanisms, each rounded up by its floating-point error.

Orders whose value cannot be computed are returned as ``inf`` (the order is excluded from
the minimum over orders, never set to zero).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.conversions import U

FloatArray = NDArray[np.float64]


def default_orders() -> FloatArray:
    """1.01 ... 10^4: fine fractional low orders, all integers to 64, then a geometric tail."""
    low = [1.0 + x / 100.0 for x in range(1, 10)]
    mid = [1.0 + x / 10.0 for x in range(1, 100)]
    ints = [float(x) for x in range(11, 65)]
    tail = [80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0, 640.0, 768.0, 1024.0]
    tail += [1536.0, 2048.0, 3072.0, 4096.0, 6144.0, 8192.0, 10000.0]
    return np.array(sorted(set(low + mid + ints + tail)), dtype=np.float64)


#: smallest positive double: a positive RDP value is never rounded down to zero
TINY = 5e-324


def _floor_positive(curve: FloatArray) -> FloatArray:
    """A curve of a mechanism with positive privacy loss, with underflowed zeros raised."""
    return np.where(curve > 0.0, curve, TINY) if curve.size else curve


def _orders_times_square(orders: FloatArray, x: float, c: float) -> FloatArray:
    """An upper bound of ``orders * x^2 * c`` (``c > 0``), also where ``x^2 c`` is subnormal:
    there a product loses relative precision, so it is taken in logs with a margin, plus two
    of the smallest doubles for the rounding of a subnormal result."""
    scaled = x * x * c
    if scaled >= 1e-290 or (scaled == 0.0 and x == 0.0):
        return orders * scaled * (1 + 8 * U)
    with np.errstate(divide="ignore"):
        log_value = np.log(orders) + 2.0 * math.log(abs(x)) + math.log(c)
    return np.exp(log_value + 64 * U * (np.abs(log_value) + 1.0)) + 2 * TINY


def gaussian_rdp(orders: FloatArray, mu: float) -> FloatArray:
    """RDP of the Gaussian mechanism with mu = sensitivity / std: alpha mu^2 / 2 (Mironov 2017)."""
    out = _orders_times_square(orders, mu, 0.5)
    return _floor_positive(out) if mu > 0 else out


def pure_dp_rdp(orders: FloatArray, eps: float) -> FloatArray:
    """RDP implied by pure eps-DP.

    Binary randomized response is the dominating pair of eps-DP (Kairouz, Oh & Viswanath 2015),
    so D_a <= log((e^{a eps} + e^{(1-a) eps}) / (1 + e^eps)) / (a - 1), the expression in the
    proof of Bun & Steinke (2016, Prop. 3.3); it is also capped by eps and by a eps^2 / 2.
    """
    a = np.asarray(orders, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.logaddexp(a * eps, (1 - a) * eps) - np.logaddexp(0.0, eps)
        err = 16 * U * (a * eps + eps + 2.0)
        rr = (num + err) / (a - 1.0)
        quad = _orders_times_square(a, eps, 0.5)
    rr = np.where(np.isnan(rr), np.inf, rr)
    out = np.minimum(np.minimum(rr, eps * (1 + 4 * U)), quad)
    out = np.maximum(out, 0.0)
    return _floor_positive(out) if eps > 0 else out


def bounded_range_rdp(orders: FloatArray, eps: float) -> FloatArray:
    """RDP of any pair whose privacy loss spans an interval of width ``eps`` (eps-bounded range:
    the exponential mechanism booked at ``eps``).

    With X = dP/dQ on [x, x e^eps] and E_Q[X] = 1, E_Q[X^a] is largest with Q-mass only on the
    two ends (X^a is convex); with mass w on the top end it is
    ``E(w) = (w + (1-w) e^{-a eps}) / (w + (1-w) e^{-eps})^a``, whose log has one stationary
    point ``w* = (A e^{-eps} - a B e^{-a eps}) / ((a-1) A B)``, ``A = 1 - e^{-a eps}``,
    ``B = 1 - e^{-eps}`` (a maximum). The numerator of E grows and its denominator grows with
    w, so ``num(w* + h) / den(w* - h)`` bounds the maximum for any ``h`` at least the rounding
    error of ``w*``. Also capped by ``a eps^2 / 8`` (eps-bounded range is eps^2/8-zCDP: Cesar
    & Rogers 2021) and by :func:`pure_dp_rdp` (it is eps-DP).
    """
    a = np.asarray(orders, dtype=float)
    if math.isnan(eps):
        return np.full_like(a, np.inf)
    if eps <= 0:
        return np.zeros_like(a)
    exact = _bounded_range_exact(a, eps, -math.expm1(-eps))
    zcdp = _orders_times_square(a, eps, 0.125)
    out = np.maximum(np.minimum(np.minimum(exact, zcdp), pure_dp_rdp(a, eps)), 0.0)
    return np.where(np.isnan(a), np.inf, _floor_positive(out))


def _bounded_range_exact(a: FloatArray, eps: Any, big_b: Any) -> FloatArray:
    """The stationary-point bound of :func:`bounded_range_rdp` (``inf`` where not finite), for
    an epsilon and ``B = 1 - e^{-eps}`` that are numbers or columns (the same operations on
    the same values either way).

    w* = e^{-eps} t / ((a-1) A B), t = A - a B e^{-(a-1) eps}: in logs, as e^{-eps} may
    underflow."""
    big_a = -np.expm1(-a * eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tail = a * big_b * np.exp(-(a - 1.0) * eps)
        t = big_a - tail
        t_err = 64 * U * (big_a + tail)
        log_scale = -eps - np.log((a - 1.0) * big_a * big_b)
        log_t_hi, log_t_lo = np.log(t + t_err), np.log(np.maximum(t - t_err, 0.0))
        log_err = 8 * U * (np.abs(log_scale) + np.abs(log_t_hi) + 1.0)
        log_w_hi = np.minimum(log_scale + log_t_hi + log_err, 0.0)
        log_w_lo = log_scale + log_t_lo - log_err
        log_num = np.logaddexp(-a * eps, np.minimum(log_w_hi + np.log(big_a), 0.0))
        log_den = np.logaddexp(-eps, log_w_lo + np.log(big_b))
        err = 16 * U * (np.abs(log_num) + a * np.abs(log_den) + 1.0)
        exact = (log_num - a * log_den + err) / (a - 1.0)
    return np.where(np.isfinite(exact), exact, np.inf)


def bounded_range_rdp_rows(orders: FloatArray, epsilons: Sequence[float]) -> FloatArray:
    """:func:`bounded_range_rdp` of every epsilon, one row each, in one pass over a 2-d array:
    every entry goes through the same floating-point operations on the same values, so each
    row equals ``bounded_range_rdp(orders, eps)`` bit for bit (epsilons outside the common
    range, where it branches on the value, take it row by row)."""
    a = np.asarray(orders, dtype=float)
    out = np.empty((len(epsilons), a.size))
    common = [i for i, e in enumerate(epsilons) if e > 0 and math.isfinite(e) and _wide(e)]
    kept = set(common)
    for i, e in enumerate(epsilons):
        if i not in kept:
            out[i] = bounded_range_rdp(a, e)
    if common:
        eps = np.array([epsilons[i] for i in common])[:, None]
        # -math.expm1(-eps) of bounded_range_rdp, taken the same way
        big_b = np.array([-math.expm1(-epsilons[i]) for i in common])[:, None]
        out[common] = _bounded_range_block(a, eps, big_b)
    return out


def _wide(eps: float) -> bool:
    """Whether ``eps^2 / 8`` (hence ``eps^2 / 2``) takes the plain product of
    :func:`_orders_times_square`."""
    return eps * eps * 0.125 >= 1e-290


def _bounded_range_block(a: FloatArray, eps: FloatArray, big_b: FloatArray) -> FloatArray:
    """The body of :func:`bounded_range_rdp` (and of :func:`pure_dp_rdp` inside it) with
    ``eps`` and ``big_b`` columns: positive finite epsilons, each ``eps^2 / 8`` at least
    1e-290."""
    exact = _bounded_range_exact(a, eps, big_b)
    # pure_dp_rdp(a, eps); eps^2 may overflow to inf, as the Python product does
    with np.errstate(over="ignore", invalid="ignore"):
        zcdp = a * (eps * eps * 0.125) * (1 + 8 * U)
        num = np.logaddexp(a * eps, (1 - a) * eps) - np.logaddexp(0.0, eps)
        rr = (num + 16 * U * (a * eps + eps + 2.0)) / (a - 1.0)
        quad = a * (eps * eps * 0.5) * (1 + 8 * U)
    rr = np.where(np.isnan(rr), np.inf, rr)
    pure = _floor_positive(np.maximum(np.minimum(np.minimum(rr, eps * (1 + 4 * U)), quad), 0.0))
    out = np.maximum(np.minimum(np.minimum(exact, zcdp), pure), 0.0)
    return np.where(np.isnan(a), np.inf, _floor_positive(out))


def laplace_rdp(orders: FloatArray, eps: float) -> FloatArray:
    """RDP of the Laplace mechanism with eps = sensitivity / scale (Mironov 2017, Prop. 6).

    eps + log(1 + (a-1) (exp((1-2a) eps) - 1) / (2a - 1)) / (a - 1), tight for Laplace.
    """
    a = np.asarray(orders, dtype=float)
    c = np.expm1(eps * (1 - 2 * a)) / (2 * a - 1)
    v = (a - 1) * c
    small = np.abs(v) < 0.1
    # log1p(v)/(a-1) = c * sum_k (-v)^{k-1} / k, stable as a -> 1 (Horner, 60 terms)
    vs = np.where(small, v, 0.0)
    series = np.zeros_like(vs)
    for k in range(59, 0, -1):
        series = 1.0 / k - vs * series
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.log1p(np.where(small, 0.0, v)) / (a - 1)
    tail = np.where(small, c * series, direct)
    val = eps + tail
    val = val + 32 * U * (eps + np.abs(tail) + 1e-300) * a
    out = np.maximum(np.minimum(val, eps * (1 + 4 * U)), 0.0)
    return _floor_positive(out) if eps > 0 else out


# -- Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019) --------------------------------
def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """Upper bound of log A_alpha for integer alpha via log1p(A - 1).

    A - 1 = sum_{i>=2} C(a,i) q^i (1-q)^{a-i} (exp((i^2-i)/(2 sigma^2)) - 1): positive terms,
    so small q loses no precision.
    """
    i = np.arange(2, alpha + 1, dtype=float)
    c = (i * i - i) / (2 * sigma * sigma)
    log_expm1 = c + np.log(-np.expm1(-c))
    log_comb = special.gammaln(alpha + 1) - special.gammaln(i + 1) - special.gammaln(alpha - i + 1)
    log_t = log_comb + i * math.log(q) + (alpha - i) * math.log1p(-q) + log_expm1
    mag = np.abs(log_comb) + i * abs(math.log(q)) + (alpha - i) * abs(math.log1p(-q)) + c + 1
    if not np.all(np.isfinite(log_t)):
        return math.inf
    m = float(log_t.max())
    s = math.fsum(np.exp(log_t - m).tolist())
    log_am1 = m + math.log(s) + float(np.expm1(32 * U * mag.max())) + 4 * U
    # log A = log1p(exp(log_am1)), written to avoid overflow
    if log_am1 < 0:
        return math.log1p(math.exp(log_am1)) * (1 + 4 * U)
    return (log_am1 + math.log1p(math.exp(-log_am1))) * (1 + 4 * U)


def _frac_terms(
    q: float, sigma: float, alpha: float | FloatArray, n: int
) -> tuple[FloatArray, ...]:
    """log|s0_i|, log|s1_i|, signs and error magnitudes for i = 0..n (Sec. 3.3 series); an
    array of orders (a column) gives one row per order."""
    i = np.arange(n + 1, dtype=float)
    j = alpha - i
    log_binom = special.gammaln(alpha + 1) - special.gammaln(i + 1) - special.gammaln(j + 1)
    neg = np.maximum(0.0, i - np.floor(alpha) - 1)
    sign = np.where(neg % 2 == 1, -1.0, 1.0)
    lq, l1q = math.log(q), math.log1p(-q)
    s2 = 2 * sigma * sigma
    z0 = sigma * sigma * math.log(1 / q - 1) + 0.5
    common = alpha * l1q - z0 * z0 / s2  # value of the exponent after the Gaussian cancellation

    def side(m: FloatArray, x: FloatArray, log_t: FloatArray) -> tuple[FloatArray, FloatArray]:
        # term = t * exp((m^2 - m)/(2 sigma^2)) * Phi_bar(x), with x = (m - z0)/sigma-type argument
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            direct = log_t + (m * m - m) / s2 + special.log_ndtr(-x)
            scaled = log_binom + common + np.log(0.5 * special.erfcx(x / math.sqrt(2)))
        val = np.where(x > 0, scaled, direct)
        mag = np.abs(log_t) + np.abs((m * m - m) / s2) + np.abs(common) + np.abs(x) ** 2 + 1
        mag = np.where(x > 0, np.abs(log_binom) + np.abs(common) + np.abs(x) + 1, mag)
        return val, mag

    log_s0, mag0 = side(i, (i - z0) / sigma, log_binom + i * lq + j * l1q)
    log_s1, mag1 = side(j, (z0 - j) / sigma, log_binom + j * lq + i * l1q)
    return log_s0, log_s1, sign, mag0, mag1


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    """Upper bound of log A_alpha for fractional alpha (Mironov, Talwar & Zhang 2019, Sec. 3.3).

    A = sum_i C(a, i) [s0_i + s1_i] with signed binomials. For i > a the magnitudes decrease
    and the signs alternate, so the truncation error is at most the first omitted term, which
    is added. Rounding errors (relative, per term) are added too.
    """
    n = max(256, 4 * math.ceil(alpha))
    while True:
        log_s0, log_s1, sign, mag0, mag1 = _frac_terms(q, sigma, alpha, n + 1)
        body0, body1 = log_s0[:-1], log_s1[:-1]
        logs = np.concatenate([body0, body1])
        if not np.all(np.isfinite(logs) | (logs == -np.inf)):
            return math.inf
        m = float(np.max(logs))
        if not math.isfinite(m):
            return math.inf
        signs = np.concatenate([sign[:-1], sign[:-1]])
        scaled = np.exp(logs - m)
        total = math.fsum((signs * scaled).tolist())
        mags = np.concatenate([mag0[:-1], mag1[:-1]])
        err = float(np.sum(scaled * np.expm1(64 * U * mags + 1e-14)))
        rem = math.exp(float(np.logaddexp(log_s0[-1], log_s1[-1])) - m) * (1 + 1e-6)
        if rem <= 1e-9 * abs(total) or n >= 2**17:
            break
        n *= 4
    upper = total + err + rem
    if not (total > 0 and math.isfinite(upper)):
        return math.inf
    return (m + math.log(upper)) + 4 * U * (abs(m) + 1)


def _log_a_frac_batch(q: float, sigma: float, alphas: FloatArray) -> FloatArray:
    """:func:`_log_a_frac` for many fractional orders at once, with the first series length
    (256 terms) only; NaN where that length does not suffice (the caller falls back to
    :func:`_log_a_frac`)."""
    n = FRAC_TERMS
    with np.errstate(all="ignore"):
        log_s0, log_s1, sign, mag0, mag1 = _frac_terms(q, sigma, alphas[:, None], n + 1)
        logs = np.concatenate([log_s0[:, :-1], log_s1[:, :-1]], axis=1)
        m = np.max(logs, axis=1)
        scaled = np.exp(logs - m[:, None])
        signs = np.concatenate([sign[:, :-1], sign[:, :-1]], axis=1)
        total = np.array([math.fsum(row) for row in (signs * scaled).tolist()])
        mags = np.concatenate([mag0[:, :-1], mag1[:, :-1]], axis=1)
        err = np.sum(scaled * np.expm1(64 * U * mags + 1e-14), axis=1)
        rem = np.exp(np.logaddexp(log_s0[:, -1], log_s1[:, -1]) - m) * (1 + 1e-6)
        upper = total + err + rem
        ok = (
            np.all(np.isfinite(logs) | (logs == -np.inf), axis=1)
            & np.isfinite(m)
            & (rem <= 1e-9 * np.abs(total))
            & (total > 0)
            & np.isfinite(upper)
        )
        out = m + np.log(upper) + 4 * U * (np.abs(m) + 1)
    return np.where(ok, out, np.nan)


#: series length of the batched first pass over fractional orders
FRAC_TERMS = 256


def poisson_gaussian_rdp(orders: FloatArray, q: float, sigma: float) -> FloatArray:
    """RDP of the Poisson-subsampled Gaussian (add/remove) at every order; inf marks exclusion."""
    if q == 0.0:
        return np.zeros_like(orders)
    if q == 1.0:
        return gaussian_rdp(orders, 1.0 / sigma)
    out = np.empty_like(orders)
    frac = (orders != np.floor(orders)) & (orders < FRAC_TERMS / 4)
    batch = np.full(orders.shape, np.nan)
    if frac.any():
        batch[frac] = _log_a_frac_batch(q, sigma, orders[frac])
    for n, a in enumerate(orders.tolist()):
        try:
            with np.errstate(all="ignore"):  # non-finite terms exclude the order (checked)
                if float(a).is_integer():
                    log_a = _log_a_int(q, sigma, int(a))
                elif not math.isnan(batch[n]):
                    log_a = float(batch[n])
                else:
                    log_a = _log_a_frac(q, sigma, a)
        except (OverflowError, ValueError, FloatingPointError, ZeroDivisionError):
            log_a = math.inf
        val = log_a / (a - 1) if math.isfinite(log_a) else math.inf
        # never above the unsampled Gaussian, never negative
        with np.errstate(over="ignore"):
            cap = a / (2 * sigma * sigma) * (1 + 8 * U) if sigma > 0 else math.inf
        out[n] = min(max(val, 0.0), cap)
    return _floor_positive(out)

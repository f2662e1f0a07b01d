"""Numeric checks of the hit-count bounds against 50- and 60-digit evaluations in mpmath."""

from __future__ import annotations

import mpmath
import numpy as np

from dpledger.accountant.pld_hits import HitCount


def _gauss(x: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    return mpmath.ncdf(-x / mu + mu / 2) - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2)


def _one_step(q: float, eta: float, eps: float) -> mpmath.mpf:
    """The exact remove curve of one Poisson-subsampled Gaussian step: q G(log(1 + (e^eps -
    1)/q); eta)."""
    with mpmath.workdps(50):
        qm = mpmath.mpf(q)
        inner = mpmath.log(1 + mpmath.expm1(mpmath.mpf(eps)) / qm)
        return qm * _gauss(inner, mpmath.mpf(eta))


def _composed(q: float, eta: float, steps: int, eps: float) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(lower, upper) of the remove curve of ``steps`` heavy-hit steps, by the conditioning
    summed at 60 digits with exact binomial weights and a 20-sigma cut."""
    with mpmath.workdps(60):
        qm, e, et = mpmath.mpf(q), mpmath.mpf(eps), mpmath.mpf(eta)
        z1, z0 = et**2 / 2 - 20 * et, -(et**2) / 2 + 20 * et
        a1, b0 = (
            mpmath.log(qm + (1 - qm) * mpmath.exp(-z1)),
            mpmath.log(1 - qm + qm * mpmath.exp(z0)),
        )
        lo = hi = seen = mpmath.mpf(0)
        for k in range(0, 60):
            w = mpmath.binomial(steps, k) * qm**k * (1 - qm) ** (steps - k)
            seen += w
            if k:
                mu = et * mpmath.sqrt(k)
                lo += w * _gauss(e - k * mpmath.log(qm) - (steps - k) * mpmath.log(1 - qm), mu)
                hi += w * _gauss(e - k * a1 - (steps - k) * b0, mu)
        return lo, hi + (1 - seen) + (steps * qm + steps) * mpmath.ncdf(-20)


def test_one_step_bracket_contains_the_exact_curve() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        q = float(10 ** rng.uniform(-6, -0.5))
        eta = float(10 ** rng.uniform(-0.3, 1.7))
        hits = HitCount(q, eta, 1)
        for eps in rng.uniform(0.0, 1.5 * eta * eta, size=3):
            found = hits.remove_delta(float(eps), 1e-12)
            assert found is not None
            exact = _one_step(q, eta, float(eps))
            assert found[1] <= exact * (1 + mpmath.mpf(10) ** -30)
            assert found[0] >= exact


def test_heavy_compositions_bracket_the_60_digit_sum() -> None:
    for q, eta, steps, eps in ((1e-6, 50.0, 10**4, 13637.0), (1e-4, 30.0, 2000, 1700.0)):
        hits = HitCount(q, eta, steps)
        lo, hi = _composed(q, eta, steps, eps)
        found = hits.delta(eps)
        assert found is not None
        assert found[0] >= lo and found[1] <= hi
        assert found[0] <= 1.01 * found[1]

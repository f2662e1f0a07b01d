"""Exact delta(eps) of compositions of approximate-DP, randomized-response and Gaussian leaves
at 60 digits (mpmath), and the PLD accountant the tests compare with it.

An ``ApproxDPEvent(e, d)`` leaf is the mass ``d`` at +infinity and ``1 - d`` times binary
randomized response at ``e`` (Kairouz, Oh, Viswanath 2015); the Gaussian leaves merge into
one Gaussian of precision ``sum m / sigma^2``, whose curve reads every atom of the finite
lattice."""

from __future__ import annotations

import math

import mpmath as mp

from dpledger.accountant.pld import PLDAccountant
from dpledger.core.events import ApproxDPEvent, Event, GaussianEvent, RandomizedResponseEvent

__all__ = ["Mix", "exact_delta", "infinity_mass", "lattice", "pld_of"]

#: leaves and their counts
Mix = dict[Event, int]


def lattice(leaf: ApproxDPEvent | RandomizedResponseEvent, m: int) -> list[tuple[mp.mpf, mp.mpf]]:
    """(loss, P-mass) of the finite part of ``m`` copies (binary randomized response)."""
    e = mp.mpf(leaf.epsilon)
    a = mp.exp(e) / (1 + mp.exp(e))
    return [((2 * k - m) * e, mp.binomial(m, k) * a**k * (1 - a) ** (m - k)) for k in range(m + 1)]


def exact_delta(leaves: Mix, eps: float, dps: int = 60) -> mp.mpf:
    """delta(eps) of the composition at ``dps`` digits: the mass at +infinity ``1 - keep`` plus
    ``keep`` times the finite lattice's atoms, each read through the merged Gaussian's curve
    (or its own hinge without one)."""
    with mp.workdps(dps):
        keep = mp.mpf(1)
        atoms = [(mp.mpf(0), mp.mpf(1))]
        precision = mp.mpf(0)
        for leaf, m in leaves.items():
            if isinstance(leaf, GaussianEvent):
                precision += m / mp.mpf(leaf.noise_multiplier) ** 2
                continue
            assert isinstance(leaf, ApproxDPEvent | RandomizedResponseEvent)
            if isinstance(leaf, ApproxDPEvent):
                keep *= (1 - mp.mpf(leaf.delta)) ** m
            lat = lattice(leaf, m)
            atoms = [(l1 + l2, p1 * p2) for l1, p1 in atoms for l2, p2 in lat]
        mu = mp.sqrt(precision)
        x = mp.mpf(eps)

        def finite(t: mp.mpf) -> mp.mpf:
            if mu == 0:
                return 1 - mp.exp(t) if t < 0 else mp.mpf(0)
            return mp.ncdf(-t / mu + mu / 2) - mp.exp(t) * mp.ncdf(-t / mu - mu / 2)

        body = mp.fsum(p * finite(x - loss) for loss, p in atoms)
        return 1 - keep + keep * body


def infinity_mass(leaves: Mix) -> float:
    """The composed mass at +infinity, ``1 - prod (1 - d)^m`` over the approximate-DP leaves."""
    return 1.0 - math.prod(
        (1.0 - leaf.delta) ** m for leaf, m in leaves.items() if isinstance(leaf, ApproxDPEvent)
    )


def pld_of(leaves: Mix) -> PLDAccountant:
    """A PLD accountant with every leaf composed ``m`` times."""
    acc = PLDAccountant()
    for leaf, m in leaves.items():
        acc.compose(leaf, m)
    return acc

"""The exponential mechanism's certified curve against neighbouring score vectors.

The accountant books the ledger's exponential mechanism at parameter ``e`` with the bounded-range
curve (its privacy loss spans at most ``e``). Adversarial neighbouring datasets are score
vectors that each move by at most the sensitivity (or all in one direction, for the
``monotonic`` variant); the exact hockey-stick divergence of the two sampling laws, in both
directions, must stay under the certified upper bound, and the ledger's own sampler, run on a
worst-case pair, must agree with it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.events import ExponentialMechanismEvent, SelfComposedEvent
from dpledger.runtime.ledger import PrivacyLedger

EPSILONS = (0.0, 0.3, 1.0)


def _law(scores: np.ndarray, eps: float, scale: float) -> np.ndarray:
    w = np.exp(eps * (scores - scores.max()) / scale)
    return w / w.sum()


def _delta(p: np.ndarray, q: np.ndarray, at: float) -> float:
    return float(np.maximum(p - math.exp(at) * q, 0.0).sum())


@st.composite
def neighbouring_laws(draw: st.DrawFn) -> tuple[float, np.ndarray, np.ndarray]:
    """``(eps, p, q)``: the mechanism's sampling laws on a score vector and on a neighbour whose
    scores each move by at most the sensitivity 1 (all one way for a monotonic query, where the
    ledger drops the factor 2)."""
    eps = draw(st.sampled_from([0.05, 0.3, 1.0, 2.5, 4.0]))
    u = np.array(draw(st.lists(st.floats(min_value=-5, max_value=5), min_size=2, max_size=6)))
    moves = draw(st.lists(st.floats(min_value=-1, max_value=1), min_size=6, max_size=6))
    d = np.array(moves[: len(u)])
    monotonic = draw(st.booleans())
    if monotonic:
        d = np.abs(d)
    scale = 1.0 if monotonic else 2.0
    return eps, _law(u, eps, scale), _law(u + d, eps, scale)


@functools.cache
def _certified(eps: float, at: float) -> float:
    return float(account(ExponentialMechanismEvent(eps), epsilon=at).bound.delta)


@settings(max_examples=60, deadline=None)
@given(neighbouring_laws())
def test_no_neighbouring_scores_exceed_the_certified_curve(
    laws: tuple[float, np.ndarray, np.ndarray],
) -> None:
    eps, p, q = laws
    for at in EPSILONS:
        bound = _certified(eps, at)
        assert _delta(p, q, at) <= bound * (1 + 1e-9) + 1e-12
        assert _delta(q, p, at) <= bound * (1 + 1e-9) + 1e-12


def test_the_worst_pair_attains_the_curve_at_zero_and_the_ledger_samples_it() -> None:
    # two candidates scored (1/2, -1/2) and (-1/2, 1/2): randomized response at eps / 2, whose
    # delta at 0 is tanh(eps / 4), the certified upper curve's value there
    eps, n = 1.0, 40_000
    a, b = np.array([0.5, -0.5]), np.array([-0.5, 0.5])
    exact = _delta(_law(a, eps, 2.0), _law(b, eps, 2.0), 0.0)
    assert abs(exact - math.tanh(eps / 4)) < 1e-12
    assert _certified(eps, 0.0) >= exact and _certified(eps, 0.0) < exact * 1.001
    picks = []
    for scores, seed in ((a, 1), (b, 2)):
        ledger = PrivacyLedger(SelfComposedEvent(ExponentialMechanismEvent(eps), n), rng=seed)
        runs = [ledger.exponential_mechanism(scores, 1.0, eps, step="em") for _ in range(n)]
        picks.append(np.bincount(runs, minlength=2) / n)
    measured = _delta(picks[0], picks[1], 0.0)
    se = math.sqrt(2 * 0.25 / n)
    assert abs(measured - exact) < 5 * se
    # and it is not explained by the looser randomized response at eps (tanh(1/2) = 0.462)
    assert measured < math.tanh(eps / 2) - 0.1


ORDERS = np.array([1.5, 2.0, 4.0, 16.0, 64.0])


@settings(max_examples=60, deadline=None)
@given(neighbouring_laws())
def test_no_neighbouring_scores_exceed_the_certified_renyi_curve(
    laws: tuple[float, np.ndarray, np.ndarray],
) -> None:
    """The RDP backend's curve of the event (``bounded_range_rdp``) against the exact Rényi
    divergence of the two sampling laws, both directions, at every order."""
    eps, p, q = laws
    acc = RDPAccountant(orders=ORDERS.tolist()).compose(ExponentialMechanismEvent(eps))
    curve = acc.rdp()
    for x, y in ((p, q), (q, p)):
        for a, bound in zip(ORDERS.tolist(), curve.tolist(), strict=True):
            divergence = float(logsumexp(a * np.log(x) + (1 - a) * np.log(y))) / (a - 1)
            assert divergence <= bound * (1 + 1e-9) + 1e-12

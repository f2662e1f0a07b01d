"""The one-run estimators against jax_privacy's ``auditing`` module on the same inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpledger.audit import one_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def auditing() -> Any:
    """jax_privacy's auditing module, imported when a test runs, not when the file is collected:
    jax starts threads, and a process that later forks (other test files do) warns of a
    deadlock."""
    return pytest.importorskip("jax_privacy.auditing")


@pytest.fixture(scope="module")
def dp_accounting() -> Any:
    return pytest.importorskip("dp_accounting")


COUNTS = [
    (1000, 100, 90),
    (1000, 50, 50),
    (1000, 200, 150),
    (10000, 500, 420),
    (100, 20, 19),
    (1000, 100, 60),
    (5000, 1000, 700),
]


@pytest.mark.parametrize(("m", "r", "v"), COUNTS)
@pytest.mark.parametrize("delta", [1e-6, 1e-5, 1e-3])
def test_steinke_matches_jax_privacy(auditing: Any, m: int, r: int, v: int, delta: float) -> None:
    theirs = auditing._epsilon_one_run(0, m, r, v, 0.05, delta)
    ours = one_run.steinke_epsilon(m, r, v, 0.05, delta)
    assert ours == pytest.approx(theirs, abs=3e-6)


@pytest.mark.parametrize(("m", "r", "v"), COUNTS)
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_fdp_matches_jax_privacy_on_its_gaussian_family(
    auditing: Any, dp_accounting: Any, m: int, r: int, v: int, delta: float
) -> None:
    def family(eps: float) -> one_run.TradeOff:
        return one_run.gaussian_tradeoff(1.0 / dp_accounting.get_sigma_gaussian(eps, delta))

    theirs = auditing._epsilon_one_run_fdp(0, m, r, v, 0.05, delta)
    assert one_run.fdp_epsilon(family, m, r, v, 0.05) == pytest.approx(theirs, abs=3e-6)


def _scores(sep: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    included = rng.random(2000) < 0.5
    return rng.normal(size=2000) + sep * included, included


@pytest.mark.parametrize(("sep", "seed"), [(1.0, 0), (2.0, 1), (3.0, 2), (4.0, 3)])
def test_one_sided_guesses_match_jax_privacy_on_the_same_scores(
    auditing: Any, sep: float, seed: int
) -> None:
    scores, included = _scores(sep, seed)
    auditor = auditing.CanaryScoreAuditor(scores[included], scores[~included])
    for k in (20, 100, 400):
        g = one_run.guesses(scores, included, k)
        threshold = np.sort(scores)[-k]
        explicit = auditing.Explicit(threshold)
        theirs = auditor.epsilon_one_run(0.05, 1e-5, threshold_strategy=explicit)
        assert one_run.steinke_epsilon(g.m, g.r, g.v, 0.05, 1e-5) == pytest.approx(theirs, abs=3e-6)


@pytest.mark.parametrize(("sep", "seed"), [(0.0, 7), (1.0, 4), (2.0, 5), (3.0, 6), (4.0, 8)])
def test_gdp_matches_jax_privacy_on_its_thresholds(auditing: Any, sep: float, seed: int) -> None:
    # jax_privacy reads the Pareto frontier of (false negatives, true negatives) and takes
    # |mu| (the reverse test too, with upper bounds on both rates: not the conservative side);
    # from a separation of 2 its maximum is the forward test, the only one dpledger reads
    scores, included = _scores(sep, seed)
    auditor = auditing.CanaryScoreAuditor(scores[included], scores[~included])
    tn, fn = auditor._tn_counts, auditor._fn_counts
    mu = one_run.gdp_mu(tn[-1] - tn, fn, int(tn[-1]), int(fn[-1]), 0.05, 1e-5)
    theirs = auditor.epsilon_from_gdp(0.05, 1e-5)
    ours = one_run.gdp_epsilon_of_mu(mu, 1e-5)
    assert ours <= theirs * (1 + 1e-6) + 1e-9  # the forward test is one of the two it reads
    if sep >= 2.0:
        assert ours == pytest.approx(theirs, rel=1e-6)

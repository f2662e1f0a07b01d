"""Empirical audits of every builtin primitive plugin, run through its real ``run()`` code.

Each case runs the plugin on a worst-case neighbouring pair (D, D') under add/remove adjacency
and audits its outputs against the accountant's certified epsilon for the plugin's own
declaration. "No violation found" is not "verified": every audit also reports its ceiling (the
largest lower bound its sample size could ever certify) and must be *informative*: its lower
bound reaches a stated fraction of the claim, so a plugin leaking about twice the claimed
epsilon would be flagged.

Vectorised sampling: where a plugin adds independent noise per coordinate (and, for DP-SGD,
samples records independently), one call on a pair whose coordinates each differ by one
neighbour's worth yields many independent samples of the one-coordinate pair: the other
coordinates of a single neighbour are identically distributed under D and D' and independent
of the differing one, so they carry no information. This assumes per-coordinate independence
of the noise, which the audit therefore does not test.

To audit a new builtin method, add one line to ``CASES``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit import audit_mechanism
from dpledger.audit.auditor import NO_VIOLATION, accountant_claim
from dpledger.core.adjacency import Adjacency
from dpledger.core.specs import MethodSpec
from dpledger.plugins import primitives
from dpledger.plugins.primitives import (
    bounded_mean,
    dp_sgd,
    gaussian,
    histogram,
    laplace,
    nn_voting,
    selection,
)
from dpledger.runtime.ledger import PrivacyLedger

DELTA = 1e-3
ALPHA = 0.05
B = 20_000  # samples per call for vectorised plugins
Output = Callable[[dict[str, Any]], np.ndarray]


@attrs.frozen
class Case:
    """One audited plugin configuration: the pair, how to read samples, how much to sample."""

    spec: MethodSpec
    params: Any
    d: Any
    d_prime: Any
    output: Output
    n_search: int = 60_000
    n_test: int = 200_000
    #: the audit's lower bound must reach this fraction of the claimed epsilon
    min_ratio: float = 0.6
    score: Callable[[np.ndarray], np.ndarray] | None = None
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.spec.name


def field(key: str, *, width: int | None = None, scale: float = 1.0) -> Output:
    def read(out: dict[str, Any]) -> np.ndarray:
        arr = np.asarray(out[key], dtype=np.float64) * scale
        return arr.reshape(-1, width) if width else arr.reshape(-1)

    return read


def first(key: str) -> Output:
    return lambda out: np.atleast_1d(np.asarray(out[key], dtype=np.float64).reshape(-1)[:1])


# -- worst-case pairs ---------------------------------------------------------------------------
# pairs whose data grows quadratically with the samples per call use small blocks
MEAN_ROWS, MEAN_DIM = 10, 200
GROUPS = 200  # nn voting: candidate groups of 3, one extra record voting for each group
CANDIDATES = (100.0 * np.repeat(np.arange(GROUPS), 3) + np.tile([0.0, 0.1, 0.2], GROUPS))[:, None]
SGD_DIM = 200
#: selection: candidate 0 gains 1, the ten others lose 1 (sensitivity 1, non-monotonic); with
#: many competitors the ratio of Pr[index 0] approaches e^epsilon (two candidates give e^{eps/2})
SCORES_D = np.array([0.0] + [1.0] * 10)
SCORES_D_PRIME = np.array([1.0] + [0.0] * 10)

CASES: tuple[Case, ...] = (
    Case(
        gaussian.SPEC, gaussian.GaussianParams(1.0, 1.0), np.zeros(B), np.ones(B), field("release")
    ),
    Case(laplace.SPEC, laplace.LaplaceParams(1.0, 1.0), np.zeros(B), np.ones(B), field("release")),
    Case(
        histogram.SPEC,
        histogram.HistogramParams(num_bins=B, noise_multiplier=1.0),
        np.zeros(0),
        np.arange(B, dtype=float),
        field("counts"),
        label="histogram_laplace",
    ),
    Case(
        histogram.SPEC,
        histogram.HistogramParams(num_bins=B, noise_multiplier=1.0, mechanism="gaussian"),
        np.zeros(0),
        np.arange(B, dtype=float),
        field("counts"),
        label="histogram_gaussian",
    ),
    Case(
        bounded_mean.SPEC,
        bounded_mean.BoundedMeanParams(1.0, 1.0, MEAN_ROWS),
        np.zeros((MEAN_ROWS, MEAN_DIM)),
        np.vstack([np.zeros((MEAN_ROWS, MEAN_DIM)), np.eye(MEAN_DIM)]),
        field("mean", scale=MEAN_ROWS),
        n_search=40_000,
        n_test=120_000,
    ),
    Case(
        nn_voting.SPEC,
        nn_voting.NNVotingParams(k=3, top_n=1, noise_multiplier=1.0),
        {"records": np.zeros((0, 1)), "candidates": CANDIDATES},
        {"records": (100.0 * np.arange(GROUPS) + 0.1)[:, None], "candidates": CANDIDATES},
        field("noisy_votes", width=3),
        n_search=40_000,
        n_test=120_000,
        score=lambda rows: rows.sum(axis=1),
    ),
    Case(
        dp_sgd.SPEC,
        dp_sgd.DPSGDParams(
            steps=1,
            sampling_probability=0.5,
            noise_multiplier=1.0,
            clip_norm=1.0,
            expected_batch_size=1.0,
            learning_rate=1.0,
            fit_intercept=False,
        ),
        {"x": np.zeros((SGD_DIM, SGD_DIM)), "y": np.zeros(SGD_DIM)},
        {
            "x": np.vstack([np.zeros((SGD_DIM, SGD_DIM)), 100.0 * np.eye(SGD_DIM)]),
            "y": np.zeros(2 * SGD_DIM),
        },
        field("weights"),
        n_search=40_000,
        n_test=120_000,
    ),
    Case(
        selection.EXPONENTIAL,
        selection.SelectionParams(epsilon=1.0),
        SCORES_D,
        SCORES_D_PRIME,
        field("index"),
        n_search=1_500,
        n_test=6_000,
        min_ratio=0.5,
    ),
    Case(
        selection.REPORT_NOISY_MAX,
        selection.SelectionParams(epsilon=1.0),
        SCORES_D,
        SCORES_D_PRIME,
        field("index"),
        n_search=1_500,
        n_test=6_000,
        min_ratio=0.4,
    ),
    Case(
        selection.NOISY_TOP_K,
        selection.TopKParams(epsilon=1.0, k=1),
        SCORES_D,
        SCORES_D_PRIME,
        first("indices"),
        n_search=1_500,
        n_test=6_000,
        min_ratio=0.5,
    ),
)


def sampler_for(
    case: Case, adjacency: Adjacency
) -> Callable[[Any, int, np.random.Generator], np.ndarray]:
    """Run the plugin (fresh ledger per call, declaration checked) until ``n`` samples exist."""
    declared = case.spec.declare(case.params, adjacency)

    def sample(data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        chunks, have = [], 0
        while have < n:
            ledger = PrivacyLedger(declared, adjacency, rng)
            out = case.spec.run(case.params, data, ledger, rng)
            ledger.verify()
            rows = case.output(out)
            chunks.append(rows)
            have += rows.shape[0]
        return np.concatenate(chunks)[:n]

    return sample


def audit(case: Case, seed: int, scale: int = 1) -> tuple[Any, float]:
    adjacency = Adjacency()
    claim = accountant_claim(case.spec.declare(case.params, adjacency), adjacency)
    result = audit_mechanism(
        sampler_for(case, adjacency),
        case.d,
        case.d_prime,
        claimed_epsilon=claim,
        deltas=(DELTA,),
        alpha=ALPHA,
        n_search=case.n_search * scale,
        n_test=case.n_test * scale,
        rng=seed,
        score=case.score,
        description=case.name,
        claim_source="dpledger.accountant.select.account of the plugin's declaration",
    )
    return result.at(DELTA), claim(DELTA)


def check(case: Case, seed: int, scale: int, record_property: Callable[[str, Any], None]) -> None:
    row, claimed = audit(case, seed, scale)
    record_property("claimed_epsilon", claimed)
    record_property("epsilon_lower", row.epsilon_lower)
    record_property("ceiling", row.ceiling)
    print(
        f"{case.name}: claimed {claimed:.4f}, lower bound {row.epsilon_lower:.4f}, "
        f"ceiling {row.ceiling:.2f}, resolution {row.resolution:.3f} at delta={DELTA}: "
        f"{row.verdict} (not a proof of privacy)"
    )
    assert row.verdict == NO_VIOLATION, f"{case.name}: {row.to_dict()}"
    assert row.ceiling > claimed, f"{case.name}: the audit could never refute its claim"
    assert row.epsilon_lower >= case.min_ratio * claimed, (
        f"{case.name}: audit too weak ({row.epsilon_lower:.3f} vs claim {claimed:.3f})"
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_builtin_plugin_passes_its_audit(
    case: Case, record_property: Callable[[str, Any], None]
) -> None:
    check(case, seed=0, scale=1, record_property=record_property)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_builtin_plugin_passes_a_larger_audit(
    case: Case, record_property: Callable[[str, Any], None]
) -> None:
    check(case, seed=1, scale=5, record_property=record_property)


def test_every_builtin_primitive_method_is_audited() -> None:
    specs: set[str] = set()
    for info in pkgutil.iter_modules(primitives.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{primitives.__name__}.{info.name}")
        specs |= {v.name for v in vars(module).values() if isinstance(v, MethodSpec)}
    audited = {c.spec.name for c in CASES}
    assert specs <= audited, f"add an audit case (one line in CASES) for {sorted(specs - audited)}"


def test_a_planted_under_declaration_is_flagged() -> None:
    """The same machinery flags a plugin run with half the noise its declaration states."""
    case = CASES[0]
    honest = case.spec.declare(case.params, Adjacency())
    loud = attrs.evolve(case, params=gaussian.GaussianParams(1.0, 0.5))
    sample = sampler_for(loud, Adjacency())
    claim = accountant_claim(honest, Adjacency())
    result = audit_mechanism(
        sample,
        case.d,
        case.d_prime,
        claimed_epsilon=claim,
        deltas=(DELTA,),
        n_search=case.n_search,
        n_test=case.n_test,
        rng=2,
    )
    assert result.at(DELTA).epsilon_lower > claim(DELTA)

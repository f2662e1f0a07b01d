"""Direct: a fixed Select-Measure-Estimate baseline on flattened tables (paper C, Section 5.1).

Measured (one Gaussian release of all marginals stacked, i.e. a uniform budget):

* every 1-way marginal ``(A@t)``;
* every adjacent-time same-feature 2-way marginal ``(A@t, A@t+1)`` (the Markov variant);
* variant ``"across"`` adds up to ``n_across`` same-time pairs ``(A@t, B@t)`` drawn at random
  with the public ``seed`` (data-independent, so it costs nothing).

The stacked vector of ``k`` count marginals has add/remove L2 sensitivity ``sqrt(k)``; with noise
multiplier ``sigma`` (per-cell std ``sigma * sqrt(k)``) the release is exactly one Gaussian
mechanism, declared as ``GaussianEvent(sigma)``, where ``sigma`` is the analytic Gaussian
calibration of (epsilon, delta). Private-PGM (``mbi`` mirror descent) then fits a graphical model
and synthetic flat records are sampled and un-flattened (post-processing).
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

import attrs
import numpy as np

from dpledger.plugin import (
    Event,
    GaussianEvent,
    InvalidParameterError,
    nonnegative_int,
    positive_finite,
    positive_int,
)
from dpledger.plugins.path.flatten import FlatSpec, flatten, unflatten
from dpledger.plugins.path.schema import UserTables


def _delta(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidParameterError(
            attribute.name, f"must lie in (0, 1), got {value!r}", "pass e.g. 1/n**2"
        )


def _variant(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("markov", "across"):
        raise InvalidParameterError(
            "variant", f"unknown variant {value!r}", "use 'markov' or 'across'"
        )


@attrs.frozen
class DirectParams:
    """(epsilon, delta) target; flattening length/bins/mode; variant; estimation iterations."""

    epsilon: float = attrs.field(validator=positive_finite)
    delta: float = attrs.field(validator=_delta)
    length: int = attrs.field(default=10, validator=positive_int)
    bins: int = attrs.field(default=16, validator=positive_int)
    mode: Literal["truncate", "pad"] = "truncate"
    variant: Literal["markov", "across"] = attrs.field(default="markov", validator=_variant)
    n_across: int = attrs.field(default=80, validator=nonnegative_int)
    iters: int = attrs.field(default=1000, validator=positive_int)
    n_synthetic: int = attrs.field(default=0, validator=nonnegative_int)  # 0: model's total
    seed: int = attrs.field(default=0, validator=nonnegative_int)


def noise_multiplier(epsilon: float, delta: float) -> float:
    """Analytic Gaussian calibration (Balle & Wang 2018) of one release at (epsilon, delta)."""
    from dpledger.plugin import analytic_gaussian_sigma

    return analytic_gaussian_sigma(float(epsilon), float(delta))


def declare(params: DirectParams, adjacency: Any) -> Event:
    return GaussianEvent(noise_multiplier(params.epsilon, params.delta))


def cliques(spec: FlatSpec, variant: str, n_across: int, seed: int) -> list[tuple[str, ...]]:
    """The measured cliques (data-independent)."""
    names = [c.name for c in spec.columns]
    L = spec.length
    out: list[tuple[str, ...]] = [(f"{a}@{t}",) for t in range(L) for a in names]
    out += [(f"{a}@{t}", f"{a}@{t + 1}") for a in names for t in range(L - 1)]
    if variant == "across":
        pairs = [
            (f"{a}@{t}", f"{b}@{t}") for t in range(L) for a, b in itertools.combinations(names, 2)
        ]
        rng = np.random.default_rng(seed)
        k = min(n_across, len(pairs))
        out += [pairs[i] for i in sorted(rng.choice(len(pairs), size=k, replace=False))]
    return out


def run_direct(
    tables: UserTables, params: DirectParams, ledger: Any
) -> tuple[UserTables, dict[str, Any]]:
    """Measure, estimate, sample; returns synthetic tables and a small info dict.

    ``n_synthetic = 0`` samples the model's total (a post-processed noisy count), never the
    number of kept records.
    """
    from dpledger.plugins.path import marginals

    spec = FlatSpec(tables.schema, params.length, params.bins, params.mode)
    records = flatten(tables, spec)
    cls = cliques(spec, params.variant, params.n_across, params.seed)
    sigma = noise_multiplier(params.epsilon, params.delta)
    meas = marginals.measure_stacked(records, spec, cls, sigma, ledger, step="direct_marginals")
    model = marginals.estimate(spec, meas, params.iters)
    n = params.n_synthetic or max(1, round(float(model.total)))
    syn = marginals.synthesize(model, spec, n, params.seed)
    out = unflatten(syn, spec, np.random.default_rng(params.seed + 1))
    # only public values and post-processing of the release (no exact count of the data)
    info = {"n_cliques": len(cls), "noise_multiplier": sigma, "n_synthetic": n}
    return out, info

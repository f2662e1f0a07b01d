"""Black-box empirical audits of every builtin *method* plugin, through its real ``run()``.

Each case runs the method under :func:`~dpledger.runtime.runner.run_verified` (declaration,
fresh ledger, verification) on a neighbouring pair of tiny datasets that differ in one planted
outlier record (or user), reduces every release to one scalar statistic that moves towards the
outlier, and audits the statistic against the accountant's certified epsilon for the method's
own declaration of exactly that configuration, at delta = 1e-3.

These audits are *weak*: a whole method adds public randomness (initialisation, Langevin noise,
generation) on top of its private noise and releases a post-processed output, and only a few
hundred runs fit in a test. The empirical lower bound is therefore far below the claim; the
tests assert that no violation is found, that the configuration really ran, and they report the
ceiling (the largest lower bound the sample size could ever certify). "No violation found" is
not "verified": the claims rest on the accountant and the proofs, not on these tests. What the
audits do catch is a gross leak of the released output (e.g. noise dropped, or the outlier
copied into the release), which would push the lower bound to the ceiling.

The SHK case draws many samples per call: the grid solver's density is a deterministic function
of the data and every draw of one call is an independent draw from it, so the draws of one call
are i.i.d. samples of the single-draw release, whose claim is audited. (The particle sampler
claims no guarantee, so there is nothing to audit.)

To audit a new builtin method, add a case to ``FAST`` (and ``SLOW``);
:func:`test_every_builtin_method_has_an_audit` fails until then.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit import audit_mechanism
from dpledger.audit.auditor import NO_VIOLATION, accountant_claim
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import stated_for_unit
from dpledger.core.specs import MethodSpec
from dpledger.plugins.aggregate import plugin as aggregate_plugin
from dpledger.plugins.path import baselines_plugin
from dpledger.plugins.path import plugin as path_plugin
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.shk import plugin as shk_plugin
from dpledger.plugins.swflow import plugin as swflow_plugin
from dpledger.plugins.trajectories import plugin as trajectories_plugin
from dpledger.runtime.plugin_manager import BUILTIN_DISTRIBUTION, PluginHost
from dpledger.runtime.runner import declare_checked, run_verified

DELTA = 1e-3
ALPHA = 0.05
ROW = Adjacency()
REPLACE = Adjacency(relation="replace_one")
USER = Adjacency(unit="user", unit_key="id")
Statistic = Callable[[dict[str, Any]], np.ndarray]


@attrs.frozen
class Case:
    """One audited method configuration on a neighbouring pair ``(d, d_prime)``.

    ``statistic`` maps one run's outputs to one or more i.i.d. scalar samples of the audited
    release; ``claim_params`` (default ``params``) is the configuration whose declaration is
    the claim for *one* such sample.
    """

    label: str
    spec: MethodSpec
    params: Any
    adjacency: Adjacency
    d: Any
    d_prime: Any
    statistic: Statistic
    n_search: int
    n_test: int
    claim_params: Any = None
    note: str = ""

    @property
    def claimed_event(self) -> Any:
        """The declaration stated per privacy unit (lifted by the core if it is row level)."""
        params = self.params if self.claim_params is None else self.claim_params
        declaration = declare_checked(self.spec, params, self.adjacency)
        core = _HOST.lower(declaration.event, self.adjacency)  # plugin mechanisms onto core
        event, _ = stated_for_unit(core, declaration.unit, self.adjacency, release=self.label)
        return event


#: the builtin plugins, to lower their own mechanism events
_HOST = PluginHost.create(builtin_only=True)


# -- statistics ---------------------------------------------------------------------------------
def particle_mean(key: str, index: tuple[Any, ...] = (Ellipsis, 0)) -> Statistic:
    """Mean of the first coordinate of released particles (the outlier lies on that axis)."""

    def read(out: dict[str, Any]) -> np.ndarray:
        return np.array([float(np.mean(np.asarray(out[key], dtype=np.float64)[index]))])

    return read


def shk_cosine(out: dict[str, Any]) -> np.ndarray:
    """cos(angle) of every released draw (D's records sit at angle 0, D' adds one at pi)."""
    return np.cos(np.asarray(out["samples"], dtype=np.float64))


def positive_rows(key: str) -> Statistic:
    """Number of released synthetic rows with ``x >= 0`` (the added user has x = +4)."""

    def read(out: dict[str, Any]) -> np.ndarray:
        tables = out[key]
        if tables is None:
            return np.array([-1.0])
        x = tables.schema.columns.index(next(c for c in tables.schema.columns if c.name == "x"))
        return np.array([float(sum(row[x] >= 0 for u in tables.users for row in u.rows))])

    return read


# -- tiny neighbouring datasets -----------------------------------------------------------------
OUT = 0.9  # the planted record's coordinate (records live in the unit ball)
SW_D = np.array([[-OUT, 0.0], [0.0, 0.0]])
SW_D_PRIME = np.array([[OUT, 0.0], [0.0, 0.0]])
#: the generator has batch normalisation, so its batches need two records
GEN_D = np.array([[-OUT, 0.0], [0.0, 0.0], [0.0, 0.0]])
GEN_D_PRIME = np.array([[OUT, 0.0], [0.0, 0.0], [0.0, 0.0]])


def _marginals(first: float) -> dict[str, Any]:
    m0 = np.array([[first, 0.0], [0.0, 0.0], [0.0, 0.0]])
    return {"marginals": [m0, np.zeros((3, 2))]}


SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("x", "numeric", lower=-5.0, upper=5.0),
        Column("c", "categorical", categories=("a", "b")),
    )
)


def _tables(extra: bool) -> UserTables:
    users = [UserTable(str(i), ((str(i), -4.0, "a"),)) for i in range(3)]
    if extra:
        users.append(UserTable("3", (("3", 4.0, "b"),)))
    return UserTables(SCHEMA, tuple(users))


# -- configurations -----------------------------------------------------------------------------
TRAJ = trajectories_plugin.SPEC.make_params(
    {
        "n_per_time": [3, 3],
        "m": 2,
        "K": 1,
        "tau": 2.0,
        "C": 1.0,
        "rho": 0.5,
        "eta": 0.2,
        "sigma": 0.5,
        "lambda_": 1.0,
        "diffusivity": 0.2,
        "radius": 1.0,
        "center": [0.0, 0.0],
        "warm_start": {"kind": "none", "public_init": "gaussian", "public_std": 0.05},
        "sinkhorn_iters": 2000,
        "sinkhorn_tol": 1e-6,
    }
)
SWFLOW_R = swflow_plugin.DPSWFLOW_R.make_params(
    {
        "dataset_size": 2,
        "batch_size": 1,
        "num_steps": 1,
        "num_projections": 2,
        "num_particles": 32,
        "noise_multiplier": 2.0,
    }
)
SWFLOW = swflow_plugin.DPSWFLOW.make_params(
    {
        "num_steps": 1,
        "num_projections": 2,
        "num_sub_projections": 2,
        "num_particles": 32,
        "noise_multiplier": 2.0,
    }
)
SWGEN = swflow_plugin.DPSWGEN.make_params(
    {
        "dataset_size": 3,
        "batch_size": 2,
        "num_steps": 1,
        "num_projections": 2,
        "num_particles": 32,
        "noise_multiplier": 2.0,
        "hidden": 4,
        "noise_dim": 2,
        "learning_rate": 0.5,
    }
)
SHK_DRAWS = 2000
SHK_GRID = {"t": 3.0, "beta": 1.0, "n": 2, "n_cells": 32}
DIRECT = baselines_plugin.DIRECT_SPEC.make_params(
    {"epsilon": 1.0, "delta": DELTA, "length": 1, "bins": 2, "iters": 1}
)
AIM = baselines_plugin.AIM_SPEC.make_params(
    {"epsilon": 1.0, "delta": DELTA, "length": 1, "bins": 2, "iters": 1, "rounds": 2}
)
PATH = path_plugin.SPEC.make_params(
    {
        "noise_multiplier": 4.0,
        "delta": DELTA,
        "steps": 1,
        "sampling_probability": 1.0,
        "clip_norm": 0.1,
        "selection_epsilon": 0.5,
        "k": 1,
        "overgeneration": 2.0,
        "embedder": "summary",
        "lora_rank": 1,
        "n_layer": 1,
        "n_head": 1,
        "n_embd": 4,
        "max_tokens": 64,
        "max_rows": 1,
        "physical_batch": 4,
        "length_pmf": (1.0,),
        "n_synthetic": 1,
        "expected_batch_size": 3.0,
        "generation_batch": 8,
        "max_row_tokens": 32,
    }
)


def _shk(values: dict[str, Any], n_search: int, n_test: int, label: str) -> Case:
    spec = shk_plugin.SPEC
    return Case(
        label,
        spec,
        spec.make_params({**values, "n_samples": SHK_DRAWS}),
        ROW,
        np.array([0.0, 0.0]),
        np.array([0.0, 0.0, math.pi]),
        shk_cosine,
        n_search,
        n_test,
        claim_params=spec.make_params(values),
        note="one call gives SHK_DRAWS i.i.d. draws; the claim is that of one draw",
    )


# the aggregate method: 10 light units and unit 99 with 2 rows in each of 2 partitions; D' drops 99
AGGREGATE = aggregate_plugin.AggregateParams(
    partition_column="day",
    noise_multiplier=1.0,
    mechanism="laplace",
    unit_column="user",
    public_partitions=("mon", "tue"),
)
AGG_D = {
    "user": np.r_[np.arange(10), [99] * 4].astype(np.int64),
    "day": np.array(["mon", "tue"] * 5 + ["mon", "mon", "tue", "tue"]),
}
AGG_D_PRIME = {c: v[:10] for c, v in AGG_D.items()}
# the histogram: light units' values in bin 0, unit 99's in bin 1 (public bins of "spend")
AGG_HIST = attrs.evolve(
    AGGREGATE, metrics=("histogram",), value_column="spend", bin_edges=(0.0, 1.0, 2.0)
)
AGG_HIST_D = {**AGG_D, "spend": np.r_[np.full(10, 0.5), np.full(4, 1.5)]}
AGG_HIST_D_PRIME = {c: v[:10] for c, v in AGG_HIST_D.items()}


def total_count(out: dict[str, Any]) -> np.ndarray:
    """The released counts summed over the public partitions (unit 99 adds at most 1)."""
    return np.array([float(np.sum(out["count"]))])


def upper_bin_total(out: dict[str, Any]) -> np.ndarray:
    """The released counts of the upper bin summed over the partitions (unit 99 adds at most
    1)."""
    return np.array([float(np.sum(np.asarray(out["histogram"])[:, 1]))])


def _cases(scale: int) -> tuple[Case, ...]:
    s = scale
    return (
        Case(
            "trajectories",
            trajectories_plugin.SPEC,
            TRAJ,
            REPLACE,
            _marginals(-OUT),
            _marginals(OUT),
            particle_mean("particles", (0, slice(None), 0)),
            60 * s,
            180 * s,
            note="replace-one: the marginal sizes are public; outlier in marginal 0",
        ),
        Case(
            "dpswflow-r",
            swflow_plugin.DPSWFLOW_R,
            SWFLOW_R,
            REPLACE,
            SW_D,
            SW_D_PRIME,
            particle_mean("particles"),
            300 * s,
            900 * s,
        ),
        Case(
            "dpswflow",
            swflow_plugin.DPSWFLOW,
            SWFLOW,
            REPLACE,
            SW_D,
            SW_D_PRIME,
            particle_mean("particles"),
            600 * s,
            1800 * s,
        ),
        Case(
            "dpswgen",
            swflow_plugin.DPSWGEN,
            SWGEN,
            REPLACE,
            GEN_D,
            GEN_D_PRIME,
            particle_mean("particles"),
            250 * s,
            750 * s,
        ),
        _shk(SHK_GRID, 5_000 * s, 20_000 * s, "shk_grid"),
        Case(
            "direct",
            baselines_plugin.DIRECT_SPEC,
            DIRECT,
            USER,
            _tables(False),
            _tables(True),
            positive_rows("tables"),
            200 * s,
            600 * s,
        ),
        Case(
            "aim",
            baselines_plugin.AIM_SPEC,
            AIM,
            USER,
            _tables(False),
            _tables(True),
            positive_rows("tables"),
            100 * s,
            300 * s,
        ),
        Case(
            "aggregate",
            aggregate_plugin.SPEC,
            AGGREGATE,
            ROW,
            AGG_D,
            AGG_D_PRIME,
            total_count,
            150 * s,
            450 * s,
            note="the method bounds units itself (row-level adjacency); D' drops the heavy unit",
        ),
        Case(
            "aggregate_histogram",
            aggregate_plugin.SPEC,
            AGG_HIST,
            ROW,
            AGG_HIST_D,
            AGG_HIST_D_PRIME,
            upper_bin_total,
            150 * s if s > 1 else 50,  # a smoke in the default tier (the count case is larger)
            450 * s if s > 1 else 150,
            note="a histogram over public bins; D' drops the heavy unit, whose rows lie in bin 1",
        ),
    )


FAST = _cases(1)
PATH_FAST = Case(
    "path",
    path_plugin.SPEC,
    PATH,
    USER,
    _tables(False),
    _tables(True),
    positive_rows("synthetic"),
    10,
    20,
    note="~0.2 s per run after a ~4 s model start-up",
)
SLOW = (*_cases(4), attrs.evolve(PATH_FAST, n_search=40, n_test=150))


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Torch runs are ~30x faster single-threaded at these sizes (and the machine is shared)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def sampler_for(case: Case) -> Callable[[Any, int, np.random.Generator], np.ndarray]:
    """Run the method under ``run_verified`` (fresh ledger, verified) until ``n`` samples exist."""

    def sample(data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        chunks, have = [], 0
        while have < n:
            seed = int(rng.integers(0, 2**62))
            result = run_verified(case.spec, case.params, data, adjacency=case.adjacency, seed=seed)
            rows = case.statistic(dict(result.outputs))
            chunks.append(rows)
            have += rows.shape[0]
        return np.concatenate(chunks)[:n]

    return sample


def check(case: Case, seed: int, record_property: Callable[[str, Any], None]) -> None:
    claim = accountant_claim(case.claimed_event, case.adjacency)
    claimed = claim(DELTA)
    result = audit_mechanism(
        sampler_for(case),
        case.d,
        case.d_prime,
        claimed_epsilon=claim,
        deltas=(DELTA,),
        alpha=ALPHA,
        n_search=case.n_search,
        n_test=case.n_test,
        rng=seed,
        description=f"{case.label}: {case.note}",
        claim_source="dpledger.accountant.select.account of the method's declaration",
    )
    row = result.at(DELTA)
    record_property("claimed_epsilon", claimed)
    record_property("epsilon_lower", row.epsilon_lower)
    record_property("ceiling", row.ceiling)
    print(
        f"{case.label}: claimed {claimed:.3f}, lower bound {row.epsilon_lower:.3f}, ceiling "
        f"{row.ceiling:.2f} (n_test={case.n_test}) at delta={DELTA}: {row.verdict}; a weak "
        f"whole-method audit, not a proof of privacy"
    )
    assert math.isfinite(claimed) and claimed > 0, f"{case.label}: no finite claim"
    assert row.verdict == NO_VIOLATION, f"{case.label}: {row.to_dict()}"


#: the smoke audits that take several seconds each run in the slow tier (with SLOW's larger ones);
#: the research methods' torch flows among them (their ledger primitives are audited in the
#: default tier by the primitive audits)
HEAVY = frozenset({"aim", "direct", "dpswgen", "dpswflow", "dpswflow-r", "shk_grid"})


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c.label in HEAVY else c for c in FAST],
    ids=lambda c: c.label,
)
def test_method_passes_its_audit(case: Case, record_property: Callable[[str, Any], None]) -> None:
    check(case, seed=0, record_property=record_property)


@pytest.mark.parametrize("case", [PATH_FAST], ids=lambda c: c.label)
def test_path_passes_a_tiny_audit(case: Case, record_property: Callable[[str, Any], None]) -> None:
    check(case, seed=0, record_property=record_property)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=lambda c: c.label)
def test_method_passes_a_larger_audit(
    case: Case, record_property: Callable[[str, Any], None]
) -> None:
    check(case, seed=1, record_property=record_property)


def _primitive_cases() -> set[str]:
    """Method names audited by the primitive-plugin audits (loaded from their test file)."""
    path = Path(__file__).with_name("test_builtin_plugins.py")
    spec = importlib.util.spec_from_file_location("_dpledger_primitive_audits", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {c.spec.name for c in module.CASES}


def test_every_builtin_method_has_an_audit() -> None:
    host = PluginHost.create()
    builtin = {
        name
        for name, spec in host.methods().items()
        if spec.provenance is not None and spec.provenance.distribution == BUILTIN_DISTRIBUTION
    }
    assert "trajectories" in builtin and "path" in builtin  # the entry points were found
    audited = {c.spec.name for c in (*FAST, PATH_FAST)} | _primitive_cases()
    assert builtin <= audited, (
        f"add an audit case (FAST in this file, or CASES in test_builtin_plugins.py) for "
        f"{sorted(builtin - audited)}"
    )
    assert {c.spec.name for c in SLOW} >= {c.spec.name for c in FAST}

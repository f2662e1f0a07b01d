"""No builtin method publishes an exact data-dependent value outside its noisy releases.

Every builtin method runs under :func:`~dpledger.runtime.runner.run_verified` on two neighbouring
datasets (one record or user added, or one record replaced, per the method's relation) with the
same seed. Everything that is not noise, or post-processing of noise, must then be identical:
the same keys, types, array shapes and dtypes, nested structure, and the same ints, bools,
strings and non-float arrays. A count, a size or a default derived from the private data (e.g.
the number of users as the output size, δ = 1/n², a count of kept records) differs between
neighbours and fails here. Floats may differ (they carry noise); the few non-float values that
are post-processing of noisy releases are listed per case in ``noisy``.

The public record (the ledger's part of ``ledger.json``, and the output names) must be equal
too, and so must the outputs at user level: ``USER_ROWS`` runs every builtin method that takes
rows on a user-level source, with one user of three rows (more than the contribution bound)
added; the methods that refuse a user-level source are in ``USER_REFUSED``.

To add a builtin method, add a case to ``FAST``; :func:`test_every_builtin_method_has_a_case`
fails until then.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.specs import MethodSpec
from dpledger.plugins.aggregate import plugin as aggregate_plugin
from dpledger.plugins.path import baselines_plugin
from dpledger.plugins.path import plugin as path_plugin
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.primitives import (
    bounded_mean,
    dp_sgd,
    gaussian,
    histogram,
    laplace,
    nn_voting,
    selection,
)
from dpledger.plugins.shk import plugin as shk_plugin
from dpledger.plugins.swflow import plugin as swflow_plugin
from dpledger.plugins.trajectories import plugin as trajectories_plugin
from dpledger.runtime.plugin_manager import BUILTIN_DISTRIBUTION, PluginHost
from dpledger.runtime.runner import run_verified

ROW = Adjacency()
REPLACE = Adjacency(relation="replace_one")
USER = Adjacency(unit="user", unit_key="id")
SEED = 7


@attrs.frozen
class Case:
    """One method on a neighbouring pair; ``noisy``: output paths (``info.n_selected``) whose
    non-float values are post-processing of noisy releases and may differ."""

    spec: MethodSpec
    params: Any
    adjacency: Adjacency
    d: Any
    d_prime: Any
    noisy: frozenset[str] = frozenset()
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.spec.name


SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("x", "numeric", lower=-5.0, upper=5.0),
        Column("c", "categorical", categories=("a", "b")),
    )
)


def _tables(n_users: int) -> UserTables:
    users = [
        UserTable(
            str(i), tuple((str(i), float(i) - 1.5 + r, "ab"[(i + r) % 2]) for r in range(1 + i % 2))
        )
        for i in range(n_users)
    ]
    return UserTables(SCHEMA, tuple(users))


def _marginals(first: float) -> dict[str, Any]:
    return {"marginals": [np.array([[first, 0.0], [0.0, 0.0], [0.0, 0.0]]), np.zeros((3, 2))]}


#: a tiny trajectories run (two times of three points)
TRAJECTORIES = trajectories_plugin.SPEC.make_params(
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
SW_D, SW_D_PRIME = np.array([[-0.9, 0.0], [0.0, 0.0]]), np.array([[0.9, 0.0], [0.0, 0.0]])
GEN_D = np.array([[-0.9, 0.0], [0.0, 0.0], [0.0, 0.0]])
GEN_D_PRIME = np.array([[0.9, 0.0], [0.0, 0.0], [0.0, 0.0]])
SCORES_D, SCORES_D_PRIME = np.array([0.0, 1.0, 1.0]), np.array([1.0, 0.0, 1.0])
CANDIDATES = np.array([[0.0], [1.0], [5.0]])
LINES = {"length": 2, "bins": 2, "iters": 2}

#: the aggregate method: unit 99 holds two rows in each of two public partitions; D' drops it
AGG_D = {
    "user": np.r_[np.arange(6), [99] * 4].astype(np.int64),
    "day": np.array(["mon", "tue"] * 3 + ["mon", "mon", "tue", "tue"]),
    "x": np.r_[np.linspace(0.0, 1.0, 6), [5.0] * 4],
}
AGG_D_PRIME = {column: values[:6] for column, values in AGG_D.items()}
AGGREGATE = aggregate_plugin.AggregateParams(
    partition_column="day",
    noise_multiplier=1.0,
    metrics=("count", "sum"),
    value_column="x",
    unit_column="user",
    max_partitions_per_unit=1,
    max_rows_per_partition=1,
    public_partitions=("mon", "tue"),
)

FAST: tuple[Case, ...] = (
    Case(gaussian.SPEC, gaussian.GaussianParams(1.0, 1.0), ROW, np.zeros(3), np.ones(3)),
    Case(laplace.SPEC, laplace.LaplaceParams(1.0, 1.0), ROW, np.zeros(3), np.ones(3)),
    Case(
        histogram.SPEC,
        histogram.HistogramParams(num_bins=4, noise_multiplier=1.0),
        ROW,
        np.array([0.0, 1.0]),
        np.array([0.0, 1.0, 2.0]),
    ),
    Case(
        bounded_mean.SPEC,
        bounded_mean.BoundedMeanParams(1.0, 1.0, 3),
        ROW,
        np.zeros((3, 2)),
        np.vstack([np.zeros((3, 2)), np.ones((1, 2)) * 0.5]),
    ),
    Case(
        nn_voting.SPEC,
        nn_voting.NNVotingParams(k=1, top_n=1, noise_multiplier=1.0),
        ROW,
        {"records": np.array([[0.1]]), "candidates": CANDIDATES},
        {"records": np.array([[0.1], [4.9]]), "candidates": CANDIDATES},
        noisy=frozenset({"selected"}),
    ),
    Case(
        dp_sgd.SPEC,
        dp_sgd.DPSGDParams(
            steps=2,
            sampling_probability=0.5,
            noise_multiplier=1.0,
            clip_norm=1.0,
            expected_batch_size=2.0,
            learning_rate=1.0,
        ),
        ROW,
        {"x": np.zeros((3, 2)), "y": np.zeros(3)},
        {"x": np.vstack([np.zeros((3, 2)), np.ones((1, 2))]), "y": np.array([0, 0, 0, 1.0])},
    ),
    Case(
        selection.EXPONENTIAL,
        selection.SelectionParams(epsilon=1.0),
        ROW,
        SCORES_D,
        SCORES_D_PRIME,
        noisy=frozenset({"index"}),
    ),
    Case(
        selection.REPORT_NOISY_MAX,
        selection.SelectionParams(epsilon=1.0),
        ROW,
        SCORES_D,
        SCORES_D_PRIME,
        noisy=frozenset({"index"}),
    ),
    Case(
        selection.NOISY_TOP_K,
        selection.TopKParams(epsilon=1.0, k=2),
        ROW,
        SCORES_D,
        SCORES_D_PRIME,
        noisy=frozenset({"indices"}),
    ),
    Case(
        shk_plugin.SPEC,
        shk_plugin.SPEC.make_params({"t": 1.0, "beta": 1.0, "n": 2, "n_cells": 16, "n_samples": 3}),
        ROW,
        np.array([0.0, 0.0]),
        np.array([0.0, 0.0, math.pi]),
        label="shk_grid",
    ),
    Case(
        shk_plugin.SPEC,
        shk_plugin.SPEC.make_params(
            {
                "t": 0.3,
                "beta": 1.0,
                "n": 2,
                "solver": "particles",
                "n_particles": 4,
                "particle_dt": 0.1,
                "n_samples": 2,
            }
        ),
        ROW,
        np.array([0.0, 0.0]),
        np.array([0.0, 0.0, math.pi]),
        label="shk_particles",
    ),
    Case(
        trajectories_plugin.SPEC,
        TRAJECTORIES,
        REPLACE,
        _marginals(-0.9),
        _marginals(0.9),
        noisy=frozenset({"sinkhorn_unconverged"}),
    ),
    Case(
        trajectories_plugin.SPEC,
        TRAJECTORIES,
        ROW,
        _marginals(-0.9),
        {"marginals": [np.zeros((2, 2)), np.zeros((3, 2))]},  # one point removed
        noisy=frozenset({"sinkhorn_unconverged"}),
        label="trajectories_add_remove",
    ),
    Case(
        swflow_plugin.DPSWFLOW_R,
        swflow_plugin.DPSWFLOW_R.make_params(
            {
                "dataset_size": 2,
                "batch_size": 1,
                "num_steps": 1,
                "num_projections": 2,
                "num_particles": 4,
                "noise_multiplier": 2.0,
            }
        ),
        REPLACE,
        SW_D,
        SW_D_PRIME,
    ),
    Case(
        swflow_plugin.DPSWFLOW,
        swflow_plugin.DPSWFLOW.make_params(
            {
                "num_steps": 1,
                "num_projections": 2,
                "num_sub_projections": 2,
                "num_particles": 4,
                "noise_multiplier": 2.0,
            }
        ),
        REPLACE,
        SW_D,
        SW_D_PRIME,
    ),
    Case(
        swflow_plugin.DPSWGEN,
        swflow_plugin.DPSWGEN.make_params(
            {
                "dataset_size": 3,
                "batch_size": 2,
                "num_steps": 1,
                "num_projections": 2,
                "num_particles": 4,
                "noise_multiplier": 2.0,
                "hidden": 4,
                "noise_dim": 2,
            }
        ),
        REPLACE,
        GEN_D,
        GEN_D_PRIME,
    ),
    Case(
        baselines_plugin.DIRECT_SPEC,
        baselines_plugin.DIRECT_SPEC.make_params({"epsilon": 1.0, "delta": 1e-3, **LINES}),
        USER,
        _tables(3),
        _tables(4),
        noisy=frozenset({"tables", "info.n_synthetic"}),
    ),
    Case(
        baselines_plugin.AIM_SPEC,
        baselines_plugin.AIM_SPEC.make_params(
            {"epsilon": 1.0, "delta": 1e-3, "rounds": 2, **LINES}
        ),
        USER,
        _tables(3),
        _tables(4),
        noisy=frozenset(
            {
                "tables",
                "info.n_synthetic",
                "info.rounds_run",
                "info.levels",
                "info.units_spent",
                "info.selected",
            }
        ),
    ),
    Case(
        path_plugin.SPEC,
        path_plugin.SPEC.make_params(
            {
                "noise_multiplier": 4.0,
                "delta": 1e-3,
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
        ),
        USER,
        _tables(3),
        _tables(4),
        noisy=frozenset({"synthetic", "info.n_valid_candidates", "info.n_selected"}),
    ),
    Case(aggregate_plugin.SPEC, AGGREGATE, ROW, AGG_D, AGG_D_PRIME),
    Case(
        aggregate_plugin.SPEC,
        attrs.evolve(AGGREGATE, metrics=("count", "histogram"), bin_edges=(0.0, 0.5, 2.0)),
        ROW,
        AGG_D,
        AGG_D_PRIME,
        label="aggregate_histogram",
    ),
)


def differences(a: Any, b: Any, path: str, noisy: frozenset[str]) -> Iterator[str]:
    """Where two outputs differ in anything but (noisy) float values."""
    where = path or "<outputs>"
    if type(a) is not type(b):
        yield f"{where}: type {type(a).__name__} != {type(b).__name__}"
        return
    if isinstance(a, UserTables):
        if a.schema != b.schema:
            yield f"{where}: schema differs"
        if path not in noisy and len(a) != len(b):
            yield f"{where}: {len(a)} != {len(b)} tables"
        return
    if isinstance(a, Mapping):
        if set(a) != set(b):
            yield f"{where}: keys {sorted(set(a) ^ set(b))} differ"
            return
        for k in sorted(a):
            yield from differences(a[k], b[k], f"{path}.{k}" if path else str(k), noisy)
        return
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            if path not in noisy:
                yield f"{where}: length {len(a)} != {len(b)}"
            return
        for x, y in zip(a, b, strict=True):
            yield from differences(x, y, path, noisy)  # items share their container's path
        return
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or (path not in noisy and a.shape != b.shape):
            yield f"{where}: array {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        elif path not in noisy and a.dtype.kind not in "fc" and not np.array_equal(a, b):
            yield f"{where}: non-float array values differ"
        return
    if isinstance(a, float | np.floating):
        if math.isfinite(a) != math.isfinite(b) or (
            not math.isfinite(a) and a != b and not (math.isnan(a) and math.isnan(b))
        ):
            yield f"{where}: {a!r} != {b!r} (finite vs not)"
        return
    if path not in noisy and a != b:
        yield f"{where}: {a!r} != {b!r}"


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("case", FAST, ids=lambda c: c.name)
def test_outputs_agree_on_neighbours_except_noise(case: Case) -> None:
    a = run_verified(case.spec, case.params, case.d, adjacency=case.adjacency, seed=SEED)
    b = run_verified(case.spec, case.params, case.d_prime, adjacency=case.adjacency, seed=SEED)
    found = list(differences(dict(a.outputs), dict(b.outputs), "", case.noisy))
    assert not found, f"{case.name}: exact data-dependent outputs: {found}"


def test_the_comparison_catches_exact_counts_and_sizes() -> None:
    base = {"samples": np.zeros(3), "info": {"delta": 0.1, "n": 3, "tag": "x"}}
    leaks = [
        {**base, "info": {"delta": 0.1, "n": 4, "tag": "x"}},  # a count
        {**base, "samples": np.zeros(4)},  # an output size
        {**base, "samples": np.zeros(3, dtype=np.float32)},  # a dtype
        {**base, "info": {"delta": 0.1, "n": 3, "tag": "x", "kept": 3}},  # an extra key
        {**base, "info": {"delta": 0.1, "n": 3.0, "tag": "x"}},  # a type
        {**base, "samples": [0.0, 0.0]},
        {**base, "info": {"delta": math.inf, "n": 3, "tag": "x"}},
    ]
    assert not list(differences(base, {**base, "samples": np.ones(3)}, "", frozenset()))
    for leak in leaks:
        assert list(differences(base, leak, "", frozenset())), leak
    assert not list(differences(base, leaks[0], "", frozenset({"info.n"})))
    tables = [_tables(3), _tables(4)]
    assert list(differences(tables[0], tables[1], "t", frozenset()))
    assert not list(differences(tables[0], tables[1], "t", frozenset({"t"})))


def test_every_builtin_method_has_a_case() -> None:
    host = PluginHost.create()
    builtin = {
        name
        for name, spec in host.methods().items()
        if spec.provenance is not None and spec.provenance.distribution == BUILTIN_DISTRIBUTION
    }
    assert {"path", "shk", "trajectories", "direct"} <= builtin  # the entry points were found
    covered = {c.spec.name for c in FAST}
    assert builtin <= covered, f"add a neighbouring-outputs case for {sorted(builtin - covered)}"


def public_record(result: Any) -> dict[str, Any]:
    """What ``ledger.json`` publishes of a run, but the output values (noise)."""
    return {**result.ledger.to_dict(), "outputs": sorted(result.outputs)}


@pytest.mark.parametrize("case", FAST, ids=lambda c: c.name)
def test_public_record_agrees_on_neighbours(case: Case) -> None:
    a = run_verified(case.spec, case.params, case.d, adjacency=case.adjacency, seed=SEED)
    b = run_verified(case.spec, case.params, case.d_prime, adjacency=case.adjacency, seed=SEED)
    assert public_record(a) == public_record(b), case.name
    assert public_record(a)["steps"], case.name  # the comparison is of a real record


#: a user-level source: users 0 and 2 hold two rows, user 1 one; the neighbour adds user 3
#: with three rows (one above the contribution bound)
USER_BOUND = Adjacency(unit="user", unit_key="id", max_contributions=2)
USER_IDS, NEW_USER = np.array([0, 0, 1, 2, 2]), np.array([3, 3, 3])
SCORE_ROWS = np.eye(5)[:, :3]
#: case name -> (the rows of D, the rows the new user adds), as columns or a table of columns
USER_ROWS: dict[str, tuple[Any, Any]] = {
    "gaussian_mechanism": (np.array([0.1, 0.2, 0.3, 0.4, 0.5]), np.array([0.6, 0.7, 0.8])),
    "laplace_mechanism": (np.array([0.1, 0.2, 0.3, 0.4, 0.5]), np.array([0.6, 0.7, 0.8])),
    "private_histogram": (np.array([0.0, 1.0, 2.0, 3.0, 0.0]), np.ones(3)),
    "private_mean": (np.zeros((5, 2)), np.full((3, 2), 0.5)),
    "dp_sgd_logistic": (
        {"x": np.zeros((5, 2)), "y": np.zeros(5)},
        {"x": np.ones((3, 2)), "y": np.ones(3)},
    ),
    "exponential_mechanism": (SCORE_ROWS, np.ones((3, 3))),
    "report_noisy_max": (SCORE_ROWS, np.ones((3, 3))),
    "noisy_top_k": (SCORE_ROWS, np.ones((3, 3))),
    "shk_grid": (np.zeros(5), np.full(3, math.pi)),
    "shk_particles": (np.zeros(5), np.full(3, math.pi)),
}
#: case name -> why it refuses a user-level source of rows
USER_REFUSED = {
    "nn_vote_selection": "its public candidates are not one per row",
    "trajectories": "its marginals are not one column of rows",
    "trajectories_add_remove": "its marginals are not one column of rows",
    "dpswflow-r": "it publishes one noisy row per record",
    "dpswflow": "it publishes one noisy row per record",
    "dpswgen": "it publishes one noisy row per record",
    "aggregate": "it bounds its unit column itself (its case above drops a whole unit)",
    "aggregate_histogram": "it bounds its unit column itself (its case above drops a whole unit)",
}


def _user_source(rows: Any, extra: Any = None) -> dict[str, Any]:
    ids = USER_IDS if extra is None else np.r_[USER_IDS, NEW_USER]
    columns = rows if isinstance(rows, Mapping) else {"v": rows}
    added = extra if isinstance(extra, Mapping) else {"v": extra}
    if extra is None:
        return {"id": ids, **columns}
    return {"id": ids, **{k: np.concatenate([v, added[k]]) for k, v in columns.items()}}


@pytest.mark.parametrize("case", [c for c in FAST if c.name in USER_ROWS], ids=lambda c: c.name)
def test_user_level_outputs_and_record_agree_on_neighbours(case: Case) -> None:
    rows, extra = USER_ROWS[case.name]
    d, d_prime = _user_source(rows), _user_source(rows, extra)
    a = run_verified(case.spec, case.params, d, adjacency=USER_BOUND, seed=SEED)
    b = run_verified(case.spec, case.params, d_prime, adjacency=USER_BOUND, seed=SEED)
    found = list(differences(dict(a.outputs), dict(b.outputs), "", case.noisy))
    assert not found, f"{case.name}: exact data-dependent outputs at user level: {found}"
    assert public_record(a) == public_record(b), case.name
    assert a.ledger.to_dict()["adjacency"]["unit"] == "user"


@pytest.mark.parametrize(
    "name, shape",
    [("gaussian_mechanism", (1,)), ("laplace_mechanism", (1,)), ("private_mean", (2,))],
)
def test_user_level_query_is_one_sum_shaped_like_a_row(name: str, shape: tuple[int, ...]) -> None:
    case = next(c for c in FAST if c.name == name)
    rows, extra = USER_ROWS[name]
    empty = {"id": np.zeros(0, dtype=np.int64), "v": rows[:0]}
    shapes = set()
    for d in (_user_source(rows), _user_source(rows, extra), empty):
        outputs = run_verified(case.spec, case.params, d, adjacency=USER_BOUND, seed=1).outputs
        shapes |= {np.shape(v) for v in outputs.values()}
    assert shapes == {shape}


def test_user_level_sum_is_clipped_and_bounded_per_user() -> None:
    """Gaussian on a user-level source: the noisy sum of the kept rows, each clipped."""
    spec, params = gaussian.SPEC, gaussian.GaussianParams(1.0, 1e-9)
    data = {"id": np.array([0, 0, 0, 1]), "v": np.array([5.0, 0.25, 0.5, -0.5])}
    out = run_verified(spec, params, data, adjacency=USER_BOUND, seed=1).outputs["release"]
    # user 0 keeps its first two rows (5 clipped to 1, and 0.25), user 1 its one
    np.testing.assert_allclose(out, [1.0 + 0.25 - 0.5], atol=1e-6)


@pytest.mark.parametrize("case", [c for c in FAST if c.name in USER_REFUSED], ids=lambda c: c.name)
def test_user_level_refusals_name_the_fix(case: Case) -> None:
    rows = np.zeros((5, 2))
    with pytest.raises(DPLedgerError) as caught:
        run_verified(case.spec, case.params, _user_source(rows), adjacency=USER_BOUND, seed=SEED)
    assert "fix" in str(caught.value).lower(), USER_REFUSED[case.name]


def test_every_row_method_has_a_user_level_case() -> None:
    rows_or_refused = set(USER_ROWS) | set(USER_REFUSED)
    at_user_level = {c.name for c in FAST if c.adjacency.unit == "user"}
    assert {c.name for c in FAST} - at_user_level == rows_or_refused

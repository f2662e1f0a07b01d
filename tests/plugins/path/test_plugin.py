"""The PATH method spec: contract, host run, calibration and bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.plugins.path import plugin
from dpledger.plugins.path.ddp import tables_from_json, tables_to_json
from dpledger.plugins.path.plugin import SPEC, PathParams, declare
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.runner import run_verified
from dpledger.runtime.testing import MethodPluginContract

USER = Adjacency(unit="user", unit_key="id")
SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("x", "numeric", lower=-5.0, upper=5.0),
        Column("c", "categorical", categories=("a", "b")),
    )
)
TINY = {
    "noise_multiplier": 1.1,
    "delta": 1e-4,
    "public_n_users": 6,
    "steps": 2,
    "sampling_probability": 0.5,
    "clip_norm": 0.1,
    "selection_epsilon": 2.0,
    "k": 2,
    "overgeneration": 2.0,
    "embedder": "summary",
    "lora_rank": 2,
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "max_tokens": 160,
    "max_rows": 3,
    "physical_batch": 4,
    "length_pmf": (0.3, 0.4, 0.3),
}


def make_tables(n: int, seed: int) -> UserTables:
    rng = np.random.default_rng(seed)
    users = []
    for i in range(n):
        x = np.round(np.cumsum(rng.normal(0, 1, int(rng.integers(1, 4)))), 2)
        users.append(UserTable(str(i), [(str(i), float(v), "a" if v < 0 else "b") for v in x]))
    return UserTables(SCHEMA, tuple(users))


class TestPathContract(MethodPluginContract):
    spec = SPEC
    valid_params: ClassVar[dict[str, Any]] = TINY
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"target_epsilon": 2.0},  # both σ and a target
        {"lora_rank": -1},
        {"embedder": "gecko"},
        {"sampling_probability": 0.0},
        {"p_start": 1.5},
        {"precision": 30},
        {"guided": "yes"},
        {"delta": 1.0},
        {"selection_epsilon": None},
        {"length_pmf": (0.5, 0.6)},
        {"length_pmf": (1.5, -0.5)},
    ]
    adjacencies: ClassVar[tuple[Adjacency, ...]] = (
        USER,
        Adjacency(relation="replace_one", unit="user", unit_key="id"),
    )

    def make_data(self, rng: np.random.Generator) -> Any:
        return make_tables(6, 0)

    def test_run_is_reproducible(self) -> None:  # the base class uses row-level adjacency
        params = self._params()
        runs = [
            run_verified(
                SPEC,
                params,
                self.make_data(np.random.default_rng(0)),
                adjacency=USER,
                seed=self.seed,
            ).outputs
            for _ in range(2)
        ]
        assert runs[0]["info"] == runs[1]["info"]
        assert runs[0]["synthetic"] == runs[1]["synthetic"]


def test_host_run_executes_exactly_the_declaration(
    dpledger_register: Callable[..., Any],
) -> None:
    tables = make_tables(6, 1)
    with dpledger_register(plugin, name="path-test") as host:
        spec = host.method("path")
        params = spec.make_params(TINY)
        result = run_verified(spec, params, tables, adjacency=USER, seed=4)
    sigma_sel = result.outputs["info"]["selection_noise_multiplier"]
    train = SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(1.1)), 2)
    assert result.declared == ComposedEvent([train, GaussianEvent(sigma_sel)])
    assert result.ledger.matches_exactly()
    info = result.outputs["info"]
    composed = account(result.declared, USER, delta=1e-4, backends=("pld", "rdp")).bound
    assert info["epsilon_total"] == composed.epsilon and info["delta"] == 1e-4
    # the selection noise meets (selection_epsilon, delta) on its own ...
    alone = account(GaussianEvent(sigma_sel), USER, delta=1e-4).bound.epsilon
    assert 1.99 < alone <= 2.0
    # ... and the accountant's composition is tighter than adding the two epsilons
    t_eps = account(train, USER, delta=1e-4, backends=("pld", "rdp")).bound.epsilon
    assert info["epsilon_total"] < t_eps + alone
    synthetic = result.outputs["synthetic"]
    assert isinstance(synthetic, UserTables) and synthetic.schema == SCHEMA
    assert len(synthetic) == info["n_selected"] and 1 <= len(synthetic) <= 6  # n_synthetic = n
    assert all(-5.0 <= r[1] <= 5.0 for u in synthetic for r in u.rows)  # public bounds
    assert info["n_candidates"] == 12 and info["n_valid_candidates"] >= len(synthetic)


def test_clip_to_public_bounds() -> None:
    rows = [("u", 7.5, "a"), ("u", -9.0, "b"), ("u", 1.25, "a")]
    assert plugin.clip_to_bounds(SCHEMA, rows) == [
        ("u", 5.0, "a"),
        ("u", -5.0, "b"),
        ("u", 1.25, "a"),
    ]


def test_target_epsilon_is_met_by_the_composed_event() -> None:
    params = PathParams(**{**TINY, "noise_multiplier": None, "target_epsilon": 4.0})
    declaration = declare(params, USER)
    assert declaration.unit == "user"
    eps = account(declaration.event, USER, delta=1e-4, backends=("pld",)).bound.epsilon
    assert 0.99 * 4.0 <= eps <= 4.0


def test_too_small_epsilon_and_missing_delta() -> None:
    base = {**TINY, "noise_multiplier": None}
    with pytest.raises(InvalidParameterError, match="target_epsilon"):
        declare(PathParams(**{**base, "target_epsilon": 1.5}), USER)  # selection alone is 2
    # the selection's noise is on the three-digit grid, so it costs a little under 2: a target
    # just above its own cost leaves too little to train
    _, sigma_sel = plugin.noise_multipliers(PathParams(**{**base, "target_epsilon": 4.0}), USER)
    assert sigma_sel == round(sigma_sel, 2)
    alone = account(
        GaussianEvent(sigma_sel), USER, delta=1e-4, backends=("closed_form", *plugin.BACKENDS)
    ).bound.epsilon
    assert 1.98 < alone <= 2.0
    with pytest.raises(InvalidParameterError, match=r"target_epsilon.*too small"):
        declare(PathParams(**{**base, "target_epsilon": alone + 1e-7}), USER)
    with pytest.raises(InvalidParameterError, match="delta"):
        declare(
            PathParams(**{**base, "target_epsilon": 3.0, "delta": None, "public_n_users": None}),
            USER,
        )
    # delta = 1/n^2 from the public number of users
    p = PathParams(**{**base, "target_epsilon": 3.0, "delta": None, "public_n_users": 100})
    assert plugin.declared_delta(p) == 1e-4
    assert declare(p, USER) == declare(PathParams(**{**base, "target_epsilon": 3.0}), USER)


@pytest.mark.parametrize("missing", ["delta", "n_synthetic", "expected_batch_size"])
def test_no_default_is_read_off_the_private_data(missing: str) -> None:
    stated = {**TINY, "public_n_users": None, "n_synthetic": 4, "expected_batch_size": 3.0}
    PathParams(**stated)  # every public value stated: accepted
    with pytest.raises(InvalidParameterError, match=rf"^{missing}: .*private number of users"):
        PathParams(**{**stated, missing: None})


def test_output_size_and_delta_follow_public_values_not_the_data() -> None:
    # 6 users in the data, 40 stated: δ = 1/40², 2·40 candidates, whatever the data holds
    params = PathParams(**{**TINY, "delta": None, "public_n_users": 40, "n_synthetic": None})
    info = [
        run_verified(SPEC, params, make_tables(n, 0), adjacency=USER, seed=2).outputs["info"]
        for n in (5, 6)
    ]
    assert info[0]["delta"] == info[1]["delta"] == 1.0 / 40**2
    assert info[0]["n_candidates"] == info[1]["n_candidates"] == 80


def test_row_level_adjacency_is_refused() -> None:
    params = PathParams(**TINY)
    with pytest.raises(InvalidParameterError, match=r"adjacency.*unit='user'"):
        declare(params, Adjacency())
    ledger = PrivacyLedger(GaussianEvent(1.0), Adjacency(), 0)
    with pytest.raises(InvalidParameterError, match="adjacency"):
        SPEC.run(params, make_tables(3, 0), ledger, np.random.default_rng(0))


def test_bad_data_is_refused_before_anything_runs() -> None:
    params = PathParams(**TINY)
    ledger = PrivacyLedger(declare(params, USER), USER, 0)
    with pytest.raises(InvalidParameterError, match="UserTables"):
        SPEC.run(params, np.zeros((3, 3)), ledger, np.random.default_rng(0))
    assert not ledger.log
    good = tables_to_json(make_tables(2, 0))
    assert tables_from_json(good) == make_tables(2, 0)
    # the JSON form (as `dpledger run` loads a .json file: arrays of objects) is accepted
    loaded = {k: np.asarray(v, dtype=object) for k, v in good.items()}
    assert plugin.user_tables_from(loaded) == make_tables(2, 0)
    bad_cases = {
        "row 0": {**good, "users": [{"user_id": "0", "rows": [["0", 1.0]]}]},  # ragged
        "column type": {
            **good,
            "schema": [*good["schema"][:2], {**good["schema"][2], "kind": "ordinal"}],
        },
        "zero rows": {**good, "users": [{"user_id": "0", "rows": []}]},
        "non-numeric": {**good, "users": [{"user_id": "0", "rows": [["0", "high", "a"]]}]},
    }
    for match, value in bad_cases.items():
        with pytest.raises(InvalidParameterError, match=match):
            tables_from_json(value)

"""Every builtin method on a user-level source: a lifted epsilon no smaller than group privacy
allows, or a refusal naming the fix.

The configurations are the audited ones of ``tests/audit/test_method_audits.py`` (one per
builtin method); each is declared for a source whose users hold up to ``K`` rows (or time
points), stated per user by the core, and accounted.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import stated_for_unit, unit_adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import is_pure, pure_epsilon
from dpledger.runtime.plugin_manager import BUILTIN_DISTRIBUTION, PluginHost
from dpledger.runtime.runner import declare_checked

K = 3
DELTA = 1e-5


def _audits() -> ModuleType:
    path = Path(__file__).parents[1] / "audit" / "test_method_audits.py"
    spec = importlib.util.spec_from_file_location("_method_audit_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the primitives (their whole-method audits live in tests/audit/test_builtin_plugins.py)
PRIMITIVES = {
    "gaussian_mechanism": {"sensitivity": 1.0, "noise_multiplier": 4.0},
    "laplace_mechanism": {"sensitivity": 1.0, "noise_multiplier": 10.0},
    "private_histogram": {"num_bins": 4, "noise_multiplier": 10.0},
    "private_mean": {"radius": 1.0, "noise_multiplier": 4.0, "n": 100},
    "dp_sgd_logistic": {
        "steps": 10,
        "sampling_probability": 0.01,
        "noise_multiplier": 1.0,
        "clip_norm": 1.0,
        "expected_batch_size": 10.0,
    },
    "exponential_mechanism": {"epsilon": 0.5},
    "report_noisy_max": {"epsilon": 0.5},
    "noisy_top_k": {"epsilon": 0.2, "k": 3},
    "nn_vote_selection": {"k": 3, "top_n": 2, "noise_multiplier": 4.0},
}
AUDITS = _audits()
CASES: dict[str, Any] = {c.spec.name: c for c in (*AUDITS.FAST, AUDITS.PATH_FAST)}


def _user(row: Adjacency) -> Adjacency:
    contribution = "time_points" if row.contribution == "time_points" else "rows"
    return Adjacency(
        relation=row.relation,
        unit="user",
        unit_key="id",
        max_contributions=K,
        contribution=contribution,
    )


def _epsilon(event: Any, adjacency: Adjacency) -> float:
    return float(account(event, adjacency, delta=DELTA).bound.epsilon)


@pytest.mark.parametrize("name", sorted({*CASES, *PRIMITIVES}))
def test_user_level_is_lifted_or_refused(name: str) -> None:
    host = PluginHost()
    spec = host.method(name)
    if name in PRIMITIVES:
        params, adjacency = spec.make_params(PRIMITIVES[name]), Adjacency()
    else:
        params, adjacency = CASES[name].params, CASES[name].adjacency
    row = Adjacency(relation=adjacency.relation)
    user = _user(adjacency)
    if name == "trajectories":
        user = attrs.evolve(user, contribution="time_points")
    try:
        declaration = declare_checked(spec, params, user)
        event, rules = stated_for_unit(
            host.lower(declaration.event, user), declaration.unit, user, release=name
        )
        eps_user = _epsilon(event, unit_adjacency(user))
    except DPLedgerError as exc:
        assert "Fix:" in str(exc) or "fix" in str(exc).lower(), str(exc)
        return
    if declaration.unit == "user":
        assert rules == ("declared_user_level",)
        return  # enforced by the run (tests/redteam/test_units_lifted.py, plugin tests)
    row_event = host.lower(declare_checked(spec, params, row).event, row)
    eps_row = _epsilon(row_event, row)
    assert eps_user >= eps_row
    if is_pure(row_event):
        # group privacy is tight for pure DP: k rows cost k times one row's epsilon
        assert pure_epsilon(event) >= K * pure_epsilon(row_event) * (1 - 1e-12)


def test_every_builtin_method_is_covered() -> None:
    builtin = {
        n
        for n, s in PluginHost().methods().items()
        if s.provenance is not None and s.provenance.distribution == BUILTIN_DISTRIBUTION
    }
    assert builtin == set(CASES) | set(PRIMITIVES), sorted(builtin ^ (set(CASES) | set(PRIMITIVES)))

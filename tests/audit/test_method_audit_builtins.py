"""``dpledger audit METHOD --config FILE`` on the builtin primitives: no violation at delta >=
1e-3 (smoke runs; every primitive in the slow tier), selections claimed at twice epsilon under
replace-one, and a relation the method refuses skipped when both are audited, an error alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit.auditor import NO_VIOLATION
from dpledger.audit.method_audit import audit_method
from dpledger.audit.reference import gaussian_epsilon
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event, GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec
from dpledger.core.validation import positive_finite
from dpledger.runtime.ledger import PrivacyLedger

from .method_audit_inputs import DATA, SELECTION, SMOKE, audit_json, write_config

#: every primitive is audited through the Python API in the default tier
#: (``test_builtin_plugins.py``); through the CLI, a noise primitive and a selection here, every
#: primitive in the slow tier
CLI_DEFAULT = frozenset({"gaussian_mechanism", "exponential_mechanism"})


@pytest.mark.parametrize(
    "method",
    [m if m in CLI_DEFAULT else pytest.param(m, marks=pytest.mark.slow) for m in sorted(SMOKE)],
)
def test_builtin_primitive_shows_no_violation(
    method: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    plugin, data, params = SMOKE[method]
    cfg = write_config(tmp_path, data, params)
    relation = "add_remove" if method in SELECTION else "both"
    code, out = audit_json(
        capfd,
        method,
        "--config",
        str(cfg),
        "--relation",
        relation,
        "--runs",
        "300",
        "--delta",
        "1e-3",
        "1e-2",
        "--seed",
        "0",
        "--plugins-allow",
        plugin,
    )
    rows = [(r["relation"], a) for r in out["relations"] for a in r["audits"]]
    for rel, a in rows:
        print(
            f"{method} [{rel}] delta={a['delta']}: claim {a['claimed_epsilon']:.3f}, lower "
            f"bound {a['epsilon_lower']:.3f}, ceiling {a['ceiling']:.2f}: {a['verdict']}"
        )
        assert a["verdict"] == NO_VIOLATION
        assert math.isfinite(a["claimed_epsilon"]) and a["claimed_epsilon"] > 0
    assert code == 0 and out["verdict"] == NO_VIOLATION and out["skipped"] == []
    assert {r for r, _ in rows} == (
        {"add_remove"} if relation == "add_remove" else {"add_remove", "replace_one"}
    )


@pytest.mark.parametrize(
    "method", ["exponential_mechanism", pytest.param("report_noisy_max", marks=pytest.mark.slow)]
)
def test_selection_under_replace_one_is_claimed_at_twice_epsilon(
    method: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    plugin, data, params = SMOKE[method]
    cfg = write_config(tmp_path, data, params)
    code, out = audit_json(
        capfd,
        method,
        "--config",
        str(cfg),
        "--relation",
        "replace_one",
        "--runs",
        "2000",
        "--seed",
        "0",
        "--plugins-allow",
        plugin,
    )
    row = out["relations"][0]["audits"][0]
    # exponential mechanism on this pair: P[index 0] is 0.309 vs 0.0572, epsilon >= 1.69
    print(
        f"{method} [replace_one]: claim {row['claimed_epsilon']:.3f}, lower bound "
        f"{row['epsilon_lower']:.3f}, ceiling {row['ceiling']:.2f}"
    )
    assert code == 0 and row["verdict"] == NO_VIOLATION
    # a replaced record moves a score by twice its add/remove sensitivity: the claim is that of
    # the mechanism booked at 2 eps at this delta (report-noisy-max: pure 2 eps-DP, 1.9989 for
    # eps = 1 at delta = 1e-3; the exponential mechanism: losses spanning 2 eps, 1.94), where
    # it was 0.999 under add/remove
    floor = 1.99 if method == "report_noisy_max" else 1.9
    assert row["claimed_epsilon"] >= floor * params["epsilon"]


# -- relations the method refuses ---------------------------------------------------------------
@attrs.frozen
class GaussParams:
    noise_multiplier: float = attrs.field(validator=positive_finite)


def _declare_replace_only(params: GaussParams, adjacency: Adjacency) -> Event:
    if adjacency.relation != "replace_one":
        raise InvalidParameterError(
            "relation", "only replace-one is analysed", "use relation = 'replace_one'"
        )
    return GaussianEvent(params.noise_multiplier)


def _run_sum(
    params: GaussParams, data: Any, ledger: PrivacyLedger, rng: np.random.Generator
) -> dict[str, Any]:
    rows = ledger.clip_rows_l2(np.asarray(data, dtype=float), 1.0, step="clip")
    return {
        "sum": ledger.gaussian(rows.sum(axis=0), 1.0, params.noise_multiplier, step="sum"),
        "label": "text outputs are left out",
    }


REPLACE_ONLY = MethodSpec(
    "replace_only_sum",
    GaussParams,
    _declare_replace_only,
    _run_sum,
    "honest clipped sum, analysed under replace-one only",
    "test",
)


class ReplaceOnlyPlugin:
    @hookimpl
    def dpledger_register_methods(self, register: Callable[[MethodSpec], None]) -> None:
        register(REPLACE_ONLY)


def test_a_refused_relation_is_skipped_with_both_and_an_error_alone(dpledger_register: Any) -> None:
    with dpledger_register(ReplaceOnlyPlugin(), name="replace_only") as host:
        spec = host.method("replace_only_sum")
        params = spec.make_params({"noise_multiplier": 2.0})
        result = audit_method(
            spec, params, DATA, relation="both", runs=200, seed=1, lower=host.lower
        )
        assert [r.relation for r in result.relations] == ["replace_one"]
        assert result.skipped[0][0] == "add_remove"
        assert "only replace-one" in result.skipped[0][1]
        row = result.relations[0].result.at(1e-3)
        # replace-one doubles the sensitivity: the claim is that of sigma 1 under add/remove
        assert row.claimed_epsilon == pytest.approx(gaussian_epsilon(1.0, 1e-3), rel=1e-3)
        assert row.verdict == NO_VIOLATION and result.alpha == 0.05
        assert result.relations[0].result.alpha == 0.05  # one relation audited: no split
        with pytest.raises(InvalidParameterError, match="only replace-one"):
            audit_method(spec, params, DATA, relation="add_remove", runs=200, lower=host.lower)

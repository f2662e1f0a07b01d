"""The report's prose: the formal statement, the unit of privacy, assumptions and warnings."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from dpledger.accountant.graph_account import GraphAccount, account_graph
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    GaussianEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.report import prose
from dpledger.report.model import NO_GUARANTEE, Bracket, ReleaseRow
from dpledger.report.numbers import fmt_up
from dpledger.runtime.pipeline import load_pipeline

from .cases import DELTA, SIGMA, analytic_gaussian_epsilon, gaussian_report, minimal_report

ROOT = Path(__file__).resolve().parents[2]
ROW = "add/remove of one row (event level)"
USER = Adjacency(unit="user", unit_key="uid", max_contributions=3)


def test_the_headline_is_the_analytic_gaussian_rounded_up() -> None:
    report = gaussian_report().report
    exact = analytic_gaussian_epsilon(SIGMA, DELTA)
    assert exact <= report.upper <= exact * (1 + 1e-9)
    assert report.accounting_method == "closed_form"
    assert fmt_up(report.upper) == fmt_up(exact) == "4.37718"
    assert report.statement == (
        f"The release is (ε, δ)-differentially private with respect to {ROW}, with "
        "ε = 4.37718 (certified upper bound, method closed_form) at δ = 1e-05."
    )
    # the statement names the adjacency (its relation and unit) and the method
    assert "add/remove" in report.statement and "one row" in report.statement
    assert report.unit_of_privacy == "one row (record) of source 'db'"


def test_statement_of_a_delta_query() -> None:
    bound = {"epsilon": 1.0, "delta": 1.2345612e-7, "delta_lower": 1e-7, "method": "pld"}
    text = prose.statement(bound, ROW, eps_query=False)
    assert text == (
        f"The release is (ε, δ)-differentially private with respect to {ROW}, with "
        "δ = 1.23457e-07 (certified upper bound, method pld) at ε = 1."
    )


@pytest.mark.parametrize(
    ("bound", "eps_query", "at"),
    [
        ({"epsilon": math.inf, "delta": 1e-5, "method": "rdp"}, True, "no finite ε at δ = 1e-05"),
        ({"epsilon": "inf", "delta": 1e-6, "method": "pld"}, True, "no finite ε at δ = 1e-06"),
        ({"epsilon": 0.5, "delta": 1.0, "method": "pld"}, False, "δ = 1 at ε = 0.5"),
    ],
)
def test_statement_without_a_guarantee(bound: dict[str, Any], eps_query: bool, at: str) -> None:
    text = prose.statement(bound, ROW, eps_query)
    assert text == (
        f"The release carries {NO_GUARANTEE} with respect to {ROW}: it contains a non-private "
        f"step, or its guarantee is vacuous ({at}; method {bound['method']})."
    )
    assert "differentially private with" not in text


def test_unit_of_privacy_for_rows_users_and_several_sources() -> None:
    assert prose.unit_of_privacy([("a", Adjacency())]) == "one row (record) of source 'a'"
    assert prose.unit_of_privacy([("a", Adjacency()), ("b", USER)]) == (
        "one row (record) of source 'a'; one user of source 'b' (identified by 'uid', "
        "contributing at most 3 rows)"
    )


def test_relation_text_names_the_relation() -> None:
    assert prose.relation_text(Adjacency()).startswith("add/remove: ")
    replace = prose.relation_text(Adjacency(relation="replace_one"))
    assert replace.startswith("replace-one: ") and "doubles" in replace


def test_sampling_assumptions_are_stated_once_each() -> None:
    poisson = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    swr = SampledWithoutReplacementEvent(1000, 10, GaussianEvent(1.0))
    texts = prose.sampling(SelfComposedEvent(poisson, 3))
    assert len(texts) == 1 and texts[0].startswith("Poisson subsampling at rate 0.01: ")
    assert "fixed-size batches are not covered" in texts[0]
    (text,) = prose.sampling(swr)
    assert "exactly 10 of the 1000 records" in text and "public" in text
    assert prose.sampling(GaussianEvent(1.0)) == []


def _account(name: str) -> GraphAccount:
    pipeline = load_pipeline(ROOT / "examples" / "pipelines" / name)
    return account_graph(pipeline.graph, delta=1e-5, backends=["closed_form", "rdp"])


def test_assumptions_of_a_user_level_pipeline() -> None:
    out = prose.assumptions(_account("user_level.toml"))
    assert out[0] == (
        "source 'ratings', neighbouring relation add/remove: neighbouring datasets differ by "
        "the presence or absence of one unit's data"
    )
    assert (
        "source 'ratings': each user contributes at most 5 rows (the pipeline must enforce "
        "this bound; the guarantee fails otherwise)"
    ) in out
    assert "source 'ratings': its releases compose sequentially and adaptively" in out[2]
    assert out[-1].startswith("noise is stated relative to each query's per-record")
    assert not any(a.startswith("sources: ") for a in out)  # one source


def test_assumptions_of_partitions_and_sampling() -> None:
    out = prose.assumptions(_account("partitions.toml"))
    assert any(
        a.startswith("source 'sales': parallel composition, the bound is the worst of ")
        for a in out
    )
    sampled = prose.assumptions(_account("dpsgd.toml"))
    assert any(a.startswith("release ") and "Poisson subsampling at rate" in a for a in sampled)


def _fake_account(upper: float, lower: float, method: str = "pld") -> Any:
    bound = {"epsilon": upper, "epsilon_lower": lower, "delta": 1e-5, "method": method}
    return SimpleNamespace(bound=SimpleNamespace(to_dict=lambda: bound))


def _row(**changes: Any) -> ReleaseRow:
    return attrs.evolve(minimal_report().releases[0], **changes)


@pytest.mark.parametrize(
    ("upper", "lower", "wide"),
    [(2.0, 1.0, True), (1.25, 1.0, False), (1.26, 1.0, True), (3.0, 0.0, False)],
)
def test_a_wide_bracket_gets_a_note(upper: float, lower: float, wide: bool) -> None:
    out = prose.warnings([], _fake_account(upper, lower), [], eps_query=True)
    assert out[0] == prose.IDEALIZED_NUMERICS
    assert any(w.startswith("the certified bracket is wide") for w in out) is wide


def test_infinite_bound_and_prv_warnings() -> None:
    out = prose.warnings([], _fake_account(math.inf, 0.0), [], eps_query=True)
    assert "the bound is infinite: a release is non-private or its guarantee is vacuous" in out
    prv = prose.warnings([], _fake_account(1.0, 0.99, "prv"), [], eps_query=True)
    assert any(w.startswith("approximation tier: ") for w in prv)


def test_release_warnings_follow_method_tier_and_lift_rules() -> None:
    rows = [
        _row(node="a"),
        _row(node="b", method="m", tier="unverified"),
        _row(node="c", method="m", tier="contrib"),
        _row(node="d", method="m", tier="vetted"),
        _row(node="e", method="m", tier="vetted", lift_rules=("approx_group_privacy_vacuous",)),
        _row(node="f", method="m", tier="vetted", lift_rules=("pure_group_privacy",)),
    ]
    out = prose.warnings(rows, _fake_account(1.0, 0.99), [], eps_query=True)

    def about(node: str) -> list[str]:
        return [w for w in out if w.startswith(f"release {node!r}")]

    assert about("a") == [
        "release 'a' names no method: its declared event is taken as given (honest-but-curious)"
    ]
    assert len(about("b")) == 1 and "tier unverified, honest-but-curious" in about("b")[0]
    assert len(about("c")) == 1 and "has trust tier contrib" in about("c")[0]
    assert about("d") == []
    assert len(about("e")) == 1 and "vacuous (δ ≥ 1)" in about("e")[0]
    assert len(about("f")) == 1 and "lifted to users by pure_group_privacy" in about("f")[0]


def test_a_missing_cross_check_backend_is_named() -> None:
    brackets = [
        Bracket("prv", None, "not installed: pip install prv-accountant"),
        Bracket("x", None, "failed"),
    ]
    out = prose.warnings([], _fake_account(1.0, 0.99), brackets, eps_query=True)
    assert "cross-check backend 'prv' is not installed: pip install prv-accountant" in out
    assert not any("'x'" in w for w in out)


def test_the_gaussian_report_warns_of_numerics_and_the_unnamed_method() -> None:
    assert gaussian_report().report.warnings == (
        prose.IDEALIZED_NUMERICS,
        "release 'q' names no method: its declared event is taken as given (honest-but-curious)",
    )

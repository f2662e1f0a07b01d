"""Building a report: the bound is ``dpledger account``'s, every section is assembled from it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from scipy.stats import norm

from dpledger.accountant.graph_account import account_graph
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent, LaplaceEvent
from dpledger.core.specs import Provenance
from dpledger.plugins.primitives import gaussian
from dpledger.report.build import (
    build_report,
    file_descriptions,
    report_pipeline_file,
    resolve_query,
    section_context,
)
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.jsonform import json_safe
from dpledger.runtime.pipeline import load_pipeline
from dpledger.runtime.plugin_manager import PluginHost

from .cases import DELTA, PIPELINE, graph
from .conftest import write_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pipelines" / "heterogeneous.toml"


def _account_json(capfd: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["account", str(EXAMPLE), "--json", *argv]) == 0
    out: dict[str, Any] = json.loads(capfd.readouterr().out)
    out.pop("file")
    return out


def test_the_bound_is_dpledger_account_s(capfd: pytest.CaptureFixture[str]) -> None:
    account = _account_json(capfd, "--per-release")
    report = report_pipeline_file(EXAMPLE, host=PluginHost.create(), brackets=False).report
    assert report.bound == {k: account[k] for k in ("epsilon", "epsilon_lower", "delta", "method")}
    assert report.account == account
    rows = {r.node: r for r in report.releases}
    assert set(rows) == {"init", "steps", "count"}
    for release in account["releases"]:
        assert release["bound"]["delta"] == account["delta"]
        assert rows[release["id"]].bound == release["bound"]  # every release has its own bound
        assert rows[release["id"]].bound["epsilon"] <= report.upper


def test_the_bound_is_account_graph_s_with_partitions() -> None:
    pipeline = load_pipeline(ROOT / "examples" / "pipelines" / "partitions.toml")
    built = build_report(
        pipeline.graph,
        title="partitions",
        input_kind="pipeline",
        input_name="partitions.toml",
        delta=DELTA,
        brackets=False,
    )
    direct = account_graph(pipeline.graph, delta=DELTA, per_release=True)
    assert built.report.bound == json_safe(direct.bound.to_dict())
    assert len(built.report.releases) == len(direct.releases) == len(direct.release_bounds) == 4
    for row in built.report.releases:
        assert row.bound == json_safe(direct.release_bounds[row.node].to_dict())


@pytest.mark.parametrize(
    ("file_delta", "file_epsilon", "delta", "epsilon", "expected"),
    [
        (None, None, None, None, (1e-5, None)),
        (1e-6, None, None, None, (1e-6, None)),
        (None, 2.0, None, None, (None, 2.0)),
        (1e-6, None, 1e-3, None, (1e-3, None)),  # explicit beats the file's
        (1e-6, None, None, 1.0, (None, 1.0)),
    ],
)
def test_the_query_is_account_s(
    file_delta: float | None,
    file_epsilon: float | None,
    delta: float | None,
    epsilon: float | None,
    expected: tuple[float | None, float | None],
) -> None:
    assert resolve_query(file_delta, file_epsilon, delta, epsilon) == expected


def test_one_query_only() -> None:
    with pytest.raises(InvalidParameterError) as info:
        resolve_query(None, None, 1e-5, 1.0)
    assert info.value.field == "delta"
    for delta, epsilon in ((None, None), (1e-5, 1.0)):
        with pytest.raises(InvalidParameterError, match="exactly one of delta or epsilon"):
            build_report(
                graph(), title="t", input_kind="p", input_name="n", delta=delta, epsilon=epsilon
            )


def test_an_epsilon_query_reports_delta() -> None:
    report = build_report(
        graph(),
        title="t",
        input_kind="p",
        input_name="n",
        epsilon=2.0,
        backends=["closed_form"],
        brackets=False,
    ).report
    assert report.query == ("epsilon", 2.0) and not report.reports_epsilon
    assert report.bound["epsilon"] == 2.0
    exact = norm.cdf(0.5 - 2.0) - math.exp(2.0) * norm.cdf(-0.5 - 2.0)  # Balle & Wang, σ = 1
    assert exact <= report.upper <= exact * (1 + 1e-6)
    assert report.statement.endswith("at ε = 2.")
    assert "δ = " in report.statement


def test_descriptions_come_from_the_file(tmp_path: Path) -> None:
    data = {
        **PIPELINE,
        "description": "the whole pipeline",
        "sources": [{**PIPELINE["sources"][0], "description": "the table"}],
        "releases": [
            {**PIPELINE["releases"][0], "description": "a noisy count"},
            {
                "id": "r",
                "input": "db",
                "count": 3,
                "event": {"kind": "laplace", "noise_multiplier": 2.0},
            },
        ],
        "postprocess": [{"id": "p", "inputs": ["q", "r"]}],
    }
    path = write_pipeline(tmp_path / "d.json", data)
    assert file_descriptions(path) == {
        "": "the whole pipeline",
        "db": "the table",
        "q": "a noisy count",
    }
    toml = tmp_path / "d.toml"
    toml.write_text('[[sources]]\nname = "s"\ndescription = "rows"\n')
    assert file_descriptions(toml) == {"s": "rows"}
    report = report_pipeline_file(path, brackets=False).report
    released = {r.node: (r.kind, r.inputs, r.description) for r in report.released}
    assert released == {
        "p": (
            "postprocess",
            ("q", "r"),
            "post-processing of releases (no additional privacy cost)",
        ),
        "q": ("release", ("db",), "a noisy count"),
        "r": ("release", ("db",), "laplace(noise_multiplier=2.0) repeated 3 times"),
    }
    assert (report.title, report.input_kind, report.input_name) == (
        "one-gaussian",
        "pipeline",
        "d.json",
    )
    assert report.account["pipeline"] == "one-gaussian"


def test_brackets_are_the_named_backends_or_none() -> None:
    two = build_report(
        graph(),
        title="t",
        input_kind="p",
        input_name="n",
        delta=DELTA,
        backends=["closed_form", "rdp"],
    ).report
    assert [b.backend for b in two.brackets if b.bound is not None] == ["closed_form", "rdp"]
    assert two.accounting_method == "closed_form"
    assert min(b.bound["epsilon"] for b in two.brackets if b.bound) == two.bound["epsilon"]
    none = build_report(
        graph(), title="t", input_kind="p", input_name="n", delta=DELTA, brackets=False
    ).report
    assert none.brackets == ()


def test_data_accesses_and_several_sources() -> None:
    g = CompositionGraph()
    g.add_source("a", Adjacency())
    g.add_source("b", Adjacency(unit="user", unit_key="uid", max_contributions=2))
    g.add_release("x", GaussianEvent(2.0), "a")
    g.add_release("y", LaplaceEvent(5.0), "b", count=2)
    report = build_report(
        g,
        title="t",
        input_kind="p",
        input_name="n",
        delta=DELTA,
        brackets=False,
        extra_warnings=["extra", "extra"],
    ).report
    accesses = {d.source: (d.unit, d.relation, d.releases) for d in report.data_accesses}
    assert accesses == {"a": ("row", "add_remove", ("x",)), "b": ("user", "add_remove", ("y",))}
    assert report.unit_of_privacy.startswith("one row (record) of source 'a'; one user of")
    assert report.assumptions[-1] == f"sources: {report.combined}"
    assert report.warnings.count("extra") == 1


class _Section:
    def __init__(self, title: str, render: Any) -> None:
        self.title = title
        self.render = render
        self.provenance = SimpleNamespace(plugin="plug")

    def concerns(self, method: Any) -> bool:
        return bool(method.provenance.plugin == "plug")


#: a method of plugin ``plug``: its releases get that plugin's sections
_PLUG_METHOD = attrs.evolve(
    gaussian.SPEC, name="m", provenance=Provenance("plug", None, None, "contrib")
)


def _fail(context: Any) -> str:
    raise RuntimeError("boom")


def test_plugin_sections_never_break_the_report() -> None:
    seen: list[dict[str, Any]] = []

    def text(context: dict[str, Any]) -> str:
        seen.append(context)
        return "some **text**"

    sections = {
        "a_ok": _Section("OK", text),
        "b_blank": _Section("Blank", lambda c: "  \n"),
        "c_fails": _Section("Fails", _fail),
        "d_none": _Section("None", lambda c: None),
    }
    host = SimpleNamespace(methods=lambda: {"m": _PLUG_METHOD}, report_sections=lambda: sections)
    g = graph()
    g.add_release("r", GaussianEvent(3.0), "db", count=4, method="m")
    report = build_report(
        g, title="t", input_kind="p", input_name="n", delta=DELTA, host=host, brackets=False
    ).report
    assert [(s.name, s.title, s.markdown, s.plugin) for s in report.sections] == [
        ("a_ok", "OK", "some **text**", "plug")
    ]
    assert "report section 'c_fails' of plugin 'plug' failed: boom" in report.warnings
    assert "report section 'd_none' of plugin 'plug' returned no text" in report.warnings
    (context,) = seen
    assert context["bound"] == report.bound and context["title"] == "t"
    assert context["release_events"] == {
        "q": {"kind": "gaussian", "noise_multiplier": 1.0},
        "r": {
            "kind": "self_composed",
            "count": 4,
            "event": {"kind": "gaussian", "noise_multiplier": 3.0},
        },
    }
    assert section_context(report, g)["release_events"] == context["release_events"]

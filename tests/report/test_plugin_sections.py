"""A plugin's report section appears only in a report that releases one of its own methods."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.cleanroom.sections_worker import _sections_of
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import ReportSectionSpec
from dpledger.plugins.primitives import gaussian
from dpledger.report.build import BuiltReport, build_report, report_pipeline_file
from dpledger.report.run_dir import report_run_dir
from dpledger.runtime import session
from dpledger.runtime import testing as _testing
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.run_dir import write_run_dir

# fixtures (also provided by the pytest11 plugin once dpledger is installed)
dpledger_pm = _testing.dpledger_pm
dpledger_register = _testing.dpledger_register

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "pipelines").glob("*.toml"))
TRAJECTORIES_SECTION = "trajectories_gdp_check"

#: a pipeline releasing the trajectories method (Poisson-subsampled Gaussian steps)
TRAJECTORIES = """
name = "trajectories"
delta = 1e-5

[[sources]]
name = "observations"
adjacency = { relation = "add_remove", unit = "row" }

[[releases]]
id = "paths"
input = "observations"
method = "trajectories"
params = { n_per_time = 200, T = 2, K = 20, rho = 0.05, tau = 1.0 }
"""

#: the same kind of block (Poisson-subsampled Gaussian steps) from another plugin's method
DP_SGD = """
name = "logistic-regression"
delta = 1e-5

[[sources]]
name = "rows"
adjacency = { relation = "add_remove", unit = "row" }

[[releases]]
id = "sgd"
input = "rows"
method = "dp_sgd_logistic"
params = { steps = 10, sampling_probability = 0.01, noise_multiplier = 1.0, clip_norm = 1.0, \
expected_batch_size = 10.0 }
"""


@pytest.fixture(scope="module")
def host() -> PluginHost:
    """dpledger's own plugins (trajectories and SHK register report sections)."""
    return PluginHost.create(builtin_only=True)


def _plugins_released(built: BuiltReport, host: PluginHost) -> set[str]:
    """The plugins that registered a method the report releases (or the run it reports)."""
    runtime = built.report.runtime or {}
    names = {r.method for r in built.report.releases} | {runtime.get("method")}
    methods = host.methods()
    return {
        str(spec.provenance.plugin)
        for name in names
        if name in methods and (spec := methods[name]).provenance is not None
    }


def _foreign_sections(built: BuiltReport, host: PluginHost) -> list[str]:
    mine = _plugins_released(built, host)
    return [s.name for s in built.report.sections if s.plugin not in mine]


def test_the_builtin_plugins_register_sections(host: PluginHost) -> None:
    sections = host.report_sections()
    assert TRAJECTORIES_SECTION in sections and "shk_tiers" in sections


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_pipeline_gets_no_section_of_a_plugin_it_does_not_use(
    path: Path, host: PluginHost
) -> None:
    built = report_pipeline_file(path, host=host, brackets=False)
    assert _foreign_sections(built, host) == []
    assert TRAJECTORIES_SECTION not in [s.name for s in built.report.sections]


def test_a_release_of_another_plugin_s_poisson_gaussian_steps_gets_no_section(
    tmp_path: Path, host: PluginHost
) -> None:
    path = tmp_path / "sgd.toml"
    path.write_text(DP_SGD)
    built = report_pipeline_file(path, host=host, brackets=False)
    assert "poisson_sampled" in built.report.releases[0].event
    assert built.report.sections == ()


def test_a_release_of_the_trajectories_method_gets_its_section(
    tmp_path: Path, host: PluginHost
) -> None:
    path = tmp_path / "trajectories.toml"
    path.write_text(TRAJECTORIES)
    built = report_pipeline_file(path, host=host, brackets=False)
    [section] = built.report.sections
    assert (section.name, section.plugin) == (TRAJECTORIES_SECTION, "trajectories")
    assert "Lemma 3.1" in section.markdown and "| 0.05 | 1 | 20 |" in section.markdown


def test_a_run_directory_of_the_gaussian_mechanism_gets_no_section(
    tmp_path: Path, host: PluginHost
) -> None:
    spec = host.method("gaussian_mechanism")
    params = spec.make_params({"sensitivity": 1.0, "noise_multiplier": 2.0})
    plan = session.plan(spec, params, Adjacency(), host.lower, delta=1e-5)
    result = session.execute(plan.declared, np.arange(5.0), seed=7)
    out = tmp_path / "run"
    write_run_dir(out, result.outputs, session.record(plan, result))
    built = report_run_dir(out, host=host, brackets=False)
    assert built.report.runtime is not None
    assert built.report.runtime["method"] == "gaussian_mechanism"
    assert built.report.sections == ()


# -- the rule, on plugins made up for it ------------------------------------------------------
def _echo(context: Any) -> str:
    return "notes on " + ", ".join(sorted(str(r["method"]) for r in context["releases"]))


def _plugin(methods: tuple[str, ...], sections: list[ReportSectionSpec]) -> types.ModuleType:
    mod = types.ModuleType("throwaway")

    def register_methods(register: Any) -> None:
        for name in methods:
            register(attrs.evolve(gaussian.SPEC, name=name))

    def register_sections(register: Any) -> None:
        for section in sections:
            register(section)

    setattr(mod, "dpledger_register_methods", hookimpl(register_methods))  # noqa: B010
    setattr(mod, "dpledger_register_report_sections", hookimpl(register_sections))  # noqa: B010
    return mod


@pytest.fixture
def two_plugins(dpledger_register: Any) -> Iterator[PluginHost]:
    """Plugin ``notes`` (methods ``note_a``, ``note_b``; a section for both and one for
    ``note_b`` only) and plugin ``other`` (method ``other_m``, no section)."""
    notes = _plugin(
        ("note_a", "note_b"),
        [
            ReportSectionSpec(name="all_notes", title="All notes", render=_echo),
            ReportSectionSpec(name="b_notes", title="B notes", render=_echo, methods=["note_b"]),
        ],
    )
    other = _plugin(("other_m",), [])
    with dpledger_register(other, name="other"), dpledger_register(notes, name="notes") as host:
        yield host


def _sections(host: PluginHost, *methods: str) -> list[str]:
    g = CompositionGraph()
    g.add_source("db", Adjacency())
    for i, method in enumerate(methods):
        g.add_release(f"r{i}", GaussianEvent(2.0), "db", method=method)
    built = build_report(
        g, title="t", input_kind="p", input_name="n", delta=1e-5, host=host, brackets=False
    )
    assert not [w for w in built.report.warnings if "report section" in w]
    return [s.name for s in built.report.sections]


def test_a_section_follows_its_own_plugin_s_methods(two_plugins: PluginHost) -> None:
    assert _sections(two_plugins, "other_m") == []
    assert _sections(two_plugins, "note_a") == ["all_notes"]
    assert _sections(two_plugins, "note_b", "other_m") == ["all_notes", "b_notes"]


def test_the_worker_draws_sections_by_the_same_rule(two_plugins: PluginHost) -> None:
    assert [n for n, _ in _sections_of(two_plugins, ["other_m"])] == []
    assert [n for n, _ in _sections_of(two_plugins, ["note_a"])] == ["all_notes"]
    assert [n for n, _ in _sections_of(two_plugins, ["note_b"])] == ["all_notes", "b_notes"]


def test_a_section_names_methods_by_name() -> None:
    spec = ReportSectionSpec(name="s", title="S", render=_echo, methods=["a", "b"])
    assert spec.methods == ("a", "b") and spec.to_dict()["methods"] == ["a", "b"]
    assert ReportSectionSpec(name="s", title="S", render=_echo).methods is None
    for bad in ((), "a", ("Bad Name",)):
        with pytest.raises(InvalidParameterError, match="methods"):
            ReportSectionSpec(name="s", title="S", render=_echo, methods=bad)

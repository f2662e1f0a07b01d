"""The report section puts Lemma 3.1's asymptotic GDP epsilon beside the certified one."""

from __future__ import annotations

import pytest

from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.plugins.trajectories import plugin
from dpledger.plugins.trajectories.report import gdp_rows, render_gdp_check


def _context(delta: float) -> dict[str, object]:
    steps = SelfComposedEvent(PoissonSampledEvent(20 / 674, GaussianEvent(0.6851)), 20)
    event = ComposedEvent([GaussianEvent(3.0), steps])
    return {
        "query": ["delta", delta],
        "account": {"releases": [{"event": event.to_dict()}]},
        "runtime": {"executed": "text"},
    }


def test_fig1_setting_is_flagged() -> None:
    rows = gdp_rows(_context(5e-4), 5e-4)
    assert len(rows) == 1
    r = rows[0]
    assert r["K"] == 20 and r["paper_epsilon"] == pytest.approx(1.0, abs=2e-3)
    assert r["certified_epsilon"] == pytest.approx(2.011, abs=0.01)
    assert r["understates"] is True
    text = render_gdp_check(_context(5e-4))
    assert "**yes**" in text and "not an upper bound" in text


def test_section_without_steps_and_registration(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    assert render_gdp_check({"query": ["delta", 1e-5]}) == ""  # nothing to compare: no section
    with dpledger_register(plugin, name="trajectories") as host:
        assert "trajectories_gdp_check" in host.report_sections()
        assert "trajectories" in host.methods()

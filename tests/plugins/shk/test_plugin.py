"""The ``shk`` method: contract, declaration, certificates, tiers, host run and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    ApproxDPEvent,
    PureDPEvent,
    SelfComposedEvent,
)
from dpledger.plugins.shk import bounds, certificate_summary, declare, plugin
from dpledger.plugins.shk.events import TimeProfiledPureDPEvent
from dpledger.plugins.shk.torus import TorusGrid
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.runner import run_verified
from dpledger.runtime.testing import MethodPluginContract

EXP3 = {"t": 7.0, "beta": 5.0, "n": 100, "rho0_kappa": 0.5}


def _angles(rng: np.random.Generator) -> np.ndarray:
    return 0.25 + 0.1 * rng.standard_normal(40)


class TestSHKGridContract(MethodPluginContract):
    spec = plugin.SPEC
    valid_params: ClassVar[dict[str, Any]] = {
        "t": 3.0,
        "beta": 2.0,
        "n": 40,
        "n_cells": 32,
        "n_samples": 2,
    }
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"beta": -1.0},
        {"beta": 0.0},
        {"t": -0.5},
        {"t": math.inf},
        {"n": 0},
        {"solver": "mcmc"},
        {"certificate": "kl"},  # needs approx_epsilon
        {"loss": "cosine", "loss_range": 3.0},
        {"delta_pot": 0.1},  # cosine sensitivities are computed
        {"n_cells": 4},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        return _angles(rng)


class TestSHKParticleContract(MethodPluginContract):
    spec = plugin.SPEC
    valid_params: ClassVar[dict[str, Any]] = {
        "t": 0.5,
        "beta": 2.0,
        "n": 40,
        "solver": "particles",
        "n_particles": 16,
        "particle_dt": 0.05,
    }

    def make_data(self, rng: np.random.Generator) -> Any:
        return _angles(rng)


def test_declares_theorem3_time_profiled_event() -> None:
    p = plugin.SPEC.make_params(EXP3)
    ev = plugin.SPEC.declare(p, Adjacency(relation="replace_one"))
    # Experiment 3's setting, κ = 0.5: Δ_osc = 2β·2/n = 0.2, B = 2κ + 2β = 11, so
    # ε(7) = 0.2 + 22 e^{−7}; it rounds to the paper's 0.2201, which is a per-pair envelope
    # and not this ε (paper.exp3_readings)
    assert isinstance(ev, TimeProfiledPureDPEvent)
    assert ev.floor_epsilon == pytest.approx(0.2, rel=1e-14)
    assert ev.transient_epsilon == pytest.approx(22.0, rel=1e-14)
    assert ev.time == 7.0 and ev.decay_rate == 1.0
    exact = 0.2 + 22.0 * math.exp(-7.0)
    assert exact <= ev.epsilon <= exact * (1 + 1e-14)
    assert round(ev.epsilon, 4) == 0.2201
    assert ev.epsilon >= bounds.epsilon_a1_prime(7.0, 0.2, 11.0) * (1 - 1e-15)
    # lowered to pure ε-DP by the plugin host and accounted as such; n draws compose
    assert ev.to_core() == PureDPEvent(ev.epsilon)
    sel = account(ev.to_core(), Adjacency(), delta=1e-6)
    assert exact - 1e-5 <= sel.bound.epsilon <= ev.epsilon  # pure ε, tightened slightly at δ
    many = plugin.SPEC.declare(plugin.SPEC.make_params({**EXP3, "n_samples": 3}), Adjacency())
    assert isinstance(many, SelfComposedEvent) and many.count == 3


def test_grid_loss_uses_declared_tighter_sensitivity() -> None:
    base = {"t": 2.0, "beta": 1.0, "n": 50, "loss": "grid", "loss_range": 1.0}
    default = declare.pure_event(declare.as_params(base))
    assert default.floor_epsilon == pytest.approx(2.0 / 50, rel=1e-14)  # 2βR/n
    assert default.transient_epsilon == pytest.approx(2.0, rel=1e-14)  # 2B, B = βR
    tight = declare.pure_event(declare.as_params({**base, "delta_osc": 0.01}))
    assert tight.floor_epsilon == 0.01
    a1 = declare.pure_event(declare.as_params({**base, "delta_pot": 0.004}))
    assert a1.floor_epsilon == pytest.approx(0.008, rel=1e-14)  # A1: 2Δ_pot
    assert declare.target_floor(declare.as_params({**base, "delta_pot": 0.004}))[1] == "A1"


def test_kl_certificate_is_theorem4_with_theorem2() -> None:
    params = {
        "t": 20.0,
        "beta": 0.1,
        "n": 100,
        "certificate": "kl",
        "approx_epsilon": 0.5,
        "lsi_constant": 0.5,
    }
    p = declare.as_params(params)
    ev = declare.declare_shk_release(p)
    assert isinstance(ev, ApproxDPEvent) and ev.epsilon == 0.5
    # H̄ = min over c of Theorem 2 with Δ_grad = 2β/n, S = 4β/n, B = 2β, λ = 0.5
    best = min(bounds.kl_bound_theorem2(20.0, c, 0.002, 0.004, 0.2, 0.5) for c in declare.C_GRID)
    assert ev.delta == pytest.approx(best / 0.5, rel=1e-12) and ev.delta >= best / 0.5
    assert 0.0 < ev.delta < 1.0
    summary = certificate_summary(p)
    assert summary["certificate"] == "kl_hockey_stick"
    assert summary["kl"]["lsi_source"] == "declared"
    assert any("A3" in a for a in summary["kl"]["assumptions"])
    # vacuous KL certificate (δ ≥ 1) is refused for "kl" and falls back to pure for "tighter"
    vacuous = {**EXP3, "certificate": "kl", "approx_epsilon": 0.1}
    with pytest.raises(InvalidParameterError, match=r"^certificate:.*vacuous"):
        declare.declare_shk_release(vacuous)
    fallback = declare.declare_shk_release(
        {**vacuous, "certificate": "tighter", "target_delta": 1e-5}
    )
    assert isinstance(fallback, TimeProfiledPureDPEvent)


def test_tighter_picks_kl_only_when_it_wins_at_target_delta() -> None:
    # huge n, long run: the KL plateau A_1/κ is tiny, so ε_a below the pure floor is affordable
    params = {
        "t": 2000.0,
        "beta": 1.0,
        "n": 10**6,
        "certificate": "tighter",
        "approx_epsilon": 1e-6,
        "target_delta": 1e-3,
    }
    p = declare.as_params(params)
    pure = declare.pure_event(p)
    assert pure.epsilon == pytest.approx(4e-6, rel=1e-9)
    h, _ = declare.kl_bound(p)
    lam = math.exp(-2.0)  # Holley–Stroock default e^{−β·loss_range}
    plateau = min(bounds.kl_plateau(c, 2e-6, 2.0, lam) for c in declare.C_GRID)
    assert h == pytest.approx(plateau, rel=1e-6)
    ev = declare.declare_shk_release(p)
    assert isinstance(ev, ApproxDPEvent) and ev.epsilon == 1e-6 and ev.delta <= 1e-3
    strict = declare.declare_shk_release({**params, "target_delta": ev.delta / 2})
    assert isinstance(strict, TimeProfiledPureDPEvent)
    loose_eps = declare.declare_shk_release({**params, "approx_epsilon": 1e-5})
    assert isinstance(loose_eps, TimeProfiledPureDPEvent)  # 1e-5 > pure ε: pure is tighter


def test_run_books_each_draw_and_reports_tier() -> None:
    p = plugin.SPEC.make_params({**EXP3, "n_cells": 64, "n_samples": 3})
    y = 0.25 + 0.1 * np.linspace(-1, 1, 100)
    res = run_verified(plugin.SPEC, p, y, seed=5)
    out = res.outputs
    assert set(out) == {
        "samples",
        "tier",
        "certificate",
        "epsilon_per_sample",
        "delta_per_sample",
        "t",
        "solver",
    }
    assert out["tier"] == (
        "exact-flow theorem; released sample from the finite-volume grid solver (approximation)"
    )
    assert out["samples"].shape == (3,)
    assert res.ledger.matches_exactly()
    steps = [e["step"] for e in res.ledger.log]
    assert steps == ["shk_sample[0]", "shk_sample[1]", "shk_sample[2]"]
    assert all(e["note"] == out["tier"] for e in res.ledger.log)
    assert out["epsilon_per_sample"] == plugin.SPEC.declare(p, Adjacency()).event.epsilon


def test_grid_samples_follow_the_grid_density() -> None:
    from dpledger.plugins.shk.release import _grid_sampler, _potential
    from dpledger.plugins.shk.solvers import solve_shk
    from dpledger.plugins.shk.torus import von_mises_density

    p = declare.as_params({"t": 1.0, "beta": 3.0, "n": 10, "n_cells": 16, "rho0_kappa": 1.0})
    y = np.full(10, 1.0)
    v, _ = _potential(p, y)
    draw = _grid_sampler(p, y)
    rng = np.random.default_rng(0)
    xs = np.array([draw(rng) for _ in range(20000)])
    g = TorusGrid(16)
    want = solve_shk(v, 1.0, g, von_mises_density(g, 1.0, 0.0)).final(0) * g.dx
    hist = np.histogram(xs, bins=16, range=(-math.pi, math.pi))[0] / xs.size
    assert 0.5 * np.abs(hist - want).sum() < 0.02


def test_ledger_refuses_a_run_that_spends_more_than_declared() -> None:
    p = plugin.SPEC.make_params({**EXP3, "n_cells": 32, "n_samples": 2})
    one = plugin.SPEC.make_params({**EXP3, "n_cells": 32})
    declared_one = plugin.SPEC.declare(one, Adjacency())
    ledger = PrivacyLedger(declared_one, rng=0)
    with pytest.raises(LedgerViolationError, match=r"shk_sample\[1\]"):
        plugin.run_release(p, np.full(100, 0.2), ledger, np.random.default_rng(0))
    # a looser (shorter-time) run is not covered by a longer run's smaller ε
    shorter = plugin.SPEC.make_params({**EXP3, "t": 3.0, "n_cells": 32})
    with pytest.raises(LedgerViolationError, match="exceeds the declared"):
        plugin.run_release(
            shorter, np.full(100, 0.2), PrivacyLedger(declared_one, rng=0), np.random.default_rng(0)
        )
    # a later time (smaller ε) is covered by the declaration (the event's own rule)
    later = plugin.SPEC.make_params({**EXP3, "t": 9.0, "n_cells": 32})
    out = plugin.run_release(
        later, np.full(100, 0.2), PrivacyLedger(declared_one, rng=0), np.random.default_rng(0)
    )
    assert out["samples"].shape == (1,)


def test_report_section_states_the_tier(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with dpledger_register(plugin, name="shk") as host:
        assert "shk" in host.methods()
        section = host.report_sections()["shk_tiers"]
        text = section.render({"releases": [{"method": "shk", "node": "r1", "event": "x"}]})
        assert "exact-flow theorem" in text and "(approximation)" in text and "`r1`" in text
        assert section.render({"releases": [{"method": "laplace_mechanism"}]}) == ""  # not shown


def test_host_run_writes_samples_and_ledger(tmp_path: Path, make_dist, capfd) -> None:  # type: ignore[no-untyped-def]
    make_dist("shk-under-test", "0.1", {}, {"shk": "dpledger.plugins.shk.plugin"})
    np.save(tmp_path / "angles.npy", 0.25 + 0.1 * np.linspace(-1, 1, 100))
    config = tmp_path / "shk.toml"
    config.write_text(
        'data = "angles.npy"\ndelta = 1e-6\n[params]\nt = 7.0\nbeta = 5.0\nn = 100\n'
        "rho0_kappa = 0.5\nn_cells = 48\nn_samples = 2\n"
    )
    out = tmp_path / "out"
    code = main(
        [
            "run",
            "shk",
            "--config",
            str(config),
            "--out",
            str(out),
            "--seed",
            "3",
            "--plugins-allow",
            "shk",
        ]
    )
    assert code == 0, capfd.readouterr().err
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["verified"] is True
    assert ledger["declared"]["event"]["kind"] == "time_profiled_pure_dp"
    eps = ledger["privacy"]["epsilon"]
    one = 0.2 + 22.0 * math.exp(-7.0)
    assert 2 * one - 1e-5 <= eps <= 2 * one * (1 + 1e-12)  # two composed pure draws
    values = json.loads((out / "outputs.json").read_text())
    assert values["tier"].startswith("exact-flow theorem; released sample from the finite-volume")
    assert np.load(out / "samples.npy").shape == (2,)


def test_fewer_records_than_n_are_released_not_refused() -> None:
    """A refusal would tell a dataset of n records from its neighbour of n - 1: below n the
    empirical risk is the loss sum over n, so one record still moves the potential by at most
    beta * loss_range / n (the declared sensitivity)."""
    from dpledger.plugins.shk.release import _potential

    p = plugin.SPEC.make_params({"t": 1.0, "beta": 2.0, "n": 3, "n_cells": 16})
    x = np.linspace(-math.pi, math.pi, 9)
    two, _ = _potential(p, np.array([0.1, 0.2]))
    three, _ = _potential(p, np.array([0.1, 0.2, 1.3]))
    diff = three(x) - two(x)  # the third record's loss over n = 3 (up to a constant)
    assert np.ptp(diff - 2.0 * (1.0 - np.cos(x - 1.3)) / 3.0) < 1e-12
    assert np.max(np.abs(diff)) <= 2.0 * 2.0 / 3.0 + 1e-12
    ledger = PrivacyLedger(TimeProfiledPureDPEvent(100.0, 0.0, 0.0), rng=0)
    out = plugin.run_release(p, [0.1, 0.2], ledger, np.random.default_rng(0))
    assert out["samples"].shape == (1,)


def test_bad_data_is_refused() -> None:
    spec = plugin.SPEC
    ledger = PrivacyLedger(TimeProfiledPureDPEvent(100.0, 0.0, 0.0), rng=0)
    rng = np.random.default_rng(0)
    p = spec.make_params({"t": 1.0, "beta": 1.0, "n": 3, "n_cells": 16})
    with pytest.raises(InvalidParameterError, match=r"^data:.*non-finite"):
        plugin.run_release(p, [0.1, math.nan, 0.2], ledger, rng)
    with pytest.raises(InvalidParameterError, match=r"^data:.*missing"):
        plugin.run_release(p, None, ledger, rng)
    g = {"t": 1.0, "beta": 1.0, "n": 2, "n_cells": 16, "loss": "grid", "loss_range": 7.0}
    pg = spec.make_params(g)
    x = TorusGrid(16).x
    with pytest.raises(InvalidParameterError, match=r"^data:.*not periodic"):
        plugin.run_release(pg, np.stack([x + np.pi, x + np.pi]), ledger, rng)  # linear in x
    with pytest.raises(InvalidParameterError, match=r"^data:.*non-finite"):
        plugin.run_release(pg, np.stack([1 + np.cos(x), np.where(x > 0, np.inf, 1.0)]), ledger, rng)
    with pytest.raises(InvalidParameterError, match=r"^data:.*must lie in \[0, 7.0\]"):
        plugin.run_release(pg, np.stack([1 + np.cos(x), 1 + 8 * np.cos(x)]), ledger, rng)
    with pytest.raises(InvalidParameterError, match=r"^data:.*shape"):
        plugin.run_release(pg, np.ones((2, 15)), ledger, rng)
    periodic = np.stack([1 + np.cos(x), 2 + np.sin(2 * x)])
    assert plugin.run_release(pg, periodic, ledger, rng)["samples"].shape == (1,)

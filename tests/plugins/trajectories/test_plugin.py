"""The trajectory method spec: contract, host runs, the CLI, time subsampling, user level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.plugins.trajectories import plugin
from dpledger.plugins.trajectories.data import make_multimodal
from dpledger.plugins.trajectories.declare import declare_marginals
from dpledger.runtime.runner import run_verified
from dpledger.runtime.testing import MethodPluginContract

N, T = 30, 4
BASE: dict[str, Any] = {
    "n_per_time": [N] * T,
    "m": 5,
    "K": 4,
    "tau": 1.2,
    "C": 2.0,
    "rho": 0.2,
    "eta": 0.01,
    "sigma": 0.4,
    "lambda_": 0.5,
    "diffusivity": 0.3,
    "radius": 1.25,
    "center": [0.0, 0.0],
    "warm_start": {"kind": "mean", "noise_multiplier": 2.0, "spread": 0.05},
    "sinkhorn_iters": 3000,
    "sinkhorn_tol": 1e-6,
}


def _data(seed: int = 1) -> dict[str, Any]:
    return {"marginals": make_multimodal(N=N, T=T, seed=seed).marginals}


class TestTrajectoriesContract(MethodPluginContract):
    spec = plugin.SPEC
    valid_params = BASE
    bad_params = (
        {"rho": 1.5},
        {"n_per_time": [N, 0, N, N]},
        {"n_per_time": [N]},
        {"T": 3},
        {"warm_start": {"kind": "median"}},
        {"times_per_iteration": 5},
        {"unknown": 1},
        {"warm_start": {"kind": "none"}, "times_per_iteration": 1},
    )

    def make_data(self, rng: np.random.Generator) -> Any:
        return _data(int(rng.integers(100)))


def test_event_level_declared_equals_executed_via_host(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with dpledger_register(plugin, name="trajectories") as host:
        spec = host.method("trajectories")
        params = spec.make_params(BASE)
        res = run_verified(spec, params, _data(), seed=3)
    s = 2.0
    step = PoissonSampledEvent(0.2, GaussianEvent(1.2))
    expected = ComposedEvent([GaussianEvent(s), SelfComposedEvent(step, 4)])
    assert res.declared == expected  # the per-marginal event: marginals compose in parallel
    assert res.ledger.matches_exactly()
    assert res.outputs["particles"].shape == (T, 5, 2)
    assert res.outputs["private_steps"] == {str(i): 4 for i in range(T)}


def test_user_level_is_sequential_over_marginals() -> None:
    user = Adjacency(unit="user", unit_key="id", contribution="time_points", max_contributions=2)
    params = plugin.SPEC.make_params(BASE)
    with pytest.raises(InvalidParameterError, match=r"data\.id: is missing.*'ids' \[T, N\]"):
        run_verified(plugin.SPEC, params, _data(), adjacency=user, seed=3)
    data = {**_data(), "ids": np.tile(np.arange(N), (T, 1))}
    res = run_verified(plugin.SPEC, params, data, adjacency=user, seed=3)
    assert res.declaration.unit == "user"
    assert res.ledger.unit_steps == [f"units[{t}]" for t in range(T)]
    per = declare_marginals(params, Adjacency(), [N] * T, T).event
    # the runtime books one release per marginal: T-fold sequential composition
    assert res.declared == ComposedEvent([per] * T)
    assert res.ledger.matches_exactly()
    # declare_marginals: a user in at most k = 2 marginals pays the 2-fold composition
    dec = declare_marginals(params, user, [N] * T, T)
    assert not dec.parallel and dec.event == SelfComposedEvent(per, 2)
    eps = [
        account(e, Adjacency(), delta=1e-5).bound.epsilon for e in (per, dec.event, res.declared)
    ]
    assert eps[0] < eps[1] < eps[2]


def test_user_level_keeps_the_first_point_of_each_user_per_time_by_the_data_ids() -> None:
    user = Adjacency(unit="user", unit_key="id", contribution="time_points", max_contributions=2)
    params = plugin.SPEC.make_params(BASE)
    ids = np.tile(np.arange(N), (T, 1))
    ids[1, :3] = 0  # at time 1, user 0 holds the first three points: one of them is kept
    res = run_verified(plugin.SPEC, params, {**_data(), "ids": ids}, adjacency=user, seed=3)
    kept = {e["step"]: e["kept"] for e in res.ledger.private_log if "kept" in e}
    assert kept == {f"units[{t}]": N - (2 if t == 1 else 0) for t in range(T)}
    short = {**_data(), **{f"ids_{t}": np.arange(N - (t == 2)) for t in range(T)}}
    with pytest.raises(InvalidParameterError, match=rf"data\.ids\[2\]: has {N - 1} ids for {N}"):
        run_verified(plugin.SPEC, params, short, adjacency=user, seed=3)


def test_time_subsampling_declared_equals_executed_and_amplifies() -> None:
    base = {**BASE, "n_per_time": [N] * 6, "K": 6}
    data = {"marginals": make_multimodal(N=N, T=6, seed=2).marginals}
    full = plugin.SPEC.make_params(base)
    sub = plugin.SPEC.make_params({**base, "times_per_iteration": 2})
    res = run_verified(plugin.SPEC, sub, data, seed=5)
    assert res.ledger.matches_exactly()
    # 4 interior times, 2 per iteration: epochs of 2 iterations, 3 private steps per marginal
    step = PoissonSampledEvent(0.2, GaussianEvent(1.2))
    assert res.declared == ComposedEvent([GaussianEvent(2.0), SelfComposedEvent(step, 3)])
    steps = res.outputs["private_steps"]
    assert steps["0"] == steps["5"] == 0 and all(steps[str(i)] == 3 for i in range(1, 5))
    # the ends keep their private warm start
    np.testing.assert_array_equal(res.outputs["particles"][0], res.outputs["init_particles"][0])
    e_full = account(plugin.declare(full, Adjacency()), delta=1e-5).bound.epsilon
    e_sub = account(res.declared, delta=1e-5).bound.epsilon
    assert e_sub < e_full


def test_ledger_refuses_a_run_that_spends_more(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    from dpledger.core.errors import LedgerViolationError

    params = plugin.SPEC.make_params(BASE)
    cheap = plugin.SPEC.make_params({**BASE, "K": 3})
    spec = plugin.MethodSpec(
        name="cheat",
        params=plugin.TrajectoriesParams,
        declare=lambda p, a: plugin.declare(cheap, a),
        run=plugin.run,
        description="declares 3 steps, runs 4",
        proof="none",
    )
    with pytest.raises(LedgerViolationError, match="more steps than declared"):
        run_verified(spec, params, _data(), seed=1)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (None, "data"),
        ({"x": np.zeros((3, 2))}, "data"),
        ({"marginals": [np.zeros((N, 2))] * (T - 1)}, "n_per_time"),
        ({"marginals": [np.zeros((N, 2))] * 3 + [np.full((N, 2), 2.0)]}, "marginals[3]"),
        ({"marginals": [np.zeros((N, 2))] * 3 + [np.full((N, 2), np.nan)]}, "marginals[3]"),
        ({"marginals": [np.zeros((N, 2))] * 3 + [np.zeros((0, 2))]}, "marginals[3]"),
        ({"marginals": [np.zeros((N, 2))] * 3 + [[[0.0, 0.0], [0.0]] * 15]}, "marginals[3]"),
        ({"marginals": [np.zeros((N, 2))]}, "marginals"),
        ({"marginal_0": np.zeros((N, 2)), "marginal_2": np.zeros((N, 2))}, "data"),
    ],
)
def test_bad_data_names_the_field(data: Any, field: str) -> None:
    params = plugin.SPEC.make_params(BASE)
    with pytest.raises(InvalidParameterError) as err:
        run_verified(plugin.SPEC, params, data, seed=0)
    assert err.value.field == field and "Fix:" in str(err.value)


def test_dpledger_run_cli(tmp_path: Path, make_dist, capfd) -> None:  # type: ignore[no-untyped-def]
    make_dist(
        "traj-under-test", "0.1", {}, {"trajectories": "dpledger.plugins.trajectories.plugin"}
    )
    marg = make_multimodal(N=N, T=T, seed=1).marginals
    np.savez(tmp_path / "marginals.npz", **{f"marginal_{i}": x for i, x in enumerate(marg)})
    lines = ['data = "marginals.npz"', "delta = 1e-5", "[params]"]
    for k, v in BASE.items():
        if k != "warm_start":
            lines.append(f"{k} = {json.dumps(v)}")
    lines += ["[params.warm_start]", 'kind = "mean"', "noise_multiplier = 2.0", "spread = 0.05"]
    (tmp_path / "cfg.toml").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code = main(
        [
            "run",
            "trajectories",
            "--config",
            str(tmp_path / "cfg.toml"),
            "--out",
            str(out),
            "--seed",
            "4",
            "--plugins-allow",
            "trajectories",
        ]
    )
    assert code == 0, capfd.readouterr().err
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["verified"] is True
    assert np.load(out / "particles.npy").shape == (T, 5, 2)
    values = json.loads((out / "outputs.json").read_text())
    assert values["paper_gdp_mu"][0] == pytest.approx(0.2 * np.sqrt(4 * np.expm1(1 / 1.2**2)))
    assert ledger["privacy"]["epsilon"] > 0


def test_an_unavailable_device_is_refused_before_any_noise() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    params = plugin.SPEC.make_params({**BASE, "device": "cuda"})
    marg = make_multimodal(N=N, T=T, seed=1).marginals
    with pytest.raises(InvalidParameterError) as err:
        run_verified(plugin.SPEC, params, {"marginals": marg}, seed=0)
    assert err.value.field == "device" and "use 'cpu'" in str(err.value)


def test_data_sizes_other_than_n_per_time_run_and_stay_private() -> None:
    # the page: sizes need not equal n_per_time; the true sizes go to the private diagnostics
    params = plugin.SPEC.make_params(BASE)
    data = {"marginals": make_multimodal(N=N - 5, T=T, seed=1).marginals}
    res = run_verified(plugin.SPEC, params, data, seed=3)
    sizes = [e["sizes"] for e in res.ledger.private_log if e.get("step") == "marginal_sizes"]
    assert sizes == [[N - 5] * T]
    assert res.ledger.matches_exactly()
    assert "marginal_sizes" not in json.dumps(res.ledger.to_dict())

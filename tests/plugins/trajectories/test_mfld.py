from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import ComposedEvent, Event, GaussianEvent, PoissonSampledEvent
from dpledger.plugins.trajectories import mfld
from dpledger.plugins.trajectories.data import make_multimodal
from dpledger.plugins.trajectories.declare import (
    Phase,
    TrajectoryParams,
    WarmStart,
    declare_marginals,
)
from dpledger.plugins.trajectories.metrics import marginal_w2
from dpledger.plugins.trajectories.noise import RecordingNoise, executed_marginal_events


def test_first_variation_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    T, m, d, N = 3, 4, 2, 5
    Ys = [torch.tensor(0.5 * rng.normal(size=(N, d))) for _ in range(T)]
    X = torch.tensor(0.5 * rng.normal(size=(T, m, d)))
    p = TrajectoryParams(
        m=m,
        lambda_=0.5,
        sigma=0.4,
        diffusivity=0.3,
        radius=10.0,
        sinkhorn_iters=20000,
        sinkhorn_tol=1e-14,
    )
    times = np.array([0.0, 0.4, 1.0])
    g = mfld.first_variation_grad(X, Ys, times, p)
    fd = torch.zeros_like(X)
    h = 1e-6
    for idx in np.ndindex(*X.shape):
        Xp, Xm = X.clone(), X.clone()
        Xp[idx] += h
        Xm[idx] -= h
        fd[idx] = (mfld.objective(Xp, Ys, times, p) - mfld.objective(Xm, Ys, times, p)) / (2 * h)
    # grad V^(i)(x_k) = m * d G / d x_k  (Prop. C.2 with weights 1/m)
    assert torch.allclose(g, m * fd, atol=1e-6, rtol=1e-6)
    assert g.abs().max() > 1.0  # a non-trivial gradient


def test_clipping_bounds_whole_block() -> None:
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(7, 2)))
    Y = torch.tensor(3.0 * rng.normal(size=(40, 2)))
    blocks = mfld.fit_blocks(X, Y, sigma=0.3, weight=2.0)
    norms = blocks.flatten(1).norm(dim=1)
    C = float(norms.median())
    clipped = mfld.clip_blocks(blocks, C)
    cn = clipped.flatten(1).norm(dim=1)
    assert torch.all(cn <= C * (1 + 1e-12))
    small = norms <= C
    assert torch.equal(clipped[small], blocks[small])  # untouched below the bound
    assert torch.allclose(cn[~small], torch.full_like(cn[~small], C))
    # per-particle clipping would allow sqrt(m) * C per block; the block bound is C itself
    assert float(norms.max()) > C * math.sqrt(7) / 2


class _AllNoNoise(RecordingNoise):
    """Keeps every record and adds no noise: isolates the deterministic part."""

    def sampled_release(self, sizes, q, compute, scales, multiplier, steps):  # type: ignore[no-untyped-def]
        return compute([np.arange(n) for n in sizes])


def test_noise_std_is_tau_C_and_divisor_is_expected_batch() -> None:
    p = TrajectoryParams(m=2000, tau=0.7, C=3.0, rho=0.1, sigma=0.5)
    X = torch.zeros(1, 2000, 2, dtype=torch.float64)
    Y = [torch.ones(10, 2, dtype=torch.float64)]
    noise = RecordingNoise(5)
    noise.rng = np.random.default_rng(5)
    # rho = 0.1 over 10 records: force an empty sample by a rate-0 run of the same release
    p0 = TrajectoryParams(m=2000, tau=0.7, C=3.0, rho=1e-12, sigma=0.5)
    out = mfld.private_fit_grads(X, Y, [0], (0,), p0, 1.0, p0.tau, noise, "p0/k0", [10])[0]
    ev = noise.executed[-1].event
    assert ev == PoissonSampledEvent(1e-12, GaussianEvent(0.7))
    emp = float((out * p0.rho * 10).std())
    assert emp == pytest.approx(0.7 * 3.0, rel=0.04)
    # every record sampled and no noise: clipped sum / (rho N), not / |batch| = N
    out = mfld.private_fit_grads(X, Y, [0], (0,), p, 1.0, p.tau, _AllNoNoise(0), "p0/k1", [10])[0]
    expect = mfld.clip_blocks(mfld.fit_blocks(X[0], Y[0], 0.5, 1.0), 3.0).sum(0) / (0.1 * 10)
    assert torch.allclose(out, expect)


def test_langevin_variance_matches_fokker_planck() -> None:
    """Per-step variance of the particle noise is 2 eta D (top-up on top of privacy noise)."""
    data = [np.zeros((50, 8)), np.zeros((50, 8))]
    p = TrajectoryParams(
        m=400,
        K=1,
        tau=1.0,
        C=1e-9,
        rho=0.5,
        eta=0.01,
        lambda_=1e9,
        sigma=1.0,
        diffusivity=0.2,
        radius=1.0,
        sinkhorn_iters=5000,
        sinkhorn_tol=1e-6,
    )
    init = np.zeros((2, 400, 8))
    res = mfld.run(data, p, init=init, noise=RecordingNoise(2))
    # transport drift is ~0 for two identical point clouds at the origin
    assert float(res.particles.var()) == pytest.approx(2 * 0.01 * 0.2, rel=0.06)
    public = [st for st, _ in res.noise.public_draws if st.endswith("diff")]
    assert len(public) == 2  # one top-up per marginal and iteration


def _close(a: Event, b: Event) -> bool:
    da, db = a.to_dict(), b.to_dict()

    def eq(x: object, y: object) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(eq(u, v) for u, v in zip(x, y, strict=True))
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-9)
        return x == y

    return eq(da, db)


@pytest.mark.parametrize("kind", ["mean", "mixture"])
def test_declared_and_executed_steps_agree(kind: str) -> None:
    d = make_multimodal(N=40, T=3, seed=1)
    ws = WarmStart(kind, epsilon=1.0, delta=1e-3, grid=4, components=2)
    sched = (Phase(3, 0.01, 1.5, 0.2), Phase(2, 0.005, 1.0, 0.2))
    p = TrajectoryParams(
        m=6,
        C=2.0,
        rho=0.25,
        schedule=sched,
        warm_start=ws,
        radius=d.radius,
        center=d.center,
        sinkhorn_iters=5000,
        sinkhorn_tol=1e-6,
    )
    adj = Adjacency(relation="replace_one")
    noise = RecordingNoise(0)
    mfld.run(d.marginals, p, adjacency=adj, noise=noise)
    executed = executed_marginal_events(noise.executed)
    declared = declare_marginals(p, adj, 40, 3)
    assert sorted(executed) == [0, 1, 2]
    for i in range(3):
        assert _close(executed[i], declared.per_marginal[i])
    ev = executed[0]
    assert isinstance(ev, ComposedEvent) and len(ev.events) == (3 if kind == "mean" else 4)


def test_run_rejects_bad_input() -> None:
    d = make_multimodal(N=20, T=3, seed=0)
    p = TrajectoryParams(m=4, K=1, radius=d.radius)
    with pytest.raises(InvalidParameterError) as err:
        mfld.run(d.marginals, p, times=[0.0, 0.5, 0.5])
    assert err.value.field == "times"
    with pytest.raises(InvalidParameterError) as err:
        mfld.run(d.marginals, p, init=np.zeros((3, 5, 2)))
    assert err.value.field == "init"
    with pytest.raises(InvalidParameterError) as err:
        mfld.run(d.marginals, TrajectoryParams(m=4, K=1, radius=0.5))
    assert err.value.field.startswith("marginals[")


def test_run_refuses_a_diverging_step() -> None:
    d = make_multimodal(N=20, T=3, seed=0)
    p = TrajectoryParams(m=6, K=40, eta=0.5, radius=d.radius, center=d.center)
    with pytest.raises(InvalidParameterError) as err:
        mfld.run(d.marginals, p, noise=RecordingNoise(0))
    assert err.value.field == "eta"
    assert "diverged at iteration" in str(err.value)


def test_multimodal_run_improves_w2() -> None:
    d = make_multimodal(N=300, T=4, seed=0)
    p = TrajectoryParams(
        m=30,
        K=100,
        tau=1.0,
        C=10.0,
        rho=0.2,
        eta=0.05,
        lambda_=0.3,
        sigma=0.5,
        diffusivity=0.1,
        radius=d.radius,
        center=d.center,
        sinkhorn_iters=5000,
        sinkhorn_tol=1e-5,
    )
    res = mfld.run(d.marginals, p, noise=RecordingNoise(0))
    before = marginal_w2(d.marginals, list(res.init_particles))
    after = marginal_w2(d.marginals, list(res.particles))
    assert after.mean() < 0.6 * before.mean()
    assert np.all(after < before)


class _OldStyleNoise:
    """The older per-marginal interface (``gaussian``/``poisson_sample``), recording labels."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.labels: list[tuple[str, float]] = []

    def gaussian(self, shape: tuple[int, ...], std: float, step: str) -> np.ndarray:
        self.labels.append((step, std))
        return std * self.rng.standard_normal(shape)

    def poisson_sample(self, n: int, q: float, step: str) -> np.ndarray:
        self.labels.append((step, q))
        return self.rng.random(n) < q


def test_older_noise_interface_gets_one_call_per_marginal() -> None:
    d = make_multimodal(N=20, T=3, seed=0)
    ws = WarmStart("mean", noise_multiplier=2.0)
    p = TrajectoryParams(
        m=4,
        K=2,
        C=1.5,
        tau=1.1,
        rho=0.3,
        warm_start=ws,
        radius=d.radius,
        center=d.center,
        diffusivity=0.5,
        sinkhorn_iters=5000,
        sinkhorn_tol=1e-6,
    )
    noise = _OldStyleNoise()
    mfld.run(d.marginals, p, noise=noise)
    private = [(s, v) for s, v in noise.labels if not s.startswith("public/")]
    assert [s for s, _ in private[:3]] == [f"t{i}/warm/mean" for i in range(3)]
    assert private[0][1] == pytest.approx(2.0 * d.radius / 20)
    steps = [s for s, _ in private[3:]]
    assert steps[:6] == [
        "t0/p0/k0/sample",
        "t1/p0/k0/sample",
        "t2/p0/k0/sample",
        "t0/p0/k0/noise",
        "t1/p0/k0/noise",
        "t2/p0/k0/noise",
    ]
    assert len(steps) == 12
    assert all(v == pytest.approx(1.1 * 1.5) for s, v in private[3:] if s.endswith("noise"))

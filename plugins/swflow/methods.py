"""The private runs of DPSWflow-r, DPSWflow and DPSWgen (torch).

Every batch is drawn with ``ledger.sample_without_replacement`` and every noisy projection
with ``ledger.gaussian`` (std ``m * C`` for the per-record bound ``C`` of that step's
projections); records are first clipped to the unit ball with ``ledger.clip_rows_l2``. The
projection directions, the particle initialisation, the particle smoothing noise, the Langevin
noise and the sub-projection choice of DPSWflow touch no private data and use the public
``rng``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dpledger.plugin import ApproxDPEvent, InvalidParameterError, Ledger, torch_device
from dpledger.plugins.swflow.data import check_records
from dpledger.plugins.swflow.declare import noise_multiplier_for
from dpledger.plugins.swflow.generator import Generator, sliced_loss
from dpledger.plugins.swflow.params import AnyParams, FlowParams, FlowResampleParams, GenParams
from dpledger.plugins.swflow.sensitivity import record_bound, sample_projections
from dpledger.plugins.swflow.transport import flow_step, sorted_columns

DTYPE = torch.float64


def _prepare(
    params: AnyParams, data: Any, ledger: Ledger, name: str
) -> tuple[np.ndarray, float | None]:
    y = check_records(data)
    n, d = y.shape
    size = getattr(params, "dataset_size", None)
    if size is not None and n != size:
        raise InvalidParameterError(
            "dataset_size",
            f"is {size} but the data has {n} records",
            f"set dataset_size = {n} (it is public: the batches are drawn from it)",
        )
    if params.num_projections < d:
        raise InvalidParameterError(
            "num_projections",
            f"{params.num_projections} is below the data dimension {d}",
            f"use at least {d} projections (or reduce the latent dimension)",
        )
    m = noise_multiplier_for(params, ledger.adjacency)
    y = ledger.clip_rows_l2(y, 1.0, step=f"{name}.unit_ball")
    return y, m


def _device(params: AnyParams) -> torch.device:
    return torch_device(params.device)


def _torch_generator(rng: np.random.Generator, device: torch.device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(int(rng.integers(0, 2**62)))


def _t(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def _release(
    ledger: Ledger, values: np.ndarray, bound: float, m: float | None, step: str
) -> np.ndarray:
    if m is None:
        return values
    # release (values / C) + N(0, m^2), i.e. values + N(0, (m C)^2) after the public rescale:
    # the rescaled rows have per-record bound 1, so the ledger books exactly Gaussian(m)
    return bound * np.asarray(ledger.gaussian(values / bound, 1.0, m, step=step))


def _charge_failure(ledger: Ledger, params: AnyParams, step: str) -> None:
    """Book the failure probability of the probabilistic bound for one projection matrix."""
    if params.sensitivity_bound == "probabilistic" and params.private:
        # a data-independent charge: checked against the declaration and booked, no noise
        ledger.charge(
            ApproxDPEvent(0.0, params.failure_per_step),
            step=step,
            reason="probabilistic sensitivity bound",
        )


def run_flow_resample(
    params: FlowResampleParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """DPSWflow-r: fresh projections, a fresh batch and a fresh noisy release every step."""
    y, m = _prepare(params, data, ledger, "swflow_r")
    n, d = y.shape
    dev = _device(params)
    gen = _torch_generator(rng, dev)
    x = torch.randn((params.num_particles, d), generator=gen, dtype=DTYPE, device=dev)
    for t in range(params.num_steps):
        theta = sample_projections(rng, params.num_projections, d)
        bound = record_bound(theta, params.sensitivity_bound, params.failure_per_step)
        with ledger.sample_without_replacement(
            n, params.batch_size, step=f"swflow_r.batch[{t}]"
        ) as batch:
            noisy = _release(
                ledger, y[batch.indices] @ theta.T, bound, m, step=f"swflow_r.project[{t}]"
            )
        _charge_failure(ledger, params, f"swflow_r.bound_failure[{t}]")
        x = flow_step(
            x,
            _t(theta, dev),
            sorted_columns(_t(noisy, dev)),
            step_size=params.step_size,
            reg=params.reg,
            smoothing_std=0.0 if m is None else m * bound,
            generator=gen,
            evaluate_at=params.evaluate_at,
        )
    return {"particles": x.cpu().numpy(), "noise_multiplier": float("nan") if m is None else m}


def run_flow(
    params: FlowParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """DPSWflow: one noisy release of all projections of all records, then post-processing."""
    y, m = _prepare(params, data, ledger, "swflow")
    d = y.shape[1]
    dev = _device(params)
    gen = _torch_generator(rng, dev)
    theta = sample_projections(rng, params.num_projections, d)
    bound = record_bound(theta, params.sensitivity_bound, params.failure_per_step)
    noisy = _release(ledger, y @ theta.T, bound, m, step="swflow.project")
    _charge_failure(ledger, params, "swflow.bound_failure")
    target_sorted = sorted_columns(_t(noisy, dev))  # the released quantiles
    th_all = _t(theta, dev)
    x = torch.randn((params.num_particles, d), generator=gen, dtype=DTYPE, device=dev)
    k = params.num_sub_projections
    for _ in range(params.num_steps):
        idx = _t(rng.choice(params.num_projections, size=k, replace=False), dev)
        x = flow_step(
            x,
            th_all[idx],
            target_sorted[idx],
            step_size=params.step_size,
            reg=params.reg,
            smoothing_std=0.0 if m is None else m * bound,
            generator=gen,
            evaluate_at=params.evaluate_at,
        )
    return {"particles": x.cpu().numpy(), "noise_multiplier": float("nan") if m is None else m}


def run_gen(
    params: GenParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """DPSWgen: a generator trained on the smoothed sliced-Wasserstein loss to noisy batches."""
    y, m = _prepare(params, data, ledger, "swgen")
    n, d = y.shape
    dev = _device(params)
    gen = _torch_generator(rng, dev)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(int(rng.integers(0, 2**62)))  # parameter initialisation
    model = Generator(params.noise_dim, d, params.hidden, params.normalize_output).to(
        device=dev, dtype=DTYPE
    )
    torch.random.set_rng_state(torch_state)
    opt = torch.optim.Adam(model.parameters(), lr=params.learning_rate)
    for t in range(params.num_steps):
        theta = sample_projections(rng, params.num_projections, d)
        bound = record_bound(theta, params.sensitivity_bound, params.failure_per_step)
        with ledger.sample_without_replacement(
            n, params.batch_size, step=f"swgen.batch[{t}]"
        ) as batch:
            noisy = _release(
                ledger, y[batch.indices] @ theta.T, bound, m, step=f"swgen.project[{t}]"
            )
        _charge_failure(ledger, params, f"swgen.bound_failure[{t}]")
        z = torch.randn(
            (params.batch_size, params.noise_dim), generator=gen, dtype=DTYPE, device=dev
        )
        loss = sliced_loss(
            model(z), _t(theta, dev), _t(noisy, dev), 0.0 if m is None else m * bound, gen
        )
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
    model.eval()
    with torch.no_grad():
        z = torch.randn(
            (params.num_particles, params.noise_dim), generator=gen, dtype=DTYPE, device=dev
        )
        samples = model(z)
    multiplier = float("nan") if m is None else m
    return {"particles": samples.cpu().numpy(), "noise_multiplier": multiplier}

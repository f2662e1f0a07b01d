"""Data-parallel DP fine-tuning with ``torch.distributed`` (gloo on CPU), launched by torchrun.

Per global step, identically to :func:`dpledger.plugins.path.train.train`:

1. rank 0 Poisson-samples the users through *its* ledger and draws their split points, and
   broadcasts both (one sample per global step, never one per rank);
2. every rank computes the per-user gradients of its share of the sample (positions
   ``rank, rank + world, ...``) and clips each to ``C`` with the ledger's clipping routine;
3. the clipped sums are all-reduced (float64); rank 0 adds the Gaussian noise once through its
   ledger and broadcasts the noisy sum; every rank takes the same optimiser step.

The executed events are exactly those of a single-process run with the same seeds. The
``DistributedDataParallel`` wrapper is not used: its reducer averages *unclipped* gradients,
whereas DP-SGD needs the sum of per-user clipped gradients.

Command line (under torchrun; rank 0 writes ``--out``)::

    torchrun --nproc_per_node 2 -m dpledger.plugins.path.ddp --data tables.json \\
        --config train.json --out result.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpledger.plugin import (
    Adjacency,
    Event,
    GaussianEvent,
    InvalidParameterError,
    Ledger,
    NonPrivateEvent,
    PoissonSampledEvent,
    PrivacyLedger,
    SelfComposedEvent,
)
from dpledger.plugins.path.model import Codec
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.path.train import (
    TrainConfig,
    Updater,
    build_examples,
    draw_splits,
    grad_sample_module,
    per_example_grads,
)
from dpledger.plugins.path.windowing import SplitSampler


def training_event(config: TrainConfig) -> Event:
    """The event a training run executes."""
    step = PoissonSampledEvent(config.sampling_probability, GaussianEvent(config.noise_multiplier))
    return SelfComposedEvent(step, config.steps)


def _clipped(
    ledger: Ledger | None, clipper: Ledger, grads: Any, config: TrainConfig, t: int
) -> Any:
    """Per-example gradients clipped in L2: through the ledger on rank 0 (``ledger`` given),
    by the same routine off the record on the other ranks."""
    if ledger is not None:
        return ledger.clip_rows_l2(grads, config.clip_norm, step=f"path.train.clip[{t}]")
    return clipper.clip_rows_l2(grads, config.clip_norm)


def _noised(ledger: Ledger, total: Any, config: TrainConfig, t: int) -> Any:
    """Rank 0's Gaussian noise on the summed clipped gradients of step ``t`` (a float64
    tensor of the same width), drawn through the ledger."""
    import torch

    noisy = ledger.gaussian(
        total.numpy(), config.clip_norm, config.noise_multiplier, step=f"path.train.noise[{t}]"
    )
    return torch.from_numpy(np.asarray(noisy, dtype=np.float64).reshape(total.numel()).copy())


def train_distributed(
    model: Any,
    codec: Codec,
    tables: UserTables,
    config: TrainConfig,
    ledger: Ledger | None,
    rng: np.random.Generator | None,
    sampler: SplitSampler,
) -> Any:
    """DP-SGD across the ranks of the default process group; ``ledger``/``rng`` on rank 0 only."""
    import torch
    import torch.distributed as dist
    from tqdm.auto import tqdm

    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0 and (ledger is None or rng is None):
        raise InvalidParameterError(
            "ledger",
            "rank 0 needs the ledger and the generator",
            "pass them on rank 0 (None on the other ranks)",
        )
    clipper = PrivacyLedger(NonPrivateEvent())  # the ledger's clipping routine, on other ranks
    n = len(tables)
    updater = Updater(model, config)
    width = sum(p.numel() for p in updater.params)
    with grad_sample_module(model) as gsm:
        steps = tqdm(
            range(config.steps),
            desc=f"PATH DP fine-tuning (rank {rank})",
            disable=not config.progress or rank != 0,
        )
        for t in steps:
            scope: Any = contextlib.nullcontext()
            if rank == 0:
                assert ledger is not None
                scope = ledger.poisson_sample(
                    n, config.sampling_probability, step=f"path.train.sample[{t}]"
                )
            with scope as batch:
                payload: list[Any] = [None]
                if rank == 0:
                    assert rng is not None
                    idx = batch.indices.tolist()
                    payload = [(idx, draw_splits(tables, idx, sampler, rng))]
                dist.broadcast_object_list(payload, src=0)
                idx, splits = payload[0]
                mine = build_examples(tables, idx[rank::world], splits[rank::world], codec, config)
                grads = per_example_grads(gsm, mine, codec, config.physical_batch)
                clipped = _clipped(ledger if rank == 0 else None, clipper, grads, config, t)
                total = torch.from_numpy(clipped.sum(axis=0).reshape(width).copy())
                dist.all_reduce(total, op=dist.ReduceOp.SUM)
                noisy = torch.zeros(width, dtype=torch.float64)
                if rank == 0:
                    assert ledger is not None
                    noisy = _noised(ledger, total, config, t)
                dist.broadcast(noisy, src=0)
            updater.apply(noisy.numpy())
    return model


# ---------------------------------------------------------------------------------------------
# Files and the command line
# ---------------------------------------------------------------------------------------------
def tables_to_json(tables: UserTables) -> dict[str, Any]:
    """A JSON-able form of :class:`UserTables` (schema and rows)."""
    return tables.to_json()


def tables_from_json(value: dict[str, Any]) -> UserTables:
    """Inverse of :func:`tables_to_json` (validated by :class:`UserTables`)."""
    try:
        schema = TableSchema(tuple(Column(**c) for c in value["schema"]))
        users = tuple(UserTable(u["user_id"], u["rows"]) for u in value["users"])
    except (KeyError, TypeError) as exc:
        raise InvalidParameterError(
            "data", f"is not a tables file ({exc})", "write it with tables_to_json"
        ) from None
    return UserTables(schema, users)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="tables JSON (tables_to_json)")
    p.add_argument(
        "--config",
        type=Path,
        required=True,
        help="JSON: train (TrainConfig fields), model (default model kwargs), "
        "lora_rank, length_pmf, p_start, model_seed, ledger_seed, run_seed",
    )
    p.add_argument("--out", type=Path, required=True, help="result JSON written by rank 0")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    from dpledger.plugins.path import model as lm

    args = _parser().parse_args(argv)
    cfg = json.loads(args.config.read_text())
    tables = tables_from_json(json.loads(args.data.read_text()))
    config = TrainConfig(**cfg["train"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        model, codec = lm.load(
            None, seed=int(cfg.get("model_seed", 0)), default_kwargs=cfg.get("model", {})
        )
        model = lm.with_lora(model, int(cfg.get("lora_rank", 0)))
        sampler = SplitSampler(np.asarray(cfg["length_pmf"]), float(cfg.get("p_start", 0.1)))
        ledger = rng = None
        if rank == 0:
            adjacency = Adjacency(unit="user", unit_key="user_id")
            ledger = PrivacyLedger(
                training_event(config), adjacency, int(cfg.get("ledger_seed", 0))
            )
            rng = np.random.default_rng(int(cfg.get("run_seed", 0)))
        train_distributed(model, codec, tables, config, ledger, rng, sampler)
        if rank == 0:
            assert ledger is not None
            ledger.verify()
            params = torch.cat([p.detach().reshape(-1) for _, p in lm.trainable(model)])
            result = {
                "world_size": dist.get_world_size(),
                "ledger": ledger.to_dict(),
                "matches_exactly": ledger.matches_exactly(),
                "params": params.double().tolist(),
            }
            args.out.write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

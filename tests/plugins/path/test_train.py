"""User-level DP-SGD: per-user gradients, clipping, noise and the ledger."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.plugins.path import model as lm
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.path.train import (
    TrainConfig,
    build_examples,
    draw_splits,
    example_losses,
    grad_sample_module,
    per_example_grads,
    pretrain_public,
    train,
)
from dpledger.plugins.path.windowing import SplitSampler, collate
from dpledger.runtime.ledger import PrivacyLedger

torch = pytest.importorskip("torch")

SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("x", "numeric"),
        Column("c", "categorical", categories=("a", "b")),
    )
)
TABLES = UserTables(
    SCHEMA,
    tuple(
        UserTable(str(i), [(str(i), float(i + t), "ab"[(i + t) % 2]) for t in range(1 + i % 3)])
        for i in range(6)
    ),
)
USER = Adjacency(unit="user", unit_key="id")
SAMPLER = SplitSampler(np.full(3, 1 / 3), p_start=0.2)


def _tiny(rank: int) -> tuple[object, lm.Codec]:
    model, codec = lm.load(
        None, seed=0, default_kwargs={"n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 128}
    )
    return lm.with_lora(model, rank), codec


def _config(**kw: object) -> TrainConfig:
    base = {
        "steps": 1,
        "sampling_probability": 0.5,
        "noise_multiplier": 1.3,
        "clip_norm": 0.05,
        "expected_batch_size": 3.0,
        "max_tokens": 128,
        "learning_rate": 0.1,
        "schedule": "constant",
        "optimizer": "sgd",
        "physical_batch": 2,
    }
    return TrainConfig(**{**base, **kw})  # type: ignore[arg-type]


def _naive_grads(model: object, examples: list, codec: lm.Codec) -> np.ndarray:
    params = [p for _, p in lm.trainable(model)]
    out = []
    for ex in examples:
        loss = example_losses(model, collate([ex], codec.pad_id)).sum()
        grads = torch.autograd.grad(loss, params)
        out.append(torch.cat([g.reshape(-1) for g in grads]).double().numpy())
    return np.stack(out)


@pytest.mark.parametrize("rank", [0, 2])
def test_per_example_grads_match_a_loop(rank: int) -> None:
    model, codec = _tiny(rank)
    examples = build_examples(TABLES, [0, 2, 4, 5], [0, 2, 1, 0], codec, _config())
    with grad_sample_module(model) as gsm:
        fast = per_example_grads(gsm, examples, codec, physical_batch=3)  # padded chunks
    slow = _naive_grads(model, examples, codec)
    assert fast.shape == slow.shape
    np.testing.assert_allclose(fast, slow, atol=1e-6 * np.abs(slow).max())


def test_one_step_equals_clipped_sum_plus_ledger_noise() -> None:
    """Rebuild the update from the same seeds: Poisson sample, splits, clip, noise, SGD."""
    config = _config()
    model, codec = _tiny(2)
    before = [p.detach().clone() for _, p in lm.trainable(model)]
    declared = SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(1.3)), 1)
    ledger = PrivacyLedger(declared, USER, 11)
    train(model, codec, TABLES, config, ledger, np.random.default_rng(5), SAMPLER)
    assert ledger.matches_exactly()

    replay = np.random.default_rng(11)
    idx = np.flatnonzero(replay.random(len(TABLES)) < 0.5).tolist()
    assert idx  # this seed samples a non-empty batch
    splits = draw_splits(TABLES, idx, SAMPLER, np.random.default_rng(5))
    fresh, _ = _tiny(2)
    grads = _naive_grads(fresh, build_examples(TABLES, idx, splits, codec, config), codec)
    norms = np.linalg.norm(grads, axis=1)
    assert np.all(norms > config.clip_norm)  # the clip is active
    clipped = grads * (config.clip_norm / norms)[:, None]
    noise = replay.normal(0.0, 1.3 * config.clip_norm, size=grads.shape[1])
    expected = -0.1 * (clipped.sum(axis=0) + noise) / 3.0
    delta = (
        torch.cat(
            [
                (p.detach() - b).reshape(-1)
                for (_, p), b in zip(lm.trainable(model), before, strict=True)
            ]
        )
        .double()
        .numpy()
    )
    np.testing.assert_allclose(delta, expected, rtol=1e-4, atol=1e-6)


def test_executed_events_equal_the_declaration_even_with_empty_samples() -> None:
    config = _config(steps=4, sampling_probability=0.05, optimizer="adam", schedule="cosine")
    model, codec = _tiny(2)
    declared = SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.3)), 4)
    ledger = PrivacyLedger(declared, USER, 0)
    train(model, codec, TABLES, config, ledger, np.random.default_rng(0), SAMPLER)
    ledger.verify()
    assert ledger.matches_exactly()
    sizes = [e["size"] for e in ledger.private_log if "size" in e]
    assert len(sizes) == 4 and 0 in sizes  # empty samples are kept, never re-drawn


def test_public_pretraining_lowers_the_loss() -> None:
    model, codec = _tiny(0)
    config = _config()
    batch = collate(build_examples(TABLES, range(6), [0] * 6, codec, config), codec.pad_id)
    with torch.no_grad():
        before = example_losses(model, batch).mean().item()
    pretrain_public(
        model,
        codec,
        TABLES,
        steps=15,
        batch_size=6,
        learning_rate=1e-2,
        max_tokens=128,
        p_start=1.0,
    )
    with torch.no_grad():
        after = example_losses(model, batch).mean().item()
    assert after < 0.8 * before

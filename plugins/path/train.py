"""User-level DP fine-tuning (DP-SGD) of the table language model.

Every step: (1) Poisson-sample users through the ledger (``ledger.poisson_sample``: each user in
independently with rate ``q``; an empty sample is kept); (2) build one windowed example per
sampled user (:mod:`~dpledger.plugins.path.windowing`); (3) per-example (= per-user) gradients
of the example's mean token loss with opacus ``GradSampleModule`` (hooks mode); (4) clip each to
L2 norm ``C`` (``ledger.clip_rows_l2``) and add ``N(0, (σC)^2)`` to their sum
(``ledger.gaussian``, sensitivity ``C`` under add/remove of one user); (5) divide by the public
expected batch size and take an optimiser step (post-processing). Executed event per step:
``PoissonSampled(q, Gaussian(σ))``.

Only the model leaves this module: no loss, batch size or other data-dependent value is returned.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import Ledger, one_of, positive_finite, positive_int, probability
from dpledger.plugins.path.model import Codec, quiet, trainable
from dpledger.plugins.path.schema import UserTables
from dpledger.plugins.path.windowing import Example, SplitSampler, collate, make_example

FloatArray = NDArray[np.float64]
SCHEDULES: tuple[str, ...] = ("cosine", "constant")
OPTIMIZERS: tuple[str, ...] = ("adam", "sgd")


@attrs.frozen
class TrainConfig:
    """DP-SGD hyper-parameters (all public). ``expected_batch_size`` is ``q * n`` for a public n."""

    steps: int = attrs.field(validator=positive_int)
    sampling_probability: float = attrs.field(validator=probability)
    noise_multiplier: float = attrs.field(validator=positive_finite)
    clip_norm: float = attrs.field(validator=positive_finite)
    expected_batch_size: float = attrs.field(validator=positive_finite)
    learning_rate: float = attrs.field(default=5e-4, validator=positive_finite)
    schedule: str = attrs.field(default="cosine", validator=one_of(*SCHEDULES))
    optimizer: str = attrs.field(default="adam", validator=one_of(*OPTIMIZERS))
    max_tokens: int = attrs.field(default=512, validator=positive_int)
    physical_batch: int = attrs.field(default=16, validator=positive_int)
    precision: int | None = 2
    progress: bool = False


def example_losses(model: Any, batch: dict[str, Any]) -> Any:
    """Mean next-token loss over each example's labelled tokens, shape ``[batch]``."""
    import torch

    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
    )
    logits = out.logits[:, :-1]
    target = batch["labels"][:, 1:]
    losses = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        target.reshape(-1),
        ignore_index=-100,
        reduction="none",
    ).view(target.shape)
    count = (target != -100).sum(dim=1).clamp(min=1)
    return losses.sum(dim=1) / count


@contextlib.contextmanager
def grad_sample_module(model: Any) -> Iterator[Any]:
    """``model`` wrapped for per-example gradients; the hooks are removed on exit."""
    from opacus import GradSampleModule

    with quiet():
        gsm = GradSampleModule(model, batch_first=True, loss_reduction="sum")
    try:
        yield gsm
    finally:
        gsm._close()


def per_example_grads(
    gsm: Any, examples: Sequence[Example], codec: Codec, physical_batch: int
) -> FloatArray:
    """Flattened per-example gradients of the trainable parameters, shape ``[B, P]`` (float64)."""
    import torch

    params = [p for _, p in trainable(gsm._module)]
    width = sum(p.numel() for p in params)
    out = np.zeros((len(examples), width), dtype=np.float64)
    gsm.train()
    for start in range(0, len(examples), physical_batch):
        chunk = examples[start : start + physical_batch]
        batch = collate(chunk, codec.pad_id)
        for p in params:
            p.grad = None
            p.grad_sample = None
        with quiet():
            example_losses(gsm, batch).sum().backward()
        cols = [p.grad_sample.reshape(len(chunk), -1) for p in params]
        out[start : start + len(chunk)] = torch.cat(cols, dim=1).detach().double().numpy()
    for p in params:
        p.grad = None
        p.grad_sample = None
    return out


class Updater:
    """Applies a noisy gradient sum: divide by the expected batch size, optimiser step."""

    def __init__(self, model: Any, config: TrainConfig) -> None:
        import torch

        self.params = [p for _, p in trainable(model)]
        self.config = config
        cls = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
        self.optimizer = cls(self.params, lr=config.learning_rate)
        self.t = 0

    def lr(self, t: int) -> float:
        c = self.config
        if c.schedule == "constant":
            return c.learning_rate
        return 0.5 * c.learning_rate * (1.0 + math.cos(math.pi * t / max(c.steps, 1)))

    def apply(self, noisy_sum: FloatArray) -> None:
        import torch

        g = torch.from_numpy(np.asarray(noisy_sum) / self.config.expected_batch_size)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = g[offset : offset + n].view_as(p).to(p.dtype).clone()
            offset += n
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr(self.t)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.t += 1


def build_examples(
    tables: UserTables,
    indices: Sequence[int],
    splits: Sequence[int],
    codec: Codec,
    config: TrainConfig,
) -> list[Example]:
    return [
        make_example(
            tables.schema,
            tables.users[int(i)].rows,
            int(k),
            codec,
            max_tokens=config.max_tokens,
            precision=config.precision,
        )
        for i, k in zip(indices, splits, strict=True)
    ]


def draw_splits(
    tables: UserTables, indices: Sequence[int], sampler: SplitSampler, rng: np.random.Generator
) -> list[int]:
    return [sampler.sample(len(tables.users[int(i)].rows), rng) for i in indices]


def train(
    model: Any,
    codec: Codec,
    tables: UserTables,
    config: TrainConfig,
    ledger: Ledger,
    rng: np.random.Generator,
    sampler: SplitSampler,
) -> Any:
    """Run ``config.steps`` DP-SGD steps on ``model`` in place; returns the model."""
    from tqdm.auto import tqdm

    n = len(tables)
    updater = Updater(model, config)
    with grad_sample_module(model) as gsm:
        for t in tqdm(range(config.steps), desc="PATH DP fine-tuning", disable=not config.progress):
            with ledger.poisson_sample(
                n, config.sampling_probability, step=f"path.train.sample[{t}]"
            ) as batch:
                idx = batch.indices.tolist()
                splits = draw_splits(tables, idx, sampler, rng)
                examples = build_examples(tables, idx, splits, codec, config)
                grads = per_example_grads(gsm, examples, codec, config.physical_batch)
                clipped = ledger.clip_rows_l2(grads, config.clip_norm, step=f"path.train.clip[{t}]")
                noisy = ledger.gaussian(
                    clipped.sum(axis=0),
                    config.clip_norm,
                    config.noise_multiplier,
                    step=f"path.train.noise[{t}]",
                )
            updater.apply(np.asarray(noisy, dtype=np.float64))
    return model


def pretrain_public(
    model: Any,
    codec: Codec,
    public: UserTables,
    *,
    steps: int,
    batch_size: int = 8,
    learning_rate: float = 3e-3,
    max_tokens: int = 512,
    precision: int | None = 2,
    p_start: float = 0.2,
    seed: int = 0,
) -> Any:
    """Non-private fitting on *public* tables (no ledger): a stand-in for a pre-trained model.

    Never pass private data here. Used to give the untrained built-in model the table format
    before DP fine-tuning, as a pre-trained checkpoint would.
    """
    import torch

    rng = np.random.default_rng(seed)
    lengths = np.bincount(public.lengths)[1:].astype(float)
    sampler = SplitSampler(lengths / lengths.sum(), p_start)
    params = [p for _, p in trainable(model)]
    opt = torch.optim.Adam(params, lr=learning_rate)
    config = TrainConfig(
        steps=steps,
        sampling_probability=1.0,
        noise_multiplier=1.0,
        clip_norm=1.0,
        expected_batch_size=1.0,
        max_tokens=max_tokens,
        precision=precision,
    )
    model.train()
    for _ in range(steps):
        idx = rng.choice(len(public), size=min(batch_size, len(public)), replace=False).tolist()
        examples = build_examples(
            public, idx, draw_splits(public, idx, sampler, rng), codec, config
        )
        loss = example_losses(model, collate(examples, codec.pad_id)).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    opt.zero_grad(set_to_none=True)
    return model

"""Dynamic windowing: one (context, continuation) training example per user per step.

For a table of ``T`` rows a split point ``k`` in ``[0, T-1]`` is drawn afresh at every step: with
probability ``p_start`` ``k = 0`` (the first row from scratch); otherwise ``k`` follows the
"density-based" rule of paper C (Section 5): ``k`` is drawn from the pool of all historical
indices of the corpus, i.e. ``P(k) ∝ P(T' > k)`` for ``T'`` from the *public* length
distribution, restricted to ``k <= T - 1``. The context is the header and rows ``1..k``; the
model is trained on rows ``k+1..T`` followed by the end-of-table token (loss on those tokens
only). Each user yields exactly one example, so a user's whole table moves the clipped
gradient sum by at most the clip norm.

Over-long examples are cut to ``max_tokens``: oldest context rows are dropped first (the header
stays), then the continuation is truncated on the right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.path.model import Codec
from dpledger.plugins.path.schema import TableSchema
from dpledger.plugins.path.serialize import header, serialize_row

IGNORE = -100


def _pmf(value: Any) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "length_pmf", "is not numeric", "pass probabilities of lengths 1, 2, ..."
        ) from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidParameterError(
            "length_pmf",
            "must be a non-empty 1-D vector of non-negative probabilities",
            "pass P(T=1), P(T=2), ...",
        )
    if not math.isclose(float(arr.sum()), 1.0, rel_tol=1e-6, abs_tol=1e-9):
        raise InvalidParameterError(
            "length_pmf",
            f"sums to {arr.sum():.6g}, not 1",
            "normalise the public length distribution",
        )
    out: NDArray[np.float64] = arr / arr.sum()
    return out


@attrs.frozen(eq=False)
class SplitSampler:
    """Draws split points from the public length distribution ``length_pmf[t-1] = P(T = t)``."""

    length_pmf: NDArray[np.float64] = attrs.field(converter=_pmf)
    p_start: float = 0.1

    def __attrs_post_init__(self) -> None:
        p = self.p_start
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise InvalidParameterError(
                "p_start", f"must lie in [0, 1], got {p!r}", "pass e.g. 0.1"
            )

    def weights(self, length: int) -> NDArray[np.float64]:
        """``P(k)`` for ``k = 0..length-1`` (the split distribution of a table of ``length``)."""
        if isinstance(length, bool) or not isinstance(length, int | np.integer) or length < 1:
            raise InvalidParameterError(
                "length", f"must be an integer >= 1, got {length!r}", "tables have at least one row"
            )
        survival = 1.0 - np.concatenate([[0.0], np.cumsum(self.length_pmf)])  # P(T > k)
        pool = np.zeros(int(length))
        m = min(int(length), survival.size)
        pool[:m] = np.maximum(survival[:m], 0.0)
        if pool.sum() <= 0:  # the table is longer than any public length: uniform fallback
            pool[:] = 1.0
        w: NDArray[np.float64] = (1.0 - self.p_start) * pool / pool.sum()
        w[0] += self.p_start
        return w

    def sample(self, length: int, rng: np.random.Generator) -> int:
        return int(rng.choice(int(length), p=self.weights(length)))


@attrs.frozen
class Example:
    """Token ids and labels (``IGNORE`` on the context) of one training example."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]
    split: int


def make_example(
    schema: TableSchema,
    rows: Sequence[Sequence[Any]],
    split: int,
    codec: Codec,
    *,
    max_tokens: int,
    precision: int | None = None,
) -> Example:
    """The (context, continuation) example of ``rows`` at split point ``split``."""
    if not 0 <= split < len(rows):
        raise InvalidParameterError(
            "split", f"must lie in [0, {len(rows) - 1}], got {split}", "draw it with SplitSampler"
        )
    head = codec.encode(header(schema) + "\n")
    lines = [
        codec.encode(serialize_row(schema, r, i + 1, precision) + "\n") for i, r in enumerate(rows)
    ]
    context = lines[:split]
    target = [t for line in lines[split:] for t in line] + [codec.eos_id]
    first_target = len(lines[split])
    while context and len(head) + sum(map(len, context)) + first_target > max_tokens:
        context = context[1:]
    ctx = head + [t for line in context for t in line]
    if len(ctx) >= max_tokens:
        raise InvalidParameterError(
            "max_tokens",
            f"{max_tokens} cannot hold the header",
            "raise max_tokens (and the model's n_positions)",
        )
    target = target[: max_tokens - len(ctx)]
    ids = ctx + target
    labels = [IGNORE] * len(ctx) + target
    return Example(tuple(ids), tuple(labels), split)


def collate(examples: Sequence[Example], pad_id: int) -> dict[str, Any]:
    """Right-padded tensors: ``input_ids``, ``attention_mask``, ``labels``, ``position_ids``."""
    import torch

    width = max(len(e.input_ids) for e in examples)
    b = len(examples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    labels = torch.full((b, width), IGNORE, dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.long)
    for i, e in enumerate(examples):
        n = len(e.input_ids)
        ids[i, :n] = torch.tensor(e.input_ids)
        labels[i, :n] = torch.tensor(e.labels)
        mask[i, :n] = 1
    positions = torch.arange(width).repeat(b, 1)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "position_ids": positions}

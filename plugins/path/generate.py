"""Row-by-row generation of synthetic tables with validation by the parser.

All tables of a batch start from the same prompt (the schema header) and are sampled token by
token in lockstep with a key-value cache. Whenever a table completes a line, the line is parsed
(:class:`~dpledger.plugins.path.serialize.RowParser`: key-value, then CSV, then static infill);
the next row is therefore always conditioned on the schema and the previously *accepted* rows.
A table ends at the end-of-table token, at its first invalid row (that row is dropped), after
``max_rows`` rows, when a row exceeds ``max_row_tokens`` tokens, or when the context limit
``max_tokens`` is reached (a partial last row is dropped). Generation uses only the released
model, so it is post-processing and may over-generate freely.

``guided=True`` (byte-level tokenizer only) constrains sampling to the serialization grammar:
the row prefix, column names and separators are forced, a numeric value may only use
``-0123456789.`` and must be a number, a categorical value must spell a public category, and a
static value is copied from the table's first row. The model still chooses every value and
when the table ends (end-of-table token at a row start). Every row is then valid by
construction; the parser still checks it.
"""

from __future__ import annotations

import inspect
from collections import deque
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError, positive_finite, positive_int
from dpledger.plugins.path.model import Codec
from dpledger.plugins.path.schema import TableSchema, seconds_from
from dpledger.plugins.path.serialize import RowParser, header

Rows = list[tuple[Any, ...]]


@attrs.frozen
class GenerationConfig:
    """How many tables to sample and the limits of each (all public)."""

    n_tables: int = attrs.field(validator=positive_int)
    max_rows: int = attrs.field(default=32, validator=positive_int)
    max_tokens: int = attrs.field(default=1024, validator=positive_int)
    max_row_tokens: int = attrs.field(default=256, validator=positive_int)
    temperature: float = attrs.field(default=1.0, validator=positive_finite)
    batch_size: int = attrs.field(default=64, validator=positive_int)
    guided: bool = False
    max_value_chars: int = attrs.field(default=12, validator=positive_int)
    max_decimals: int | None = 2
    progress: bool = False


_DIGITS = frozenset(b"0123456789")
_STATIC_BYTES = frozenset(range(33, 127)) - {ord(",")}
_TIME_BYTES = _DIGITS | frozenset(b"-:T.")
_TIME_CHARS = 26  # 2024-03-01T08:30:00.000000


@attrs.define
class Guide:
    """The serialization grammar as a byte-level state machine (one per generated table).

    Forced bytes (row prefix, names, separators, known static values) take precedence; ``col``
    is the column whose value is being written, None at a row start.
    """

    schema: TableSchema
    eos: int
    max_chars: int = 12
    max_decimals: int | None = None
    row: int = 1
    col: int | None = None
    buf: bytearray = attrs.field(factory=bytearray)
    forced: deque[int] = attrs.field(factory=deque)
    static: dict[int, bytes] = attrs.field(factory=dict)

    def _sep(self, j: int) -> bytes:
        return b", " if j < len(self.schema.columns) - 1 else b"\n"

    def _open(self, j: int) -> None:
        """Force column ``j``'s name (and known static values after it), then expect a value."""
        d = len(self.schema.columns)
        while j < d:
            self.forced.extend(f"{self.schema.columns[j].name} is ".encode())
            if j not in self.static:
                self.col, self.buf = j, bytearray()
                return
            self.forced.extend(self.static[j] + self._sep(j))
            j += 1
        self.col, self.row = None, self.row + 1

    def _complete(self) -> bool:
        assert self.col is not None
        col, buf = self.schema.columns[self.col], bytes(self.buf)
        if col.kind == "numeric":
            return any(c in _DIGITS for c in buf) and not buf.endswith((b".", b"-"))
        if col.kind == "datetime":
            return seconds_from(buf.decode()) is not None and any(c not in _DIGITS for c in buf)
        if col.kind == "categorical":
            return buf in {c.encode() for c in col.categories}
        return bool(buf)

    def allowed(self) -> set[int]:
        """Token ids the grammar allows next."""
        if self.forced:
            return {self.forced[0]}
        if self.col is None:
            return {self.eos, ord("[")}
        col, buf = self.schema.columns[self.col], bytes(self.buf)
        out: set[int] = set()
        if col.kind == "categorical":
            out = {
                c.encode()[len(buf)]
                for c in col.categories
                if c.encode().startswith(buf) and len(c.encode()) > len(buf)
            }
        elif len(buf) < self.max_chars and col.kind == "numeric":
            decimals = len(buf) - buf.index(b".") - 1 if b"." in buf else -1
            out = (
                set(_DIGITS) if self.max_decimals is None or decimals < self.max_decimals else set()
            )
            if not buf:
                out.add(ord("-"))
            room = len(buf) < self.max_chars - 1  # a '.' needs a digit after it
            if room and b"." not in buf and any(c in _DIGITS for c in buf):
                out.add(ord("."))
        elif col.kind == "datetime":
            out = set(_TIME_BYTES) if len(buf) < _TIME_CHARS else set()
        elif len(buf) < self.max_chars:
            out = set(_STATIC_BYTES)
        if self._complete():
            out.add(self._sep(self.col)[0])
        return out

    def step(self, token: int) -> None:
        """Advance by one emitted token (which must be allowed)."""
        if self.forced:
            self.forced.popleft()
            return
        if self.col is None:
            if token == ord("["):
                self.forced.extend(f"Row {self.row}]: ".encode())
                self._open(0)
            return
        j = self.col
        sep = self._sep(j)
        if token == sep[0] and self._complete():
            if self.schema.columns[j].kind == "static":
                self.static[j] = bytes(self.buf)
            self.forced.extend(sep[1:])
            self._open(j + 1)
            return
        self.buf.append(token)


@attrs.define
class _Table:
    parser: RowParser
    pending: list[int] = attrs.field(factory=list)
    done: bool = False
    guide: Guide | None = None


def _advance(table: _Table, token: int, codec: Codec, config: GenerationConfig) -> None:
    """Feed one sampled token to one table."""
    if table.guide is not None:
        table.guide.step(token)
    if token == codec.eos_id:
        table.done = True
        return
    table.pending.append(token)
    if codec.byte_level:
        if token != 10:
            if len(table.pending) > config.max_row_tokens:
                table.done = True
            return
        text = codec.decode(table.pending)
    else:
        text = codec.decode(table.pending)
        if "\n" not in text:
            if len(table.pending) > config.max_row_tokens:
                table.done = True
            return
    line, _, rest = text.partition("\n")
    table.pending = codec.encode(rest) if rest else []
    if not table.parser.feed(line) or len(table.parser.rows) >= config.max_rows:
        table.done = True


def _grammar_mask(tables: list[_Table], vocab: int) -> Any:
    """0 on tokens the grammar allows, -inf elsewhere (finished tables: end-of-table only)."""
    import torch

    mask = torch.full((len(tables), vocab), float("-inf"), dtype=torch.float64)
    for j, t in enumerate(tables):
        assert t.guide is not None
        allowed = [t.guide.eos] if t.done else sorted(t.guide.allowed())
        mask[j, allowed] = 0.0
    return mask


def _static_cache(model: Any, max_tokens: int) -> Any:
    """A key-value cache preallocated to ``max_tokens`` positions (None: the model's default)."""
    if not hasattr(model, "config"):
        return None
    from transformers import StaticCache

    config = (
        model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    )
    return StaticCache(config=config, max_cache_len=max_tokens)


def _sample_batch(
    model: Any,
    codec: Codec,
    schema: TableSchema,
    first: int,
    size: int,
    config: GenerationConfig,
    generator: Any,
) -> list[Rows]:
    import torch

    prompt = codec.encode(header(schema) + "\n")
    if len(prompt) >= config.max_tokens:
        raise InvalidParameterError(
            "max_tokens",
            f"{config.max_tokens} cannot hold the header",
            "raise max_tokens (and the model's n_positions)",
        )
    tables = [
        _Table(
            RowParser(schema, fallback=f"synthetic-{first + j}"),
            guide=Guide(schema, codec.eos_id, config.max_value_chars, config.max_decimals)
            if config.guided
            else None,
        )
        for j in range(size)
    ]
    ids = torch.tensor([prompt] * size, dtype=torch.long)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        # a cache preallocated to max_tokens: the default dynamic cache concatenates at every
        # step, which costs time quadratic in the table length
        cache = _static_cache(model, config.max_tokens)
        cache_arg = _cache_argument(model)
        first_kw = {} if cache is None else {cache_arg: cache}
        out = model(input_ids=ids, attention_mask=mask, use_cache=True, **first_kw)
        length = len(prompt)
        while length < config.max_tokens:
            logits = out.logits[:, -1, :].double() / config.temperature
            if config.guided:
                logits = logits + _grammar_mask(tables, logits.shape[-1])
            probs = torch.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
            for j, tok in enumerate(nxt[:, 0].tolist()):
                if not tables[j].done:
                    _advance(tables[j], int(tok), codec, config)
            if all(t.done for t in tables):
                break
            length += 1
            mask = torch.ones((size, length), dtype=torch.long)
            out = model(
                input_ids=nxt,
                attention_mask=mask,
                use_cache=True,
                **{cache_arg: getattr(out, cache_arg)},
            )
    return [t.parser.rows for t in tables]


def _cache_argument(model: Any) -> str:
    """The name of the key/value cache in the model's forward call and output: ``cache`` in
    recent transformers releases, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wrapper
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def generate_tables(
    model: Any,
    codec: Codec,
    schema: TableSchema,
    config: GenerationConfig,
    rng: np.random.Generator,
) -> list[Rows]:
    """``config.n_tables`` generated tables (possibly empty row lists), in order."""
    import torch
    from tqdm.auto import tqdm

    if config.guided and not codec.byte_level:
        raise InvalidParameterError(
            "guided",
            "guided decoding needs the byte-level tokenizer",
            "set guided = false for this model",
        )
    generator = torch.Generator().manual_seed(int(rng.integers(0, 2**63 - 1)))
    was_training = model.training
    model.eval()
    tables: list[Rows] = []
    try:
        starts = range(0, config.n_tables, config.batch_size)
        for first in tqdm(starts, desc="PATH generation", disable=not config.progress):
            size = min(config.batch_size, config.n_tables - first)
            tables.extend(_sample_batch(model, codec, schema, first, size, config, generator))
    finally:
        model.train(was_training)
    return tables

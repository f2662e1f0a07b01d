"""Row-by-row generation: parser validation, stopping rules and the guided grammar."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path import model as lm
from dpledger.plugins.path.generate import GenerationConfig, Guide, generate_tables
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.path.serialize import header, serialize_table

torch = pytest.importorskip("torch")

SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("hr", "numeric"),
        Column("c", "categorical", categories=("lo", "low", "hi")),
    )
)
CODEC = lm.Codec(None, eos_id=256, pad_id=257, byte_level=True)
PROMPT = len((header(SCHEMA) + "\n").encode())


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class ScriptedLM(torch.nn.Module):
    """Puts (almost) all probability on the next byte of a fixed script per batch row."""

    def __init__(self, scripts: list[str]) -> None:
        super().__init__()
        self.scripts = [s.encode() for s in scripts]

    def forward(
        self,
        input_ids: Any,
        attention_mask: Any = None,
        past_key_values: Any = None,
        use_cache: bool = True,
    ) -> Any:
        start = past_key_values or 0
        b, width = input_ids.shape
        logits = torch.full((b, width, 258), -40.0)
        for pos in range(start, start + width):
            k = pos + 1 - PROMPT
            for j, script in enumerate(self.scripts):
                tok = script[k] if 0 <= k < len(script) else 256
                logits[j, pos - start, tok] = 40.0
        return SimpleNamespace(logits=logits, past_key_values=start + width)


ROW = "[Row {}]: id is u, hr is {}, c is lo\n"


def test_tables_stop_at_eos_invalid_rows_and_limits() -> None:
    scripts = [
        ROW.format(1, 80) + ROW.format(2, 81.5),  # then end-of-table
        ROW.format(1, 70) + "[Row 2]: id is u, hr is fast, c is lo\n" + ROW.format(3, 1),
        "[Row 1]: v, 60, hi\n[Row 2]: hr is 61, c is low\n",  # CSV, then static infill
        "".join(ROW.format(i, i) for i in range(1, 6)),  # more than max_rows
        "[Row 1]: id is u, hr is " + "9" * 80,  # a row too long
    ]
    config = GenerationConfig(
        n_tables=5, max_rows=3, max_tokens=400, max_row_tokens=60, batch_size=5
    )
    out = generate_tables(ScriptedLM(scripts), CODEC, SCHEMA, config, np.random.default_rng(0))
    assert out == [
        [("u", 80.0, "lo"), ("u", 81.5, "lo")],
        [("u", 70.0, "lo")],
        [("v", 60.0, "hi"), ("v", 61.0, "low")],
        [("u", 1.0, "lo"), ("u", 2.0, "lo"), ("u", 3.0, "lo")],
        [],
    ]


def test_context_limit_drops_the_partial_row() -> None:
    script = [ROW.format(1, 5) + ROW.format(2, 6)]
    limit = PROMPT + len(ROW.format(1, 5)) + 4
    out = generate_tables(
        ScriptedLM(script),
        CODEC,
        SCHEMA,
        GenerationConfig(n_tables=1, max_tokens=limit),
        np.random.default_rng(0),
    )
    assert out == [[("u", 5.0, "lo")]]


def _allowed(g: Guide) -> set[int]:
    return g.allowed()


def test_guide_accepts_serialized_tables_and_forces_structure() -> None:
    rows = [("ab", -12.5, "low"), ("ab", 3.0, "hi")]
    text = serialize_table(SCHEMA, rows).split("\n", 1)[1]
    g = Guide(SCHEMA, eos=256)
    assert _allowed(g) == {256, ord("[")}
    for byte in text.encode():
        assert byte in _allowed(g), (chr(byte), g)
        g.step(byte)
    assert _allowed(g) == {256, ord("[")} and g.row == 3
    # the static value of row 2 was forced from row 1
    g2 = Guide(SCHEMA, eos=256)
    for byte in b"[Row 1]: id is ab, hr is 1, c is hi\n[Row 2]: id is ":
        g2.step(byte)
    assert g2.forced and bytes(g2.forced).startswith(b"ab, hr is ")


def test_guide_value_grammar() -> None:
    g = Guide(SCHEMA, eos=256, max_chars=4, max_decimals=1)
    for byte in b"[Row 1]: id is x, hr is ":
        g.step(byte)
    digits = set(b"0123456789")
    assert _allowed(g) == digits | {ord("-")}
    g.step(ord("-"))
    assert _allowed(g) == digits
    g.step(ord("1"))
    assert _allowed(g) == digits | {ord("."), ord(",")}
    g.step(ord("."))
    assert _allowed(g) == digits  # a number may not end with '.'
    g.step(ord("5"))
    assert _allowed(g) == {ord(",")}  # max_decimals and max_chars reached
    for byte in b", c is ":
        g.step(byte)
    assert _allowed(g) == {ord("l"), ord("h")}
    g.step(ord("l"))
    g.step(ord("o"))
    assert _allowed(g) == {ord("w"), ord("\n")}  # 'lo' is complete, 'low' continues


def test_guided_sampling_from_the_untrained_model_gives_valid_tables() -> None:
    model = lm.default_model(n_layer=1, n_head=2, n_embd=16, n_positions=256, seed=0)
    config = GenerationConfig(
        n_tables=12, max_rows=3, max_tokens=160, guided=True, batch_size=12, max_decimals=2
    )
    out = generate_tables(model, CODEC, SCHEMA, config, np.random.default_rng(1))
    again = generate_tables(model, CODEC, SCHEMA, config, np.random.default_rng(1))
    assert out == again
    full = [t for t in out if t]
    assert len(full) >= 3 and all(len(t) <= 3 for t in out)
    # every table is a valid user table (static id constant, categories public)
    UserTables(SCHEMA, tuple(UserTable(str(i), t) for i, t in enumerate(full)))
    for t in full:
        for r in t:
            assert round(r[1], 2) == r[1]


def test_guided_needs_the_byte_tokenizer() -> None:
    codec = lm.Codec(None, eos_id=0, pad_id=0, byte_level=False)
    with pytest.raises(InvalidParameterError, match="guided"):
        generate_tables(
            ScriptedLM([""]),
            codec,
            SCHEMA,
            GenerationConfig(n_tables=1, guided=True),
            np.random.default_rng(0),
        )

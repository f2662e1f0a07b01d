"""Byte tokenizer, built-in model, local loading and LoRA."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path import model as lm

torch = pytest.importorskip("torch")


def test_byte_tokenizer_is_the_identity_on_bytes() -> None:
    tok = lm.byte_tokenizer()
    assert len(tok) == lm.BYTE_VOCAB_SIZE == 258
    text = "[Row 1]: hr is 83.0, état is élevé ✓\n"
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text
    assert tok.eos_token_id == 256 and tok.pad_token_id == 257
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_default_model_shape_and_no_dropout() -> None:
    model = lm.default_model(n_layer=1, n_head=2, n_embd=16, n_positions=64, seed=3)
    assert model.config.vocab_size == 258 and model.config.n_positions == 64
    assert all(getattr(model.config, k) == 0.0 for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"))
    again = lm.default_model(n_layer=1, n_head=2, n_embd=16, n_positions=64, seed=3)
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(InvalidParameterError, match="n_embd"):
        lm.default_model(n_head=3, n_embd=16)


def test_save_and_load_a_local_directory(tmp_path: Path) -> None:
    model, codec = lm.load(
        None, seed=1, default_kwargs={"n_layer": 1, "n_embd": 16, "n_positions": 64}
    )
    lm.save(model, codec, tmp_path / "m")
    loaded, codec2 = lm.load(tmp_path / "m")
    assert codec2.byte_level and codec2.eos_id == 256 and codec2.pad_id == 257
    ids = torch.tensor([codec.encode("Columns: a\n")])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, loaded(input_ids=ids).logits)
    with pytest.raises(InvalidParameterError, match="model_dir"):
        lm.load(tmp_path / "missing")


def test_lora_trains_only_the_adapter() -> None:
    base = lm.default_model(n_layer=2, n_head=2, n_embd=64, n_positions=64)
    wrapped = lm.with_lora(base, 4)
    names = [n for n, _ in lm.trainable(wrapped)]
    assert names and all("lora_" in n for n in names)
    # per layer: r * (in + out) for c_attn 64->192, attn c_proj 64->64, c_fc 64->256,
    # mlp c_proj 256->64
    assert sum(p.numel() for _, p in lm.trainable(wrapped)) == 2 * 4 * (256 + 128 + 320 + 320)
    full = lm.with_lora(lm.default_model(n_layer=1, n_embd=16, n_positions=64), 0)
    assert sum(p.numel() for _, p in lm.trainable(full)) == sum(
        p.numel() for p in full.parameters()
    )
    with pytest.raises(InvalidParameterError, match="lora_rank"):
        lm.with_lora(base, -1)

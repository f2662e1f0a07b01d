"""Language model and tokenizer for PATH: a local ``transformers`` model, optionally with LoRA.

Two sources, both offline (``HF_HUB_OFFLINE=1`` is set before anything is loaded):

* any local model directory (``from_pretrained(local_dir, local_files_only=True)``), with its own
  tokenizer;
* the built-in default: a small GPT-2 built from a :class:`~transformers.GPT2Config` with random
  weights and a fixed byte-level tokenizer of 258 tokens (256 bytes, end-of-table, padding).
  The tokenizer is a fixed table, never trained on (private) data.

``lora_rank > 0`` wraps the model in a peft LoRA adapter (only the adapter is trained);
``lora_rank == 0`` trains every weight (sensible for the untrained built-in model).
Dropout is switched off: per-example gradients are taken in train mode.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger.plugin import InvalidParameterError

BYTE_VOCAB_SIZE = 258
EOS_TOKEN = "<|endoftable|>"
PAD_TOKEN = "<|pad|>"
#: LoRA targets of GPT-2 (its projections are ``Conv1D`` with transposed weights)
GPT2_LORA_TARGETS: tuple[str, ...] = ("c_attn", "c_proj", "c_fc")


def offline() -> None:
    """Forbid any hub access in this process (set before transformers loads anything)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence known harmless warnings (opacus hooks on frozen inputs, a peft deprecation)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Full backward hook is firing", category=UserWarning
        )
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
        )
        yield


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of the 256 byte values onto printable characters."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


@attrs.frozen
class Codec:
    """Text <-> token ids for training and generation."""

    tokenizer: Any = attrs.field(eq=False)
    eos_id: int
    pad_id: int
    byte_level: bool = False

    def encode(self, text: str) -> list[int]:
        if self.byte_level:
            return list(text.encode("utf-8"))
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        if self.byte_level:
            return bytes(int(i) for i in ids if int(i) < 256).decode("utf-8", errors="replace")
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def byte_tokenizer() -> Any:
    """The fixed 258-token byte-level tokenizer (ids 0-255 are the byte values)."""
    offline()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    vocab[EOS_TOKEN] = 256
    vocab[PAD_TOKEN] = 257
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS_TOKEN, PAD_TOKEN])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN)


def default_model(
    *, n_layer: int = 2, n_head: int = 2, n_embd: int = 64, n_positions: int = 1024, seed: int = 0
) -> Any:
    """The built-in small GPT-2 (random weights from ``seed``, byte vocabulary, no dropout)."""
    offline()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    for name, v in (
        ("n_layer", n_layer),
        ("n_head", n_head),
        ("n_embd", n_embd),
        ("n_positions", n_positions),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidParameterError(name, f"must be an integer >= 1, got {v!r}", "pass e.g. 2")
    if n_embd % n_head:
        raise InvalidParameterError(
            "n_embd",
            f"{n_embd} is not divisible by n_head={n_head}",
            "use n_embd a multiple of n_head",
        )
    config = GPT2Config(
        vocab_size=BYTE_VOCAB_SIZE,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=256,
        eos_token_id=256,
        pad_token_id=257,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    return model


def _no_dropout(model: Any) -> None:
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def load(
    model_dir: str | Path | None = None,
    *,
    seed: int = 0,
    default_kwargs: dict[str, int] | None = None,
) -> tuple[Any, Codec]:
    """(model, codec): a local model directory, or the built-in default when ``None``."""
    offline()
    if model_dir is None:
        tok = byte_tokenizer()
        return default_model(seed=seed, **(default_kwargs or {})), Codec(tok, 256, 257, True)
    path = Path(model_dir)
    if not path.is_dir():
        raise InvalidParameterError(
            "model_dir",
            f"{model_dir} is not a directory",
            "pass a local model directory (config.json, weights, "
            "tokenizer files) or leave it unset for the built-in model",
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    _no_dropout(model)
    eos = tok.eos_token_id
    if eos is None:
        raise InvalidParameterError(
            "model_dir",
            "the tokenizer has no end-of-sequence token",
            "use a tokenizer with eos_token set",
        )
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    probe = "[Row 1]: é\n"
    byte_level = (
        len(tok) == BYTE_VOCAB_SIZE
        and eos == 256
        and list(tok.encode(probe, add_special_tokens=False)) == list(probe.encode())
    )
    return model, Codec(tok, int(eos), int(pad), byte_level)


def save(model: Any, codec: Codec, out_dir: str | Path) -> Path:
    """Write the model (adapter merged) and tokenizer so that :func:`load` can read them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(out)
    codec.tokenizer.save_pretrained(out)
    return out


def lora_targets(model: Any) -> list[str] | str:
    """Module names to adapt: GPT-2's projections, or every linear layer of other models."""
    if getattr(model.config, "model_type", "") == "gpt2":
        return list(GPT2_LORA_TARGETS)
    return "all-linear"


def with_lora(model: Any, rank: int, alpha: float | None = None, *, seed: int = 0) -> Any:
    """Wrap ``model`` in a LoRA adapter of ``rank`` (0: return it with every weight trainable).

    The adapter's random initialisation is drawn from ``seed`` (reproducible runs).
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise InvalidParameterError(
            "lora_rank",
            f"must be an integer >= 0, got {rank!r}",
            "pass e.g. 8 (0 trains every weight)",
        )
    if rank == 0:
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    import torch
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha if alpha is not None else 2 * rank,
        lora_dropout=0.0,
        target_modules=lora_targets(model),
        fan_in_fan_out=getattr(model.config, "model_type", "") == "gpt2",
        bias="none",
        task_type="CAUSAL_LM",
    )
    with quiet(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(model, config)


def trainable(model: Any) -> list[tuple[str, Any]]:
    """(name, parameter) of the trainable parameters, in a fixed order."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]

"""Decoder families: Llama, Qwen2, Mistral.

Their sequence classifiers share one shape (`GenericForSequenceClassification`): token
embeddings, a layer list with rotary position embeddings, a final norm and a linear `score` read
at each row's last non-pad token. What differs is which attention each layer uses (full or
sliding-window causal) and the tiny configs. To add a decoder family, add its `Family` to
`FAMILIES` below; `tests/test_families.py` then checks it.
"""

from __future__ import annotations

import torch
from torch import nn

from scorekeeper.worker.families.base import Chain, Family, Tiny, TinyTokens

BPE_INPUTS = ("input_ids", "attention_mask")  # decoders take no token type ids


class DecoderHead(nn.Module):
    """GenericForSequenceClassification: final norm, then the score of each row's last non-pad token."""

    def __init__(self, norm: nn.Module, score: nn.Module):
        super().__init__()
        self.norm, self.score = norm, score

    def forward(self, hidden: torch.Tensor, last_token: torch.Tensor) -> torch.Tensor:
        hidden = self.norm(hidden)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        # score is a linear map per position: scoring the picked position equals picking the scored one.
        return self.score(hidden[rows, last_token])


def _layer_types(config) -> list[str]:
    """Llama, Qwen2: the config's `layer_types` when it has them, else full attention everywhere."""
    return list(getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers)


def _mistral_layer_types(config) -> list[str]:
    """Mistral: every layer slides when the config has a window (MistralModel's own choice)."""
    kind = "full_attention" if getattr(config, "sliding_window", None) is None else "sliding_attention"
    return [kind] * config.num_hidden_layers


def _take_apart(layer_types):
    def take_apart(model: nn.Module) -> Chain:
        config = model.config
        inner = model.model
        embed_tokens = inner.embed_tokens
        return Chain(
            config,
            lambda ids, _types: embed_tokens(ids),
            embed_tokens,
            list(inner.layers[: config.num_hidden_layers]),
            DecoderHead(inner.norm, model.score),
            decoder=True,
            rotary=inner.rotary_emb,
            layer_types=layer_types(config),
        )

    return take_apart


def _tiny(model_type: str, **extra):
    def config(tokens: TinyTokens, *, num_layers=None, hidden_size=None, max_position_embeddings=128, dropout=0.1) -> dict:
        width = hidden_size or 32
        return dict(
            model_type=model_type,
            vocab_size=tokens.vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=num_layers or 2,
            num_attention_heads=4,
            num_key_value_heads=2,  # grouped-query attention, as in the real families
            max_position_embeddings=max_position_embeddings,
            bos_token_id=tokens.bos,
            eos_token_id=tokens.eos,
            pad_token_id=None,  # deliberately unset: real Llama checkpoints lack it
            tie_word_embeddings=False,
            use_cache=False,
            **extra,
        )

    return config


LLAMA = Family(
    name="Llama",
    kind="decoder",
    model_types=("llama",),
    take_apart=_take_apart(_layer_types),
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("llama", _tiny("llama"), "bpe", BPE_INPUTS),),
)

QWEN2 = Family(
    name="Qwen2",
    kind="decoder",
    model_types=("qwen2",),
    take_apart=_take_apart(_layer_types),
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("qwen2", _tiny("qwen2", use_sliding_window=False), "bpe", BPE_INPUTS),),
)

MISTRAL = Family(
    name="Mistral",
    kind="decoder",
    model_types=("mistral",),
    take_apart=_take_apart(_mistral_layer_types),
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("mistral", _tiny("mistral", sliding_window=None), "bpe", BPE_INPUTS),),
)

FAMILIES = (LLAMA, QWEN2, MISTRAL)

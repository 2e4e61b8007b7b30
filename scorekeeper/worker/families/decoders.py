"""Decoder families: Llama, Qwen2, Mistral.

Their sequence classifiers share one shape (`GenericForSequenceClassification`): token
embeddings, a layer list with rotary position embeddings, a final norm and a linear `score` read
at each row's last non-pad token. What differs is which attention each layer uses (full or
sliding-window causal) and the tiny configs. Their torch side (the head after the last layer,
taking the classifier apart for pipeline mode) is in `decoder_parts.py`. To add a decoder family,
add its `Family` to `FAMILIES` below and its `Parts` there; `tests/test_families.py` then checks
it. This module imports no torch.
"""

from __future__ import annotations

from scorekeeper.worker.families.base import Family, Tiny, TinyTokens

BPE_INPUTS = ("input_ids", "attention_mask")  # decoders take no token type ids
PARTS = "scorekeeper.worker.families.decoder_parts"
HEAD = ("score.weight",)  # GenericForSequenceClassification's score, a linear map without bias


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
    parts=f"{PARTS}:LLAMA",
    head_weights=HEAD,
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("llama", _tiny("llama"), "bpe", BPE_INPUTS),),
)

QWEN2 = Family(
    name="Qwen2",
    kind="decoder",
    model_types=("qwen2",),
    parts=f"{PARTS}:QWEN2",
    head_weights=HEAD,
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("qwen2", _tiny("qwen2", use_sliding_window=False), "bpe", BPE_INPUTS),),
)

MISTRAL = Family(
    name="Mistral",
    kind="decoder",
    model_types=("mistral",),
    parts=f"{PARTS}:MISTRAL",
    head_weights=HEAD,
    lora_targets=("q_proj", "v_proj"),
    tiny=(Tiny("mistral", _tiny("mistral", sliding_window=None), "bpe", BPE_INPUTS),),
)

FAMILIES = (LLAMA, QWEN2, MISTRAL)

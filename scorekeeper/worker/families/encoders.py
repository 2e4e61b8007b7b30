"""Encoder families: BERT (and MiniLM, a BERT), RoBERTa (and XLM-R, CamemBERT), DistilBERT.

Each family says where its positions start, which tensors are its classification head, and the
tiny configs tests and the demo build; how its sequence classifier comes apart for pipeline mode
and the position-0 form of its last layer are its torch side, in `encoder_parts.py`. To add an
encoder family, add its `Family` to `FAMILIES` below and its `Parts` there;
`tests/test_families.py` then checks it. This module imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable

from scorekeeper.worker.families.base import Family, Tiny, TinyTokens

PARTS = "scorekeeper.worker.families.encoder_parts"


def _positions_before_pad(pad_token_id: int | None) -> int:
    """RoBERTa numbers positions from padding_idx + 1: that many position embeddings are never a row's."""
    return 0 if pad_token_id is None else pad_token_id + 1


def _roberta_position_offset(config) -> int:
    return _positions_before_pad(getattr(config, "pad_token_id", None))


# -- tiny instances --------------------------------------------------------------------------


def _tiny_bert(model_type: str, *, hidden: int, layers: int, heads: int, inter: int) -> Callable[..., dict]:
    def config(tokens: TinyTokens, *, num_layers=None, hidden_size=None, max_position_embeddings=128, dropout=0.1) -> dict:
        width = hidden_size or hidden
        values = dict(
            model_type=model_type,
            vocab_size=tokens.vocab_size,
            hidden_size=width,
            num_hidden_layers=num_layers or layers,
            num_attention_heads=heads,
            intermediate_size=max(inter, 2 * width),
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
            pad_token_id=tokens.pad,
        )
        if model_type == "bert":
            return dict(values, max_position_embeddings=max_position_embeddings, type_vocab_size=2)
        # RoBERTa's positions start after the pad id: real checkpoints have 514 for 512 tokens.
        return dict(
            values,
            max_position_embeddings=max_position_embeddings + _positions_before_pad(tokens.pad),
            type_vocab_size=1,  # a single token type
            bos_token_id=tokens.bos,
            eos_token_id=tokens.eos,
        )

    return config


def _tiny_distilbert(tokens: TinyTokens, *, num_layers=None, hidden_size=None, max_position_embeddings=128, dropout=0.1) -> dict:
    width = hidden_size or 32
    return dict(
        model_type="distilbert",
        vocab_size=tokens.vocab_size,
        dim=width,
        n_layers=num_layers or 3,
        n_heads=4,
        hidden_dim=max(64, 2 * width),
        max_position_embeddings=max_position_embeddings,
        dropout=dropout,
        attention_dropout=dropout,
        seq_classif_dropout=dropout,
        pad_token_id=tokens.pad,
    )


WITH_TYPES = ("input_ids", "token_type_ids", "attention_mask")
WITHOUT_TYPES = ("input_ids", "attention_mask")

BERT = Family(
    name="BERT",
    note="MiniLM-like too",
    kind="encoder",
    model_types=("bert",),
    parts=f"{PARTS}:BERT",
    head_weights=("classifier.weight", "classifier.bias"),
    lora_targets=("query", "value"),
    tiny=(
        Tiny("bert", _tiny_bert("bert", hidden=32, layers=2, heads=2, inter=64), "wordpiece", WITH_TYPES),
        # all-MiniLM-L6-v2 is a 6-layer BERT with hidden 384, 12 heads, intermediate 1536;
        # this is the same shape at 1/12 the width.
        Tiny("minilm", _tiny_bert("bert", hidden=32, layers=6, heads=4, inter=128), "wordpiece", WITH_TYPES),
    ),
)

ROBERTA = Family(
    name="RoBERTa",
    note="XLM-R and CamemBERT too",
    kind="encoder",
    model_types=("roberta", "xlm-roberta", "camembert"),
    parts=f"{PARTS}:ROBERTA",
    head_weights=("classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight", "classifier.out_proj.bias"),
    position_offset=_roberta_position_offset,
    lora_targets=("query", "value"),
    tiny=(Tiny("roberta", _tiny_bert("roberta", hidden=32, layers=2, heads=4, inter=64), "wordpiece", WITHOUT_TYPES),),
)

DISTILBERT = Family(
    name="DistilBERT",
    kind="encoder",
    model_types=("distilbert",),
    parts=f"{PARTS}:DISTILBERT",
    head_weights=("pre_classifier.weight", "pre_classifier.bias", "classifier.weight", "classifier.bias"),
    lora_targets=("q_lin", "v_lin"),
    tiny=(Tiny("distilbert", _tiny_distilbert, "wordpiece", WITHOUT_TYPES),),
)

FAMILIES = (BERT, ROBERTA, DISTILBERT)

"""Encoder families: BERT (and MiniLM, a BERT), RoBERTa (and XLM-R, CamemBERT), DistilBERT.

Each family says how its sequence classifier comes apart for pipeline mode (embeddings, the
layer list, the head after the last layer), where its positions start, the position-0 form of
its last layer, and the tiny configs tests and the demo build. To add an encoder family, add its
`Family` to `FAMILIES` below; `tests/test_families.py` then checks it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from scorekeeper.errors import ModelError
from scorekeeper.worker.families.attention import attend_first, split_heads
from scorekeeper.worker.families.base import Chain, Family, FirstToken, Tiny, TinyTokens

# -- heads: what the *ForSequenceClassification model does after the last layer ----------------


class BertHead(nn.Module):
    """BertForSequenceClassification: pooler (dense + tanh on [CLS]) -> dropout -> classifier."""

    def __init__(self, pooler: nn.Module, dropout: nn.Module, classifier: nn.Module):
        super().__init__()
        if pooler is None:
            raise ModelError("this BERT classifier has no pooler; pipeline mode needs the pooled [CLS] output")
        self.pooler, self.dropout, self.classifier = pooler, dropout, classifier

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.pooler(hidden)))


class RobertaHead(nn.Module):
    """RobertaForSequenceClassification: the classification head reads <s> itself."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.classifier = classifier

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(hidden)


class DistilBertHead(nn.Module):
    """DistilBertForSequenceClassification: [CLS] -> pre_classifier -> ReLU -> dropout -> classifier."""

    def __init__(self, pre_classifier: nn.Module, dropout: nn.Module, classifier: nn.Module):
        super().__init__()
        self.pre_classifier, self.dropout, self.classifier = pre_classifier, dropout, classifier

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(torch.relu(self.pre_classifier(hidden[:, 0]))))


# -- last layers for position 0 only (see first_token.py) --------------------------------------


class FirstTokenLayer(nn.Module):
    """A BERT-style layer (BertLayer, RobertaLayer) that returns position 0 only: (batch, 1, hidden)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        attention = self.layer.attention.self
        first, size = hidden_states[:, :1], attention.attention_head_size
        context = attend_first(
            attention, split_heads(attention.query, first, size), split_heads(attention.key, hidden_states, size),
            split_heads(attention.value, hidden_states, size), attention_mask,
        )  # fmt: skip
        return self.layer.feed_forward_chunk(self.layer.attention.output(context, first))


class FirstTokenDistilBertLayer(nn.Module):
    """DistilBERT's TransformerBlock, returning position 0 only: (batch, 1, dim)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        block = self.layer
        attention = block.attention
        first, size = hidden_states[:, :1], attention.attention_head_size
        context = attend_first(
            attention, split_heads(attention.q_lin, first, size), split_heads(attention.k_lin, hidden_states, size),
            split_heads(attention.v_lin, hidden_states, size), attention_mask,
        )  # fmt: skip
        attended = block.sa_layer_norm(attention.out_lin(context) + first)
        return block.output_layer_norm(block.ffn(attended) + attended)


def _bert_layer_first_token(classifiers: tuple[str, ...], base: str) -> FirstToken:
    """BertLayer-shaped stacks (attention.self.query/key/value, attention.output, feed_forward_chunk)."""
    return FirstToken(
        classifiers=classifiers,
        base=base,
        stack="encoder",
        replacement=FirstTokenLayer,
        attention=lambda layer: getattr(getattr(layer, "attention", None), "self", None),
        projections=("query", "key", "value"),
        fits=lambda layer: hasattr(layer.attention, "output") and hasattr(layer, "feed_forward_chunk"),
    )


# -- taking the classifiers apart --------------------------------------------------------------


def _bert_embed(embeddings: nn.Module) -> Callable:
    return lambda ids, types: embeddings(input_ids=ids, token_type_ids=types)


def _take_apart_bert(model: nn.Module) -> Chain:
    embeddings = model.bert.embeddings
    head = BertHead(model.bert.pooler, model.dropout, model.classifier)
    return Chain(model.config, _bert_embed(embeddings), embeddings, list(model.bert.encoder.layer), head)


def _take_apart_roberta(model: nn.Module) -> Chain:
    embeddings = model.roberta.embeddings
    return Chain(model.config, _bert_embed(embeddings), embeddings, list(model.roberta.encoder.layer), RobertaHead(model.classifier))


def _take_apart_distilbert(model: nn.Module) -> Chain:
    embeddings = model.distilbert.embeddings
    head = DistilBertHead(model.pre_classifier, model.dropout, model.classifier)
    return Chain(model.config, lambda ids, _types: embeddings(ids), embeddings, list(model.distilbert.transformer.layer), head)


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
    take_apart=_take_apart_bert,
    first_token=_bert_layer_first_token(("BertForSequenceClassification",), base="bert"),
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
    take_apart=_take_apart_roberta,
    position_offset=_roberta_position_offset,
    first_token=_bert_layer_first_token(
        ("RobertaForSequenceClassification", "XLMRobertaForSequenceClassification", "CamembertForSequenceClassification"),
        base="roberta",
    ),
    lora_targets=("query", "value"),
    tiny=(Tiny("roberta", _tiny_bert("roberta", hidden=32, layers=2, heads=4, inter=64), "wordpiece", WITHOUT_TYPES),),
)

DISTILBERT = Family(
    name="DistilBERT",
    kind="encoder",
    model_types=("distilbert",),
    take_apart=_take_apart_distilbert,
    first_token=FirstToken(
        classifiers=("DistilBertForSequenceClassification",),
        base="distilbert",
        stack="transformer",
        replacement=FirstTokenDistilBertLayer,
        attention=lambda layer: getattr(layer, "attention", None),
        projections=("q_lin", "k_lin", "v_lin", "out_lin"),
        fits=lambda layer: all(hasattr(layer, a) for a in ("sa_layer_norm", "ffn", "output_layer_norm")),
    ),
    lora_targets=("q_lin", "v_lin"),
    tiny=(Tiny("distilbert", _tiny_distilbert, "wordpiece", WITHOUT_TYPES),),
)

FAMILIES = (BERT, ROBERTA, DISTILBERT)

"""The torch side of the encoder families (`encoders.py` declares them): how each sequence
classifier comes apart for pipeline mode, and the position-0 form of its last layer.

Imported by name (`Family.parts`) the first time a scoring process needs it: the flow reads the
registry without torch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from scorekeeper.errors import ModelError
from scorekeeper.worker.families.attention import attend_first, split_heads
from scorekeeper.worker.families.base import Chain, FirstToken, HFModule, Parts

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
        self.layer: HFModule = layer

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
        self.layer: HFModule = layer

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


def _bert_embed(embeddings: HFModule) -> Callable:
    return lambda ids, types: embeddings(input_ids=ids, token_type_ids=types)


def _take_apart_bert(model: HFModule) -> Chain:
    embeddings = model.bert.embeddings
    head = BertHead(model.bert.pooler, model.dropout, model.classifier)
    return Chain(model.config, _bert_embed(embeddings), embeddings, list(model.bert.encoder.layer), head)


def _take_apart_roberta(model: HFModule) -> Chain:
    embeddings = model.roberta.embeddings
    return Chain(model.config, _bert_embed(embeddings), embeddings, list(model.roberta.encoder.layer), RobertaHead(model.classifier))


def _take_apart_distilbert(model: HFModule) -> Chain:
    embeddings = model.distilbert.embeddings
    head = DistilBertHead(model.pre_classifier, model.dropout, model.classifier)
    return Chain(model.config, lambda ids, _types: embeddings(ids), embeddings, list(model.distilbert.transformer.layer), head)


# -- what each family's declaration names (`Family.parts`) --------------------------------------

BERT = Parts(_take_apart_bert, _bert_layer_first_token(("BertForSequenceClassification",), base="bert"))
ROBERTA = Parts(
    _take_apart_roberta,
    _bert_layer_first_token(
        ("RobertaForSequenceClassification", "XLMRobertaForSequenceClassification", "CamembertForSequenceClassification"),
        base="roberta",
    ),
)
DISTILBERT = Parts(
    _take_apart_distilbert,
    FirstToken(
        classifiers=("DistilBertForSequenceClassification",),
        base="distilbert",
        stack="transformer",
        replacement=FirstTokenDistilBertLayer,
        attention=lambda layer: getattr(layer, "attention", None),
        projections=("q_lin", "k_lin", "v_lin", "out_lin"),
        fits=lambda layer: all(hasattr(layer, a) for a in ("sa_layer_norm", "ffn", "output_layer_norm")),
    ),
)

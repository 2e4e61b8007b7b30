"""The last encoder layer, computed for the one position the classifier reads.

BERT-, RoBERTa- and DistilBERT-style sequence classifiers read only position 0 ([CLS] / <s>)
of the last layer's output (`BertPooler`, `RobertaClassificationHead`, DistilBERT's
`pre_classifier` on `hidden_state[:, 0]`). The last layer's keys and values
need every position, but its query, attention output, residual, LayerNorm and feed-forward
block are needed for position 0 alone: the same function of the same inputs, for one row of
each sequence instead of all of them. On a 4-layer 256-wide BERT that is about a fifth of the
model's work (bench/README.md); on BERT-base about 6%.

Applied only where every piece is known: the classifier classes below, over BertLayer-shaped
layers (attention.self.query/key/value, attention.output, feed_forward_chunk) or DistilBERT's
TransformerBlock, as encoders without cross-attention, on transformers 5.x. Anything else keeps
its whole last layer.
"""

from __future__ import annotations

import logging
import sys

import torch
from torch import nn

log = logging.getLogger(__name__)

# Classifiers whose head reads position 0 of the last hidden state and nothing else:
# class name -> (attribute of the base model, attribute of its layer stack).
FIRST_TOKEN_CLASSIFIERS = {
    "BertForSequenceClassification": ("bert", "encoder"),
    "RobertaForSequenceClassification": ("roberta", "encoder"),
    "XLMRobertaForSequenceClassification": ("roberta", "encoder"),
    "CamembertForSequenceClassification": ("roberta", "encoder"),
    "DistilBertForSequenceClassification": ("distilbert", "transformer"),
}


def _attend(attention: nn.Module, query, key, value, attention_mask) -> torch.Tensor:
    """Position 0's attention over every position, through the attention function the model's
    own layer would call (its module's eager one by default); (batch, 1, hidden)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[2] > 1:
        attention_mask = attention_mask[:, :, :1, :]  # the query row of position 0
    eager = sys.modules[type(attention).__module__].eager_attention_forward
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager)
    context, _ = attend(attention, query, key, value, attention_mask, dropout=0.0, scaling=attention.scaling)
    return context.reshape(query.shape[0], 1, -1).contiguous()


def _heads(linear: nn.Module, x: torch.Tensor, head_size: int) -> torch.Tensor:
    return linear(x).view(x.shape[0], x.shape[1], -1, head_size).transpose(1, 2)


class FirstTokenLayer(nn.Module):
    """A BERT-style layer (BertLayer, RobertaLayer) that returns position 0 only: (batch, 1, hidden)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        attention = self.layer.attention.self
        first, size = hidden_states[:, :1], attention.attention_head_size
        context = _attend(
            attention, _heads(attention.query, first, size), _heads(attention.key, hidden_states, size),
            _heads(attention.value, hidden_states, size), attention_mask,
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
        context = _attend(
            attention, _heads(attention.q_lin, first, size), _heads(attention.k_lin, hidden_states, size),
            _heads(attention.v_lin, hidden_states, size), attention_mask,
        )  # fmt: skip
        attended = block.sa_layer_norm(attention.out_lin(context) + first)
        return block.output_layer_norm(block.ffn(attended) + attended)


_SHAPES = {
    # the layer's form -> (its self-attention, the attributes both need, the replacement)
    "encoder": (
        lambda layer: getattr(getattr(layer, "attention", None), "self", None),
        ("query", "key", "value"),
        lambda layer: hasattr(layer.attention, "output") and hasattr(layer, "feed_forward_chunk"),
        FirstTokenLayer,
    ),
    "transformer": (
        lambda layer: getattr(layer, "attention", None),
        ("q_lin", "k_lin", "v_lin", "out_lin"),
        lambda layer: all(hasattr(layer, a) for a in ("sa_layer_norm", "ffn", "output_layer_norm")),
        FirstTokenDistilBertLayer,
    ),
}


def first_token_last_layer(model: nn.Module) -> bool:
    """Swap the classifier's last layer for its position-0-only form where that is exact.
    Returns whether it did (the model is changed in place)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        return False  # before 5.x layers returned tuples and attention had another interface
    base = model.get_base_model() if hasattr(model, "peft_config") and hasattr(model, "get_base_model") else model
    known = FIRST_TOKEN_CLASSIFIERS.get(type(base).__name__)
    config = base.config
    if known is None or getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False  # relative position scores would need every query position's distances
    family, stack = known
    layers = getattr(getattr(getattr(base, family, None), stack, None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or not len(layers) or isinstance(layers[-1], (FirstTokenLayer, FirstTokenDistilBertLayer)):
        return False
    last = layers[-1]
    self_attention, projections, rest, replacement = _SHAPES[stack]
    attention = self_attention(last)
    needed = (*projections, "attention_head_size", "scaling", "config")
    if attention is None or not all(hasattr(attention, a) for a in needed) or not rest(last):
        return False
    if not hasattr(sys.modules.get(type(attention).__module__), "eager_attention_forward"):
        return False
    layers[-1] = replacement(last)
    return True

"""The last encoder layer, computed for the one position the classifier reads.

BERT- and RoBERTa-style sequence classifiers read only position 0 ([CLS] / <s>) of the last
layer's output (`BertPooler`, `RobertaClassificationHead`). The last layer's keys and values
need every position, but its query, attention output, residual, LayerNorm and feed-forward
block are needed for position 0 alone: the same function of the same inputs, for one row of
each sequence instead of all of them. On a 4-layer 256-wide BERT that is about a fifth of the
model's work (bench/README.md); on BERT-base about 6%.

Applied only where every piece is known: the classifier classes below, over BertLayer-shaped
layers (attention.self.query/key/value, attention.output, feed_forward_chunk), as encoders
without cross-attention. Anything else keeps its full last layer.
"""

from __future__ import annotations

import logging
import sys

import torch
from torch import nn

log = logging.getLogger(__name__)

# Classifiers whose head reads position 0 of the last hidden state and nothing else.
FIRST_TOKEN_CLASSIFIERS = {
    "BertForSequenceClassification": "bert",
    "RobertaForSequenceClassification": "roberta",
    "XLMRobertaForSequenceClassification": "roberta",
    "CamembertForSequenceClassification": "roberta",
}


class FirstTokenLayer(nn.Module):
    """A BERT-style layer that returns its output for position 0 only, shape (batch, 1, hidden)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        attention = self.layer.attention.self
        batch, length, _ = hidden_states.shape
        first = hidden_states[:, :1]
        head_size = attention.attention_head_size
        query = attention.query(first).view(batch, 1, -1, head_size).transpose(1, 2)
        key = attention.key(hidden_states).view(batch, length, -1, head_size).transpose(1, 2)
        value = attention.value(hidden_states).view(batch, length, -1, head_size).transpose(1, 2)
        if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[2] > 1:
            attention_mask = attention_mask[:, :, :1, :]  # the query row of position 0
        # The attention function the model's own layer would call (its module's eager one by default).
        eager = sys.modules[type(attention).__module__].eager_attention_forward
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager)
        context, _ = attend(attention, query, key, value, attention_mask, dropout=0.0, scaling=attention.scaling)
        context = context.reshape(batch, 1, -1).contiguous()
        return self.layer.feed_forward_chunk(self.layer.attention.output(context, first))


def first_token_last_layer(model: nn.Module) -> bool:
    """Swap the classifier's last layer for its position-0-only form where that is exact.
    Returns whether it did (the model is changed in place)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        return False  # before 5.x layers returned tuples and attention had another interface
    base = model.get_base_model() if hasattr(model, "peft_config") and hasattr(model, "get_base_model") else model
    family = FIRST_TOKEN_CLASSIFIERS.get(type(base).__name__)
    config = base.config
    if family is None or getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False  # relative position scores would need every query position's distances
    encoder = getattr(getattr(base, family, None), "encoder", None)
    layers = getattr(encoder, "layer", None)
    if not isinstance(layers, nn.ModuleList) or not len(layers) or isinstance(layers[-1], FirstTokenLayer):
        return False
    last = layers[-1]
    attention = getattr(getattr(last, "attention", None), "self", None)
    needed = (hasattr(attention, name) for name in ("query", "key", "value", "attention_head_size", "scaling", "config"))
    if not (all(needed) and hasattr(last.attention, "output") and hasattr(last, "feed_forward_chunk")):
        return False
    if not hasattr(sys.modules.get(type(attention).__module__), "eager_attention_forward"):
        return False
    layers[-1] = FirstTokenLayer(last)
    return True

"""The last encoder layer, computed for the one position the classifier reads.

BERT-, RoBERTa- and DistilBERT-style sequence classifiers read only position 0 ([CLS] / <s>)
of the last layer's output (`BertPooler`, `RobertaClassificationHead`, DistilBERT's
`pre_classifier` on `hidden_state[:, 0]`). The last layer's keys and values
need every position, but its query, attention output, residual, LayerNorm and feed-forward
block are needed for position 0 alone: the same function of the same inputs, for one row of
each sequence instead of all of them. On a 4-layer 256-wide BERT that is about a fifth of the
model's work (bench/README.md); on BERT-base about 6%.

Which classifiers read position 0 only, where their layers are and the position-0 form of their
last layer are facts of each family (`families/encoders.py`, `FirstToken`; the attention of
position 0 over every position they share is `families/attention.py`). This module holds the
swap itself, applied only where every piece is known (a declared classifier class, an encoder without
cross-attention and with absolute positions, a layer with every part the replacement uses, on
transformers 5.x). Anything else keeps its whole last layer.
"""

from __future__ import annotations

import logging
import sys

from torch import nn

from scorekeeper.worker.families import HFModule, find_family

log = logging.getLogger(__name__)


def first_token_last_layer(model: HFModule) -> bool:
    """Swap the classifier's last layer for its position-0-only form where that is exact.
    Returns whether it did (the model is changed in place)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        return False  # before 5.x layers returned tuples and attention had another interface
    base = model.get_base_model() if hasattr(model, "peft_config") and hasattr(model, "get_base_model") else model
    config = base.config
    family = find_family(getattr(config, "model_type", None))
    spec = family.first_token if family is not None else None
    if spec is None or type(base).__name__ not in spec.classifiers:
        return False
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False  # relative position scores would need every query position's distances
    layers = getattr(getattr(getattr(base, spec.base, None), spec.stack, None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or not len(layers) or isinstance(layers[-1], spec.replacement):
        return False
    last = layers[-1]
    attention = spec.attention(last)
    needed = (*spec.projections, "attention_head_size", "scaling", "config")
    if attention is None or not all(hasattr(attention, a) for a in needed) or not spec.fits(last):
        return False
    if not hasattr(sys.modules.get(type(attention).__module__), "eager_attention_forward"):
        return False
    layers[-1] = spec.replacement(last)
    return True

"""Position 0's attention over every position: what the families' first-token layers share.

The first-token last layer (`scorekeeper/worker/first_token.py`) computes the classifier's last
layer for position 0 only; each family's position-0 layer (`encoders.py`) builds on these.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from scorekeeper.worker.families.base import HFModule


def attend_first(attention: HFModule, query, key, value, attention_mask) -> torch.Tensor:
    """Position 0's attention over every position, through the attention function the model's
    own layer would call (its module's eager one by default); (batch, 1, hidden)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[2] > 1:
        attention_mask = attention_mask[:, :, :1, :]  # the query row of position 0
    eager = sys.modules[type(attention).__module__].eager_attention_forward
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager)
    context, _ = attend(attention, query, key, value, attention_mask, dropout=0.0, scaling=attention.scaling)
    return context.reshape(query.shape[0], 1, -1).contiguous()


def split_heads(linear: nn.Module, x: torch.Tensor, head_size: int) -> torch.Tensor:
    """`linear(x)` as (batch, heads, positions, head_size)."""
    return linear(x).view(x.shape[0], x.shape[1], -1, head_size).transpose(1, 2)

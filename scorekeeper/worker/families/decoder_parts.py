"""The torch side of the decoder families (`decoders.py` declares them): how their sequence
classifiers come apart for pipeline mode.

Imported by name (`Family.parts`) the first time a scoring process needs it: the flow reads the
registry without torch.
"""

from __future__ import annotations

import torch
from torch import nn

from scorekeeper.worker.families.base import Chain, HFModule, Parts


class DecoderHead(nn.Module):
    """GenericForSequenceClassification: final norm, then the score of each row's last non-pad token."""

    def __init__(self, norm: nn.Module, score: nn.Module):
        super().__init__()
        self.norm, self.score = norm, score

    def pooled(self, hidden: torch.Tensor, last_token: torch.Tensor) -> torch.Tensor:
        """The final norm's output at each row's last non-pad token: what `score` reads."""
        hidden = self.norm(hidden)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        return hidden[rows, last_token]

    def forward(self, hidden: torch.Tensor, last_token: torch.Tensor) -> torch.Tensor:
        # score is a linear map per position: scoring the picked position equals picking the scored one.
        return self.score(self.pooled(hidden, last_token))


def _layer_types(config) -> list[str]:
    """Llama, Qwen2: the config's `layer_types` when it has them, else full attention everywhere."""
    return list(getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers)


def _mistral_layer_types(config) -> list[str]:
    """Mistral: every layer slides when the config has a window (MistralModel's own choice)."""
    kind = "full_attention" if getattr(config, "sliding_window", None) is None else "sliding_attention"
    return [kind] * config.num_hidden_layers


def _take_apart(layer_types):
    def take_apart(model: HFModule) -> Chain:
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


LLAMA = Parts(_take_apart(_layer_types))
QWEN2 = Parts(_take_apart(_layer_types))
MISTRAL = Parts(_take_apart(_mistral_layer_types))

"""What a model family tells the generic machinery: the facts of one architecture, as data.

The pipeline stages (`stages.py`), the first-token last layer (`first_token.py`) and the model
loader (`model.py`) are written once; they ask the family of a model, found by its
`config.model_type`, for what differs between architectures:

* how the classifier comes apart into embeddings, a layer list and a head (`take_apart`);
* how many position embeddings come before a row's first token (`position_offset`);
* whether its head reads position 0 alone, and how to run its last layer for that position only
  (`first_token`);
* what tests and the demo need to build a tiny instance (`tiny`, `lora_targets`);
* which tensors of a saved classifier are its head (`head_weights`), so that a folder without
  them is refused before anything is loaded.

A family is declared without torch: the flow reads configs through the registry (max length,
pipeline support, head weights) and never imports torch. What needs torch (the head modules, the
first-token layers, `take_apart`) lives in a `*_parts.py` module that the family names in `parts`
and that is imported the first time a scoring process asks for it, as transformers' own auto
classes name their model classes by string.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the torch side of a family is imported by name (`Family.parts`), where it is used
    from torch import nn

# A transformers module whose children the parts reach by attribute name (`model.bert.encoder.layer`,
# `attention.query`): torch types `Module.__getattr__` as `Tensor | Module`, so such a chain has no
# static type; the families' structure is checked at run time (`FirstToken.fits`, tests/test_families.py).
HFModule = Any


@dataclass
class Chain:
    """A classifier taken apart: what runs before, inside and after the transformer layers."""

    config: Any
    embed: Callable  # (input_ids, token_type_ids | None) -> hidden, through `embeddings`
    embeddings: nn.Module
    layers: list[nn.Module]
    head: nn.Module  # hidden -> logits (decoders: the final norm, last-token pick and score)
    decoder: bool = False  # causal, rotary positions, the head reads each row's last real token
    rotary: nn.Module | None = None  # decoders: rotary position embeddings, needed by every stage
    layer_types: list[str] | None = None  # decoders: each layer's attention, "full_attention" or "sliding_attention"

    @property
    def model_type(self) -> str:
        return self.config.model_type


@dataclass(frozen=True)
class FirstToken:
    """A classifier whose head reads position 0 of the last layer and nothing else, and the form of
    its last layer that computes that position only (exact: the same function of the same inputs).

    `first_token.py` swaps the layer in when the model is one of `classifiers`, its layer stack is
    at `model.<base>.<stack>.layer`, and the last layer has every piece the replacement uses.
    """

    classifiers: tuple[str, ...]  # *ForSequenceClassification class names
    base: str  # attribute of the base model on the classifier ("bert", "roberta", ...)
    stack: str  # attribute of the layer stack on the base model ("encoder", "transformer")
    replacement: type[nn.Module]  # wraps the last layer, returns (batch, 1, hidden)
    attention: Callable[[nn.Module], nn.Module | None]  # the layer's self-attention module
    projections: tuple[str, ...]  # attributes the replacement uses on that attention module
    fits: Callable[[nn.Module], bool]  # the rest of the layer has what the replacement uses


@dataclass(frozen=True)
class TinyTokens:
    """The tokenizer facts a tiny config needs (the demo takes them from the tokenizer it built)."""

    vocab_size: int
    pad: int | None = None
    bos: int | None = None  # encoders: [CLS]
    eos: int | None = None  # encoders: [SEP]


@dataclass(frozen=True)
class Tiny:
    """A tiny instance of the family, for tests and the demo: random weights from `config`.

    `config(tokens, layers, hidden, positions, dropout)` returns the config's keyword arguments,
    `model_type` included (`AutoConfig.for_model(**kwargs)`); `None` means the family's size.
    """

    name: str  # the demo's family name ("bert", "minilm", ...)
    config: Callable[..., dict[str, Any]]
    tokenizer: Literal["wordpiece", "bpe"]
    input_names: tuple[str, ...]  # what the tokenizer returns to the model


def no_offset(config) -> int:
    return 0


@dataclass(frozen=True)
class Parts:
    """The torch side of a family: what only the scoring processes use."""

    take_apart: Callable[[nn.Module], Chain]  # the classifier (adapter unwrapped) -> its chain
    first_token: FirstToken | None = None


@dataclass(frozen=True)
class Family:
    """One architecture family: every fact about it that scorekeeper relies on."""

    name: str  # as people say it: "BERT", "RoBERTa", "Llama"
    kind: Literal["encoder", "decoder"]
    model_types: tuple[str, ...]  # config.model_type values it covers
    parts: str  # "module:name" of its `Parts` (torch), imported when a scoring process first needs them
    head_weights: tuple[str, ...]  # the tensors of the head, as save_pretrained names them in a classifier
    lora_targets: tuple[str, ...]  # attention projections a test adapter adapts
    tiny: tuple[Tiny, ...]
    position_offset: Callable[[Any], int] = no_offset  # positions used before a row's first token
    note: str = ""  # said after the name in the list of supported families

    def describe(self) -> str:
        note = f"{self.note}, " if self.note else ""
        return f"{self.name} ({note}model_type {', '.join(self.model_types)})"

    def torch_parts(self) -> Parts:
        module, _, name = self.parts.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def take_apart(self) -> Callable[[nn.Module], Chain]:
        return self.torch_parts().take_apart

    @property
    def first_token(self) -> FirstToken | None:
        return self.torch_parts().first_token

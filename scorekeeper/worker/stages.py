"""Pipeline stages built explicitly per architecture family: no tracing, no export.

A sequence classifier is seen as a chain: embeddings -> transformer layers -> head, taken apart
by its family (`families/`: which submodules are the embeddings, the layers and the head). The layers
are cut into contiguous stages balanced by their parameter count, and each stage is a small
`nn.Module` that holds only its own submodules and re-does, for its layers, exactly what the
transformers model does around them (the 4D attention mask, rotary position embeddings).

What travels between stages is plain tensors, so a receiving stage can pre-allocate them:

* encoders (BERT, MiniLM, RoBERTa, DistilBERT): ``(hidden, attention_mask)``;
* decoders (Llama, Qwen2, Mistral): ``(hidden, attention_mask, last_token)``, where
  ``last_token`` is each row's last non-pad position, found from the input ids on the first stage
  the way ``GenericForSequenceClassification`` finds it (the last stage never sees the ids); for a
  model without a pad id of its own, each row's last position (``head_position``: the row alone).

The first stage takes ``(input_ids, attention_mask[, token_type_ids])``; the last returns logits
(with the representation kept, SPEC 14: the logits and then the head's input at the pooled position,
one tensor of ``num_labels + hidden`` columns).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from scorekeeper.errors import ModelError
from scorekeeper.worker.families import Chain, HFModule, pipeline_family


def unwrap_adapter(model: HFModule) -> nn.Module:
    """The transformers model under an unmerged PEFT adapter. LoRA layers live inside the linear
    layers they adapt and the saved head copy is a wrapper module, so they split like the rest."""
    get_base_model = getattr(model, "get_base_model", None)
    if get_base_model is not None and hasattr(model, "peft_config"):
        base = get_base_model()
        if any(getattr(c, "is_prompt_learning", False) for c in model.peft_config.values()):
            raise ModelError("pipeline mode cannot split a prompt-learning adapter; use replica mode")
        return base
    return model


def take_apart(model: nn.Module) -> Chain:
    """The model's chain of parts, by its family, or a ModelError that names the supported families."""
    model = unwrap_adapter(model)
    return pipeline_family(getattr(model.config, "model_type", None), type(model).__name__).take_apart(model)


def head_position(input_ids: torch.Tensor | None, attention_mask: torch.Tensor, pad_token_id: int | None) -> torch.Tensor:
    """Each row's position a decoder's head reads in a right-padded batch, as transformers finds it
    for the row scored alone, unpadded (SPEC 14): the rightmost of the row's own positions whose token
    id is not the model's own `pad_token_id` (0 when every one is); for a model without one, the row's
    last position, whatever its token (the job pads such a model with eos, which a text may end with)."""
    if pad_token_id is None:
        return (attention_mask.sum(-1) - 1).clamp(min=0).to(torch.int64)
    assert input_ids is not None, "the model's pad id is looked for in the input ids"
    real = (input_ids != pad_token_id) & attention_mask.bool()
    positions = torch.arange(input_ids.shape[-1], device=input_ids.device, dtype=torch.int32)
    return (positions * real.to(torch.int32)).argmax(-1).to(torch.int64)


# -- masks: the same calls the transformers models make ---------------------------------------


def encoder_mask(config, hidden: torch.Tensor, attention_mask: torch.Tensor):
    from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

    if getattr(config, "is_decoder", False):  # a BERT trained as a decoder attends causally
        return create_causal_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask, cache=None)
    return create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask)


def decoder_masks(config, layer_types: Sequence[str], layer_ids: Sequence[int], hidden, attention_mask, position_ids) -> list:
    """The attention mask of each of this stage's layers (full or sliding-window causal, as the
    family says each layer attends)."""
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    kwargs = dict(config=config, inputs_embeds=hidden, attention_mask=attention_mask, cache=None, position_ids=position_ids)
    wanted = {layer_types[i] for i in layer_ids}
    made = {}
    if "full_attention" in wanted:
        made["full_attention"] = create_causal_mask(**kwargs)
    if "sliding_attention" in wanted:
        made["sliding_attention"] = create_sliding_window_causal_mask(**kwargs)
    unknown = wanted - made.keys()
    if unknown:
        raise ModelError(f"pipeline mode does not know the attention layer types {sorted(unknown)} of this {config.model_type} model")
    return [made[layer_types[i]] for i in layer_ids]


# -- stages ------------------------------------------------------------------------------------


class EncoderStage(nn.Module):
    """Layers [start, end) of an encoder; the first stage embeds, the last applies the head."""

    def __init__(self, chain: Chain, start: int, end: int, first: bool, last: bool):
        super().__init__()
        self.config = chain.config
        self._embed = chain.embed if first else None
        self.embeddings = chain.embeddings if first else None
        self.layers = nn.ModuleList(chain.layers[start:end])
        self.head = chain.head if last else None
        self.hidden_size = hidden_size(chain.config)
        self.with_representation = False  # the last stage returns the head's input beside the logits

    def sent(self, rows: int, width: int, dtype: torch.dtype) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """Shapes and dtypes of what this stage sends on (fixed by the micro-batch's rows and width)."""
        return [((rows, width, self.hidden_size), dtype), ((rows, width), torch.int64)]

    def forward(self, *inputs: torch.Tensor):
        if self._embed is not None:
            input_ids, attention_mask = inputs[0], inputs[1]
            hidden = self._embed(input_ids, inputs[2] if len(inputs) > 2 else None)
        else:
            hidden, attention_mask = inputs
        mask = encoder_mask(self.config, hidden, attention_mask)
        for layer in self.layers:
            hidden = layer(hidden, mask)
        if self.head is not None:
            logits = self.head(hidden)
            # with the representation (SPEC 14): the head's input at position 0 beside the logits
            return torch.cat([logits, hidden[:, 0].to(logits.dtype)], dim=-1) if self.with_representation else logits
        return hidden.contiguous(), attention_mask.contiguous()


class DecoderStage(nn.Module):
    """Layers [start, end) of a decoder; the first stage embeds, the last applies norm and score."""

    def __init__(self, chain: Chain, start: int, end: int, first: bool, last: bool):
        super().__init__()
        if chain.rotary is None or chain.layer_types is None:  # every decoder family's chain has both
            raise ModelError(f"this {chain.model_type} decoder came apart without rotary embeddings or layer types")
        self.config = chain.config
        self.layer_types: list[str] = chain.layer_types
        self.layer_ids = list(range(start, end))
        self.embeddings = chain.embeddings if first else None
        self.layers = nn.ModuleList(chain.layers[start:end])
        self.rotary: nn.Module = chain.rotary
        self.head = chain.head if last else None
        # the pad id the head reads by (head_position); pipeline.stage_of sets the model's own, None for a
        # model without one (the job pads it with eos, which a text may end with: its last position is read)
        self.pad_token_id = getattr(chain.config, "pad_token_id", None)
        self.hidden_size = hidden_size(chain.config)
        self.with_representation = False  # the last stage returns the head's input beside the logits

    def sent(self, rows: int, width: int, dtype: torch.dtype) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """Shapes and dtypes of what this stage sends on (fixed by the micro-batch's rows and width)."""
        return [((rows, width, self.hidden_size), dtype), ((rows, width), torch.int64), ((rows,), torch.int64)]

    def forward(self, *inputs: torch.Tensor):
        if self.embeddings is not None:
            input_ids, attention_mask = inputs[0], inputs[1]
            hidden = self.embeddings(input_ids)
            last_token = head_position(input_ids, attention_mask, self.pad_token_id)
        else:
            hidden, attention_mask, last_token = inputs
        position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
        masks = decoder_masks(self.config, self.layer_types, self.layer_ids, hidden, attention_mask, position_ids)
        position_embeddings = self.rotary(hidden, position_ids)
        for layer, mask in zip(self.layers, masks):
            hidden = layer(hidden, attention_mask=mask, position_ids=position_ids, position_embeddings=position_embeddings)
        if self.head is not None:
            if not self.with_representation:
                return self.head(hidden, last_token)
            head: HFModule = self.head  # families/decoder_parts.py DecoderHead
            # the final norm's output where the head reads the row alone (SPEC 14; head_position)
            pooled = head.pooled(hidden, last_token)
            return torch.cat([head.score(pooled), pooled], dim=-1)
        return hidden.contiguous(), attention_mask.contiguous(), last_token.contiguous()


# -- the split ---------------------------------------------------------------------------------


def hidden_size(config) -> int:
    return int(getattr(config, "hidden_size", None) or config.dim)


def parameter_count(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def balanced_boundaries(costs: Sequence[int], stages: int) -> list[int]:
    """Cut points [0, b1, ..., n] of `stages` contiguous, non-empty groups minimising the largest
    group's cost (ties: the earliest cut), by dynamic programming over the prefix sums."""
    n = len(costs)
    if stages < 1 or stages > n:
        raise ModelError(f"cannot split {n} layers into {stages} pipeline stages: each stage needs at least one layer")
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[s][i]: the smallest possible largest cost when the first i layers form s stages.
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    for s in range(1, stages + 1):
        for i in range(s, n - (stages - s) + 1):
            for j in range(s - 1, i):
                value = max(best[s - 1][j], prefix[i] - prefix[j])
                if value < best[s][i]:
                    best[s][i], cut[s][i] = value, j
    bounds = [n]
    for s in range(stages, 0, -1):
        bounds.append(cut[s][bounds[-1]])
    return bounds[::-1]


def stage_boundaries(chain: Chain, stages: int) -> list[tuple[int, int]]:
    """Layer ranges [start, end) of each stage, balanced by parameter count.

    The layers' parameters are what is balanced (they are the compute and most of the memory);
    the head's are added to the last layer. The embedding table is left out: it is a lookup, and
    counting a large vocabulary would leave the first stage with almost no layers to run.
    """
    costs = [parameter_count(layer) for layer in chain.layers]
    costs[-1] += parameter_count(chain.head)
    bounds = balanced_boundaries(costs, stages)
    return [(bounds[k], bounds[k + 1]) for k in range(stages)]


def build_stage(model: nn.Module, stage: int, stages: int) -> tuple[EncoderStage | DecoderStage, list[tuple[int, int]]]:
    """The module of pipeline stage `stage` of `stages`, and every stage's layer range.

    The returned module holds references to its own submodules only: once the caller drops the
    whole model, the other stages' weights can be freed.
    """
    chain = take_apart(model)
    bounds = stage_boundaries(chain, stages)
    start, end = bounds[stage]
    cls: type[EncoderStage | DecoderStage] = DecoderStage if chain.decoder else EncoderStage
    module = cls(chain, start, end, first=stage == 0, last=stage == stages - 1)
    module.eval()
    return module, bounds

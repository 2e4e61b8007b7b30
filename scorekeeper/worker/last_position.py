"""The head of a decoder without a pad token of its own, read at each row's last position.

transformers' decoder classifiers score every position and keep each row's rightmost token that
is not the config's `pad_token_id`; with no pad id they read the last position, and refuse a batch
of more than one row. The job pads such a model's batches with eos and names it the pad
(model.ensure_pad_token), so transformers' rule then skips a row's own trailing eos too: a text
ending with the eos string (or a tokenizer that appends eos) was read one token early. SPEC 9 and
14 say the row as scored alone, unpadded: its last position (docs/heads.md, "Which position a
decoder's head reads"; docs/facts.md, "Decoder classifiers and their pad token").

A forward hook on the head's `score` keeps its per-position output (a reference, nothing is
copied or computed) for the batch running on this thread (the CPU's batch threads run batches side
by side), and `logits` reads each row there at `stages.head_position`. Encoders and decoders with
a pad id of their own get no hook: their path is transformers' own.
"""

from __future__ import annotations

import threading

import torch

from scorekeeper.errors import ModelError
from scorekeeper.worker.families import HFModule
from scorekeeper.worker.stages import head_position, unwrap_adapter

# Decoder classifiers whose per-position head is named `classifier`, not `score`, and that read the
# rightmost non-pad position as the others do (transformers' ctrl and modernbert_decoder modeling code)
LAST_TOKEN_CLASSIFIERS = frozenset({"CTRLForSequenceClassification", "ModernBertDecoderForSequenceClassification"})


class LastPositionLogits:
    """Reads a pad-less decoder's logits at each row's last position (a hook on its `score`)."""

    def __init__(self, model: torch.nn.Module):
        inner: HFModule = unwrap_adapter(model)  # under an unmerged adapter: the adapted model, its head wrapped
        score = getattr(inner, "score", None)
        if score is None and type(inner).__name__ in LAST_TOKEN_CLASSIFIERS:  # its per-position head is `classifier`
            score = getattr(inner, "classifier", None)
        if not isinstance(score, torch.nn.Module):
            raise ModelError(f"this {type(inner).__name__} reads the last token but has no `score` head to read it from")
        self._local = threading.local()
        self._hook = score.register_forward_hook(self._keep)

    def _keep(self, _module, _args, output) -> None:
        self._local.scores = output  # (rows, positions, labels)

    def remove(self) -> None:
        self._hook.remove()

    def logits(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """The logits of the right-padded batch that just ran on this thread, each row read at its
        last position (rows, labels)."""
        scores = self._local.scores
        self._local.scores = None
        position = head_position(None, attention_mask.to(scores.device), None)
        return scores[torch.arange(scores.shape[0], device=scores.device), position]

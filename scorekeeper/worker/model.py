"""Loading the tokenizer, the classifier and its adapter: safetensors only, no remote code by default."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scorekeeper.errors import ModelError

if TYPE_CHECKING:  # torch is imported where it is used: the flow reads configs here without it
    import torch

log = logging.getLogger(__name__)

# Tokenizers report "no limit" as a huge number; anything above this is not a real maximum.
_NO_LIMIT = 1_000_000


def check_safetensors_folder(path: str, what: str = "model") -> None:
    """Refuse folders whose weights exist only as pickles: loading a pickle can run code."""
    if not os.path.isdir(path):
        raise ModelError(f"{what} folder not found: {path}")
    names = os.listdir(path)
    if any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names):
        return
    pickled = [n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl"))]
    if pickled:
        raise ModelError(
            f"{what} folder {path} has only pickled weights ({', '.join(sorted(pickled))}); "
            "scorekeeper loads safetensors only: convert them with save_pretrained(safe_serialization=True)"
        )
    raise ModelError(f"{what} folder {path} holds no safetensors weights (files: {', '.join(sorted(names)) or 'none'})")


def resolve_dtype(name: str, device: torch.device, bf16_supported: bool | None = None) -> torch.dtype:
    """The compute dtype: `auto` is bfloat16 on a GPU that supports it, else float32.
    (`bf16_supported` defaults to asking the device; tests give it to check the GPU decision.)"""
    import torch

    if name == "auto":
        if bf16_supported is None:
            bf16_supported = device.type == "cuda" and torch.cuda.is_bf16_supported()
        if device.type == "cuda" and bf16_supported:
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    max_length: int
    pad_token_id: int
    labels: list[str]
    uses_token_type_ids: bool


def import_model_code() -> None:
    """Import transformers' loading code ahead of a job: most of a worker's start-up is these
    imports (about 2.5 s on 2 cores), and the model's own module is cheap after them."""
    import transformers.modeling_utils  # noqa: F401
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer  # noqa: F401


def load_tokenizer(model_path: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise ModelError(f"cannot load the tokenizer from {model_path}: {exc}") from exc
    return tokenizer


def ensure_pad_token(tokenizer, config) -> int:
    """Decoder checkpoints often ship without a pad token; pad with eos (or unk), as their cards do.

    The classifier finds each row's last real token by looking for the pad id, so the model's
    config must agree with the tokenizer on it.
    """
    if tokenizer.pad_token_id is None:
        if getattr(config, "pad_token_id", None) is not None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(config.pad_token_id)
        elif tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif tokenizer.unk_token is not None:
            tokenizer.pad_token = tokenizer.unk_token
        else:
            raise ModelError("the tokenizer has no pad, eos or unk token to pad batches with")
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = tokenizer.pad_token_id
    return int(tokenizer.pad_token_id)


def model_max_length(tokenizer, config, requested: int | None) -> int:
    """Tokens per row: the request's value, capped by what the model's positions allow."""
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < _NO_LIMIT:
        limits.append(int(tok_max))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        # Imported here: the families import torch, and the flow reads configs through this module.
        from scorekeeper.worker.families import find_family

        # Some families (RoBERTa) spend position embeddings before a row's first token.
        family = find_family(getattr(config, "model_type", None))
        offset = family.position_offset(config) if family is not None else 0
        limits.append(int(positions) - offset)
    model_limit = min(limits) if limits else 512
    if requested is None:
        return model_limit
    if requested > model_limit:
        raise ModelError(f"max_length {requested} exceeds the model's maximum of {model_limit} tokens")
    return requested


def load_model(
    model_path: str,
    adapter_path: str | None,
    *,
    merge_adapter: bool,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    max_length: int | None,
) -> LoadedModel:
    """Tokenizer + sequence-classification model (+ PEFT adapter), in eval mode on `device`."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    check_safetensors_folder(model_path, "model")
    tokenizer = load_tokenizer(model_path, trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise ModelError(f"cannot read the model config in {model_path}: {exc}") from exc
    pad_id = ensure_pad_token(tokenizer, config)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            model_path,
            config=config,
            dtype=dtype,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
        )
    except ValueError as exc:
        raise ModelError(f"cannot load a sequence-classification model from {model_path}: {exc}") from exc
    if adapter_path:
        model = attach_adapter(model, adapter_path, merge=merge_adapter)
    model.to(device)
    model.eval()
    labels = [str(config.id2label.get(i, config.id2label.get(str(i), f"LABEL_{i}"))) for i in range(config.num_labels)]
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        max_length=model_max_length(tokenizer, config, max_length),
        pad_token_id=pad_id,
        labels=labels,
        uses_token_type_ids="token_type_ids" in getattr(tokenizer, "model_input_names", ()),
    )


def attach_adapter(model, adapter_path: str, *, merge: bool):
    from peft import PeftModel

    check_safetensors_folder(adapter_path, "adapter")
    try:
        model = PeftModel.from_pretrained(model, adapter_path, is_trainable=False)
    except Exception as exc:
        raise ModelError(f"cannot apply the adapter in {adapter_path}: {exc}") from exc
    if merge:
        model = model.merge_and_unload()
    return model


def label_names(model_path: str) -> list[str]:
    """The model's labels in id order, read from its config alone (no weights loaded)."""
    import json

    config_file = os.path.join(model_path, "config.json")
    try:
        with open(config_file) as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {config_file}: {exc}") from exc
    id2label = config.get("id2label") or {}
    num_labels = len(id2label) or int(config.get("num_labels", 2))
    return [str(id2label.get(str(i), f"LABEL_{i}")) for i in range(num_labels)]

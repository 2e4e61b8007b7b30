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
    head: str = "single_label"  # scorekeeper.heads: single_label, multi_label or regression


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
    special = {i for i in tokenizer.all_special_ids if i is not None}
    if tokenizer.unk_token_id is not None:
        special.add(tokenizer.unk_token_id)
    check_encodes_text(tokenizer(ORDINARY_TEXT, add_special_tokens=False)["input_ids"], special, len(tokenizer), model_path)
    return tokenizer


# Words in a few scripts: any real vocabulary has a piece of them that is neither unknown nor special.
ORDINARY_TEXT = "The quick brown fox jumps over the lazy dog, 0123456789. Der Fuchs. Быстрая лиса. 敏捷的狐狸."
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")


def check_encodes_text(ids: list[int], special_ids: set[int], vocab_size: int, folder: str) -> None:
    """Refuse a tokenizer that turns ordinary text into nothing but unknown or special tokens.

    transformers 5 builds a tokenizer even from a folder without tokenizer files (or from a
    vocabulary file it ignores): it holds only the special tokens and maps every word to the
    unknown token, and the model then scores every row from the same few ids, without a warning."""
    if vocab_size <= len(special_ids) or not [i for i in ids if i not in special_ids]:
        raise ModelError(
            f"the tokenizer in {folder} cannot encode ordinary text: its vocabulary has {vocab_size} token(s), "
            f"{len(special_ids)} of them special, and every word becomes an unknown or special token. "
            f"The folder needs the tokenizer's files ({', '.join(TOKENIZER_FILES[:3])}, ...): save them with "
            "tokenizer.save_pretrained(folder)"
        )


def check_tokenizer_folder(folder: str) -> None:
    """The flow's check, before anything is written: the folder has tokenizer files, and a
    tokenizer.json encodes ordinary text (read with the `tokenizers` library: no transformers import)."""
    names = set(os.listdir(folder))
    if not names & set(TOKENIZER_FILES) and not any(n.endswith(".model") for n in names):
        raise ModelError(
            f"model folder {folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}): without them the "
            "tokenizer maps every word to the unknown token. Save the tokenizer into it with tokenizer.save_pretrained(folder)"
        )
    if "tokenizer.json" not in names:
        return  # other formats are checked by the scoring processes, which load them with transformers
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    except Exception as exc:  # a version of the format this library cannot read: transformers may
        log.info("not checking %s/tokenizer.json here (%s); the scoring processes check it", folder, exc)
        return
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    unk = getattr(tokenizer.model, "unk_token", None)
    if isinstance(unk, str) and tokenizer.token_to_id(unk) is not None:
        special.add(tokenizer.token_to_id(unk))
    ids = tokenizer.encode(ORDINARY_TEXT, add_special_tokens=False).ids
    check_encodes_text(ids, special, tokenizer.get_vocab_size(with_added_tokens=True), folder)


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


def declared_max_length(folder: str, requested: int | None) -> int:
    """model_max_length from the folder's config.json and tokenizer_config.json alone (the flow
    checks --max-length with it before anything is written; the worker again with the loaded objects)."""
    from types import SimpleNamespace

    config = _read_json(os.path.join(folder, "config.json"))
    tokenizer_config = _read_json(os.path.join(folder, "tokenizer_config.json"), missing_ok=True)
    return model_max_length(
        SimpleNamespace(model_max_length=tokenizer_config.get("model_max_length")),
        SimpleNamespace(**{k: config.get(k) for k in ("max_position_embeddings", "model_type", "pad_token_id")}),
        requested,
    )


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
    head: str = "auto",
) -> LoadedModel:
    """Tokenizer + sequence-classification model (+ PEFT adapter), in eval mode on `device`."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from scorekeeper.heads import resolve_head

    check_safetensors_folder(model_path, "model")
    tokenizer = load_tokenizer(model_path, trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise ModelError(f"cannot read the model config in {model_path}: {exc}") from exc
    described = {"id2label": dict(config.id2label), "num_labels": config.num_labels, "problem_type": config.problem_type}
    labels = labels_from_config(described, model_path)
    head = resolve_head(head, described, model_path)
    pad_id = ensure_pad_token(tokenizer, config)
    max_length = model_max_length(tokenizer, config, max_length)
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
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        max_length=max_length,
        pad_token_id=pad_id,
        labels=labels,
        head=head,
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
    return labels_from_config(_read_json(os.path.join(model_path, "config.json")), model_path)


def labels_from_config(config: dict, folder: str) -> list[str]:
    """Output names in id order; refuses label maps that are not one distinct name per output.

    A repeated name would join each of its rows to the ground truth twice; ids that are not
    0..num_labels-1 leave outputs without a name. Which kind of head the outputs are (and whether
    one output can be scored) is scorekeeper.heads' decision."""
    id2label = config.get("id2label") or {}
    if id2label:
        try:
            by_id = {int(k): str(v) for k, v in id2label.items()}
        except (TypeError, ValueError):
            raise ModelError(f"model in {folder}: id2label keys must be integer ids, found {sorted(map(str, id2label))[:5]}") from None
        if sorted(by_id) != list(range(len(by_id))):
            raise ModelError(f"model in {folder}: id2label ids must be 0..{len(by_id) - 1} (one per output), found {sorted(by_id)[:10]}")
        labels = [by_id[i] for i in range(len(by_id))]
        declared = config.get("num_labels")
        if declared is not None and int(declared) != len(labels):
            raise ModelError(f"model in {folder}: num_labels is {declared} but id2label names {len(labels)} labels")
    else:
        labels = [f"LABEL_{i}" for i in range(int(config.get("num_labels", 2)))]
    repeated = {name: [i for i, n in enumerate(labels) if n == name] for name in labels if labels.count(name) > 1}
    if repeated:
        shown = "; ".join(f"{name!r} for ids {', '.join(map(str, ids))}" for name, ids in list(repeated.items())[:5])
        raise ModelError(f"model in {folder}: id2label repeats label names ({shown}); each output needs a name of its own")
    return labels


def _read_json(path: str, missing_ok: bool = False) -> dict:
    import json

    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise ModelError(f"cannot read {path}: the file does not exist") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"cannot read {path}: not a JSON object")
    return data


def head_of(model_path: str, requested: str) -> str:
    """The kind of head the folder's config.json and `requested` make (scorekeeper.heads), without loading weights."""
    from scorekeeper.heads import resolve_head

    return resolve_head(requested, _read_json(os.path.join(model_path, "config.json")), model_path)

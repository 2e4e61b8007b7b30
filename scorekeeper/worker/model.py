"""Loading the tokenizer, the classifier and its adapter: safetensors only, no remote code by default."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scorekeeper.errors import ModelError
from scorekeeper.head_kind import AUTO, HeadChoice, HeadKind
from scorekeeper.long_text import window_size
from scorekeeper.model_folder import (  # noqa: F401  (the folder's rules, re-exported for the worker's callers)
    adapter_mismatch_message,
    adapter_supplies,
    check_pad_token,
    check_rows_encode,
    check_safetensors_folder,
    check_vocabulary,
    labels_from_config,
    missing_weights_message,
    model_max_length,
    read_json,
    tensors,
)
from scorekeeper.worker.windows import TextFrame, WindowSettings, text_frame, text_frame_or_none, window_settings

if TYPE_CHECKING:  # torch is imported where it is used
    import torch

    from scorekeeper.worker.embeddings import Representation
    from scorekeeper.worker.last_position import LastPositionLogits

log = logging.getLogger(__name__)


def resolve_dtype(name: str, device: torch.device, bf16_supported: bool | None = None, cpu_flags: set[str] | None = None) -> torch.dtype:
    """The compute dtype: `auto` is bfloat16 on a GPU that supports it, else float32.

    A reduced dtype on a CPU is refused where the CPU only emulates it: without its instructions
    torch converts every operand, so it is slower than float32 as well as less exact. Refusing
    (ModelError, exit 2) rather than warning: a warning scrolls by, and the run would be both
    slower and worse than the default. (`bf16_supported` defaults to asking the device and
    `cpu_flags` to /proc/cpuinfo; tests give them to check both decisions.)"""
    import torch

    if name == "auto":
        if bf16_supported is None:
            bf16_supported = device.type == "cuda" and torch.cuda.is_bf16_supported()
        if device.type == "cuda" and bf16_supported:
            return torch.bfloat16
        return torch.float32
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
    if device.type == "cpu" and name in CPU_NATIVE_FLAGS:
        flags = cpu_flags if cpu_flags is not None else cpu_feature_flags()
        if not flags & CPU_NATIVE_FLAGS[name]:
            raise ModelError(
                f"dtype {name} is emulated on this CPU (it has none of {', '.join(sorted(CPU_NATIVE_FLAGS[name]))}): "
                "slower than float32 and less exact; use --dtype float32 (or auto)"
            )
    return dtype


# The CPU flags (Linux /proc/cpuinfo) of native instructions for a reduced dtype: x86 AVX-512 and
# AMX, ARM's BF16 and half-precision arithmetic.
CPU_NATIVE_FLAGS = {
    "bfloat16": frozenset({"avx512_bf16", "amx_bf16", "bf16"}),
    "float16": frozenset({"avx512_fp16", "amx_fp16", "fphp"}),
}


def cpu_feature_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty where /proc/cpuinfo is not there)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return set()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    max_length: int
    pad_token_id: int
    labels: list[str]
    uses_token_type_ids: bool
    head: HeadKind = HeadKind.SINGLE_LABEL  # resolved from the job's choice and the config (scorekeeper.heads.resolve_head)
    # how a text becomes model inputs (windows.py): the tokenizer's frame around one text's
    # content (None: it frames texts otherwise), and the long-text settings (truncate unless told)
    frame: TextFrame | None = None
    windows: WindowSettings | None = None
    # the representation's sample (embeddings.py): read off the batches when set (replica mode)
    representation: Representation | None = None
    # the config's own pad_token_id before ensure_pad_token named one (None: the model has none, and
    # a decoder's head reads each row's last position, as transformers does for one row alone: SPEC 14)
    model_pad_token_id: int | None = None
    # a decoder without a pad id of its own: its logits read at each row's last position (the job
    # pads it with eos, which transformers' rule would skip at a row's end; last_position.py)
    last_position: LastPositionLogits | None = None
    # a head that reads each row's last eos (transformers' sequence-to-sequence heads, embeddings.py's
    # EOS): its eos id. transformers refuses a batch whose rows hold different numbers of eos, so rows
    # are batched by that number (replica.prepare_range): a text holding the eos string is scored as alone.
    eos_head_token_id: int | None = None

    def use_long_text(self, scoring) -> None:
        """Cut long texts as the job's ScoringSettings say (refused when the window has no room)."""
        if self.frame is None:
            if scoring.long_text != "truncate":
                text_frame(self.tokenizer)  # raises, saying how this tokenizer frames a text
            return
        self.windows = window_settings(scoring, self.max_length, self.frame)


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
    check_vocabulary(special, len(tokenizer), model_path)
    return tokenizer


def ensure_pad_token(tokenizer, config) -> int:
    """The id batches are right-padded with. Decoder checkpoints often ship without a pad token; pad
    with eos (or unk), as their cards do, and the config then names it too.

    The classifier finds each row's last real token by looking for the config's pad id, so batches
    are padded with the model's own pad id when its config has one, whatever the tokenizer's is: a
    row padded with another id would be read at a pad (docs/drift.md, "the position the head reads").
    """
    own = getattr(config, "pad_token_id", None)
    if tokenizer.pad_token_id is None:
        if getattr(config, "pad_token_id", None) is not None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(config.pad_token_id)
        elif tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif tokenizer.unk_token is not None:
            tokenizer.pad_token = tokenizer.unk_token
        else:
            raise ModelError("the tokenizer has no pad, eos or unk token to pad batches with")
    if own is None:
        config.pad_token_id = tokenizer.pad_token_id
        return int(tokenizer.pad_token_id)
    return int(own)


def load_model(
    model_path: str,
    adapter_path: str | None,
    *,
    merge_adapter: bool,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    max_length: int | None,
    head: HeadChoice = AUTO,
) -> LoadedModel:
    """Tokenizer + sequence-classification model (+ PEFT adapter), in eval mode on `device`."""
    from transformers import AutoConfig, AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # its "Loading weights" bar is noise on the run's stderr, once per process

    from scorekeeper.heads import resolve_head
    from scorekeeper.worker.embeddings import EOS, LAST, head_pooling
    from scorekeeper.worker.stages import unwrap_adapter

    check_safetensors_folder(model_path, "model")
    adapter = adapter_tensors(adapter_path) if adapter_path else {}
    tokenizer = load_tokenizer(model_path, trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise ModelError(f"cannot read the model config in {model_path}: {exc}") from exc
    described = {"id2label": dict(config.id2label), "num_labels": config.num_labels, "problem_type": config.problem_type}
    labels = labels_from_config(described, model_path)
    kind = resolve_head(head, described, model_path)  # the job's choice as a kind, once
    model_pad = getattr(config, "pad_token_id", None)  # the model's own, before the job names one
    pad_id = ensure_pad_token(tokenizer, config)
    for pad in (getattr(config, "pad_token_id", None), pad_id):
        check_pad_token(pad, getattr(config, "vocab_size", None), model_path)
    max_length = model_max_length(tokenizer, config, max_length)
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            model_path,
            config=config,
            dtype=dtype,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            output_loading_info=True,
        )
    except (ValueError, OSError) as exc:
        raise ModelError(f"cannot load a sequence-classification model from {model_path}: {first_error_line(exc)}") from exc
    supplied = adapter_supplies(set(adapter), read_config_of_adapter(adapter_path)) if adapter_path else set()
    check_loading_info(model_path, info, model.base_model_prefix, supplied)
    if adapter_path:
        model = attach_adapter(model, adapter_path, model_path, set(adapter), merge=merge_adapter)
    model.to(device)
    model.eval()
    frame = text_frame_or_none(tokenizer)
    pooling = head_pooling(unwrap_adapter(model))  # where the head reads: a pad-less decoder's last position, a row's last eos
    last_position = None
    if model_pad is None and pooling == LAST:
        from scorekeeper.worker.last_position import LastPositionLogits

        last_position = LastPositionLogits(model)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        max_length=max_length,
        pad_token_id=pad_id,
        model_pad_token_id=model_pad,
        last_position=last_position,
        eos_head_token_id=int(config.eos_token_id) if pooling == EOS else None,
        labels=labels,
        head=kind,
        uses_token_type_ids="token_type_ids" in getattr(tokenizer, "model_input_names", ()),
        frame=frame,
        windows=None if frame is None else WindowSettings(mode="truncate", window=window_size(max_length, frame.specials)),
    )


def check_loading_info(folder: str, info: dict, base_prefix: str, supplied: set[str]) -> None:
    """What is scored is exactly what is in the folder: refuse a model of which transformers had
    to initialise any tensor itself (absent from the weights, or there with another shape), unless
    the adapter supplies it (a trained head saved in the adapter). transformers only logs these and
    starts them at random: a different model in every process and every run, under one fingerprint."""
    missing = [k for k in info.get("missing_keys") or () if k not in supplied]
    missing += [k if isinstance(k, str) else str(k[0]) for k in info.get("mismatched_keys") or ()]
    if missing:
        head = [k for k in missing if not k.startswith(base_prefix + ".")]
        raise ModelError(missing_weights_message(folder, sorted(missing), head))


def adapter_tensors(adapter_path: str) -> dict[str, list[int]]:
    return tensors(check_safetensors_folder(adapter_path, "adapter"))


def read_config_of_adapter(adapter_path: str) -> dict:
    return read_json(os.path.join(adapter_path, "adapter_config.json"), missing_ok=True)


def attach_adapter(model, adapter_path: str, model_path: str, saved: set[str], *, merge: bool):
    """The model with the adapter applied, refused unless every tensor of the adapter is used and
    every module it adapts gets its weights (PEFT leaves a module it finds no weights for at its
    identity start and only warns)."""
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict

    try:
        model = PeftModel.from_pretrained(model, adapter_path, is_trainable=False)
    except KeyError as exc:  # PEFT looks up a tensor this model has and the adapter lacks
        raise ModelError(adapter_mismatch_message(adapter_path, model_path, f"it has no {exc.args[0]}, which this model needs")) from exc
    except Exception as exc:
        if "size mismatch" in str(exc) or "target" in str(exc):  # shapes of another model, modules it has not
            raise ModelError(adapter_mismatch_message(adapter_path, model_path, f"PEFT cannot apply it ({first_error_line(exc)})")) from exc
        raise ModelError(f"cannot apply the adapter in {adapter_path} to the model in {model_path}: {first_error_line(exc)}") from exc
    expected = set(get_peft_model_state_dict(model))
    lacking, unused = sorted(expected - saved), sorted(saved - expected)
    if lacking or unused:
        detail = f"it lacks {', '.join(lacking[:3])}" if lacking else f"this model has no place for its {', '.join(unused[:3])}"
        more = len(lacking or unused) - 3
        raise ModelError(adapter_mismatch_message(adapter_path, model_path, detail + (f" and {more} more" if more > 0 else "")))
    if merge:
        model = model.merge_and_unload()
    return model


def first_error_line(exc: BaseException) -> str:
    """The first line of an error that says more on the lines after it (PyTorch's load_state_dict
    lists every mismatched tensor on its own line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}" + (f" (and {len(lines) - 2} more)" if len(lines) > 2 else "")
    return lines[0] if lines else type(exc).__name__

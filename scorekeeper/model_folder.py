"""What a model folder (and its adapter) must hold, read from its files alone: no torch, no transformers.

The flow checks a folder with these rules before anything is written (tasks/open_run.py), so a
folder the scoring processes would refuse never gets a run folder, and the flow process never
imports torch. The scoring processes apply the same rules to what they load (worker/model.py),
where transformers can say more: every tensor the architecture needs, not only the head.

The weights are read from the safetensors headers (an 8-byte little-endian length, then that
many bytes of JSON naming each tensor); no tensor data is read.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Set
from types import SimpleNamespace
from typing import NoReturn

from scorekeeper.errors import InputError, ModelError
from scorekeeper.head_kind import HeadKind
from scorekeeper.long_text import aggregate_problem, window_problem
from scorekeeper.worker.families import find_family, pipeline_family

log = logging.getLogger(__name__)

# The files transformers and PEFT load the weights from (safetensors); anything else in the folder is not read.
WEIGHT_FILES = {"model": ("model.safetensors", "model.safetensors.index.json"), "adapter": ("adapter_model.safetensors",)}
PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
# Tokenizers report "no limit" as a huge number; anything above this is not a real maximum.
_NO_LIMIT = 1_000_000
# Staged rows the tokenizer is tried on before anything is scored (spread over the input).
SAMPLE_ROWS = 512
# A vocabulary with fewer ordinary (not special) tokens than this is not one a model was trained with.
_FEW_TOKENS = 100
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
# How PEFT names the tensors of an adapter for a sequence classifier in its file.
ADAPTER_PREFIX = "base_model.model."
LORA_PARTS = (".lora_A.", ".lora_B.", ".lora_embedding_A", ".lora_embedding_B", ".lora_magnitude_vector")


def check_model_folder(folder: str, *, max_length: int | None, mode: str, adapter_folder: str | None = None) -> list[str]:
    """Everything the scoring processes would refuse about the model that its files show, found
    before anything is written: weights that are not safetensors, a classifier without its head,
    no usable tokenizer, a label map that is not one name per output, a pad token outside the
    vocabulary, a max_length beyond the model's, an architecture pipeline mode cannot split.
    Returns the labels."""
    weights = check_safetensors_folder(folder, "model")
    config = read_config(folder)
    labels = labels_from_config(config, folder)
    if mode == "pipeline":
        pipeline_family(config.get("model_type"), _architecture(config))
    check_pad_token(config.get("pad_token_id"), config.get("vocab_size"), folder)
    base = tensors(weights)
    supplied: set[str] = set()
    if adapter_folder:
        adapter = tensors(check_safetensors_folder(adapter_folder, "adapter"))
        adapter_config = read_json(os.path.join(adapter_folder, "adapter_config.json"))
        check_adapter_fits(adapter_folder, folder, base, adapter, adapter_config, config.get("model_type"))
        supplied = adapter_supplies(set(adapter), adapter_config)
    check_head_weights(folder, config.get("model_type"), set(base), supplied)
    check_tokenizer_folder(folder)
    declared_max_length(folder, max_length)
    return labels


# -- weights -------------------------------------------------------------------------------------


def check_safetensors_folder(path: str, what: str = "model") -> list[str]:
    """The safetensors files the folder's weights are loaded from (shards included), or a
    ModelError: pickled weights (loading a pickle can run code), or safetensors files that are not
    the ones transformers or PEFT would load (they would fall back to the pickle, or fail)."""
    if not os.path.isdir(path):
        raise ModelError(f"{what} folder not found: {path}")
    names = sorted(os.listdir(path))
    expected = WEIGHT_FILES[what]
    if expected[-1].endswith(".index.json") and expected[-1] in names:
        return _shards(path, expected[-1], names)
    if expected[0] in names:
        return [os.path.join(path, expected[0])]
    pickled = [n for n in names if n.endswith(PICKLED_SUFFIXES)]
    others = [n for n in names if n.endswith(".safetensors")]
    loads = " or ".join(expected)
    if pickled and others:
        raise ModelError(
            f"{what} folder {path} holds pickled weights ({', '.join(pickled)}) and {', '.join(others)}, which is not "
            f"the {what}'s weights file: the {what} is loaded from {loads}, and scorekeeper loads safetensors only. "
            f"Save the {what} with save_pretrained(folder) (safetensors by default), or rename the right file to {expected[0]}"
        )
    if pickled:
        raise ModelError(
            f"{what} folder {path} has only pickled weights ({', '.join(pickled)}); "
            "scorekeeper loads safetensors only: convert them with save_pretrained(safe_serialization=True)"
        )
    if others:
        raise ModelError(
            f"{what} folder {path} has no {loads} (its safetensors files: {', '.join(others)}): the {what}'s weights "
            f"are loaded from {loads}; save the {what} with save_pretrained(folder)"
        )
    raise ModelError(f"{what} folder {path} holds no safetensors weights (files: {', '.join(names) or 'none'})")


def _shards(path: str, index_name: str, names: list[str]) -> list[str]:
    index = read_json(os.path.join(path, index_name))
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"cannot read {os.path.join(path, index_name)}: it has no weight_map naming each tensor's file")
    shards = sorted(set(map(str, weight_map.values())))
    absent = [s for s in shards if s not in names]
    if absent:
        raise ModelError(f"model folder {path}: {index_name} names shards that are not in the folder: {', '.join(absent[:5])}")
    return [os.path.join(path, s) for s in shards]


def tensors(files: list[str]) -> dict[str, list[int]]:
    """The shape of every tensor the safetensors files hold, by name, from their headers alone."""
    found: dict[str, list[int]] = {}
    for file in files:
        found.update((k, list(v.get("shape", []))) for k, v in _header(file).items() if k != "__metadata__" and isinstance(v, dict))
    return found


def _header(file: str) -> dict:
    try:
        with open(file, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > os.fstat(f.fileno()).st_size - 8:
                raise ValueError(f"its header length ({length} bytes) is beyond the file's end")
            header = json.loads(f.read(length))
    except (OSError, ValueError, struct.error) as exc:
        raise ModelError(f"cannot read the weights in {file}: not a safetensors file ({exc})") from None
    if not isinstance(header, dict):
        raise ModelError(f"cannot read the weights in {file}: not a safetensors file (its header is not a JSON object)")
    return header


# -- adapters ------------------------------------------------------------------------------------


def _saved_copy_of(name: str, adapter_config: dict) -> str | None:
    """The base tensor an adapter tensor is a whole trained copy of (PEFT's modules_to_save, the
    head of a SEQ_CLS adapter: `base_model.model.classifier.weight` -> `classifier.weight`)."""
    if not name.startswith(ADAPTER_PREFIX) or any(part in name for part in LORA_PARTS):
        return None
    module, _, _ = name[len(ADAPTER_PREFIX) :].rpartition(".")
    saved = adapter_config.get("modules_to_save") or []
    if any(module == m or module.endswith("." + m) for m in saved if isinstance(m, str)):
        return name[len(ADAPTER_PREFIX) :]
    return None


def adapter_supplies(adapter_tensors: set[str], adapter_config: dict) -> set[str]:
    """The base model's tensors the adapter replaces with a trained copy of its own."""
    return {copy for name in adapter_tensors if (copy := _saved_copy_of(name, adapter_config)) is not None}


def adapter_mismatch_message(adapter_folder: str, model_folder: str, detail: str) -> str:
    """One line: the adapter was trained for another base model (the flow and the scoring processes say it alike)."""
    trained_on = read_json(os.path.join(adapter_folder, "adapter_config.json"), missing_ok=True).get("base_model_name_or_path")
    named = f" (its adapter_config.json names {trained_on})" if trained_on else ""
    return (
        f"the adapter in {adapter_folder} does not fit the model in {model_folder}: {detail}. It was trained for another "
        f"base model{named}; give the model it was trained on"
    )


def check_adapter_fits(
    adapter_folder: str, model_folder: str, base: dict[str, list[int]], adapter: dict[str, list[int]], adapter_config: dict,
    model_type: str | None,
) -> None:  # fmt: skip
    """Refuse a LoRA adapter whose tensors do not fit the base model's: a module the model does not
    have, a shape of another width, a saved head of another size, or a module the adapter's own
    target_modules name in this model with no weights in it (PEFT would leave it at its identity
    start and only warn: the adapter would be applied in part)."""

    def base_name(name: str) -> str | None:
        # A base saved without its head (BertModel) names its tensors without the classifier's prefix ("bert.").
        return name if name in base else (rest if (rest := name.partition(".")[2]) in base else None)

    def refuse(detail: str) -> NoReturn:
        raise ModelError(adapter_mismatch_message(adapter_folder, model_folder, detail))

    family = find_family(model_type)
    adapted: set[str] = set()
    for name, shape in sorted(adapter.items()):
        copy = _saved_copy_of(name, adapter_config)
        if copy is not None:
            theirs = base_name(copy)
            if theirs is None and family is not None and copy not in family.head_weights:
                refuse(f"it holds a trained {copy}, which this model does not have")
            if theirs is not None and base[theirs] != shape:
                refuse(f"its {copy} is {_shape(shape)} but the model's is {_shape(base[theirs])}")
            continue
        lora = next((part for part in (".lora_A.", ".lora_B.") if part in name), None)
        if lora is None or not name.startswith(ADAPTER_PREFIX):
            continue  # other adapter kinds are checked by the scoring processes, with PEFT
        module = name[len(ADAPTER_PREFIX) : name.index(lora)]
        weight = base_name(module + ".weight")
        if weight is None:
            refuse(f"it adapts {module}, which this model does not have")
        adapted.add(weight.removesuffix(".weight"))
        base_shape = base[weight]
        width = shape[1] if lora == ".lora_A." else shape[0]  # lora_A: (rank, in); lora_B: (out, rank)
        expected = base_shape[1] if lora == ".lora_A." else base_shape[0]
        if len(shape) != 2 or len(base_shape) != 2 or width != expected:
            refuse(f"its {name.removeprefix(ADAPTER_PREFIX)} is {_shape(shape)} but the model's {weight} is {_shape(base_shape)}")
    targets = adapter_config.get("target_modules")
    plain = not any(adapter_config.get(k) for k in ("layers_to_transform", "layers_pattern", "exclude_modules", "target_parameters"))
    if adapted and isinstance(targets, list) and plain:
        wanted = {
            n.removesuffix(".weight")
            for n in base
            if n.endswith(".weight") and any(n.removesuffix(".weight") == t or n.removesuffix(".weight").endswith("." + t) for t in targets)
        }
        unadapted = sorted(wanted - adapted)
        if unadapted:
            shown = ", ".join(unadapted[:3]) + (f" and {len(unadapted) - 3} more" if len(unadapted) > 3 else "")
            refuse(f"it holds no weights for {len(unadapted)} module(s) of this model that its target_modules name ({shown})")


def _shape(shape: list[int]) -> str:
    return "x".join(map(str, shape)) or "a scalar"


def check_head_weights(folder: str, model_type: str | None, names: set[str], supplied: Set[str] = frozenset()) -> None:
    """Refuse a folder whose weights lack the classification head its family declares (and no
    adapter supplies it): transformers would start that head at random, a different one in every
    process and every run, and score with it. Families the registry does not know are checked by
    the scoring processes, from transformers' loading info."""
    family = find_family(model_type)
    if family is None:
        return
    missing = [n for n in family.head_weights if n not in names and n not in supplied]
    if missing:
        raise ModelError(missing_weights_message(folder, missing, missing))


def missing_weights_message(folder: str, missing: list[str], head: list[str]) -> str:
    """One line naming the tensors a model folder lacks (`head`: those of them that are the
    classification head); the flow and the scoring processes say it the same way."""
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    what = "; it is a base model without a trained classification head" if head and len(head) == len(missing) else ""
    return (
        f"model folder {folder} lacks weights the classifier needs ({shown}){what}. transformers would initialise them "
        "at random, differently in every scoring process and every run; give a folder that holds the trained "
        "classifier (save_pretrained of the fine-tuned model), or an adapter that holds its head"
    )


def check_pad_token(pad_token_id, vocab_size, folder: str) -> None:
    """Refuse a pad token id outside the vocabulary: the embedding has no row for it."""
    if pad_token_id is None or vocab_size is None:
        return
    if not isinstance(pad_token_id, int) or not 0 <= pad_token_id < int(vocab_size):
        raise ModelError(
            f"model in {folder}: pad token id {pad_token_id!r} is outside its vocabulary of {vocab_size} tokens "
            f"(ids 0..{int(vocab_size) - 1}); set pad_token_id in config.json (and the tokenizer's pad token) to a token of it"
        )


def _architecture(config: dict) -> str | None:
    architectures = config.get("architectures")
    return str(architectures[0]) if isinstance(architectures, list) and architectures else None


# -- tokenizer -----------------------------------------------------------------------------------


def check_vocabulary(special_ids: set[int], vocab_size: int, folder: str) -> None:
    """Refuse a tokenizer whose vocabulary holds nothing but special tokens: it encodes any text as
    unknown or special tokens only.

    transformers 5 builds a tokenizer even from a folder without tokenizer files (or from a
    vocabulary file it ignores): it holds only the special tokens and maps every word to the
    unknown token, and the model then scores every row from the same few ids, without a warning."""
    if vocab_size <= len(special_ids):
        raise ModelError(
            f"the tokenizer in {folder} cannot encode any text: its vocabulary has {vocab_size} token(s), "
            f"{len(special_ids)} of them special, so every word becomes an unknown or special token. "
            f"The folder needs the tokenizer's files ({', '.join(TOKENIZER_FILES[:3])}, ...): save them with "
            "tokenizer.save_pretrained(folder)"
        )


def check_rows_encode(encoded: list[tuple[int, str, list[int], list[str]]], special_ids: set[int], vocab_size: int, folder: str) -> None:
    """Refuse a tokenizer that turns the input's own rows into nothing but unknown or special
    tokens. `encoded` is a sample of the staged rows: (row_index, text, ids, tokens) each, ids
    without the special tokens the tokenizer adds around a text. Rows that encode to nothing
    (empty texts) are not judged; one row with an ordinary token is enough to pass."""
    judged = [row for row in encoded if row[2]]
    if not judged or any(i not in special_ids for _, _, ids, _ in judged for i in ids):
        return
    row_index, text, _, tokens = judged[0]
    shown = text if len(text) <= 60 else text[:57] + "..."
    pieces = " ".join(tokens[:6]) + (" ..." if len(tokens) > 6 else "")
    ordinary = vocab_size - len(special_ids)
    advice = (
        f"its vocabulary holds only {ordinary} ordinary token(s): the folder may lack the tokenizer the model was "
        "trained with (save it with tokenizer.save_pretrained(folder))"
        if ordinary < _FEW_TOKENS
        else f"its vocabulary ({vocab_size} tokens) does not cover this text: give the tokenizer the model was trained "
        "with, or check that text_column names the column holding the text"
    )
    raise ModelError(
        f"the tokenizer in {folder} turns every one of the {len(judged)} input rows it was tried on (a sample of the "
        f"staged rows) into unknown or special tokens only, e.g. row_index {row_index} {shown!r} -> {pieces}; {advice}"
    )


def folder_tokenizer(folder: str):
    """The folder's tokenizer.json read with the `tokenizers` library (no transformers import), with
    its special and unknown token ids; None when the folder has none this library reads (the
    scoring processes check those with transformers)."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(path):
        return None
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:  # a version of the format this library cannot read: transformers may
        log.info("not checking %s/tokenizer.json here (%s); the scoring processes check it", folder, exc)
        return None
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    unk = getattr(tokenizer.model, "unk_token", None)
    if isinstance(unk, str) and (unk_id := tokenizer.token_to_id(unk)) is not None:
        special.add(unk_id)
    return tokenizer, special


def check_tokenizer_folder(folder: str) -> None:
    """The flow's check, before anything is written: the folder has tokenizer files, and a
    tokenizer.json's vocabulary holds more than special tokens. Whether it encodes the input is
    judged on the staged rows (check_tokenizer_on_rows)."""
    names = set(os.listdir(folder))
    if not names & set(TOKENIZER_FILES) and not any(n.endswith(".model") for n in names):
        raise ModelError(
            f"model folder {folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}): without them the "
            "tokenizer maps every word to the unknown token. Save the tokenizer into it with tokenizer.save_pretrained(folder)"
        )
    found = folder_tokenizer(folder)
    if found is not None:
        tokenizer, special = found
        check_vocabulary(special, tokenizer.get_vocab_size(with_added_tokens=True), folder)


def check_tokenizer_on_rows(folder: str, rows: list[tuple[int, str, str | None]]) -> None:
    """The staged rows' check (tasks/read.py, before the staged input is published): a sample of
    (row_index, text, text_pair) encoded with the folder's tokenizer.json must hold an ordinary token."""
    found = folder_tokenizer(folder)
    if found is None or not rows:
        return
    tokenizer, special = found
    encodings = tokenizer.encode_batch([(text, pair) if pair is not None else text for _, text, pair in rows], add_special_tokens=False)
    encoded = [(i, text, e.ids, e.tokens) for (i, text, _), e in zip(rows, encodings, strict=True)]
    check_rows_encode(encoded, special, tokenizer.get_vocab_size(with_added_tokens=True), folder)


def special_tokens_per_text(folder: str) -> int | None:
    """s: the special tokens the folder's tokenizer.json adds to one text (None without one, or in
    a format the `tokenizers` library cannot read: the scoring processes check then)."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(path):
        return None
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(path)
    except Exception:  # a version of the format this library cannot read: transformers may
        return None
    return tokenizer.post_processor.num_special_tokens_to_add(False) if tokenizer.post_processor is not None else 0


def check_long_text(folder: str, head: str, request) -> None:
    """The long-text parameters against the model, before anything is written: an aggregation the
    head cannot have, a head or an overlap that leaves the window no room (scorekeeper/long_text.py)."""
    problem = aggregate_problem(request.long_text, request.chunk_aggregate, head)
    specials = special_tokens_per_text(folder)
    if problem is None and specials is not None:
        max_length = declared_max_length(folder, request.max_length)
        problem = window_problem(request.long_text, request.head_tokens, request.chunk_overlap, max_length, specials)
    if problem:
        raise InputError(problem)


# -- max length ----------------------------------------------------------------------------------


def declared_max_length(folder: str, requested: int | None) -> int:
    """model_max_length from the folder's config.json and tokenizer_config.json alone (the flow
    checks --max-length with it before anything is written; the worker again with the loaded objects)."""
    config = read_config(folder)
    tokenizer_config = read_json(os.path.join(folder, "tokenizer_config.json"), missing_ok=True)
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


# -- labels --------------------------------------------------------------------------------------


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


def head_of(folder: str, requested: str) -> HeadKind:
    """The kind of head the folder's config.json and `requested` make (scorekeeper.heads), without loading weights."""
    from scorekeeper.heads import resolve_head

    return resolve_head(requested, read_config(folder), folder)


# -- files ---------------------------------------------------------------------------------------


def read_config(folder: str) -> dict:
    return read_json(os.path.join(folder, "config.json"))


def read_json(path: str, missing_ok: bool = False) -> dict:
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

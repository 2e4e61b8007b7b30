"""Tests for the tests' model builders (tests/models.py: tiny offline models, tokenizers, LoRA adapters) and the demo build (demo_data, demo_model)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from tests import models as demo  # noqa: E402

# peft calls a transformers API that transformers 5 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")

REPO_ROOT = Path(__file__).resolve().parents[1]
BATCH = [
    "The kettle is great, I love it.",
    "Awful screen. I regret buying it, do not buy!",
    "ok",
    "Three stars: the novel is average, 42 pages of nothing special.",
]


@pytest.fixture(autouse=True, scope="module")
def _quiet_single_threaded():
    """No progress bars; one torch thread (tiny models gain nothing from more, and an
    oversubscribed torch on a shared 2-core machine is several times slower)."""
    from transformers.utils import logging as hf_logging

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    yield
    hf_logging.enable_progress_bar()
    torch.set_num_threads(threads)


def _load(path):
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path))
    model.eval()
    return tok, model


def _ready_for_batches(tok, model):
    """What a scorer has to do for decoder checkpoints that ship without a pad token."""
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """One tiny model per family, built once for the module."""
    root = tmp_path_factory.mktemp("tiny")
    return {family: demo.build_tiny_classifier(root / family, family, seed=0) for family in demo.FAMILIES}


# ------------------------------------------------------------------------------------------
# tokenizers
# ------------------------------------------------------------------------------------------


def test_wordpiece_tokenizer(tmp_path):
    tok = demo.build_tokenizer(tmp_path, demo.default_corpus(200), "wordpiece")
    assert [tok.convert_tokens_to_ids(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert tok.pad_token == "[PAD]" and tok.pad_token_id == 0
    assert tok.model_max_length == 128
    enc = tok("The KETTLE is great", "It Works")
    ids = enc["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and ids.count(tok.sep_token_id) == 2
    first_sep = ids.index(tok.sep_token_id)
    assert set(enc["token_type_ids"][: first_sep + 1]) == {0}
    assert set(enc["token_type_ids"][first_sep + 1 :]) == {1}
    # lowercasing normalizer; digits are in the alphabet even if the corpus has none
    assert tok("KETTLE")["input_ids"] == tok("kettle")["input_ids"]
    assert tok.unk_token_id not in tok("order 12345 arrived!")["input_ids"]
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert reloaded("The KETTLE is great", "It Works")["input_ids"] == ids


def test_bpe_tokenizer_has_no_pad(tmp_path):
    tok = demo.build_tokenizer(tmp_path, demo.default_corpus(200), "bpe")
    assert tok.pad_token is None and tok.pad_token_id is None
    assert tok.bos_token == "<s>" and tok.eos_token == "</s>"
    ids = tok("The kettle is great.")["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[-1] != tok.eos_token_id
    assert "token_type_ids" not in tok("The kettle is great.")
    assert tok.decode(ids, skip_special_tokens=True) == "The kettle is great."
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert reloaded.pad_token is None
    assert reloaded("The kettle is great.")["input_ids"] == ids
    with pytest.raises(ValueError):
        demo.build_tokenizer(tmp_path / "x", ["a"], "sentencepiece")


# ------------------------------------------------------------------------------------------
# tiny classifiers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", demo.FAMILIES)
def test_tiny_classifier_round_trip(tiny_models, family):
    path = tiny_models[family]
    files = sorted(os.listdir(path))
    assert "model.safetensors" in files and "config.json" in files and "tokenizer.json" in files
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pth", ".ckpt"))]

    tok, model = _load(path)
    cfg = model.config
    assert cfg.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert cfg.label2id == {"negative": 0, "neutral": 1, "positive": 2}
    assert cfg.vocab_size == len(tok)
    assert 32 <= cfg.hidden_size <= 64
    if family in demo.DECODER_FAMILIES:
        assert tok.pad_token is None, "decoder tokenizers must ship without a pad token"
        assert cfg.pad_token_id is None
        assert cfg.bos_token_id == tok.bos_token_id and cfg.eos_token_id == tok.eos_token_id
        assert cfg.num_key_value_heads < cfg.num_attention_heads  # grouped-query attention
    else:
        assert tok.pad_token_id == 0 and cfg.pad_token_id == 0
    if family == "minilm":
        assert cfg.model_type == "bert" and cfg.num_hidden_layers >= 3

    _ready_for_batches(tok, model)
    enc = tok(BATCH, padding=True, truncation=True, return_tensors="pt")
    assert int(enc["input_ids"].max()) < cfg.vocab_size
    with torch.no_grad():
        logits = model(**enc).logits
        singles = torch.cat([model(**tok([t], return_tensors="pt")).logits for t in BATCH])
    assert logits.shape == (len(BATCH), 3)
    assert torch.isfinite(logits).all()
    # padding does not change a row's logits (right padding, pad = eos for decoders)
    torch.testing.assert_close(logits, singles, atol=1e-4, rtol=1e-4)
    # inputs truncated to model_max_length fit the position embeddings (RoBERTa needs +2)
    long = tok([" ".join(["the kettle is great"] * 100)], truncation=True, return_tensors="pt")
    assert long["input_ids"].shape[1] == tok.model_max_length == 128
    with torch.no_grad():
        assert model(**long).logits.shape == (1, 3)
    # large init: predictions are far from uniform and differ between rows
    probs = logits.softmax(-1)
    assert float((probs - 1 / 3).abs().max()) > 0.05
    assert float((probs[0] - probs[1]).abs().max()) > 1e-3


def test_tiny_classifier_seeded_and_custom_labels(tmp_path, tiny_models):
    again = demo.build_tiny_classifier(tmp_path / "again", "llama", seed=0)
    other = demo.build_tiny_classifier(tmp_path / "other", "llama", seed=1, labels=("no", "yes"))
    from safetensors.torch import load_file

    w0 = load_file(str(Path(tiny_models["llama"]) / "model.safetensors"))
    w1 = load_file(str(Path(again) / "model.safetensors"))
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
    tok, model = _load(other)
    assert model.config.id2label == {0: "no", 1: "yes"}
    with torch.no_grad():
        assert model(**tok(["hello there"], return_tensors="pt")).logits.shape == (1, 2)
    with pytest.raises(ValueError):
        demo.build_tiny_classifier(tmp_path / "bad", "gpt9")


# ------------------------------------------------------------------------------------------
# LoRA adapters
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "llama", "qwen2"])
def test_lora_adapter_changes_logits(tmp_path, tiny_models, family):
    from peft import PeftModel

    base_dir = tiny_models[family]
    adapter_dir = demo.build_lora_adapter(base_dir, tmp_path / "adapter", seed=0)
    files = sorted(os.listdir(adapter_dir))
    assert "adapter_model.safetensors" in files and "adapter_config.json" in files
    assert not [f for f in files if f.endswith(".bin")]
    adapter_cfg = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    assert adapter_cfg["task_type"] == "SEQ_CLS"

    tok, base = _load(base_dir)
    _ready_for_batches(tok, base)
    enc = tok(BATCH, padding=True, return_tensors="pt")
    with torch.no_grad():
        base_logits = base(**enc).logits

    model = AutoModelForSequenceClassification.from_pretrained(str(base_dir))
    model.config.pad_token_id = tok.pad_token_id
    peft_model = PeftModel.from_pretrained(model, str(adapter_dir))
    peft_model.eval()
    with torch.no_grad():
        unmerged = peft_model(**enc).logits
    merged_model = peft_model.merge_and_unload()
    merged_model.eval()
    with torch.no_grad():
        merged = merged_model(**enc).logits

    assert unmerged.shape == base_logits.shape == (len(BATCH), 3)
    assert float((unmerged - base_logits).abs().max()) > 0.05, "the adapter must change the logits"
    torch.testing.assert_close(merged, unmerged, atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------
# demo: generated reviews, all-MiniLM-L6-v2 + LoRA (a small build of the same recipe)
# ------------------------------------------------------------------------------------------

SMALL = dict(train_rows=240, test_rows=200, epochs=2, threads=1)


def test_demo_data_is_deterministic_labelled_and_ambiguous():
    from scorekeeper import demo_data

    rows = demo_data.generate(2000, seed=0, split="test")
    assert rows == demo_data.generate(2000, seed=0, split="test")
    assert rows != demo_data.generate(2000, seed=1, split="test")
    assert all(list(r) == list(demo_data.COLUMNS) for r in rows)
    assert rows[0]["review_id"] == "r00001" and len({r["review_id"] for r in rows}) == len(rows)
    assert {r["label"] for r in rows} == set(demo_data.TOPICS)
    assert {r["category"] for r in rows} == set(demo_data.CATEGORIES)
    assert {r["sentiment"] for r in rows} == {"positive", "negative"}
    assert {r["length"] for r in rows} == {"short", "medium", "long"}
    assert all(r["length"] == demo_data.length_bucket(r["text"]) and r["text"].strip() for r in rows)
    # Ambiguous on purpose: the same vague text carries different labels.
    labels_of = {}
    for r in rows:
        labels_of.setdefault(r["text"], set()).add(r["label"])
    assert any(len(labels) > 1 for labels in labels_of.values())
    # The held-out split has phrasings the training split never uses.
    train_text = " ".join(r["text"] for r in demo_data.generate(2000, seed=1, split="train")).lower()
    unseen = [c for t in demo_data._CLAUSES.values() for v in t.values() for c in v[demo_data.TRAIN_PHRASINGS :] if "{" not in c]
    assert unseen and not any(c in train_text for c in unseen)
    assert any(c in r["text"].lower() for c in unseen for r in rows)
    with pytest.raises(ValueError):
        demo_data.generate(1, split="validation")


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    from scorekeeper.demo_model import build_demo

    out = tmp_path_factory.mktemp("demo")
    start = time.time()
    build_demo(out, **SMALL)
    return out, time.time() - start


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # builds the real MiniLM demo (a fine-tune)
def test_small_demo_folders(small_demo):
    from scorekeeper import demo_data

    out, seconds = small_demo
    assert seconds < 240, f"small demo build took {seconds:.0f}s"
    test, train = _rows(out / "data" / "reviews.csv"), _rows(out / "train" / "reviews.csv")
    assert (len(test), len(train)) == (SMALL["test_rows"], SMALL["train_rows"])
    assert list(test[0]) == list(demo_data.COLUMNS)
    assert not {r["review_id"] for r in test} & {r["review_id"] for r in train}
    for folder in ("model", "adapter", "adapter-epoch1"):
        assert not [f for f in os.listdir(out / folder) if f.endswith((".bin", ".pt", ".pth"))], folder
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (384, 6, 30522)
    assert config["id2label"] == {str(i): name for i, name in enumerate(demo_data.TOPICS)}
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["task_type"] == "SEQ_CLS" and "classifier" in adapter["modules_to_save"]
    assert adapter["base_model_name_or_path"] == "sentence-transformers/all-MiniLM-L6-v2"
    tok = AutoTokenizer.from_pretrained(str(out / "model"))
    assert tok.unk_token_id not in tok("The courier left the box out in the rain")["input_ids"]

    # The encoder is the real pretrained one: its weights equal the package's, bit for bit.
    from safetensors.torch import load_file

    from scorekeeper.demo_model import base_model_dir

    ours, theirs = load_file(str(out / "model" / "model.safetensors")), load_file(str(base_model_dir() / "model.safetensors"))
    layer = "encoder.layer.5.attention.self.query.weight"
    assert torch.equal(ours["bert." + layer], theirs[layer])

    manifest = json.loads((out / "demo.json").read_text())
    first, last = manifest["epochs"]
    assert first["saved"] == ["adapter-epoch1"] and last["saved"] == ["adapter"]
    assert last["train_loss"] < first["train_loss"]


@pytest.mark.slow  # builds the real MiniLM demo (a fine-tune)
def test_adapter_loading_reproduces_training_logits(small_demo):
    """scorekeeper's loader (base folder + adapter, merged or not) gives the logits training saw."""
    from scorekeeper.worker.model import load_model

    out, _ = small_demo
    manifest = json.loads((out / "demo.json").read_text())
    by_id = {r["review_id"]: r["text"] for r in _rows(out / "data" / "reviews.csv")}
    texts = [by_id[i] for i in manifest["check_ids"]]
    logits = {}
    for record in manifest["epochs"]:
        folder = record["saved"][0]
        want = torch.tensor(record["check_logits"], dtype=torch.float64)
        for merge in (False, True):
            loaded = load_model(
                str(out / "model"),
                str(out / folder),
                merge_adapter=merge,
                dtype=torch.float32,
                device=torch.device("cpu"),
                trust_remote_code=False,
                max_length=None,
            )
            with torch.no_grad():
                got = loaded.model(**loaded.tokenizer(texts, padding=True, return_tensors="pt")).logits.double()
            torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        logits[folder] = want
    assert float((logits["adapter"] - logits["adapter-epoch1"]).abs().max()) > 1e-3, "the two checkpoints must differ"


@pytest.mark.slow  # builds the real MiniLM demo (a fine-tune)
def test_demo_build_is_cached(small_demo):
    from scorekeeper.demo_model import build_demo, demo_is_complete, recipe

    out, _ = small_demo
    weights = out / "adapter" / "adapter_model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_demo(out, **SMALL) == out
    assert weights.stat().st_mtime_ns == before
    spec = {k: v for k, v in SMALL.items() if k != "threads"}
    assert demo_is_complete(out, recipe(**spec))
    assert not demo_is_complete(out, recipe(**{**spec, "seed": 1}))  # another recipe would rebuild
    assert not demo_is_complete(out / "nowhere", recipe(**spec))


@pytest.mark.integration
@pytest.mark.slow  # builds the real MiniLM demo (a fine-tune)
def test_demo_scored_through_the_cli(small_demo, tmp_path):
    """The command setup.sh runs, on the small demo: the adapter's predictions, sliced three ways.
    Pointed at the session's Prefect server (the CLI's own temporary one: tests/test_flow_cli.py)."""
    from tests import prefect_session

    out, _ = small_demo
    env = prefect_session.cli_environment({**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")})
    scorekeeper = str(Path(sys.executable).with_name("scorekeeper"))
    command = [scorekeeper, "run", "--input-uri", str(out / "data" / "reviews.csv"), "--model-uri", str(out / "model")]
    command += ["--adapter-uri", str(out / "adapter"), "--output-uri", str(tmp_path / "runs"), "--run-name", "small"]
    command += ["--id-column", "review_id", "--slice-columns", "category,sentiment,length"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    import pyarrow.parquet as pq

    run = tmp_path / "runs" / "small"
    table = pq.read_table(run / "predictions.parquet").to_pylist()
    manifest = json.loads((out / "demo.json").read_text())
    probs = {r["id"]: r["probabilities"] for r in table}
    want = torch.tensor(manifest["epochs"][-1]["check_logits"], dtype=torch.float64).softmax(-1)
    got = torch.tensor([probs[i] for i in manifest["check_ids"]], dtype=torch.float64)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

    rows = _rows(out / "data" / "reviews.csv")
    truth = {r["review_id"]: r["label"] for r in rows}
    accuracy = sum(r["predicted_label"] == truth[r["id"]] for r in table) / len(rows)
    metrics = json.loads((run / "report" / "metrics.json").read_text())
    assert metrics["accuracy"] == pytest.approx(accuracy)
    majority = max(sum(r["label"] == label for r in rows) for label in set(truth.values())) / len(rows)
    assert accuracy > majority + 0.05, (accuracy, majority)  # 240 rows x 2 epochs already learn something
    assert set(metrics["slices"]) == {"category", "sentiment", "length"}


# ------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------


def test_cli_tiny_in_process(tmp_path, capsys):
    assert demo.main(["tiny", str(tmp_path / "m"), "--family", "llama", "--labels", "a,b,c,d"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert Path(printed) == (tmp_path / "m").resolve()
    assert json.loads((tmp_path / "m" / "config.json").read_text())["id2label"]["3"] == "d"


def test_cli_module_entry_point_is_reproducible(tmp_path, tiny_models):
    """`python -m tests.models tiny` works, and a fresh process builds byte-identical files.

    (tokenizers' own WordPieceTrainer is not reproducible across processes; tests/models.py avoids it.)
    """
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.models", "tiny", str(tmp_path / "bert"), "--family", "bert"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO_ROOT),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str((tmp_path / "bert").resolve())
    for name in ("tokenizer.json", "config.json", "model.safetensors"):
        fresh = (tmp_path / "bert" / name).read_bytes()
        assert fresh == (Path(tiny_models["bert"]) / name).read_bytes(), name

"""Long documents scored end to end by real `accelerate launch` processes on CPU: every row's
prediction equals the one built here from the definition (each window made from the tokenizer's
content tokens and frame, scored alone and unpadded by plain transformers, the raw outputs
aggregated in float64, then the head's activation), for the three head kinds, an encoder and a
decoder, replica and pipeline mode, with overlap and at the window cap; the length columns,
scoring.long_text and length_impact equal their definitions; a resume that changes long_text is
refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import make_rows, needs_native, run_flow, write_rows
from tests.test_long_text import expected_windows

pytestmark = pytest.mark.integration

TOLERANCE = 1e-4  # batched and padded windows against one unpadded window at a time (float32 logits)
MAX_LENGTH = 16
ML_LABELS = ["toxic", "spam", "off_topic", "praise"]


@pytest.fixture(scope="module")
def long_models(tmp_path_factory):
    from tests.models import build_multi_label_classifier, build_regression_model, build_tiny_classifier

    root = tmp_path_factory.mktemp("long_models")
    return {
        "bert": str(build_tiny_classifier(root / "bert", "bert", seed=61)),
        "multi_label": str(build_multi_label_classifier(root / "ml", "bert", labels=ML_LABELS, seed=62)),
        "regression": str(build_regression_model(root / "reward", "llama", seed=63)),
    }


def reference(model_dir: str, texts: list[str], head: str, mode: str, head_tokens=128, overlap=0, cap=64, how="mean", adapter=None):
    """Each row from its windows, built and scored one at a time with transformers directly (an
    adapter unmerged); returns the head's values and the windows per row."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).eval()
    framed = tokenizer("good", return_special_tokens_mask=True)
    mask, ids = framed["special_tokens_mask"], framed["input_ids"]
    lead = mask.index(0)
    trail = mask[::-1].index(0)
    prefix, suffix = ids[:lead], ids[len(ids) - trail :]
    w = MAX_LENGTH - len(prefix) - len(suffix)
    values, counts = [], []
    with torch.no_grad():
        for text in texts:
            c = tokenizer(text, add_special_tokens=False)["input_ids"]
            windows, _ = expected_windows(c, mode, w, head_tokens, overlap, cap)
            raw = np.stack([model(input_ids=torch.tensor([prefix + x + suffix])).logits.double()[0].numpy() for x in windows])
            z = raw.mean(0) if how == "mean" else raw.max(0)
            if head == "single_label":
                z = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            elif head == "multi_label":
                z = 1 / (1 + np.exp(-z))
            values.append(z)
            counts.append(len(windows))
    return np.stack(values), np.array(counts), w, len(prefix) + len(suffix), tokenizer


def _values(table, column: str) -> np.ndarray:
    return np.array(table.column(column).to_pylist(), dtype=np.float64).reshape(len(table), -1)


def _check_lengths(result, texts, tokenizer, specials, w, mode, counts, overlap=0, cap=64):
    """The length columns and scoring.long_text against their definitions."""
    table, long_text = result.predictions, result.metrics["scoring"]["long_text"]
    contents = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    lengths = np.array([len(c) for c in contents])
    assert table.schema.field("tokens").type == pa.int32() and table.schema.field("unknown_tokens").type == pa.int32()
    assert table.column("tokens").to_pylist() == (lengths + specials).tolist()
    unk = tokenizer.unk_token_id
    assert table.column("unknown_tokens").to_pylist() == [c.count(unk) if unk is not None else 0 for c in contents]
    windows = [expected_windows(c, mode, w, 128, overlap, cap)[0] for c in contents]
    scored = sum(len(x) for ws in windows for x in ws)
    assert long_text["mode"] == mode and long_text["max_length"] == MAX_LENGTH and long_text["window"] == w
    assert long_text["rows_over_length"] == int((lengths > w).sum()) > 0
    assert long_text["tokens_content"] == int(lengths.sum())
    assert long_text["tokens_scored"] == scored
    if mode == "chunk":
        assert table.column("chunks").to_pylist() == counts.tolist() and table.schema.field("chunks").type == pa.int32()
        assert long_text["chunks"] == int(counts.sum())
        assert long_text["windows_per_row"] == {str(k): int((counts == k).sum()) for k in sorted(set(counts.tolist()))}
        step = w - overlap
        needed = [1 + -(-(n - w) // step) if n > w else 1 for n in lengths]
        assert long_text["rows_capped"] == sum(k > cap for k in needed) > 0
        kept = [n if k <= cap else (cap - 1) * step + w for n, k in zip(lengths, needed)]
        assert long_text["tokens_dropped"] == int(lengths.sum() - sum(kept))
    else:
        assert "chunks" not in table.column_names and "chunks" not in long_text
        assert long_text["tokens_dropped"] == int(np.maximum(lengths - w, 0).sum())
    return lengths


def test_single_label_encoder_every_mode_the_resume_refused_and_the_comparison(tmp_path, long_models):
    rows = make_rows(14, seed=71, max_words=45)
    texts = [r["text"] for r in rows]
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    common = dict(
        input_uri=str(data), model_uri=long_models["bert"], output_uri=str(tmp_path / "runs"), id_column="review_id",
        rows_per_range=5, tokens_per_batch=64, max_length=MAX_LENGTH,
    )  # fmt: skip
    # 1 process: chunks on 2 replica processes are the multi-label test's
    chunked = run_flow(1, run_name="chunk", long_text="chunk", chunk_overlap=3, max_chunks=3, **common)
    want, counts, w, specials, tokenizer = reference(long_models["bert"], texts, "single_label", "chunk", overlap=3, cap=3)
    assert chunked.predictions.column("row_index").to_pylist() == list(range(14))
    assert np.abs(_values(chunked.predictions, "probabilities") - want).max() < TOLERANCE
    assert chunked.predictions.column("predicted_id").to_pylist() == want.argmax(1).tolist()
    lengths = _check_lengths(chunked, texts, tokenizer, specials, w, "chunk", counts, overlap=3, cap=3)
    # length_impact: accuracy within and over the window, recomputed from the predictions
    truth = np.array([["negative", "neutral", "positive"].index(r["label"]) for r in rows])
    right = want.argmax(1) == truth
    impact = chunked.metrics["length_impact"]
    for side, mask in (("within", lengths <= w), ("over", lengths > w)):
        assert impact[side]["rows"] == int(mask.sum())
        assert impact[side]["accuracy"] == pytest.approx(right[mask].mean(), abs=1e-12)
        low, high = impact[side]["accuracy_ci"]
        assert low <= impact[side]["accuracy"] <= high

    head_tail = run_flow(1, run_name="head_tail", long_text="head_tail", head_tokens=4, compare_to="chunk", **common)
    want, _, _, _, _ = reference(long_models["bert"], texts, "single_label", "head_tail", head_tokens=4)
    assert np.abs(_values(head_tail.predictions, "probabilities") - want).max() < TOLERANCE
    assert "accuracy" in head_tail.metrics["comparison"]["metric_tests"]  # the paired test says if the change is real
    assert head_tail.metrics["scoring"]["long_text"]["tokens_dropped"] == int(np.maximum(lengths - w, 0).sum())

    truncated = run_flow(1, run_name="truncate", **common)
    want, _, _, _, _ = reference(long_models["bert"], texts, "single_label", "truncate")
    assert np.abs(_values(truncated.predictions, "probabilities") - want).max() < TOLERANCE
    _check_lengths(truncated, texts, tokenizer, specials, w, "truncate", None)
    assert truncated.metrics["scoring"]["truncated"] == int((lengths > w).sum())
    with pytest.raises(Exception, match="long_text: 'truncate' then, 'chunk' now"):
        run_flow(1, run_name="truncate", long_text="chunk", **common)


def test_multi_label_chunks_with_overlap_at_the_cap_aggregated_by_max(tmp_path, long_models):
    from sklearn.metrics import f1_score

    rows = make_rows(12, seed=72, max_words=45)
    texts = [r["text"] for r in rows]
    rng = np.random.default_rng(3)
    truth = [[name for name in ML_LABELS if rng.random() < 0.4] for _ in rows]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": texts, "labels": pa.array(truth, pa.list_(pa.string()))}), path)
    result = run_flow(
        2, input_uri=str(path), model_uri=long_models["multi_label"], output_uri=str(tmp_path / "runs"), run_name="ml",
        label_column="labels", rows_per_range=4, tokens_per_batch=48, max_length=MAX_LENGTH,
        long_text="chunk", chunk_overlap=5, max_chunks=2, chunk_aggregate="max",
    )  # fmt: skip
    want, counts, w, specials, tokenizer = reference(long_models["multi_label"], texts, "multi_label", "chunk", overlap=5, cap=2, how="max")
    got = _values(result.predictions, "probabilities")
    assert np.abs(got - want).max() < TOLERANCE
    lengths = _check_lengths(result, texts, tokenizer, specials, w, "chunk", counts, overlap=5, cap=2)
    y = np.array([[name in t for name in ML_LABELS] for t in truth])
    p = got > 0.5
    impact = result.metrics["length_impact"]
    for side, mask in (("within", lengths <= w), ("over", lengths > w)):
        assert impact[side]["rows"] == int(mask.sum())
        assert impact[side]["micro_f1"] == pytest.approx(f1_score(y[mask], p[mask], average="micro", zero_division=0), abs=1e-12)


def test_regression_decoder_with_an_unmerged_adapter_in_pipeline_mode(tmp_path, long_models):
    from tests.models import build_lora_adapter

    adapter = str(build_lora_adapter(long_models["regression"], tmp_path / "adapter", seed=64))
    rows = make_rows(10, seed=73, max_words=45)
    texts = [r["text"] for r in rows]
    score = np.random.default_rng(4).normal(size=len(rows))
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": texts, "score": score}), path)
    result = run_flow(
        2, input_uri=str(path), model_uri=long_models["regression"], output_uri=str(tmp_path / "runs"), run_name="reg",
        label_column="score", rows_per_range=4, tokens_per_batch=48, max_length=MAX_LENGTH, mode="pipeline",
        long_text="chunk", chunk_overlap=2, max_chunks=3, adapter_uri=adapter, merge_adapter=False,
    )  # fmt: skip
    want, counts, w, specials, tokenizer = reference(
        long_models["regression"], texts, "regression", "chunk", overlap=2, cap=3, adapter=adapter
    )
    plain, _, _, _, _ = reference(long_models["regression"], texts, "regression", "chunk", overlap=2, cap=3)
    assert np.abs(plain - want).max() > 10 * TOLERANCE  # the adapter changes the predictions: its use is seen
    got = _values(result.predictions, "prediction")
    assert specials == 1  # the decoder's frame: a BOS before the content, nothing after
    assert np.abs(got - want).max() < TOLERANCE
    lengths = _check_lengths(result, texts, tokenizer, specials, w, "chunk", counts, overlap=2, cap=3)
    impact = result.metrics["length_impact"]
    for side, mask in (("within", lengths <= w), ("over", lengths > w)):
        assert impact[side]["rows"] == int(mask.sum())
        assert impact[side]["mae"] == pytest.approx(np.abs(got[mask, 0] - score[mask]).mean(), abs=1e-9)


def _gpt2_like(folder, texts: list[str]) -> str:
    """A tiny GPT-2 classifier whose tokenizer adds no special token (s = 0: windows of max_length)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2ForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>", model_max_length=64)
    fast.save_pretrained(folder)
    torch.manual_seed(5)
    config = GPT2Config(vocab_size=len(fast), n_positions=64, n_embd=32, n_layer=2, n_head=2, pad_token_id=fast.pad_token_id,
                        num_labels=3, id2label={0: "negative", 1: "neutral", 2: "positive"},
                        label2id={"negative": 0, "neutral": 1, "positive": 2}, initializer_range=0.3)  # fmt: skip
    GPT2ForSequenceClassification(config).eval().save_pretrained(folder)
    return str(folder)


def test_a_decoder_without_special_tokens_chunks_over_the_whole_window(tmp_path):
    rows = make_rows(9, seed=74, max_words=45)
    texts = [r["text"] for r in rows]
    model = _gpt2_like(tmp_path / "gpt2", [r["text"] for r in make_rows(200, seed=1)])
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    result = run_flow(
        1, input_uri=str(data), model_uri=model, output_uri=str(tmp_path / "runs"), run_name="g", label_column=None,
        rows_per_range=4, tokens_per_batch=64, max_length=MAX_LENGTH, long_text="chunk", chunk_overlap=4, max_chunks=4,
    )  # fmt: skip
    want, counts, w, specials, tokenizer = reference(model, texts, "single_label", "chunk", overlap=4, cap=4)
    assert specials == 0 and w == MAX_LENGTH  # nothing around a window: it holds max_length content tokens
    assert np.abs(_values(result.predictions, "probabilities") - want).max() < TOLERANCE
    _check_lengths(result, texts, tokenizer, specials, w, "chunk", counts, overlap=4, cap=4)
    assert "length_impact" not in result.metrics  # no ground truth: nothing to split


@needs_native("bfloat16")
def test_the_precision_check_scores_its_sample_with_the_same_windows(tmp_path, long_models):
    """bfloat16 (this CPU computes it natively), chunk mode without overlap: the check's float32 reference of each
    sampled row is that row's windows, so its largest difference is at most the largest difference
    between the committed values and the float32 windows of every row (truncated rows would differ
    by far more)."""
    rows = make_rows(12, seed=75, max_words=45)
    texts = [r["text"] for r in rows]
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    result = run_flow(
        1, input_uri=str(data), model_uri=long_models["bert"], output_uri=str(tmp_path / "runs"), run_name="bf16",
        label_column=None, rows_per_range=6, tokens_per_batch=64, max_length=MAX_LENGTH, dtype="bfloat16",
        precision_check_rows=12, long_text="chunk", max_chunks=2,
    )  # fmt: skip
    check = result.metrics["scoring"]["precision_check"]
    assert check["rows"] == 12
    got = _values(result.predictions, "probabilities")
    windows, counts, w, specials, tokenizer = reference(long_models["bert"], texts, "single_label", "chunk", cap=2)  # no overlap
    _check_lengths(result, texts, tokenizer, specials, w, "chunk", counts, cap=2)
    truncated, _, _, _, _ = reference(long_models["bert"], texts, "single_label", "truncate")
    bound = np.abs(got - windows).max()
    assert check["max_probability_difference"] <= bound + 1e-6
    assert np.abs(got - truncated).max() > 2 * bound  # a check against truncated rows would not pass the line above


def test_a_resumed_chunk_run_counts_every_range_once(tmp_path, long_models, monkeypatch):
    """The first attempt dies after committing one range; the rerun scores the others: the
    predictions and scoring.long_text are those of all rows, whichever attempt scored them."""
    rows = make_rows(12, seed=76, max_words=45)
    texts = [r["text"] for r in rows]
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    params = dict(
        input_uri=str(data), model_uri=long_models["bert"], output_uri=str(tmp_path / "runs"), run_name="again", label_column=None,
        rows_per_range=4, tokens_per_batch=64, max_length=MAX_LENGTH, long_text="chunk", chunk_overlap=2, max_chunks=3,
    )  # fmt: skip
    monkeypatch.setenv("SCOREKEEPER_FAULT_AFTER_RANGES", "1")
    with pytest.raises(Exception):  # noqa: B017 - the scoring process exits after its first commit, as a dying machine would
        run_flow(1, **params)
    monkeypatch.delenv("SCOREKEEPER_FAULT_AFTER_RANGES")
    result = run_flow(1, **params)
    assert result.metrics["scoring"]["rows_scored"] < len(rows)  # an earlier attempt's range was reused
    want, counts, w, specials, tokenizer = reference(long_models["bert"], texts, "single_label", "chunk", overlap=2, cap=3)
    assert np.abs(_values(result.predictions, "probabilities") - want).max() < TOLERANCE
    _check_lengths(result, texts, tokenizer, specials, w, "chunk", counts, overlap=2, cap=3)

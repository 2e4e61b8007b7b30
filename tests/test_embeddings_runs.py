"""SPEC section 14's worker side end to end, by real `accelerate launch` processes on CPU:
embeddings.parquet holds exactly the rows the sha256 rule samples (recomputed here), each the
hidden state the head reads as plain transformers computes it for the row alone, unpadded
(`output_hidden_states=True`, `hidden_states[-1]` at position 0 for an encoder, at the rightmost
non-pad position for a decoder; chunk mode: the float64 mean over the windows scored), for an
encoder and a decoder, replica and pipeline mode, truncate and chunk, with an unmerged adapter;
report/token_counts.parquet equals the tokenizer's counts of every content token and sums to
scoring.long_text.tokens_content; complete.json seals embeddings.parquet, so a changed file is
refused where sealed files are; a resume scores only the missing ranges and keeps the files exact."""

from __future__ import annotations

import hashlib
import io
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.helpers import make_rows, run_flow, write_rows
from tests.test_long_text import expected_windows

pytestmark = pytest.mark.integration

TOLERANCE = 1e-4  # batched and padded against one unpadded row at a time (float32)
MAX_LENGTH = 16


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tests.models import build_lora_adapter, build_tiny_classifier

    root = tmp_path_factory.mktemp("embedding_models")
    bert = str(build_tiny_classifier(root / "bert", "bert", seed=81))
    llama = str(build_tiny_classifier(root / "llama", "llama", seed=82))
    return {"bert": bert, "llama": llama, "bert_adapter": str(build_lora_adapter(bert, root / "bert_lora", seed=83))}


def sampled_rows(total_rows: int, embedding_rows: int) -> list[int]:
    """SPEC 14's sample, as written there: V_i < embedding_rows / N."""
    draw = lambda i: int.from_bytes(hashlib.sha256(f"embedding:{i}".encode()).digest()[:8], "big") / 2**64  # noqa: E731
    return [i for i in range(total_rows) if draw(i) < embedding_rows / total_rows]


def reference(model_dir: str, texts: list[str], mode: str = "truncate", overlap: int = 0, cap: int = 64, adapter: str | None = None):
    """Each row's representation by the definition: every window scored alone, unpadded, by plain
    transformers with output_hidden_states; hidden_states[-1] at the head's position; the float64
    mean over the windows."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).eval()
    decoder = model.config.model_type == "llama"
    pad = model.config.pad_token_id
    framed = tokenizer("good", return_special_tokens_mask=True)
    mask, ids = framed["special_tokens_mask"], framed["input_ids"]
    lead, trail = mask.index(0), mask[::-1].index(0)
    prefix, suffix = ids[:lead], ids[len(ids) - trail :]
    w = MAX_LENGTH - len(prefix) - len(suffix)
    vectors = []
    with torch.no_grad():
        for text in texts:
            c = tokenizer(text, add_special_tokens=False)["input_ids"]
            windows, _ = expected_windows(c, mode, w, 128, overlap, cap)
            per_window = []
            for x in windows:
                input_ids = prefix + x + suffix
                hidden = model(input_ids=torch.tensor([input_ids]), output_hidden_states=True).hidden_states[-1][0]
                if decoder:
                    position = max((i for i, t in enumerate(input_ids) if t != pad), default=0) if pad is not None else len(input_ids) - 1
                else:
                    position = 0
                per_window.append(hidden[position].double().numpy())
            vectors.append(np.mean(per_window, axis=0))
    return np.stack(vectors), tokenizer


def check_embeddings(result, texts: list[str], want: np.ndarray, embedding_rows: int) -> None:
    table = pq.read_table(result.run_dir / "embeddings.parquet")
    rows = sampled_rows(len(texts), embedding_rows)
    assert 0 < len(rows) < len(texts), "the test's sample is a proper subset"
    assert table.column("row_index").to_pylist() == rows
    assert table.column("id").to_pylist() == result.predictions.column("id").take(rows).to_pylist()
    assert str(table.schema.field("embedding").type) == "list<element: float>"
    got = np.array(table.column("embedding").to_pylist(), dtype=np.float64)
    assert got.shape == (len(rows), want.shape[1])
    assert np.abs(got - want[rows]).max() < TOLERANCE


def check_token_counts(result, texts: list[str], tokenizer) -> None:
    table = pq.read_table(result.run_dir / "report" / "token_counts.parquet")
    counted = Counter(t for text in texts for t in tokenizer(text, add_special_tokens=False)["input_ids"])
    assert table.column("token_id").to_pylist() == sorted(counted)
    assert table.column("count").to_pylist() == [counted[t] for t in sorted(counted)]
    assert table.column("token").to_pylist() == tokenizer.convert_ids_to_tokens(sorted(counted))
    assert sum(table.column("count").to_pylist()) == result.metrics["scoring"]["long_text"]["tokens_content"]


def test_encoder_replica_with_an_unmerged_adapter_then_pipeline_chunks_and_the_seal(tmp_path, models):
    from scorekeeper.errors import InputError
    from scorekeeper.run_folder import RunFolder
    from scorekeeper.run_seal import refuse_unverified, unverified_reason

    rows = make_rows(16, seed=91, max_words=40)
    texts = [r["text"] for r in rows]
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    common = dict(
        input_uri=str(data), model_uri=models["bert"], output_uri=str(tmp_path / "runs"), id_column="review_id",
        rows_per_range=5, tokens_per_batch=64, max_length=MAX_LENGTH, embedding_rows=8,
    )  # fmt: skip
    adapted = run_flow(2, run_name="adapted", adapter_uri=models["bert_adapter"], merge_adapter=False, **common)
    want, tokenizer = reference(models["bert"], texts, adapter=models["bert_adapter"])
    plain, _ = reference(models["bert"], texts)
    assert np.abs(plain - want).max() > 10 * TOLERANCE  # the adapter's representation, not the base model's
    check_embeddings(adapted, texts, want, 8)
    check_token_counts(adapted, texts, tokenizer)

    chunked = run_flow(2, run_name="chunked", mode="pipeline", long_text="chunk", chunk_overlap=3, max_chunks=3, **common)
    want, _ = reference(models["bert"], texts, "chunk", overlap=3, cap=3)
    assert chunked.metrics["scoring"]["long_text"]["rows_capped"] > 0  # the cap is met: its windows only
    check_embeddings(chunked, texts, want, 8)
    check_token_counts(chunked, texts, tokenizer)

    # complete.json seals embeddings.parquet: a changed file is refused where sealed files are
    run = RunFolder.from_uri(str(chunked.run_dir))
    assert RunFolder.EMBEDDINGS in run.read_completion().outputs and unverified_reason(run, [RunFolder.EMBEDDINGS]) is None
    table = pq.read_table(chunked.run_dir / "embeddings.parquet")
    pq.write_table(table.slice(1), chunked.run_dir / "embeddings.parquet")
    assert "embeddings.parquet has 4 rows, complete.json says 5" in unverified_reason(run, [RunFolder.EMBEDDINGS])
    with pytest.raises(InputError, match="drift_reference: run 'chunked' .*embeddings.parquet has 4 rows"):
        refuse_unverified(run, "drift_reference", [RunFolder.EMBEDDINGS])


def test_decoder_replica_chunks_and_pipeline_truncate_and_a_resume(tmp_path, models):
    from scorekeeper.run_folder import CommitRecord, RunFolder

    rows = make_rows(14, seed=92, max_words=40)
    texts = [r["text"] for r in rows]
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    common = dict(
        input_uri=str(data), model_uri=models["llama"], output_uri=str(tmp_path / "runs"), id_column="review_id",
        rows_per_range=4, tokens_per_batch=48, max_length=MAX_LENGTH, embedding_rows=7,
    )  # fmt: skip
    # replica on 1 process: the ranks' gather of embeddings is the encoder's 2-process run
    chunked = run_flow(1, run_name="chunked", long_text="chunk", chunk_overlap=2, max_chunks=3, **common)
    chunk_want, tokenizer = reference(models["llama"], texts, "chunk", overlap=2, cap=3)
    check_embeddings(chunked, texts, chunk_want, 7)
    check_token_counts(chunked, texts, tokenizer)

    piped = run_flow(2, run_name="piped", mode="pipeline", **common)
    want, _ = reference(models["llama"], texts)
    check_embeddings(piped, texts, want, 7)
    check_token_counts(piped, texts, tokenizer)

    # a resume (of the chunk run) scores only the ranges whose commit is gone, and the files are the same
    run = RunFolder.from_uri(str(chunked.run_dir))
    before = {name: (chunked.run_dir / name).read_bytes() for name in ("embeddings.parquet", "report/token_counts.parquet")}
    kept = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(0)))
    run.remove(RunFolder.commit_name(1))
    run.remove(RunFolder.COMPLETION)
    again = run_flow(1, run_name="chunked", long_text="chunk", chunk_overlap=2, max_chunks=3, **common)
    assert CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(0))) == kept
    assert CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(1))).attempt != kept.attempt
    check_embeddings(again, texts, chunk_want, 7)
    check_token_counts(again, texts, tokenizer)
    after = {name: (chunked.run_dir / name).read_bytes() for name in before}
    assert pq.read_table(chunked.run_dir / "embeddings.parquet").equals(pq.read_table(io.BytesIO(before["embeddings.parquet"])))
    assert after["report/token_counts.parquet"] == before["report/token_counts.parquet"]

"""SPEC 14's sample of rows, as the worker draws it (scorekeeper/representation.py), against the
rule as the SPEC writes it (sha256, the first 8 bytes big-endian / 2^64 < embedding_rows / N), over
generated row counts and budgets; and the pooled position of a decoder, read as transformers reads
the row alone (with the model's own pad id; the last position for a model without one), in replica
and pipeline mode."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorekeeper.representation import embedding_sample, embeddings_table


def _rule(row_index: int, embedding_rows: int, total_rows: int) -> bool:
    v = int.from_bytes(hashlib.sha256(f"embedding:{row_index}".encode()).digest()[:8], "big") / 2**64
    return v < embedding_rows / total_rows


@settings(max_examples=60, deadline=None)
@given(total=st.integers(1, 3000), budget=st.integers(0, 4000), start=st.integers(0, 10**9))
def test_the_sample_is_the_sha256_rule(total, budget, start):
    rows = np.arange(start, start + min(total, 300))
    got = embedding_sample(rows, budget, total)
    assert got.tolist() == [_rule(int(i), budget, total) for i in rows]


def test_the_sample_takes_about_the_budget_and_depends_on_the_row_index_alone():
    rows = np.arange(200_000)
    sampled = embedding_sample(rows, 20_000, 200_000)
    assert abs(int(sampled.sum()) - 20_000) < 4 * np.sqrt(20_000)  # Poisson sampling: about the budget
    part = embedding_sample(rows[1234:5678], 20_000, 200_000)  # a range alone draws what the whole draws there
    assert part.tolist() == sampled[1234:5678].tolist()
    assert not embedding_sample(rows[:10], 0, 10).any() and embedding_sample(rows[:10], 10, 10).all()


def test_an_embeddings_table_is_list_of_float32_with_the_ids_type():
    import pyarrow as pa

    table = embeddings_table(np.array([3, 9]), pa.array(["a", "b"]), np.array([[1, 2], [3, 4]], dtype=np.float64))
    assert str(table.schema) == "row_index: int64\nid: string\nembedding: list<item: float>\n  child 0, item: float"
    assert table.column("embedding").to_pylist() == [[1.0, 2.0], [3.0, 4.0]]
    assert embeddings_table(np.zeros(0, dtype=np.int64), pa.array([], pa.int64()), np.zeros((0, 4))).num_rows == 0


@pytest.mark.parametrize("pad", [None, 0])
def test_the_decoder_position_is_transformers_rule(pad):
    import torch

    from scorekeeper.worker.stages import head_position

    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 0, 7, 8, 9], [0, 0, 0, 0, 0]])
    want = [4, 4, 4] if pad is None else [2, 4, 0]
    assert head_position(ids, torch.ones_like(ids), pad).tolist() == want


@pytest.fixture(scope="module", params=["no pad token", "a pad token other than the tokenizer's"])
def tiny_llama(request, tmp_path_factory):
    """A decoder whose config has no pad_token_id (the job pads with eos), or one whose config names a
    pad token (here bos, id 0) other than the tokenizer's (eos, id 1)."""
    import json

    from transformers import AutoTokenizer

    from tests.models import build_tiny_classifier

    folder = build_tiny_classifier(tmp_path_factory.mktemp("llama"), "llama", seed=5)
    if request.param != "no pad token":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"pad_token_id": 0}))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.pad_token = "</s>"
        tokenizer.save_pretrained(folder)
    return str(folder)


def _alone(folder: str, ids: list[int]):
    """hidden_states[-1] at the head's position for one row scored alone, unpadded, by plain transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    pad = model.config.pad_token_id
    position = len(ids) - 1 if pad is None else max((i for i, t in enumerate(ids) if t != pad), default=0)
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0, position].double().numpy()


def _loaded(folder: str):
    import torch

    from scorekeeper.worker.model import load_model

    return load_model(
        folder, None, merge_adapter=True, dtype=torch.float32, device=torch.device("cpu"), trust_remote_code=False, max_length=32
    )


# A row whose last token is the eos the job pads with when the model has no pad token of its own,
# one whose text holds it inside, and longer rows: the batch is right-padded with that eos.
PAD_TEXTS = ["great movie </s>", "a fine film </s> indeed", "a fine film indeed, one of the very best this year", "</s>"]


def test_a_decoders_representation_is_read_where_its_head_reads_the_row_alone_in_replica_mode(tiny_llama):
    import torch

    from tests.helpers import score_every_row_sampled

    loaded = _loaded(tiny_llama)
    got, probabilities = score_every_row_sampled(loaded, PAD_TEXTS)
    for k, text in enumerate(PAD_TEXTS):
        want = _alone(tiny_llama, loaded.tokenizer(text)["input_ids"])
        assert np.abs(got[k] - want).max() < 1e-4, (k, text)
    # the predictions are the row's alone too (tests/test_padless_decoder.py: every head, mode and adapter)
    from transformers import AutoModelForSequenceClassification

    plain = AutoModelForSequenceClassification.from_pretrained(tiny_llama).eval()
    for k, text in enumerate(PAD_TEXTS):
        with torch.no_grad():
            logits = plain(input_ids=torch.tensor([loaded.tokenizer(text)["input_ids"]])).logits[0].double()
        assert np.abs(probabilities[k] - torch.softmax(logits, -1).numpy()).max() < 1e-5, (k, text)


def test_a_decoders_representation_is_read_where_its_head_reads_the_row_alone_in_pipeline_mode(tiny_llama):
    import torch

    from scorekeeper.worker.batching import Encoded, collate
    from scorekeeper.worker.pipeline import stage_of

    loaded = _loaded(tiny_llama)
    module, _ = stage_of(loaded, 0, 1)  # one stage: embeddings, every layer, norm and score
    module.with_representation = True
    ids = [loaded.tokenizer(t)["input_ids"] for t in PAD_TEXTS]
    encoded = Encoded(ids=ids, type_ids=None, lengths=np.array([len(x) for x in ids]), truncated=0)
    batch = collate(encoded, np.arange(len(ids)), loaded.pad_token_id)
    with torch.no_grad():
        out = module(batch.input_ids, batch.attention_mask)
    got = out[:, len(loaded.labels) :].double().numpy()
    for k, row in enumerate(ids):
        assert np.abs(got[k] - _alone(tiny_llama, row)).max() < 1e-4, (k, PAD_TEXTS[k])

"""SPEC 14's sample of rows, as the worker draws it (scorekeeper/representation.py), against the
rule as the SPEC writes it (sha256, the first 8 bytes big-endian / 2^64 < embedding_rows / N), over
generated row counts and budgets; and the pooled position of a decoder, read as transformers does."""

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

    from scorekeeper.worker.stages import last_non_pad_token

    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 0, 7, 8, 9], [0, 0, 0, 0, 0]])
    want = [4, 4, 4] if pad is None else [2, 4, 0]
    assert last_non_pad_token(ids, pad).tolist() == want

"""Which rows' representation a run keeps (SPEC section 14), and the files that hold it.

`embeddings.parquet` holds the scored rows with `V_i < embedding_rows / N`, where `V_i` is the first
8 bytes of `sha256(f"embedding:{row_index}")` read as a big-endian unsigned integer, divided by
2^64 (as section 13 reads U_i), and N the run's scored rows. The sample depends on the row index
alone, so a replay of one input samples the same rows, whichever process scores them and however
the run is resumed or fanned out. The comparison is made exactly, in integers
(`U_i * N < embedding_rows * 2^64`).

The schemas of the run's two files of section 14 are declared here too: the worker writes each
range's part (scorekeeper/worker/embeddings.py), the gather joins them (tasks/gather.py). Imports
numpy and pyarrow only: the scoring worker and the flow both use it.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pyarrow as pa

EMBEDDING_KEY = "embedding"
TWO_64 = 1 << 64

# How embeddings are written (each range's part, the gathered file): float vectors have no repeated
# values to gain from a dictionary, and a dictionary page made before Parquet falls back to plain
# encoding costs about half the file again on a small one.
EMBEDDINGS_PARQUET: dict = {"compression": "zstd", "use_dictionary": False}

TOKEN_COUNTS_SCHEMA = pa.schema([("token_id", pa.int64()), ("token", pa.string()), ("count", pa.int64())])


def draws(key: str, row_index: np.ndarray) -> np.ndarray:
    """The first 8 bytes of sha256(f"{key}:{row_index}") as big-endian unsigned integers (uint64)."""
    return np.fromiter(
        (int.from_bytes(hashlib.sha256(f"{key}:{int(i)}".encode()).digest()[:8], "big") for i in row_index),
        dtype=np.uint64,
        count=len(row_index),
    )


def embedding_sample(row_index: np.ndarray, embedding_rows: int, total_rows: int) -> np.ndarray:
    """Whether each row is in the representation's sample: V_i < embedding_rows / total_rows."""
    row_index = np.asarray(row_index)
    if embedding_rows <= 0 or total_rows <= 0 or not len(row_index):
        return np.zeros(len(row_index), dtype=bool)
    if embedding_rows >= total_rows:  # V_i < 1 <= embedding_rows / N for every row
        return np.ones(len(row_index), dtype=bool)
    bound = embedding_rows * TWO_64
    return np.fromiter((int(u) * total_rows < bound for u in draws(EMBEDDING_KEY, row_index)), dtype=bool, count=len(row_index))


def embeddings_schema(id_type: pa.DataType) -> pa.Schema:
    """embeddings.parquet: row_index, id (the predictions' id type), embedding (list of float32)."""
    return pa.schema([("row_index", pa.int64()), ("id", id_type), ("embedding", pa.list_(pa.float32()))])


def embeddings_table(row_index: np.ndarray, ids: pa.Array, vectors: np.ndarray) -> pa.Table:
    """The sampled rows of a range (rows x width float32, row order) as embeddings.parquet holds them."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, width = vectors.shape if vectors.ndim == 2 else (0, 0)
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32) if n else np.zeros(1, dtype=np.int32))
    values = pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1), type=pa.float32()))
    return pa.Table.from_arrays([pa.array(np.asarray(row_index, dtype=np.int64)), ids, values], schema=embeddings_schema(ids.type))


def count_tokens(contents) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, counts) of every content token of a range's rows (lists of ids), ids ascending."""
    total = sum(len(c) for c in contents)
    if not total:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    counts = np.bincount(np.fromiter(itertools.chain.from_iterable(contents), dtype=np.int64, count=total))
    ids = np.flatnonzero(counts)
    return ids.astype(np.int64), counts[ids].astype(np.int64)

"""From a head's logits to what a shard holds, per kind of head (scorekeeper.heads).

* single_label: softmax in float64, argmax (docs/contracts.md, section 3; shards.prediction_table);
* multi_label: element-wise sigmoid in float64; a label is predicted when its probability is
  strictly greater than its threshold: `predicted_labels` (model label order), `probabilities`;
* regression: the raw values in float64: `prediction` (a float, or a list in label order when
  the head has several outputs).

The activation runs once per range on the concatenated logits, as the softmax always did, and the
tables are built with array operations: no Python per row, whatever the head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import threshold_vector
from scorekeeper.worker.shards import prediction_table


def activate(head: HeadKind, logits: torch.Tensor) -> torch.Tensor:
    """The head's outputs (float64) from its logits (rows x outputs). A row with a logit that is not
    finite gets NaN outputs: softmax and sigmoid would turn a -inf beside finite logits into a
    finite 0, and the range's check (shards.refuse_non_finite) must see it."""
    logits = logits.double()
    if head == HeadKind.SINGLE_LABEL:
        outputs = torch.softmax(logits, dim=-1)
    elif head == HeadKind.MULTI_LABEL:
        outputs = torch.sigmoid(logits)
    elif head == HeadKind.REGRESSION:
        outputs = logits.clone()
    else:
        raise ValueError(f"unknown head {head!r}")
    outputs[~torch.isfinite(logits).all(dim=-1)] = float("nan")
    return outputs


def _list_column(values: np.ndarray) -> pa.ListArray:
    """rows x k float64 as a list<double> column, without a Python list per row."""
    n, k = values.shape
    offsets = pa.array(np.arange(0, (n + 1) * k, k, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(values).reshape(-1), type=pa.float64()))


def multi_label_table(rows: pa.Table, probabilities: np.ndarray, labels: list[str], thresholds: np.ndarray) -> pa.Table:
    """row_index, id, predicted_labels (labels strictly above their threshold, label order), probabilities."""
    n, k = probabilities.shape
    chosen = probabilities > thresholds[np.newaxis, :]
    names = pa.array(np.tile(np.asarray(labels, dtype=object), n)[chosen.reshape(-1)], type=pa.string())
    offsets = pa.array(np.concatenate([[0], np.cumsum(chosen.sum(axis=1))]).astype(np.int32))
    return pa.table(
        {
            "row_index": rows.column("row_index"),
            "id": rows.column("id"),
            "predicted_labels": pa.ListArray.from_arrays(offsets, names),
            "probabilities": _list_column(probabilities),
        }
    )


def regression_table(rows: pa.Table, values: np.ndarray) -> pa.Table:
    """row_index, id, prediction (float64; a list in label order when the head has several outputs)."""
    prediction = pa.array(values[:, 0], type=pa.float64()) if values.shape[1] == 1 else _list_column(values)
    return pa.table({"row_index": rows.column("row_index"), "id": rows.column("id"), "prediction": prediction})


@dataclass(frozen=True)
class HeadOutputs:
    """A job's head: how its logits become a range's prediction table."""

    head: HeadKind
    labels: list[str]
    thresholds: np.ndarray  # per label, multi_label only

    @classmethod
    def of(cls, head: HeadKind, labels: list[str], thresholds) -> HeadOutputs:
        return cls(head, list(labels), np.asarray(threshold_vector(thresholds, labels), dtype=np.float64))

    def table(self, rows: pa.Table, values: np.ndarray) -> pa.Table:
        if self.head == HeadKind.SINGLE_LABEL:
            return prediction_table(rows, values, self.labels)
        if self.head == HeadKind.MULTI_LABEL:
            return multi_label_table(rows, values, self.labels, self.thresholds)
        return regression_table(rows, values)

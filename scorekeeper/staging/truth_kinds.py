"""Ground truth for multi-label and regression heads, staged in one canonical form each.

* multi_label -> `label` as a list: list<int64> when the elements are integers (ids), list<string>
  when they are text (names, or ids written as text). The element type decides how the elements
  are matched to the model's labels, by the one rule per column of scorekeeper/evaluation/matching.py
  (integer elements by id, text elements by name, ...), exactly as a single-label column's type
  does. Accepted: a list column of names or integer ids (an empty list is a row with no label,
  null a row without ground truth); a text column of names joined by `label_delimiter`
  ("toxic|spam"; pieces are trimmed, empty pieces dropped, so an empty text is a row with no
  label: in CSV an empty cell is a row with no label, since a CSV cannot tell an empty list from a
  missing one); or one 0/1 column per model label (`label_columns`: the names of the labels
  marked 1; a row whose label columns are all empty has no ground truth).
* regression -> `label` as float64: a numeric column; null or NaN is a row without ground truth.
  A text column is read as numbers; a value that is not one is refused, naming the rows. A head
  with several outputs takes a list of numbers per row (list<float64>, in output order).

Pure pyarrow, no Prefect: stage.py calls these per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scorekeeper.errors import InputError
from scorekeeper.head_kind import AUTO, HeadKind
from scorekeeper.params import ScoreRequest
from scorekeeper.staging.columns import empty_cells_null, is_text, normalise
from scorekeeper.staging.listing import SHOWN

LABELS_TYPE = pa.list_(pa.string())  # label names (or ids written as text)
IDS_TYPE = pa.list_(pa.int64())  # label ids


def _rows(mask: np.ndarray, first_row: int) -> str:
    return ", ".join(str(first_row + int(i)) for i in np.flatnonzero(mask)[:SHOWN])


def _plain(column) -> pa.Array:
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    return column


def multi_label_truth(column, where: str, user_name: str, delimiter: str, first_row: int) -> pa.Array:
    """A label column (list of names or ids, or delimited text) as list<string> (text elements) or
    list<int64> (integer elements); nulls stay null."""
    column = _plain(column)
    t = column.type
    if pa.types.is_null(t):
        return pa.nulls(len(column), LABELS_TYPE)
    if is_text(t):
        text = column.cast(pa.string())
        pieces = pc.split_pattern(text, pattern=delimiter)
        flat = pc.utf8_trim_whitespace(pc.list_flatten(pieces))
        keep = pc.not_equal(flat, "")
        lengths = pc.fill_null(pc.list_value_length(pieces), 0).to_numpy(zero_copy_only=False)
        owner = np.repeat(np.arange(len(text)), lengths)
        kept = keep.to_numpy(zero_copy_only=False)
        counts = np.bincount(owner[kept], minlength=len(text))
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        return pa.ListArray.from_arrays(offsets, pc.filter(flat, keep), mask=text.is_null())
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = _plain(column.values) if not pa.types.is_fixed_size_list(t) else _plain(column.flatten())
        vt = values.type
        if not (is_text(vt) or pa.types.is_integer(vt) or pa.types.is_boolean(vt) or pa.types.is_null(vt)):
            raise InputError(
                f"label column '{user_name}' in {where} is a list of {vt}; a multi-label ground truth lists label names or integer ids"
            )
        column = column.cast(pa.list_(vt)) if not pa.types.is_list(t) else column
        inner = pc.list_flatten(column)
        if inner.null_count:
            lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
            owner = np.repeat(np.arange(len(column)), lengths)
            bad = np.zeros(len(column), dtype=bool)
            bad[owner[inner.is_null().to_numpy(zero_copy_only=False)]] = True
            raise InputError(
                f"label column '{user_name}' in {where} has a null inside a list at row_index {_rows(bad, first_row)}; "
                "a list holds label names or ids (an empty list is a row with no label, a null list a row without ground truth)"
            )
        if pa.types.is_integer(vt) or pa.types.is_boolean(vt):
            return _int_lists(column, user_name, where)
        return column.cast(LABELS_TYPE)
    raise InputError(
        f"label column '{user_name}' in {where} is {t}; a multi-label ground truth is a list of label names or ids, "
        "a text of names joined by label_delimiter, or one 0/1 column per label (label_columns)"
    )


def _int_lists(column: pa.ListArray, user_name: str, where: str) -> pa.Array:
    """Integer elements as int64 (the id type of every staged label); a uint64 id beyond it refused."""
    try:
        return column.cast(IDS_TYPE)
    except (pa.ArrowInvalid, OverflowError):
        raise InputError(
            f"label column '{user_name}' in {where} holds an id beyond the 64-bit signed integers labels are stored as; "
            "write the labels as text"
        ) from None


def label_columns_truth(columns: Sequence, names: Sequence[str], where: str, first_row: int) -> pa.Array:
    """One 0/1 column per label (in `names` order) as list<string> of the labels marked 1.

    A row whose columns are all null has no ground truth; a row with some null and some not, or
    a value other than 0/1 (true/false), is refused naming the rows."""
    n = len(columns[0]) if columns else 0
    marks = np.zeros((n, len(names)), dtype=bool)
    nulls = np.zeros((n, len(names)), dtype=bool)
    for j, (column, name) in enumerate(zip(columns, names)):
        column = _plain(column)
        t = column.type
        if is_text(t):  # a CSV cell read as text: "0"/"1", "true"/"false"
            column = pc.if_else(pc.equal(pc.utf8_trim_whitespace(column), ""), pa.scalar(None, t), column)
            lowered = pc.utf8_lower(pc.utf8_trim_whitespace(column))
            mapped = pc.if_else(pc.is_in(lowered, pa.array(["1", "true", "1.0"])), True, None)
            mapped = pc.if_else(pc.is_in(lowered, pa.array(["0", "false", "0.0"])), False, mapped)
            bad = pc.and_(pc.is_valid(column), pc.is_null(mapped))
            column = mapped
        elif pa.types.is_boolean(t) or pa.types.is_null(t):
            column = column.cast(pa.bool_())
            bad = pa.array(np.zeros(n, dtype=bool))
        elif pa.types.is_integer(t) or pa.types.is_floating(t):
            if pa.types.is_floating(t):
                column = pc.if_else(pc.is_nan(column), pa.scalar(None, t), column)
            bad = pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, pa.array([0, 1], type=t))))
            column = pc.equal(column, pa.scalar(1, t))
        else:
            raise InputError(f"label column '{name}' in {where} is {t}; label_columns hold 0/1 (or true/false) per row")
        bad_rows = bad.to_numpy(zero_copy_only=False)
        if bad_rows.any():
            raise InputError(f"label column '{name}' in {where} holds values other than 0/1 at row_index {_rows(bad_rows, first_row)}")
        nulls[:, j] = column.is_null().to_numpy(zero_copy_only=False)
        marks[:, j] = pc.fill_null(column, False).to_numpy(zero_copy_only=False)
    partial = np.asarray(nulls.any(axis=1) & ~nulls.all(axis=1), dtype=bool)
    if partial.any():
        raise InputError(
            f"label_columns in {where}: some but not all of a row's label columns are empty at row_index {_rows(partial, first_row)}; "
            "a row has ground truth for every label or for none"
        )
    flat = pa.array(np.tile(np.asarray(names, dtype=object), n)[marks.reshape(-1)], type=pa.string())
    offsets = pa.array(np.concatenate([[0], np.cumsum(marks.sum(axis=1))]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, flat, mask=pa.array(nulls.all(axis=1)) if len(names) else None)


def regression_truth(column, where: str, user_name: str, first_row: int) -> pa.Array:
    """A numeric (or numeric-text) column as float64, NaN as null; anything else refused naming the rows."""
    column = _plain(column)
    t = column.type
    if pa.types.is_null(t):
        return pa.nulls(len(column), pa.float64())
    if is_text(t):
        text = pc.utf8_trim_whitespace(column.cast(pa.string()))
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        parsed = [_number(v) for v in text.to_pylist()]
        bad = np.array([v is _NOT_A_NUMBER for v in parsed], dtype=bool)
        if bad.any():
            shown = ", ".join(f"{first_row + int(i)} ({text[int(i)].as_py()!r})" for i in np.flatnonzero(bad)[:SHOWN])
            raise InputError(
                f"label column '{user_name}' in {where} holds text that is not a number at row_index {shown}; "
                "a regression ground truth is numeric (empty, null or NaN: a row without ground truth)"
            )
        column = pa.array(parsed, type=pa.float64())
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        column = column.cast(pa.float64())
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        vt = t.value_type
        if not (pa.types.is_integer(vt) or pa.types.is_floating(vt) or pa.types.is_null(vt)):
            raise InputError(
                f"label column '{user_name}' in {where} is {t}; a regression ground truth is numeric (a list of numbers per row for several outputs)"
            )
        return column.cast(pa.list_(pa.float64()))  # one number per output; a null or NaN one is an output without truth
    else:
        raise InputError(f"label column '{user_name}' in {where} is {t}; a regression ground truth is numeric")
    column = pc.if_else(pc.is_nan(column), pa.scalar(None, pa.float64()), column)
    infinite = pc.fill_null(pc.is_inf(column), False).to_numpy(zero_copy_only=False)
    if infinite.any():
        raise InputError(f"label column '{user_name}' in {where} holds an infinite value at row_index {_rows(infinite, first_row)}")
    return column


_NOT_A_NUMBER = object()


def _number(value: str | None):
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return _NOT_A_NUMBER


def staged_head(request: ScoreRequest) -> str:
    """The kind of head whose ground-truth form staging writes: the flow hands it a request whose
    `head` it has resolved from the model; `auto` left unresolved stages single-label truth."""
    return HeadKind.SINGLE_LABEL if request.head == AUTO else request.head


def stage_truth(head: str, request: ScoreRequest, column, where: str, user: str, first_row: int | None, csv: bool) -> pa.Array:
    """A ground-truth column in the staged form of the head's kind."""
    if head == HeadKind.MULTI_LABEL:  # an empty text is a row with no label, not a missing one
        return multi_label_truth(column, where, user, request.label_delimiter, first_row or 0)
    if csv:
        column = empty_cells_null(column)
    if head == HeadKind.REGRESSION:
        return regression_truth(column, where, user, first_row or 0)
    return normalise("label", column, where, user, first_row)

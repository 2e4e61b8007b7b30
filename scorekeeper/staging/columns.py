"""Which user column becomes which canonical column, and what each canonical column may hold.

Canonical columns: text and text_pair (text), id (integers or text), label (integer ids or label
names) and slice_0.. (single values, staged as text). A column that cannot be one is refused here,
naming the column, the file and the first offending row.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest


@dataclass
class ColumnMap:
    """Which user column becomes which canonical column."""

    mapping: dict[str, str]  # canonical -> user column
    required: list[str]

    @classmethod
    def for_input(cls, request: ScoreRequest, has_label: bool) -> ColumnMap:
        mapping = {"text": request.text_column}
        if request.text_pair_column:
            mapping["text_pair"] = request.text_pair_column
        if request.id_column:
            mapping["id"] = request.id_column
        if has_label and request.ground_truth_uri is None and request.label_column:
            mapping["label"] = request.label_column
        for i, name in enumerate(request.slice_columns):
            mapping[f"slice_{i}"] = name
        return cls(mapping, list(mapping.values()))


def is_text(t: pa.DataType) -> bool:
    """Arrow's text types: string, large_string and string_view (Polars and DuckDB write the last)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


# The advice of every refusal of text that is not UTF-8 (staging/reader.py's too).
SAVE_AS_UTF8 = "the file may be Latin-1 or Windows-1252: save it as UTF-8"


def first_invalid_utf8(cells: list[bytes | None]) -> int | None:
    """The position of the first cell that is not valid UTF-8, None when every one is."""
    for i, cell in enumerate(cells):
        if cell is not None:
            try:
                cell.decode("utf-8")
            except UnicodeDecodeError:
                return i
    return None


def check_utf8(column: pa.Array, where: str, user_name: str, first_row: int | None, first_file_row: int) -> None:
    """Refuse text cells that are not UTF-8, naming the column, the file and the first row.

    pyarrow checks a CSV's cells as it reads them, but not a JSON Lines file's strings: a Latin-1
    "café" in a JSON Lines text was staged as it was, then failed as a UnicodeDecodeError where it
    was first decoded (the tokenizer's sample: a traceback, exit 1; or a scoring process: exit 3,
    naming neither the file nor the row). `first_row` and `first_file_row` are the row_index and
    the file's row (from 1) of the column's first value (ground truth has no row_index: None)."""
    values = column.dictionary if pa.types.is_dictionary(column.type) else column
    if not is_text(values.type):
        return
    try:
        values.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    cells = values.cast(pa.large_binary())
    if pa.types.is_dictionary(column.type):
        cells = cells.take(column.indices)
    i = first_invalid_utf8(cells.to_pylist())
    if i is None:
        return
    at = f"row_index {first_row + i} (its row {first_file_row + i})" if first_row is not None else f"its row {first_file_row + i}"
    raise InputError(f"cannot read {where}: column '{user_name}' is not valid UTF-8 text at {at}; {SAVE_AS_UTF8}")


def empty_cell_is_missing(canonical: str) -> bool:
    """The one rule for a CSV's empty cell in each canonical column: a missing value (null), as a
    Parquet or JSON Lines null is, in every column but `text`, whose empty cell is the empty text
    (scored as ""). A text pair's empty cell is a missing second text, never an empty second segment
    (`[CLS] text [SEP] [SEP]`, which no tokenizer call on the row gives): a null text, refused under
    `null_text error` and counted in `null_text_rows` under `empty`. The label column applies it in
    truth_kinds.py (its staged form depends on the head)."""
    return canonical != "text"


def empty_cells_null(column: pa.Array) -> pa.Array:
    """A CSV's empty cell is a missing value, in a text column as in a number column.

    pyarrow reads an empty cell of an integer column as null but of a text column as "": without
    this, an empty label cell in a column of label names became an unknown label "" counted as an
    error (and an empty id the id ""), while the same cell among integer labels was left out.
    Applied where empty_cell_is_missing says: ids, labels, slice columns and the text pair."""
    if not is_text(column.type):
        return column
    return pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)


def normalise(canonical: str, column: pa.ChunkedArray | pa.Array, where: str, user_name: str, first_row: int | None = None) -> pa.Array:
    """Cast a column to the canonical type family, or explain why it cannot be.

    `first_row` is the row_index of the column's first value, to name offending rows by."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = column.type
    if canonical in ("text", "text_pair") or canonical.startswith("slice_"):
        if is_text(t):
            return column.cast(pa.string())
        if canonical.startswith("slice_"):
            if pa.types.is_nested(t) or pa.types.is_union(t):
                raise InputError(
                    f"slice column '{user_name}' in {where} is {t}: slice columns must hold single values "
                    "(text, numbers, booleans, dates), not structs, lists or maps"
                )
            return column.cast(pa.string())
        if pa.types.is_null(t):
            return column.cast(pa.string())
        raise InputError(f"column '{user_name}' in {where} is {t}, not text")
    # ids and labels keep their own type family: integers, or strings
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return _to_int64(column, canonical, where, user_name, first_row)
    if is_text(t):
        return column.cast(pa.string())
    if pa.types.is_floating(t) and canonical == "label":
        # Integer labels written through pandas with missing values arrive as floats, and the
        # missing values as NaN where the writer kept NumPy's spelling (Polars, pa.array(ndarray)).
        column = pc.if_else(pc.is_nan(column), pa.scalar(None, t), column)
        infinite = pc.fill_null(pc.invert(pc.is_finite(column)), False)
        if pc.any(infinite).as_py():
            position = infinite.to_pylist().index(True)
            at = f" (first at row_index {first_row + position})" if first_row is not None else ""
            raise InputError(
                f"label column '{user_name}' in {where} holds {column[position].as_py()}{at}; labels must be integer ids or label names"
            )
        valid = pc.drop_null(column)
        if len(valid) and not pc.all(pc.equal(pc.floor(valid), valid)).as_py():
            raise InputError(f"label column '{user_name}' in {where} holds non-integer numbers")
        return _to_int64(column, canonical, where, user_name, first_row)
    if pa.types.is_null(t):
        return column.cast(pa.string())
    if canonical == "id":
        floating = (
            " (numbers with a fraction or an exponent; a JSON reader also holds an integer beyond int64 as one): write the ids as strings"
            if pa.types.is_floating(t)
            else ""
        )
        raise InputError(f"id column '{user_name}' in {where} is {t}; ids must be integers or strings{floating}")
    raise InputError(f"label column '{user_name}' in {where} is {t}; labels must be names or integer ids")


_INT64_MAX = 2**63 - 1


def _to_int64(column, canonical: str, where: str, user_name: str, first_row: int | None) -> pa.Array:
    """Integers are stored as int64; a uint64 (or float) value beyond its range is refused, not wrapped."""
    try:
        return column.cast(pa.int64())
    except (pa.ArrowInvalid, OverflowError):
        pass
    values = column.to_pylist()
    position = next(i for i, v in enumerate(values) if v is not None and not -_INT64_MAX - 1 <= v <= _INT64_MAX)
    at = f" (first at row_index {first_row + position})" if first_row is not None else ""
    raise InputError(
        f"{canonical} column '{user_name}' in {where} holds {int(values[position])}{at}, beyond the 64-bit signed integers "
        f"{canonical}s are stored as; write the {canonical}s as text"
    )


def check_type(types: dict, canonical: str, t: pa.DataType, where: str, user: str) -> None:
    """Every file gives a canonical column the same type family; `types` remembers the first seen."""
    seen = types.setdefault(canonical, (t, where))
    if seen[0] != t:
        raise InputError(f"schemas differ across files: column '{user}' is {_family(seen[0])} in {seen[1]} but {_family(t)} in {where}")


def _family(t: pa.DataType) -> str:
    return "integer" if pa.types.is_integer(t) else "text" if pa.types.is_string(t) else str(t)

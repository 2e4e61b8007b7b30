"""How a ground-truth column is matched to the model's labels: one rule per column, decided once.

A staged label column is integers (int64: integers, booleans, integral floats) or text. Its type
and its values against the label list decide the rule, once for the whole column, never row by
row, and metrics.json's `truth_matching` records it:

* an **integer** column is matched **by id** (`id`): value k is label k (0 <= k < number of
  labels), any other integer an unknown label. Label names are never consulted, even when they
  are digits: a model labelled "1","2","3" has ids 0,1,2, so truth 1 is the label named "2".
* a **text** column none of whose values needs an id is matched **by name** (`name`): a value
  equal to a label name is that label, any other value an unknown label. This holds for digits
  too: "1" against labels "1","2","3" is the label named "1" (the log says that it is also an id).
* a **text** column none of whose values is a label name, but some of which are integers in the
  id range ("0", "1" written as text; "007" is 7), is matched **by id** (`id`).
* a **text** column holding both label names and in-range integers that are no label name
  ("negative", "positive", "0") is matched **by name, else by id** (`name_or_id`) when no value
  has two meanings, that is when no value is the name of one label and the id of another;
  such a column (labels "1","2","3" with values "0","1","2": "1" is the name of id 0 and the id
  of "2") is refused, naming the values: it would resolve differently by name and by id.

The words of the rule (TruthRule, ColumnKind, TruthMatching: what metrics.json records) live with
the document, in scorekeeper/metrics/truth_matching.py.

A multi-label column (a list per row, scorekeeper/staging/truth_kinds.py) is matched the same way,
by its elements: list<int64> elements are an integer column, list<string> elements a text column,
and the rule is decided over the distinct elements of the whole column. A regression column holds
numbers, not labels: it has no rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.errors import InputError
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching, TruthRule


def column_kind(arrow_type: str) -> ColumnKind:
    """The kind of a staged label column from its Arrow (or DuckDB) type name; a list column
    (multi-label) is of its elements' kind ("list<item: int64>", "BIGINT[]")."""
    name = arrow_type.lower().strip()
    if name.endswith("[]"):
        name = name[:-2]
    elif name.startswith(("list<", "large_list<")):
        name = name[name.index("<") + 1 : name.rindex(">")].split(":")[-1].strip()
    return ColumnKind.INTEGER if name.startswith(("int", "uint", "bigint")) else ColumnKind.TEXT


@dataclass(frozen=True)
class TruthValues:
    """What a column's distinct values are against one label list (SQL: scorekeeper/evaluation/sql/truth_values.sql)."""

    distinct: int  # distinct non-null values
    names: int  # values equal to a label name
    ids: int  # values that are an integer literal of an id in range
    ids_not_names: int  # in-range id literals that are no label name
    conflicts: list[str]  # the first values that are the name of one label and the id of another


def decide(kind: ColumnKind, values: TruthValues, labels: list[str], column: str) -> TruthMatching:
    """The one rule for the column, or InputError for a column that would resolve differently by
    name and by id (see the module's docstring)."""
    if kind is ColumnKind.INTEGER:
        rule = TruthRule.ID
    elif values.names and values.ids_not_names:
        if values.conflicts:
            shown = ", ".join(
                f"{v!r} is the name of label id {labels.index(v)} and the id of label {labels[int(v)]!r}" for v in values.conflicts
            )
            raise InputError(
                f"ground-truth column '{column}' holds both label names and label ids, and some values are both ({shown}): "
                "it would resolve differently by name and by id; write every label as a name, or every label as an "
                "integer id (an integer column is matched by id)"
            )
        rule = TruthRule.NAME_OR_ID
    else:
        rule = TruthRule.NAME if values.names or not values.ids else TruthRule.ID
    matched = {TruthRule.ID: values.ids, TruthRule.NAME: values.names, TruthRule.NAME_OR_ID: values.names + values.ids_not_names}[rule]
    return TruthMatching(rule=rule, column_type=kind, distinct_values=values.distinct, matched_values=matched)


def conflict_note(matching: TruthMatching, values: TruthValues, labels: list[str]) -> str | None:
    """A sentence for the run's log when the other rule would have read some values differently."""
    if not values.conflicts:
        return None
    v = values.conflicts[0]
    by_id, by_name = labels[int(v)], v
    if matching.rule is TruthRule.ID:
        return (
            f"ground truth is an integer column, matched by label id: {v} is label {by_id!r}, not the label named {by_name!r} "
            "(the model's label names are digits other than their ids); write the labels as text names to match them by name"
        )
    return (
        f"ground truth is text, matched by label name: {v!r} is the label named {by_name!r}, not label id {v} ({by_id!r}); "
        "write the labels as integers to match them by id"
    )


def why_nothing_evaluated(source: str | None, truth_rows: int | None, missing: int | None) -> str | None:
    """Why a run with ground truth evaluated no row, in words (the run's last line and its log)."""
    if source is None:
        return None
    if not truth_rows:
        if source == "label_column":
            return "no row has a ground-truth label: the label column is empty (null) in every row"
        return "no row of the ground-truth files has a label: their label column is empty (null) in every row"
    if missing is not None and missing >= truth_rows:
        return f"none of the {truth_rows} ground-truth rows matched an input row (compare the id columns' values)"
    return None

"""metrics.json's `truth_matching`: the one rule a ground-truth column is matched to the model's
labels by, and the kind of column it was decided on. The words live with the document (which records
them); deciding the rule is the evaluation's (scorekeeper/evaluation/matching.py)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel


class TruthRule(StrEnum):
    ID = "id"
    NAME = "name"
    NAME_OR_ID = "name_or_id"  # a label name is that label, an in-range integer that is no name that id


class ColumnKind(StrEnum):
    """The staged label column's type family, as the rule sees it. `label_columns`: the ground
    truth was one 0/1 integer column per label, each named like its label (multi-label's
    label_columns), staged as the names of the labels whose column holds 1 and matched by name."""

    INTEGER = "integer"
    TEXT = "text"
    LABEL_COLUMNS = "label_columns"


class TruthMatching(BaseModel):
    """metrics.json's `truth_matching`: how ground-truth values were matched to the model's labels."""

    rule: TruthRule
    column_type: ColumnKind
    distinct_values: int
    matched_values: int  # distinct values that are a label under the rule

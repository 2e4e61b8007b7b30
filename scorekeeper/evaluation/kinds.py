"""The registry of head evaluations, looked up by HeadKind: one module per kind (base.HeadEvaluation).

Adding a kind of head is a member of HeadKind (scorekeeper/head_kind.py), a module here that
implements HeadEvaluation with its SQL in sql/<kind>/, and its entry below; tests/test_evaluation_kinds.py
checks that every HeadKind has one.
"""

from __future__ import annotations

from scorekeeper.evaluation import multi_label, regression, single_label
from scorekeeper.evaluation.base import HeadEvaluation
from scorekeeper.head_kind import HeadKind

KINDS: dict[HeadKind, HeadEvaluation] = {e.kind: e for e in (single_label.EVALUATION, multi_label.EVALUATION, regression.EVALUATION)}


def evaluation_for(head: HeadKind) -> HeadEvaluation:
    """The evaluation of `head`'s kind (a name that is not a kind: ValueError, as HeadKind says)."""
    return KINDS[HeadKind(head)]

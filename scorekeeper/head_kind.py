"""The kind of a sequence-classification head, defined once: what a run's outputs mean.

`HeadKind` is metrics.json's `head`, the scoring worker's output table, the ground truth's staged
form and the evaluation module a run is evaluated by (scorekeeper/evaluation/kinds.py); `HeadChoice`
is the `head` parameter, which may also be `auto` (follow the model's config, scorekeeper/heads.py).
Every branch on a kind compares with a member of HeadKind, never with its spelling. Imports nothing
of the project: the worker, the parameters and the metric registry all use it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal


class HeadKind(StrEnum):
    """The kind of a sequence-classification head; metrics.json `head`."""

    SINGLE_LABEL = "single_label"
    MULTI_LABEL = "multi_label"
    REGRESSION = "regression"


# What a request or a metrics.json that names no head means: a single-label run (written before
# heads had kinds). Every default kind is this one name.
DEFAULT_HEAD = HeadKind.SINGLE_LABEL
AUTO: Final = "auto"  # the head parameter's default: the kind the model's config names
# The head parameter's values: AUTO and every HeadKind (tests/test_heads_kinds.py holds the two together).
HeadChoice = Literal["auto", "single_label", "multi_label", "regression"]
HEAD_CHOICES: tuple[str, ...] = (AUTO, *HeadKind)

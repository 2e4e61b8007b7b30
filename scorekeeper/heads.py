"""The three kinds of sequence-classification head, and which one a model is.

A transformers sequence classifier ends in `num_labels` logits, and what they mean depends on how it
was trained (`config.problem_type`): one softmax over the labels (single_label), an independent
sigmoid per label (multi_label), or raw values (regression: a reward, a quality score). Nothing in
the weights says which, so a model whose config does not name it and has one output is refused
rather than guessed: a softmax over one logit is always 1.0, a sigmoid of a reward is not a reward.

Pure functions of the config's JSON and the request's values: no torch, no Prefect. The flow resolves
the kind before anything is written (and records it); the scoring processes resolve it again from the
config they load and reach the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scorekeeper.errors import InputError, ModelError
from scorekeeper.head_kind import AUTO, HEAD_CHOICES, HeadKind

# config.problem_type -> the kind it names (transformers' own three values)
PROBLEM_TYPES = {
    "single_label_classification": HeadKind.SINGLE_LABEL,
    "multi_label_classification": HeadKind.MULTI_LABEL,
    "regression": HeadKind.REGRESSION,
}
DEFAULT_THRESHOLD = 0.5


def one_logit_message(folder: str, why: str) -> str:
    return (
        f"model in {folder} has a single output (num_labels=1) {why}: say what its output is with head "
        "(--head): 'regression' scores the raw value (e.g. a reward or quality score); 'multi_label' scores a "
        "one-logit binary classifier or reranker (sigmoid, thresholded)"
    )


def num_outputs(config: Mapping) -> int:
    """The head's output count: id2label's size, else num_labels (transformers' default 2)."""
    id2label = config.get("id2label") or {}
    return len(id2label) if id2label else int(config.get("num_labels") or 2)


def resolve_head(requested: str, config: Mapping, folder: str) -> HeadKind:
    """The kind of head to score with: `requested` unless it is `auto`, then the config's problem_type;
    a config without one is single_label with two or more outputs, and refused with one."""
    outputs = num_outputs(config)
    if requested not in HEAD_CHOICES:
        raise InputError(f"head {requested!r} is not one of {', '.join(HEAD_CHOICES)}")
    head = requested
    if requested == AUTO:
        problem = config.get("problem_type")
        if problem is None:
            if outputs < 2:
                raise ModelError(one_logit_message(folder, "and its config names no problem_type"))
            return HeadKind.SINGLE_LABEL
        if problem not in PROBLEM_TYPES:
            raise ModelError(
                f"model in {folder}: config problem_type {problem!r} is not one of {', '.join(PROBLEM_TYPES)}; set head explicitly"
            )
        head = PROBLEM_TYPES[problem]
    if head == HeadKind.SINGLE_LABEL and outputs < 2:
        why = (
            "and a softmax over one output is always 1.0"
            if requested == HeadKind.SINGLE_LABEL
            else "but its config says single_label_classification"
        )
        raise ModelError(one_logit_message(folder, why))
    return HeadKind(head)  # the one place a spelling becomes a kind: every step after reads HeadKind


def check_head_options(head: HeadKind, labels: Sequence[str], thresholds, label_columns: Sequence[str], gates: Mapping = {}) -> None:  # noqa: B006
    """The head-specific parameters against the model's labels, before anything is written:
    thresholds only for multi_label heads and naming only the model's labels; label_columns only for
    multi_label heads, naming every label of the model and nothing else; gates only on metrics this
    kind of head has (a gate on a metric without a value would fail every run)."""
    from scorekeeper.gates import head_gates

    head_gates(gates, head)  # the head is known now: its own metrics only
    if head != HeadKind.MULTI_LABEL:
        if isinstance(thresholds, Mapping) or thresholds != DEFAULT_THRESHOLD:
            raise InputError(f"thresholds apply to multi_label heads; this model's head is {head}")
        if label_columns:
            raise InputError(f"label_columns (one 0/1 column per label) apply to multi_label heads; this model's head is {head}")
        return
    if isinstance(thresholds, Mapping):
        unknown = [name for name in thresholds if name not in labels]
        if unknown:
            raise InputError(
                f"thresholds name label(s) the model does not have: {', '.join(map(repr, unknown[:5]))}; its labels are {', '.join(labels)}"
            )
    if label_columns:
        unknown = [c for c in label_columns if c not in labels]
        missing = [name for name in labels if name not in label_columns]
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f"{', '.join(map(repr, unknown[:5]))} {'is' if len(unknown) == 1 else 'are'} not a label of the model")
            if missing:
                parts.append(f"the model's label(s) {', '.join(map(repr, missing[:5]))} have no column")
            raise InputError(
                f"label_columns must name one 0/1 column per model label, named like the label: {'; '.join(parts)} "
                f"(its labels are {', '.join(labels)})"
            )


def threshold_vector(thresholds, labels: Sequence[str]) -> list[float]:
    """Each label's threshold in label order: one number for all, or per label (others at the default)."""
    if isinstance(thresholds, Mapping):
        return [float(thresholds.get(name, DEFAULT_THRESHOLD)) for name in labels]
    return [float(thresholds)] * len(labels)

"""The registry of head evaluations (scorekeeper/evaluation/kinds.py) matches HeadKind, and every
registered kind implements the one interface (base.HeadEvaluation) the driver runs: the same
methods with the same parameters, its module and SQL folder named after the kind, and, run on the
golden evaluations (bench/golden.py, built once per session), a document of its own kind holding
every metric the registry gives that kind.

Pure: no processes, no servers."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from scorekeeper.evaluation import base, kinds
from scorekeeper.evaluation.kinds import KINDS, evaluation_for
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.registry import number_at, run_metrics, scalar_metrics

SQL = Path(kinds.__file__).with_name("sql")
INTERFACE = [name for name, member in vars(base.HeadEvaluation).items() if inspect.isfunction(member) and not name.startswith("_")]


def test_the_registry_has_one_evaluation_per_head_kind():
    assert list(KINDS) == list(HeadKind)  # every kind, in HeadKind's order, none other
    for kind, evaluation in KINDS.items():
        assert evaluation.kind is kind
        assert evaluation_for(kind) is evaluation and evaluation_for(kind.value) is evaluation  # metrics.json's spelling too
    with pytest.raises(ValueError):
        evaluation_for("ordinal")


def test_the_interface_is_what_the_steps_ask():
    """The protocol declares what the steps ask of a kind, in the evaluation's order (docs/extending.md's
    table, held by tests/test_kind_spec.py): truth, metrics, the estimate's records, slices, length,
    comparison, drift, estimate, and section 13's label-free predictions, targets and the label-free
    estimate's variance (labelling.py); and the report's part as an attribute."""
    assert INTERFACE == [
        "truth_table",
        "check_truth",
        "metrics",
        "reference_records",
        "slices",
        "length_sides",
        "comparison",
        "drift_signals",
        "estimate",
        "label_free",
        "label_targets",
        "label_free_variance",
    ]
    assert list(base.HeadEvaluation.__annotations__) == ["kind", "report"]


@pytest.mark.parametrize("kind", list(HeadKind))
def test_every_kind_implements_the_interface(kind):
    evaluation = KINDS[kind]
    assert type(evaluation).__module__ == f"scorekeeper.evaluation.{kind.value}"  # one module per kind, named after it
    for name in INTERFACE:
        method = getattr(type(evaluation), name, None)
        assert inspect.isfunction(method), f"{kind}: no method {name}"
        declared = inspect.signature(getattr(base.HeadEvaluation, name))
        assert list(inspect.signature(method).parameters) == list(declared.parameters), f"{kind}.{name} takes other parameters"
    assert isinstance(evaluation.report, base.KindReport) and evaluation.report.slice_metrics
    folder = SQL / kind.value
    assert folder.is_dir() and any(folder.glob("*.sql")), f"{kind}: no SQL folder sql/{kind.value}/"


def _golden_documents(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("*/metrics.json"))}


def test_every_kind_writes_a_document_of_its_kind_with_its_registry_metrics(golden_build):
    out, _ = golden_build  # tests/conftest.py: bench/golden.py's build, once per session
    documents = _golden_documents(out)
    evaluated = {HeadKind(d["head"]) for d in documents.values()}
    assert evaluated == set(HeadKind), "bench/golden.py evaluates every kind of head"
    for name, document in documents.items():
        head = HeadKind(document["head"])
        missing = [m.name for m in scalar_metrics(head) if m.name not in document]
        assert not missing, f"{name} ({head}) lacks {missing}"
        undefined = [m.name for m in scalar_metrics(head) if number_at(document, m.path) is None]
        assert not undefined, f"{name} ({head}): no value for {undefined}"
        own = {m.path[0] for m in run_metrics(head)}  # the fields its metrics live in (a multi-label `ece` holds macro and micro)
        others = {m.path[0] for k in HeadKind if k != head for m in scalar_metrics(k)} - own
        assert not others & set(document), f"{name} ({head}) holds another kind's metrics: {sorted(others & set(document))}"

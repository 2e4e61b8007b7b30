"""metrics.json's typed document and the one metric registry: the registry's paths exist in the
document, the document keeps metrics.json's shape and presence, strict JSON, tolerant reading of
other runs, lookups by head kind, and no second list of metric names anywhere in the code.
Pure: no processes, no servers."""

from __future__ import annotations

import ast
import json
import math
import re
import types
import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from scorekeeper.evaluation.history import completed_runs
from scorekeeper.gates import gate_metrics, parse_gate
from scorekeeper.metrics.document import HistoryEntry, MetricsDocument, RecordedMetrics, history_entry
from scorekeeper.metrics.registry import (
    BY_NAME,
    METRICS,
    Direction,
    HeadKind,
    Scope,
    compared_metrics,
    headline_metrics,
    history_metrics,
    lower_is_better,
    metric_value,
    metrics_of,
    run_metrics,
)
from scorekeeper.report.publish import publish_complete
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from tests.report_fixture import full_metrics

REPO = Path(__file__).resolve().parents[1]


def _models(annotation) -> list:
    """The pydantic models, dicts and lists an annotation may hold."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    if origin in (dict, list):
        return [annotation]
    return []


def _path_exists(model: type[BaseModel], path: tuple) -> bool:
    """Whether the document's schema has a place for `path` (a dict takes any key, a list any index)."""
    key, rest = path[0], path[1:]
    if not isinstance(key, str) or key not in model.model_fields:
        return False
    if not rest:
        return True
    for inner in _models(model.model_fields[key].annotation):
        if isinstance(inner, type):
            if _path_exists(inner, rest):
                return True
        elif typing.get_origin(inner) is list and isinstance(rest[0], int) and len(rest) == 1:
            return True
        elif typing.get_origin(inner) is dict and isinstance(rest[0], str):
            value = typing.get_args(inner)[1]
            if len(rest) == 1 or any(isinstance(m, type) and _path_exists(m, rest[1:]) for m in _models(value)):
                return True
    return False


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.name)
def test_every_metric_has_its_place_in_the_document(metric):
    assert _path_exists(MetricsDocument, metric.path), f"{metric.name}: metrics.json has no field at {metric.path}"
    if metric.interval:
        assert _path_exists(MetricsDocument, metric.interval)
    assert (metric.scope == Scope.COMPARISON) == (metric.path[0] == "comparison")
    assert metric.compared is None or metric.scope == Scope.RUN


def test_history_metrics_are_fields_of_a_history_entry():
    for head in HeadKind:
        for metric in history_metrics(head):
            assert metric.name in HistoryEntry.model_fields, f"{metric.name} is a history metric: declare it in HistoryEntry"


def test_lookups_follow_the_head_kind():
    single, multi, regression = (set(m.name for m in run_metrics(h)) for h in HeadKind)
    assert "accuracy" in single and "accuracy" not in multi | regression
    assert "hamming_loss" in multi and "hamming_loss" not in single | regression
    assert "mae" in regression and "mae" not in single | multi
    assert {"evaluated", "missing_predictions", "unmatched_predictions"} <= single & multi & regression
    assert "log_loss" in lower_is_better(HeadKind.SINGLE_LABEL) and "accuracy" not in lower_is_better(HeadKind.SINGLE_LABEL)
    assert "mae" not in lower_is_better(HeadKind.SINGLE_LABEL) and "mae" in lower_is_better(HeadKind.REGRESSION)
    for head in HeadKind:
        assert all(m.compared is not None for m in compared_metrics(head))
        assert all(m.direction != Direction.NEITHER for m in compared_metrics(head))
        assert all(head in m.heads for m in headline_metrics(head))
    assert "hamming_loss" not in gate_metrics(HeadKind.SINGLE_LABEL) and "hamming_loss_drop" in gate_metrics(HeadKind.MULTI_LABEL)
    with pytest.raises(ValueError, match="gate 'accuracy': unknown metric; gates read mae, mse"):
        parse_gate("accuracy", ">=0.9", head=HeadKind.REGRESSION)
    with pytest.raises(ValueError, match="gate 'mae': unknown metric.*gates read accuracy, macro_f1"):
        parse_gate("mae", "<=0.1")  # every run is single-label until the head kind is a parameter
    with pytest.raises(ValueError, match="did you mean 'accuracy'"):
        parse_gate("acuracy", ">=0.9")
    assert parse_gate("mae_drop", "<=0.1 if significant", head=None).comparison  # the head not known yet: any head's names
    with pytest.raises(ValueError, match="in single_label runs accuracy.*; in regression runs mae"):
        parse_gate("nope", ">=0.9", head=None)


def test_the_report_fixture_is_a_metrics_document_and_round_trips():
    """Validating metrics.json's content as the typed document and dumping it again gives the same
    keys, in the same order, with the same values: the schema keeps the file's shape."""
    metrics, _ = full_metrics(n=300)
    metrics = json.loads(json.dumps(metrics))
    document = MetricsDocument.model_validate(metrics)
    again = document.as_dict()
    assert again == metrics
    assert list(again) == list(metrics) or sorted(again) == sorted(metrics)
    assert json.loads(document.to_json_bytes()) == metrics


def test_the_other_heads_documents_are_metrics_documents():
    """What the multi-label and regression evaluations compute validates as the typed document and
    round-trips: their fields are declared, with their shapes."""
    import numpy as np

    from tests import test_multilabel_metrics as ml
    from tests import test_regression_metrics as reg

    truth, probs = ml.random_case(np.random.default_rng(4), 120, decimals=2, always=False)
    y, p = reg.random_case(np.random.default_rng(9), 60, decimals=2)
    documents = [
        ml.report_metrics(ml.LABELS, truth, probs),
        reg.report_metrics(p.tolist(), y.tolist(), ["score"]),
        reg.report_metrics(np.c_[p, y].tolist(), np.c_[y, p].tolist(), ["a", "b"]),
        reg.report_metrics(p.tolist() * 70, y.tolist() * 70, ["score"]),  # past the scatter's rows: a 2-D histogram
    ]
    for metrics in documents:
        metrics = json.loads(json.dumps(metrics | {"ground_truth_source": "label_column"}))
        assert MetricsDocument.model_validate(metrics).as_dict() == metrics


def test_a_field_is_written_when_set_null_included_and_absent_when_not():
    document = MetricsDocument(
        rows=3, scored=3, evaluated=0, ground_truth_source=None, scoring_only=True, head="single_label", accuracy=None
    )
    written = json.loads(document.to_json_bytes())
    assert written == {"rows": 3, "scored": 3, "evaluated": 0, "ground_truth_source": None, "scoring_only": True,
                       "head": "single_label", "accuracy": None}  # fmt: skip
    document.gates = []
    assert json.loads(document.to_json_bytes())["gates"] == []


def test_nan_and_infinity_are_never_written():
    document = MetricsDocument(
        rows=1, scored=1, evaluated=1, ground_truth_source="label_column", scoring_only=False, head="single_label",
        accuracy=math.nan, log_loss=math.inf, roc_auc={"macro": math.nan, "per_class": {"a": math.nan}},
    )  # fmt: skip
    text = document.to_json_bytes().decode()
    assert "NaN" not in text and "Infinity" not in text
    written = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in metrics.json"))
    assert written["accuracy"] is None and written["log_loss"] is None and written["roc_auc"] == {"macro": None, "per_class": {"a": None}}


def test_other_runs_are_read_tolerantly(tmp_path, caplog):
    """A metrics.json of an early run (no head, no finished_at, fields since added missing) still
    gives its history line and its metrics; something that is not a document gives None."""
    legacy = {"rows": 10, "scored": 10, "evaluated": 8, "accuracy": 0.75, "per_class": {}, "some_field_of_old": [1, 2]}
    recorded = RecordedMetrics.parse(legacy)
    assert recorded.head == HeadKind.SINGLE_LABEL and recorded.finished_at is None
    assert metric_value(recorded, "accuracy") == 0.75 and metric_value(recorded, "roc_auc_macro") is None
    entry = history_entry("old", recorded, {"model_fingerprint": "m"}).record()
    assert entry == {"run_id": "old", "finished_at": None, "rows": 10, "evaluated": 8, "accuracy": 0.75, "macro_f1": None,
                     "model_fingerprint": "m", "adapter_fingerprint": None, "input_fingerprint": None}  # fmt: skip
    assert RecordedMetrics.parse([1, 2]) is None and RecordedMetrics.parse({"rows": "many"}) is None

    for name, data in (("early", legacy), ("odd", {"rows": "many"}), ("list", [1, 2])):
        # published with its completion record, as every completed run is (scorekeeper/report/publish.py)
        publish_complete(RunFolder.from_uri(str(tmp_path / name)), {"metrics.json": json.dumps(data).encode()}, "2026-01-01")
    with caplog.at_level("WARNING"):
        runs = completed_runs(Location.from_uri(str(tmp_path)))
    assert [r["run_id"] for r in runs] == ["early"] and runs[0]["accuracy"] == 0.75
    assert "ignoring run odd" in caplog.text and "ignoring run list" in caplog.text


def test_metric_names_and_directions_are_declared_once():
    """No module of the product keeps a list of metric names of its own: a tuple, list or set literal
    holding two or more registry names outside the registry is a second list."""
    names = set(BY_NAME)
    found = []
    for folder in ("scorekeeper", "tasks", "flows"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "registry.py" and path.parent.name == "metrics":
                continue
            if path.parent.name == "report" and path.name.endswith("_report.py"):
                # A section's view names the fields of a document record it shows, in the table's order
                # (thresholds' rows, an output's summary line): columns of one record, not a list of
                # metrics; the views are held to the document by tests/test_report_views.py.
                continue
            tree = ast.parse(path.read_text())
            # MetricsDocument.KEYS is metrics.json's key order: every field of the file once, metrics
            # among them (tests/test_kind_parts.py holds it to the fields), not a list of metrics.
            key_order = {
                id(inner)
                for node in ast.walk(tree)
                if path.relative_to(REPO).as_posix() == "scorekeeper/metrics/document.py"
                and isinstance(node, ast.AnnAssign)
                and ast.unparse(node.target) == "KEYS"
                for inner in ast.walk(node)
            }
            for node in ast.walk(tree):
                if id(node) in key_order:
                    continue
                if isinstance(node, ast.Tuple | ast.List | ast.Set):
                    listed = sorted({e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names})
                    if len(listed) >= 2:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {listed}")
    template = (REPO / "scorekeeper" / "report" / "templates" / "report.html.j2").read_text()
    for literal in re.findall(r"\(([^()]*)\)", template):
        listed = sorted({n for n in re.findall(r"[\"']([a-z0-9_]+)[\"']", literal) if n in names})
        if len(listed) >= 2:
            found.append(f"report.html.j2: {listed}")
    assert not found, "metric names listed outside scorekeeper/metrics/registry.py:\n" + "\n".join(found)


def _backticked(text: str) -> list[str]:
    return re.findall(r"`([a-z0-9_]+)`", text)


@pytest.mark.parametrize("head", list(HeadKind))
def test_the_metrics_page_lists_the_gate_metrics_of_the_registry(head):
    """docs/metrics.md names exactly the registry's gate names of each head kind, in its order: the
    run's own, the compared ones (`_drop`, then `_delta`) and the comparison's statistics."""
    page = (REPO / "docs" / "metrics.md").read_text()
    section = page.split("## Names a quality gate accepts", 1)[1].split(f"\n### {head.value}\n", 1)[1].split("\n#", 1)[0]
    own = next(line for line in section.splitlines() if line.startswith("- the run's own:"))
    compared = next(line for line in section.splitlines() if line.startswith("- with `compare_to`:"))
    assert _backticked(own) == [m.name for m in run_metrics(head) if not m.monitoring and not m.labelling]
    monitoring = next(line for line in section.splitlines() if line.startswith("- with `drift_reference`:"))
    labelling = next(line for line in section.splitlines() if line.startswith("- with labels back for a `label_budget` plan:"))
    assert _backticked(monitoring) == ["drift_reference"] + [m.name for m in run_metrics(head) if m.monitoring]
    assert _backticked(labelling) == ["label_budget"] + [m.name for m in run_metrics(head) if m.labelling]
    changes = [m.name for m in compared_metrics(head)]
    assert _backticked(compared) == ["compare_to"] + [f"{n}_drop" for n in changes] + [f"{n}_delta" for n in changes] + [
        m.name for m in metrics_of(head, Scope.COMPARISON)
    ]


_FULL, _ = full_metrics(n=120)
_NUMBERS = [m.name for m in run_metrics(HeadKind.SINGLE_LABEL) if len(m.path) == 1 and not m.count]


def _floats(value) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, BaseModel):
        return [f for _, v in value for f in _floats(v)]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list | tuple):
        return [f for v in value for f in _floats(v)]
    return []


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_NUMBERS), st.floats(allow_nan=True, allow_infinity=True) | st.none(), max_size=len(_NUMBERS)),
    st.floats(allow_nan=True, allow_infinity=True),
)
def test_the_report_renders_the_document_as_the_file_holds_it(values, area):
    """MetricsDocument.finite, what the report renders: the same fields set, every number finite (NaN
    and infinities None), and exactly what metrics.json holds."""
    document = MetricsDocument.model_validate(_FULL | values)
    document.roc_auc = document.roc_auc.model_copy(update={"macro": area})
    finite = document.finite()
    assert finite.model_fields_set == document.model_fields_set
    assert all(math.isfinite(f) for f in _floats(finite))
    assert finite.as_dict() == document.as_dict() == json.loads(document.to_json_bytes())
    for name in values:
        assert getattr(finite, name) == (values[name] if values[name] is not None and math.isfinite(values[name]) else None)

"""The parts of metrics.json a kind's evaluation returns (metrics/document.py: KindMetrics and each
kind's, ReferenceRecords) declare their fields once: MetricsDocument subclasses them, so a field a
kind sets reaches the document with the same name, type and default, and MetricsDocument.KEYS keeps
the file's key order (the golden runs show the bytes are unchanged; tests/test_golden.py)."""

from __future__ import annotations

import json

import pytest

from scorekeeper.metrics import document as d

PARTS = [d.SingleLabelMetrics, d.MultiLabelMetrics, d.RegressionMetrics, d.ReferenceRecords]


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_a_kind_part_declares_each_field_as_the_document_does(part):
    assert issubclass(d.MetricsDocument, part)
    for name, field in part.model_fields.items():
        assert name in d.MetricsDocument.model_fields, f"{part.__name__}.{name} is no field of metrics.json"
        declared = d.MetricsDocument.model_fields[name]
        assert field.annotation == declared.annotation, f"{part.__name__}.{name}: {field.annotation} here, {declared.annotation} there"
        assert field.is_required() == declared.is_required() and field.default == declared.default, name


def test_the_key_order_names_every_field_of_the_document_once():
    keys = d.MetricsDocument.KEYS
    assert len(set(keys)) == len(keys) and set(keys) == set(d.MetricsDocument.model_fields)


def test_metrics_json_holds_the_fields_set_in_the_key_order_whatever_the_order_they_were_set_in():
    fields = {"gates": [], "residual_bins": {}, "evaluated": 0, "accuracy": None, "mae": None, "finished_at": "t"}
    fields |= {"head": "single_label", "scoring_only": True, "ground_truth_source": None, "scored": 0, "rows": 0}
    document = d.MetricsDocument.model_validate(fields)
    document.labels = ["a"]
    want = [key for key in d.MetricsDocument.KEYS if key in {*fields, "labels"}]
    assert want[:3] == ["rows", "scored", "evaluated"] and want[-2:] == ["residual_bins", "gates"]
    assert list(document.as_dict()) == want
    assert list(json.loads(document.to_json_bytes())) == want


def test_the_records_are_what_a_later_run_reads_back():
    assert set(d.ReferenceRecords.model_fields) <= set(d.RecordedMetrics.model_fields)


def test_the_fields_a_part_gives_are_the_ones_set():
    part = d.SingleLabelMetrics(evaluated=3, accuracy=None, curves={"roc": {}})
    fields = part.fields()
    assert set(fields) == {"evaluated", "accuracy", "curves"} and fields["accuracy"] is None
    assert isinstance(fields["curves"], d.Curves)
    document = d.MetricsDocument.model_validate(
        {"rows": 3, "scored": 3, "ground_truth_source": None, "scoring_only": True, "head": "single_label"} | fields
    )
    assert document.model_fields_set == {"rows", "scored", "ground_truth_source", "scoring_only", "head", *fields}

"""The parts of metrics.json a kind's evaluation returns (metrics/document.py: KindMetrics and each
kind's, ReferenceRecords) declare their fields as the document does: the same name, type and
default, so that a field a kind sets reaches the document unchanged (the golden runs show the bytes
are; tests/test_golden.py)."""

from __future__ import annotations

import pytest

from scorekeeper.metrics import document as d

PARTS = [d.SingleLabelMetrics, d.MultiLabelMetrics, d.RegressionMetrics, d.ReferenceRecords]


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_a_kind_part_declares_each_field_as_the_document_does(part):
    for name, field in part.model_fields.items():
        assert name in d.MetricsDocument.model_fields, f"{part.__name__}.{name} is no field of metrics.json"
        declared = d.MetricsDocument.model_fields[name]
        assert field.annotation == declared.annotation, f"{part.__name__}.{name}: {field.annotation} here, {declared.annotation} there"
        assert field.is_required() == declared.is_required() and field.default == declared.default, name


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

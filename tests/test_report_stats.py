"""The report's paired tests, gate lines and label audit, rendered from a real evaluation of two
runs: every number report.html marks equals metrics.json, the markdown carries the same sections,
and the audit's texts and labels are escaped."""

from __future__ import annotations

import copy

import pytest
from markupsafe import escape

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.gates import evaluate_gates
from scorekeeper.report.report import render_html, render_markdown
from scorekeeper.tasks.artifacts import comparison_rows, summary_markdown
from tests.report_fixture import check_marked_numbers, document
from tests.test_compare import LABELS, write_run
from tests.test_paired_tests import two_models

RUN_INFO = {"run_id": "cand", "input_uri": "in.parquet", "model_uri": "m", "mode": "replica", "num_processes": 1}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    truth, before, after = two_models(600, len(LABELS), seed=21, shift=0.8)
    group = [["web", "app", "mail"][i % 3] for i in range(600)]
    base, _ = write_run(tmp, "base", before, truth, slices=[group])
    run, manifest = write_run(tmp, "cand", after, truth, slices=[group], complete=False)
    document = evaluate_run(run, LABELS, manifest, EvaluationSettings(slice_columns=["source"], baseline=base))
    document.gates = evaluate_gates({"macro_f1_drop": "<=0.001 if significant", "accuracy": ">=0.1"}, document)
    return document.as_dict()


def test_the_page_shows_every_test_and_each_number_equals_metrics_json(compared):
    page = render_html(document(compared), RUN_INFO)
    for section in ('id="label-audit"', "deltas tested", "Holm-adjusted p", "detectable change", "Label audit (confident learning)"):
        assert section in page
    checked = check_marked_numbers(page, compared)
    c = compared["comparison"]
    assert checked >= 3 * len(c["metric_tests"]) + 9 * len(c["per_class_tests"]) + 5 * 3 + len(compared["label_audit"]["rows"])
    assert "below the smallest change" in compared["gates"][0]["warning"] and str(escape(compared["gates"][0]["warning"])) in page


def test_markdown_has_the_tests_the_gate_line_and_the_audit(compared):
    text = render_markdown(document(compared), RUN_INFO)
    c = compared["comparison"]
    n = c["tests_counted"]
    assert f"{n['metric_tests'] + n['per_class_tests'] + n['slice_tests']} deltas tested" in text
    assert "| macro_f1 | " in text and "paired_bootstrap" in text and "| roc_auc_macro |" in text and "delong" in text
    gate = compared["gates"][0]
    assert f"detectable change {gate['detectable_change']:.4f}" in text and "- warning: macro_f1_drop" in text
    assert "## Label audit (confident learning)" in text and "| given \\ suggested |" in text
    assert f"{compared['label_audit']['suspected']} rows" in text


def test_the_audit_is_escaped_in_html_and_markdown(compared):
    metrics = copy.deepcopy(compared)
    evil = '<script>alert("audit")</script> | pipe\nnewline'
    metrics["label_audit"]["rows"][0]["text"] = evil
    metrics["label_audit"]["rows"][0]["id"] = "<b>id</b>"
    page = render_html(document(metrics), RUN_INFO)
    assert "<script>" not in page and "&lt;script&gt;alert(&#34;audit&#34;)&lt;/script&gt;" in page and "&lt;b&gt;id&lt;/b&gt;" in page
    markdown = render_markdown(document(metrics), RUN_INFO)
    assert "\\| pipe newline" in markdown


def test_the_prefect_artifacts_carry_the_tests(compared):
    rows = {r["metric"]: r for r in comparison_rows(document(compared))}
    test = compared["comparison"]["metric_tests"]["macro_f1"]
    assert rows["macro_f1"]["95% CI"] == test["ci"] and rows["macro_f1"]["p"] == test["p"] and rows["macro_f1"]["test"] == test["method"]
    summary = summary_markdown(document(compared), "cand", "/runs/cand", {})
    assert "deltas tested" in summary and "label audit" in summary.lower()

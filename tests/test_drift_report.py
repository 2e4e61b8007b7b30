"""The report's drift part (scorekeeper/report/drift_report.py): report.md, report.html and the Prefect
summary open with the alarm sentence, list the signals worst PSI first, draw the worst three, show
the estimate beside the truth, and escape what comes from data (a slice value spelled as markup)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.report.drift_plot import drift_svg
from scorekeeper.report.drift_report import alarm_sentence, estimate_rows
from scorekeeper.report.report import render_html, render_markdown
from scorekeeper.tasks.artifacts import summary_markdown
from tests.test_estimate import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import golden  # noqa: E402

EVIL = "<script>alert(1)</script>|*x*"
RUN_INFO = {"run_id": "cur", "input_uri": "in", "model_uri": "m", "mode": "replica", "num_processes": 1}


def drifted_document(root: Path):
    golden._single_label(root / "ref", 1, 1.2, False)
    golden._single_label(root / "cur", 2, 1.2, False)
    (root / "ref" / "request.json").write_text(json.dumps({"id_column": None, "slice_columns": ["source"]}))
    staged = pq.read_table(root / "cur" / "work" / "input.parquet")
    moved = pa.array([EVIL if i % 3 else "web" for i in range(staged.num_rows)])
    pq.write_table(staged.set_column(staged.schema.get_field_index("slice_0"), "slice_0", moved), root / "cur" / "work" / "input.parquet")
    evaluate(root, "ref", "single_label")
    return evaluate(root, "cur", "single_label", "ref").finite()


def test_the_report_and_the_summary_open_with_the_alarm_and_escape_the_data(tmp_path):
    doc = drifted_document(tmp_path)
    assert doc.drift is not None and doc.drift.alarm and doc.drift.drifted[0] == "slice:source"
    sentence = alarm_sentence(doc.drift)
    assert sentence.startswith("Drift alarm: ") and "against run ref" in sentence and "slice:source (PSI " in sentence

    md = render_markdown(doc, RUN_INFO)
    body = md.split("\n\n", 2)[2]  # after the title and the run's lines
    assert body.startswith("**Drift alarm\\: ")  # markdown-escaped
    table = [line for line in md.splitlines() if line.startswith("| `")]
    psis = [float(line.split(" | ")[2]) for line in table]
    assert psis == sorted(psis, reverse=True) and "<script>" not in md
    assert "| estimated accuracy |" in md and "| estimated macro_f1 |" in md

    html = render_html(doc, RUN_INFO)
    assert html.index('id="drift-banner"') < html.index('id="headline"') and 'class="banner fail" id="drift-banner"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<section id="drift">' in html and html.count("<svg") > 0 and "Drift: the worst signals" in html
    rows = estimate_rows(doc)
    assert (
        [r.metric for r in rows] == ["accuracy", "macro_f1"] and rows[0].truth == doc.accuracy and rows[0].ci == doc.estimated.accuracy_ci
    )

    svg = drift_svg(doc)
    assert svg.count("PSI ") == 3 and "<script>" not in svg and "&lt;script&gt;" in svg

    summary = summary_markdown(doc, "cur", "file:///runs/cur", {"drift.svg": svg})
    assert summary.split("\n\n")[1].startswith("**Drift alarm\\: ") and "<script>" not in summary
    assert "![drift](data:image/svg+xml;base64," in summary


def test_no_drift_and_not_judged_read_as_such(tmp_path):
    doc = drifted_document(tmp_path)
    assert doc.drift is not None
    quiet = doc.drift.model_copy(update={"alarm": False, "drifted": [], "drifted_signals": 0})
    for s in quiet.signals.values():
        s.drifted = False
    assert alarm_sentence(quiet).startswith("No drift against run ref") and "largest PSI" in alarm_sentence(quiet)
    for s in quiet.signals.values():
        s.drifted, s.reason = None, "not judged: 40 rows in the current run (at least 100 needed)"
    assert alarm_sentence(quiet) == f"Drift not judged against run ref (240 rows; this run 240): {s.reason}."

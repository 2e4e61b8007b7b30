"""report.html in headless Chromium, as a person opens it: no console errors, not blank, the
numbers on the page equal metrics.json, and a text holding <script> shows as text.

Reports: one rendered from a metrics document with every section (comparison, gates,
history...), one from a real small run (scoring processes, DuckDB evaluation, publish), and one
per other head kind (multi-label, regression) from their own SQL over generated rows.
Chromium is Debian's `chromium` package, installed by ./setup.sh (as root); the tests skip without it.
"""

from __future__ import annotations

import html
import json

import pytest

from scorekeeper.report.report import render_html
from tests.browser import distinct_colours, dump_dom, find_chromium, screenshot
from tests.helpers import make_rows, run_flow, write_rows
from tests.report_fixture import SCRIPT_TEXT, check_marked_numbers, document, full_metrics, marked_numbers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if not path:
        pytest.skip("chromium is not installed: ./setup.sh installs Debian's `chromium` when run as root (or: apt-get install chromium)")
    return path


def _check_in_browser(chromium, page, metrics, tmp_path) -> str:
    dom, errors = dump_dom(chromium, page)
    assert errors == [], errors
    assert check_marked_numbers(dom, metrics) > 20  # the numbers as the browser parsed them
    shot = screenshot(chromium, page, tmp_path / "shot.png", width=1000, height=700)
    assert distinct_colours(shot) > 50  # text, tables and plots, not a blank page
    return dom


def test_full_report_in_chromium(chromium, tmp_path):
    metrics, run_info = full_metrics()
    page = tmp_path / "report.html"
    page.write_text(render_html(document(metrics), run_info))
    dom = _check_in_browser(chromium, page, metrics, tmp_path)
    assert dom.count("<script") == 1  # only the test's error hook: the row's <script> stayed text
    assert html.escape(SCRIPT_TEXT, quote=False) in dom
    for section in ("comparison", "gates", "curves", "calibration", "thresholds", "slices", "errors", "history", "run"):
        assert f'id="{section}"' in dom


def test_report_of_a_real_run_in_chromium(chromium, tmp_path, models):
    rows = make_rows(40, seed=5)
    for i, row in enumerate(rows):
        row["channel"] = ["web", "app", "<email>"][i % 3]
    rows[3]["text"] = SCRIPT_TEXT
    path = write_rows(tmp_path / "in.parquet", rows)
    result = run_flow(input_uri=str(path), model_uri=models["bert"], output_uri=str(tmp_path / "out"), slice_columns=["channel"])
    page = result.run_dir / "report" / "report.html"
    metrics = json.loads((result.run_dir / "report" / "metrics.json").read_text())
    dom = _check_in_browser(chromium, page, metrics, tmp_path)
    assert dom.count("<script") == 1
    assert 'id="slices"' in dom and "&lt;email&gt;" in dom


def _head_report(head: str) -> tuple[dict, dict]:
    """metrics.json of a multi-label or a regression run, computed by the heads' own SQL over
    generated rows whose label names and texts hold markup."""
    import numpy as np

    if head == "multi_label":
        from tests import test_multilabel_metrics as ml

        truth, probs = ml.random_case(np.random.default_rng(4), 300, decimals=2, always=False)
        slices = {"<i>source</i>": [None if i % 7 == 0 else f"<b>s{i % 3}</b>" for i in range(300)]}
        return ml.report_metrics(['<img src=x onerror="alert(1)">', *ml.LABELS[1:]], truth, probs, slices), ml.RUN_INFO
    from tests import test_regression_metrics as reg

    y, p = reg.random_case(np.random.default_rng(7), 4000, decimals=2)
    text = [f"<script>row {i}</script>" for i in range(4000)]
    slices = {"<i>source</i>": [None if i % 7 == 0 else f"<b>s{i % 3}</b>" for i in range(4000)]}
    return reg.report_metrics(p.tolist(), y.tolist(), ["<b>quality</b>"], text, slices), reg.RUN_INFO


@pytest.mark.parametrize("head, section", [("multi_label", "per-label"), ("regression", "regression")])
def test_the_report_of_each_head_in_chromium(chromium, tmp_path, head, section):
    metrics, run_info = _head_report(head)
    page = tmp_path / "report.html"
    page.write_text(render_html(document(metrics), run_info))
    dom = _check_in_browser(chromium, page, metrics, tmp_path)
    assert dom.count("<script") == 1 and "<img src=x" not in dom  # markup from the data stayed text
    assert f'id="{section}"' in dom and 'id="per-class"' not in dom
    # the slice table: every group's row count and metric with its interval, as metrics.json holds them
    keys = ["micro_f1", "micro_f1_ci", "subset_accuracy", "subset_accuracy_ci"] if head == "multi_label" else ["mae", "mae_ci"]
    groups = metrics["slices"]["<i>source</i>"]
    assert 'id="slices"' in dom and len(groups) == 4 and all(s[k] is not None for s in groups.values() for k in keys)
    marked = {json.dumps(path) for path, _, _ in marked_numbers(dom)}  # each checked against metrics.json above
    for value, s in groups.items():
        for key in ["rows", *keys]:
            for path in [[key, 0], [key, 1]] if key.endswith("_ci") else [[key]]:
                assert json.dumps(["slices", "<i>source</i>", value, *path]) in marked, (value, path)

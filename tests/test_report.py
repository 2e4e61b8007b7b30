"""The report's rendering (pure: metrics in, text out): every section, escaping, the numbers shown,
the plots, and the Prefect artifacts' content. Fast: no processes, no servers."""

from __future__ import annotations

import base64
import copy
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from scorekeeper.escape import md_text
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report import plots
from scorekeeper.report.report import plot_files, publish_report, render_html, render_markdown, run_facts
from scorekeeper.run_facts import RunFacts
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.artifacts import comparison_rows, summary_markdown
from tests.report_fixture import SCRIPT_TEXT, check_marked_numbers, document, full_metrics, marked_numbers

NEW_FIELDS = (
    "accuracy_ci",
    "roc_auc",
    "average_precision",
    "top_k_accuracy",
    "thresholds",
    "curves",
    "score_histogram",
    "confident_errors",
    "comparison",
    "gates",
    "history",
)
SECTIONS = ("gates", "comparison", "per-class", "curves", "calibration", "thresholds", "slices", "errors", "history", "run")


@pytest.fixture(scope="module")
def full():
    return full_metrics()


def _tags(page: str) -> list[str]:
    tags = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)

    Parser().feed(page)
    return tags


def _section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def test_full_metrics_render_every_section(full):
    metrics, run_info = full
    page = render_html(document(metrics), run_info)
    assert _section_ids(page) == list(SECTIONS)
    assert "1 of 3 quality gates failed" in page
    assert page.count("<svg") >= 7 + sum(len(v) for v in metrics["slices"].values())  # the plots + one interval per slice row
    for fact in (run_info["input_fingerprint"], run_info["model_fingerprint"], run_info["adapter_uri"], "rows/s", "tokens/s", "truncated"):
        assert fact in page
    # Self-contained: nothing is loaded from anywhere, and nothing runs.
    assert not re.search(r'(src|href)="(?!#)', page)
    assert "script" not in _tags(page) and "@import" not in page and "url(" not in page


def test_only_present_fields_are_rendered(full):
    metrics, run_info = full
    today = {k: v for k, v in metrics.items() if k not in NEW_FIELDS}
    today["slices"] = {c: {v: {"rows": s["rows"], "accuracy": s["accuracy"]} for v, s in g.items()} for c, g in metrics["slices"].items()}
    page = render_html(document(today), run_info)
    assert _section_ids(page) == ["per-class", "calibration", "slices", "run"] and 'id="confusion"' in page
    assert "95% CI" not in page and "quality gates" not in page
    check_marked_numbers(page, today)
    render_markdown(document(today), run_info)


def test_scoring_only_run_says_so_and_shows_the_run():
    metrics = {
        "rows": 30,
        "scored": 30,
        "evaluated": 0,
        "ground_truth_source": None,
        "scoring_only": True,
        "head": "single_label",
        "accuracy": None,
        "macro_f1": None,
        "weighted_f1": None,
        "log_loss": None,
        "log_loss_rows": 0,
        "ece": None,
        "ece_bins": 15,
        "calibration": [],
        "per_class": {},
        "confusion": {},
        "labels": ["a", "b"],
        "missing_predictions": 0,
        "unmatched_predictions": 30,
        "unknown_labels": {},
        "null_text_rows": 0,
        "slices": {},
    }
    run_info = {"run_id": "r", "input_uri": "in.csv", "model_uri": "m", "mode": "replica", "num_processes": 1}
    page = render_html(document(metrics), run_info)
    assert "Scoring-only run" in page and _section_ids(page) == ["run"]
    assert "Scoring-only run" in render_markdown(document(metrics), run_info)
    assert plot_files(document(metrics)) == {}


def test_data_is_escaped_everywhere(full):
    metrics, run_info = copy.deepcopy(full)
    evil = '<img src=x onerror="alert(1)">'
    metrics["per_class"][evil] = metrics["per_class"].pop("mixed")
    metrics["confusion"][evil] = metrics["confusion"].pop("mixed")
    metrics["slices"]["source"][evil] = metrics["slices"]["source"].pop("email")
    metrics["confident_errors"][1]["id"] = "</td><script>alert(2)</script>"
    metrics["unknown_labels"] = {"<b>x</b>": 3}
    run_info["run_id"] = "<title>run"
    page = render_html(document(metrics), run_info)
    assert set(_tags(page)) <= {"html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "h3", "p", "code", "nav", "a"} | {
        "div", "section", "span", "strong", "details", "summary", "table", "tr", "th", "td", "dl", "dt", "dd", "svg", "rect", "line", "text", "polyline", "circle"
    }  # fmt: skip
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page  # the confident error's text, shown as text
    for svg in plot_files(document(metrics)).values():
        ET.fromstring(svg)  # still well-formed XML: every label escaped
    markdown = render_markdown(document(metrics), run_info)
    assert "| " + md_text("<b>x</b>") + " | 3 |" in markdown  # escaped: Prefect's UI renders HTML in markdown (tests/test_escaping.py)


def test_numbers_shown_equal_the_metrics(full):
    metrics, run_info = full
    checked = check_marked_numbers(render_html(document(metrics), run_info), metrics)
    per_class = len(metrics["per_class"]) * 6
    assert checked > per_class + len(metrics["thresholds"]) * 6 + len(metrics["gates"]) * 2


def test_confusion_with_50_labels_keeps_the_top_labels_and_groups_the_rest():
    labels = [f"topic-{i:02d}" for i in range(50)]
    metrics, run_info = full_metrics(n=2000, labels=labels)
    names, counts, grouped = plots.confusion_cells(document(metrics))
    assert len(names) == plots.CONFUSION_TOP and grouped == 50 - (plots.CONFUSION_TOP - 1)
    assert names[-1] == f"other ({grouped} labels)"
    assert sum(map(sum, counts)) == metrics["evaluated"]  # nothing dropped by the grouping
    support = {n: metrics["per_class"][n]["support"] for n in labels}
    kept = set(names[:-1])
    assert min(support[n] for n in kept) >= max(support[n] for n in labels if n not in kept)
    page = render_html(document(metrics), run_info)
    assert f"the other {grouped} are summed" in page
    svg = plots.confusion_svg(document(metrics))
    assert "Confusion matrix" in svg and svg.count("<rect") == 1 + len(names) ** 2


def test_plots_have_axes_titles_and_their_own_background(full):
    metrics, _ = full
    svgs = plot_files(document(metrics))
    assert set(svgs) == {"confusion.svg", "reliability.svg", "roc.svg", "pr.svg", "scores.svg", "coverage.svg", "history.svg"}
    for name, svg in svgs.items():
        root = ET.fromstring(svg)
        first = root[0]
        assert first.tag.endswith("rect") and first.get("fill") == "#fff", name
        assert float(root.get("width")) >= 400 and float(root.get("height")) >= 300, name
        texts = "".join(root.itertext())
        top = min(float(t.get("y")) for t in root.iter("{http://www.w3.org/2000/svg}text") if not t.get("transform"))
        assert top >= 12, name  # the title is inside the box, not cut off
        assert texts, name
    reliability = "".join(ET.fromstring(svgs["reliability.svg"]).itertext())
    assert "confidence" in reliability and "accuracy" in reliability and "ECE 0.1" in reliability
    for b in metrics["calibration"]:
        assert f">{b['rows']}<" in svgs["reliability.svg"]  # each bin's count
    for tick in ("0.2", "0.4", "0.6", "0.8"):
        assert f">{tick}<" in svgs["reliability.svg"]
    for label in metrics["labels"]:
        assert label in svgs["roc.svg"] and label in svgs["pr.svg"]


def test_slices_worst_first_with_intervals(full):
    metrics, run_info = full
    shuffled = copy.deepcopy(metrics)
    shuffled["slices"]["source"] = dict(reversed(list(metrics["slices"]["source"].items())))
    page = render_html(document(shuffled), run_info)
    worst_first = sorted(metrics["slices"]["source"], key=lambda v: metrics["slices"]["source"][v]["accuracy"])
    shown = [path[2] for path, _, _ in marked_numbers(page) if path[:2] == ["slices", "source"] and path[3] == "accuracy"]
    assert shown == worst_first
    markdown = render_markdown(document(shuffled), run_info)
    rows = [line.split(" | ")[0].strip("| ") for line in markdown.split("## By source")[1].splitlines()[4:8]]
    assert rows == worst_first
    ci = metrics["slices"]["source"][worst_first[0]]["accuracy_ci"]
    assert f"[{ci[0]:.4f}, {ci[1]:.4f}]" in markdown


def test_markdown_keeps_the_headline_content(full):
    metrics, run_info = full
    markdown = render_markdown(document(metrics), run_info)
    ci = metrics["accuracy_ci"]
    assert f"| accuracy | {metrics['accuracy']:.4f} (95% CI [{ci[0]:.4f}, {ci[1]:.4f}]) |" in markdown
    assert "**Gates: 1 of 3 failed.**" in markdown and "| ece <= 0.02 |" in markdown
    assert f"## Compared with run `{metrics['comparison']['run']}`" in markdown
    assert f"{metrics['comparison']['flipped']['right_to_wrong']} right -> wrong" in markdown
    for section in ("## Per class", "## Confusion", "## By source", "## By length"):
        assert section in markdown


def test_run_facts_name_what_ran(full):
    metrics, run_info = full
    facts = dict(run_facts(document(metrics), RunFacts.of(run_info)))
    assert facts["input fingerprint"] == run_info["input_fingerprint"]
    assert facts["mode"].startswith("replica, 2 process(es)")
    assert "96.0 rows/s" in facts["scoring"] and facts["truncated"].startswith("3 texts")


def test_summary_artifact_shows_plots_as_data_urls(full):
    metrics, _ = full
    text = summary_markdown(document(metrics), "run-1", "/runs/run-1", plot_files(document(metrics)))
    urls = re.findall(r"!\[[^\]]*\]\((data:image/svg\+xml;base64,[A-Za-z0-9+/=]+)\)", text)
    assert len(urls) == 3
    for url in urls:
        svg = ET.fromstring(base64.b64decode(url.split(",", 1)[1]))
        assert svg[0].get("fill") == "#fff"  # a light plot on Prefect's dark UI
    assert "file://" not in text and "s3://" not in text
    assert "1 of 3 quality gates failed" in text and "McNemar p" in text


def test_comparison_table_rows(full):
    metrics, _ = full
    rows = comparison_rows(document(metrics))
    by_metric = {r["metric"]: r for r in rows}
    before = metrics["comparison"]["run"]
    assert by_metric["accuracy"]["this run"] == metrics["accuracy"]
    assert by_metric["accuracy"][before] == pytest.approx(metrics["accuracy"] - metrics["comparison"]["deltas"]["accuracy"])
    assert by_metric["rows right to wrong"]["change"] == metrics["comparison"]["flipped"]["right_to_wrong"]
    assert comparison_rows(document({k: v for k, v in metrics.items() if k != "comparison"})) == []


def test_publish_report_writes_every_file(tmp_path, full):
    metrics, run_info = full
    written = publish_report(RunFolder.from_uri(str(tmp_path)), MetricsDocument.model_validate(metrics), run_info)
    assert set(written) == {"metrics.json", "report.md", "report.html"} | set(plot_files(document(metrics)))
    assert SCRIPT_TEXT not in (tmp_path / "report" / "report.html").read_text()


def test_the_slice_tables_metrics_and_their_directions_are_the_registrys():
    """Each head's slice metrics are registry metrics of that head (their direction orders the groups)
    whose value and interval are fields of that head's slice groups."""
    import typing

    from scorekeeper.evaluation.kinds import KINDS
    from scorekeeper.metrics.registry import BY_NAME, Direction

    slices = typing.get_args(MetricsDocument.model_fields["slices"].annotation)[0]  # {column: {value: group}}
    groups = typing.get_args(typing.get_args(typing.get_args(slices)[1])[1])
    for head, kind in KINDS.items():
        for s in kind.report.slice_metrics:
            assert BY_NAME[s.key] is s.metric and head in s.metric.heads
            assert s.lower_is_better == (s.metric.direction == Direction.LOWER)
            assert any({s.key, s.interval} <= set(g.model_fields) for g in groups), (head, s.key, s.interval)


def test_the_report_layer_renders_the_typed_document():
    """No module of the report layer turns the document back into a dict to read it by key."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    modules = [*(root / "scorekeeper" / "report").glob("*.py"), root / "tasks" / "artifacts.py", root / "tasks" / "report.py"]
    assert [str(p.relative_to(root)) for p in modules if ".as_dict()" in p.read_text()] == []

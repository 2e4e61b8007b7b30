"""The human report: report.md, report.html (one self-contained file, inline SVG) and metrics.json.

Rendering is pure: the typed metrics document as metrics.json holds it (`MetricsDocument.finite`)
and run facts in, text out. The report is rendered once (scorekeeper/report/view.py): each section
is a view built from the document (`SECTION_VIEWS`), rendered by its markdown template and its HTML
template; report.md is the sections' markdown in order, report.html the page
(templates/report.html.j2, autoescaped) placing their HTML. No template reads the document. Every
section is shown only when its field is in the metrics. Numbers shown in report.html carry
`data-key` (their JSON path in metrics.json) and `data-value`, so a check can compare the page with
metrics.json. metrics.json itself is the typed document's own writer's
(scorekeeper/metrics/document.py), so every file shows the same numbers. Publishing writes each file whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scorekeeper.evaluation.base import KindReport
from scorekeeper.evaluation.kinds import evaluation_for
from scorekeeper.evaluation.labelling import PLAN_FILE, PLAN_WORK
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report.audit_report import audit_view
from scorekeeper.report.comparison_report import comparison_view
from scorekeeper.report.drift_report import drift_markdown, drift_view
from scorekeeper.report.gates_report import gates_view
from scorekeeper.report.head_report import head_view
from scorekeeper.report.headline_report import headline_view, precision_sentence
from scorekeeper.report.labelling_report import labelling_markdown, labelling_view
from scorekeeper.report.length_report import length_markdown, length_view, long_text_fact
from scorekeeper.report.per_class_report import per_class_view, unknown_labels_view
from scorekeeper.report.per_label_report import per_label_view, wrong_labels_view
from scorekeeper.report.per_output_report import per_output_view
from scorekeeper.report.plots_report import calibration_view, curves_view, label_calibration_view
from scorekeeper.report.render import (
    fmt,
    plot_files,
)
from scorekeeper.report.slices_report import slices_view
from scorekeeper.report.tables_report import FactsView, errors_view, groups_markdown, groups_view, history_view, thresholds_view
from scorekeeper.report.view import html_environment, render_html_section, render_markdown_section
from scorekeeper.run_facts import RunFacts
from scorekeeper.run_folder import RunFolder
from scorekeeper.scoring_summary import ScoringSummary


def render_markdown(metrics: MetricsDocument, run_info: RunFacts | Mapping) -> str:
    facts = RunFacts.of(run_info)
    scoring = metrics.scoring
    lines = render_markdown_section("head", head_view(metrics, facts))
    lines += drift_markdown(metrics)  # a run with drift_reference opens with its alarm
    lines += labelling_markdown(metrics, facts)  # the prediction-powered metrics, the plan and how to label it
    if metrics.scoring_only:
        lines += ["**Scoring-only run**: the input has no ground-truth labels, so no accuracy metrics.", ""]
    lines += render_markdown_section("gates", gates_view(metrics))
    lines += render_markdown_section("headline", headline_view(metrics))
    lines += groups_markdown(scoring)
    lines += render_markdown_section("comparison", comparison_view(metrics))
    for section in kind_report(metrics).sections:  # the kind's own sections (its spec: evaluation/base.KindReport)
        lines += _kind_markdown(section, metrics)
    lines += length_markdown(metrics)
    lines += render_markdown_section("unknown_labels", unknown_labels_view(metrics))
    lines += render_markdown_section("per_class", per_class_view(metrics))
    lines += render_markdown_section("slices", slices_view(metrics))
    lines += render_markdown_section("label_audit", audit_view(metrics))
    return "\n".join(lines)


# The sections rendered once (scorekeeper/report/view.py): name -> the view's builder; each has
# templates/<name>.md.j2 and templates/<name>.html.j2, which read that view only.
SECTION_VIEWS: dict[str, Callable[[MetricsDocument, RunFacts], object | None]] = {
    "comparison": lambda metrics, _facts: comparison_view(metrics),
    "drift": lambda metrics, _facts: drift_view(metrics),
    "gates": lambda metrics, _facts: gates_view(metrics),
    "label_audit": lambda metrics, _facts: audit_view(metrics),
    "labelling": labelling_view,
    "per_class": lambda metrics, _facts: per_class_view(metrics),
    "per_label": lambda metrics, _facts: per_label_view(metrics),
    "per_output": lambda metrics, _facts: per_output_view(metrics),
    "slices": lambda metrics, _facts: slices_view(metrics),
    "thresholds": lambda metrics, _facts: thresholds_view(metrics),
    "errors": lambda metrics, _facts: errors_view(metrics),
    "history": lambda metrics, _facts: history_view(metrics),
    "headline": lambda metrics, _facts: headline_view(metrics),
    "head": head_view,
    "curves": lambda metrics, _facts: curves_view(metrics),
    "calibration": lambda metrics, _facts: calibration_view(metrics),
    "label_calibration": lambda metrics, _facts: label_calibration_view(metrics),
    "groups": lambda metrics, _facts: groups_view(metrics.scoring),
    "facts": lambda metrics, facts: FactsView(tuple(run_facts(metrics, facts))),
    "unknown_labels": lambda metrics, _facts: unknown_labels_view(metrics),
    "wrong_labels": lambda metrics, _facts: wrong_labels_view(metrics),
    "length": lambda metrics, _facts: length_view(metrics),
}


# The kinds' own report.md sections by the name their spec gives (evaluation/base.KindReport.sections).
KIND_SECTIONS: dict[str, Callable[[MetricsDocument], object | None]] = {"per_label": per_label_view, "per_output": per_output_view}


def _kind_markdown(section: str, metrics: MetricsDocument) -> list[str]:
    """A kind's own report.md section: its view rendered by templates/<section>.md.j2."""
    return render_markdown_section(section, KIND_SECTIONS[section](metrics))


def kind_report(metrics: MetricsDocument) -> KindReport:
    """What the report shows of the run's kind of head beyond the shared sections (its spec)."""
    return evaluation_for(metrics.head).report


def render_html(metrics: MetricsDocument, run_info: RunFacts | Mapping) -> str:
    """report.html: the page (templates/report.html.j2) placing each section's rendered view."""
    gates = gates_view(metrics)
    drift = drift_view(metrics)
    run = RunFacts.of(run_info)
    head = head_view(metrics, run)
    facts = run_facts(metrics, run)
    return (
        html_environment()
        .get_template("report.html.j2")
        .render(
            scoring_only=metrics.scoring_only,
            head_view=head,
            head=render_html_section("head", head),
            facts=render_html_section("facts", FactsView(tuple(facts))),
            thresholds=render_html_section("thresholds", thresholds_view(metrics)),
            errors=render_html_section("errors", errors_view(metrics)),
            history=render_html_section("history", history_view(metrics)),
            curves=render_html_section("curves", curves_view(metrics)),
            calibration=render_html_section("calibration", calibration_view(metrics)),
            label_calibration=render_html_section("label_calibration", label_calibration_view(metrics)),
            headline=render_html_section("headline", headline_view(metrics)),
            gates=gates,
            gates_section=render_html_section("gates", gates),
            label_audit=render_html_section("label_audit", audit_view(metrics)),
            slices=render_html_section("slices", slices_view(metrics)),
            per_class=render_html_section("per_class", per_class_view(metrics)),
            unknown_labels=render_html_section("unknown_labels", unknown_labels_view(metrics)),
            comparison=render_html_section("comparison", comparison_view(metrics)),
            groups=render_html_section("groups", groups_view(metrics.scoring)),
            per_label=render_html_section("per_label", per_label_view(metrics)),
            wrong_labels=render_html_section("wrong_labels", wrong_labels_view(metrics)),
            per_output=render_html_section("per_output", per_output_view(metrics)),
            length=render_html_section("length", length_view(metrics)),
            drift_view=drift,
            drift=render_html_section("drift", drift),
            labelling=render_html_section("labelling", labelling_view(metrics, run)),
        )
    )


def run_facts(metrics: MetricsDocument, run: RunFacts) -> list[tuple[str, str]]:
    """What ran, on what, and how fast: (name, text) pairs for the report's last section."""
    scoring = metrics.scoring
    facts = [("run", run.run_id), ("input", run.input_uri)]
    if run.input_fingerprint:
        facts.append(("input fingerprint", run.input_fingerprint))
    facts.append(("model", run.model_uri))
    if run.model_fingerprint:
        facts.append(("model fingerprint", run.model_fingerprint))
    if run.adapter_uri:
        merged = "merged into the weights" if run.merge_adapter else "not merged"
        facts.append(("adapter", f"{run.adapter_uri} ({merged})"))
        if run.adapter_fingerprint:
            facts.append(("adapter fingerprint", run.adapter_fingerprint))
    facts.append(("rows", f"{metrics.rows:,} in the input, {metrics.scored:,} scored, {metrics.evaluated:,} evaluated"))
    if metrics.ground_truth_source:
        facts.append(("ground truth", metrics.ground_truth_source))
    dtype = (scoring.dtype or _groups_dtype(scoring) if scoring else None) or run.dtype
    facts.append(("mode", f"{run.mode}, {run.num_processes} process(es)" + (f", dtype {dtype}" if dtype else "")))
    if scoring and scoring.precision_check:
        facts.append(("precision check", precision_sentence(scoring.precision_check)))
    if scoring:
        facts.append(
            (
                "scoring",
                f"{scoring.rows_scored:,} rows this attempt in {scoring.seconds:.1f} s: "
                f"{scoring.rows_per_s:,.1f} rows/s, {scoring.tokens_per_s:,.0f} tokens/s",
            )
        )
        if scoring.rows_scored != metrics.scored:
            facts.append(("resumed", f"{metrics.scored - scoring.rows_scored:,} rows were scored by an earlier attempt"))
        if scoring.padded_tokens:
            facts.append(
                (
                    "padding",
                    f"{scoring.tokens:,} tokens of {scoring.padded_tokens:,} padded ({scoring.tokens / scoring.padded_tokens:.1%} useful)",
                )
            )
        facts.append(("truncated", f"{scoring.truncated:,} texts cut to the model's maximum length"))
    if (fact := long_text_fact(metrics)) is not None:
        facts.append(fact)
    for pipe in (scoring.pipeline if scoring else None) or []:
        facts.append(
            (
                f"pipeline {pipe.pipeline}",
                f"stages {pipe.stages}, {pipe.microbatches} micro-batches, bubble "
                f"{fmt(pipe.bubble_measured, 3)} measured vs {fmt(pipe.bubble_theoretical, 3)} theoretical",
            )
        )
    if metrics.null_text_rows:
        facts.append(("null texts", f"{metrics.null_text_rows:,} rows scored as empty text"))
    if run.slice_columns:
        facts.append(("slice columns", ", ".join(run.slice_columns)))
    return facts


def _groups_dtype(scoring: ScoringSummary) -> str | None:
    """A fanned-out run's dtype: the one its groups' machines used (each reports its own)."""
    used = {g.dtype for g in scoring.groups or [] if g.dtype}
    return ", ".join(sorted(used)) or None


def publish_report(run: RunFolder, metrics: MetricsDocument, run_info: RunFacts | Mapping) -> dict[str, str]:
    """Write the plots, report.md, report.html and metrics.json (last), then the completion record
    (scorekeeper/report/publish.py); returns their URIs. Every file is rendered from the document as
    metrics.json holds it (`MetricsDocument.finite`), so none can disagree with it."""
    from datetime import UTC, datetime

    from scorekeeper.report.publish import publish_complete

    document = metrics.finite()
    files = {name: svg.encode() for name, svg in plot_files(document).items()}
    facts = RunFacts.of(run_info)  # converted once: every section reads the facts by attribute
    files |= {"report.md": render_markdown(document, facts).encode(), "report.html": render_html(document, facts).encode()}
    if document.label_plan is not None:  # drawn by the evaluate step into work/ (scorekeeper/evaluation/labelling.py)
        files[PLAN_FILE] = run.read_bytes(PLAN_WORK)
    if run.exists(RunFolder.TOKEN_COUNTS_WORK):  # summed by the gather (tasks/gather.py): report/token_counts.parquet
        files[RunFolder.TOKEN_COUNTS.removeprefix(RunFolder.REPORT_DIR + "/")] = run.read_bytes(RunFolder.TOKEN_COUNTS_WORK)
    files["metrics.json"] = metrics.to_json_bytes()
    finished = document.finished_at or datetime.now(UTC).isoformat(timespec="seconds")
    return publish_complete(run, files, finished)

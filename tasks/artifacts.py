"""Prefect artifacts: a progress bar while scoring, then a summary, a per-class table, the plots
and a link to the report. Only called from inside a flow run.

Its text comes from scorekeeper/report/render.py, as the report's does; it imports none of the flow's steps, so
the scoring steps (score, fan_out) import it without pulling in the report."""

from __future__ import annotations

import time
from typing import cast
from uuid import UUID

from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from scorekeeper.escape import md_code, md_text
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.registry import compared_metrics, metric_value
from scorekeeper.redact import redact_uri
from scorekeeper.report import plots
from scorekeeper.report.drift_report import drift_markdown
from scorekeeper.report.labelling_report import labelling_markdown
from scorekeeper.report.render import fmt, headline, plot_files, signed
from scorekeeper.report.report_stats import tests_sentence
from scorekeeper.run_facts import RunFacts
from scorekeeper.tasks.open_run import RunContext


class ProgressTracker:
    """A progress artifact, updated at most once a second."""

    def __init__(self, description: str):
        # Called from a task (sync): Prefect's dispatcher returns the id, not the coroutine its type allows.
        self.artifact_id = cast(UUID, create_progress_artifact(progress=0.0, key="scorekeeper-progress", description=description))
        self.last = 0.0

    def update(self, percent: float) -> None:
        if percent < 100.0 and time.time() - self.last < 1.0:
            return
        self.last = time.time()
        update_progress_artifact(self.artifact_id, progress=min(percent, 100.0))


SUMMARY_PLOTS = ("reliability.svg", "confusion.svg", "roc.svg")  # shown inline in the summary
IMAGE_PLOTS = ("confusion.svg", "reliability.svg", "roc.svg", "pr.svg", "scores.svg", "coverage.svg", "history.svg")


def _link(uri: str) -> str:
    uri = redact_uri(uri)  # artifacts are stored by the Prefect server: never a password
    return uri if "://" in uri else "file://" + uri


def summary_markdown(metrics: MetricsDocument, run_id: str, run_uri: str, svgs: dict[str, str], facts: RunFacts | None = None) -> str:
    """The run's summary for Prefect's UI: headline, gates, comparison, the scoring step's numbers
    (the document's `scoring`) and the main plots inline.

    Plots are data: URLs, the only image source Prefect's UI shows from an artifact (it cannot
    reach file:// or s3://); each plot draws its own white background for the UI's dark theme.
    """
    lines = [f"# scorekeeper run {md_code(run_id)}", ""]
    if metrics.drift:  # a run with drift_reference opens with its alarm, signals, worst three drawn, estimate
        lines += drift_markdown(metrics)
        if svgs.get("drift.svg"):
            lines += [f"![drift]({plots.data_url(svgs['drift.svg'])})", ""]
    # a run with a labelling plan: its prediction-powered metrics, the rows to label and how to hand them back
    lines += labelling_markdown(metrics, facts, f"{run_uri}/report/label_plan.parquet")
    gates = metrics.gates or []
    failed = [g for g in gates if not g.passed]
    if failed:
        lines += [
            f"**{len(failed)} of {len(gates)} quality gates failed:** " + "; ".join(f"{g.gate} (value {fmt(g.value)})" for g in failed),
            "",
        ]
    elif gates:
        lines += [f"All {len(gates)} quality gates passed.", ""]
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in headline(metrics)]
    comparison = metrics.comparison
    if comparison and comparison.flipped:
        flipped = comparison.flipped
        first = compared_metrics(metrics.head)[0].name  # the headline's first metric
        lines += [
            "",
            f"Against run {md_code(comparison.run)} ({comparison.rows_compared} rows): {first} "
            f"{signed(comparison.deltas.get(first))}, {flipped.right_to_wrong} rows right -> wrong, "
            f"{flipped.wrong_to_right} wrong -> right, McNemar p = {comparison.mcnemar_p:.4g}.",
        ]
        if comparison.metric_tests:
            lines += ["", tests_sentence(comparison)]
    audit = metrics.label_audit
    if audit:
        lines += [
            "",
            f"Label audit (confident learning): {audit.suspected} suspected label errors; accuracy without them "
            f"{fmt(audit.accuracy_excluding_suspected)}.",
        ]
    scoring = metrics.scoring
    if scoring and scoring.rows_scored:
        lines += [
            "",
            f"Scored {scoring.rows_scored} rows in {scoring.seconds:.1f} s: "
            f"{scoring.rows_per_s:.1f} rows/s, {scoring.tokens_per_s:.0f} tokens/s "
            f"on {scoring.processes} process(es).",
        ]
    lines += ["", f"Outputs: {md_code(run_uri)} (predictions.parquet, report/report.html)", ""]
    for name in SUMMARY_PLOTS:
        if svgs.get(name):
            lines += [f"![{name.removesuffix('.svg')}]({plots.data_url(svgs[name])})", ""]
    return "\n".join(lines)


def comparison_rows(metrics: MetricsDocument) -> list[dict]:
    """The comparison as table rows: each metric with both runs' values and the change."""
    comparison = metrics.comparison
    if not comparison:
        return []
    rows, other = [], md_text(comparison.run)  # a column name: rendered as markdown by the UI
    for name, change in comparison.deltas.items():
        now = metric_value(metrics, name)
        before = None if now is None or change is None else now - change
        row: dict[str, object] = {"metric": name, "this run": now, other: before, "change": change}
        test = comparison.metric_tests.get(name)
        if test is not None:
            row |= {"95% CI": test.ci, "p": test.p, "test": test.method}
        rows.append(row)
    if comparison.flipped:  # regression runs compare errors, not right and wrong
        for kind, n in comparison.flipped:
            rows.append({"metric": f"rows {kind.replace('_', ' ')}", "this run": None, other: None, "change": n})
    if comparison.mcnemar_p is not None:
        rows.append({"metric": "McNemar p", "this run": None, other: None, "change": comparison.mcnemar_p})
    return rows


def per_class_rows(metrics: MetricsDocument) -> list[dict]:
    """The per-class table artifact's rows; the UI renders each cell as markdown, so labels are escaped."""
    return [{"label": md_text(name), **scores.model_dump()} for name, scores in (metrics.per_class or {}).items()]


def publish_report_artifacts(context: RunContext, metrics: MetricsDocument, files: dict[str, str], facts: RunFacts | None = None) -> None:
    """The run's artifacts from the document as metrics.json holds it (`MetricsDocument.finite`)."""
    svgs = plot_files(metrics)
    create_markdown_artifact(
        summary_markdown(metrics, context.run_id, redact_uri(context.run_uri), svgs, facts),
        key="scorekeeper-summary",
        description="Evaluation summary",
    )
    if metrics.per_class:
        create_table_artifact(
            per_class_rows(metrics),
            key="scorekeeper-per-class",
            description="Per-class precision, recall, F1 and support",
        )
    if metrics.comparison:
        create_table_artifact(
            comparison_rows(metrics), key="scorekeeper-comparison", description=f"Compared with run {md_code(metrics.comparison.run)}"
        )
    for name in IMAGE_PLOTS:
        if svgs.get(name):
            create_image_artifact(plots.data_url(svgs[name]), key=f"scorekeeper-{name.removesuffix('.svg')}", description=name)
    if "report.html" in files:
        create_link_artifact(_link(files["report.html"]), link_text="scorekeeper report", key="scorekeeper-report")

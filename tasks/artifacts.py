"""Prefect artifacts: a progress bar while scoring, then a summary, a per-class table, the plots
and a link to the report. Only called from inside a flow run."""

from __future__ import annotations

import time

from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from scorekeeper.redact import redact_uri
from scorekeeper.tasks.report import headline


class ProgressTracker:
    """A progress artifact, updated at most once a second."""

    def __init__(self, description: str):
        self.artifact_id = create_progress_artifact(progress=0.0, key="scorekeeper-progress", description=description)
        self.last = 0.0

    def update(self, percent: float) -> None:
        if percent < 100.0 and time.time() - self.last < 1.0:
            return
        self.last = time.time()
        update_progress_artifact(self.artifact_id, progress=min(percent, 100.0))


def _link(uri: str) -> str:
    uri = redact_uri(uri)  # artifacts are stored by the Prefect server: never a password
    return uri if "://" in uri else "file://" + uri


def publish_report_artifacts(context, metrics: dict, throughput: dict, files: dict[str, str]) -> None:
    lines = [f"# scorekeeper run `{context.run_id}`", "", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in headline(metrics)]
    if throughput.get("rows_scored"):
        lines += [
            "",
            f"Scored {throughput['rows_scored']} rows in {throughput['seconds']:.1f} s: "
            f"{throughput['rows_per_s']:.1f} rows/s, {throughput['tokens_per_s']:.0f} tokens/s "
            f"on {throughput.get('processes')} process(es).",
        ]
    lines += ["", f"Outputs: `{redact_uri(context.run_uri)}` (predictions.parquet, report/)"]
    create_markdown_artifact("\n".join(lines), key="scorekeeper-summary", description="Evaluation summary")
    if metrics["per_class"]:
        create_table_artifact(
            [{"label": name, **values} for name, values in metrics["per_class"].items()],
            key="scorekeeper-per-class",
            description="Per-class precision, recall, F1 and support",
        )
    for name in ("confusion.svg", "reliability.svg"):
        if name in files:
            create_image_artifact(_link(files[name]), key=f"scorekeeper-{name.split('.')[0]}", description=name)
    if "report.html" in files:
        create_link_artifact(_link(files["report.html"]), link_text="scorekeeper report", key="scorekeeper-report")

"""The report's headline: one view (`HeadlineView`, built by `headline_view` from the typed document)
rendered by templates/headline.md.j2 (the metrics table, the scoring step's numbers, the precision
check, the pipeline) and templates/headline.html.j2 (the cards and the row counts). Which metrics
it shows comes from the metric registry (render.headline, render.cards)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report.render import cards, fmt, headline
from scorekeeper.report.view import Num, at
from scorekeeper.scoring_summary import PrecisionCheck


@dataclass(frozen=True)
class Card:
    name: str
    value: Num
    ci: Num | None


@dataclass(frozen=True)
class HeadlineView:
    """The headline (templates/headline.md.j2, headline.html.j2)."""

    cards: tuple[Card, ...]
    counts: tuple[Num, ...]  # rows, scored, evaluated, without a prediction, without ground truth
    log_loss_rows: Num | None
    table: tuple[tuple[str, str], ...]  # report.md's (metric, value) rows
    scoring: str | None  # report.md's sentence on the scoring step
    precision: str | None  # the precision check in words
    pipelines: tuple[str, ...]  # a pipeline run's stages and bubble, per pipeline


def precision_sentence(check: PrecisionCheck) -> str:
    """The precision check (scoring_summary.PrecisionCheck) in words, for the report."""
    parts = [f"{check.rows:,} rows of this {check.dtype} run scored again in float32"]
    if check.max_probability_difference is not None:
        parts.append(f"largest |probability difference| {check.max_probability_difference:.2e}")
    if check.max_prediction_difference is not None:
        parts.append(f"largest |prediction difference| {check.max_prediction_difference:.2e}")
    if check.changed_predictions is not None:
        parts.append(f"{check.changed_predictions:,} predictions changed")
    if check.changed_label_decisions is not None:
        parts.append(f"{check.changed_label_decisions:,} label decisions changed")
    if check.skipped:
        parts.append(f"skipped in part: {check.skipped}")
    return ", ".join(parts)


def headline_view(document: MetricsDocument) -> HeadlineView:
    """The headline's view (every report has one)."""
    scoring = document.scoring
    made = [
        Card(c["name"], Num(c["value"], tuple(c["key"])), Num(c["ci"], tuple(c["ci_key"])) if c.get("ci") else None)
        for c in cards(document)
    ]
    counts = tuple(at(document, k) for k in ("rows", "scored", "evaluated", "missing_predictions", "unmatched_predictions"))
    sentence = (
        f"Scored {scoring.rows_scored} rows this attempt in {scoring.seconds:.1f} s "
        f"({scoring.rows_per_s:.1f} rows/s, {scoring.tokens_per_s:.0f} tokens/s); "
        f"{scoring.truncated} texts truncated to the model's maximum length."
        if scoring
        else None
    )
    pipelines = tuple(
        f"Pipeline {pipe.pipeline}: stages (layer ranges) {pipe.stages}, "
        f"{pipe.microbatches} micro-batches, bubble {fmt(pipe.bubble_measured, 3)} measured "
        f"vs {fmt(pipe.bubble_theoretical, 3)} theoretical."
        for pipe in (scoring.pipeline if scoring else None) or []
    )
    return HeadlineView(
        cards=tuple(made),
        counts=counts,
        log_loss_rows=at(document, "log_loss_rows") if document.log_loss_rows is not None and not document.scoring_only else None,
        table=tuple(headline(document)),
        scoring=sentence,
        precision=precision_sentence(scoring.precision_check) if scoring and scoring.precision_check else None,
        pipelines=pipelines,
    )

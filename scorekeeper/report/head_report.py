"""The report's head: what ran on what (`HeadView`, from the run's facts and the scoring step's
dtype), rendered by templates/head.md.j2 (report.md's title and run lines) and templates/head.html.j2
(report.html's header; the page's title reads the same view)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.run_facts import RunFacts


@dataclass(frozen=True)
class HeadView:
    run_id: str
    input_uri: str
    model_uri: str
    adapter_uri: str | None
    mode: object
    processes: object
    dtype: str | None  # the scoring step's dtype (report.md)


def head_view(document: MetricsDocument, facts: RunFacts) -> HeadView:
    scoring = document.scoring
    dtype = scoring.dtype if scoring else None
    return HeadView(facts.run_id, facts.input_uri, facts.model_uri, facts.adapter_uri or None, facts.mode, facts.num_processes, dtype)

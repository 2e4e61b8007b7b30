"""What the evaluation is asked to do, as the scoring worker is handed `ScoringSettings`: the part of
a run's request (params.ScoreRequest) that decides what is measured, with the names the flow
resolved (the head's kind, the baseline and drift reference runs, the plan to draw) and what the
scoring reported that the evaluation needs (the window, how the embeddings were made).

Built once at the edge (`EvaluationSettings.of`, by the evaluate step) and handed to
driver.evaluate_run; a test or a bench builds one with only the fields it sets (the defaults are a
plain evaluation: no slices, no comparison, no drift, no plan). The gates are judged after the
evaluation, on its document and the history (tasks/evaluation.py), so they are not here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scorekeeper.evaluation.drift import DEFAULT_MIN_AUC, DEFAULT_MIN_PSI
from scorekeeper.evaluation.labelling import LabelRequest
from scorekeeper.evaluation.representation import ScoredWindow, ScoredWith
from scorekeeper.head_kind import DEFAULT_HEAD, HeadKind
from scorekeeper.long_text import LongTextCounts
from scorekeeper.params import ScoreRequest
from scorekeeper.storage import Location


class EvaluationSettings(BaseModel):
    """What one run's evaluation measures and against what (the fields' names are the request's
    where it has them: SPEC and docs/parameters.md say what each means)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    head: HeadKind = DEFAULT_HEAD  # the kind resolved from the request's head and the model's config
    slice_columns: list[str] = Field(default_factory=list)
    thresholds: float | dict[str, float] = 0.5
    truth_column: str = "label"  # the user's name of the ground-truth column (for messages)
    label_columns: list[str] | None = None  # the 0/1 columns the ground truth came from, when it did
    max_length: int | None = None  # the window the run was scored at (scoring.long_text), for length_impact
    baseline: Location | None = None  # compare_to, resolved: the completed run to compare with
    drift_reference: Location | None = None  # the completed run to measure drift and estimate performance against
    drift_min_psi: float = DEFAULT_MIN_PSI
    drift_min_auc: float = DEFAULT_MIN_AUC
    labelling: LabelRequest | None = None  # label_budget and label_sampling: the plan to draw (or the pinned one)
    # the scoring facts the gather reports (dtype, long_text): whether this run's embeddings compare
    # with the drift reference's (representation.py)
    scored_with: ScoredWith | None = None

    @classmethod
    def of(
        cls,
        request: ScoreRequest,
        head: HeadKind,
        baseline: str | None = None,
        drift_reference: str | None = None,
        labelling: LabelRequest | None = None,
        long_text: LongTextCounts | None = None,
        dtype: str | None = None,
    ) -> EvaluationSettings:
        """A run's settings: its request, the kind of its head, the names of its baseline and drift
        reference runs (under output_uri), its labelling request (labelling.label_request), and what
        its gather reported (`long_text`, the compute `dtype` used)."""
        output = Location.from_uri(request.output_uri)
        return cls(
            head=head,
            slice_columns=request.slice_columns,
            thresholds=request.thresholds,
            truth_column=", ".join(request.label_columns) if request.label_columns else request.label_column or "label",
            label_columns=request.label_columns or None,
            max_length=long_text.max_length if long_text else None,
            baseline=output.child(baseline) if baseline else None,
            drift_reference=output.child(drift_reference) if drift_reference else None,
            drift_min_psi=request.drift_min_psi,
            drift_min_auc=request.drift_min_auc,
            labelling=labelling,
            scored_with=ScoredWith(dtype=dtype, long_text=ScoredWindow(max_length=long_text.max_length) if long_text else None),
        )

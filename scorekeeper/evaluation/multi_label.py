"""The evaluation of a multi-label head: a sigmoid per label, thresholded (docs/contracts.md, section 7).

The truth is a list of labels per row; its elements (`truth_elements`) are matched to the model's
labels by the column's one rule, as a single-label column is. `ml_rows` holds one row per scored
row (probabilities, truth as one boolean per label, or null without ground truth); the metrics are
heads_metrics.py's, the comparison heads_compare.py's. SQL: sql/multi_label/.
"""

from __future__ import annotations

from typing import Any

from scorekeeper.evaluation import heads_metrics
from scorekeeper.evaluation.base import Coverage, Evaluation
from scorekeeper.evaluation.duck import literal, sql
from scorekeeper.evaluation.heads_compare import compare_head
from scorekeeper.evaluation.matching import ColumnKind, TruthRule
from scorekeeper.evaluation.slices import head_slices
from scorekeeper.evaluation.truth import head_truth_table, match_truth
from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import threshold_vector
from scorekeeper.metrics.document import Comparison, GroundTruthSource, MetricsDocument
from scorekeeper.storage import Location


class MultiLabel:
    kind = HeadKind.MULTI_LABEL

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        return head_truth_table(ev.con, ev.run, ev.manifest, self.kind)

    def metrics(self, ev: Evaluation, coverage: Coverage) -> dict[str, Any]:
        """The multi-label metrics; the list elements are matched to the labels by the column's one
        rule (truth.py, as a single-label column is), recorded as `truth_matching`. Each label's
        threshold is in per_label."""
        con, labels = ev.con, ev.labels
        matching = (
            match_truth(con, coverage.column, labels, ev.truth_column, truth="truth_elements", log=ev.log) if coverage.column else None
        )
        con.execute(sql("multi_label_evaluated.sql", rule=literal(matching.rule if matching else TruthRule.ID)))
        unknown = {str(name): int(n) for name, n in con.execute(sql("multi_label_unknown.sql")).fetchall()}
        return {
            "truth_matching": matching,
            "unknown_labels": unknown,
            "unknown_label_rows": sum(unknown.values()),
        } | heads_metrics.multilabel_metrics(con, labels, threshold_vector(ev.thresholds, labels))

    def slices(self, ev: Evaluation) -> tuple[dict, dict]:
        return head_slices(ev.con, self.kind, ev.slice_columns)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        return compare_head(ev.con, ev.run, baseline, document, self.kind)


EVALUATION = MultiLabel()

"""The evaluation of a regression head: the raw values, one per output (docs/contracts.md, section 7).

The truth is a number per row (a list of numbers, in output order, for several outputs), checked
against the head's outputs here as before scoring; `reg_rows` holds one row per scored row
(prediction, truth or null). The metrics are heads_metrics.py's, the comparison heads_compare.py's.
SQL: sql/regression/.
"""

from __future__ import annotations

from typing import Any

from scorekeeper.evaluation import heads_metrics
from scorekeeper.evaluation.base import Coverage, Evaluation
from scorekeeper.evaluation.duck import sql
from scorekeeper.evaluation.heads_compare import compare_head
from scorekeeper.evaluation.matching import ColumnKind
from scorekeeper.evaluation.slices import head_slices
from scorekeeper.evaluation.truth import check_regression_truth, head_truth_table
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import Comparison, GroundTruthSource, MetricsDocument
from scorekeeper.storage import Location


class Regression:
    kind = HeadKind.REGRESSION

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        return head_truth_table(ev.con, ev.run, ev.manifest, self.kind)

    def metrics(self, ev: Evaluation, coverage: Coverage) -> dict[str, Any]:
        check_regression_truth(ev.con, ev.labels, ev.truth_column)  # checked before scoring too; a resumed run's truth again
        ev.con.execute(sql("regression_evaluated.sql"))
        return heads_metrics.regression_metrics(ev.con, ev.labels)

    def slices(self, ev: Evaluation) -> tuple[dict, dict]:
        return head_slices(ev.con, self.kind, ev.slice_columns)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        return compare_head(ev.con, ev.run, baseline, document, self.kind)


EVALUATION = Regression()

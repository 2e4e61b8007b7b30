"""metrics.json's `label_audit`: the rows whose given label the model's probabilities contradict
with confidence, by confident learning (Northcutt, Jiang & Chuang, "Confident Learning: Estimating
Uncertainty in Dataset Labels", JAIR 2021), computed in DuckDB (sql/label_audit/*.sql).

Per class k the threshold t_k is the mean probability of k over the rows labelled k (the model's
self-confidence on that class). A row is counted in the confident joint under the most probable
class whose probability reaches its threshold; off the diagonal (that class is not the given label)
it is a suspected label error, `suggested` is that class, and `margin` = p(suggested) - p(given)
orders the rows a person should look at first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from scorekeeper.evaluation.duck import sql
from scorekeeper.metrics.document import AuditRow, LabelAudit

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

AUDIT_ROWS = 50  # suspected rows kept in metrics.json, largest margin first
METHOD: Final = "confident_learning"


def label_audit(con: Connection, labels: list[str], excerpt_chars: int) -> LabelAudit | None:
    """The audit over a connection holding `evaluated`, `predictions`, `staged`, `labels`; None when
    no evaluated row has a label the model knows."""
    con.execute(sql("label_audit.sql"))
    thresholds = dict(con.execute("SELECT label_id, threshold FROM audit_thresholds").fetchall())
    if not thresholds:
        return None
    by_pair: dict[str, dict[str, int]] = {}
    for given, suggested, n in con.execute(sql("label_audit_pairs.sql")).fetchall():
        by_pair.setdefault(given, {})[suggested] = int(n)
    rows = [
        AuditRow(row_index=int(i), id=row_id, text=text, given=given, suggested=suggested, margin=margin)
        for i, row_id, text, given, suggested, margin in con.execute(
            sql("label_audit_rows.sql"), {"chars": excerpt_chars, "limit": AUDIT_ROWS}
        ).fetchall()
    ]
    return LabelAudit(
        method=METHOD,
        thresholds={name: thresholds.get(k) for k, name in enumerate(labels)},
        suspected=int(con.execute("SELECT count(*) FROM audit_suspected").fetchall()[0][0]),
        by_pair=by_pair,
        rows=rows,
        accuracy_excluding_suspected=con.execute(sql("label_audit_accuracy.sql")).fetchall()[0][0],
    )

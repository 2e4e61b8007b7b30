"""The metrics of the multi-label and regression heads (docs/contracts.md section 9), in DuckDB SQL.

Pure functions over a DuckDB connection: the caller stages its rows in one temp table (or view),
these functions compute every contract key of the head (SQL in scorekeeper/evaluation/sql/multilabel_*.sql and
regression_*.sql) plus the data of the report's plots, and return metrics.json's fields. The
tables they make are named ml_* and reg_*; they read:

    ml_rows(row_index BIGINT, id VARCHAR, probabilities DOUBLE[], truth BOOLEAN[] [, text VARCHAR])
        One row per scored row. `probabilities` and `truth` hold one element per model label, in
        the model's label order. truth NULL: the row has no ground truth and is not evaluated;
        every element false: a row with no label. `id` is the id's text (it decides the tuning
        half of the threshold search: md5(id) starting with 0-7 tunes, 8-f is held out).

    reg_rows(row_index BIGINT, id VARCHAR, prediction DOUBLE or DOUBLE[], truth DOUBLE or DOUBLE[] [, text VARCHAR])
        One row per scored row; a list per row when the head has several outputs (model label
        order). A null or NaN truth is a missing truth (regression_cells.sql says how rows
        missing some outputs, or with values that are not finite, are counted apart).

Rules where scikit-learn and scipy have conventions of their own (the tests check every key
against them): a metric that cannot be computed is null, never NaN; 0/0 counts as 0 in
precision, recall and F1 (scikit-learn's zero_division default); ROC-AUC and average precision
of a label with no positive or no negative truth are null and left out of the macro (scikit-
learn gives NaN, or 1.0 for the AP of an always-positive label); r2 and explained_variance are
null for a constant truth and pearson, spearman and kendall_tau_b for a constant side or one row
(scikit-learn answers 1.0 or 0.0 there by convention, scipy NaN). With several regression
outputs each top-level metric is the mean of the per-output values (scikit-learn's
"uniform_average"), null where any output's is, and `per_output` holds each output's.
"""

from __future__ import annotations

from scorekeeper.evaluation.duck import MICRO_LABEL, Fragment, identifier, ovr_table, sql, statement
from scorekeeper.evaluation.single_label import CONFIDENT_ERRORS, ECE_BINS, EXCERPT_CHARS, LOG_LOSS_EPS, _mean, _number
from scorekeeper.metrics.registry import HeadKind, scalar_metrics

TUNING_SPLIT = "md5 of the id's text: first hex digit 0-7 tunes the threshold, 8-f measures it"
SCATTER_POINTS = 3000  # past this many rows the predicted-vs-true plot is a 2-D histogram
DENSITY_BINS = 40
RESIDUAL_BINS = 30
LARGEST_ERRORS = 20

# One number each, computed by multilabel_metrics.sql and regression_metrics.sql (the correlations by
# their own queries): the metric registry's scalars of the head.
MULTILABEL_SCALARS = tuple(m.name for m in scalar_metrics(HeadKind.MULTI_LABEL))
REGRESSION_SCALARS = tuple(m.name for m in scalar_metrics(HeadKind.REGRESSION))


def multilabel_metrics(con, labels: list[str], thresholds: list[float]) -> dict:
    """Every multi_label key of the contract over `ml_rows`, with the report's data beside them."""
    if len(thresholds) != len(labels):
        raise ValueError(f"{len(thresholds)} thresholds for {len(labels)} labels")
    con.execute("CREATE OR REPLACE TEMP TABLE ml_labels (label_id BIGINT, label_name VARCHAR, threshold DOUBLE)")
    con.executemany("INSERT INTO ml_labels VALUES (?, ?, ?)", [(i, name, float(t)) for i, (name, t) in enumerate(zip(labels, thresholds))])
    bad = con.execute(
        "SELECT row_index FROM ml_rows WHERE len(probabilities) <> ? OR (truth IS NOT NULL AND len(truth) <> ?) ORDER BY row_index LIMIT 5",
        [len(labels), len(labels)],
    ).fetchall()
    if bad:
        raise ValueError(f"ml_rows: rows {[r for (r,) in bad]} do not hold one probability and one truth per label ({len(labels)})")
    con.execute(sql("multilabel_cells.sql"))
    con.execute(sql("multilabel_label_counts.sql"))
    con.execute(ovr_table("ml_ovr", sql("multilabel_ovr.sql", cells=Fragment("(SELECT label_id, prob AS score, truth FROM ml_cells)"))))
    (row,) = records(con.execute(sql("multilabel_metrics.sql"), {"eps": LOG_LOSS_EPS}))
    evaluated = int(row["evaluated"])
    counts = con.execute(
        "SELECT label_name, threshold, tp, fp, fn, support, cells, precision, recall, f1 FROM ml_label_counts ORDER BY label_id"
    ).fetchall()
    tuned = con.execute(sql("multilabel_tuned_thresholds.sql")).fetchall()
    halves = dict(con.execute("SELECT tuning, count(DISTINCT row_index) FROM ml_cells GROUP BY tuning").fetchall())

    defined = {name: 0 < support < cells for name, _, _, _, _, support, cells, *_ in counts}
    ranking = con.execute(sql("ranking.sql", ovr="ml_ovr", labels="ml_labels")).fetchall()
    micro = con.execute(sql("ranking.sql", ovr="ml_ovr", labels=MICRO_LABEL)).fetchone()
    pooled_support, pooled_cells = sum(c[5] for c in counts), sum(c[6] for c in counts)
    micro_defined = 0 < pooled_support < pooled_cells
    roc = {name: _number(auc) if defined[name] else None for name, auc, _ in ranking}
    ap = {name: _number(value) if defined[name] else None for name, _, value in ranking}

    calibration, ece = _calibration(con, labels)
    per_label = {}
    for (name, threshold, _, _, _, support, cells, p, r, f1), (_, t_threshold, t_f1, t_heldout, given_heldout) in zip(counts, tuned):
        per_label[name] = {
            "precision": _number(p) if evaluated else None,
            "recall": _number(r) if evaluated else None,
            "f1": _number(f1) if evaluated else None,
            "support": int(support),
            "prevalence": support / cells if cells else None,
            "threshold": threshold,
            "tuned_threshold": _number(t_threshold),
            "tuned_f1_in_sample": _number(t_f1),
            "tuned_f1_heldout": _number(t_heldout),
            "heldout_f1_at_threshold": _number(given_heldout),
        }
    errors = [
        {"row_index": int(i), "id": row_id, "label": name, "truth": bool(truth), "probability": prob}
        for i, row_id, name, truth, prob in con.execute(sql("multilabel_confident_errors.sql"), {"limit": CONFIDENT_ERRORS}).fetchall()
    ]
    return {
        "evaluated": evaluated,
        **{k: (_number(row[k]) if evaluated else None) for k in MULTILABEL_SCALARS},
        "roc_auc": {"macro": _mean(roc.values()), "micro": _number(micro[1]) if micro_defined else None, "per_label": roc},
        "average_precision": {"macro": _mean(ap.values()), "micro": _number(micro[2]) if micro_defined else None, "per_label": ap},
        "ece": ece,
        "ece_bins": ECE_BINS,
        "per_label": per_label,
        "threshold_tuning": {"split": TUNING_SPLIT, "tuning_rows": int(halves.get(True, 0)), "heldout_rows": int(halves.get(False, 0))},
        "label_cardinality": {
            "truth": _number(row["truth_cardinality"]),
            "predicted": _number(row["predicted_cardinality"]),
            "rows_without_prediction": int(row["rows_without_prediction"] or 0),
        },
        "label_calibration": calibration,
        "curves": _curves(con),
        "confident_wrong_labels": errors,
    }


def records(cursor) -> list[dict]:
    """A query's rows as dicts keyed by the SQL's column names."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _calibration(con, labels: list[str]) -> tuple[dict, dict]:
    """Per label the reliability bins, and ECE per label averaged (macro) and over every cell (micro)."""
    bins: dict[int, list] = {}
    for label_id, b, n, conf, freq in con.execute(sql("multilabel_calibration.sql"), {"bins": ECE_BINS}).fetchall():
        bins.setdefault(label_id, []).append((int(b), int(n), conf, freq))

    def ece_of(label_id: int) -> float | None:
        rows = bins.get(label_id, [])
        total = sum(n for _, n, _, _ in rows)
        return sum(n * abs(freq - conf) for _, n, conf, freq in rows) / total if total else None

    per_label = [ece_of(i) for i in range(len(labels))]
    calibration = {
        name: [
            {"bin": b, "lower": b / ECE_BINS, "upper": (b + 1) / ECE_BINS, "rows": n, "confidence": conf, "frequency": freq}
            for b, n, conf, freq in bins.get(i, [])
        ]
        for i, name in enumerate(labels)
    }
    macro = None if any(e is None for e in per_label) else _mean(per_label)
    return calibration, {"macro": macro, "micro": ece_of(-1), "per_label": dict(zip(labels, per_label))}


def _curves(con) -> dict:
    """ROC and precision-recall points per label, thinned as the single-label curves are (curves.sql)."""
    curves: dict[str, dict] = {"roc": {}, "pr": {}}
    for name, curve, x, y in con.execute(sql("curves.sql", ovr="ml_ovr", labels="ml_labels")).fetchall():
        keys = ("fpr", "tpr") if curve == "roc" else ("recall", "precision")
        start = (0.0, 0.0) if curve == "roc" else (0.0, 1.0)
        points = curves[curve].setdefault(name, {keys[0]: [start[0]], keys[1]: [start[1]]})
        points[keys[0]].append(x)
        points[keys[1]].append(y)
    return curves


def regression_metrics(con, outputs: list[str]) -> dict:
    """Every regression key of the contract over `reg_rows`: the mean over outputs at the top level,
    each output's values under `per_output`, and the report's data beside them."""
    _regression_input(con, len(outputs))
    con.execute(sql("regression_cells.sql"))
    status = dict(con.execute("SELECT status, count(*) FROM reg_status GROUP BY status").fetchall())
    evaluated = int(status.get("evaluated", 0))
    per_output = {outputs[i]: fields for i, fields in regression_values(con, "reg_cells", len(outputs)).items()}
    means = {}
    for key in REGRESSION_SCALARS:
        values = [fields[key] for fields in per_output.values()]
        known = [v for v in values if v is not None]
        means[key] = sum(known) / len(known) if len(known) == len(values) else None
    return {
        "evaluated": evaluated,
        "outputs": list(outputs),
        **means,
        "mape_rows": sum(fields["mape_rows"] for fields in per_output.values()),
        "no_truth_rows": int(status.get("no_truth", 0)),
        "partial_truth_rows": int(status.get("partial_truth", 0)),
        "not_finite_rows": int(status.get("not_finite", 0)),
        "per_output": per_output,
        **_regression_plots(con, outputs, evaluated),
    }


def regression_values(con, cells: str, outputs: int) -> dict[int, dict]:
    """Every regression scalar (and mape_rows) per output id over `cells`, a table in reg_cells'
    shape (row_index, output_id, truth, prediction): the run's own rows, or a comparison's paired rows."""
    per_output = {i: dict.fromkeys(REGRESSION_SCALARS) | {"mape_rows": 0} for i in range(outputs)}
    for fields in records(con.execute(sql("regression_metrics.sql", cells=cells))):
        # every scalar but the correlations, which the queries below fill in
        per_output[fields["output_id"]] |= {k: _number(fields[k]) for k in REGRESSION_SCALARS if k in fields} | {
            "mape_rows": int(fields["mape_rows"])
        }
    for output_id, r in con.execute(sql("regression_correlation.sql", x="truth", y="prediction", source=cells)).fetchall():
        per_output[output_id]["pearson"] = _number(r)
    ranks = f"{cells}_ranks"
    con.execute(sql("regression_ranks.sql", cells=cells, ranks=ranks))
    for output_id, r in con.execute(sql("regression_correlation.sql", x="truth_rank", y="prediction_rank", source=ranks)).fetchall():
        per_output[output_id]["spearman"] = _number(r)
    for output_id, tau in con.execute(sql("regression_kendall.sql", cells=cells)).fetchall():
        per_output[output_id]["kendall_tau_b"] = _number(tau)
    return per_output


def _regression_input(con, outputs: int) -> None:
    """The view reg_input: reg_rows with prediction and truth as lists (a scalar column wrapped) and a text column."""
    types = {name: kind for name, kind, *_ in con.execute("DESCRIBE reg_rows").fetchall()}

    def as_list(column: str) -> Fragment:
        if types[column].endswith("[]"):
            return statement("{c}::DOUBLE[]", c=column)
        return statement("CASE WHEN {c} IS NULL THEN NULL ELSE [{c}::DOUBLE] END", c=column)

    text = identifier("text") if "text" in types else Fragment("NULL::VARCHAR")
    con.execute(
        statement(
            "CREATE OR REPLACE TEMP VIEW reg_input AS SELECT row_index, id::VARCHAR AS id, {text} AS text, "
            "{prediction} AS prediction, {truth} AS truth FROM reg_rows",
            text=text,
            prediction=as_list("prediction"),
            truth=as_list("truth"),
        )
    )
    bad = con.execute(
        "SELECT row_index FROM reg_input WHERE len(prediction) <> ? OR len(truth) <> ? ORDER BY row_index LIMIT 5", [outputs, outputs]
    ).fetchall()
    if bad:
        raise ValueError(f"reg_rows: rows {[r for (r,) in bad]} do not hold one prediction and one truth per output ({outputs})")


def _regression_plots(con, outputs: list[str], evaluated: int) -> dict:
    """The data of the regression report's plots and tables, per output name."""
    residuals: dict[str, dict] = {}
    for output_id, lo, hi, b, n in con.execute(sql("regression_residuals.sql"), {"bins": RESIDUAL_BINS}).fetchall():
        width = (hi - lo) / RESIDUAL_BINS if hi > lo else 0.0
        hist = residuals.setdefault(
            outputs[output_id], {"edges": [lo + k * width for k in range(RESIDUAL_BINS)] + [hi], "counts": [0] * RESIDUAL_BINS}
        )
        hist["counts"][b] = int(n)
    scatter: dict[str, dict] = {}
    if evaluated <= SCATTER_POINTS:
        for output_id, truth, prediction in con.execute(
            "SELECT output_id, truth, prediction FROM reg_cells ORDER BY output_id, row_index"
        ).fetchall():
            points = scatter.setdefault(outputs[output_id], {"kind": "points", "truth": [], "prediction": []})
            points["truth"].append(truth)
            points["prediction"].append(prediction)
    else:
        for output_id, lo, hi, tb, pb, n in con.execute(sql("regression_density.sql"), {"bins": DENSITY_BINS}).fetchall():
            cells = scatter.setdefault(outputs[output_id], {"kind": "density", "lo": lo, "hi": hi, "bins": DENSITY_BINS, "cells": []})
            cells["cells"].append([int(tb), int(pb), int(n)])
    deciles: dict[str, list] = {}
    for output_id, decile, n, mean_p, mean_t, lo, hi in con.execute(sql("regression_deciles.sql")).fetchall():
        deciles.setdefault(outputs[output_id], []).append(
            {
                "decile": int(decile),
                "rows": int(n),
                "mean_prediction": mean_p,
                "mean_truth": mean_t,
                "min_prediction": lo,
                "max_prediction": hi,
            }
        )
    largest: dict[str, list] = {}
    for output_id, i, row_id, text, truth, prediction in con.execute(
        sql("regression_largest_errors.sql"), {"chars": EXCERPT_CHARS, "limit": LARGEST_ERRORS}
    ).fetchall():
        largest.setdefault(outputs[output_id], []).append(
            {"row_index": int(i), "id": row_id, "text": text, "truth": truth, "prediction": prediction, "error": prediction - truth}
        )
    return {"residual_histogram": residuals, "predicted_vs_true": scatter, "calibration_deciles": deciles, "largest_errors": largest}

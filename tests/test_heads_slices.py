"""Slices of multi-label and regression runs (scorekeeper/evaluation/slices.py) against scikit-learn and numpy on
seeded random data with three slice columns: null slice values (their own group, apart from the
text 'None'), a value whose rows have no ground truth (no group), a slice of one row (no bootstrap
interval), and a slice past SLICE_UNITS rows (resampled in blocks, its interval as wide as the
row bootstrap's)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import accuracy_score, f1_score, mean_absolute_error

from scorekeeper.evaluation import multi_label, regression
from scorekeeper.evaluation import slices as heads_slices
from scorekeeper.evaluation.duck import NULL_GROUP
from scorekeeper.evaluation.multi_label import multilabel_metrics
from scorekeeper.evaluation.regression import regression_metrics
from scorekeeper.evaluation.slices import SLICE_RESAMPLES
from scorekeeper.evaluation.statistics.paired_tests import CHUNK, SEED
from scorekeeper.metrics.document import MetricsDocument
from tests import test_multilabel_metrics as ml
from tests import test_regression_metrics as reg
from tests.test_ranking_metrics import wilson


def slice_values(rng, n: int) -> list[list[str | None]]:
    """Three slice columns: few values with nulls and the text 'None'; a value only on rows without
    truth ('orphan', rows 0-4) and one of a single row ('single', row 5); many small groups."""
    first = rng.choice(np.array(["en", "fr", "None", "de"], dtype=object), size=n).tolist()
    first = [None if rng.random() < 0.1 else v for v in first]
    second = ["orphan" if i < 5 else "single" if i == 5 else str(rng.choice(["a", "b"])) for i in range(n)]
    third = [str(int(v)) for v in rng.integers(0, 30, size=n)]
    return [first, second, third]


def register_staged(con, columns: list[list[str | None]]) -> None:
    n = len(columns[0])
    table = {"row_index": pa.array(range(n), pa.int64())} | {f"slice_{i}": pa.array(c, pa.string()) for i, c in enumerate(columns)}
    con.register("staged", pa.table(table))


def row_bootstrap(values, rows: np.ndarray, statistic) -> list[float]:
    """The percentile interval of `statistic` over the rows drawn with replacement, drawn as the code draws them."""
    rng = np.random.default_rng(SEED)
    draws = []
    for start in range(0, SLICE_RESAMPLES, CHUNK):
        picked = rng.integers(0, len(rows), size=(min(CHUNK, SLICE_RESAMPLES - start), len(rows)))
        draws.append(statistic(*(v[rows[picked]] for v in values)))  # resamples x rows (x labels)
    return list(np.percentile(np.concatenate(draws), [2.5, 97.5]))


def micro_f1(truth, predicted) -> np.ndarray:
    """Per resample (first axis), 2 TP / (2 TP + FP + FN) of its rows and labels; 0 when nothing is positive."""
    tp, fp, fn = ((truth & predicted).sum((1, 2)), (~truth & predicted).sum((1, 2)), (truth & ~predicted).sum((1, 2)))
    bottom = 2 * tp + fp + fn
    return np.where(bottom > 0, 2 * tp / np.maximum(bottom, 1), 0.0)


def mean_error(errors) -> np.ndarray:
    return errors.mean(1)


def groups(column: list, evaluated: np.ndarray) -> dict[str, np.ndarray]:
    """The evaluated rows of each value, null keyed as the code keys it."""
    values = np.array(column, dtype=object)
    out = {}
    for v in {column[i] for i in np.flatnonzero(evaluated)}:
        mask = evaluated & np.array([x is None for x in column]) if v is None else evaluated & (values == v)
        out[NULL_GROUP if v is None else v] = np.flatnonzero(mask)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_multilabel_slices_match_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n = 400
    truth, probs = ml.random_case(rng, n, decimals=1)
    no_truth = set(range(5)) | set(np.flatnonzero(rng.random(n) < 0.05).tolist())
    con = ml.make_con(truth, probs, no_truth=no_truth)
    columns = slice_values(rng, n)
    register_staged(con, columns)
    overall = multilabel_metrics(con, ml.LABELS, [0.5] * len(ml.LABELS))
    slices, truncated = multi_label.slice_breakdown(con, ["lang", "kind", "bucket"])
    assert truncated == {}
    predicted = probs > 0.5
    evaluated = np.array([i not in no_truth for i in range(n)])
    assert "orphan" not in slices["kind"] and NULL_GROUP in slices["lang"] and "None" in slices["lang"]
    assert slices["kind"]["single"]["micro_f1_ci"] is None and slices["kind"]["single"]["rows"] == 1
    for name, column in zip(["lang", "kind", "bucket"], columns):
        expected = groups(column, evaluated)
        assert set(slices[name]) == set(expected)
        assert sum(g["rows"] for g in slices[name].values()) == overall["evaluated"]
        for value, rows in expected.items():
            got = slices[name][value]
            assert got["rows"] == len(rows)
            assert got["micro_f1"] == pytest.approx(f1_score(truth[rows], predicted[rows], average="micro", zero_division=0), abs=1e-12)
            exact = accuracy_score(truth[rows], predicted[rows])
            assert got["subset_accuracy"] == pytest.approx(exact, abs=1e-12)
            assert got["subset_accuracy_ci"] == pytest.approx(wilson(round(exact * len(rows)), len(rows)), abs=1e-12)
            if len(rows) > 1:
                assert got["micro_f1_ci"] == pytest.approx(row_bootstrap([truth, predicted], rows, micro_f1), abs=1e-12)
    document = MetricsDocument.model_validate({**base_fields("multi_label", n), **overall, "slices": slices, "slices_truncated": {}})
    assert document.as_dict()["slices"]["kind"]["a"] == slices["kind"]["a"]


@pytest.mark.parametrize("outputs", [1, 2])
def test_regression_slices_match_scikit_learn(outputs):
    rng = np.random.default_rng(10 + outputs)
    n = 300
    y, p = reg.random_case(rng, n * outputs, decimals=2)
    y, p = y.reshape(n, outputs), p.reshape(n, outputs)
    no_truth = set(range(5)) | set(np.flatnonzero(rng.random(n) < 0.05).tolist())
    shape = (lambda a: a.tolist()) if outputs > 1 else (lambda a: a[:, 0].tolist())
    truth = [None if i in no_truth else t for i, t in enumerate(shape(y))]
    con = reg.make_con(shape(p), truth)
    columns = slice_values(rng, n)
    register_staged(con, columns)
    overall = regression_metrics(con, ["quality", "safety"][:outputs])
    slices, _ = regression.slice_breakdown(con, ["lang", "kind", "bucket"])
    evaluated = np.array([i not in no_truth for i in range(n)])
    assert "orphan" not in slices["kind"] and slices["kind"]["single"]["mae_ci"] is None
    row_error = np.abs(p - y).mean(1)
    for name, column in zip(["lang", "kind", "bucket"], columns):
        expected = groups(column, evaluated)
        assert set(slices[name]) == set(expected)
        for value, rows in expected.items():
            got = slices[name][value]
            assert got["rows"] == len(rows)
            assert got["mae"] == pytest.approx(mean_absolute_error(y[rows], p[rows]), rel=1e-12)  # uniform average of the outputs
            if len(rows) > 1:
                assert got["mae_ci"] == pytest.approx(row_bootstrap([row_error], rows, mean_error), rel=1e-9)
                assert got["mae_ci"][0] <= got["mae"] <= got["mae_ci"][1]
        assert sum(g["rows"] for g in slices[name].values()) == overall["evaluated"]


def test_a_large_slice_is_resampled_in_blocks_as_wide_as_rows(monkeypatch):
    """Past SLICE_UNITS rows the slice's blocks are resampled: the interval is about the row bootstrap's."""
    monkeypatch.setattr(heads_slices, "SLICE_UNITS", 200)
    rng = np.random.default_rng(3)
    n = 6000
    truth, probs = ml.random_case(rng, n, decimals=2)
    con = ml.make_con(truth, probs)
    register_staged(con, [["all"] * n])
    multilabel_metrics(con, ml.LABELS, [0.5] * len(ml.LABELS))
    slices, _ = multi_label.slice_breakdown(con, ["one"])
    units = con.execute("SELECT count(*) FROM head_slice_units").fetchone()[0]
    assert units == 200
    got = slices["one"]["all"]
    rows = np.arange(n)
    reference = row_bootstrap([truth, probs > 0.5], rows, micro_f1)
    assert got["micro_f1_ci"][0] < got["micro_f1"] < got["micro_f1_ci"][1]
    width, expected = got["micro_f1_ci"][1] - got["micro_f1_ci"][0], reference[1] - reference[0]
    assert 0.75 * expected < width < 1.33 * expected


def test_many_groups_are_truncated_as_single_label_slices_are():
    rng = np.random.default_rng(5)
    n = 300
    y, p = reg.random_case(rng, n, decimals=2)
    con = reg.make_con(p.tolist(), y.tolist())
    register_staged(con, [[str(i % 120) for i in range(n)]])
    regression_metrics(con, ["score"])
    slices, truncated = regression.slice_breakdown(con, ["id_mod"])
    assert truncated == {"id_mod": 120} and len(slices["id_mod"]) == 50
    assert min(g["rows"] for g in slices["id_mod"].values()) == 3  # the largest groups are kept


def base_fields(head: str, n: int) -> dict:
    return {
        "head": head,
        "ground_truth_source": "label_column",
        "rows": n,
        "scored": n,
        "missing_predictions": 0,
        "unmatched_predictions": 0,
        "scoring_only": False,
    }


def test_regression_slice_rows_stream_where_a_group_per_row_ran_out_of_memory(tmp_path):
    """head_slice_rows of a regression run is a pass over each row's lists (reg_status), not a group
    per row: grouped back from reg_cells, a 3M-row run's ran out of the evaluation's 192MB memory
    limit. Here 500,000 rows under 12MB (the group per row fails at 16MB), two outputs, the rows
    without every truth left out, num each row's mean absolute error."""
    import duckdb

    from scorekeeper.evaluation.duck import sql

    n = 500_000
    con = duckdb.connect(config={"memory_limit": "12MB", "threads": 2, "temp_directory": str(tmp_path)})
    con.execute(
        "CREATE TEMP TABLE reg_status AS SELECT range AS row_index, range::VARCHAR AS id, 'x' AS text, "
        "[range % 7 * 0.5, range % 3 * 1.0] AS prediction, [range % 5 * 1.0, 2.0] AS truth, "
        "CASE WHEN range % 10 = 0 THEN 'no_truth' ELSE 'evaluated' END AS status FROM range(?)",
        [n],
    )
    con.execute(sql("regression_slice_rows.sql"))
    con.execute("SET memory_limit = '1GB'")  # the check's own sort is not the statement under test
    got = con.execute("SELECT row_index, num, den, exact FROM head_slice_rows ORDER BY row_index").fetchnumpy()
    i = np.arange(n)[np.arange(n) % 10 != 0]
    assert got["row_index"].tolist() == i.tolist() and np.all(got["den"] == 1.0) and got["exact"].mask.all()
    assert np.allclose(got["num"], (np.abs(i % 7 * 0.5 - i % 5) + np.abs(i % 3 - 2.0)) / 2, rtol=1e-15, atol=0)

"""scorekeeper/evaluation/drift.py against an independent numpy/scipy implementation of its
definitions (tests/drift_reference.py), over generated runs: ties at the decile edges, constant
signals, nulls, many categories, runs too small to judge."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.evaluation import drift as d
from scorekeeper.evaluation import single_label
from tests import drift_reference as ref

settings.register_profile("drift", deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])

LABELS = ["neg", "pos", "neu"]


def open_runs(reference: dict, current: dict, slices: bool = True):
    con = duckdb.connect(config={"threads": 1})
    for view, table in (("reference_predictions", reference), ("predictions", current)):
        cols = {k: v for k, v in table.items() if not k.startswith("slice")}
        con.from_arrow(pa.table(cols)).create_view(view)
    for view, table in (("reference_staged", reference), ("staged", current)):
        con.from_arrow(pa.table({"row_index": table["row_index"], "slice_0": table["slice"]})).create_view(view)
    r = d.RunSide(
        "reference", "reference_predictions", d.columns_of(con, "reference_predictions"), LABELS, "reference_staged", {"lang": "slice_0"}
    )
    c = d.current_side(con, LABELS, ["lang"] if slices else [])
    return con, r, c


def single_label_run(draw, n: int) -> dict:
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=n, max_size=n))
    # few distinct scores and token counts: ties at the decile edges, duplicate edges
    scores = draw(st.lists(st.sampled_from([0.34, 0.5, 0.5, 0.75, 0.9, 1.0]) | st.floats(0.34, 1.0), min_size=n, max_size=n))
    tokens = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    unknown = [draw(st.integers(0, t)) for t in tokens]
    categories = draw(st.integers(1, 70))
    lang = draw(st.lists(st.none() | st.integers(0, categories).map(lambda i: f"l{i}"), min_size=n, max_size=n))
    return {
        "row_index": np.arange(n, dtype=np.int64),
        "predicted_label": labels,
        "score": np.array(scores, dtype=float),
        "tokens": np.array(tokens, dtype=np.int32),
        "unknown_tokens": np.array(unknown, dtype=np.int32),
        "slice": lang,
    }


@st.composite
def two_runs(draw):
    m = draw(st.integers(1, 160))
    n = draw(st.integers(1, 160))
    return single_label_run(draw, m), single_label_run(draw, n)


def expected(reference: dict, current: dict) -> dict[str, dict]:
    share = {
        "ref": [u / t if t else None for u, t in zip(reference["unknown_tokens"], reference["tokens"], strict=True)],
        "cur": [u / t if t else None for u, t in zip(current["unknown_tokens"], current["tokens"], strict=True)],
    }
    return {
        "predicted_label": ref.signal(list(reference["predicted_label"]), list(current["predicted_label"]), numeric=False),
        "score": ref.signal(list(reference["score"]), list(current["score"]), numeric=True),
        "tokens": ref.signal([float(t) for t in reference["tokens"]], [float(t) for t in current["tokens"]], numeric=True),
        "unknown_token_share": ref.signal(share["ref"], share["cur"], numeric=True),
        "slice:lang": ref.signal(list(reference["slice"]), list(current["slice"]), numeric=False),
    }


# drift.py counts a numeric signal per value first when it has few distinct values, and per bucket
# otherwise (KS from bucket bounds, then a sort of the buckets that may hold a larger gap): GROUPED 0
# counts every signal per value, a huge one none; one bucket per bin sorts nearly everything, three
# leave some buckets out, 1000 most. Every way is checked on each generated pair of runs (the
# generation, element by element, costs more than the five evaluations).
WAYS = {
    "per-value": (0, 1000),
    "buckets-1": (10**12, 1),
    "buckets-3": (10**12, 3),
    "buckets-1000": (10**12, 1000),
    "chosen": (d.GROUPED, d.KS_BUCKETS),
}


def drift_counted(reference: dict, current: dict, way: str) -> d.Drift:
    """drift.py's drift of `current` against `reference`, its numeric signals counted the way `way` says."""
    con, r, c = open_runs(reference, current)
    before = d.GROUPED, d.KS_BUCKETS
    d.GROUPED, d.KS_BUCKETS = WAYS[way]
    try:
        return d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref")
    finally:
        d.GROUPED, d.KS_BUCKETS = before
        con.close()


@settings(settings.get_profile("drift"), max_examples=40)
@given(runs=two_runs())
def test_every_bin_psi_p_ks_and_holm_agree_with_the_reference_implementation(runs):
    reference, current = runs
    want = expected(reference, current)
    verdicts = ref.judge(want, len(reference["row_index"]), len(current["row_index"]))
    for way in WAYS:
        got = drift_counted(reference, current, way)
        assert set(got.signals) == set(want), way
        assert got.rows.reference == len(reference["row_index"]) and got.rows.current == len(current["row_index"]), way
        for name, w in want.items():
            s = got.signals[name]
            at = (way, name)
            assert [b.reference_rows for b in s.bins] == w["a"], at
            assert [b.current_rows for b in s.bins] == w["b"], at
            assert sum(b.reference for b in s.bins) == pytest.approx(1.0), at
            assert math.isclose(s.psi, w["psi"], rel_tol=0, abs_tol=1e-9), at
            assert math.isclose(s.p, w["p"], rel_tol=1e-6, abs_tol=1e-300), at
            assert math.isclose(s.p_holm, w["p_holm"], rel_tol=1e-6, abs_tol=1e-300), at
            assert s.drifted == verdicts[name], at
            if w["edges"] is not None:
                uppers = [b.upper for b in s.bins if not b.null][:-1]
                assert uppers == w["edges"], at
                if w["ks"] is None:
                    assert s.ks is None, at
                else:
                    assert math.isclose(s.ks, w["ks"], abs_tol=1e-9), at
        assert got.drifted == [n for n in got.signals if verdicts[n]], way
        judged = any(v is not None for v in verdicts.values())  # nothing judged: no alarm and no count, not "no drift"
        assert got.alarm == (any(verdicts.values()) if judged else None), way
        assert got.drifted_signals == (len(got.drifted) if judged else None), way
        psis = [s.psi for s in got.signals.values()]
        assert psis == sorted(psis, reverse=True), way


def test_runs_under_100_rows_are_not_judged_whatever_the_shift():
    rng = np.random.default_rng(1)
    reference = {
        "row_index": np.arange(40),
        "predicted_label": ["neg"] * 40,
        "score": rng.uniform(0.4, 0.5, 40),
        "tokens": np.full(40, 5, np.int32),
        "unknown_tokens": np.zeros(40, np.int32),
        "slice": ["a"] * 40,
    }
    current = {
        "row_index": np.arange(40),
        "predicted_label": ["pos"] * 40,
        "score": rng.uniform(0.9, 1.0, 40),
        "tokens": np.full(40, 50, np.int32),
        "unknown_tokens": np.full(40, 25, np.int32),
        "slice": ["b"] * 40,
    }
    con, r, c = open_runs(reference, current)
    got = d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref")
    assert all(s.drifted is None and "not judged" in (s.reason or "") for s in got.signals.values())
    assert got.alarm is None and got.drifted_signals is None and got.drifted == []  # nothing judged is not "no drift"
    assert got.signals["predicted_label"].psi > 1  # a shift that would alarm with enough rows


@settings(settings.get_profile("drift"), max_examples=12)
@given(st.integers(90, 110), st.integers(90, 110), st.floats(0.0, 1.0), st.integers(0, 10_000))
def test_around_100_rows_the_alarm_is_null_exactly_when_nothing_was_judged_and_the_drift_gate_then_fails(m, n, shift, seed):
    """SPEC 12 (amended): under 100 rows in either run no signal is judged, and then `alarm` and
    `drifted_signals` are null, so `drifted_signals<=0` fails as every gate on a missing value does;
    at 100 rows and over they are the verdict (the count of drifted signals, any of them)."""
    from scorekeeper.gates import evaluate_gates

    rng = np.random.default_rng(seed)

    def run(rows: int, moved: float) -> dict:
        tokens = rng.poisson(5 + 40 * moved, rows).astype(np.int32) + 2
        return {
            "row_index": np.arange(rows, dtype=np.int64),
            "predicted_label": list(rng.choice(LABELS, rows, p=[0.6 - 0.5 * moved, 0.3, 0.1 + 0.5 * moved])),
            "score": rng.uniform(0.4 + 0.5 * moved, 1.0, rows),
            "tokens": tokens,
            "unknown_tokens": rng.binomial(tokens - 2, 0.05 + 0.5 * moved).astype(np.int32),
            "slice": list(rng.choice(["a", "b"], rows, p=[1 - 0.9 * moved, 0.9 * moved])),
        }

    con, r, c = open_runs(run(m, 0.0), run(n, shift))
    got = d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref")
    judged = min(m, n) >= 100
    assert all((s.drifted is not None) == judged for s in got.signals.values())
    gate = evaluate_gates({"drifted_signals": "<=0"}, {"head": "single_label", "drift": got.model_dump(mode="json")})[0]
    if judged:
        assert got.drifted_signals == len(got.drifted) and got.alarm == bool(got.drifted)
        assert gate.value == got.drifted_signals and gate.passed == (not got.drifted)
    else:
        assert got.alarm is None and got.drifted_signals is None and got.drifted == []
        assert gate.value is None and gate.passed is False


def test_a_large_shift_in_large_runs_alarms_and_a_sample_of_the_same_distribution_does_not():
    rng = np.random.default_rng(2)

    def run(n, p_pos, length):
        tokens = rng.poisson(length, n).astype(np.int32) + 2
        return {
            "row_index": np.arange(n),
            "predicted_label": rng.choice(LABELS, n, p=[0.6 - p_pos, p_pos, 0.4]).tolist(),
            "score": rng.beta(5, 2, n),
            "tokens": tokens,
            "unknown_tokens": rng.binomial(tokens, 0.02).astype(np.int32),
            "slice": rng.choice(["en", "fr", None], n).tolist(),
        }

    base = run(5000, 0.2, 30)
    con, r, c = open_runs(base, run(5000, 0.2, 30))
    assert d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref").alarm is False
    con, r, c = open_runs(base, run(5000, 0.2, 60))
    got = d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref")
    assert got.alarm is True and got.drifted[0] == "tokens"
    assert "predicted_label" not in got.drifted


def test_more_than_50_categories_keep_the_references_49_most_frequent_and_other():
    values = [f"v{i:02d}" for i in range(60)]
    reference = [v for i, v in enumerate(values) for _ in range(60 - i)] + [None] * 3
    current = values * 2 + ["new"] * 10
    bins, mapping = ref.categorical_keys(reference, current)
    assert len(bins) == 50 and bins[-1] == "<other>" and mapping["new"] == "<other>" and mapping["v00"] == "v00"
    n_ref, n_cur = len(reference), len(current)

    def table(labels):
        return {
            "row_index": np.arange(len(labels)),
            "predicted_label": ["neg"] * len(labels),
            "score": np.full(len(labels), 0.9),
            "tokens": np.full(len(labels), 3, np.int32),
            "unknown_tokens": np.zeros(len(labels), np.int32),
            "slice": labels,
        }

    con, r, c = open_runs(table(reference), table(current))
    s = d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref").signals["slice:lang"]
    assert len(s.bins) == 50 and s.bins[-1].other and sum(b.reference_rows for b in s.bins) == n_ref
    assert sum(b.current_rows for b in s.bins) == n_cur
    assert [b.value for b in s.bins[:49]] == bins[:49]


def plain_run(seed: int, n: int) -> dict:
    """A single-label run of random labels and scores, five tokens a row, one slice value."""
    rng = np.random.default_rng(seed)
    return {
        "row_index": np.arange(n),
        "predicted_label": rng.choice(LABELS, n).tolist(),
        "score": rng.uniform(0.4, 1, n),
        "tokens": np.full(n, 5, np.int32),
        "unknown_tokens": np.zeros(n, np.int32),
        "slice": ["a"] * n,
    }


def test_a_signal_the_reference_cannot_supply_is_skipped_and_named():
    base = plain_run(3, 200)
    old = {k: v for k, v in base.items() if k not in ("tokens", "unknown_tokens")}
    con, r, c = open_runs(old, base)
    got = d.drift(con, single_label.EVALUATION, r, c, ["lang"], "ref")
    assert set(got.skipped) == {"tokens", "unknown_token_share"} and "reference" in got.skipped["tokens"]
    assert set(got.signals) == {"predicted_label", "score", "slice:lang"}


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
@settings(settings.get_profile("drift"), max_examples=40)
def test_holm_matches_the_reference(p):
    assert np.allclose(d.holm(p), ref.holm(p), rtol=1e-12, atol=0)


@given(st.integers(1, 100_000))
@settings(settings.get_profile("drift"), max_examples=60)
def test_decile_ranks_are_the_nearest_rank_rule_in_integers(m):
    assert d.decile_ranks(m) == [math.ceil(j * m / 10) if (j * m) % 10 else j * m // 10 for j in range(1, 10)]


@pytest.mark.parametrize(
    ("staged", "holds"),
    [(list(range(5)), True), (list(range(4)), False), (list(range(6)), False), ([0, 1, 3, 2, 4], False), ([0, 1, 2, 3, 7], False)],
    ids=["same rows", "a row gone", "a row more", "reordered", "another row"],
)
def test_the_references_staged_input_serves_slices_only_while_it_holds_the_rows_it_scored(staged, holds):
    con = duckdb.connect(config={"threads": 1})
    con.from_arrow(pa.table({"row_index": pa.array(range(5), pa.int64())})).create_view("reference_predictions")
    con.from_arrow(pa.table({"row_index": pa.array(staged, pa.int64())})).create_view("reference_staged")
    assert (con.execute(d.sql("drift_staged_rows.sql")).fetchone()[0] == 0) is holds


def test_a_slice_the_references_staged_input_cannot_serve_is_skipped_with_the_reason():
    table = plain_run(4, 150)
    con, r, c = open_runs(table, table)
    gone = d.RunSide(r.side, r.predictions, r.columns, r.labels, unstaged="the reference run's staged input (work/input.parquet) is gone")
    got = d.drift(con, single_label.EVALUATION, gone, c, ["lang"], "ref")
    assert got.skipped == {"slice:lang": "the reference run's staged input (work/input.parquet) is gone"}
    assert "slice:lang" not in got.signals and "score" in got.signals

"""SPEC section 14's evaluation side: the `representation` drift signal (scorekeeper/evaluation/
representation.py, judged in drift.py's Holm family) and drift.moved_tokens (words.py), against the
independent implementation of tests/representation_reference.py, over run folders whose
embeddings.parquet and report/token_counts.parquet the tests write with pyarrow as SPEC 14 lays
them out; the skipped reasons; not judged below 100 test rows."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.evaluation import drift as d
from scorekeeper.evaluation import representation, single_label, words
from scorekeeper.evaluation.estimate import caveat
from scorekeeper.metrics.document import Drift
from scorekeeper.run_folder import RunFolder
from tests import drift_reference as dref
from tests import representation_reference as ref

LABELS = ["neg", "pos"]
SCORED = representation.ScoredWith.model_validate({"dtype": "float32", "long_text": {"max_length": 512}})  # as the gather gives them
PROFILE = settings(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])


def write_run(
    root: Path,
    name: str,
    embeddings: np.ndarray | None,
    row_index: np.ndarray | None = None,
    ids: list | None = None,
    tokens: dict[int, tuple[str, int]] | None = None,
    model: str = "m1",
    adapter: str | None = None,
    dtype: str = "float32",
    request: dict | None = None,
    max_length: int = 512,
) -> RunFolder:
    """A completed run's folder as the drift step reads it: plan.json, request.json, metrics.json's
    scoring section, embeddings.parquet (`row_index`, `id`, `embedding` list<float32>) and
    report/token_counts.parquet (`token_id`, `token`, `count`)."""
    run = root / name
    (run / "report").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"model_fingerprint": model, "adapter_fingerprint": adapter}))
    (run / "request.json").write_text(json.dumps({"dtype": "auto", "long_text": "truncate", "max_length": None} | (request or {})))
    scoring = {"dtype": dtype, "long_text": {"max_length": max_length}}
    (run / "report" / "metrics.json").write_text(json.dumps({"scoring": scoring}))
    if embeddings is not None:
        n = len(embeddings)
        row_index = np.arange(n) if row_index is None else row_index
        ids = [f"{name}-{i}" for i in row_index] if ids is None else ids
        table = pa.table({
            "row_index": pa.array(row_index, pa.int64()),
            "id": pa.array(ids),
            "embedding": pa.array([list(map(float, e)) for e in embeddings], pa.list_(pa.float32())),
        })  # fmt: skip
        pq.write_table(table, run / "embeddings.parquet")
    if tokens is not None:
        pq.write_table(
            pa.table(
                {
                    "token_id": pa.array(list(tokens), pa.int64()),
                    "token": pa.array([t for t, _ in tokens.values()], pa.string()),
                    "count": pa.array([c for _, c in tokens.values()], pa.int64()),
                }
            ),  # fmt: skip
            run / "report" / "token_counts.parquet",
        )
    return RunFolder.from_uri(str(run))


def shifted(rng: np.random.Generator, n: int, width: int, share: float, by: float = 3.0) -> np.ndarray:
    """n rows of width standard normal values, the first share of them moved by `by` in three dimensions."""
    x = rng.standard_normal((n, width)).astype(np.float32)
    x[: int(share * n), :3] += by
    return x


def texts_of(n: int) -> list[str]:
    return [f"review {i}: " + "long text <b>|" * (i % 40) for i in range(n)]


def open_runs(m: int, n: int, texts: list[str]):
    """Both runs' predictions (as drift.py reads them) and this run's staged text, on one connection."""
    rng = np.random.default_rng(m + n)
    con = duckdb.connect()
    for view, rows in (("reference_predictions", m), ("predictions", n)):
        tokens = rng.integers(3, 40, rows)
        con.from_arrow(pa.table({
            "row_index": pa.array(np.arange(rows), pa.int64()),
            "predicted_label": pa.array(rng.choice(LABELS, rows)),
            "score": pa.array(rng.uniform(0.5, 1, rows)),
            "tokens": pa.array(tokens.astype(np.int32)),
            "unknown_tokens": pa.array(rng.binomial(tokens, 0.02).astype(np.int32)),
        })).create_view(view)  # fmt: skip
    con.from_arrow(pa.table({"row_index": pa.array(np.arange(n), pa.int64()), "text": pa.array(texts)})).create_view("staged")
    r = d.RunSide("reference", "reference_predictions", d.columns_of(con, "reference_predictions"), LABELS)
    c = d.RunSide("current", "predictions", d.columns_of(con, "predictions"), LABELS, "staged", {})
    return con, r, c


@pytest.mark.parametrize(("share", "drifted"), [(0.0, False), (0.3, True)])
def test_the_signal_equals_a_recomputation_from_both_runs_embeddings(tmp_path, share, drifted):
    rng = np.random.default_rng(7)
    m, n, width = 500, 600, 12
    reference = write_run(tmp_path, "reference", shifted(rng, m, width, 0.0))
    current = write_run(tmp_path, "current", shifted(rng, n, width, share), ids=list(range(1000, 1000 + n)))
    texts = texts_of(n)
    con, r, c = open_runs(m, n, texts)
    got = d.drift(
        con, single_label.EVALUATION, r, c, [], "reference", representation=representation.compare_runs(reference, current, SCORED)
    )
    want = ref.representation(
        tmp_path / "reference" / "embeddings.parquet", tmp_path / "current" / "embeddings.parquet", dict(enumerate(texts))
    )
    s = got.signals["representation"]
    assert math.isclose(s.auc, want["auc"], abs_tol=1e-6)
    assert math.isclose(s.p, want["p"], rel_tol=1e-3, abs_tol=1e-300)
    assert np.allclose(s.auc_ci, want["auc_ci"], atol=1e-6)
    assert s.rows.model_dump() == want["rows"] and sum(want["rows"]["current"].values()) == n
    assert [e.row_index for e in s.examples] == [e["row_index"] for e in want["examples"]] and len(s.examples) == 20
    for e, w in zip(s.examples, want["examples"], strict=True):
        assert (e.id, e.text) == (w["id"], w["text"]) and math.isclose(e.score, w["score"], rel_tol=1e-6, abs_tol=1e-6)
    assert any(len(texts[e.row_index]) > 300 for e in s.examples) or all(len(e.text or "") <= 300 for e in s.examples)
    # one Holm family: section 12's signals and representation
    names = [name for name in got.signals if name != "representation"]
    family = [got.signals[name].p for name in names] + [s.p]
    adjusted = dref.holm(family)
    for name, p_holm in zip([*names, "representation"], adjusted, strict=True):
        assert math.isclose(got.signals[name].p_holm, p_holm, rel_tol=1e-9), name
    assert s.drifted is (s.auc >= 0.55 and s.p_holm < 0.05) and s.drifted is drifted
    assert ("representation" in got.drifted) is drifted and got.min_auc == 0.55
    if drifted:  # the shifted rows are the first 30%: the examples are theirs
        assert all(e.row_index < 0.3 * n for e in s.examples)
        assert caveat(got) is not None and "representation" in caveat(got)
    # metrics.json's shape, read back into the document
    dumped = Drift.model_validate(json.loads(got.model_dump_json()))
    assert dumped.signals["representation"] == s and dumped == got
    assert set(s.model_dump(exclude_none=True)) == {"auc", "auc_ci", "p", "p_holm", "drifted", "rows", "examples"}


def test_a_higher_floor_keeps_a_real_but_small_shift_quiet(tmp_path):
    rng = np.random.default_rng(3)
    reference = write_run(tmp_path, "reference", shifted(rng, 800, 8, 0.0))
    current = write_run(tmp_path, "current", shifted(rng, 800, 8, 0.3))
    con, r, c = open_runs(800, 800, texts_of(800))
    measured = representation.compare_runs(reference, current, SCORED)
    assert isinstance(measured, representation.Measured) and measured.auc > 0.56
    high = d.drift(con, single_label.EVALUATION, r, c, [], "reference", representation=measured, min_auc=min(1.0, measured.auc + 0.01))
    assert high.signals["representation"].drifted is False and high.signals["representation"].p_holm < 0.05


def test_fewer_than_100_test_rows_in_either_run_is_not_judged(tmp_path):
    rng = np.random.default_rng(11)
    reference = write_run(tmp_path, "reference", shifted(rng, 150, 6, 0.0))
    current = write_run(tmp_path, "current", shifted(rng, 150, 6, 1.0))
    con, r, c = open_runs(150, 150, texts_of(150))
    got = d.drift(
        con, single_label.EVALUATION, r, c, [], "reference", representation=representation.compare_runs(reference, current, SCORED)
    )
    s = got.signals["representation"]
    tests = {side: s.rows.model_dump()[side]["test"] for side in ("reference", "current")}
    assert min(tests.values()) < 100 and s.drifted is None and "representation" not in got.drifted
    assert s.reason is not None and f"{min(tests.values())} test rows" in s.reason and "at least 100" in s.reason
    assert s.auc > 0.9  # measured all the same, with its p in the family
    assert all(got.signals[name].drifted is not None for name in got.signals if name != "representation")  # 150 rows: judged


def _runs_differing(tmp_path, what: str):
    rng = np.random.default_rng(1)
    x = shifted(rng, 300, 8, 0.0)
    other = {
        "no reference embeddings": ({"embeddings": None}, {}),
        "no current embeddings": ({}, {"embeddings": None}),
        "model": ({}, {"model": "m2"}),
        "adapter": ({"adapter": "a1"}, {"adapter": "a2"}),
        "dtype": ({"dtype": "bfloat16"}, {}),
        "max_length": ({"max_length": 256}, {}),
        "long_text": ({"request": {"long_text": "chunk", "chunk_overlap": 0, "chunk_aggregate": "mean", "max_chunks": 64}}, {}),
        "max_chunks": (
            {"request": {"long_text": "chunk", "chunk_overlap": 0, "chunk_aggregate": "mean", "max_chunks": 8}},
            {"request": {"long_text": "chunk", "chunk_overlap": 0, "chunk_aggregate": "mean", "max_chunks": 64}},
        ),
        "width": ({}, {"embeddings": x[:, :4]}),
    }[what]
    args = [{"embeddings": x} | o for o in other]
    reference = write_run(tmp_path, "reference", **args[0])
    current = write_run(tmp_path, "current", **args[1])
    return reference, current, SCORED


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("no reference embeddings", "the reference run has no embeddings.parquet"),
        ("no current embeddings", "the current run has no embeddings.parquet"),
        ("model", "different models"),
        ("adapter", "different adapters"),
        ("dtype", "different dtype ('bfloat16' in the reference, 'float32' here)"),
        ("max_length", "different max_length (256 in the reference, 512 here)"),
        ("long_text", "different long_text ('chunk' in the reference, 'truncate' here)"),
        ("max_chunks", "different max_chunks (8 in the reference, 64 here)"),
        ("width", "differ in width (8 in the reference, 4 here)"),
    ],
)
def test_the_signal_is_skipped_naming_why(tmp_path, what, said):
    reference, current, scored = _runs_differing(tmp_path, what)
    why = representation.compare_runs(reference, current, scored)
    assert isinstance(why, str) and said in why, why
    con, r, c = open_runs(300, 300, texts_of(300))
    got = d.drift(con, single_label.EVALUATION, r, c, [], "reference", representation=why)
    assert "representation" not in got.signals and got.skipped["representation"] == why


@st.composite
def embedding_runs(draw):
    width = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sides = []
    for _ in range(2):
        n = draw(st.integers(0, 120))
        x = rng.standard_normal((n, width)).astype(np.float32) * draw(st.sampled_from([1e-3, 1.0, 50.0]))
        if draw(st.booleans()):
            x[:, 0] = 2.5  # a constant dimension: its deviation counts as 1
        x[: draw(st.integers(0, n)), -1] += draw(st.sampled_from([0.0, 1.0, 4.0]))
        sides.append((x, rng.choice(10_000, n, replace=False)))  # row indices sparse, as a sample's are
    return sides


@settings(PROFILE, max_examples=25)
@given(runs=embedding_runs())
def test_every_sample_agrees_with_the_reference_implementation(runs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (rx, ri), (cx, ci) = runs
        reference = write_run(root, "reference", rx, row_index=ri)
        current = write_run(root, "current", cx, row_index=ci, ids=[int(i) for i in ci])
        got = representation.compare_runs(reference, current, SCORED)
        fit = {side: [ref.w(int(i)) < 0.5 for i in idx] for side, idx in (("reference", ri), ("current", ci))}
        if any(all(f) or not any(f) for f in fit.values()):  # a side without fit or without test rows
            said = "holds no rows" if 0 in (len(ri), len(ci)) else "too few rows"
            assert isinstance(got, str) and said in got, got
            return
        want = ref.representation(root / "reference" / "embeddings.parquet", root / "current" / "embeddings.parquet", {})
        assert isinstance(got, representation.Measured)
        assert math.isclose(got.auc, want["auc"], abs_tol=1e-6) and np.allclose(got.auc_ci, want["auc_ci"], atol=1e-6)
        assert math.isclose(got.p, want["p"], rel_tol=1e-3, abs_tol=1e-12) and got.rows == want["rows"]
        assert [e["row_index"] for e in got.examples] == [e["row_index"] for e in want["examples"]]
        assert [e["id"] for e in got.examples] == [e["id"] for e in want["examples"]]
        assert got.judged is (min(want["rows"]["reference"]["test"], want["rows"]["current"]["test"]) >= 100)


def test_the_files_read_a_batch_at_a_time_in_any_row_order_give_the_recomputations_signal(tmp_path, monkeypatch):
    """The signal reads embeddings.parquet twice, a batch at a time (the fit rows into the float64
    matrix, then the test rows to score): batches that cut the file anywhere and rows in no order
    place every vector where the recomputation has it."""
    rng = np.random.default_rng(8)
    rx, cx = rng.standard_normal((300, 4)).astype(np.float32), rng.standard_normal((280, 4)).astype(np.float32)
    cx[:90, 1] += 1.5
    ri, ci = rng.choice(5_000, 300, replace=False), rng.choice(5_000, 280, replace=False)
    reference, current = write_run(tmp_path, "reference", rx, row_index=ri), write_run(tmp_path, "current", cx, row_index=ci)
    want = ref.representation(tmp_path / "reference" / "embeddings.parquet", tmp_path / "current" / "embeddings.parquet", {})
    monkeypatch.setattr(representation, "READ_ROWS", 7)
    got = representation.compare_runs(reference, current, SCORED)
    assert isinstance(got, representation.Measured) and got.rows == want["rows"]
    assert math.isclose(got.auc, want["auc"], abs_tol=1e-6) and math.isclose(got.p, want["p"], rel_tol=1e-3)
    assert [(e["row_index"], e["id"]) for e in got.examples] == [(e["row_index"], e["id"]) for e in want["examples"]]


@pytest.mark.parametrize(
    "vectors", [[[1.0, 2.0]] * 150 + [[1.0, 2.0, 3.0]], [[1.0, 2.0]] * 150 + [None]], ids=["a wider vector", "a null vector"]
)
def test_an_embeddings_file_with_a_vector_of_another_width_or_none_is_refused_naming_it(tmp_path, vectors):
    reference = write_run(tmp_path, "reference", np.ones((151, 2), dtype=np.float32))
    current = tmp_path / "current"
    write_run(tmp_path, "current", np.ones((151, 2), dtype=np.float32))
    table = pa.table({"row_index": pa.array(np.arange(151), pa.int64()), "id": pa.array([str(i) for i in range(151)]),
                      "embedding": pa.array(vectors, pa.list_(pa.float32()))})  # fmt: skip
    pq.write_table(table, current / "embeddings.parquet")
    with pytest.raises(ValueError, match="embeddings.parquet: embeddings of different widths or null embeddings"):
        representation.compare_runs(reference, RunFolder.from_uri(str(current)), SCORED)


# -- the words ----------------------------------------------------------------------------------


@st.composite
def token_counts(draw):
    vocabulary = draw(st.integers(1, 80))
    runs = []
    for _ in range(2):
        ids = draw(st.lists(st.integers(0, vocabulary), unique=True, max_size=vocabulary + 1))
        runs.append({i: (f"w{i}" if i % 7 else f"<b>|{i}", draw(st.sampled_from([0, 1, 5, 19, 20, 21, 40, 200]) | st.integers(0, 90)))
                     for i in ids})  # fmt: skip
    return runs


@settings(PROFILE, max_examples=60)
@given(runs=token_counts())
def test_moved_tokens_equal_a_recomputation(runs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reference = write_run(root, "reference", None, tokens=runs[0])
        current = write_run(root, "current", None, tokens=runs[1])
        got = words.moved_tokens(duckdb.connect(), reference, current)
        want = ref.moved_tokens(
            root / "reference" / "report" / "token_counts.parquet", root / "current" / "report" / "token_counts.parquet"
        )
        assert not isinstance(got, str)
        assert [t.token_id for t in got] == [t["token_id"] for t in want]
        for g, w in zip(got, want, strict=True):
            assert (g.token, g.reference_count, g.current_count) == (w["token"], w["reference_count"], w["current_count"])
            for key in ("reference_share", "current_share", "log_ratio"):
                assert math.isclose(getattr(g, key), w[key], rel_tol=1e-12, abs_tol=1e-15), key


def test_moved_tokens_are_null_with_the_reason_when_the_reference_has_no_counts_or_another_tokenizer(tmp_path):
    counts = {1: ("good", 30), 2: ("bad", 25)}
    reference = write_run(tmp_path, "reference", None)
    current = write_run(tmp_path, "current", None, tokens=counts)
    assert words.moved_tokens(duckdb.connect(), reference, current) == (
        "the reference run has no report/token_counts.parquet (written before SPEC section 14)"
    )
    other = write_run(tmp_path, "other", None, tokens={1: ("good", 30), 2: ("awful", 25)})
    why = words.moved_tokens(duckdb.connect(), other, current)
    assert why == "the runs' tokenizers differ (token id 2 is 'awful' in the reference and 'bad' here)"


def test_representation_is_an_input_signal_the_estimates_caveat_names():
    assert d.is_input_signal("representation") and "representation" in d.INPUT_SIGNALS
    drift = Drift.model_validate({
        "reference": "r", "rows": {"reference": 1, "current": 1}, "min_psi": 0.1, "signals": {}, "drifted": ["representation"],
        "drifted_signals": 1, "alarm": True, "skipped": {},
    })  # fmt: skip
    assert "representation" in (caveat(drift) or "")


# -- the report ---------------------------------------------------------------------------------

HOSTILE = "<script>alert(7)</script> | [link](http://x.example) `code` **b**\nnext"


def test_the_report_and_the_summary_show_the_examples_under_the_alarm_and_the_words_beside_it_escaped(tmp_path):
    from markdown_it import MarkdownIt

    from scorekeeper.metrics.document import MovedToken, RepresentationSignal
    from scorekeeper.report.drift_report import alarm_sentence
    from scorekeeper.report.report import render_html, render_markdown
    from scorekeeper.tasks.artifacts import summary_markdown
    from tests.test_drift_report import RUN_INFO, drifted_document

    doc = drifted_document(tmp_path)
    assert doc.drift is not None
    rep = RepresentationSignal.model_validate({
        "auc": 0.7123, "auc_ci": [0.68, 0.74], "p": 1e-9, "p_holm": 1e-8, "drifted": True,
        "rows": {"reference": {"fit": 120, "test": 120}, "current": {"fit": 118, "test": 122}},
        "examples": [{"row_index": 7 + k, "id": f"<img src=x>{k}", "text": HOSTILE + str(k), "score": 3.5 - k / 10} for k in range(20)],
    })  # fmt: skip
    moved = [MovedToken(token_id=5, token="<b>|##ing", reference_count=3, current_count=80, reference_share=0.001,
                        current_share=0.02, log_ratio=2.9957)]  # fmt: skip
    drift = doc.drift.model_copy(
        update={
            "signals": doc.drift.signals | {"representation": rep},
            "drifted": [*doc.drift.drifted, "representation"],
            "moved_tokens": moved,
            "min_auc": 0.55,
        }  # fmt: skip
    )
    doc = doc.model_copy(update={"drift": drift})
    assert "representation (AUC 0.712)" in alarm_sentence(drift)
    md = render_markdown(doc, RUN_INFO)
    summary = summary_markdown(doc, "cur", "file:///runs/cur", {})
    for text in (md, summary):
        alarm = text.index("**Drift alarm")
        assert alarm < text.index("The texts most unlike the reference") < text.index("What the texts say more, and less")
        assert text.index("What the texts say more, and less") < text.index("| signal | kind | PSI")
        rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
        assert "<script>" not in rendered and "<img" not in rendered and "<b>" not in rendered and 'href="http://x.example"' not in rendered
        assert rendered.count("alert(7)") == 20 and "AUC 0.712 [0.680, 0.740]" in text
    html = render_html(doc, RUN_INFO)
    assert "<script>alert(7)" not in html and "&lt;script&gt;alert(7)&lt;/script&gt;" in html and "&lt;b&gt;|##ing" in html
    assert html.index('id="representation"') < html.index('id="representation-examples"') < html.index('id="moved-tokens"')
    assert html.count("&lt;img src=x&gt;") == 20

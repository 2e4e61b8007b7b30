"""Long documents without processes: the windows of every mode against the definition written out
here independently (over generated lengths, overlaps, heads and caps), the model inputs a real
tokenizer's frame gives them (truncate: exactly what the tokenizer's own truncation gives), the
float64 aggregation, the refusals, the counts of scoring.long_text, and length_impact against its
definition recomputed here."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scorekeeper.errors import InputError
from scorekeeper.long_text import LongTextCounts, aggregate_problem, window_problem
from scorekeeper.params import ScoreRequest
from scorekeeper.worker.batching import collate, encode
from scorekeeper.worker.windows import (
    WindowSettings,
    aggregate,
    covered,
    encode_rows,
    encode_windows,
    row_windows,
    text_frame,
)

BASE = {"input_uri": "in.parquet", "model_uri": "model", "output_uri": "out"}


# -- the definition, written out again ----------------------------------------------------------


def expected_windows(c: list[int], mode: str, w: int, h: int, overlap: int, cap: int) -> tuple[list[list[int]], bool]:
    """The windows of content tokens c (docs/long_text.md), element by element."""
    n = len(c)
    if mode == "truncate":
        return [c[0:w]], False
    if mode == "head_tail":
        return ([c[0:h] + c[n - (w - h) : n]] if n > w else [c]), False
    if n <= w:
        return [c], False
    step = w - overlap
    k = 1 + math.ceil((n - w) / step)
    windows = [c[i * step : i * step + w] for i in range(k - 1)] + [c[n - w : n]]
    return windows[:cap], k > cap


def _materialise(c: list[int], windows) -> list[list[int]]:
    return [[t for a, b in spans for t in c[a:b]] for spans in windows]


@settings(max_examples=400, deadline=None)
@given(
    length=st.integers(0, 400),
    window=st.integers(1, 64),
    data=st.data(),
    mode=st.sampled_from(["truncate", "head_tail", "chunk"]),
)
def test_windows_follow_the_definition(length, window, data, mode):
    h = data.draw(st.integers(0, window - 1))
    overlap = data.draw(st.integers(0, window - 1))
    cap = data.draw(st.integers(1, 12))
    c = [1000 + i for i in range(length)]  # distinct tokens: a window's position shows in its values
    got, capped = row_windows(length, WindowSettings(mode, window, head_tokens=h, overlap=overlap, max_chunks=cap))
    want, want_capped = expected_windows(c, mode, window, h, overlap, cap)
    assert _materialise(c, got) == want and capped == want_capped
    assert all(len(x) == min(length, window) for x in want)  # no window is a short scrap
    if mode == "chunk" and not capped:
        assert covered(got) == length  # every content token is scored at least once


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 300), min_size=1, max_size=12),
    window=st.integers(2, 40),
    data=st.data(),
    mode=st.sampled_from(["truncate", "head_tail", "chunk"]),
)
def test_the_counts_are_their_definitions(lengths, window, data, mode):
    """tokens_scored, tokens_dropped, chunks, rows_capped of a range, from a fake tokenizer whose
    content tokens are given: each against its definition over the windows written out here."""
    h = data.draw(st.integers(0, window - 1))
    overlap = data.draw(st.integers(0, window - 1))
    cap = data.draw(st.integers(1, 8))
    contents = [[5 + (i + j) % 7 for j in range(n)] for i, n in enumerate(lengths)]
    tokenizer = _FakeTokenizer(contents)
    frame = text_frame(_FakeTokenizer([[9, 9]], probe=True))
    settings_ = WindowSettings(mode, window, head_tokens=h, overlap=overlap, max_chunks=cap)
    encoded, rows = encode_windows(tokenizer, [str(i) for i in range(len(lengths))], frame, settings_, window + 2, False)
    want = [expected_windows(c, mode, window, h, overlap, cap) for c in contents]
    assert encoded.ids == [[1] + x + [2] for ws, _ in want for x in ws]  # prefix + window + suffix, rows in order
    assert rows.tokens.tolist() == [n + 2 for n in lengths]
    assert rows.unknown.tolist() == [c.count(6) for c in contents]  # 6 is the fake unknown token
    assert rows.chunks.tolist() == [len(ws) for ws, _ in want]
    counts = rows.counts
    assert counts.rows_over_length == sum(n > window for n in lengths)
    assert counts.tokens_content == sum(lengths)
    assert counts.tokens_scored == sum(len(x) for ws, _ in want for x in ws)
    kept = []
    for c, (ws, _) in zip(contents, want):
        positions = set()
        for spans in row_windows(len(c), settings_)[0]:
            for a, b in spans:
                positions.update(range(a, b))
        kept.append(len(positions))
    assert counts.tokens_dropped == sum(lengths) - sum(kept)
    if mode == "chunk":
        assert counts.chunks == len(encoded.ids) and counts.rows_capped == sum(capped for _, capped in want)
        per_row = [len(ws) for ws, _ in want]
        assert counts.windows_per_row == {str(k): per_row.count(k) for k in sorted(set(per_row))}
        assert encoded.truncated == counts.rows_capped
    else:
        assert counts.chunks is None and counts.rows_capped is None and encoded.truncated == counts.rows_over_length


class _FakeTokenizer:
    """Content tokens given per text; frames a text as [1] + content + [2]; unknown token 6."""

    unk_token_id = 6

    def __init__(self, contents, probe: bool = False):
        self.contents, self.probe = contents, probe

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 2

    def __call__(self, texts, add_special_tokens: bool = True, return_special_tokens_mask: bool = False, **_):
        if isinstance(texts, str):
            content = [9, 9]
            if not add_special_tokens:
                return {"input_ids": content}
            return {"input_ids": [1, *content, 2], "special_tokens_mask": [1, 0, 0, 1], "token_type_ids": [0, 0, 0, 0]}
        return {"input_ids": [list(self.contents[int(t)]) for t in texts]}


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 5), min_size=1, max_size=10),
    outputs=st.integers(1, 4),
    how=st.sampled_from(["mean", "max"]),
    seed=st.integers(0, 10_000),
)
def test_aggregation_is_the_elementwise_mean_or_max_of_each_rows_windows(chunks, outputs, how, seed):
    raw = np.random.default_rng(seed).normal(0, 5, size=(sum(chunks), outputs))
    got = aggregate(raw, np.array(chunks), how)
    starts = np.cumsum([0, *chunks])
    for row in range(len(chunks)):
        mine = raw[starts[row] : starts[row + 1]]
        want = mine.mean(axis=0) if how == "mean" else mine.max(axis=0)
        assert np.allclose(got[row], want, rtol=0, atol=1e-12)
    assert got.dtype == np.float64 and got.shape == (len(chunks), outputs)


# -- a real tokenizer's frame -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    from tests.helpers import make_rows
    from tests.models import build_tokenizer

    root = tmp_path_factory.mktemp("long_tokenizers")
    corpus = [r["text"] for r in make_rows(200, seed=3)]
    return {
        "wordpiece": build_tokenizer(root / "wp", corpus, "wordpiece", model_max_length=24),
        "bpe": build_tokenizer(root / "bpe", corpus, "bpe", model_max_length=24),
    }


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_truncate_windows_are_the_tokenizers_own_truncation(tokenizers, kind):
    from tests.helpers import make_rows

    tokenizer = tokenizers[kind]
    frame = text_frame(tokenizer)
    assert frame.specials == tokenizer.num_special_tokens_to_add(pair=False) == (2 if kind == "wordpiece" else 1)
    texts = [r["text"] for r in make_rows(60, seed=9, max_words=40)] + ["", "zzqx ☃ unknown-ish ✓"]
    with_types = kind == "wordpiece"
    mine, rows = encode_windows(tokenizer, texts, frame, WindowSettings("truncate", 24 - frame.specials), 24, with_types)
    theirs = encode(tokenizer, texts, None, 24, with_types)
    assert mine.ids == theirs.ids and mine.truncated == theirs.truncated
    if with_types:  # BERT's single text: every type id 0, made by collate
        assert mine.zero_type_ids and {t for row in theirs.type_ids for t in row} == {0}
    positions = np.arange(len(texts))
    for a, b in zip(collate(mine, positions, 0).model_inputs().values(), collate(theirs, positions, 0).model_inputs().values()):
        assert torch.equal(a, b)  # the same tensors reach the model
    whole = tokenizer(texts)["input_ids"]
    assert rows.tokens.tolist() == [len(x) for x in whole]
    unk = tokenizer.unk_token_id
    assert rows.unknown.tolist() == [x.count(unk) if unk is not None else 0 for x in whole]
    assert rows.counts.rows_over_length == sum(len(x) > 24 for x in whole) > 0


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_truncate_mode_keeps_the_tokenizers_own_cut_when_it_cuts_from_the_left(tokenizers, kind):
    """truncation_side left: truncate mode's inputs are the last tokens, as the tokenizer gives them;
    the windows of head_tail and chunk stay as defined (they do not depend on the tokenizer's side)."""
    import copy

    from tests.helpers import make_rows

    tokenizer = copy.deepcopy(tokenizers[kind])
    tokenizer.truncation_side = "left"
    frame = text_frame(tokenizer)
    texts = [r["text"] for r in make_rows(40, seed=5, max_words=40)]
    with_types = kind == "wordpiece"
    window = 24 - frame.specials
    mine, rows = encode_rows(tokenizer, texts, None, frame, WindowSettings("truncate", window), 24, with_types)
    assert mine.ids == tokenizer(texts, truncation=True, max_length=24)["input_ids"]
    whole = tokenizer(texts)["input_ids"]
    assert rows.tokens.tolist() == [len(x) for x in whole] and rows.counts.rows_over_length == sum(len(x) > 24 for x in whole) > 0
    chunked, _ = encode_rows(tokenizer, texts, None, frame, WindowSettings("chunk", window), 24, with_types)
    tokenizer.truncation_side = "right"
    assert chunked.ids == encode_windows(tokenizer, texts, frame, WindowSettings("chunk", window), 24, with_types)[0].ids


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_chunk_and_head_tail_inputs_are_the_frame_around_each_window(tokenizers, kind):
    from tests.helpers import make_rows

    tokenizer = tokenizers[kind]
    frame = text_frame(tokenizer)
    texts = [r["text"] for r in make_rows(20, seed=4, max_words=60)]
    w = 24 - frame.specials
    with_ends = tokenizer("good", return_special_tokens_mask=True)
    prefix = with_ends["input_ids"][: with_ends["special_tokens_mask"].index(0)]
    for mode in ("chunk", "head_tail"):
        settings_ = WindowSettings(mode, w, head_tokens=5, overlap=3, max_chunks=4)
        encoded, _ = encode_windows(tokenizer, texts, frame, settings_, 24, False)
        want = []
        for text in texts:
            c = tokenizer(text, add_special_tokens=False)["input_ids"]
            for x in expected_windows(c, mode, w, 5, 3, 4)[0]:
                want.append(prefix + x + ([tokenizer.sep_token_id] if kind == "wordpiece" else []))
        assert encoded.ids == want
        assert max(len(x) for x in encoded.ids) <= 24


# -- refusals -------------------------------------------------------------------------------------


def test_the_parameters_refuse_what_has_no_meaning():
    with pytest.raises(ValidationError, match="text pair"):
        ScoreRequest(**BASE, long_text="chunk", text_pair_column="other")
    with pytest.raises(ValidationError, match="text pair"):
        ScoreRequest(**BASE, long_text="head_tail", text_pair_column="other")
    ScoreRequest(**BASE, text_pair_column="other")  # truncate takes a pair, as ever
    with pytest.raises(ValidationError, match="max_chunks"):
        ScoreRequest(**BASE, long_text="chunk", max_chunks=0)
    with pytest.raises(ValidationError, match="chunk_aggregate max"):
        ScoreRequest(**BASE, long_text="chunk", chunk_aggregate="max", head="single_label")
    ScoreRequest(**BASE, long_text="chunk", chunk_aggregate="max", head="multi_label")
    assert aggregate_problem("chunk", "max", "regression") is None
    assert aggregate_problem("chunk", "mean", "single_label") is None
    assert "chunk_aggregate max" in aggregate_problem("chunk", "max", "single_label")
    assert "head_tokens 30 leaves no room" in window_problem("head_tail", 30, 0, 32, 2)
    assert window_problem("head_tail", 29, 0, 32, 2) is None
    assert "chunk_overlap 30 leaves windows no room" in window_problem("chunk", 0, 30, 32, 2)
    assert window_problem("chunk", 0, 29, 32, 2) is None
    assert window_problem("truncate", 500, 500, 32, 2) is None  # only the mode's own parameter counts
    assert "leaves no room for text" in window_problem("truncate", 0, 0, 2, 2)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"long_text": "head_tail", "head_tokens": 22}, "head_tokens 22 leaves no room"),  # W = 24 - 2
        ({"long_text": "chunk", "chunk_overlap": 22}, "chunk_overlap 22 leaves windows no room"),
        ({"long_text": "chunk", "chunk_aggregate": "max"}, "chunk_aggregate max"),  # head auto: single_label
    ],
)
def test_the_run_refuses_them_before_anything_is_written(tmp_path, tokenizers, params, message):
    """open_run, the flow's first step: the model folder's own tokenizer and max length decide."""
    from scorekeeper.tasks.open_run import open_run
    from tests.helpers import make_rows, write_rows
    from tests.models import build_tiny_classifier

    model = build_tiny_classifier(tmp_path / "model", "bert", seed=1, max_position_embeddings=24)
    write_rows(tmp_path / "in.parquet", make_rows(4))
    request = ScoreRequest(
        input_uri=str(tmp_path / "in.parquet"), model_uri=str(model), output_uri=str(tmp_path / "runs"), run_name="r", **params
    )
    with pytest.raises(InputError, match=message):
        open_run(request, None)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*"))


def test_counts_sum_over_ranges_and_refuse_mixed_windows():
    a = LongTextCounts(mode="chunk", max_length=32, window=30, rows_over_length=2, tokens_content=100, tokens_scored=120,
                       tokens_dropped=4, chunks=7, rows_capped=1, windows_per_row={"1": 2, "2": 1, "3": 1})  # fmt: skip
    b = LongTextCounts(mode="chunk", max_length=32, window=30, rows_over_length=1, tokens_content=40, tokens_scored=40,
                       tokens_dropped=0, chunks=3, rows_capped=0, windows_per_row={"10": 0, "2": 1, "1": 1})  # fmt: skip
    total = LongTextCounts.summed([a, b])
    assert total is not None and total.as_dict() == {
        "mode": "chunk", "max_length": 32, "window": 30, "rows_over_length": 3, "tokens_content": 140, "tokens_scored": 160,
        "tokens_dropped": 4, "chunks": 10, "rows_capped": 1, "windows_per_row": {"1": 3, "2": 2, "3": 1, "10": 0},
    }  # fmt: skip
    truncated = LongTextCounts(
        mode="truncate", max_length=32, window=30, rows_over_length=0, tokens_content=1, tokens_scored=1, tokens_dropped=0
    )
    assert "chunks" not in LongTextCounts.summed([truncated]).as_dict()
    with pytest.raises(ValueError, match="different modes"):
        LongTextCounts.summed([a, truncated])
    assert LongTextCounts.summed([]) is None


# -- length_impact ---------------------------------------------------------------------------------


def _wilson(x: int, n: int) -> list[float]:
    z = 1.959963984540054
    p = x / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 60), max_length=st.integers(5, 40))
def test_length_impact_is_accuracy_within_and_over_the_window(tmp_path_factory, seed, n, max_length):
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from tests.evaluation_runs import write_run

    rng = np.random.default_rng(seed)
    labels = ["a", "b", "c"]
    probs = rng.dirichlet(np.ones(3), size=n)
    truth = rng.integers(0, 3, size=n)
    tokens = rng.integers(2, 2 * max_length, size=n)
    root = tmp_path_factory.mktemp("impact")
    run, manifest, _ = write_run(root, "r", probs, labels, pa.array([labels[t] for t in truth]), complete=False)
    predictions = pq.read_table(run.path + "/predictions.parquet")
    predictions = predictions.append_column("tokens", pa.array(tokens.astype(np.int32)))
    predictions = predictions.append_column("unknown_tokens", pa.array(np.zeros(n, dtype=np.int32)))
    pq.write_table(predictions, run.path + "/predictions.parquet")
    document = evaluate_run(run, labels, manifest, EvaluationSettings(max_length=max_length)).as_dict()
    over = tokens > max_length
    if not over.any():
        assert "length_impact" not in document
        return
    right = probs.argmax(1) == truth
    impact = document["length_impact"]
    for side, rows in (("within", ~over), ("over", over)):
        k = int(rows.sum())
        assert impact[side]["rows"] == k
        if k:
            assert impact[side]["accuracy"] == pytest.approx(right[rows].mean(), abs=1e-12)
            assert impact[side]["accuracy_ci"] == pytest.approx(_wilson(int(right[rows].sum()), k), abs=1e-12)
        else:
            assert impact[side]["accuracy"] is None
    # without the run's max length (or the tokens column) there is nothing to split
    assert "length_impact" not in evaluate_run(run, labels, manifest).as_dict()


class _OddFrame(_FakeTokenizer):
    """Puts a special token inside the content (mask 0 1 0 1): not a frame around it."""

    def __call__(self, texts, add_special_tokens: bool = True, return_special_tokens_mask: bool = False, **_):
        if not add_special_tokens:
            return {"input_ids": [9, 9]}
        return {"input_ids": [9, 1, 9, 2], "special_tokens_mask": [0, 1, 0, 1]}


def test_a_tokenizer_framing_a_text_otherwise_only_truncates():
    from types import SimpleNamespace

    from scorekeeper.errors import ModelError
    from scorekeeper.worker.model import LoadedModel
    from scorekeeper.worker.windows import text_frame_or_none

    odd = _OddFrame([])
    assert text_frame_or_none(odd) is None
    loaded = LoadedModel(model=None, tokenizer=odd, max_length=16, pad_token_id=0, labels=["a"], uses_token_type_ids=False)  # type: ignore[arg-type]
    loaded.use_long_text(SimpleNamespace(long_text="truncate"))  # the tokenizer's own truncation, as ever
    for mode in ("chunk", "head_tail"):
        with pytest.raises(ModelError, match="does not frame a text"):
            loaded.use_long_text(SimpleNamespace(long_text=mode))


def test_the_report_shows_what_the_length_costs_and_nothing_when_nothing_is_over(tmp_path):
    import json
    import re

    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.long_text import LongTextCounts
    from scorekeeper.report.report import render_html, render_markdown
    from scorekeeper.scoring_summary import ScoringSummary
    from tests.evaluation_runs import write_run

    rng = np.random.default_rng(1)
    labels = ["a", "b"]
    probs = rng.dirichlet(np.ones(2), size=30)
    run, manifest, _ = write_run(tmp_path, "r", probs, labels, pa.array([labels[t] for t in rng.integers(0, 2, 30)]), complete=False)
    predictions = pq.read_table(run.path + "/predictions.parquet")
    tokens = np.where(np.arange(30) % 3 == 0, 40, 10).astype(np.int32)
    predictions = predictions.append_column("tokens", pa.array(tokens)).append_column("unknown_tokens", pa.array(np.zeros(30, np.int32)))
    pq.write_table(predictions, run.path + "/predictions.parquet")
    long_text = {"mode": "chunk", "max_length": 16, "window": 14, "rows_over_length": 10, "tokens_content": 640, "tokens_scored": 700,
                 "tokens_dropped": 0, "chunks": 50, "rows_capped": 0, "windows_per_row": {"1": 20, "3": 10}}  # fmt: skip

    def scored(long_text: dict) -> ScoringSummary:
        return ScoringSummary.measured(30, 700, 700, 0, 1.0, long_text=LongTextCounts(**long_text))

    document = evaluate_run(run, labels, manifest, EvaluationSettings(max_length=16))
    document.scoring = scored(long_text)
    metrics = document.as_dict()
    info = {"run_id": "r", "input_uri": "in", "model_uri": "m", "mode": "replica", "num_processes": 1}
    html, md = render_html(document, info), render_markdown(document, info)
    assert "What the length costs" in html and "## What the length costs" in md and "Windows per row" in html
    shown = re.findall(r'data-key="([^"]*(?:length|long_text)[^"]*)" data-value="([^"]*)"', html)
    # two sides: rows, value and the interval's ends; two window counts; the sentence's eight counts of scoring.long_text
    assert len(shown) == 2 * 4 + 2 + 8
    for key, value in shown:
        path = json.loads(key.replace("&#34;", '"'))
        at = metrics
        for part in path:
            at = at[part]
        assert repr(at) == value.replace("&#39;", "'"), path
    assert metrics["length_impact"]["over"]["rows"] == 10 and "| over the window | 10 |" in md
    assert "long texts" in html and "chunk: 10 of the 30 rows scored are longer than the window of 14" in html
    # a truncate run with nothing over the window: no section, no fact
    document = evaluate_run(run, labels, manifest, EvaluationSettings(max_length=64))
    document.scoring = scored(
        long_text | {"mode": "truncate", "rows_over_length": 0, "chunks": None, "rows_capped": None, "windows_per_row": None}
    )
    metrics = document.as_dict()
    assert "length_impact" not in metrics
    html, md = render_html(document, info), render_markdown(document, info)
    assert "What the length costs" not in html and "long texts" not in html
    assert "What the length costs" not in md and "long texts" not in md.lower()

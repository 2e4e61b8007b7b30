"""Pipeline mode: explicit stages per family, the split, the header protocol, and real runs.

The in-process tests run a model's stages one after another and compare them with the whole
model (every family, 1-3 stages, adapters merged and not). The integration tests launch real
gloo jobs (2 and 3 stages, hybrid 2 x 2) and compare every prediction with a single-row unpadded
reference and with replica mode's batches scored in-process.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scorekeeper.errors import InputError, ModelError  # noqa: E402
from scorekeeper.long_text import LongTextCounts  # noqa: E402
from scorekeeper.run_folder import IndexRange, cut_ranges  # noqa: E402
from scorekeeper.worker.batching import collate, cut_batches, encode  # noqa: E402
from scorekeeper.worker.model import load_model  # noqa: E402
from scorekeeper.worker.pipeline import RangeWork, TimedStage, bubble_theoretical, plan_layout  # noqa: E402
from scorekeeper.worker.replica import score_batches  # noqa: E402
from scorekeeper.worker.stages import balanced_boundaries, build_stage  # noqa: E402
from scorekeeper.worker.windows import RowLengths  # noqa: E402
from tests import models as demo  # noqa: E402
from tests.helpers import make_rows, probabilities, reference_probabilities, run_flow, write_rows  # noqa: E402

TOLERANCE = 1e-4
CPU = torch.device("cpu")
TEXTS = [
    "The kettle is great, I love it.",
    "Awful screen. I regret buying it, do not buy!",
    "ok",
    "Three stars: the novel is average, 42 pages of nothing special.",
    "I returned the blender, cheap quality.",
]


@pytest.fixture(scope="module")
def family_models(tmp_path_factory):
    """One tiny model per family with at least three layers (for three stages)."""
    root = tmp_path_factory.mktemp("pipeline-models")
    return {
        family: str(demo.build_tiny_classifier(root / family, family, seed=5, num_layers=None if family in ("minilm", "distilbert") else 3))
        for family in demo.FAMILIES
    }


@pytest.fixture(scope="module")
def llama_adapter(models, tmp_path_factory):
    return str(demo.build_lora_adapter(models["llama"], tmp_path_factory.mktemp("llama-adapter") / "a", seed=4))


def _load(model_dir: str, adapter: str | None = None, merge: bool = True, dtype=torch.float32):
    return load_model(model_dir, adapter, merge_adapter=merge, dtype=dtype, device=CPU, trust_remote_code=False, max_length=None)


def _run_stages_in_turn(model, stages: int, enc: dict) -> torch.Tensor:
    modules = [build_stage(model, s, stages)[0] for s in range(stages)]
    x = tuple(enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc)
    with torch.inference_mode():
        for module in modules:
            x = module(*x)
            x = x if isinstance(x, tuple) else (x,)
    return x[0]


# -- in process ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", demo.FAMILIES)
def test_stages_in_turn_equal_the_whole_model(family_models, family):
    loaded = _load(family_models[family])
    enc = loaded.tokenizer(TEXTS, padding=True, return_tensors="pt", return_token_type_ids=loaded.uses_token_type_ids)
    with torch.inference_mode():
        expected = loaded.model(**enc).logits
    for stages in (1, 2, 3):
        got = _run_stages_in_turn(loaded.model, stages, enc)
        assert got.dtype == expected.dtype
        assert torch.allclose(got, expected, atol=1e-6, rtol=0), (family, stages, (got - expected).abs().max())


@pytest.mark.parametrize("family", ["bert", "llama"])
@pytest.mark.parametrize("merge", [True, False])
def test_stages_carry_an_adapter_merged_or_not(family_models, tmp_path, family, merge):
    adapter = str(demo.build_lora_adapter(family_models[family], tmp_path / "adapter", seed=7))
    loaded = _load(family_models[family], adapter, merge=merge)
    base = _load(family_models[family])
    enc = loaded.tokenizer(TEXTS, padding=True, return_tensors="pt", return_token_type_ids=loaded.uses_token_type_ids)
    with torch.inference_mode():
        expected = loaded.model(**enc).logits
        without = base.model(**enc).logits
    got = _run_stages_in_turn(loaded.model, 2, enc)
    assert (expected - without).abs().max() > 0.1  # the adapter matters
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)


def test_activations_keep_the_models_dtype(family_models):
    loaded = _load(family_models["qwen2"], dtype=torch.bfloat16)
    enc = loaded.tokenizer(TEXTS[:2], padding=True, return_tensors="pt")
    first, _ = build_stage(loaded.model, 0, 2)
    with torch.inference_mode():
        hidden, mask, last = first(enc["input_ids"], enc["attention_mask"])
    assert hidden.dtype == torch.bfloat16 and hidden.is_contiguous()
    assert [s for s, _ in first.sent(2, enc["input_ids"].shape[1], torch.bfloat16)] == [
        tuple(hidden.shape),
        tuple(mask.shape),
        tuple(last.shape),
    ]
    # the last non-pad token of each row, as transformers finds it (right padding)
    assert last.tolist() == (enc["attention_mask"].sum(1) - 1).tolist()


def test_a_stage_keeps_only_its_own_layers(family_models):
    loaded = _load(family_models["minilm"])
    layers = [weakref.ref(layer) for layer in loaded.model.bert.encoder.layer]
    module, bounds = build_stage(loaded.model, 1, 3)
    loaded.model = None
    gc.collect()
    alive = [i for i, ref in enumerate(layers) if ref() is not None]
    assert bounds == [(0, 2), (2, 4), (4, 6)]
    assert alive == [2, 3]
    assert module.embeddings is None and module.head is None


def test_other_architectures_are_refused_with_the_supported_list():
    from transformers import GPT2Config, GPT2ForSequenceClassification

    model = GPT2ForSequenceClassification(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=32))
    with pytest.raises(ModelError) as err:
        build_stage(model, 0, 2)
    message = str(err.value)
    assert "gpt2" in message and all(name in message for name in ("BERT", "RoBERTa", "DistilBERT", "Llama", "Qwen2", "Mistral"))


def test_balanced_boundaries():
    assert balanced_boundaries([1] * 6, 3) == [0, 2, 4, 6]
    assert balanced_boundaries([1, 1, 1, 1, 4], 2) == [0, 4, 5]
    assert balanced_boundaries([5, 1, 1, 1], 2) == [0, 1, 4]
    assert balanced_boundaries([1, 1, 1], 2) == [0, 1, 3]  # ties: the earliest cut
    with pytest.raises(ModelError, match="at least one layer"):
        balanced_boundaries([1, 1], 3)


def test_layouts():
    hybrid = [plan_layout(4, rank, 2) for rank in range(4)]
    assert [(x.pipelines, x.pipeline, x.stage, x.ranks) for x in hybrid] == [
        (2, 0, 0, [0, 1]),
        (2, 0, 1, [0, 1]),
        (2, 1, 0, [2, 3]),
        (2, 1, 1, [2, 3]),
    ]
    whole = plan_layout(3, 2, None)
    assert (whole.pipelines, whole.stage, whole.is_last, whole.ranks) == (1, 2, True, [0, 1, 2])
    with pytest.raises(InputError, match="multiple of pipeline_stages"):
        plan_layout(3, 0, 2)
    with pytest.raises(InputError, match="needs at least 4 processes"):
        plan_layout(2, 0, 4)
    assert bubble_theoretical(2, 4) == pytest.approx(1 / 5)


def test_range_header_round_trip():
    work = RangeWork(
        IndexRange(3, 30, 37),
        truncated=1,
        useful_tokens=50,
        padded_tokens=60,
        shapes=[(4, 9), (3, 5)],
        positions=[np.array([6, 0, 2, 1]), np.array([5, 3, 4])],
        lengths=RowLengths(
            tokens=np.array([3, 9, 4, 12, 5, 6, 7]), unknown=np.array([0, 1, 0, 0, 2, 0, 0]), chunks=np.array([1, 1, 1, 1, 1, 1, 1]),
            counts=LongTextCounts(mode="chunk", max_length=9, window=7, rows_over_length=1, tokens_content=32, tokens_scored=30,
                                  tokens_dropped=0, chunks=7, rows_capped=0),
            token_ids=np.array([1, 4, 70000]), token_counts=np.array([20, 11, 1]),
        ),
    )  # fmt: skip
    back = RangeWork.from_header(work.header())
    assert back.lengths.token_ids.tolist() == [1, 4, 70000] and back.lengths.token_counts.tolist() == [20, 11, 1]
    assert (back.range, back.truncated, back.useful_tokens, back.padded_tokens, back.shapes) == (work.range, 1, 50, 60, [(4, 9), (3, 5)])
    assert [p.tolist() for p in back.positions] == [[6, 0, 2, 1], [5, 3, 4]]
    assert back.lengths.tokens.tolist() == [3, 9, 4, 12, 5, 6, 7] and back.lengths.unknown.tolist() == [0, 1, 0, 0, 2, 0, 0]
    assert back.lengths.chunks.tolist() == [1] * 7 and back.lengths.counts == work.lengths.counts


def test_the_timed_stage_is_still_a_module_that_moves_and_times():
    # It once kept its device kind in `self.cuda`, shadowing nn.Module.cuda(): the stage could not be moved to a GPU.
    timed = TimedStage(torch.nn.Linear(2, 2), CPU)
    assert callable(timed.cuda) and not timed.on_cuda
    timed(torch.zeros(1, 2))
    assert timed.busy > 0


# -- real runs ----------------------------------------------------------------------------------


def replica_reference(model_dir, texts, *, rows_per_range, tokens_per_batch, max_batch_rows=1024, adapter=None, merge=True):
    """What replica mode computes: the same ranges, batches and scoring function, in process."""
    loaded = _load(model_dir, adapter, merge)
    out = []
    for r in cut_ranges(len(texts), rows_per_range):
        encoded = encode(loaded.tokenizer, texts[r.start : r.end], None, loaded.max_length, loaded.uses_token_type_ids)
        batches = [collate(encoded, p, loaded.pad_token_id) for p in cut_batches(encoded.lengths, tokens_per_batch, max_batch_rows)]
        out.append(score_batches(loaded.model, batches, r.rows, len(loaded.labels), CPU))
    return np.concatenate(out)


def _run(tmp_path, model_dir, rows, processes, **params):
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    # oversubscribe: up to 4 stages on a 2-core machine
    return run_flow(
        processes, input_uri=str(data), model_uri=model_dir, output_uri=str(tmp_path / "runs"),
        run_name="pp", mode="pipeline", id_column="review_id", oversubscribe=True, **params,
    )  # fmt: skip


def _check(result, rows, references: dict[str, np.ndarray]) -> dict[str, float]:
    table = result.predictions
    assert table.column("row_index").to_pylist() == list(range(len(rows)))  # exactly one per row
    assert table.column("id").to_pylist() == [r["review_id"] for r in rows]
    got = probabilities(table)
    diffs = {name: float(np.abs(got - ref).max()) for name, ref in references.items()}
    print("max abs difference:", diffs)  # shown with -s
    assert all(d <= TOLERANCE for d in diffs.values()), diffs
    return diffs


def _events(result, pipelines: int, stages: int, microbatches: int) -> list[dict]:
    events = sorted(result.scoring["pipeline"], key=lambda e: e["pipeline"])
    assert [e["pipeline"] for e in events] == list(range(pipelines))
    for e in events:
        assert len(e["stages"]) == stages and e["stages"][0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(e["stages"], e["stages"][1:]))
        assert e["microbatches"] == microbatches
        assert e["bubble_theoretical"] == pytest.approx(bubble_theoretical(stages, microbatches), abs=1e-6)
        assert e["steps"] == 0 or 0.0 <= e["bubble_measured"] < 1.0
    return events


@pytest.mark.integration
def test_three_stage_encoder(tmp_path, family_models):
    """MiniLM-like, 3 stages on 3 processes; 7 rows in ranges of 3, 3 and 1, cut into batches of
    3, 2, 1 and 1 rows: in 2 micro-batches, the 3-row batch gets a dummy row, 1-row batches run
    as one micro-batch."""
    rows = make_rows(7, seed=11)
    texts = [r["text"] for r in rows]
    params = dict(rows_per_range=3, tokens_per_batch=180, microbatches=2)
    result = _run(tmp_path, family_models["minilm"], rows, 3, **params)
    _check(result, rows, {
        "single row": reference_probabilities(family_models["minilm"], texts),
        "replica": replica_reference(family_models["minilm"], texts, rows_per_range=3, tokens_per_batch=180),
    })  # fmt: skip
    (event,) = _events(result, pipelines=1, stages=3, microbatches=2)
    assert event["stages"] == [[0, 2], [2, 4], [4, 6]]
    assert (event["steps"], event["dummy_rows"], event["short_steps"]) == (4, 1, 2)


@pytest.mark.integration
def test_two_stage_decoder_with_an_unmerged_adapter(tmp_path, models, llama_adapter):
    """Llama-like with a LoRA adapter left unmerged, 2 stages; ranges of 5 and 2 rows with
    4 micro-batches: 5 rows run as 4 x 2 with 3 dummy rows, 2 rows as 2 x 1."""
    rows = make_rows(7, seed=12)
    texts = [r["text"] for r in rows]
    params = dict(rows_per_range=5, tokens_per_batch=4096, microbatches=4, adapter_uri=llama_adapter, merge_adapter=False)
    result = _run(tmp_path, models["llama"], rows, 2, **params)
    _check(result, rows, {
        "single row": reference_probabilities(models["llama"], texts, adapter_dir=llama_adapter, merge=False),
        "replica": replica_reference(models["llama"], texts, rows_per_range=5, tokens_per_batch=4096, adapter=llama_adapter, merge=False),
    })  # fmt: skip
    (event,) = _events(result, pipelines=1, stages=2, microbatches=4)
    assert (event["steps"], event["dummy_rows"], event["short_steps"]) == (2, 3, 1)


@pytest.mark.integration
def test_hybrid_two_pipelines_of_two_stages(tmp_path, models):
    """4 processes = 2 pipelines x 2 stages claiming ranges on their own; merged adapter; a 1-row range."""
    rows = make_rows(9, seed=13)
    texts = [r["text"] for r in rows]
    params = dict(rows_per_range=2, tokens_per_batch=4096, microbatches=2, pipeline_stages=2, adapter_uri=models["bert_adapter"])
    result = _run(tmp_path, models["bert"], rows, 4, **params)
    _check(result, rows, {
        "single row": reference_probabilities(models["bert"], texts, adapter_dir=models["bert_adapter"]),
        "replica": replica_reference(models["bert"], texts, rows_per_range=2, tokens_per_batch=4096, adapter=models["bert_adapter"]),
    })  # fmt: skip
    events = _events(result, pipelines=2, stages=2, microbatches=2)
    assert sum(e["steps"] for e in events) == 5  # one batch per range, each range once
    assert [e["ranks"] for e in events] == [[0, 1], [2, 3]]


@pytest.mark.integration
def test_one_row_in_one_process(tmp_path, models):
    """The degenerate pipeline: one stage, no process group, a single row."""
    rows = make_rows(1, seed=14)
    result = _run(tmp_path, models["bert"], rows, 1, microbatches=4)
    _check(result, rows, {"single row": reference_probabilities(models["bert"], [rows[0]["text"]])})
    (event,) = _events(result, pipelines=1, stages=1, microbatches=4)
    assert (event["steps"], event["dummy_rows"], event["short_steps"]) == (1, 0, 1)

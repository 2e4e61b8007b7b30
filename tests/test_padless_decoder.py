"""A decoder whose config has no pad_token_id (Llama, GPT-2 and Qwen2 checkpoints as published):
its predictions are what plain transformers gives for each row scored alone, unpadded (SPEC 9 and
14: the head reads the row's last position when the model has no pad token).

The job pads such a model's batches with eos and names it the pad (transformers refuses batches
of more than one row otherwise), so transformers' own rule in a batch reads the rightmost token
that is not eos: a row whose text ends with the eos string was pooled one token early. Rows here:
one ending in eos, one holding it inside, one that is nothing but it, and ordinary ones; batches
of two rows on the replica runner's batch threads, and pipeline stages in turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scorekeeper.run_folder import IndexRange  # noqa: E402
from scorekeeper.worker.model import load_model  # noqa: E402
from tests import models as demo  # noqa: E402
from tests.test_long_text import expected_windows  # noqa: E402

CPU = torch.device("cpu")
TOLERANCE = 1e-5
EOS = "</s>"
TEXTS = [
    f"great movie {EOS}",
    "a fine film indeed",
    f"a fine film {EOS} indeed",
    EOS,
    f"the plot was thin but the acting was excellent and I would watch it again {EOS}",
    "ok",
    f"two at the end {EOS}{EOS}",
]


def _gpt2(folder) -> str:
    """A tiny GPT-2 classifier as GPT2Config leaves it: no pad_token_id; its tokenizer has none either."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2ForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(demo.default_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", model_max_length=64)
    fast.save_pretrained(folder)
    torch.manual_seed(5)
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    config = GPT2Config(
        vocab_size=len(fast), n_positions=64, n_embd=32, n_layer=2, n_head=2, num_labels=3, id2label=labels,
        label2id={v: k for k, v in labels.items()}, initializer_range=0.3,
    )  # fmt: skip
    assert config.pad_token_id is None
    GPT2ForSequenceClassification(config).eval().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def padless(tmp_path_factory):
    """Tiny pad-less decoders, each built when first asked for: llama with each head kind, qwen2,
    gpt2, and a LoRA adapter for the llama."""
    root = tmp_path_factory.mktemp("padless")
    builders = {
        "llama": lambda: demo.build_tiny_classifier(root / "llama", "llama", seed=5),
        "llama multi_label": lambda: demo.build_multi_label_classifier(root / "multi", "llama", seed=6),
        "llama regression": lambda: demo.build_regression_model(root / "regression", "llama", outputs=("score", "quality"), seed=7),
        "qwen2": lambda: demo.build_tiny_classifier(root / "qwen2", "qwen2", seed=8),
        "adapter": lambda: demo.build_lora_adapter(built("llama"), root / "adapter", seed=4),
        "gpt2": lambda: _gpt2(root / "gpt2"),
    }
    done: dict[str, str] = {}

    def built(name: str) -> str:
        if name not in done:
            done[name] = str(builders[name]())
            if name not in ("adapter", "gpt2"):
                assert json.loads((Path(done[name]) / "config.json").read_text()).get("pad_token_id") is None
        return done[name]

    return built


def _load(model_dir: str, adapter: str | None = None, merge: bool = True, max_length: int | None = None):
    return load_model(
        model_dir, adapter, merge_adapter=merge, dtype=torch.float32, device=CPU, trust_remote_code=False, max_length=max_length
    )


def _plain(model_dir: str, adapter: str | None = None):
    """Plain transformers (and PEFT, unmerged), the config as saved: no pad token."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    assert model.config.pad_token_id is None
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).eval()
    return model


def _activate(raw: np.ndarray, problem_type: str | None) -> np.ndarray:
    if problem_type == "multi_label_classification":
        return 1 / (1 + np.exp(-raw))
    if problem_type == "regression":
        return raw
    e = np.exp(raw - raw.max())
    return e / e.sum()


def _alone(model, ids_list: list[list[int]]) -> np.ndarray:
    """Raw logits of each id list scored alone (a batch of one row, no padding)."""
    with torch.no_grad():
        return np.stack([model(input_ids=torch.tensor([ids])).logits[0].double().numpy() for ids in ids_list])


def _rows(texts: list[str]):
    import pyarrow as pa

    return pa.table({"row_index": pa.array(range(len(texts)), pa.int64()), "id": pa.array(range(len(texts))), "text": texts})


def _replica(loaded, texts: list[str]) -> np.ndarray:
    """The replica runner's values for `texts`: batches of at most two rows, on its batch threads."""
    from scorekeeper.worker.replica import prepare_range, scored_ranges

    prepared = prepare_range(IndexRange(0, 0, len(texts)), _rows(texts), loaded, tokens_per_batch=4096, max_batch_rows=2, pin=False)
    assert len(prepared.batches) > 1
    ((_, values),) = scored_ranges([prepared], loaded, CPU)
    return values


def _ends_in_eos(loaded, texts: list[str]) -> list[bool]:
    eos = loaded.tokenizer.eos_token_id
    return [loaded.tokenizer(t)["input_ids"][-1] == eos for t in texts]


# (model, adapter, merge): the plain llama and gpt2 in the fast tier, the other heads, families and
# adapters marked slow (the file took 76 s on 2 shared cores with all of them)
FAST = [("llama", None, True), ("gpt2", None, True)]
SLOW = [
    pytest.param(*case, marks=pytest.mark.slow)
    for case in [
        ("llama multi_label", None, True),
        ("llama regression", None, True),
        ("qwen2", None, True),
        ("llama", "adapter", True),
        ("llama", "adapter", False),
    ]
]
CASES = FAST + SLOW


@pytest.mark.parametrize(("model", "adapter", "merge"), CASES, ids=lambda v: str(v))
def test_replica_predictions_are_the_rows_alone(padless, model, adapter, merge):
    texts = TEXTS if model != "gpt2" else [t.replace(EOS, "<|endoftext|>") for t in TEXTS]
    loaded = _load(padless(model), padless(adapter) if adapter else None, merge=merge)
    assert loaded.model_pad_token_id is None and loaded.pad_token_id == loaded.tokenizer.eos_token_id
    assert max(len(loaded.tokenizer(t)["input_ids"]) for t in texts) <= loaded.max_length  # nothing cut
    ends = _ends_in_eos(loaded, texts)
    assert ends[0] and ends[3] and not ends[1] and not ends[2]  # the rows are what their names say
    plain = _plain(padless(model), padless(adapter) if adapter else None)
    raw = _alone(plain, [loaded.tokenizer(t)["input_ids"] for t in texts])
    want = np.stack([_activate(r, plain.config.problem_type) for r in raw])
    got = _replica(loaded, texts)
    assert np.abs(got - want).max() < TOLERANCE, np.abs(got - want).max(axis=1)


@pytest.mark.slow
def test_chunk_mode_reads_each_windows_last_position(padless):
    """chunk mode: a row's last window ends with the eos of its text; every window is read at its last position."""
    from scorekeeper.worker.windows import WindowSettings

    loaded = _load(padless("llama"), max_length=8)
    assert loaded.frame is not None and loaded.frame.specials == 1  # bos before the content, nothing after
    w = 7
    loaded.windows = WindowSettings(mode="chunk", window=w, overlap=2, max_chunks=8)
    texts = [TEXTS[4], TEXTS[0], TEXTS[2], "short"]
    plain = _plain(padless("llama"))
    bos = loaded.tokenizer.bos_token_id
    want = []
    for t in texts:
        windows, _ = expected_windows(loaded.tokenizer(t, add_special_tokens=False)["input_ids"], "chunk", w, 0, 2, 8)
        want.append(_activate(_alone(plain, [[bos, *x] for x in windows]).mean(0), None))
    got = _replica(loaded, texts)
    assert np.abs(got - np.stack(want)).max() < TOLERANCE


@pytest.mark.parametrize(
    ("model", "adapter", "merge", "stages"),  # gpt2 has no pipeline family
    [("llama", None, True, 2), pytest.param("llama", None, True, 1, marks=pytest.mark.slow)]
    + [pytest.param(*case.values, 2, marks=pytest.mark.slow) for case in SLOW],
    ids=lambda v: str(v),
)
def test_pipeline_predictions_are_the_rows_alone(padless, model, adapter, merge, stages):
    from scorekeeper.worker.batching import Encoded, collate
    from scorekeeper.worker.pipeline import stage_of

    loaded = _load(padless(model), padless(adapter) if adapter else None, merge=merge)
    ids = [loaded.tokenizer(t)["input_ids"] for t in TEXTS]
    encoded = Encoded(ids=ids, type_ids=None, lengths=np.array([len(x) for x in ids]), truncated=0)
    batch = collate(encoded, np.arange(len(ids)), loaded.pad_token_id)
    modules = [stage_of(loaded, s, stages)[0] for s in range(stages)]
    x: tuple = (batch.input_ids, batch.attention_mask)
    with torch.inference_mode():
        for module in modules:
            out = module(*x)
            x = out if isinstance(out, tuple) else (out,)
    plain = _plain(padless(model), padless(adapter) if adapter else None)
    want = _alone(plain, ids)
    assert np.abs(x[0].double().numpy() - want).max() < TOLERANCE


def test_encoders_and_decoders_with_a_pad_token_keep_transformers_own_head(padless, tmp_path):
    """Only a pad-less decoder gets its head read at the last position: the others' code path is untouched."""
    bert = _load(str(demo.build_tiny_classifier(tmp_path / "bert", "bert", seed=3)))
    assert bert.last_position is None
    folder = tmp_path / "padded"
    demo.build_tiny_classifier(folder, "llama", seed=5)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"pad_token_id": 1}))
    assert _load(str(folder)).last_position is None
    assert _load(padless("llama")).last_position is not None


def test_an_empty_text_under_a_tokenizer_that_adds_no_tokens_is_refused_naming_its_rows(padless):
    """GPT-2's tokenizer adds nothing around a text: an empty one is no token at all, a batch row of
    padding alone, masked out. Its scores would come from the padding (transformers itself cannot
    score it), so the range is refused naming its rows, never scored."""
    from scorekeeper.errors import InputError
    from scorekeeper.worker.replica import prepare_range

    loaded = _load(padless("gpt2"))
    assert loaded.tokenizer("")["input_ids"] == []
    texts = ["ok", "", "a fine film", ""]
    with pytest.raises(InputError, match=r"^row_index 1, 3: no token for the model to read \(an empty text, and this tokenizer adds no"):
        prepare_range(IndexRange(0, 0, len(texts)), _rows(texts), loaded, tokens_per_batch=4096, max_batch_rows=2, pin=False)
    many = [""] * 7
    with pytest.raises(InputError, match=r"^row_index 0, 1, 2, 3, 4 \(and 2 more in its range\): no token"):
        prepare_range(IndexRange(0, 0, len(many)), _rows(many), loaded, tokens_per_batch=4096, max_batch_rows=2, pin=False)
    # a tokenizer that adds a token (the llama's bos) gives an empty text that token: scored as any row
    llama = _load(padless("llama"))
    assert len(llama.tokenizer("")["input_ids"]) == 1
    prepared = prepare_range(IndexRange(0, 0, len(texts)), _rows(texts), llama, tokens_per_batch=4096, max_batch_rows=2, pin=False)
    assert list(prepared.rows_lengths.tokens) == [len(llama.tokenizer(t)["input_ids"]) for t in texts]

"""The family registry: every registered family, as a tiny model, splits into pipeline stages that
give the whole model's logits, and its first-token last layer (where it declares one) gives the
whole last layer's. Adding a family to `scorekeeper/worker/families/` adds it here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoConfig, AutoModelForSequenceClassification  # noqa: E402

from scorekeeper.errors import ModelError  # noqa: E402
from scorekeeper.worker.families import FAMILIES, TinyTokens, family_for, find_family, supported, tiny_models  # noqa: E402
from scorekeeper.worker.first_token import first_token_last_layer  # noqa: E402
from scorekeeper.worker.model import model_max_length  # noqa: E402
from scorekeeper.worker.stages import build_stage  # noqa: E402
from tests import models as demo  # noqa: E402

VOCAB = 64
# Encoders: [PAD]=0, [CLS]=2, [SEP]=3 as the demo's WordPiece tokenizer; decoders: <s>=0, </s>=1, no pad.
ENCODER_TOKENS = TinyTokens(VOCAB, pad=0, bos=2, eos=3)
DECODER_TOKENS = TinyTokens(VOCAB, pad=None, bos=0, eos=1)
LENGTHS = (11, 6, 1, 9)  # real tokens per row, right-padded to the longest


def _cases():
    """(family, model_type, tiny): every model_type of every family, built from the family's tiny configs."""
    for family in FAMILIES:
        for tiny in family.tiny:
            yield pytest.param(family, family.model_types[0], tiny, id=tiny.name)
        for model_type in family.model_types[1:]:
            yield pytest.param(family, model_type, family.tiny[0], id=model_type)


def _build(family, model_type, tiny, seed=0, **overrides):
    tokens = ENCODER_TOKENS if family.kind == "encoder" else DECODER_TOKENS
    values = tiny.config(tokens, num_layers=3, dropout=0.0)
    values.pop("model_type")
    values.update(num_labels=3, initializer_range=0.3, **overrides)
    config = AutoConfig.for_model(model_type, **values)
    if config.pad_token_id is None:
        config.pad_token_id = tokens.eos  # what the loader does for decoders without a pad token
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    assert model.config.model_type == model_type and find_family(model_type) is family
    return model, tokens


def _batch(model, tokens, tiny, lengths=LENGTHS):
    """Random ids, [CLS]/<s> first, right-padded with the model's pad id."""
    gen = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.full((len(lengths), width), model.config.pad_token_id, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, VOCAB, (n,), generator=gen)
        ids[row, 0] = tokens.bos
        mask[row, :n] = 1
    enc = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in tiny.input_names:
        enc["token_type_ids"] = torch.zeros_like(ids)
    return enc


def _stages_in_turn(model, stages, enc):
    x = tuple(enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc)
    with torch.inference_mode():
        for stage in range(stages):
            module, _ = build_stage(model, stage, stages)
            x = module(*x)
            x = x if isinstance(x, tuple) else (x,)
    return x[0]


@pytest.mark.parametrize(("family", "model_type", "tiny"), list(_cases()))
def test_every_family_splits_and_keeps_its_logits(family, model_type, tiny):
    model, tokens = _build(family, model_type, tiny)
    enc = _batch(model, tokens, tiny)
    with torch.inference_mode():
        whole = model(**enc).logits
    assert (whole.softmax(-1) - 1 / 3).abs().max() > 0.01  # not a degenerate model
    split = _stages_in_turn(model, 2, enc)
    assert torch.allclose(split, whole, atol=1e-6, rtol=0), (model_type, (split - whole).abs().max())

    swapped = first_token_last_layer(model)
    assert swapped == (family.first_token is not None)
    if swapped:
        with torch.inference_mode():
            first = model(**enc).logits
        assert (first - whole).abs().max() < 1e-5


@pytest.mark.parametrize(("family", "model_type", "tiny"), list(_cases()))
def test_every_familys_max_length_fits_its_positions(family, model_type, tiny):
    model, tokens = _build(family, model_type, tiny)

    class NoLimit:
        model_max_length = 10**30  # what tokenizers report without a limit

    longest = model_max_length(NoLimit(), model.config, None)
    assert longest == model.config.max_position_embeddings - family.position_offset(model.config)
    with torch.inference_mode():
        assert model(**_batch(model, tokens, tiny, (longest, 3))).logits.shape == (2, 3)


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [
        ("mistral", dict(sliding_window=3)),  # every layer slides
        ("qwen2", dict(use_sliding_window=True, sliding_window=3, max_window_layers=1)),  # full, then sliding layers
    ],
)
def test_sliding_window_decoders_split_exactly(model_type, overrides):
    family = family_for(model_type)
    model, tokens = _build(family, model_type, family.tiny[0], **overrides)
    full, _ = _build(family, model_type, family.tiny[0])  # the same weights, attending to every position
    enc = _batch(model, tokens, family.tiny[0])
    with torch.inference_mode():
        whole = model(**enc).logits
        assert (whole - full(**enc).logits).abs().max() > 1e-3  # the window matters on these rows
    for stages in (2, 3):
        assert torch.allclose(_stages_in_turn(model, stages, enc), whole, atol=1e-6, rtol=0), stages


def test_the_registry():
    assert len({t for f in FAMILIES for t in f.model_types}) == sum(len(f.model_types) for f in FAMILIES)
    assert all(f.tiny and f.lora_targets and f.kind in ("encoder", "decoder") for f in FAMILIES)
    assert set(demo.FAMILIES) == set(tiny_models())
    assert find_family("gpt2") is None and find_family(None) is None
    with pytest.raises(ModelError) as err:
        family_for("gpt2")
    message = str(err.value)
    assert "'gpt2'" in message and message.endswith(supported())
    assert all(f.name in message and all(t in message for t in f.model_types) for f in FAMILIES)

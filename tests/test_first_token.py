"""The last layer for position 0 only: the same logits as the whole layer, where it is applied."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scorekeeper.worker.batching import collate, cut_batches, encode
from scorekeeper.worker.families.encoder_parts import FirstTokenDistilBertLayer, FirstTokenLayer
from scorekeeper.worker.first_token import first_token_last_layer
from scorekeeper.worker.model import load_model
from tests.helpers import make_rows
from tests.models import build_tiny_classifier

CPU = torch.device("cpu")
TEXTS = [r["text"] for r in make_rows(25, seed=7, max_words=40)] + ["", "x"]


def _logits(loaded, texts):
    encoded = encode(loaded.tokenizer, texts, None, loaded.max_length, loaded.uses_token_type_ids)
    batches = [collate(encoded, p, loaded.pad_token_id) for p in cut_batches(encoded.lengths, 200, 64)]
    order = np.argsort(np.concatenate([b.positions for b in batches]))
    with torch.inference_mode():
        return torch.cat([loaded.model(**b.model_inputs()).logits for b in batches])[torch.from_numpy(order)]


def _load(path, adapter=None, merge=False):
    return load_model(path, adapter, merge_adapter=merge, dtype=torch.float32, device=CPU, trust_remote_code=False, max_length=None)


@pytest.mark.parametrize("family", ["bert", "roberta", "minilm", "distilbert"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_first_token_layer_gives_the_whole_layers_logits(tmp_path, family, attention):
    path = str(build_tiny_classifier(tmp_path / family, family, seed=11))
    loaded = _load(path)
    loaded.model.config._attn_implementation = attention
    whole = _logits(loaded, TEXTS)
    assert first_token_last_layer(loaded.model)
    base = getattr(loaded.model, {"roberta": "roberta", "distilbert": "distilbert"}.get(family, "bert"))
    layers = (base.transformer if family == "distilbert" else base.encoder).layer
    assert isinstance(layers[-1], FirstTokenDistilBertLayer if family == "distilbert" else FirstTokenLayer)
    assert not first_token_last_layer(loaded.model)  # once only
    assert (whole - _logits(loaded, TEXTS)).abs().max() < 1e-5


def test_first_token_layer_under_an_unmerged_adapter(models):
    loaded = _load(models["bert"], models["bert_adapter"], merge=False)
    whole = _logits(loaded, TEXTS)
    assert first_token_last_layer(loaded.model)
    assert (whole - _logits(loaded, TEXTS)).abs().max() < 1e-5


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_other_heads_keep_their_whole_last_layer(tmp_path, family):
    loaded = _load(str(build_tiny_classifier(tmp_path / family, family, seed=12)))
    assert not first_token_last_layer(loaded.model)

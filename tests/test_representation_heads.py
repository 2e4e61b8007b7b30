"""SPEC 14's representation of architectures the family registry does not know, read where
transformers' own head reads them (scorekeeper/worker/embeddings.py, `head_pooling`): BART's and
T5's heads read the decoder's output at the row's last eos, not at position 0; a head that reads no
one position (ModernBERT's mean pooling, XLNet's summary of the padded batch's last position) is
refused rather than sampled at a guessed one; CTRL's and ModernBERT-decoder's head, named
`classifier`, reads the last non-pad position as `score` does. In replica mode, in one process: no
subprocess."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models import DEFAULT_LABELS, build_tokenizer, default_corpus

ID2LABEL = dict(enumerate(DEFAULT_LABELS))


def _tiny(model_type: str, **values):
    """A tiny randomly initialised classifier of `model_type` (no tokenizer: for what its head reads)."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.for_model(model_type, id2label=ID2LABEL, label2id={n: i for i, n in ID2LABEL.items()}, **values)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config).eval()


SMALL = dict(vocab_size=64, pad_token_id=0, bos_token_id=2, eos_token_id=3)
ARCHITECTURES = {
    "bert": (dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32), "first"),
    "electra": (dict(embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32), "first"),
    "gpt2": (dict(n_embd=16, n_layer=1, n_head=2), "last"),
    "ctrl": (dict(n_embd=16, n_layer=1, n_head=2, dff=32), "last"),  # its per-position head is `classifier`
    "modernbert-decoder": (dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32), "last"),
    "bart": (
        dict(
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
        ),
        "eos",
    ),
    "t5": (dict(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2), "eos"),
    "modernbert": (dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, classifier_pooling="mean"), None),
    "xlnet": (dict(d_model=16, n_layer=1, n_head=2, d_inner=32), None),
}


@pytest.mark.parametrize("model_type", list(ARCHITECTURES))
def test_the_pooled_position_is_what_the_head_reads(model_type):
    from scorekeeper.errors import ModelError
    from scorekeeper.worker.embeddings import Representation, head_pooling
    from scorekeeper.worker.last_position import LastPositionLogits

    values, want = ARCHITECTURES[model_type]
    model = _tiny(model_type, **SMALL, **values)
    if want is not None:
        assert head_pooling(model) == want
        Representation(model, 1, 1, 0).remove()
        if want == "last":  # a model without a pad id of its own has its logits read there too
            LastPositionLogits(model).remove()
        return
    with pytest.raises(ModelError, match="no representation to sample .* run it with embedding_rows 0") as refused:
        Representation(model, 1, 1, 0)
    assert ("classifier_pooling" if model_type == "modernbert" else "summary_type") in str(refused.value)


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    """A BART classifier over a WordPiece tokenizer whose [SEP] (appended to every text) is its eos,
    [PAD] its pad: the head reads the decoder's output at [SEP]."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    folder = tmp_path_factory.mktemp("bart")
    tokenizer = build_tokenizer(folder, default_corpus(), "wordpiece", model_input_names=["input_ids", "attention_mask"])
    config = AutoConfig.for_model(
        "bart",
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.sep_token_id,
        forced_eos_token_id=None,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        init_std=0.2,
        id2label=ID2LABEL,
        label2id={n: i for i, n in ID2LABEL.items()},
        problem_type="single_label_classification",
    )
    torch.manual_seed(3)
    AutoModelForSequenceClassification.from_config(config).eval().save_pretrained(str(folder))
    return str(folder)


def _loaded(folder: str):
    """The job's LoadedModel of a tiny model folder, on the CPU in float32."""
    import torch

    from scorekeeper.worker.model import load_model

    return load_model(
        folder, None, merge_adapter=True, dtype=torch.float32, device=torch.device("cpu"), trust_remote_code=False, max_length=64
    )


def _each_row_alone(plain, tokenizer, texts: list[str]):
    """(k, text, its ids, the plain model's output on the row alone, unpadded, with hidden states) per text."""
    import torch

    for k, text in enumerate(texts):
        ids = tokenizer(text)["input_ids"]
        with torch.no_grad():
            yield k, text, ids, plain(input_ids=torch.tensor([ids]), output_hidden_states=True)


TEXTS = ["great", "a fine film indeed, one of the very best this year", "not good", "the plot was thin but the acting was fine"]


def test_a_seq2seq_representation_is_the_decoders_output_at_the_rows_last_eos(tiny_bart):
    import torch
    from transformers import AutoModelForSequenceClassification

    from tests.helpers import score_every_row_sampled

    loaded = _loaded(tiny_bart)
    got, probabilities = score_every_row_sampled(loaded, TEXTS)
    plain = AutoModelForSequenceClassification.from_pretrained(tiny_bart).eval()
    eos = plain.config.eos_token_id
    for k, text, ids, out in _each_row_alone(plain, loaded.tokenizer, TEXTS):
        assert ids[-1] == eos and ids[0] != eos
        want = out.decoder_hidden_states[-1][0, len(ids) - 1].double().numpy()
        assert np.abs(got[k] - want).max() < 1e-4, (k, text)
        assert np.abs(got[k] - out.decoder_hidden_states[-1][0, 0].double().numpy()).max() > 1e-2  # not position 0
        assert np.abs(probabilities[k] - torch.softmax(out.logits[0].double(), -1).numpy()).max() < 1e-5, (k, text)


def test_a_text_holding_the_eos_string_is_read_at_its_own_last_eos_beside_texts_that_do_not(tiny_bart):
    """transformers' sequence-to-sequence heads refuse a batch whose rows hold different numbers of
    eos ("All examples must have the same number of <eos> tokens"), and the row alone is read at its
    last eos: rows are batched by that number, and each is scored and read as alone."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from tests.helpers import score_every_row_sampled

    loaded = _loaded(tiny_bart)
    plain = AutoModelForSequenceClassification.from_pretrained(tiny_bart).eval()
    texts = ["great", "a fine film [SEP] indeed", "not good", "[SEP] [SEP] thin plot", "the acting was fine [SEP]"]
    counts = [loaded.tokenizer(text)["input_ids"].count(plain.config.eos_token_id) for text in texts]
    assert counts == [1, 2, 1, 3, 2]
    got, probabilities = score_every_row_sampled(loaded, texts, batches=3)  # rows with 1, 2 and 3 eos
    for k, text, ids, out in _each_row_alone(plain, loaded.tokenizer, texts):
        assert np.abs(got[k] - out.decoder_hidden_states[-1][0, len(ids) - 1].double().numpy()).max() < 1e-4, (k, text)
        assert np.abs(probabilities[k] - torch.softmax(out.logits[0].double(), -1).numpy()).max() < 1e-5, (k, text)


@pytest.fixture(scope="module")
def tiny_ctrl(tmp_path_factory):
    """A CTRL classifier without a pad id of its own (the job pads it with eos): its head, named
    `classifier`, reads each row's last position."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    folder = tmp_path_factory.mktemp("ctrl")
    tokenizer = build_tokenizer(folder, default_corpus(), "bpe")
    config = AutoConfig.for_model(
        "ctrl",
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        n_embd=32,
        n_layer=2,
        n_head=4,
        dff=64,
        n_positions=128,
        initializer_range=0.2,
        id2label=ID2LABEL,
        label2id={n: i for i, n in ID2LABEL.items()},
        problem_type="single_label_classification",
    )
    torch.manual_seed(5)
    AutoModelForSequenceClassification.from_config(config).eval().save_pretrained(str(folder))
    return str(folder)


# Rows ending with the eos the job pads a pad-less model with, one holding it inside, a longer one.
EOS_TEXTS = ["great movie </s>", "a fine film </s> indeed", "a fine film indeed, one of the very best this year", "</s>"]


def test_a_pad_less_ctrl_is_scored_and_read_at_each_rows_last_position(tiny_ctrl):
    import torch
    from transformers import AutoModelForSequenceClassification

    from tests.helpers import score_every_row_sampled

    loaded = _loaded(tiny_ctrl)
    assert loaded.model_pad_token_id is None and loaded.last_position is not None  # hooked on its `classifier`
    got, probabilities = score_every_row_sampled(loaded, EOS_TEXTS)
    plain = AutoModelForSequenceClassification.from_pretrained(tiny_ctrl).eval()
    for k, text, ids, out in _each_row_alone(plain, loaded.tokenizer, EOS_TEXTS):
        assert np.abs(got[k] - out.hidden_states[-1][0, len(ids) - 1].double().numpy()).max() < 1e-4, (k, text)
        assert np.abs(probabilities[k] - torch.softmax(out.logits[0].double(), -1).numpy()).max() < 1e-5, (k, text)

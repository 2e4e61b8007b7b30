"""Offline builders for tiny models and adapters: what the tests use (not part of the package).

No model hub is reachable where scorekeeper is developed and tested, so everything here is built
locally from configs:

* :func:`build_tokenizer` trains a small WordPiece (BERT-like) or byte-level BPE (Llama-like,
  deliberately without a pad token) tokenizer with the ``tokenizers`` library.
* :func:`build_tiny_classifier` saves a tiny, randomly initialised (seeded) sequence-classification
  model of a given family (bert, roberta, distilbert, minilm, llama, qwen2, mistral) with its
  tokenizer, as safetensors.
* :func:`build_lora_adapter` saves a seeded LoRA adapter (PEFT, task type SEQ_CLS) whose weights
  are all perturbed so that it measurably changes predictions.
* :func:`generate_reviews` returns synthetic sentiment-labelled reviews; :func:`default_corpus`
  is the text the tiny tokenizers are trained on.

The demo that ``./setup.sh`` builds and scores (a real pretrained encoder fine-tuned with LoRA)
lives in :mod:`scorekeeper.demo_model` (``scorekeeper demo``).

Command line::

    python -m tests.models tiny OUT_DIR --family llama        (from the repository root)
    python -m tests.models adapter BASE_DIR OUT_DIR

This module imports no Prefect and no DuckDB; it reads the tiny configs from the family
registry (which imports no torch) and imports torch, transformers, tokenizers and peft inside
the functions.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from scorekeeper.errors import ModelError
from scorekeeper.worker.families import TinyTokens, family_for, tiny_models

__all__ = [
    "DEFAULT_LABELS",
    "ENCODER_FAMILIES",
    "DECODER_FAMILIES",
    "FAMILIES",
    "build_tokenizer",
    "build_tiny_classifier",
    "build_lora_adapter",
    "generate_reviews",
    "default_corpus",
    "main",
]

DEFAULT_LABELS: tuple[str, ...] = ("negative", "neutral", "positive")
# The tiny models the family registry declares (scorekeeper/worker/families/).
_TINY = tiny_models()
ENCODER_FAMILIES: tuple[str, ...] = tuple(name for name, (family, _) in _TINY.items() if family.kind == "encoder")
DECODER_FAMILIES: tuple[str, ...] = tuple(name for name, (family, _) in _TINY.items() if family.kind == "decoder")
FAMILIES: tuple[str, ...] = ENCODER_FAMILIES + DECODER_FAMILIES

# Special tokens of the two tokenizer kinds.
WORDPIECE_SPECIALS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
BPE_BOS = "<s>"
BPE_EOS = "</s>"
# Qwen2's pre-tokenization regex (Llama 3's differs only in grouping up to three digits).
_BPE_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

DEMO_LABEL_NOISE = 0.07  # generate_reviews' default share of flipped labels


# --------------------------------------------------------------------------------------------
# Synthetic reviews
# --------------------------------------------------------------------------------------------

_CATEGORIES: dict[str, dict[str, list[str]]] = {
    "books": {
        "items": [
            "book",
            "novel",
            "story",
            "plot",
            "ending",
            "author's writing",
            "translation",
            "paperback",
            "cookbook",
            "biography",
            "audiobook",
            "sequel",
        ],
        "facts": [
            "I read it over a weekend.",
            "It is about four hundred pages long.",
            "I bought it for my book club.",
            "It arrived a day early.",
            "This is the second edition.",
            "I got the hardcover version.",
            "My sister recommended it to me.",
            "I finished it on a long flight.",
        ],
    },
    "electronics": {
        "items": [
            "headphones",
            "charger",
            "battery",
            "screen",
            "keyboard",
            "speaker",
            "laptop",
            "camera",
            "remote",
            "router",
            "mouse",
            "smart watch",
        ],
        "facts": [
            "I have used it for two weeks.",
            "It came with a usb cable.",
            "I use it mostly at the office.",
            "Setup took about ten minutes.",
            "It replaced my old one.",
            "The box included a manual.",
            "I bought the black model.",
            "It connects over bluetooth.",
        ],
    },
    "kitchen": {
        "items": [
            "blender",
            "frying pan",
            "knife set",
            "kettle",
            "toaster",
            "coffee maker",
            "cutting board",
            "mixer",
            "rice cooker",
            "pot",
            "grater",
            "spatula",
        ],
        "facts": [
            "I cook with it almost every day.",
            "It fits on my counter.",
            "I bought it as a gift.",
            "It is dishwasher safe.",
            "I use it for breakfast mostly.",
            "It came in a plain box.",
            "My old one lasted ten years.",
            "It is the larger size.",
        ],
    },
}

_ADJ = {
    "positive": [
        "excellent",
        "great",
        "fantastic",
        "wonderful",
        "superb",
        "reliable",
        "brilliant",
        "delightful",
        "sturdy",
        "impressive",
        "perfect",
        "lovely",
    ],
    "neutral": [
        "okay",
        "average",
        "fine",
        "acceptable",
        "ordinary",
        "adequate",
        "mediocre",
        "standard",
        "passable",
        "so so",
        "unremarkable",
        "decent enough",
    ],
    "negative": [
        "terrible",
        "awful",
        "useless",
        "flimsy",
        "disappointing",
        "horrible",
        "broken",
        "poor",
        "cheap",
        "defective",
        "dreadful",
        "unreliable",
    ],
}

_TEMPLATES = {
    "positive": [
        "The {item} is {adj}.",
        "Really {adj} {item}, I love it.",
        "What a {adj} {item}! Highly recommend.",
        "I am very happy with this {item}, it is {adj}.",
        "Five stars, the {item} is {adj} and worth every penny.",
        "Absolutely {adj}. The {item} exceeded my expectations.",
        "Best {item} I have owned, simply {adj}.",
        "I would buy this {item} again, {adj} quality.",
    ],
    "neutral": [
        "The {item} is {adj}.",
        "It is an {adj} {item}, nothing special.",
        "The {item} does the job, {adj} overall.",
        "Three stars. The {item} is {adj}, not great and not bad.",
        "An {adj} {item} for the price, it works as expected.",
        "The {item} is {adj}, I have no strong feelings about it.",
        "Neither good nor bad, the {item} is {adj}.",
        "It is fine I guess, an {adj} {item}.",
    ],
    "negative": [
        "The {item} is {adj}.",
        "Really {adj} {item}, I regret buying it.",
        "What a {adj} {item}. Do not buy.",
        "I am very unhappy with this {item}, it is {adj}.",
        "One star, the {item} is {adj} and a waste of money.",
        "Completely {adj}. The {item} stopped working after a week.",
        "Worst {item} I have owned, simply {adj}.",
        "I returned the {item}, {adj} quality.",
    ],
}

_CONTRAST = {
    "positive": "The {item} is {adj} though.",
    "neutral": "That said, the {item} is {adj}.",
    "negative": "But the {item} is {adj}.",
}


def _review(rng: random.Random, label: str, category: str) -> str:
    cat = _CATEGORIES[category]
    item = rng.choice(cat["items"])
    text = rng.choice(_TEMPLATES[label]).format(item=item, adj=rng.choice(_ADJ[label]))
    text = text[0].upper() + text[1:]
    parts = [text]
    if rng.random() < 0.5:
        parts.insert(0 if rng.random() < 0.5 else 1, rng.choice(cat["facts"]))
    if rng.random() < 0.25:
        # A weaker clause with another sentiment: makes the task harder but still learnable,
        # the main clause carries the label.
        other = rng.choice([x for x in _ADJ if x != label])
        clause = _CONTRAST[other].format(item=rng.choice(cat["items"]), adj=rng.choice(_ADJ[other]))
        parts.append(clause[0].upper() + clause[1:])
    return " ".join(parts)


def generate_reviews(n: int, *, seed: int = 0, noise: float = DEMO_LABEL_NOISE, id_prefix: str = "r") -> list[dict[str, str]]:
    """Deterministic synthetic product reviews.

    Returns ``n`` dicts with ``review_id`` (``r00001``...), ``text``, ``label`` (label name) and
    ``category``. A fraction ``noise`` of the labels is replaced by a random *other* label, so the
    best achievable accuracy is about ``1 - noise``.
    """
    rng = random.Random(seed)
    labels = list(DEFAULT_LABELS)
    weights = [0.35, 0.25, 0.40]
    categories = list(_CATEGORIES)
    rows = []
    for i in range(n):
        label = rng.choices(labels, weights)[0]
        category = rng.choice(categories)
        text = _review(rng, label, category)
        if rng.random() < noise:
            label = rng.choice([x for x in labels if x != label])
        rows.append({"review_id": f"{id_prefix}{i + 1:05d}", "text": text, "label": label, "category": category})
    return rows


def default_corpus(n: int = 400, seed: int = 1234) -> list[str]:
    """A few hundred generated sentences, used to train tokenizers when no texts are given."""
    return [row["text"] for row in generate_reviews(n, seed=seed, noise=0.0)]


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def build_tokenizer(
    out_dir,
    texts: Iterable[str],
    kind: str = "wordpiece",
    *,
    vocab_size: int = 800,
    model_max_length: int = 128,
    model_input_names: Sequence[str] | None = None,
):
    """Train a small tokenizer on ``texts`` and save it with ``save_pretrained(out_dir)``.

    ``kind="wordpiece"``: BERT-like. Specials ``[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4``,
    lowercasing normalizer, ``[CLS] a [SEP]`` / ``[CLS] a [SEP] b [SEP]`` with token type ids.

    ``kind="bpe"``: byte-level BPE, decoder-like. Specials ``<s>`` (bos, id 0) and ``</s>`` (eos,
    id 1); the post-processor prepends bos (pairs: ``<s> a <s> b``, Llama-3 style); no eos is
    appended; there is deliberately NO pad token (like Llama), callers must choose one.
    Model input names are ``input_ids, attention_mask`` (decoders take no token type ids).

    Returns the ``transformers`` fast tokenizer.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind not in ("wordpiece", "bpe"):
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected 'wordpiece' or 'bpe'")
    texts = list(texts)
    if not texts:
        raise ValueError("build_tokenizer needs at least one training text")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    if kind == "wordpiece":
        specials = list(WORDPIECE_SPECIALS.values())
        normalizer = normalizers.BertNormalizer(lowercase=True, clean_text=True, handle_chinese_chars=True, strip_accents=None)
        # tokenizers' WordPieceTrainer is NOT reproducible across processes: it numbers the
        # "##x" continuation pieces in hash-map order, which changes merge tie-breaks, so the
        # vocabulary (and every token id) differs from run to run. Plain BPE training over a
        # sorted alphabet is reproducible: learn the pieces with it, then give each piece a
        # word-initial and a "##" continuation entry in a WordPiece vocabulary.
        # The alphabet is seeded with printable ASCII so digits and punctuation missing from a
        # small corpus still split into known pieces instead of becoming [UNK].
        learner = Tokenizer(models.BPE(unk_token="[UNK]"))
        learner.normalizer = normalizer
        learner.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.BpeTrainer(
            vocab_size=max(len(specials) + 100, (vocab_size + len(specials)) // 2),
            special_tokens=specials,
            min_frequency=1,
            show_progress=False,
            initial_alphabet=list(string.ascii_lowercase + string.digits + string.punctuation),
        )
        learner.train_from_iterator(texts, trainer=trainer)
        pieces = [p for p, _ in sorted(learner.get_vocab().items(), key=lambda kv: kv[1]) if p not in specials]
        vocab = {token: i for i, token in enumerate(specials)}
        for piece in pieces:
            vocab.setdefault(piece, len(vocab))
        for piece in pieces:
            vocab.setdefault("##" + piece, len(vocab))
        tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100))
        tok.normalizer = normalizer
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
        tok.decoder = decoders.WordPiece(prefix="##")
        names = list(model_input_names or ["input_ids", "token_type_ids", "attention_mask"])
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            model_max_length=model_max_length,
            padding_side="right",
            truncation_side="right",
            model_input_names=names,
            **WORDPIECE_SPECIALS,
        )
    else:  # bpe
        specials = [BPE_BOS, BPE_EOS]
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        # Split on the Qwen2 / Llama-3 style regex, then map bytes: the same pipeline that
        # transformers' Qwen2Tokenizer rebuilds from vocab + merges when it loads a qwen2 folder
        # (it ignores the normalizer and pre-tokenizer of tokenizer.json), so every decoder
        # family tokenizes identically before and after a save/load round trip.
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_BPE_SPLIT_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            min_frequency=1,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator(texts, trainer=trainer)
        bos_id = tok.token_to_id(BPE_BOS)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{BPE_BOS}:0 $A:0",
            pair=f"{BPE_BOS}:0 $A:0 {BPE_BOS}:1 $B:1",
            special_tokens=[(BPE_BOS, bos_id)],
        )
        tok.decoder = decoders.ByteLevel()
        names = list(model_input_names or ["input_ids", "attention_mask"])
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token=BPE_BOS,
            eos_token=BPE_EOS,
            model_max_length=model_max_length,
            padding_side="right",
            truncation_side="right",
            model_input_names=names,
            # transformers rebuilds the post-processor from these two flags (and would replace
            # the template above with "bos $A" anyway); say so explicitly so a reload agrees.
            add_bos_token=True,
            add_eos_token=False,
        )

    fast.save_pretrained(str(out_dir))
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    # transformers 5 writes "TokenizersBackend", a class transformers 4.x lacks; hub checkpoints
    # say "PreTrainedTokenizerFast", which both major versions load from tokenizer.json.
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    if kind == "bpe":
        # Model-specific tokenizer classes (AutoTokenizer picks Qwen2Tokenizer for any qwen2
        # folder, whatever tokenizer_class says) default pad/unk to "<|endoftext|>" and would add
        # it as a new token past the model's vocabulary. Explicit nulls keep "no pad token".
        for key in ("pad_token", "unk_token"):
            cfg.setdefault(key, None)
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return fast


# --------------------------------------------------------------------------------------------
# Tiny classifiers
# --------------------------------------------------------------------------------------------


def _config_for(
    family: str,
    tokenizer,
    *,
    labels: Sequence[str],
    num_layers: int | None,
    hidden_size: int | None,
    max_position_embeddings: int,
    initializer_range: float,
    dropout: float,
):
    """The config of the tiny model `family`: its sizes from the family registry, its labels and
    special tokens from here and the tokenizer."""
    from transformers import AutoConfig

    if family not in _TINY:
        raise ValueError(f"unknown model family {family!r}; expected one of {', '.join(FAMILIES)}")
    _, tiny = _TINY[family]
    if tiny.tokenizer == "wordpiece":
        tokens = TinyTokens(len(tokenizer), pad=tokenizer.pad_token_id, bos=tokenizer.cls_token_id, eos=tokenizer.sep_token_id)
    else:
        tokens = TinyTokens(len(tokenizer), pad=None, bos=tokenizer.bos_token_id, eos=tokenizer.eos_token_id)
    values = tiny.config(
        tokens, num_layers=num_layers, hidden_size=hidden_size, max_position_embeddings=max_position_embeddings, dropout=dropout
    )
    id2label = {i: str(name) for i, name in enumerate(labels)}
    values.update(
        id2label=id2label,
        label2id={name: i for i, name in id2label.items()},
        initializer_range=initializer_range,
        problem_type="single_label_classification",
    )
    return AutoConfig.for_model(values.pop("model_type"), **values)


def build_tiny_classifier(
    out_dir,
    family: str,
    *,
    labels: Sequence[str] = DEFAULT_LABELS,
    seed: int = 0,
    texts: Iterable[str] | None = None,
    num_layers: int | None = None,
    hidden_size: int | None = None,
    max_position_embeddings: int = 128,
    initializer_range: float = 0.3,
    dropout: float = 0.1,
    vocab_size: int = 800,
) -> Path:
    """Build and save a tiny randomly initialised sequence classifier of ``family``.

    Families: bert, roberta, distilbert, minilm (encoders, WordPiece tokenizer) and llama, qwen2,
    mistral (decoders, byte-level BPE tokenizer without a pad token; ``config.pad_token_id`` is
    left unset as in real Llama checkpoints). Weights are deterministic by ``seed``; the large
    default ``initializer_range`` makes the predictions far from uniform. Saved with
    ``save_pretrained`` (safetensors) together with the tokenizer. Returns ``out_dir``.
    """
    import torch
    from transformers import AutoModelForSequenceClassification

    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of {', '.join(FAMILIES)}")
    labels = [str(x) for x in labels]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ValueError(f"labels must be at least two distinct names, got {labels!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = list(texts) if texts is not None else default_corpus()

    _, tiny = _TINY[family]
    tokenizer = build_tokenizer(
        out_dir,
        texts,
        tiny.tokenizer,
        vocab_size=vocab_size,
        model_max_length=max_position_embeddings,
        model_input_names=list(tiny.input_names),
    )

    config = _config_for(
        family,
        tokenizer,
        labels=labels,
        num_layers=num_layers,
        hidden_size=hidden_size,
        max_position_embeddings=max_position_embeddings,
        initializer_range=initializer_range,
        dropout=dropout,
    )
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    model.eval()
    model.save_pretrained(str(out_dir))
    return out_dir


# --------------------------------------------------------------------------------------------
# LoRA adapters
# --------------------------------------------------------------------------------------------


def build_lora_adapter(base_dir, out_dir, *, seed: int = 0, r: int = 4, noise_std: float = 0.2, head_noise_std: float = 0.1) -> Path:
    """Build and save a seeded LoRA adapter (task type SEQ_CLS) for the model in ``base_dir``.

    Targets the attention query/value projections of the family; the classification head
    (``classifier`` / ``score``) is saved in full as ``modules_to_save`` (PEFT's default for
    SEQ_CLS). PEFT initialises LoRA B to zero (a no-op adapter), so every trainable adapter
    tensor, the head copy included, gets seeded Gaussian noise. Returns ``out_dir``.
    """
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForSequenceClassification

    base_dir, out_dir = Path(base_dir), Path(out_dir)
    model = AutoModelForSequenceClassification.from_pretrained(str(base_dir))
    try:
        targets = list(family_for(model.config.model_type).lora_targets)
    except ModelError as exc:
        raise ValueError(f"no LoRA targets known for model type {model.config.model_type!r}") from exc
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=r, lora_alpha=2 * r, lora_dropout=0.0, target_modules=targets)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        peft_model = get_peft_model(model, lora)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if not param.requires_grad:
                continue
            std = noise_std if "lora_" in name else head_noise_std
            param.add_(torch.randn(param.shape, generator=gen, dtype=torch.float32).to(param.dtype) * std)
    out_dir.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(str(out_dir))
    return out_dir


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.models", description="Build tiny offline models and adapters for the tests.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("tiny", help="build a tiny random classifier of one family")
    p.add_argument("out_dir")
    p.add_argument("--family", choices=FAMILIES, default="bert")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--labels", default=",".join(DEFAULT_LABELS), help="comma-separated label names")
    p.add_argument("--num-layers", type=int, default=None)
    p.add_argument("--hidden-size", type=int, default=None)
    p.add_argument("--max-position-embeddings", type=int, default=128)

    p = sub.add_parser("adapter", help="build a seeded LoRA adapter for a model folder")
    p.add_argument("base_dir")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--r", type=int, default=4)

    args = parser.parse_args(argv)
    if args.command == "tiny":
        labels = [x.strip() for x in args.labels.split(",") if x.strip()]
        path = build_tiny_classifier(
            args.out_dir,
            args.family,
            labels=labels,
            seed=args.seed,
            num_layers=args.num_layers,
            hidden_size=args.hidden_size,
            max_position_embeddings=args.max_position_embeddings,
        )
    else:
        path = build_lora_adapter(args.base_dir, args.out_dir, seed=args.seed, r=args.r)
    print(Path(path).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark models: real architectures from configs, random weights, saved like a real model.

Why random weights: no model hub is reachable, and throughput does not depend on the values.
Why save_pretrained (safetensors + tokenizer files): every method then loads the model the way
a user's model folder would be loaded, start-up cost included. All models share the corpus's
WordPiece tokenizer (corpus.train_tokenizer), so every model sees the same token counts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from corpus import LABELS, MAX_TOKENS

BERT_VOCAB = 16_000
SPECS = {
    # The CPU target: small enough for 20,000 rows on 2 cores in minutes.
    "bert-tiny-bench": dict(kind="bert", num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024),
    # Scale runs (bench/scale.py): 1 layer, 32 wide, so that 10M rows score in minutes and what is
    # measured is the flow process around the model.
    "bert-1x32": dict(kind="bert", num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64),
    "bert-base": dict(kind="bert", num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    # Qwen2-0.5B's shapes. vocab_size keeps the real 151,936 rows (memory as in the real model);
    # the tokenizer uses only the first 16,000, which changes no per-token compute.
    "qwen2-0.5b-like": dict(
        kind="qwen2",
        num_hidden_layers=24,
        hidden_size=896,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151_936,
        max_position_embeddings=32_768,
        tie_word_embeddings=True,
    ),
}


def _config(name: str):
    from transformers import BertConfig, Qwen2Config

    spec = dict(SPECS[name])
    kind = spec.pop("kind")
    labels = dict(id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
    if kind == "bert":
        return BertConfig(vocab_size=BERT_VOCAB, max_position_embeddings=MAX_TOKENS, pad_token_id=0, **labels, **spec)
    # Sequence classification on a decoder reads the last non-pad token: pad_token_id is required.
    return Qwen2Config(pad_token_id=0, bos_token_id=2, eos_token_id=3, **labels, **spec)


def build_model(name: str, out_dir: str | Path, tokenizer_json: str | Path, seed: int = 0) -> Path:
    """Build `name` with random weights into `out_dir` (cached: an existing folder is reused)."""
    import torch
    from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    if (out_dir / "config.json").exists() and (out_dir / "tokenizer.json").exists():
        return out_dir
    torch.manual_seed(seed)
    config = _config(name)
    model = AutoModelForSequenceClassification.from_config(config)
    if config.model_type == "qwen2":
        model = model.to(torch.bfloat16)  # shipped in bf16, like the real one (1 GB, not 2)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_json),
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=MAX_TOKENS,
    )
    tok.save_pretrained(tmp)
    # "PreTrainedTokenizerFast" loads under transformers 4.x and 5.x alike ("TokenizersBackend",
    # which 5.x writes, does not exist in 4.x).
    cfg_path = tmp / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2))
    tmp.replace(out_dir)
    return out_dir


if __name__ == "__main__":
    import argparse

    import corpus

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SPECS), default="bert-tiny-bench")
    ap.add_argument("--work", default=str(Path(__file__).parent / ".work"))
    a = ap.parse_args()
    tj = corpus.train_tokenizer(Path(a.work) / "tokenizer.json")
    print(build_model(a.model, Path(a.work) / "models" / a.model, tj))

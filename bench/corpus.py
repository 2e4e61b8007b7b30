"""Deterministic benchmark corpus: synthetic text with controlled token lengths.

Why synthetic: no data set can be downloaded here, and a benchmark must give the same rows on
every machine. Why controlled lengths: throughput of padded scoring depends almost entirely on
the length distribution, so we fix it: token lengths (as the model sees them, [CLS] and [SEP]
included, under the WordPiece tokenizer trained below) are log-normal with median 90 and mean
about 120, capped at 512.

How: a fixed list of pseudo-words (syllable strings) with Zipf frequencies; a WordPiece
tokenizer is trained on that list; each row draws a target length, then words until the
target is met exactly (single-piece words fill the remainder). Row i is drawn from its own
seeded generator, so a corpus of N rows is a prefix of any larger one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20261129
MEDIAN_TOKENS = 90
SIGMA = 0.77  # log-normal shape: mean ~120 after the cap (uncapped exp(s^2/2) * 90 = 121)
MAX_TOKENS = 512
MIN_TOKENS = 4
LABELS = ["negative", "neutral", "positive"]
LABEL_WEIGHTS = [0.3, 0.4, 0.3]
N_WORDS = 30_000
VOCAB_SIZE = 16_000
ZIPF_S = 1.07

_ONSETS = [
    "",
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "ch",
    "dr",
    "fl",
    "gr",
    "pl",
    "sh",
    "st",
    "th",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "nd", "st"]


def word_list() -> tuple[list[str], np.ndarray]:
    """The fixed vocabulary of pseudo-words, most frequent first, and their Zipf probabilities."""
    rng = np.random.default_rng(SEED)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < N_WORDS:
        n_syllables = int(rng.choice([1, 2, 3, 4], p=[0.25, 0.4, 0.25, 0.1]))
        w = "".join(
            _ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(n_syllables)
        )
        if len(w) >= 2 and w not in seen:
            seen.add(w)
            words.append(w)
    p = 1.0 / np.arange(1, N_WORDS + 1) ** ZIPF_S
    return words, p / p.sum()


def train_tokenizer(path: str | Path) -> Path:
    """Train the WordPiece tokenizer on the word list (weighted by frequency); write tokenizer.json.

    Cached: an existing file is reused, so the corpus and every model share one tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    path = Path(path)
    if path.exists():
        return path
    words, p = word_list()
    counts = np.maximum(1, np.round(p * 3_000_000)).astype(int)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=specials, initial_alphabet=list("abcdefghijklmnopqrstuvwxyz.")
    )
    # One line per word, the word repeated by its frequency: the trainer only counts words.
    lines = ((w + " ") * int(c) for w, c in zip(words, counts))
    tok.train_from_iterator(lines, trainer=trainer)
    # The trainer breaks frequency ties in hash order: same vocabulary, different ids from run to
    # run. Renumber (specials first, then sorted) so every machine gets the same token ids.
    learned = tok.get_vocab()
    ordered = specials + sorted(t for t in learned if t not in specials)
    tok.model = models.WordPiece({t: i for i, t in enumerate(ordered)}, unk_token="[UNK]", max_input_chars_per_word=100)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return path


def _row(
    i: int, words: list[str], cdf: np.ndarray, pieces: np.ndarray, singles: np.ndarray, singles_cdf: np.ndarray
) -> tuple[str, str, int]:
    """Row i: (text, label, target token length incl. [CLS]/[SEP]), from its own generator.

    Words are drawn by inverse CDF (searchsorted) rather than rng.choice(p=...), which would
    rebuild the 30,000-entry CDF on every call.
    """
    rng = np.random.default_rng([SEED, i])
    target = int(np.clip(round(rng.lognormal(math.log(MEDIAN_TOKENS), SIGMA)), MIN_TOKENS, MAX_TOKENS))
    need = target - 3  # [CLS], [SEP] and the final "."
    picks = np.searchsorted(cdf, rng.random(need), side="right")
    cum = np.cumsum(pieces[picks])
    k = int(np.searchsorted(cum, need, side="right"))
    rest = need - (int(cum[k - 1]) if k else 0)
    fill = singles[np.searchsorted(singles_cdf, rng.random(rest), side="right")]
    label = LABELS[int(np.searchsorted(np.cumsum(LABEL_WEIGHTS), rng.random(), side="right"))]
    return " ".join([words[j] for j in picks[:k]] + [words[j] for j in fill] + ["."]), label, target


def make_corpus(path: str | Path, rows: int, tokenizer_path: str | Path) -> dict:
    """Write `rows` rows (text, label) to Parquet at `path`; return and store its statistics.

    The sidecar `<path>.json` holds the token-length statistics (checked against the real
    tokenizer, not assumed) so methods that report no token counts can still be given them.
    """
    from tokenizers import Tokenizer

    path, meta_path = Path(path), Path(str(path) + ".json")
    if path.exists() and meta_path.exists() and Path(str(path) + ".lengths.npy").exists():
        return json.loads(meta_path.read_text())
    tok = Tokenizer.from_file(str(tokenizer_path))
    words, p = word_list()
    pieces = np.array([len(e.ids) for e in tok.encode_batch(words, add_special_tokens=False)])
    singles = np.flatnonzero(pieces == 1)
    cdf = np.minimum(np.cumsum(p), 1.0)
    cdf[-1] = 1.0
    singles_cdf = np.cumsum(p[singles]) / p[singles].sum()
    singles_cdf[-1] = 1.0
    texts, labels, targets = [], [], []
    for i in range(rows):
        t, lab, n = _row(i, words, cdf, pieces, singles, singles_cdf)
        texts.append(t), labels.append(lab), targets.append(n)
    lengths = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    if not np.array_equal(lengths, np.array(targets)):
        bad = int(np.flatnonzero(lengths != np.array(targets))[0])
        raise RuntimeError(f"row {bad}: {lengths[bad]} tokens, wanted {targets[bad]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.table({"text": texts, "label": labels}), tmp, row_group_size=10_000)
    tmp.replace(path)
    meta = {
        "rows": rows,
        "useful_tokens": int(lengths.sum()),
        "mean_tokens": float(lengths.mean()),
        "median_tokens": float(np.median(lengths)),
        "max_tokens": int(lengths.max()),
        "p99_tokens": float(np.percentile(lengths, 99)),
        "seed": SEED,
        "sigma": SIGMA,
        "pieces_per_word": float((pieces * p).sum()),
    }
    np.save(str(path) + ".lengths.npy", lengths.astype(np.int16))
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def repeat_corpus(src: str | Path, dst: str | Path, rows: int, row_group_rows: int = 10_000) -> dict:
    """Write `rows` rows to `dst` by cycling the rows of `src`, one row group at a time.

    For the memory check (2,000,000 rows): only the source and one row group are ever in memory.
    Token statistics come from the source's per-row lengths, not from tokenizing again.
    """
    src, dst, meta_path = Path(src), Path(dst), Path(str(dst) + ".json")
    if dst.exists() and meta_path.exists():
        return json.loads(meta_path.read_text())
    table = pq.read_table(src)
    n = table.num_rows
    tmp = dst.with_suffix(".tmp")
    written = 0
    with pq.ParquetWriter(tmp, table.schema) as writer:
        while written < rows:
            start = written % n
            take = min(row_group_rows, rows - written, n - start)
            writer.write_table(table.slice(start, take), row_group_size=row_group_rows)
            written += take
    tmp.replace(dst)
    lengths = np.load(str(src) + ".lengths.npy")
    full, part = divmod(rows, n)
    useful = full * int(lengths.sum()) + int(lengths[:part].sum())
    meta = dict(json.loads(Path(str(src) + ".json").read_text()), rows=rows, useful_tokens=useful, repeated_from=str(src))
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def read_texts(path: str | Path, rows: int | None = None) -> list[str]:
    """The text column as a Python list (what a notebook would do)."""
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    return texts if rows is None else texts[:rows]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--work", default=str(Path(__file__).parent / ".work"))
    a = ap.parse_args()
    tp = train_tokenizer(Path(a.work) / "tokenizer.json")
    print(json.dumps(make_corpus(Path(a.work) / f"corpus-{a.rows}.parquet", a.rows, tp), indent=1))

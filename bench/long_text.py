"""What chunking costs: the worker's scoring path (bench/step.py's functions, in one process) in
truncate and chunk mode, ratios measured in one run.

    .venv/bin/python bench/long_text.py [--rows 1200] [--repeats 3] [--max-length 128] [--json OUT]

Two corpora of the bench's pseudo-words (bench/corpus.py), tokenised by the bench tokenizer:
`short`, every row within the window (L uniform in [W/3, W]), and `long`, every row 4 to 8
windows long, with as many content tokens in all. On bert-tiny-bench (bench/models.py), ranges of
512 rows, the CPU's token budget:

- `chunk_vs_truncate_short`: rows/s of chunk mode over rows/s of truncate mode on `short` (no row
  is over the window, so the two score the same inputs: the target is within 3%, a ratio >= 0.97);
- `chunk_long_vs_truncate_short`: scored tokens/s (model input tokens, special tokens included) of
  chunk mode on `long` over truncate mode's on `short` (windows batch as rows do: target >= 0.90).

The modes run interleaved (truncate short, chunk short, chunk long, repeated); each figure is given
as the median and the best of its repeats (on a shared machine a busy minute slows one pass, and
the best pass is the least disturbed). Beside them, the time to turn each corpus into model inputs:
the tokenizer's own truncation (what truncate mode did before windows) against windows.py's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import corpus  # noqa: E402
import models  # noqa: E402

RANGE_ROWS = 512


def texts_of_lengths(tokenizer, lengths: np.ndarray, seed: int) -> list[str]:
    """Texts of the bench's words, each cut to its target number of content tokens."""
    words, p = corpus.word_list()
    rng = np.random.default_rng(seed)
    texts = []
    for n in lengths:
        draft = " ".join(words[j] for j in rng.choice(len(words), size=int(n), p=p))
        ids = tokenizer(draft, add_special_tokens=False)["input_ids"][: int(n)]
        texts.append(tokenizer.decode(ids))
    return texts


def ranges_of(texts: list[str]):
    from scorekeeper.run_folder import IndexRange

    for k, start in enumerate(range(0, len(texts), RANGE_ROWS)):
        chunk = texts[start : start + RANGE_ROWS]
        index = pa.array(np.arange(start, start + len(chunk), dtype=np.int64))
        yield IndexRange(k, start, start + len(chunk)), pa.table({"text": chunk, "row_index": index, "id": index})


def score(loaded, texts: list[str], mode: str, budget: int) -> dict:
    """One pass of the worker's replica path over `texts` in `mode`: seconds, rows, scored tokens."""
    import torch

    from scorekeeper.worker.replica import prepare_range, scored_ranges

    loaded.use_long_text(SimpleNamespace(long_text=mode, head_tokens=128, chunk_overlap=0, chunk_aggregate="mean", max_chunks=64))
    began = time.perf_counter()
    rows = tokens = windows = 0
    prepared = (prepare_range(r, table, loaded, budget, 1024, pin=False) for r, table in ranges_of(texts))
    for p, _ in scored_ranges(prepared, loaded, torch.device("cpu")):
        rows += p.range.rows
        tokens += p.useful_tokens
        windows += int(p.rows_lengths.chunks.sum())
    seconds = time.perf_counter() - began
    return {
        "seconds": seconds,
        "rows": rows,
        "tokens": tokens,
        "windows": windows,
        "rows_per_s": rows / seconds,
        "tokens_per_s": tokens / seconds,
    }


def tokenisation(loaded, corpora: dict[str, list[str]], max_length: int, repeats: int) -> dict[str, dict[str, float]]:
    """Seconds to turn each corpus into model inputs (best of `repeats`): the tokenizer's own
    truncation (batching.encode, what truncate mode was before windows) against windows.py's truncate
    and chunk inputs."""
    from scorekeeper.worker.batching import encode
    from scorekeeper.worker.windows import WindowSettings, encode_windows

    frame, window = loaded.frame, max_length - loaded.frame.specials
    ways = {
        "tokenizer_truncation": lambda texts: encode(loaded.tokenizer, texts, None, max_length, loaded.uses_token_type_ids),
        "truncate": lambda texts: encode_windows(
            loaded.tokenizer, texts, frame, WindowSettings("truncate", window), max_length, loaded.uses_token_type_ids
        ),
        "chunk": lambda texts: encode_windows(
            loaded.tokenizer, texts, frame, WindowSettings("chunk", window), max_length, loaded.uses_token_type_ids
        ),
    }
    out: dict[str, dict[str, float]] = {}
    for name, texts in corpora.items():
        out[name] = {}
        for way, run in ways.items():
            times = []
            for _ in range(repeats):
                began = time.perf_counter()
                run(texts)
                times.append(time.perf_counter() - began)
            out[name][way] = min(times)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/long_text.py", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1200, help="rows of the short corpus (the long one has as many content tokens)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--work", default=str(BENCH / ".work"))
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)

    import torch

    from scorekeeper.worker.device import default_tokens_per_batch, tune_allocator
    from scorekeeper.worker.model import load_model

    tune_allocator()
    work = Path(a.work)
    folder = models.build_model("bert-tiny-bench", work / "models" / "bert-tiny-bench", corpus.train_tokenizer(work / "tokenizer.json"))
    device = torch.device("cpu")
    loaded = load_model(
        str(folder), None, merge_adapter=False, dtype=torch.float32, device=device, trust_remote_code=False, max_length=a.max_length
    )
    assert loaded.frame is not None, "the bench tokenizer frames a text as [CLS] ... [SEP]"
    window = a.max_length - loaded.frame.specials
    rng = np.random.default_rng(7)
    short_lengths = rng.integers(window // 3, window + 1, size=a.rows)
    long_lengths = rng.integers(4 * window, 8 * window + 1, size=max(1, int(short_lengths.sum() // (6 * window))))
    corpora = {
        "short": texts_of_lengths(loaded.tokenizer, short_lengths, 1),
        "long": texts_of_lengths(loaded.tokenizer, long_lengths, 2),
    }
    budget = default_tokens_per_batch(device)
    runs = [("truncate", "short"), ("chunk", "short"), ("chunk", "long")]
    score(loaded, corpora["short"][:RANGE_ROWS], "truncate", budget)  # warm-up: allocator, kernels
    measured: dict[str, list[dict]] = {f"{m}_{c}": [] for m, c in runs}
    for _ in range(a.repeats):
        for mode, name in runs:
            measured[f"{mode}_{name}"].append(score(loaded, corpora[name], mode, budget))
    median = {k: {f: statistics.median(r[f] for r in v) for f in ("rows_per_s", "tokens_per_s")} for k, v in measured.items()}
    best = {k: {f: max(r[f] for r in v) for f in ("rows_per_s", "tokens_per_s")} for k, v in measured.items()}
    tokenising = tokenisation(loaded, corpora, a.max_length, a.repeats)
    figures = {
        "max_length": a.max_length,
        "window": window,
        "rows": {k: v[0]["rows"] for k, v in measured.items()},
        "windows": {k: v[0]["windows"] for k, v in measured.items()},
        "scored_tokens": {k: v[0]["tokens"] for k, v in measured.items()},
        "median": median,
        "best": best,
        "chunk_vs_truncate_short": median["chunk_short"]["rows_per_s"] / median["truncate_short"]["rows_per_s"],
        "chunk_long_vs_truncate_short": median["chunk_long"]["tokens_per_s"] / median["truncate_short"]["tokens_per_s"],
        "best_chunk_vs_truncate_short": best["chunk_short"]["rows_per_s"] / best["truncate_short"]["rows_per_s"],
        "best_chunk_long_vs_truncate_short": best["chunk_long"]["tokens_per_s"] / best["truncate_short"]["tokens_per_s"],
        "tokenisation_s": tokenising,
        "repeats": a.repeats,
        "torch_threads": torch.get_num_threads(),
    }
    print(f"window {window} content tokens (max_length {a.max_length}); medians of {a.repeats} interleaved repeats")
    for key, value in median.items():
        print(
            f"  {key:15s} {figures['rows'][key]:6d} rows {figures['windows'][key]:6d} windows "
            f"{value['rows_per_s']:9.1f} rows/s {value['tokens_per_s']:10.0f} tokens/s"
        )
    print(
        f"chunk vs truncate, no row over the window (rows/s): median {figures['chunk_vs_truncate_short']:.3f}, "
        f"best {figures['best_chunk_vs_truncate_short']:.3f} (target >= 0.97)"
    )
    print(
        f"chunk on long rows vs truncate on short rows (scored tokens/s): median {figures['chunk_long_vs_truncate_short']:.3f}, "
        f"best {figures['best_chunk_long_vs_truncate_short']:.3f} (target >= 0.90)"
    )
    for name, t in tokenising.items():
        print(
            f"tokenising {name}: the tokenizer's own truncation {t['tokenizer_truncation']:.3f} s, "
            f"windows.py truncate {t['truncate']:.3f} s, chunk {t['chunk']:.3f} s (best of {a.repeats})"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

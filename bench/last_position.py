"""What reading a pad-less decoder's head at each row's last position costs (worker/last_position.py).

    python bench/last_position.py [--hidden 256] [--layers 4] [--rows 512] [--repeats 6]

A tiny Llama built from its config (no pad_token_id, as published checkpoints), a third of its
rows ending in eos; one range prepared once, then the replica runner's `scored_ranges` alternately
with the read (the hook on `score` and the pick per batch) and without it (transformers' rule with
eos named the pad: the path before the fix), in one process. The CPU time of every thread of the
process is what is compared (the wall clock of a shared machine says what its other work did), and
the read alone is timed per batch. Encoders and decoders with a pad id of their own get no hook:
nothing of theirs is measured here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scorekeeper.run_folder import IndexRange  # noqa: E402
from scorekeeper.worker.last_position import LastPositionLogits  # noqa: E402
from scorekeeper.worker.model import load_model  # noqa: E402
from scorekeeper.worker.replica import prepare_range, scored_ranges  # noqa: E402
from tests import models as demo  # noqa: E402
from tests.helpers import make_rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=6)
    a = parser.parse_args(argv)
    cpu = torch.device("cpu")
    folder = demo.build_tiny_classifier(tempfile.mkdtemp(), "llama", seed=1, hidden_size=a.hidden, num_layers=a.layers)
    loaded = load_model(str(folder), None, merge_adapter=True, dtype=torch.float32, device=cpu, trust_remote_code=False, max_length=128)
    assert loaded.last_position is not None, "a pad-less decoder gets the read"
    loaded.last_position.remove()
    texts = [r["text"] + (" </s>" if i % 3 == 0 else "") for i, r in enumerate(make_rows(a.rows, seed=3))]
    rows = pa.table({"row_index": pa.array(range(a.rows), pa.int64()), "id": pa.array(range(a.rows)), "text": texts})
    prepared = prepare_range(IndexRange(0, 0, a.rows), rows, loaded, tokens_per_batch=4096, max_batch_rows=64, pin=False)

    def once(with_read: bool) -> float:
        loaded.last_position = LastPositionLogits(loaded.model) if with_read else None
        began = time.process_time()
        list(scored_ranges([prepared], loaded, cpu))
        spent = time.process_time() - began
        if loaded.last_position is not None:
            loaded.last_position.remove()
        return spent

    once(True), once(False)  # warm
    times: dict[bool, list[float]] = {True: [], False: []}
    for k in range(a.repeats):
        for with_read in (True, False) if k % 2 == 0 else (False, True):
            times[with_read].append(once(with_read))
    read = LastPositionLogits(loaded.model)
    mask = prepared.batches[0].attention_mask
    scores = torch.randn(mask.shape[0], mask.shape[1], len(loaded.labels))
    began = time.process_time()
    for _ in range(2000):
        read._keep(None, None, scores)
        read.logits(mask)
    per_batch = (time.process_time() - began) / 2000
    without, with_read = statistics.median(times[False]), statistics.median(times[True])
    result = {
        "batches": len(prepared.batches),
        "useful_tokens": prepared.useful_tokens,
        "threads": torch.get_num_threads(),
        "cpu_s_without": [round(t, 3) for t in times[False]],
        "cpu_s_with": [round(t, 3) for t in times[True]],
        "median_without": round(without, 3),
        "median_with": round(with_read, 3),
        "cost": round(with_read / without - 1, 4),
        "read_per_batch_us": round(per_batch * 1e6, 1),
        "read_share_of_a_batch": round(per_batch / (without / len(prepared.batches)), 6),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

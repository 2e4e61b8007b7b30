"""The GPU path's host-side pieces, run on CPU.

A GPU run prepares the next range in a background thread, runs one batch at a time with the
accelerator's batch size, pins host memory and picks bfloat16 and NCCL: branches no CPU run takes.
SCOREKEEPER_ACCELERATOR_PATH=1 makes a CPU run take the host-side ones (pinning aside: it needs
the accelerator's runtime); the predictions must equal the CPU path's. The device decisions
(dtype, batch size) are pure functions, checked for a CUDA device here too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scorekeeper.errors import ModelError
from scorekeeper.worker.device import ACCELERATOR_PATH_ENV, accelerator_path, default_tokens_per_batch, engine_facts, pin_host_memory
from scorekeeper.worker.model import resolve_dtype
from tests.helpers import make_rows, probabilities, run_flow, write_rows

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_the_path_follows_the_device_unless_forced(monkeypatch):
    monkeypatch.delenv(ACCELERATOR_PATH_ENV, raising=False)
    assert not accelerator_path(CPU) and accelerator_path(CUDA)
    assert default_tokens_per_batch(CPU) == 2048 and default_tokens_per_batch(CUDA) == 131072
    assert engine_facts(CPU, None, "replica").batch_threads == torch.get_num_threads()
    monkeypatch.setenv(ACCELERATOR_PATH_ENV, "1")
    facts = engine_facts(CPU, None, "replica")
    assert facts.accelerator_path and facts.prefetch_thread and facts.batch_threads == 1
    assert facts.tokens_per_batch == 131072
    assert pin_host_memory(CPU) == torch.cuda.is_available()


def test_dtype_auto_is_bfloat16_on_a_gpu_that_supports_it():
    assert resolve_dtype("auto", CUDA, bf16_supported=True) == torch.bfloat16
    assert resolve_dtype("auto", CUDA, bf16_supported=False) == torch.float32
    assert resolve_dtype("auto", CPU, bf16_supported=True) == torch.float32
    assert resolve_dtype("float16", CPU, cpu_flags={"avx512_fp16"}) == torch.float16
    assert resolve_dtype("float16", CUDA) == torch.float16


def test_a_reduced_dtype_the_cpu_only_emulates_is_refused_in_one_line():
    assert resolve_dtype("bfloat16", CPU, cpu_flags={"avx512f", "avx512_bf16"}) == torch.bfloat16
    assert resolve_dtype("bfloat16", CPU, cpu_flags={"amx_bf16"}) == torch.bfloat16
    with pytest.raises(ModelError, match=r"dtype bfloat16 is emulated on this CPU .*amx_bf16, avx512_bf16.*--dtype float32"):
        resolve_dtype("bfloat16", CPU, cpu_flags={"avx512f", "avx2"})
    with pytest.raises(ModelError, match="dtype float16 is emulated"):
        resolve_dtype("float16", CPU, cpu_flags=set())
    assert resolve_dtype("float32", CPU, cpu_flags=set()) == torch.float32


@pytest.mark.integration
def test_the_accelerator_path_on_2_processes_scores_like_the_cpu_path_on_1(tmp_path, models, monkeypatch):
    """One CPU-path run on 1 process is the reference for the forced path on 2 processes (each rank
    prefetching the ranges it claims in its own thread): the forced path's batches differ from it
    anyway (its token budget), and another process count only adds float rounding (about 1e-7) to
    that. The forced path's own facts on 1 process are the first test's (engine_facts)."""
    rows = make_rows(61, seed=11, max_words=40)
    data = write_rows(tmp_path / "data.parquet", rows)
    common = dict(input_uri=str(data), model_uri=models["bert"], id_column="review_id", rows_per_range=16, dtype="float32")

    monkeypatch.delenv(ACCELERATOR_PATH_ENV, raising=False)
    cpu = run_flow(1, output_uri=str(tmp_path / "cpu"), run_name="cpu", **common)
    assert cpu.scoring["engine"]["accelerator_path"] is False
    monkeypatch.setenv(ACCELERATOR_PATH_ENV, "1")
    forced = run_flow(2, output_uri=str(tmp_path / "forced"), run_name="forced", **common)
    assert forced.scoring["engine"]["accelerator_path"] is True and forced.scoring["engine"]["prefetch_thread"] is True
    assert forced.scoring["engine"]["batch_threads"] == 1 and forced.scoring["engine"]["tokens_per_batch"] == 131072
    assert forced.predictions.column("row_index").to_pylist() == list(range(61))
    assert forced.predictions.column("id").to_pylist() == cpu.predictions.column("id").to_pylist()
    np.testing.assert_allclose(probabilities(forced.predictions), probabilities(cpu.predictions), atol=1e-6, rtol=0)
    assert forced.predictions.column("predicted_id").to_pylist() == cpu.predictions.column("predicted_id").to_pylist()

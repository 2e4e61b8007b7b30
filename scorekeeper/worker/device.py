"""How a process feeds its device: facts of the device alone, computed the same way wherever asked.

The runners (replica.py, pipeline.py) decide from these whether ranges are prepared ahead by a
thread, whether host batches are pinned, how many batches run side by side on CPU and how big a
batch is; `engine_facts` records the same decisions in the `started` event.
"""

from __future__ import annotations

import os
import sys

import torch

from scorekeeper.scoring_summary import EngineFacts


def tune_allocator() -> None:
    """Keep tensor-sized blocks in glibc's heap instead of fresh mappings.

    By default glibc serves big allocations with mmap and unmaps them when freed, so each
    activation of each batch lands on new pages that the kernel must fault in and zero: on CPU
    about half of a worker's system time, and 3-5% of its throughput (bench/README.md). Blocks
    up to 32 MiB (a 2,048-token batch's largest activation of a 1,024-wide layer is 8 MiB) now
    come from the heap, and freed memory is kept for the next batch. A no-op without glibc.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 512 << 20)


ACCELERATOR_PATH_ENV = "SCOREKEEPER_ACCELERATOR_PATH"
"""Set to 1 to take the accelerator's host-side path on CPU (a test and debugging switch: the
prefetch thread, one batch at a time, the accelerator's batch size), so that the code a GPU runs
around the model is exercised, and checked against the CPU path, on machines without one."""


def accelerator_path(device: torch.device) -> bool:
    """Whether this process feeds its device the accelerator's way: ranges prepared ahead by a
    thread, one batch at a time, big batches. True on a GPU, or where ACCELERATOR_PATH_ENV asks."""
    return device.type != "cpu" or os.environ.get(ACCELERATOR_PATH_ENV) == "1"


def pin_host_memory(device: torch.device) -> bool:
    """Page-locked host batches, so the copy to the device does not block. Pinning needs the
    accelerator's runtime, so the forced path on CPU leaves it out."""
    return accelerator_path(device) and torch.cuda.is_available()


def cpu_batch_threads(device: torch.device) -> int:
    """Batches run side by side on CPU (by the replica runner): one per core torch would use
    (torch.get_num_threads(), which follows OMP_NUM_THREADS; 1 under a multi-process launch,
    where each rank has one core).

    One batch per core, each on a single intra-op thread, beats one batch at a time spread over
    every core: small ops stop paying a fork/join per core, and a batch's activations stay in its
    core's caches (bench/README.md: about 5% on 2 cores). Each batch is computed exactly as it
    would be alone, so the probabilities do not depend on the thread count.
    """
    return 1 if accelerator_path(device) else torch.get_num_threads()


def engine_facts(device: torch.device, tokens_per_batch: int | None, mode: str) -> EngineFacts:
    """How this process feeds its device, for the run record (and for tests to check the path taken)."""
    pipeline = mode == "pipeline"  # the pipeline runner always prepares ahead, one micro-batch schedule at a time
    return EngineFacts(
        device=str(device),
        accelerator_path=accelerator_path(device),
        prefetch_thread=pipeline or accelerator_path(device),
        pinned_memory=pin_host_memory(device),
        batch_threads=1 if pipeline else cpu_batch_threads(device),
        tokens_per_batch=tokens_per_batch or default_tokens_per_batch(device),
    )


def default_tokens_per_batch(device: torch.device) -> int:
    """Padded tokens per batch. A GPU wants big batches to fill it; on CPU each batch runs on one
    core, and a batch whose activations stay in cache is faster per token than a big one
    (bench/README.md: 2,048 against 16,384 is about 20% faster on 2 cores, for a 256-wide and a
    768-wide BERT alike)."""
    return 131072 if accelerator_path(device) else 2048
